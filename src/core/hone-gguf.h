/* hone-gguf.h — GGUF v2/v3 reader (mmap, zero-copy) and writer.
 *
 * The reader validates everything before handing out pointers: string and
 * array lengths bounded by the file, tensor data inside the data section,
 * sizes consistent with type and shape, no overlapping tensors. Any problem
 * → one GError (HONE_ERROR_FILE_CORRUPT / _FILE_UNSUPPORTED / _UNSUPPORTED_TYPE / _IO)
 * naming what is wrong and where.
 */
#pragma once

#include <glib.h>
#include "hone-progress.h"
#include "hone-tensor.h"

G_BEGIN_DECLS

typedef enum {
  HONE_GGUF_UINT8 = 0, HONE_GGUF_INT8 = 1, HONE_GGUF_UINT16 = 2, HONE_GGUF_INT16 = 3,
  HONE_GGUF_UINT32 = 4, HONE_GGUF_INT32 = 5, HONE_GGUF_FLOAT32 = 6, HONE_GGUF_BOOL = 7,
  HONE_GGUF_STRING = 8, HONE_GGUF_ARRAY = 9, HONE_GGUF_UINT64 = 10, HONE_GGUF_INT64 = 11,
  HONE_GGUF_FLOAT64 = 12,
} HoneGgufType;

typedef struct _HoneGguf HoneGguf;

/* Open and validate; the file stays mapped until the last unref. */
HoneGguf   *hone_gguf_open (const char *path, GError **error);
/* Same over bytes in memory (tests, fuzzing); keeps a ref on @bytes. */
HoneGguf   *hone_gguf_open_bytes (GBytes *bytes, GError **error);
HoneGguf   *hone_gguf_ref (HoneGguf *gguf);
void        hone_gguf_unref (HoneGguf *gguf);
/* The caller is done with these bytes of a tensor (uploaded, repacked): where
 * they lie in the file hone_gguf_open mapped, its whole pages inside them
 * leave the resident memory (hone-file-pages.h); read again, they come back
 * from the file. A no-op for a reader over bytes in memory. */
void        hone_gguf_release_bytes (const HoneGguf *gguf, const void *data, gsize nbytes);

guint32     hone_gguf_version (const HoneGguf *gguf);
gsize       hone_gguf_alignment (const HoneGguf *gguf);
gsize       hone_gguf_file_size (const HoneGguf *gguf);

/* Metadata. Keys are looked up by exact name. */
guint       hone_gguf_n_kv (const HoneGguf *gguf);
const char *hone_gguf_kv_key (const HoneGguf *gguf, guint index);
int         hone_gguf_find_kv (const HoneGguf *gguf, const char *key);   /* -1 if absent */
HoneGgufType hone_gguf_kv_type (const HoneGguf *gguf, guint index);
/* For arrays: element type and count. */
HoneGgufType hone_gguf_kv_array_type (const HoneGguf *gguf, guint index);
guint64     hone_gguf_kv_array_length (const HoneGguf *gguf, guint index);

/* Typed getters: FALSE if the key is absent or not convertible without loss
 * (any integer type that fits; f32/f64 for floats; bool). */
gboolean    hone_gguf_get_u32 (const HoneGguf *gguf, const char *key, guint32 *out);
gboolean    hone_gguf_get_i64 (const HoneGguf *gguf, const char *key, gint64 *out);
gboolean    hone_gguf_get_f32 (const HoneGguf *gguf, const char *key, float *out);
gboolean    hone_gguf_get_bool (const HoneGguf *gguf, const char *key, gboolean *out);
/* String values are not NUL-terminated in the file: returns a pointer into the
 * mapping and its length, or NULL. hone_gguf_dup_string returns a NUL-terminated copy. */
const char *hone_gguf_get_string (const HoneGguf *gguf, const char *key, gsize *length);
char       *hone_gguf_dup_string (const HoneGguf *gguf, const char *key);
/* A string value as text to show (a model's name, its tokenizer's kind): a
 * copy up to a NUL it may hold, of at most @max_bytes (-1: all), a character
 * the cut splits replaced by U+FFFD. (The reader refuses files whose strings
 * are not UTF-8.) NULL when there is no such string. */
char       *hone_gguf_dup_text (const HoneGguf *gguf, const char *key, gssize max_bytes);
/* Arrays of numbers: pointer to the packed little-endian elements (unaligned
 * access: read with memcpy), count and element type. NULL if absent / not an array.
 * For arrays of strings or of arrays the pointer is the raw (validated) encoding:
 * check elem_type; use hone_gguf_get_array_string for strings. */
const void *hone_gguf_get_array (const HoneGguf *gguf, const char *key, HoneGgufType *elem_type, guint64 *n);
/* Arrays of strings: element i (pointer into the mapping + length), O(1). */
const char *hone_gguf_get_array_string (const HoneGguf *gguf, const char *key, guint64 i, gsize *length);

/* Tensors, in file order. The HoneTensor's name and data point into the mapping
 * (name NUL-terminated copy owned by the HoneGguf). */
guint       hone_gguf_n_tensors (const HoneGguf *gguf);
const HoneTensor *hone_gguf_tensor (const HoneGguf *gguf, guint index);
const HoneTensor *hone_gguf_find_tensor (const HoneGguf *gguf, const char *name);   /* NULL if absent */

/* Writer. Values and tensors are copied (or referenced, see _borrow) until write(). */
typedef struct _HoneGgufWriter HoneGgufWriter;
HoneGgufWriter *hone_gguf_writer_new (void);
void        hone_gguf_writer_free (HoneGgufWriter *writer);
void        hone_gguf_writer_set_alignment (HoneGgufWriter *writer, gsize alignment);
void        hone_gguf_writer_add_u8 (HoneGgufWriter *writer, const char *key, guint8 value);
void        hone_gguf_writer_add_i8 (HoneGgufWriter *writer, const char *key, gint8 value);
void        hone_gguf_writer_add_u16 (HoneGgufWriter *writer, const char *key, guint16 value);
void        hone_gguf_writer_add_i16 (HoneGgufWriter *writer, const char *key, gint16 value);
void        hone_gguf_writer_add_u32 (HoneGgufWriter *writer, const char *key, guint32 value);
void        hone_gguf_writer_add_i32 (HoneGgufWriter *writer, const char *key, gint32 value);
void        hone_gguf_writer_add_u64 (HoneGgufWriter *writer, const char *key, guint64 value);
void        hone_gguf_writer_add_i64 (HoneGgufWriter *writer, const char *key, gint64 value);
void        hone_gguf_writer_add_f32 (HoneGgufWriter *writer, const char *key, float value);
void        hone_gguf_writer_add_f64 (HoneGgufWriter *writer, const char *key, double value);
void        hone_gguf_writer_add_bool (HoneGgufWriter *writer, const char *key, gboolean value);
void        hone_gguf_writer_add_string (HoneGgufWriter *writer, const char *key, const char *value, gssize length);
/* elem_type a numeric type; data packed little-endian, n elements. */
void        hone_gguf_writer_add_array (HoneGgufWriter *writer, const char *key, HoneGgufType elem_type, const void *data, guint64 n);
void        hone_gguf_writer_add_string_array (HoneGgufWriter *writer, const char *key, const char *const *strings, const gsize *lengths /* NULL: NUL-terminated */, guint64 n);
/* Copy a metadata entry (any type) from a reader, e.g. when re-writing a model. */
void        hone_gguf_writer_copy_kv (HoneGgufWriter *writer, const HoneGguf *from, guint index);
/* ne innermost-first. Data copied; nbytes must equal the type/shape size. */
gboolean    hone_gguf_writer_add_tensor (HoneGgufWriter *writer, const char *name, HoneDType type,
                                         int n_dims, const int64_t *ne, const void *data, gsize nbytes, GError **error);
/* Additive: like add_tensor but keeps a reference on @data instead of copying
 * (large models: wrap a mapping or a buffer with g_bytes_new_with_free_func). */
gboolean    hone_gguf_writer_add_tensor_bytes (HoneGgufWriter *writer, const char *name, HoneDType type,
                                               int n_dims, const int64_t *ne, GBytes *data, GError **error);
/* Write atomically (temp file in the same folder, fsync, rename). version 3 unless set. */
/* A tensor made only when the file is written (hone-tensor.h's
 * HoneTensorFillFunc), one at a time, in pieces of whole rows into a buffer
 * freed right after; a fill that fails fails the write with its error and
 * leaves no file. The writer owns @fill_data (@fill_destroy may be NULL),
 * also when it refuses the tensor. */
gboolean    hone_gguf_writer_add_tensor_deferred (HoneGgufWriter *writer, const char *name, HoneDType type,
                                                  int n_dims, const int64_t *ne, gsize nbytes,
                                                  HoneTensorFillFunc fill, gpointer fill_data,
                                                  GDestroyNotify fill_destroy, GError **error);
void        hone_gguf_writer_set_version (HoneGgufWriter *writer, guint32 version);
/* The most bytes a deferred tensor is made in at a time (whole rows, at least
 * one; 0: HONE_TENSOR_FILL_PIECE, the default). */
void        hone_gguf_writer_set_fill_piece (HoneGgufWriter *writer, gsize max_bytes);
/* Reported while the tensors' bytes are written (to a file or to bytes): the
 * fraction of them written, after each tensor or piece; 1 when all are. */
void        hone_gguf_writer_set_progress (HoneGgufWriter *writer, HoneProgressFunc progress, gpointer progress_data);
gboolean    hone_gguf_writer_write (HoneGgufWriter *writer, const char *path, GError **error);
GBytes     *hone_gguf_writer_to_bytes (HoneGgufWriter *writer, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneGguf, hone_gguf_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneGgufWriter, hone_gguf_writer_free)

G_END_DECLS
