/* hone-awq.c — AWQ calibration and int4 quantization on the CPU (see hone-awq.h),
 * and the choice of device: the CUDA implementation (cuda/hone-cuda-awq.c)
 * when the library has it and a GPU is usable, else this one;
 * HONE_AWQ_DEVICE=cpu|cuda forces one. */
#include "hone-awq.h"
#include "hone-awq-private.h"

#include <math.h>
#include <string.h>
#include <json-glib/json-glib.h>
#include "hone-dtype.h"
#include "hone-error.h"
#include "hone-gguf.h"
#include "hone-i18n.h"
#include "hone-json.h"
#include "cpu/hone-cpu-gemm.h"
#include "cpu/hone-cpu-ops.h"
#include "cpu/hone-cpu-threadpool.h"
#ifdef HONE_HAVE_CUDA
#include "cuda/hone-cuda-awq.h"
#endif

void
hone_awq_options_init (HoneAwqOptions *o)
{
  memset (o, 0, sizeof *o);
  o->group_size = 128;
  o->bits = 4;
  o->n_grid = 20;
  o->loss_tokens = 0;
  o->clip_tokens = 512;
  o->n_threads = 0;
  o->search_scales = TRUE;
  o->search_clip = TRUE;
}

/* ---- the quantizer ------------------------------------------------------ */

/* The hot loops (axpy over tokens, a group's quantization) vectorize; give them AVX2 where the CPU has it. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__ ((target_clones ("avx2", "default"), optimize ("O3")))
#else
#define HOT
#endif

guint16
hone_awq_round_scale (float s)
{
  int e;
  float m;

  if (!(s >= 0x1p-14f))         /* also NaN */
    s = 0x1p-14f;
  if (s > 4096.0f)              /* 15·s and z·s stay finite fp16 */
    s = 4096.0f;
  m = frexpf (s, &e);           /* s = m·2^e, m in [0.5, 1) */
  m = nearbyintf (m * 128.0f) / 128.0f;
  return hone_f32_to_f16 (ldexpf (m, e));
}

HOT void
hone_awq_quantize_group (const float *w, int n, float clip, guint8 *q, guint8 *z, guint16 *s)
{
  float mx = -INFINITY, mn = INFINITY, range, sf, zf;
  guint16 sh;

  for (int i = 0; i < n; i++)
    {
      float v = w[i];
      if (clip > 0)
        v = CLAMP (v, -clip, clip);
      if (!isfinite (v))
        v = 0.0f;
      mx = MAX (mx, v);
      mn = MIN (mn, v);
    }
  range = mx - mn;
  if (!(range >= 1e-5f))
    range = 1e-5f;
  sh = hone_awq_round_scale (range / 15.0f);
  sf = hone_f16_to_f32 (sh);
  zf = -nearbyintf (mn / sf);
  if (!(zf >= 0.0f))
    zf = 0.0f;
  if (zf > 15.0f)
    zf = 15.0f;
  for (int i = 0; i < n; i++)
    {
      float v = w[i], t;
      if (clip > 0)
        v = CLAMP (v, -clip, clip);
      if (!isfinite (v))
        v = 0.0f;
      t = nearbyintf (v / sf) + zf;
      if (!(t >= 0.0f))
        t = 0.0f;
      if (t > 15.0f)
        t = 15.0f;
      q[i] = (guint8) t;
    }
  *z = (guint8) zf;
  *s = sh;
}

/* w ← Q(w) in place over a row of K in groups of g (grid search). */
static void
fake_quant_row (float *w, int K, int g)
{
  guint8 q[128], z;
  guint16 s;

  for (int k0 = 0; k0 < K; k0 += g)
    {
      float sf;
      hone_awq_quantize_group (w + k0, g, 0.0f, q, &z, &s);
      sf = hone_f16_to_f32 (s);
      for (int i = 0; i < g; i++)
        w[k0 + i] = (float) ((int) q[i] - (int) z) * sf;
    }
}

void
hone_awq_pack_nibbles (const guint8 *values, size_t n, guint8 *packed)
{
  for (size_t i = 0; i < n / 2; i++)
    packed[i] = (guint8) ((values[2 * i] & 15) | (values[2 * i + 1] << 4));
}

void
hone_awq_linear_q_row (const HoneAwqLinear *lin, int row, guint8 *values)
{
  const guint8 *p = lin->q + (size_t) row * lin->K / 2;
  for (int i = 0; i < lin->K / 2; i++)
    {
      values[2 * i] = p[i] & 15;
      values[2 * i + 1] = p[i] >> 4;
    }
}

void
hone_awq_linear_dequantize_row (const HoneAwqLinear *lin, int row, float *out)
{
  int ng = lin->K / lin->group_size;
  const guint8 *p = lin->q + (size_t) row * lin->K / 2;

  for (int gi = 0; gi < ng; gi++)
    {
      float s = hone_f16_to_f32 (lin->s[(size_t) row * ng + gi]);
      int z = lin->z[(size_t) row * ng + gi];
      for (int i = gi * lin->group_size; i < (gi + 1) * lin->group_size; i++)
        out[i] = (float) ((int) ((p[i / 2] >> (4 * (i & 1))) & 15) - z) * s;
    }
}

static const int awq_order[8] = { 0, 2, 4, 6, 1, 3, 5, 7 };

void
hone_awq_pack_row (const guint8 *values, int n, guint32 *words)
{
  for (int c = 0; c < n / 8; c++)
    {
      guint32 w = 0;
      for (int i = 0; i < 8; i++)
        w |= (guint32) (values[8 * c + awq_order[i]] & 15) << (4 * i);
      words[c] = w;
    }
}

void
hone_awq_unpack_row (const guint32 *words, int n, guint8 *values)
{
  for (int c = 0; c < n / 8; c++)
    for (int i = 0; i < 8; i++)
      values[8 * c + awq_order[i]] = (words[c] >> (4 * i)) & 15;
}

static void
linear_clear (HoneAwqLinear *l)
{
  g_clear_pointer (&l->q, g_free);
  g_clear_pointer (&l->z, g_free);
  g_clear_pointer (&l->s, g_free);
}

void
hone_awq_result_free (HoneAwqResult *r)
{
  if (r == NULL)
    return;
  if (r->layers && r->model)
    for (int l = 0; l < r->model->config.n_layers; l++)
      {
        HoneAwqLayer *L = &r->layers[l];
        g_free (L->attn_norm);
        g_free (L->ffn_norm);
        g_free (L->bq);
        g_free (L->bk);
        g_free (L->bv);
        for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
          linear_clear (&L->lin[i]);
      }
  g_free (r->layers);
  g_free (r->search_choice);
  g_free (r->search_loss);
  if (r->model)
    hone_model_unref (r->model);
  g_free (r);
}

/* ---- checks ------------------------------------------------------------- */

gboolean
hone_awq_check (HoneModel *model, const HoneAwqOptions *o, GError **error)
{
  const HoneModelConfig *c = &model->config;
  int qdim = c->n_heads * c->head_dim;

  if (o->bits != 4)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("AWQ supports 4-bit weights only (asked for %d bits)"), o->bits);
      return FALSE;
    }
  if (o->group_size != 32 && o->group_size != 64 && o->group_size != 128)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("Unsupported AWQ group size %d (use 32, 64 or 128)"), o->group_size);
      return FALSE;
    }
  if (c->hidden % o->group_size != 0 || qdim % o->group_size != 0 || c->ffn % o->group_size != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("Group size %d does not divide the row lengths of %s (hidden %d, attention %d, FFN %d); "
                     "try %s"),
                   o->group_size, model->name ? model->name : model->path, c->hidden, qdim, c->ffn,
                   (c->hidden % 64 == 0 && qdim % 64 == 0 && c->ffn % 64 == 0) ? "64" : "32");
      return FALSE;
    }
  if (o->n_grid < 2 || o->n_grid > 1000 || o->clip_tokens < 0 || o->loss_tokens < 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("Invalid AWQ search parameters"));
      return FALSE;
    }
  if (model->source == HONE_MODEL_SOURCE_GGUF && model->path)
    {
      g_autoptr(HoneGguf) gguf = hone_gguf_open (model->path, NULL);
      if (gguf && hone_gguf_find_kv (gguf, "hone.awq.group_size") >= 0)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                       _("%s is already quantized by AWQ; quantize the original model instead"), model->path);
          return FALSE;
        }
    }
  for (int l = 0; l < c->n_layers; l++)
    {
      const HoneLayerWeights *L = &model->layers[l];
      const HoneTensor *ts[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down,
                                 &L->attn_norm, &L->ffn_norm };
      for (guint i = 0; i < G_N_ELEMENTS (ts); i++)
        if (!hone_tensor_present (ts[i]) || !hone_dtype_is_supported (ts[i]->type)
            || hone_dtype_block_size (ts[i]->type) < 1)
          {
            g_set_error (error, HONE_ERROR, HONE_ERROR_UNSUPPORTED_TYPE,
                         _("Layer %d: a weight is missing or of a type AWQ cannot read"), l);
            return FALSE;
          }
    }
  return TRUE;
}

gboolean
hone_awq_path_is_quantized (const char *path, GError **error)
{
  g_autofree char *dir = g_file_test (path, G_FILE_TEST_IS_DIR) ? g_strdup (path) : g_path_get_dirname (path);
  g_autofree char *cfg = g_build_filename (dir, "config.json", NULL);
  g_autofree char *text = NULL;
  gboolean awq = FALSE;

  if (!g_str_has_suffix (path, ".gguf") && g_file_get_contents (cfg, &text, NULL, NULL))
    {
      g_autoptr(JsonParser) p = json_parser_new ();
      JsonNode *root;
      if (hone_json_load (p, text, -1, 64, NULL) && (root = json_parser_get_root (p))
          && JSON_NODE_HOLDS_OBJECT (root))
        {
          JsonObject *q = hone_json_get_object (json_node_get_object (root), "quantization_config");
          awq = q && g_strcmp0 (hone_json_get_string (q, "quant_method", ""), "awq") == 0;
        }
    }
  else if (g_file_test (path, G_FILE_TEST_IS_REGULAR))
    {
      g_autoptr(HoneGguf) gguf = hone_gguf_open (path, NULL);
      awq = gguf && hone_gguf_find_kv (gguf, "hone.awq.group_size") >= 0;
    }
  if (awq)
    g_set_error (error, HONE_ERROR, HONE_ERROR_FILE_UNSUPPORTED,
                 _("%s is already quantized by AWQ; quantize the original model instead"), path);
  return awq;
}

/* ---- f32 helpers -------------------------------------------------------- */

float *
hone_awq_dequant_tensor (const HoneTensor *t)
{
  int64_t K = t->ne[0], N = t->n_dims > 1 ? t->ne[1] : 1;
  float *out = g_new (float, (gsize) (K * N));
  for (int64_t r = 0; r < N; r++)
    hone_dequantize_row (t->type, hone_tensor_row (t, r), out + r * K, K);
  return out;
}

typedef struct {
  HoneModel *model;
  const HoneModelConfig *c;
  HoneCpuPool *pool;
  int L;                  /* tokens per sample */
  int half;
  float *cos, *sin;       /* L × half */
  float *qn, *kn;         /* qwen3 per-head norms (f32) or NULL */
  const float *bq, *bk, *bv;
} Ctx;

/* y[T×N] = x[T×K] · W[N×K]ᵀ */
static void
mm (Ctx *cx, const float *W, int N, int K, const float *x, int T, float *y)
{
  hone_cpu_gemm_f32 (cx->pool, W, N, K, x, T, y);
}

static void
rmsnorm_rows (const float *x, const float *w, float *y, int T, int n, float eps)
{
  for (int t = 0; t < T; t++)
    hone_cpu_rmsnorm (x + (size_t) t * n, w, y + (size_t) t * n, n, eps);
}

typedef struct {
  Ctx *cx;
  const float *q, *k, *v;
  float *out;
  int n_seq;
} AttnJob;

static inline float
dot64 (const float *a, const float *b, int n)
{
  float acc[8] = { 0 };
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++)
      acc[j] += a[i + j] * b[i + j];
  for (; i < n; i++)
    acc[0] += a[i] * b[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

HOT static void
attn_worker (gpointer data, int ith, int nth)
{
  AttnJob *j = data;
  const HoneModelConfig *c = j->cx->c;
  int L = j->cx->L, hd = c->head_dim, nh = c->n_heads, nkv = c->n_kv_heads;
  int qdim = nh * hd, kvdim = nkv * hd;
  float scale = 1.0f / sqrtf ((float) hd);
  float *sc = g_new (float, L);
  int total = j->n_seq * nh;

  for (int w = ith; w < total; w += nth)
    {
      int seq = w / nh, h = w % nh, kh = h / (nh / nkv);
      const float *q = j->q + (size_t) seq * L * qdim + h * hd;
      const float *k = j->k + (size_t) seq * L * kvdim + kh * hd;
      const float *v = j->v + (size_t) seq * L * kvdim + kh * hd;
      float *o = j->out + (size_t) seq * L * qdim + h * hd;
      for (int t = 0; t < L; t++)
        {
          float *ot = o + (size_t) t * qdim;
          for (int s = 0; s <= t; s++)
            sc[s] = dot64 (q + (size_t) t * qdim, k + (size_t) s * kvdim, hd) * scale;
          hone_cpu_softmax (sc, t + 1);
          memset (ot, 0, hd * sizeof (float));
          for (int s = 0; s <= t; s++)
            {
              const float *vs = v + (size_t) s * kvdim;
              float p = sc[s];
              for (int d = 0; d < hd; d++)
                ot[d] += p * vs[d];
            }
        }
    }
  g_free (sc);
}

/* Attention of n_seq samples: xn [T×hidden] → att [T×qdim] (the input of o). */
static void
attention (Ctx *cx, const float *xn, int n_seq, const float *Wq, const float *Wk, const float *Wv,
           float *q, float *k, float *v, float *att)
{
  const HoneModelConfig *c = cx->c;
  int T = n_seq * cx->L, H = c->hidden, hd = c->head_dim;
  int qdim = c->n_heads * hd, kvdim = c->n_kv_heads * hd;
  AttnJob job = { cx, q, k, v, att, n_seq };

  mm (cx, Wq, qdim, H, xn, T, q);
  mm (cx, Wk, kvdim, H, xn, T, k);
  mm (cx, Wv, kvdim, H, xn, T, v);
  for (int t = 0; t < T; t++)
    {
      float *qt = q + (size_t) t * qdim, *kt = k + (size_t) t * kvdim, *vt = v + (size_t) t * kvdim;
      int pos = t % cx->L;
      if (cx->bq)
        {
          hone_cpu_add (qt, cx->bq, qdim);
          hone_cpu_add (kt, cx->bk, kvdim);
          hone_cpu_add (vt, cx->bv, kvdim);
        }
      if (cx->qn)
        {
          for (int h = 0; h < c->n_heads; h++)
            hone_cpu_rmsnorm (qt + h * hd, cx->qn, qt + h * hd, hd, c->rms_eps);
          for (int h = 0; h < c->n_kv_heads; h++)
            hone_cpu_rmsnorm (kt + h * hd, cx->kn, kt + h * hd, hd, c->rms_eps);
        }
      hone_cpu_rope (qt, c->n_heads, hd, cx->cos + (size_t) pos * cx->half, cx->sin + (size_t) pos * cx->half,
                     c->rope_pairing);
      hone_cpu_rope (kt, c->n_kv_heads, hd, cx->cos + (size_t) pos * cx->half, cx->sin + (size_t) pos * cx->half,
                     c->rope_pairing);
    }
  hone_cpu_pool_run (cx->pool, attn_worker, &job);
}

static void
swiglu_rows (float *g, const float *u, int T, int n)
{
  for (int t = 0; t < T; t++)
    hone_cpu_swiglu (g + (size_t) t * n, u + (size_t) t * n, n);
}

static double
mse (const float *a, const float *b, size_t n)
{
  double s = 0;
  for (size_t i = 0; i < n; i++)
    {
      double d = (double) a[i] - (double) b[i];
      s += d * d;
    }
  return s / (double) n;
}

/* ---- the per-layer state ------------------------------------------------ */

typedef struct {
  float *W[HONE_AWQ_N_LINEARS];        /* f32 [N×K], scaled/clipped as we go */
  int N[HONE_AWQ_N_LINEARS], K[HONE_AWQ_N_LINEARS];
  float *attn_norm, *ffn_norm, *bq, *bk, *bv;
} LayerF32;

/* Scratch for one inspected forward over the loss samples. */
typedef struct {
  float *q, *k, *v, *att, *o, *g, *u, *y;
} Scratch;

typedef HoneAwqGroupKind GroupKind;
#define GROUP_QKV HONE_AWQ_GROUP_QKV
#define GROUP_VO HONE_AWQ_GROUP_VO
#define GROUP_GATE_UP HONE_AWQ_GROUP_GATE_UP
#define GROUP_DOWN HONE_AWQ_GROUP_DOWN

/* Output of the inspected module over the first n_seq samples with the given weights. */
static void
inspect (Ctx *cx, GroupKind kind, float *const *W, const float *x, int n_seq, Scratch *s, float *out)
{
  const HoneModelConfig *c = cx->c;
  int T = n_seq * cx->L, H = c->hidden, qdim = c->n_heads * c->head_dim, F = c->ffn;

  switch (kind)
    {
    case GROUP_QKV:
      attention (cx, x, n_seq, W[HONE_AWQ_WQ], W[HONE_AWQ_WK], W[HONE_AWQ_WV], s->q, s->k, s->v, s->att);
      mm (cx, W[HONE_AWQ_WO], H, qdim, s->att, T, out);
      break;
    case GROUP_VO:
      mm (cx, W[HONE_AWQ_WO], H, qdim, x, T, out);
      break;
    case GROUP_GATE_UP:
      mm (cx, W[HONE_AWQ_W_GATE], F, H, x, T, s->g);
      mm (cx, W[HONE_AWQ_W_UP], F, H, x, T, s->u);
      swiglu_rows (s->g, s->u, T, F);
      mm (cx, W[HONE_AWQ_W_DOWN], H, F, s->g, T, out);
      break;
    case GROUP_DOWN:
      mm (cx, W[HONE_AWQ_W_DOWN], H, F, x, T, out);
      break;
    }
}

typedef struct {
  float *W;           /* destination N×K */
  const float *src;
  const float *s;
  int N, K, g;
} FqJob;

static void
fq_worker (gpointer data, int ith, int nth)
{
  FqJob *j = data;
  for (int r = ith; r < j->N; r += nth)
    {
      float *w = j->W + (size_t) r * j->K;
      const float *src = j->src + (size_t) r * j->K;
      for (int k = 0; k < j->K; k++)
        w[k] = src[k] * j->s[k];
      fake_quant_row (w, j->K, j->g);
      for (int k = 0; k < j->K; k++)
        w[k] /= j->s[k];
    }
}

gboolean
hone_awq_debug (void)
{
  static int debug = -1;
  if (debug < 0)
    debug = g_getenv ("HONE_AWQ_DEBUG") != NULL;
  return debug;
}

void
hone_awq_stage_time (const char *stage, gint64 *t0)
{
  gint64 now = g_get_monotonic_time ();
  if (hone_awq_debug ())
    g_printerr ("awq: %-10s %.3f s\n", stage, (now - *t0) / 1e6);
  *t0 = now;
}

#define stage_time hone_awq_stage_time
#define cancelled hone_awq_cancelled

gboolean
hone_awq_cancelled (GCancellable *cancellable, GError **error)
{
  if (cancellable && g_cancellable_is_cancelled (cancellable))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_CANCELLED, _("Quantization cancelled"));
      return TRUE;
    }
  return FALSE;
}

/* The scale search of one group; best_s[K] out (all 1 when nothing beat nothing). */
static gboolean
search_group (Ctx *cx, const HoneAwqOptions *o, GroupKind kind, LayerF32 *lf, const int *ids, int n_ids,
              const float *x, int T_all, int n_loss_seq, const float *ref, Scratch *scr, float *best_s,
              double *losses, int *choice, GCancellable *cancellable, GError **error)
{
  int K = lf->K[ids[0]], g = o->group_size;
  int T = n_loss_seq * cx->L, H = cx->c->hidden;
  double *xm = g_new0 (double, K), *wm = g_new0 (double, K);
  float *x_mean = g_new (float, K), *w_mean = g_new (float, K), *s = g_new (float, K);
  float *out = g_new (float, (size_t) T * H);
  float *W[HONE_AWQ_N_LINEARS];
  float *tmp[HONE_AWQ_N_LINEARS] = { 0 };
  double best = INFINITY;
  gint64 rows = 0;
  gboolean ok = TRUE;

  for (size_t t = 0; t < (size_t) T_all; t++)
    for (int k = 0; k < K; k++)
      xm[k] += fabs ((double) x[t * K + k]);
  for (int k = 0; k < K; k++)
    x_mean[k] = (float) (xm[k] / T_all);
  for (int i = 0; i < n_ids; i++)
    {
      const float *Wi = lf->W[ids[i]];
      for (int r = 0; r < lf->N[ids[i]]; r++)
        for (int k0 = 0; k0 < K; k0 += g)
          {
            float amax = 0;
            for (int k = k0; k < k0 + g; k++)
              amax = MAX (amax, fabsf (Wi[(size_t) r * K + k]));
            for (int k = k0; k < k0 + g; k++)
              wm[k] += fabsf (Wi[(size_t) r * K + k]) / (amax + 1e-6f);
          }
      rows += lf->N[ids[i]];
    }
  for (int k = 0; k < K; k++)
    w_mean[k] = (float) (wm[k] / (double) rows);

  memcpy (W, lf->W, sizeof W);
  for (int i = 0; i < n_ids; i++)
    {
      tmp[ids[i]] = g_new (float, (size_t) lf->N[ids[i]] * K);
      W[ids[i]] = tmp[ids[i]];
    }
  for (int k = 0; k < K; k++)
    best_s[k] = 1.0f;

  for (int gi = 0; gi < o->n_grid; gi++)
    {
      double loss;

      if (cancelled (cancellable, error))
        {
          ok = FALSE;
          break;
        }
      hone_awq_grid_scales (x_mean, w_mean, K, gi, o->n_grid, s);
      for (int i = 0; i < n_ids; i++)
        {
          FqJob j = { tmp[ids[i]], lf->W[ids[i]], s, lf->N[ids[i]], K, g };
          hone_cpu_pool_run (cx->pool, fq_worker, &j);
        }
      inspect (cx, kind, W, x, n_loss_seq, scr, out);
      loss = mse (out, ref, (size_t) T * H);
      if (losses)
        losses[gi] = loss;
      if (isfinite (loss) && loss < best)
        {
          best = loss;
          if (choice)
            *choice = gi;
          memcpy (best_s, s, K * sizeof (float));
        }
    }
  for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
    g_free (tmp[i]);
  g_free (xm);
  g_free (wm);
  g_free (x_mean);
  g_free (w_mean);
  g_free (s);
  g_free (out);
  return ok;
}

static void
scale_cols (float *W, int N, int K, const float *s)
{
  for (int r = 0; r < N; r++)
    for (int k = 0; k < K; k++)
      W[(size_t) r * K + k] *= s[k];
}

static void
div_rows (float *W, int N, int K, const float *s)
{
  for (int r = 0; r < N; r++)
    for (int k = 0; k < K; k++)
      W[(size_t) r * K + k] /= s[r];
}

static void
div_vec (float *v, int n, const float *s)
{
  if (v)
    for (int i = 0; i < n; i++)
      v[i] /= s[i];
}

/* ---- clip search -------------------------------------------------------- */

/* AutoAWQ scores a clip value by the mean over sampled tokens of the squared
 * error of the group's partial output, (1/n)·Σ_t (Σ_i d_i x_ti)² with
 * d = Q(clamp(w)) − w. That equals dᵀ·G·d with G = (1/n)·X_gᵀX_g, the g×g
 * Gram matrix of the group's inputs: computed once per group, it makes each
 * candidate cost g² instead of 2·n·g (16× less at n = 512, g = 64). */
typedef struct {
  float *W;             /* N×K, clamped in place */
  const float *gram;    /* K/g blocks of g×g */
  int N, K, g, n_grid;
  GCancellable *cancellable;
} ClipJob;

HOT static void
clip_worker (gpointer data, int ith, int nth)
{
  ClipJob *j = data;
  int g = j->g;
  float d[128], y[128];
  guint8 q[128], z;
  guint16 sh;

  for (int r = ith; r < j->N; r += nth)
    {
      if (j->cancellable && g_cancellable_is_cancelled (j->cancellable))
        break;
      for (int k0 = 0; k0 < j->K; k0 += g)
        {
          float *w = j->W + (size_t) r * j->K + k0;
          const float *G = j->gram + (size_t) (k0 / g) * g * g;
          float amax = 0, best_max;
          double min_err = 1e9;

          for (int i = 0; i < g; i++)
            amax = MAX (amax, fabsf (w[i]));
          best_max = amax;
          for (int is = 0; is < j->n_grid / 2; is++)
            {
              float max_val = amax * (1.0f - (float) is / (float) j->n_grid), sf;
              double err = 0;
              hone_awq_quantize_group (w, g, max_val > 0 ? max_val : 0, q, &z, &sh);
              sf = hone_f16_to_f32 (sh);
              for (int i = 0; i < g; i++)
                d[i] = (float) ((int) q[i] - (int) z) * sf - w[i];
              memset (y, 0, g * sizeof (float));
              for (int i = 0; i < g; i++)
                {
                  const float *Gi = G + (size_t) i * g;
                  float di = d[i];
                  for (int k = 0; k < g; k++)
                    y[k] += di * Gi[k];
                }
              for (int i = 0; i < g; i++)
                err += (double) d[i] * (double) y[i];
              if (isfinite (err) && err < min_err)
                {
                  min_err = err;
                  best_max = max_val;
                }
            }
          for (int i = 0; i < g; i++)
            w[i] = CLAMP (w[i], -best_max, best_max);
        }
    }
}

typedef struct {
  float *gram;
  const float *x;
  int K, T, n, step, g;
} GramJob;

HOT static void
gram_worker (gpointer data, int ith, int nth)
{
  GramJob *j = data;
  int g = j->g, ng = j->K / g;
  double *acc = g_new (double, (size_t) g * g);

  for (int gi = ith; gi < ng; gi += nth)
    {
      memset (acc, 0, (size_t) g * g * sizeof (double));
      for (int t = 0; t < j->n; t++)
        {
          const float *xt = j->x + (size_t) t * j->step * j->K + gi * g;
          for (int a = 0; a < g; a++)
            {
              double xa = xt[a];
              double *row = acc + (size_t) a * g;
              for (int b = 0; b < g; b++)
                row[b] += xa * (double) xt[b];
            }
        }
      for (int i = 0; i < g * g; i++)
        j->gram[(size_t) gi * g * g + i] = (float) (acc[i] / j->n);
    }
  g_free (acc);
}

static gboolean
clip_linear (Ctx *cx, const HoneAwqOptions *o, float *W, int N, int K, const float *x, int T,
             GCancellable *cancellable, GError **error)
{
  int n = MIN (T, o->clip_tokens), g = o->group_size;
  GramJob gj;
  ClipJob j;

  if (n <= 0)
    return TRUE;
  gj = (GramJob) { g_new (float, (size_t) K * g), x, K, T, n, MAX (1, T / n), g };
  hone_cpu_pool_run (cx->pool, gram_worker, &gj);
  j = (ClipJob) { W, gj.gram, N, K, g, o->n_grid, cancellable };
  hone_cpu_pool_run (cx->pool, clip_worker, &j);
  g_free (gj.gram);
  return !cancelled (cancellable, error);
}

/* ---- final quantization ------------------------------------------------- */

static void
quantize_linear (const float *W, int N, int K, int g, HoneAwqLinear *out)
{
  int ng = K / g;
  out->K = K;
  out->N = N;
  out->group_size = g;
  out->q = g_new (guint8, (size_t) N * K / 2);
  out->z = g_new (guint8, (size_t) N * ng);
  out->s = g_new (guint16, (size_t) N * ng);
  for (int r = 0; r < N; r++)
    for (int gi = 0; gi < ng; gi++)
      {
        guint8 q[128];   /* g ≤ 128 */
        hone_awq_quantize_group (W + (size_t) r * K + gi * g, g, 0.0f, q, out->z + (size_t) r * ng + gi,
                                 out->s + (size_t) r * ng + gi);
        hone_awq_pack_nibbles (q, (size_t) g, out->q + ((size_t) r * K + (size_t) gi * g) / 2);
      }
}

const HoneTensor *
hone_awq_layer_tensor (const HoneLayerWeights *L, int i)
{
  switch (i)
    {
    case HONE_AWQ_WQ: return &L->wq;
    case HONE_AWQ_WK: return &L->wk;
    case HONE_AWQ_WV: return &L->wv;
    case HONE_AWQ_WO: return &L->wo;
    case HONE_AWQ_W_GATE: return &L->w_gate;
    case HONE_AWQ_W_UP: return &L->w_up;
    default: return &L->w_down;
    }
}

/* The layer's weights in f32; the model file's pages of its linears then
 * leave the resident memory (each is read once: a calibration of an 8B model
 * no longer ends with the whole file resident beside the result). */
static void
layer_load (const HoneModel *model, const HoneLayerWeights *L, LayerF32 *lf)
{
  for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
    {
      const HoneTensor *t = hone_awq_layer_tensor (L, i);
      lf->W[i] = hone_awq_dequant_tensor (t);
      lf->K[i] = (int) t->ne[0];
      lf->N[i] = (int) t->ne[1];
      hone_model_release_bytes (model, t->data, t->nbytes);
    }
  lf->attn_norm = hone_awq_dequant_tensor (&L->attn_norm);
  lf->ffn_norm = hone_awq_dequant_tensor (&L->ffn_norm);
  lf->bq = hone_tensor_present (&L->bq) ? hone_awq_dequant_tensor (&L->bq) : NULL;
  lf->bk = hone_tensor_present (&L->bk) ? hone_awq_dequant_tensor (&L->bk) : NULL;
  lf->bv = hone_tensor_present (&L->bv) ? hone_awq_dequant_tensor (&L->bv) : NULL;
}

static void
layer_f32_clear (LayerF32 *lf)
{
  for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
    g_clear_pointer (&lf->W[i], g_free);
  g_clear_pointer (&lf->attn_norm, g_free);
  g_clear_pointer (&lf->ffn_norm, g_free);
  g_clear_pointer (&lf->bq, g_free);
  g_clear_pointer (&lf->bk, g_free);
  g_clear_pointer (&lf->bv, g_free);
}

static void
layer_store (LayerF32 *lf, int g, HoneAwqLayer *out)
{
  for (int i = 0; i < HONE_AWQ_N_LINEARS; i++)
    quantize_linear (lf->W[i], lf->N[i], lf->K[i], g, &out->lin[i]);
  out->attn_norm = g_steal_pointer (&lf->attn_norm);
  out->ffn_norm = g_steal_pointer (&lf->ffn_norm);
  out->bq = g_steal_pointer (&lf->bq);
  out->bk = g_steal_pointer (&lf->bk);
  out->bv = g_steal_pointer (&lf->bv);
}

/* ---- the driver --------------------------------------------------------- */

void
hone_awq_grid_scales (const float *x_mean, const float *w_mean, int K, int gi, int n_grid, float *s)
{
  float ratio = (float) gi / (float) n_grid, smax = 0, smin = INFINITY, norm;

  for (int k = 0; k < K; k++)
    {
      float v = powf (x_mean[k], ratio) / (powf (w_mean[k], 1.0f - ratio) + 1e-4f);
      s[k] = MAX (v, 1e-4f);
      smax = MAX (smax, s[k]);
      smin = MIN (smin, s[k]);
    }
  norm = sqrtf (smax * smin);
  for (int k = 0; k < K; k++)
    {
      s[k] /= norm;
      if (!isfinite (s[k]) || s[k] == 0.0f)
        s[k] = 1.0f;
    }
}

HoneAwqResult *
hone_awq_result_new (HoneModel *model, const HoneAwqOptions *o, gboolean calibrate, int n_samples, int seq_len)
{
  HoneAwqResult *res = g_new0 (HoneAwqResult, 1);
  int n = model->config.n_layers * HONE_AWQ_N_GROUPS;

  res->model = hone_model_ref (model);
  res->group_size = o->group_size;
  res->layers = g_new0 (HoneAwqLayer, model->config.n_layers);
  res->rtn = !calibrate;
  res->n_samples = calibrate ? n_samples : 0;
  res->seq_len = calibrate ? seq_len : 0;
  if (calibrate && o->search_scales)
    {
      res->n_grid = o->n_grid;
      res->search_choice = g_new (int, n);
      res->search_loss = g_new (double, (gsize) n * o->n_grid);
      for (int i = 0; i < n; i++)
        res->search_choice[i] = -1;
      for (gsize i = 0; i < (gsize) n * o->n_grid; i++)
        res->search_loss[i] = NAN;
    }
  return res;
}

/* Where the search of layer l's group records its losses and choice. */
#define REC(group) \
  res->search_loss + ((gsize) l * HONE_AWQ_N_GROUPS + (group)) * o->n_grid, \
  res->search_choice + (gsize) l * HONE_AWQ_N_GROUPS + (group)

static HoneAwqResult *
quantize_cpu (HoneModel *model, const gint32 *tokens, int n_samples, int seq_len,
              const HoneAwqOptions *o, HoneAwqProgressFunc progress, gpointer progress_data,
              GCancellable *cancellable, GError **error)
{
  const HoneModelConfig *c = &model->config;
  g_autoptr(HoneAwqResult) res = NULL;
  gboolean calibrate = o->search_scales || o->search_clip;
  gint64 t_start = g_get_monotonic_time ();
  int H = c->hidden, qdim = c->n_heads * c->head_dim, kvdim = c->n_kv_heads * c->head_dim, F = c->ffn;
  int T = n_samples * seq_len, n_loss_seq = n_samples;
  float *h = NULL, *h2 = NULL, *xa = NULL, *xm = NULL, *o_ref = NULL, *y_ref = NULL;
  Scratch scr = { 0 };
  Ctx cx = { 0 };
  gboolean ok = TRUE;

  if (calibrate && o->loss_tokens > 0)
    n_loss_seq = CLAMP (o->loss_tokens / seq_len, 1, n_samples);

  res = hone_awq_result_new (model, o, calibrate, n_samples, seq_len);

  cx.pool = hone_cpu_pool_new (o->n_threads, error);
  if (cx.pool == NULL)
    return NULL;
  cx.model = model;
  cx.c = c;
  cx.L = seq_len;
  cx.half = c->head_dim / 2;

  if (calibrate)
    {
      float *inv = g_new (float, cx.half);
      int Tl = n_loss_seq * seq_len;
      hone_cpu_rope_inv_freq (c, c->head_dim, inv);
      cx.cos = g_new (float, (size_t) seq_len * cx.half);
      cx.sin = g_new (float, (size_t) seq_len * cx.half);
      for (int p = 0; p < seq_len; p++)
        hone_cpu_rope_cos_sin (inv, c->head_dim, p, cx.cos + (size_t) p * cx.half, cx.sin + (size_t) p * cx.half);
      g_free (inv);

      h = g_new (float, (size_t) T * H);
      for (int t = 0; t < T; t++)
        hone_dequantize_row (model->tok_embd.type, hone_tensor_row (&model->tok_embd, tokens[t]),
                             h + (size_t) t * H, H);
      h2 = g_new (float, (size_t) T * H);
      xa = g_new (float, (size_t) T * H);
      xm = g_new (float, (size_t) T * H);
      scr.q = g_new (float, (size_t) T * qdim);
      scr.k = g_new (float, (size_t) T * kvdim);
      scr.v = g_new (float, (size_t) T * kvdim);
      scr.att = g_new (float, (size_t) T * qdim);
      scr.g = g_new (float, (size_t) T * F);
      scr.u = g_new (float, (size_t) T * F);
      o_ref = g_new (float, (size_t) Tl * H);
      y_ref = g_new (float, (size_t) Tl * H);
    }

  for (int l = 0; l < c->n_layers && ok; l++)
    {
      const HoneLayerWeights *L = &model->layers[l];
      LayerF32 lf = { 0 };
      double elapsed, eta;

      if (cancelled (cancellable, error))
        {
          ok = FALSE;
          break;
        }
      layer_load (model, L, &lf);
      if (calibrate)
        {
          float *att, *act, *y;
          int Tl = n_loss_seq * seq_len;
          Scratch loss_scr;
          float *qn = hone_tensor_present (&L->q_norm) ? hone_awq_dequant_tensor (&L->q_norm) : NULL;
          float *kn = hone_tensor_present (&L->k_norm) ? hone_awq_dequant_tensor (&L->k_norm) : NULL;

          gint64 ts = g_get_monotonic_time ();
          cx.qn = qn;
          cx.kn = kn;
          cx.bq = lf.bq;
          cx.bk = lf.bk;
          cx.bv = lf.bv;
          /* The unquantized layer: inputs of every linear and the outputs the losses compare against. */
          rmsnorm_rows (h, lf.attn_norm, xa, T, H, c->rms_eps);
          attention (&cx, xa, n_samples, lf.W[HONE_AWQ_WQ], lf.W[HONE_AWQ_WK], lf.W[HONE_AWQ_WV],
                     scr.q, scr.k, scr.v, scr.att);
          att = scr.att;
          mm (&cx, lf.W[HONE_AWQ_WO], H, qdim, att, T, h2);
          memcpy (o_ref, h2, (size_t) Tl * H * sizeof (float));
          for (size_t i = 0; i < (size_t) T * H; i++)
            h2[i] += h[i];
          rmsnorm_rows (h2, lf.ffn_norm, xm, T, H, c->rms_eps);
          mm (&cx, lf.W[HONE_AWQ_W_GATE], F, H, xm, T, scr.g);
          mm (&cx, lf.W[HONE_AWQ_W_UP], F, H, xm, T, scr.u);
          swiglu_rows (scr.g, scr.u, T, F);
          act = scr.g;
          y = h;                                  /* h is no longer needed: next input = h2 + y */
          mm (&cx, lf.W[HONE_AWQ_W_DOWN], H, F, act, T, y);
          memcpy (y_ref, y, (size_t) Tl * H * sizeof (float));
          for (size_t i = 0; i < (size_t) T * H; i++)
            h[i] = h2[i] + y[i];
          /* From here on h holds the next layer's input; att (scr.att) and act (scr.g) stay
           * cached; the loss forwards use separate scratch so they survive. */
          att = g_memdup2 (scr.att, (size_t) T * qdim * sizeof (float));
          act = g_memdup2 (scr.g, (size_t) T * F * sizeof (float));
          stage_time ("forward", &ts);
          loss_scr = scr;
          loss_scr.att = scr.att;
          loss_scr.g = scr.g;

          if (o->search_scales)
            {
              static const int ids_qkv[] = { HONE_AWQ_WQ, HONE_AWQ_WK, HONE_AWQ_WV };
              static const int ids_o[] = { HONE_AWQ_WO };
              static const int ids_gu[] = { HONE_AWQ_W_GATE, HONE_AWQ_W_UP };
              static const int ids_d[] = { HONE_AWQ_W_DOWN };
              float *s1 = g_new (float, H), *s2 = NULL, *s3 = g_new (float, H), *s4 = g_new (float, F);
              gboolean vo = (qdim == kvdim);

              stage_time ("stats", &ts);
              ok = search_group (&cx, o, GROUP_QKV, &lf, ids_qkv, 3, xa, T, n_loss_seq, o_ref, &loss_scr, s1,
                                 REC (GROUP_QKV), cancellable, error);
              stage_time ("qkv", &ts);
              if (ok && vo)
                {
                  s2 = g_new (float, qdim);
                  ok = search_group (&cx, o, GROUP_VO, &lf, ids_o, 1, att, T, n_loss_seq, o_ref, &loss_scr, s2,
                                     REC (GROUP_VO), cancellable, error);
                }
              if (ok)
                ok = search_group (&cx, o, GROUP_GATE_UP, &lf, ids_gu, 2, xm, T, n_loss_seq, y_ref, &loss_scr, s3,
                                   REC (GROUP_GATE_UP), cancellable, error);
              stage_time ("gate-up", &ts);
              if (ok)
                ok = search_group (&cx, o, GROUP_DOWN, &lf, ids_d, 1, act, T, n_loss_seq, y_ref, &loss_scr, s4,
                                   REC (GROUP_DOWN), cancellable, error);
              if (ok)
                {
                  /* Fold: prev /= s, linears' input columns *= s, cached inputs /= s. */
                  div_vec (lf.attn_norm, H, s1);
                  for (int i = HONE_AWQ_WQ; i <= HONE_AWQ_WV; i++)
                    scale_cols (lf.W[i], lf.N[i], lf.K[i], s1);
                  for (size_t t = 0; t < (size_t) T; t++)
                    div_vec (xa + t * H, H, s1);
                  if (s2)
                    {
                      div_rows (lf.W[HONE_AWQ_WV], kvdim, H, s2);
                      div_vec (lf.bv, kvdim, s2);
                      scale_cols (lf.W[HONE_AWQ_WO], H, qdim, s2);
                      for (size_t t = 0; t < (size_t) T; t++)
                        div_vec (att + t * qdim, qdim, s2);
                    }
                  div_vec (lf.ffn_norm, H, s3);
                  scale_cols (lf.W[HONE_AWQ_W_GATE], F, H, s3);
                  scale_cols (lf.W[HONE_AWQ_W_UP], F, H, s3);
                  for (size_t t = 0; t < (size_t) T; t++)
                    div_vec (xm + t * H, H, s3);
                  div_rows (lf.W[HONE_AWQ_W_UP], F, H, s4);
                  scale_cols (lf.W[HONE_AWQ_W_DOWN], H, F, s4);
                  for (size_t t = 0; t < (size_t) T; t++)
                    div_vec (act + t * F, F, s4);
                }
              stage_time ("down+fold", &ts);
              g_free (s1);
              g_free (s2);
              g_free (s3);
              g_free (s4);
            }
          if (ok && o->search_clip)
            {
              ok = clip_linear (&cx, o, lf.W[HONE_AWQ_WV], kvdim, H, xa, T, cancellable, error)
                && clip_linear (&cx, o, lf.W[HONE_AWQ_WO], H, qdim, att, T, cancellable, error)
                && clip_linear (&cx, o, lf.W[HONE_AWQ_W_GATE], F, H, xm, T, cancellable, error)
                && clip_linear (&cx, o, lf.W[HONE_AWQ_W_UP], F, H, xm, T, cancellable, error)
                && clip_linear (&cx, o, lf.W[HONE_AWQ_W_DOWN], H, F, act, T, cancellable, error);
            }
          stage_time ("clip", &ts);
          g_free (att);
          g_free (act);
          g_free (qn);
          g_free (kn);
        }
      if (ok)
        layer_store (&lf, o->group_size, &res->layers[l]);
      layer_f32_clear (&lf);
      if (ok && progress)
        {
          elapsed = (g_get_monotonic_time () - t_start) / 1e6;
          eta = elapsed / (l + 1) * (c->n_layers - l - 1);
          progress (l, c->n_layers, elapsed, eta, progress_data);
        }
    }

  g_free (h);
  g_free (h2);
  g_free (xa);
  g_free (xm);
  g_free (o_ref);
  g_free (y_ref);
  g_free (scr.q);
  g_free (scr.k);
  g_free (scr.v);
  g_free (scr.att);
  g_free (scr.g);
  g_free (scr.u);
  g_free (cx.cos);
  g_free (cx.sin);
  hone_cpu_pool_free (cx.pool);
  if (!ok)
    return NULL;
  res->seconds = (g_get_monotonic_time () - t_start) / 1e6;
  return g_steal_pointer (&res);
}

/* ---- the device --------------------------------------------------------- */

gboolean
hone_awq_gpu_available (void)
{
#ifdef HONE_HAVE_CUDA
  const char *dev = g_getenv ("HONE_AWQ_DEVICE");
  if (g_strcmp0 (dev, "cpu") == 0)
    return FALSE;
  return hone_cuda_awq_available (NULL);
#else
  return FALSE;
#endif
}

HoneAwqResult *
hone_awq_quantize (HoneModel *model, const gint32 *tokens, int n_samples, int seq_len,
                   const HoneAwqOptions *o, HoneAwqProgressFunc progress, gpointer progress_data,
                   GCancellable *cancellable, GError **error)
{
  gboolean calibrate = o->search_scales || o->search_clip;
  const char *dev = g_getenv ("HONE_AWQ_DEVICE");
  gboolean want_cuda = FALSE;
  g_autoptr(GError) why = NULL;

  if (!hone_awq_check (model, o, error))
    return NULL;
  if (calibrate && (tokens == NULL || n_samples <= 0 || seq_len <= 0))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("AWQ calibration needs at least one sample"));
      return NULL;
    }
  if (calibrate)
    for (gint64 t = 0; t < (gint64) n_samples * seq_len; t++)
      if (tokens[t] < 0 || tokens[t] >= model->config.vocab)
        {
          g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                       _("Calibration token %d is outside the vocabulary"), tokens[t]);
          return NULL;
        }

  if (dev && *dev && g_strcmp0 (dev, "cpu") != 0 && g_strcmp0 (dev, "cuda") != 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("HONE_AWQ_DEVICE must be cpu or cuda (it is \"%s\")"), dev);
      return NULL;
    }
#ifdef HONE_HAVE_CUDA
  if (g_strcmp0 (dev, "cuda") == 0)
    {
      if (!hone_cuda_awq_available (error))
        return NULL;
      want_cuda = TRUE;
    }
  else if (g_strcmp0 (dev, "cpu") != 0)
    want_cuda = hone_cuda_awq_available (&why);
#else
  if (g_strcmp0 (dev, "cuda") == 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_BACKEND,
                   _("HONE_AWQ_DEVICE=cuda, but this build of Hone has no CUDA support"));
      return NULL;
    }
#endif
  if (want_cuda)
    {
#ifdef HONE_HAVE_CUDA
      g_debug ("AWQ: %s on the GPU (CUDA)", calibrate ? "calibration" : "rounding");
      return hone_cuda_awq_quantize (model, tokens, n_samples, seq_len, o, progress, progress_data,
                                     cancellable, error);
#endif
    }
  g_debug ("AWQ: %s on the CPU%s%s", calibrate ? "calibration" : "rounding",
             why ? ": " : "", why ? why->message : "");
  return quantize_cpu (model, tokens, n_samples, seq_len, o, progress, progress_data, cancellable, error);
}
