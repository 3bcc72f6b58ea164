/* hone-tensor.h — a view of one stored tensor (weights stay where they are stored). */
#pragma once

#include "hone-dtype.h"

G_BEGIN_DECLS

#define HONE_TENSOR_MAX_DIMS 4

/* ne[] is innermost-first, as in GGUF: for a weight matrix used as y = W·x,
 * ne[0] is the input features (the row length, along which blocks run) and
 * ne[1] the output features (the number of rows). A safetensors [out, in]
 * tensor maps to ne = {in, out}. Rows are contiguous, row stride is
 * hone_dtype_row_bytes (type, ne[0]). */
typedef struct {
  const char *name;       /* owned by whoever owns the backing file */
  HoneDType type;
  int n_dims;
  int64_t ne[HONE_TENSOR_MAX_DIMS];
  const void *data;       /* NULL: tensor absent (optional weights) */
  size_t nbytes;
} HoneTensor;

/* Writes bytes [@offset, @offset + @nbytes) of a tensor into @buf when a
 * writer (GGUF, safetensors) reaches them — a deferred tensor, made only when
 * the file is written — or returns FALSE with @error set (cancelled, …),
 * which fails the write. A writer makes a tensor in pieces of whole rows
 * (hone_tensor_fill_piece), first to last, so that it never holds more than
 * one piece of it: an 8B model's f16 lm_head is 1 GB. */
typedef gboolean (*HoneTensorFillFunc) (gpointer fill_data, void *buf, gsize offset, gsize nbytes, GError **error);

/* The most bytes a writer makes a deferred tensor in at a time, unless set
 * otherwise on the writer. */
#define HONE_TENSOR_FILL_PIECE ((gsize) 32 << 20)

/* The bytes of one fill piece of a tensor of @nbytes with @n_dims / @ne
 * (innermost first): as many whole rows (ne[0] elements; a tensor of fewer
 * than two dims is one row) as fit in @max, at least one, at most all. */
static inline gsize
hone_tensor_fill_piece (int n_dims, const int64_t *ne, gsize nbytes, gsize max)
{
  gsize rows = 1, row_bytes;
  for (int d = 1; d < n_dims; d++)
    rows *= (gsize) ne[d];
  if (rows == 0 || nbytes % rows != 0)
    return nbytes;
  row_bytes = nbytes / rows;
  if (row_bytes == 0 || row_bytes >= max)
    return MIN (row_bytes, nbytes);
  return MIN (max / row_bytes * row_bytes, nbytes);
}

static inline gboolean
hone_tensor_present (const HoneTensor *t)
{
  return t != NULL && t->data != NULL;
}

static inline int64_t
hone_tensor_n_elements (const HoneTensor *t)
{
  int64_t n = 1;
  for (int i = 0; i < t->n_dims; i++)
    n *= t->ne[i];
  return n;
}

static inline size_t
hone_tensor_row_bytes (const HoneTensor *t)
{
  return hone_dtype_row_bytes (t->type, t->ne[0]);
}

static inline const void *
hone_tensor_row (const HoneTensor *t, int64_t row)
{
  return (const char *) t->data + (size_t) row * hone_tensor_row_bytes (t);
}

G_END_DECLS
