/* hone-cmd-gen-model.c — `hone gen-model`: a GGUF with random weights and the
 * real shapes of a known model (Llama-3-8B, Qwen2.5-7B, Qwen3-0.6B), for
 * speed measurements where the real weights cannot travel (a GPU machine
 * with no network; speed does not depend on the values, as long as they are
 * not zeros).
 *
 * The file is streamed tensor by tensor so RAM stays at one chunk (≤ 64 MB of
 * output) however large the model: the metadata is serialized by the GGUF
 * writer (a writer with no tensors), the tensor table and the data are
 * written here in the same layout (alignment 32), to a temporary file that is
 * fsynced and renamed into place. Values are uniform in ±0.02·√3 (std 0.02,
 * the scale of an initialised transformer), norms 1 ± 0.02, from a per-row
 * xorshift generator so the threads need no shared state and a seed gives
 * the same file every time.
 *
 * --type q4_k_m lays the K-quant types out as llama.cpp's Q4_K_M recipe does
 * for these shapes (its use_more_bits rule: the first and last eighth of the
 * layers and every third one between keep attn_v and ffn_down in Q6_K; the
 * output matrix Q6_K; every other matrix Q4_K), so that a mixed file — the
 * format most GGUF downloads come in — can be measured too.
 */
#include "hone-cli.h"
#include "hone-backend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#define GEN_ALIGNMENT 32            /* GGUF's default; no general.alignment key written */
#define GEN_CHUNK_BYTES (64u << 20) /* output bytes generated before each write */

typedef struct {
  const char *name;          /* --shape */
  const char *arch;          /* general.architecture */
  const char *human;         /* general.name prefix */
  int n_layers, hidden, n_heads, n_kv_heads, head_dim, ffn, vocab, context;
  float rope_theta, rms_eps;
  gboolean tied;
} GenShape;

/* From each model's config.json on Hugging Face (meta-llama/Meta-Llama-3-8B,
 * Qwen/Qwen2.5-7B-Instruct, Qwen/Qwen3-0.6B). */
static const GenShape shapes[] = {
  { "llama3-8b", "llama", "Random Llama-3-8B", 32, 4096, 32, 8, 128, 14336, 128256, 8192, 500000.0f, 1e-5f, FALSE },
  { "qwen2.5-7b", "qwen2", "Random Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, 32768, 1000000.0f, 1e-6f, FALSE },
  { "qwen3-0.6b", "qwen3", "Random Qwen3-0.6B", 28, 1024, 16, 8, 128, 3072, 151936, 40960, 1000000.0f, 1e-6f, TRUE },
};

typedef enum { FILL_WEIGHT, FILL_NORM, FILL_BIAS } GenFill;

/* --type: one matrix type, or a mix (q4_k_m) */
typedef struct {
  const char *name;          /* as --type takes it */
  const char *human;         /* in general.name and the summary */
  HoneDType type;            /* every matrix's, or the mix's main type */
  gboolean k_m;              /* llama.cpp's Q4_K_M layout of Q4_K and Q6_K */
} GenType;

static const GenType gen_types[] = {
  { "f16", "F16", HONE_DTYPE_F16, FALSE },
  { "bf16", "BF16", HONE_DTYPE_BF16, FALSE },
  { "q8_0", "Q8_0", HONE_DTYPE_Q8_0, FALSE },
  { "q4_0", "Q4_0", HONE_DTYPE_Q4_0, FALSE },
  { "q4_1", "Q4_1", HONE_DTYPE_Q4_1, FALSE },
  { "q4_k", "Q4_K", HONE_DTYPE_Q4_K, FALSE },
  { "q6_k", "Q6_K", HONE_DTYPE_Q6_K, FALSE },
  { "q4_k_m", "Q4_K_M", HONE_DTYPE_Q4_K, TRUE },
};

/* The matrices a Q4_K_M file keeps in Q6_K (llama.cpp's use_more_bits) */
static gboolean
more_bits (int layer, int n_layers)
{
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

typedef struct {
  char *name;
  HoneDType type;
  int n_dims;
  int64_t ne[2];
  GenFill fill;
  guint64 offset;            /* in the data section */
  guint64 nbytes;
} GenTensor;

static void
gen_tensor_free (gpointer p)
{
  GenTensor *t = p;
  g_free (t->name);
  g_free (t);
}

static void
add_tensor (GPtrArray *list, HoneDType type, GenFill fill, int64_t ne0, int64_t ne1, const char *fmt, ...)
  G_GNUC_PRINTF (6, 7);

static void
add_tensor (GPtrArray *list, HoneDType type, GenFill fill, int64_t ne0, int64_t ne1, const char *fmt, ...)
{
  GenTensor *t = g_new0 (GenTensor, 1);
  va_list ap;

  va_start (ap, fmt);
  t->name = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  t->type = type;
  t->fill = fill;
  t->n_dims = ne1 > 0 ? 2 : 1;
  t->ne[0] = ne0;
  t->ne[1] = ne1 > 0 ? ne1 : 1;
  t->nbytes = (guint64) hone_dtype_row_bytes (type, ne0) * (guint64) t->ne[1];
  g_ptr_array_add (list, t);
}

/* llama.cpp's tensor order: embeddings, the layers, the final norm and head. */
static GPtrArray *
tensor_list (const GenShape *s, int n_layers, const GenType *gt)
{
  const HoneDType type = gt->type;
  GPtrArray *list = g_ptr_array_new_with_free_func (gen_tensor_free);
  int64_t q = (int64_t) s->n_heads * s->head_dim, kv = (int64_t) s->n_kv_heads * s->head_dim;
  gboolean qkv_bias = strcmp (s->arch, "qwen2") == 0, qk_norm = strcmp (s->arch, "qwen3") == 0;
  guint64 off = 0;

  add_tensor (list, type, FILL_WEIGHT, s->hidden, s->vocab, "token_embd.weight");
  for (int i = 0; i < n_layers; i++)
    {
      /* attn_v and ffn_down: Q6_K in the layers a Q4_K_M file widens */
      const HoneDType wide = gt->k_m && more_bits (i, n_layers) ? HONE_DTYPE_Q6_K : type;

      add_tensor (list, HONE_DTYPE_F32, FILL_NORM, s->hidden, 0, "blk.%d.attn_norm.weight", i);
      add_tensor (list, type, FILL_WEIGHT, s->hidden, q, "blk.%d.attn_q.weight", i);
      add_tensor (list, type, FILL_WEIGHT, s->hidden, kv, "blk.%d.attn_k.weight", i);
      add_tensor (list, wide, FILL_WEIGHT, s->hidden, kv, "blk.%d.attn_v.weight", i);
      if (qkv_bias)
        {
          add_tensor (list, HONE_DTYPE_F32, FILL_BIAS, q, 0, "blk.%d.attn_q.bias", i);
          add_tensor (list, HONE_DTYPE_F32, FILL_BIAS, kv, 0, "blk.%d.attn_k.bias", i);
          add_tensor (list, HONE_DTYPE_F32, FILL_BIAS, kv, 0, "blk.%d.attn_v.bias", i);
        }
      if (qk_norm)
        {
          add_tensor (list, HONE_DTYPE_F32, FILL_NORM, s->head_dim, 0, "blk.%d.attn_q_norm.weight", i);
          add_tensor (list, HONE_DTYPE_F32, FILL_NORM, s->head_dim, 0, "blk.%d.attn_k_norm.weight", i);
        }
      add_tensor (list, type, FILL_WEIGHT, q, s->hidden, "blk.%d.attn_output.weight", i);
      add_tensor (list, HONE_DTYPE_F32, FILL_NORM, s->hidden, 0, "blk.%d.ffn_norm.weight", i);
      add_tensor (list, type, FILL_WEIGHT, s->hidden, s->ffn, "blk.%d.ffn_gate.weight", i);
      add_tensor (list, type, FILL_WEIGHT, s->hidden, s->ffn, "blk.%d.ffn_up.weight", i);
      add_tensor (list, wide, FILL_WEIGHT, s->ffn, s->hidden, "blk.%d.ffn_down.weight", i);
    }
  add_tensor (list, HONE_DTYPE_F32, FILL_NORM, s->hidden, 0, "output_norm.weight");
  if (!s->tied)
    add_tensor (list, gt->k_m ? HONE_DTYPE_Q6_K : type, FILL_WEIGHT, s->hidden, s->vocab, "output.weight");
  for (guint i = 0; i < list->len; i++)
    {
      GenTensor *t = g_ptr_array_index (list, i);
      t->offset = off;
      off += t->nbytes;
      off += (GEN_ALIGNMENT - off % GEN_ALIGNMENT) % GEN_ALIGNMENT;
    }
  return list;
}

/* GPT-2's byte ↔ printable-character map: byte-level BPE stores byte b as
 * this code point, so the 256 byte tokens make every text encodable. */
static gunichar
byte_char (int b)
{
  int n = 0;
  if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
    return (gunichar) b;
  for (int c = 0; c < b; c++)
    if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)))
      n++;
  return (gunichar) (256 + n);
}

/* Everything before the data section: the writer's metadata block with the
 * tensor count patched in, then the tensor table, padded to the alignment. */
static GByteArray *
build_header (const GenShape *s, int n_layers, const GenType *gt, GPtrArray *tensors, GError **error)
{
  g_autoptr (HoneGgufWriter) w = hone_gguf_writer_new ();
  g_autoptr (GBytes) meta = NULL;
  g_autofree char *key = NULL;
  g_autofree char *name = NULL;
  GPtrArray *tokens;
  g_autofree gint32 *types = g_new (gint32, s->vocab);
  const char *empty[1] = { NULL };
  GByteArray *h;
  const guint8 *p;
  gsize len;
  guint64 n_tensors = GUINT64_TO_LE ((guint64) tensors->len);

#define KEY(suffix) (g_free (key), key = g_strdup_printf ("%s.%s", s->arch, suffix))
  hone_gguf_writer_add_string (w, "general.architecture", s->arch, -1);
  hone_gguf_writer_add_u32 (w, KEY ("block_count"), (guint32) n_layers);
  hone_gguf_writer_add_u32 (w, KEY ("context_length"), (guint32) s->context);
  hone_gguf_writer_add_u32 (w, KEY ("embedding_length"), (guint32) s->hidden);
  hone_gguf_writer_add_u32 (w, KEY ("feed_forward_length"), (guint32) s->ffn);
  hone_gguf_writer_add_u32 (w, KEY ("attention.head_count"), (guint32) s->n_heads);
  hone_gguf_writer_add_u32 (w, KEY ("attention.head_count_kv"), (guint32) s->n_kv_heads);
  hone_gguf_writer_add_u32 (w, KEY ("attention.key_length"), (guint32) s->head_dim);
  hone_gguf_writer_add_u32 (w, KEY ("attention.value_length"), (guint32) s->head_dim);
  hone_gguf_writer_add_u32 (w, KEY ("vocab_size"), (guint32) s->vocab);
  hone_gguf_writer_add_f32 (w, KEY ("rope.freq_base"), s->rope_theta);
  hone_gguf_writer_add_f32 (w, KEY ("attention.layer_norm_rms_epsilon"), s->rms_eps);
#undef KEY

  /* A byte-level vocabulary (no merges: each byte is a token), padded to the
   * real size with unreachable tokens; the last two are BOS and EOS. */
  tokens = g_ptr_array_new_full ((guint) s->vocab + 1, g_free);
  for (int i = 0; i < s->vocab; i++)
    {
      char *t;
      if (i < 256)
        {
          t = g_malloc0 (8);
          g_unichar_to_utf8 (byte_char (i), t);
        }
      else if (i == s->vocab - 2)
        t = g_strdup ("<|begin_of_text|>");
      else if (i == s->vocab - 1)
        t = g_strdup ("<|end_of_text|>");
      else
        t = g_strdup_printf ("<|unused_%d|>", i);
      g_ptr_array_add (tokens, t);
      types[i] = i >= s->vocab - 2 ? 3 /* control */ : 1 /* normal */;
    }
  hone_gguf_writer_add_string (w, "tokenizer.ggml.model", "gpt2", -1);
  hone_gguf_writer_add_string (w, "tokenizer.ggml.pre", "default", -1);
  hone_gguf_writer_add_string_array (w, "tokenizer.ggml.tokens", (const char *const *) tokens->pdata, NULL,
                                     (guint64) s->vocab);
  hone_gguf_writer_add_array (w, "tokenizer.ggml.token_type", HONE_GGUF_INT32, types, (guint64) s->vocab);
  hone_gguf_writer_add_string_array (w, "tokenizer.ggml.merges", empty, NULL, 0);
  hone_gguf_writer_add_u32 (w, "tokenizer.ggml.bos_token_id", (guint32) s->vocab - 2);
  hone_gguf_writer_add_u32 (w, "tokenizer.ggml.eos_token_id", (guint32) s->vocab - 1);
  g_ptr_array_unref (tokens);
  /* Last on purpose: its value ends in a non-zero byte, so the writer's
   * zero padding after it can be told apart and dropped below. */
  name = g_strdup_printf ("%s (random weights, %s, %d layers)", s->human, gt->human, n_layers);
  hone_gguf_writer_add_string (w, "general.name", name, -1);

  meta = hone_gguf_writer_to_bytes (w, error);
  if (meta == NULL)
    return NULL;
  p = g_bytes_get_data (meta, &len);
  while (len > 24 && p[len - 1] == 0)
    len--;
  h = g_byte_array_sized_new ((guint) len + tensors->len * 64u);
  g_byte_array_append (h, p, (guint) len);
  memcpy (h->data + 8, &n_tensors, 8);
  for (guint i = 0; i < tensors->len; i++)
    {
      GenTensor *t = g_ptr_array_index (tensors, i);
      guint64 l = GUINT64_TO_LE ((guint64) strlen (t->name)), v;
      guint32 u;
      g_byte_array_append (h, (const guint8 *) &l, 8);
      g_byte_array_append (h, (const guint8 *) t->name, (guint) strlen (t->name));
      u = GUINT32_TO_LE ((guint32) t->n_dims);
      g_byte_array_append (h, (const guint8 *) &u, 4);
      for (int d = 0; d < t->n_dims; d++)
        {
          v = GUINT64_TO_LE ((guint64) t->ne[d]);
          g_byte_array_append (h, (const guint8 *) &v, 8);
        }
      u = GUINT32_TO_LE ((guint32) t->type);
      g_byte_array_append (h, (const guint8 *) &u, 4);
      v = GUINT64_TO_LE (t->offset);
      g_byte_array_append (h, (const guint8 *) &v, 8);
    }
  while (h->len % GEN_ALIGNMENT)
    g_byte_array_append (h, (const guint8 *) "", 1);
  return h;
}

/* ---- filling ------------------------------------------------------------ */

typedef struct {
  const GenTensor *t;
  guint64 seed;
  int64_t row0, row1;        /* this job's rows */
  int64_t chunk_row0;        /* first row of the chunk buffer */
  guint8 *out;               /* chunk buffer */
  gsize row_bytes;
} GenJob;

static inline guint64
splitmix64 (guint64 *x)
{
  guint64 z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static gpointer
gen_rows (gpointer data)
{
  GenJob *j = data;
  int64_t n = j->t->ne[0];
  float *row = g_new (float, n);
  /* Uniform on ±a has standard deviation a/√3: a = 0.02·√3 gives 0.02. */
  const float a = 0.0346410162f, scale = a * 2.0f / 4294967296.0f;

  for (int64_t r = j->row0; r < j->row1; r++)
    {
      guint64 st = j->seed ^ ((guint64) r * 0xD1B54A32D192ED03ull);
      for (int64_t i = 0; i < n; i += 2)
        {
          guint64 x = splitmix64 (&st);
          float u0 = (float) (guint32) x * scale - a, u1 = (float) (guint32) (x >> 32) * scale - a;
          row[i] = j->t->fill == FILL_NORM ? 1.0f + u0 : u0;
          if (i + 1 < n)
            row[i + 1] = j->t->fill == FILL_NORM ? 1.0f + u1 : u1;
        }
      hone_quantize_row (j->t->type, row, j->out + (gsize) (r - j->chunk_row0) * j->row_bytes, n);
    }
  g_free (row);
  return NULL;
}

static gboolean
write_all (int fd, const void *data, gsize len, const char *path, GError **error)
{
  const guint8 *p = data;
  while (len > 0)
    {
      ssize_t n = write (fd, p, MIN (len, (gsize) 1 << 30));
      if (n < 0)
        {
          int e = errno;
          if (e == EINTR)
            continue;
          g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot write %s: %s"), path, g_strerror (e));
          return FALSE;
        }
      p += n;
      len -= (gsize) n;
    }
  return TRUE;
}

static gboolean
write_tensor (int fd, const char *path, const GenTensor *t, guint64 seed, int n_threads, GError **error)
{
  gsize row_bytes = hone_dtype_row_bytes (t->type, t->ne[0]);
  int64_t rows = t->ne[1];
  int64_t chunk_rows = MAX ((int64_t) 1, (int64_t) (GEN_CHUNK_BYTES / row_bytes));
  g_autofree guint8 *buf = g_malloc ((gsize) MIN (chunk_rows, rows) * row_bytes);
  static const guint8 zeros[GEN_ALIGNMENT] = { 0 };

  for (int64_t r0 = 0; r0 < rows; r0 += chunk_rows)
    {
      int64_t r1 = MIN (rows, r0 + chunk_rows), per;
      int nt = (int) MIN ((int64_t) n_threads, r1 - r0);
      GenJob jobs[256];
      GThread *threads[256];

      nt = CLAMP (nt, 1, 256);
      per = (r1 - r0 + nt - 1) / nt;
      for (int k = 0; k < nt; k++)
        {
          jobs[k] = (GenJob) { t, seed, MIN (r1, r0 + k * per), MIN (r1, r0 + (k + 1) * per), r0, buf, row_bytes };
          threads[k] = k == 0 ? NULL : g_thread_new ("gen-model", gen_rows, &jobs[k]);
        }
      gen_rows (&jobs[0]);
      for (int k = 1; k < nt; k++)
        g_thread_join (threads[k]);
      if (!write_all (fd, buf, (gsize) (r1 - r0) * row_bytes, path, error))
        return FALSE;
    }
  return write_all (fd, zeros, (GEN_ALIGNMENT - t->nbytes % GEN_ALIGNMENT) % GEN_ALIGNMENT, path, error);
}

static gboolean
generate (const GenShape *s, int n_layers, const GenType *gt, guint64 seed, int n_threads,
          const char *path, gboolean quiet, GError **error)
{
  g_autoptr (GPtrArray) tensors = tensor_list (s, n_layers, gt);
  g_autoptr (GByteArray) header = build_header (s, n_layers, gt, tensors, error);
  g_autofree char *tmp = NULL;
  gint64 t0 = g_get_monotonic_time ();
  guint64 total = 0;
  int fd;
  gboolean ok;

  if (header == NULL)
    return FALSE;
  tmp = g_strconcat (path, ".XXXXXX", NULL);
  fd = g_mkstemp (tmp);
  if (fd < 0)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot create %s: %s"), tmp, g_strerror (e));
      return FALSE;
    }
  ok = write_all (fd, header->data, header->len, tmp, error);
  for (guint i = 0; ok && i < tensors->len; i++)
    {
      const GenTensor *t = g_ptr_array_index (tensors, i);
      /* Each tensor its own stream: reordering or cutting layers changes no other tensor. */
      guint64 ts = seed ^ g_str_hash (t->name) * 0x9E3779B97F4A7C15ull;
      ok = write_tensor (fd, tmp, t, ts, n_threads, error);
      total += t->nbytes;
    }
  if (ok && fsync (fd) != 0)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot write %s: %s"), tmp, g_strerror (e));
      ok = FALSE;
    }
  if (ok)
    fchmod (fd, 0644);
  close (fd);
  if (ok && g_rename (tmp, path) != 0)
    {
      int e = errno;
      g_set_error (error, HONE_ERROR, HONE_ERROR_IO, _("cannot rename %s to %s: %s"), tmp, path, g_strerror (e));
      ok = FALSE;
    }
  if (!ok)
    {
      g_unlink (tmp);
      return FALSE;
    }
  if (!quiet)
    printf (_("%s: %s, %s, %d layers, %u tensors, %.2f GB of weights in %.1f s\n"), path, s->name,
            gt->human, n_layers, tensors->len, (double) total / 1e9,
            (double) (g_get_monotonic_time () - t0) / 1e6);
  return TRUE;
}

int
hone_cmd_gen_model (int argc, char **argv)
{
  g_autofree char *shape = NULL;
  g_autofree char *type_name = NULL;
  g_autofree char *output = NULL;
  int layers = 0, threads = 0;
  gint64 seed = 1;
  gboolean quiet = FALSE;
  GOptionEntry entries[] = {
    { "shape", 's', 0, G_OPTION_ARG_STRING, &shape, N_("llama3-8b, qwen2.5-7b or qwen3-0.6b"), N_("SHAPE") },
    { "type", 'T', 0, G_OPTION_ARG_STRING, &type_name,
      N_("Matrix type: f16, bf16 (default), q8_0, q4_0, q4_1, q4_k, q6_k, or q4_k_m (llama.cpp's Q4_K/Q6_K mix)"),
      N_("TYPE") },
    { "layers", 'l', 0, G_OPTION_ARG_INT, &layers, N_("Keep only the first N layers (default: all)"), N_("N") },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &output, N_("The GGUF file to write"), N_("FILE") },
    { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, N_("Random seed (default 1)"), N_("SEED") },
    { "threads", 't', 0, G_OPTION_ARG_INT, &threads, N_("Threads (0: one per usable CPU)"), N_("N") },
    { "quiet", 'q', 0, G_OPTION_ARG_NONE, &quiet, N_("Print nothing on success"), NULL },
    { NULL },
  };
  g_autoptr (GOptionContext) ctx = hone_cli_context_new (NULL,
      _("Write a GGUF with random weights and the real shapes of a known model, "
        "with a byte-level tokenizer padded to the real vocabulary (for speed measurements)."));
  const GenShape *s = NULL;
  const GenType *gt = &gen_types[1];   /* bf16 */
  GError *error = NULL;

  g_option_context_add_main_entries (ctx, entries, GETTEXT_PACKAGE);
  if (!hone_cli_parse (ctx, &argc, &argv))
    return 1;
  if (argc > 1)
    {
      g_autofree char *msg = g_strdup_printf (_("unexpected argument “%s”"), argv[1]);
      return hone_cli_fail_literal (msg);
    }
  for (guint i = 0; shape != NULL && i < G_N_ELEMENTS (shapes); i++)
    if (strcmp (shape, shapes[i].name) == 0)
      s = &shapes[i];
  if (s == NULL)
    return hone_cli_fail_literal (_("--shape must be llama3-8b, qwen2.5-7b or qwen3-0.6b"));
  if (type_name != NULL)
    {
      gt = NULL;
      for (guint i = 0; i < G_N_ELEMENTS (gen_types); i++)
        if (g_ascii_strcasecmp (type_name, gen_types[i].name) == 0)
          gt = &gen_types[i];
      if (gt == NULL)
        return hone_cli_fail_literal (_("--type must be f16, bf16, q8_0, q4_0, q4_1, q4_k, q6_k or q4_k_m"));
    }
  if (output == NULL)
    return hone_cli_fail_literal (_("give the output file with -o FILE"));
  if (layers < 0 || layers > s->n_layers)
    {
      g_autofree char *msg = g_strdup_printf (_("--layers must be between 1 and %d"), s->n_layers);
      return hone_cli_fail_literal (msg);
    }
  if (threads < 0)
    return hone_cli_fail_literal (_("--threads must be ≥ 0"));
  if (threads == 0)
    threads = hone_cpu_backend_default_threads ();
  if (!generate (s, layers ? layers : s->n_layers, gt, (guint64) seed, MIN (threads, 256), output, quiet, &error))
    return hone_cli_fail (error);
  return 0;
}
