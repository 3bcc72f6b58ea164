/* hone-awq-load.h — run AWQ "GEMM" checkpoints: read quantization_config and
 * repack each quantized linear into HONE_DTYPE_Q4Z rows at load.
 *
 * An AutoAWQ GEMM linear of K inputs and N outputs, group size g, is stored as
 *   qweight int32 [K, N/8]    nibble i of word c of row k: column 8c + {0,2,4,6,1,3,5,7}[i]
 *   qzeros  int32 [K/g, N/8]  the same packing, zero points stored raw (0..15)
 *   scales  fp16  [K/g, N]
 * and means w[n][k] = (q − z)·s. Hone runs it as Q4Z (hone-dtype.h): row n,
 * block k/32 holds the 32 q of that block with the (s, z) of its group, so the
 * values are exactly the same (q, z and s are copied, nothing is rounded).
 *
 * Refused with one clear error: bits other than 4, group sizes other than
 * 32/64/128 or not dividing K, zero_point false, versions other than "gemm"
 * (GEMV, Marlin, ExLlama, IPEX layouts are named), other quant_methods
 * (GPTQ, …), missing or mis-shaped tensors, scales that are not fp16 or not
 * finite. Zero points cannot be out of range: a nibble is always 0..15.
 */
#pragma once

#include <glib.h>
#include "hone-dtype.h"
#include "hone-tensor.h"

G_BEGIN_DECLS

typedef struct _HoneSafetensors HoneSafetensors;

/* The AWQ group size of a HF folder: from config.json's quantization_config
 * (@config_json, its text) or, for older AutoAWQ exports without it, from
 * quant_config.json in @dir. *group_size = 0 when neither names a
 * quantization (a plain model). A quantization Hone cannot run → FALSE with
 * HONE_ERROR_FILE_UNSUPPORTED naming what is unsupported. */
gboolean hone_awq_load_config (const char *dir, const char *config_json, gssize length, int *group_size,
                               GError **error);

/* One AWQ linear of a checkpoint, checked but not repacked: the three
 * tensors' views (in @st's mapping), K inputs, N outputs, the group size. */
typedef struct {
  const HoneSafetensors *st;
  const HoneTensor *qweight, *qzeros, *scales;
  int64_t K, N;
  int group_size;
} HoneAwqSource;

/* Find and check <prefix>.qweight/.qzeros/.scales of @st for a linear of @K
 * inputs and @N outputs (shapes, types, finite scales) — the errors
 * hone_awq_load_linear gives — and describe it in @src. Nothing is copied. */
gboolean hone_awq_source_find (const HoneSafetensors *st, const char *prefix, int64_t K, int64_t N, int group_size,
                               HoneAwqSource *src, GError **error);
/* Bytes of its whole Q4Z form (N rows of K/32 blocks). */
gsize    hone_awq_source_q4z_bytes (const HoneAwqSource *src);
/* Q4Z rows [@row0, @row0 + @n) into @out (@n rows of K/32 blocks): the
 * same bytes as those rows of hone_awq_load_linear's buffer. Any range. */
void     hone_awq_source_rows (const HoneAwqSource *src, int64_t row0, int64_t n, HoneBlockQ4Z *out);
/* Let the checkpoint's pages of the three tensors leave resident memory
 * (hone_safetensors_release_tensor); read again, they come back. */
void     hone_awq_source_release (const HoneAwqSource *src);
/* @dst = a Q4Z tensor of @src's shape named @name at @data (NULL: not made). */
void     hone_awq_source_view (const HoneAwqSource *src, const char *name, const void *data, HoneTensor *dst);

/* Repack <prefix>.qweight/.qzeros/.scales of @st (a linear of @K inputs and
 * @N outputs) into Q4Z. On success returns the new buffer (N rows of K/32
 * blocks, free with g_free) and fills @dst as a view of it (type Q4Z,
 * ne = {K, N}, name @name — the caller keeps @name alive). */
void    *hone_awq_load_linear (const HoneSafetensors *st, const char *prefix, const char *name,
                               int64_t K, int64_t N, int group_size, HoneTensor *dst, GError **error);

/* The repack itself on raw little-endian arrays (shapes as above). Exact. */
void     hone_awq_repack_q4z (const void *qweight, const void *qzeros, const void *scales,
                              int64_t K, int64_t N, int group_size, HoneBlockQ4Z *out);

G_END_DECLS
