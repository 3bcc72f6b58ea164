/* hone-safetensors.h — HF safetensors reader (mmap, zero-copy) and writer.
 *
 * File layout: u64 little-endian header length N, N bytes of JSON
 *   { "__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [out, in],
 *     "data_offsets": [begin, end]}, … }
 * then the data section; offsets are relative to its start (8 + N).
 *
 * The reader validates the whole header before handing out pointers: length
 * bounded (≤ file size, ≤ 100 MB), JSON well formed, dtype known, shape
 * non-negative, offsets inside the data section, end − begin equal to the
 * shape's byte size, no two tensors overlapping. A sharded model
 * (model.safetensors.index.json with a "weight_map") is opened as one object.
 * Any problem → one GError (HONE_ERROR_FILE_CORRUPT / _INVALID_JSON /
 * _UNSUPPORTED_TYPE / _IO) naming the file and the tensor.
 *
 * Tensors come out as HoneTensor views with ne innermost-first: a safetensors
 * shape [out, in] gives ne = {in, out}. Types: F32, F16, BF16, F64, I64, I32,
 * I16, I8 and U8 (U8 is reported as HONE_DTYPE_I8, same size; the stored name
 * is available from hone_safetensors_tensor_dtype_name()). BOOL, U16/U32/U64
 * and F8 types are refused with HONE_ERROR_UNSUPPORTED_TYPE.
 */
#pragma once

#include <glib.h>
#include "hone-progress.h"
#include "hone-tensor.h"

G_BEGIN_DECLS

#define HONE_SAFETENSORS_MAX_HEADER (100u * 1024u * 1024u)

typedef struct _HoneSafetensors HoneSafetensors;

/* @path: a .safetensors file, a model.safetensors.index.json, or a folder
 * holding either (index first, then model.safetensors, then the only
 * *.safetensors file). The files stay mapped until the last unref. */
HoneSafetensors *hone_safetensors_open (const char *path, GError **error);
/* One file's bytes in memory (tests, fuzzing); keeps a ref on @bytes. */
HoneSafetensors *hone_safetensors_open_bytes (GBytes *bytes, GError **error);
HoneSafetensors *hone_safetensors_ref (HoneSafetensors *st);
void             hone_safetensors_unref (HoneSafetensors *st);

/* Tensors sorted by name (views stay valid while @st lives). */
guint             hone_safetensors_n_tensors (const HoneSafetensors *st);
const HoneTensor *hone_safetensors_tensor (const HoneSafetensors *st, guint index);
const HoneTensor *hone_safetensors_find_tensor (const HoneSafetensors *st, const char *name);
/* The dtype string as stored ("U8", "BF16", …). */
const char       *hone_safetensors_tensor_dtype_name (const HoneSafetensors *st, guint index);

/* The caller is done with @t's bytes (repacked into memory of its own):
 * where they are a file's mapping, the whole pages inside them leave this
 * process's resident memory (madvise MADV_DONTNEED; read again, they come
 * back from the file). In-memory buffers and aligned copies are left alone. */
void              hone_safetensors_release_tensor (const HoneSafetensors *st, const HoneTensor *t);
/* The same for any byte range of a tensor (a chunk already uploaded): a no-op
 * unless [data, data + nbytes) lies inside one of @st's mapped files. */
void              hone_safetensors_release_bytes (const HoneSafetensors *st, const void *data, gsize nbytes);

/* __metadata__ value (of the first shard), or NULL. */
const char *hone_safetensors_get_metadata (const HoneSafetensors *st, const char *key);
guint       hone_safetensors_n_files (const HoneSafetensors *st);
/* Bytes of all files on disk (or of the in-memory buffer). */
gint64      hone_safetensors_total_bytes (const HoneSafetensors *st);

/* Writer. Tensors are copied (or taken, or deferred) until write(). Writes __metadata__
 * {"format": "pt"} plus whatever was added, a header padded with spaces to
 * a multiple of 8, and tensors packed without gaps, widest element type
 * first so that every tensor stays aligned to its element size. */
typedef struct _HoneSafetensorsWriter HoneSafetensorsWriter;
HoneSafetensorsWriter *hone_safetensors_writer_new (void);
void     hone_safetensors_writer_free (HoneSafetensorsWriter *writer);
void     hone_safetensors_writer_add_metadata (HoneSafetensorsWriter *writer, const char *key, const char *value);
/* ne innermost-first (as in HoneTensor); type one of F32, F16, BF16, F64,
 * I64, I32, I16, I8. nbytes must equal the shape's size. */
gboolean hone_safetensors_writer_add_tensor (HoneSafetensorsWriter *writer, const char *name, HoneDType type,
                                             int n_dims, const int64_t *ne, const void *data, gsize nbytes,
                                             GError **error);
/* The same without a copy: the writer takes @data (g_malloc'd), also when it
 * refuses the tensor. */
gboolean hone_safetensors_writer_add_tensor_take (HoneSafetensorsWriter *writer, const char *name, HoneDType type,
                                                  int n_dims, const int64_t *ne, gpointer data, gsize nbytes,
                                                  GError **error);
/* A tensor whose bytes are made only when the file is written (an export
 * never holds the whole file): @fill writes exactly @nbytes into @buf, or
 * returns FALSE with @error set (cancelled, …), which fails the write and
 * leaves no file behind. The writer owns @fill_data (@fill_destroy, may be
 * NULL), also when it refuses the tensor. Deferred tensors are filled one at
 * a time, in pieces of whole rows (hone_tensor_fill_piece) into one buffer
 * freed right after. */
gboolean hone_safetensors_writer_add_tensor_deferred (HoneSafetensorsWriter *writer, const char *name, HoneDType type,
                                                      int n_dims, const int64_t *ne, gsize nbytes,
                                                      HoneTensorFillFunc fill, gpointer fill_data,
                                                      GDestroyNotify fill_destroy, GError **error);
/* The most bytes a deferred tensor is made in at a time (whole rows, at least
 * one; 0: HONE_TENSOR_FILL_PIECE, the default). */
void     hone_safetensors_writer_set_fill_piece (HoneSafetensorsWriter *writer, gsize max_bytes);
/* Reported while the tensors' bytes are written (to a file or to bytes): the
 * fraction of them written, after each tensor or piece; 1 when all are. */
void     hone_safetensors_writer_set_progress (HoneSafetensorsWriter *writer, HoneProgressFunc progress,
                                               gpointer progress_data);
/* NULL with @error set when a deferred tensor fails. */
GBytes  *hone_safetensors_writer_to_bytes (HoneSafetensorsWriter *writer, GError **error);
/* Atomic: temp file in the same folder, fsync, rename over @path. */
gboolean hone_safetensors_writer_write (HoneSafetensorsWriter *writer, const char *path, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneSafetensors, hone_safetensors_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneSafetensorsWriter, hone_safetensors_writer_free)

G_END_DECLS
