/* hone-awq-load.c — AWQ GEMM checkpoints → Q4Z weights (see hone-awq-load.h). */
#include <inttypes.h>
#include "hone-awq-load.h"
#include "hone-backend.h"
#include "hone-error.h"
#include "hone-i18n.h"
#include "hone-json.h"
#include "hone-safetensors.h"

#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#define QCONFIG_MAX_DEPTH 32

/* ---- quantization_config ----------------------------------------------- */

/* An integer member, with a default when absent. */
static gboolean
member_int (JsonObject *o, const char *key, const char *alt, int *out, const char *src, GError **error)
{
  JsonNode *n = json_object_get_member (o, key);

  if ((n == NULL || JSON_NODE_HOLDS_NULL (n)) && alt != NULL)
    n = json_object_get_member (o, alt);
  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return TRUE;
  if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_INT64
      && json_node_get_int (n) >= G_MININT && json_node_get_int (n) <= G_MAXINT)
    {
      *out = (int) json_node_get_int (n);
      return TRUE;
    }
  g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: quantization “%s” must be an integer"), src, key);
  return FALSE;
}

/* A string member, @fallback when absent or null; NULL (and an error) when
 * it is something else. */
static const char *
member_string (JsonObject *o, const char *key, const char *fallback, const char *src, GError **error)
{
  JsonNode *n = json_object_get_member (o, key);

  if (n == NULL || JSON_NODE_HOLDS_NULL (n))
    return fallback;
  if (JSON_NODE_HOLDS_VALUE (n) && json_node_get_value_type (n) == G_TYPE_STRING)
    return json_node_get_string (n);
  g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: quantization “%s” must be a string"), src, key);
  return NULL;
}

/* Check one quantization object (config.json's quantization_config or
 * AutoAWQ's quant_config.json). transformers' AwqConfig defaults fill what
 * is left out: bits 4, group 128, zero point, version gemm. */
static gboolean
check_qconfig (JsonObject *q, const char *src, int *group_size, GError **error)
{
  const char *method, *version;
  JsonNode *zp = json_object_get_member (q, "zero_point");
  int bits = 4, group = 128;

  if ((method = member_string (q, "quant_method", "awq", src, error)) == NULL
      || (version = member_string (q, "version", "gemm", src, error)) == NULL)
    return FALSE;
  if (g_ascii_strcasecmp (method, "awq") != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: quantization method “%s” is not supported (AWQ GEMM checkpoints are)"), src, method);
      return FALSE;
    }
  if (!member_int (q, "bits", "w_bit", &bits, src, error)
      || !member_int (q, "group_size", "q_group_size", &group, src, error))
    return FALSE;
  if (bits != 4)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: AWQ with %d bits is not supported (4 bits is)"), src, bits);
      return FALSE;
    }
  if (group != 32 && group != 64 && group != 128)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: AWQ group size %d is not supported (32, 64 or 128 are)"), src, group);
      return FALSE;
    }
  if (zp != NULL && !JSON_NODE_HOLDS_NULL (zp)
      && !(JSON_NODE_HOLDS_VALUE (zp) && json_node_get_value_type (zp) == G_TYPE_BOOLEAN))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: “zero_point” must be true or false"), src);
      return FALSE;
    }
  if (zp != NULL && JSON_NODE_HOLDS_VALUE (zp) && !json_node_get_boolean (zp))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: AWQ without zero point (zero_point false) is not supported"), src);
      return FALSE;
    }
  if (g_ascii_strcasecmp (version, "gemm") != 0)
    {
      const char *what = g_ascii_strcasecmp (version, "gemv") == 0 ? "GEMV"
                       : g_ascii_strcasecmp (version, "gemv_fast") == 0 ? "GEMV-fast"
                       : g_ascii_strcasecmp (version, "marlin") == 0 ? "Marlin"
                       : g_ascii_strncasecmp (version, "exllama", 7) == 0 ? "ExLlama"
                       : g_ascii_strcasecmp (version, "ipex") == 0 ? "IPEX" : version;
      g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                   _("%s: the AWQ %s layout is not supported (only the GEMM layout, version “gemm”, is)"),
                   src, what);
      return FALSE;
    }
  *group_size = group;
  return TRUE;
}

static JsonObject *
parse_object (JsonParser *parser, const char *text, gsize len, const char *src, GError **error)
{
  g_autoptr(GError) local = NULL;
  JsonNode *root;

  if (!hone_json_load (parser, text, (gssize) len, QCONFIG_MAX_DEPTH, &local)
      || (root = json_parser_get_root (parser)) == NULL || !JSON_NODE_HOLDS_OBJECT (root))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON, _("%s: not a JSON object%s%s"), src,
                   local ? ": " : "", local ? local->message : "");
      return NULL;
    }
  return json_node_get_object (root);
}

gboolean
hone_awq_load_config (const char *dir, const char *config_json, gssize length, int *group_size, GError **error)
{
  g_autoptr(JsonParser) parser = json_parser_new_immutable ();
  gsize len = length < 0 ? strlen (config_json) : (gsize) length;
  JsonObject *o;
  JsonNode *q, *qm;

  *group_size = 0;
  o = parse_object (parser, config_json, len, "config.json", error);
  if (o == NULL)
    return FALSE;
  q = json_object_get_member (o, "quantization_config");
  if (q != NULL && !JSON_NODE_HOLDS_NULL (q))
    {
      if (!JSON_NODE_HOLDS_OBJECT (q))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON,
                       _("config.json: “quantization_config” must be an object"));
          return FALSE;
        }
      qm = json_object_get_member (json_node_get_object (q), "quant_method");
      if (qm == NULL || JSON_NODE_HOLDS_NULL (qm))
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                       _("config.json: “quantization_config” does not name its quant_method"));
          return FALSE;
        }
      return check_qconfig (json_node_get_object (q), "config.json", group_size, error);
    }
  /* Older AutoAWQ exports: quant_config.json beside config.json. */
  if (dir != NULL)
    {
      g_autofree char *path = g_build_filename (dir, "quant_config.json", NULL);
      g_autofree char *text = NULL;
      g_autoptr(JsonParser) qp = json_parser_new_immutable ();
      gsize qlen;
      JsonObject *qo;

      if (!g_file_get_contents (path, &text, &qlen, NULL))
        return TRUE;
      qo = parse_object (qp, text, qlen, "quant_config.json", error);
      return qo != NULL && check_qconfig (qo, "quant_config.json", group_size, error);
    }
  return TRUE;
}

/* ---- repack -------------------------------------------------------------- */

/* Word nibble holding column offset o (0..7) of an AutoAWQ packed word:
 * the inverse of order {0,2,4,6,1,3,5,7}. */
static const int nibble_of_col[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };

static inline guint32
load_u32 (const guint8 *p)
{
  guint32 v;
  memcpy (&v, p, 4);
  return GUINT32_FROM_LE (v);
}

static inline guint16
load_u16 (const guint8 *p)
{
  guint16 v;
  memcpy (&v, p, 2);
  return GUINT16_FROM_LE (v);
}

/* Block columns [kb0, kb1) of output rows [n0, n1) of the repack, into
 * out (row n at out + (n − n0)·K/32). */
static void
repack_range (const guint8 *qw, const guint8 *qz, const guint8 *sc, int64_t K, int64_t N, int group_size,
              HoneBlockQ4Z *out, int64_t n0, int64_t n1, int64_t kb0, int64_t kb1)
{
  const int64_t nw = N / 8, nb = K / 32;

  /* One 32-row slab of qweight at a time (32·N/2 bytes, cache-sized), each
   * word column unpacked into the blocks of its eight output rows. */
  for (int64_t kb = kb0; kb < kb1; kb++)
    {
      const int64_t g = kb * 32 / group_size;
      for (int64_t c = n0 / 8; c < (n1 + 7) / 8; c++)
        {
          guint32 w[32];
          const guint32 zw = load_u32 (qz + 4 * (g * nw + c));
          for (int j = 0; j < 32; j++)
            w[j] = load_u32 (qw + 4 * ((kb * 32 + j) * nw + c));
          for (int o = 0; o < 8; o++)
            {
              const int sh = 4 * nibble_of_col[o];
              const int64_t n = 8 * c + o;
              HoneBlockQ4Z *b = out + (n >= n0 && n < n1 ? (n - n0) * nb + kb : 0);
              if (n < n0 || n >= n1)
                continue;
              b->s = GUINT16_TO_LE (load_u16 (sc + 2 * (g * N + n)));
              b->z = (guint8) ((zw >> sh) & 0x0f);
              b->pad = 0;
              for (int j = 0; j < 16; j++)
                b->qs[j] = (guint8) (((w[j] >> sh) & 0x0f) | (((w[j + 16] >> sh) & 0x0f) << 4));
            }
        }
    }
}

typedef struct {
  const guint8 *qw, *qz, *sc;
  int64_t K, N, n0, n1, kb0, kb1;
  int group_size;
  HoneBlockQ4Z *out;
} RepackJob;

static gpointer
repack_thread (gpointer data)
{
  RepackJob *j = data;
  repack_range (j->qw, j->qz, j->sc, j->K, j->N, j->group_size, j->out, j->n0, j->n1, j->kb0, j->kb1);
  return NULL;
}

/* Rows [n0, n1) of the repack, the block columns split over the cores (each
 * thread writes its own blocks): a large model's linears hold billions of weights. */
static void
repack_rows (const void *qweight, const void *qzeros, const void *scales, int64_t K, int64_t N, int group_size,
             int64_t n0, int64_t n1, HoneBlockQ4Z *out)
{
  const int64_t nb = K / 32;
  int n = (int) CLAMP ((K * (n1 - n0)) >> 18, 1, MIN (16, (int64_t) hone_cpu_backend_default_threads ()));
  RepackJob jobs[16];
  GThread *threads[16] = { NULL };

  if (nb <= 0 || n1 <= n0)
    return;
  n = (int) MIN ((int64_t) n, nb);
  for (int i = 0; i < n; i++)
    {
      jobs[i] = (RepackJob) { qweight, qzeros, scales, K, N, n0, n1, nb * i / n, nb * (i + 1) / n, group_size, out };
      if (i > 0)
        threads[i] = g_thread_try_new ("hone-awq-repack", repack_thread, &jobs[i], NULL);
      if (i > 0 && threads[i] == NULL)
        repack_thread (&jobs[i]);     /* no thread to be had: do it here */
    }
  repack_thread (&jobs[0]);
  for (int i = 1; i < n; i++)
    if (threads[i] != NULL)
      g_thread_join (threads[i]);
}

void
hone_awq_repack_q4z (const void *qweight, const void *qzeros, const void *scales, int64_t K, int64_t N,
                     int group_size, HoneBlockQ4Z *out)
{
  repack_rows (qweight, qzeros, scales, K, N, group_size, 0, N, out);
}

static const HoneTensor *
awq_part (const HoneSafetensors *st, const char *prefix, const char *part, HoneDType type,
          int64_t ne0, int64_t ne1, GError **error)
{
  g_autofree char *name = g_strdup_printf ("%s.%s", prefix, part);
  const HoneTensor *t = hone_safetensors_find_tensor (st, name);

  if (t == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_MISSING_TENSOR, _("AWQ tensor “%s” is missing"), name);
      return NULL;
    }
  if (t->type != type)
    {
      const char *have = hone_dtype_name (t->type);
      g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE,
                   _("AWQ tensor “%s” has type %s but must be %s"), name, have ? have : "?",
                   type == HONE_DTYPE_I32 ? "I32" : "F16");
      return NULL;
    }
  if (t->n_dims != 2 || t->ne[0] != ne0 || t->ne[1] != ne1)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH,
                   _("AWQ tensor “%s” has shape [%" PRId64 ", %" PRId64 "] but the config needs [%" PRId64
                     ", %" PRId64 "]"),
                   name, t->n_dims > 1 ? t->ne[1] : 1, t->ne[0], ne1, ne0);
      return NULL;
    }
  return t;
}

gboolean
hone_awq_source_find (const HoneSafetensors *st, const char *prefix, int64_t K, int64_t N, int group_size,
                      HoneAwqSource *src, GError **error)
{
  const HoneTensor *qw, *qz, *sc;
  int64_t ng;

  g_return_val_if_fail (group_size == 32 || group_size == 64 || group_size == 128, FALSE);
  if (K <= 0 || N <= 0 || K % group_size != 0 || N % 8 != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_SHAPE_MISMATCH,
                   _("%s: a linear of %" PRId64 " inputs and %" PRId64 " outputs cannot hold AWQ group size %d "
                     "(inputs must be a multiple of the group size, outputs of 8)"),
                   prefix, K, N, group_size);
      return FALSE;
    }
  ng = K / group_size;
  if ((qw = awq_part (st, prefix, "qweight", HONE_DTYPE_I32, N / 8, K, error)) == NULL
      || (qz = awq_part (st, prefix, "qzeros", HONE_DTYPE_I32, N / 8, ng, error)) == NULL
      || (sc = awq_part (st, prefix, "scales", HONE_DTYPE_F16, N, ng, error)) == NULL)
    return FALSE;
  /* A scale that is inf or nan would poison every output it touches. */
  for (int64_t i = 0; i < ng * N; i++)
    {
      guint16 h = load_u16 ((const guint8 *) sc->data + 2 * i);
      if ((h & 0x7c00) == 0x7c00)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT,
                       _("AWQ tensor “%s.scales” holds a scale that is not finite (group %" PRId64 ", column %"
                         PRId64 ")"),
                       prefix, i / N, i % N);
          return FALSE;
        }
    }
  *src = (HoneAwqSource) { st, qw, qz, sc, K, N, group_size };
  return TRUE;
}

gsize
hone_awq_source_q4z_bytes (const HoneAwqSource *src)
{
  return (gsize) src->N * (gsize) (src->K / 32) * sizeof (HoneBlockQ4Z);
}

void
hone_awq_source_rows (const HoneAwqSource *src, int64_t row0, int64_t n, HoneBlockQ4Z *out)
{
  g_return_if_fail (row0 >= 0 && n >= 0 && row0 + n <= src->N);
  repack_rows (src->qweight->data, src->qzeros->data, src->scales->data, src->K, src->N, src->group_size, row0,
               row0 + n, out);
}

void
hone_awq_source_release (const HoneAwqSource *src)
{
  hone_safetensors_release_tensor (src->st, src->qweight);
  hone_safetensors_release_tensor (src->st, src->qzeros);
  hone_safetensors_release_tensor (src->st, src->scales);
}

void
hone_awq_source_view (const HoneAwqSource *src, const char *name, const void *data, HoneTensor *dst)
{
  memset (dst, 0, sizeof *dst);
  dst->name = name;
  dst->type = HONE_DTYPE_Q4Z;
  dst->n_dims = 2;
  dst->ne[0] = src->K;
  dst->ne[1] = src->N;
  dst->ne[2] = dst->ne[3] = 1;
  dst->data = data;
  dst->nbytes = hone_awq_source_q4z_bytes (src);
}

void *
hone_awq_load_linear (const HoneSafetensors *st, const char *prefix, const char *name, int64_t K, int64_t N,
                      int group_size, HoneTensor *dst, GError **error)
{
  HoneAwqSource src;
  HoneBlockQ4Z *out;
  gsize nbytes;

  if (!hone_awq_source_find (st, prefix, K, N, group_size, &src, error))
    return NULL;
  nbytes = hone_awq_source_q4z_bytes (&src);
  out = g_try_malloc (nbytes);
  if (out == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY,
                   _("%s: cannot allocate %zu bytes for the int4 weights"), prefix, (size_t) nbytes);
      return NULL;
    }
  hone_awq_source_rows (&src, 0, N, out);
  /* read once: the file's pages need not stay resident beside the repacked copy */
  hone_awq_source_release (&src);
  hone_awq_source_view (&src, name, out, dst);
  return out;
}
