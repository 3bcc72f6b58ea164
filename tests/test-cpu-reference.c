/* test-cpu-reference.c — the CPU backend against llama.cpp on the default model.
 *
 * Fixture: tests/data/cpu/llamacpp-reference.json, written by
 * tests/reference/gen_cpu_reference.py (llama-cpp-python, pinned). Token ids
 * come from the fixture, so this test needs neither Python nor our tokenizer.
 *
 * How close two correct engines can be on this model: llama.cpp against
 * itself, same weights, differs by up to 1.16 in a top-20 logit and agrees on
 * the top-1 token at only 97.3 % of the 512 positions when flash attention is
 * switched on, and at 97.7 % (max Δ 0.63) when the text is fed one token at a
 * time instead of as one batch — the 135M model turns rounding-order
 * differences of 8-bit activations into logit differences of a few tenths, so
 * near-ties flip. Hone measured (2026-11-29): 96.9 % top-1, max Δ 1.11 over
 * the top-20, every disagreement a near-tie in llama.cpp's own logits (gap
 * ≤ 0.21), perplexity −0.08 %. Requirements (suite 'model'):
 *   - perplexity over the text within 1 % of llama.cpp's;
 *   - top-1 agreement ≥ 95 %, and where the top-1 differs, llama.cpp's logit
 *     for our token is within NEAR_TIE of its top-1 (no real disagreement);
 *   - max |Δlogit| over llama.cpp's top-20 ≤ TOP20_BOUND at every position,
 *     over the full vocabulary at 3 positions ≤ FULL_BOUND;
 *   - greedy continuations, teacher-forced on llama.cpp's 64 tokens: our
 *     argmax is llama.cpp's token at ≥ 95 % of the steps, and a near-tie
 *     (our logit for llama.cpp's token within NEAR_TIE of our max) at the rest;
 *     and free-running greedy output identical up to the first near-tie.
 *
 * The precise mode (f32 activations, HoneBackendOptions.precise_activations)
 * against an f32 reference: tests/data/cpu/llamacpp-f32-reference.json, by
 * tests/reference/gen_cpu_f32_reference.py — llama.cpp on an all-F32 GGUF made
 * from the same Q4_1 file by the gguf package's dequantize, f16 KV cache,
 * flash attention off, so neither side rounds activations to 8 bits. (llama.cpp
 * Q4_1 agrees with that reference at 498/512 positions, 97.3 %, and on 2 of the
 * 6 greedy continuations: the 8-bit activations are the whole difference.)
 * Requirements (suite 'model', paths /cpu/reference/precise/…):
 *   - top-1 agreement >= 99 % over the 512 positions;
 *   - max |dlogit| over the reference's top-20 <= PRECISE_TOP20_BOUND, over the
 *     full vocabulary at 3 positions <= PRECISE_FULL_BOUND;
 *   - perplexity within 1 %;
 *   - free-running greedy 64-token continuations identical for >= 5 of 6;
 *   - /cpu/reference/precise/engine: the option travels through HoneEngine
 *     (as `hone run --precise` sets it) to the backend.
 * The fast path is measured against the f32 reference too (/cpu/reference/
 * fast-vs-f32/…): 96.5 % top-1, max |dlogit| 0.91, perplexity +0.27 %, 1/6
 * continuations identical (llama.cpp Q4_1 against the same reference: 97.3 %,
 * 2/6). It is held to the criteria of the Q4_1 comparison (>= 95 %, every flip
 * a near-tie, FAST_F32_TOP20_BOUND, perplexity within 1 %), not to 99 %.
 */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "hone-backend.h"
#include "hone-engine.h"
#include "hone-model.h"
#include "hone-sampler.h"

/* Measured maxima × ~1.4 (see above), except the top-20 bound against
 * llama.cpp Q4_1. Two engines that both round activations to 8 bits differ by
 * up to the sum of their distances from the f32 reference: llama.cpp Q4_1 is
 * up to 0.81 from it (position 31), Hone's fast path 0.85. Session 29's panels
 * (hone-cpu-panel.h) sum the rows in another order: against the f32 reference
 * Hone got better (perplexity +0.15 % instead of +0.55 %, top-1 497 instead of
 * 495 of 512, max 0.848 instead of 0.849), but at position 173, where
 * llama.cpp is 0.61 on one side of the f32 logits, Hone now lands on the other
 * side: 1.53 against llama.cpp (0.88 before). So TOP20_BOUND = (0.81 + 0.85)
 * × 1.2, and the fast path against the f32 reference, the tighter check, is
 * held to its own measured 0.85 × 1.4. */
#define TOP20_BOUND 2.0
#define FAST_F32_TOP20_BOUND 1.2
#define FULL_BOUND 1.0
/* A top-1 flip is acceptable where the reference's own gap between the two
 * tokens is within NEAR_TIE. llama.cpp Q4_1 flips against the f32 reference at
 * gaps up to 0.19. Hone's fast path, with four combinations of its kernels
 * (session 29: panels on/off × 16-query attention batches on/off), has the
 * same rms |dlogit| against the f32 reference over the top-20s, 0.162–0.169
 * (its max 0.78–0.85), and flips at gaps up to 0.28 (tiles and one-head
 * attention) and 0.39 (batches; position 463, where Hone's own margin between
 * the two tokens is 0.05). Bound: 0.39 × ~1.3. */
#define NEAR_TIE 0.5
/* Precise mode vs the f32 reference, measured 2026-11-29: top-1 511/512 (the
 * flip: a 0.0001 tie in llama.cpp's logits), max |dlogit| 0.0132 over the
 * top-20 and 0.0138 over the full vocabulary, perplexity +0.006 %, 6/6
 * continuations identical. Bounds: measured × ~1.5. */
#define PRECISE_TOP20_BOUND 0.02
#define PRECISE_FULL_BOUND 0.02

static JsonObject *ref, *ref32;
static HoneModel *model;
static HoneBackend *be, *be_precise;

static char *
model_path (void)
{
  const char *env = g_getenv ("HONE_DEFAULT_MODEL");
  if (env != NULL && *env)
    return g_strdup (env);
  return g_build_filename (g_get_user_cache_dir (), "hone", "models", "SmolLM2-135M-Instruct.Q4_1.gguf", NULL);
}

static gint32 *
ids_of (JsonArray *a, int *n)
{
  gint32 *ids;
  *n = (int) json_array_get_length (a);
  ids = g_new (gint32, *n);
  for (int i = 0; i < *n; i++)
    ids[i] = (gint32) json_array_get_int_element (a, i);
  return ids;
}

static int
argmax (const float *x, int n)
{
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best])
      best = i;
  return best;
}

static void
test_text (void)
{
  JsonArray *top_ids = json_object_get_array_member (ref, "top_ids");
  JsonArray *top_logits = json_object_get_array_member (ref, "top_logits");
  JsonArray *full_pos = json_object_get_array_member (ref, "full_positions");
  JsonArray *full_b64 = json_object_get_array_member (ref, "full_logits_f32_b64");
  double ref_ppl = json_object_get_double_member (ref, "perplexity");
  const int V = model->config.vocab;
  g_autoptr(GError) error = NULL;
  g_autofree gint32 *ids = NULL;
  g_autofree float *logits = NULL;
  int n, seq, agree = 0;
  double max_top = 0, nll = 0, ppl, max_full = 0;
  HoneBatch b;

  ids = ids_of (json_object_get_array_member (ref, "text_ids"), &n);
  g_assert_cmpint (n, ==, 512);
  g_assert_cmpint (V, ==, json_object_get_int_member (ref, "n_vocab"));
  logits = g_new (float, (gsize) n * V);
  seq = be->klass->seq_new (be, &error);
  g_assert_no_error (error);
  b = (HoneBatch) { seq, ids, n, TRUE, logits };
  g_assert_true (hone_backend_forward (be, &b, NULL, &error));
  g_assert_no_error (error);

  for (int t = 0; t < n; t++)
    {
      const float *l = logits + (size_t) t * V;
      JsonArray *ti = json_array_get_array_element (top_ids, t);
      JsonArray *tl = json_array_get_array_element (top_logits, t);
      double mx = -INFINITY, se = 0;

      if (argmax (l, V) == json_array_get_int_element (ti, 0))
        agree++;
      else
        {
          /* llama.cpp's own gap between its top-1 and our choice */
          int ours = argmax (l, V);
          double gap = INFINITY;
          for (guint k = 0; k < json_array_get_length (ti); k++)
            if (json_array_get_int_element (ti, k) == ours)
              gap = json_array_get_double_element (tl, 0) - json_array_get_double_element (tl, k);
          if (!(gap <= NEAR_TIE))
            g_error ("position %d: our top-1 %d is %.3f below llama.cpp's top-1 %d in its logits",
                     t, ours, gap, (int) json_array_get_int_element (ti, 0));
        }
      {
        double pos_max = 0;
        for (guint k = 0; k < json_array_get_length (ti); k++)
          {
            int id = (int) json_array_get_int_element (ti, k);
            pos_max = fmax (pos_max, fabs (l[id] - json_array_get_double_element (tl, k)));
          }
        max_top = fmax (max_top, pos_max);
        if (g_getenv ("HONE_CPU_REF_DEBUG"))
          g_printerr ("%d %.4f %d %d\n", t, pos_max, argmax (l, V), (int) json_array_get_int_element (ti, 0));
      }
      if (t + 1 < n)
        {
          for (int v = 0; v < V; v++)
            mx = fmax (mx, l[v]);
          for (int v = 0; v < V; v++)
            se += exp ((double) l[v] - mx);
          nll += log (se) + mx - l[ids[t + 1]];
        }
    }
  ppl = exp (nll / (n - 1));
  for (guint i = 0; i < json_array_get_length (full_pos); i++)
    {
      int p = (int) json_array_get_int_element (full_pos, i);
      gsize len = 0;
      g_autofree guchar *raw = g_base64_decode (json_array_get_string_element (full_b64, i), &len);
      g_assert_cmpuint (len, ==, (gsize) V * 4);
      for (int v = 0; v < V; v++)
        {
          float r;
          memcpy (&r, raw + 4 * v, 4);
          max_full = fmax (max_full, fabs (logits[(size_t) p * V + v] - r));
        }
    }
  g_test_message ("top-1 agreement %d/%d (%.2f %%), max |dlogit| over llama.cpp's top-20 %.4f (bound %.2f), "
                  "max |dlogit| over the full vocabulary at 3 positions %.4f (bound %.2f), "
                  "perplexity %.4f vs llama.cpp %.4f (%+.3f %%)",
                  agree, n, 100.0 * agree / n, max_top, TOP20_BOUND, max_full, FULL_BOUND,
                  ppl, ref_ppl, 100.0 * (ppl / ref_ppl - 1));
  g_assert_cmpfloat (agree, >=, 0.95 * n);
  g_assert_cmpfloat (max_top, <=, TOP20_BOUND);
  g_assert_cmpfloat (max_full, <=, FULL_BOUND);
  g_assert_cmpfloat (fabs (ppl / ref_ppl - 1), <=, 0.01);
  be->klass->seq_free (be, seq);
}

static void
test_greedy (void)
{
  JsonArray *conts = json_object_get_array_member (ref, "continuations");
  const int V = model->config.vocab;
  g_autofree float *logits = g_new (float, V);
  int steps = 0, same = 0;

  g_assert_cmpuint (json_array_get_length (conts), >=, 5);
  for (guint c = 0; c < json_array_get_length (conts); c++)
    {
      JsonObject *o = json_array_get_object_element (conts, c);
      g_autoptr(GError) error = NULL;
      g_autofree gint32 *prompt = NULL, *want = NULL;
      int np, nw, seq = be->klass->seq_new (be, &error), free_run = -1;
      HoneBatch b = { 0 };

      g_assert_no_error (error);
      prompt = ids_of (json_object_get_array_member (o, "prompt_ids"), &np);
      want = ids_of (json_object_get_array_member (o, "greedy_ids"), &nw);
      b = (HoneBatch) { seq, prompt, np, FALSE, logits };
      g_assert_true (hone_backend_forward (be, &b, NULL, &error));
      for (int i = 0; i < nw; i++)
        {
          gint32 tok = argmax (logits, V);
          steps++;
          if (tok == want[i])
            same++;
          else
            {
              double gap = logits[tok] - logits[want[i]];
              if (free_run < 0)
                free_run = i;
              if (!(gap <= NEAR_TIE))
                g_error ("prompt %u (%s): step %d: we pick %d, llama.cpp %d, %.3f below ours",
                         c, json_object_get_string_member (o, "prompt"), i, tok, want[i], gap);
            }
          /* teacher forcing: continue with llama.cpp's token */
          b = (HoneBatch) { seq, &want[i], 1, FALSE, logits };
          g_assert_true (hone_backend_forward (be, &b, NULL, &error));
        }
      g_test_message ("prompt %u: free-running greedy output identical for %d of %d tokens%s",
                      c, free_run < 0 ? nw : free_run, nw, free_run < 0 ? "" : " (then a near-tie flips)");
      be->klass->seq_free (be, seq);
    }
  g_test_message ("teacher-forced greedy agreement %d/%d (%.1f %%)", same, steps, 100.0 * same / steps);
  g_assert_cmpfloat (same, >=, 0.95 * steps);
}

/* ------------------------------------------------------------ vs the f32 reference */

typedef struct {
  int n, agree;
  double max_top, max_full, ppl, ref_ppl;
  double max_tie_gap;         /* reference's logit gap top-1 − our top-1 where they differ */
} TextStats;

/* The 512-token text through @backend in one batch, compared with @r. */
static void
text_stats (HoneBackend *backend, JsonObject *r, TextStats *st)
{
  JsonArray *top_ids = json_object_get_array_member (r, "top_ids");
  JsonArray *top_logits = json_object_get_array_member (r, "top_logits");
  JsonArray *full_pos = json_object_get_array_member (r, "full_positions");
  JsonArray *full_b64 = json_object_get_array_member (r, "full_logits_f32_b64");
  const int V = model->config.vocab;
  g_autoptr(GError) error = NULL;
  g_autofree gint32 *ids = NULL;
  g_autofree float *logits = NULL;
  double nll = 0;
  int seq;
  HoneBatch b;

  memset (st, 0, sizeof *st);
  ids = ids_of (json_object_get_array_member (r, "text_ids"), &st->n);
  g_assert_cmpint (st->n, ==, 512);
  g_assert_cmpint (V, ==, json_object_get_int_member (r, "n_vocab"));
  logits = g_new (float, (gsize) st->n * V);
  seq = backend->klass->seq_new (backend, &error);
  g_assert_no_error (error);
  b = (HoneBatch) { seq, ids, st->n, TRUE, logits };
  g_assert_true (hone_backend_forward (backend, &b, NULL, &error));
  g_assert_no_error (error);
  backend->klass->seq_free (backend, seq);

  for (int t = 0; t < st->n; t++)
    {
      const float *l = logits + (size_t) t * V;
      JsonArray *ti = json_array_get_array_element (top_ids, t);
      JsonArray *tl = json_array_get_array_element (top_logits, t);
      int ours = argmax (l, V);
      double mx = -INFINITY, se = 0;

      if (ours == json_array_get_int_element (ti, 0))
        st->agree++;
      else
        {
          double gap = INFINITY;
          for (guint k = 0; k < json_array_get_length (ti); k++)
            if (json_array_get_int_element (ti, k) == ours)
              gap = json_array_get_double_element (tl, 0) - json_array_get_double_element (tl, k);
          st->max_tie_gap = fmax (st->max_tie_gap, gap);
        }
      for (guint k = 0; k < json_array_get_length (ti); k++)
        {
          int id = (int) json_array_get_int_element (ti, k);
          st->max_top = fmax (st->max_top, fabs (l[id] - json_array_get_double_element (tl, k)));
        }
      if (t + 1 < st->n)
        {
          for (int v = 0; v < V; v++)
            mx = fmax (mx, l[v]);
          for (int v = 0; v < V; v++)
            se += exp ((double) l[v] - mx);
          nll += log (se) + mx - l[ids[t + 1]];
        }
    }
  st->ppl = exp (nll / (st->n - 1));
  st->ref_ppl = json_object_get_double_member (r, "perplexity");
  for (guint i = 0; i < json_array_get_length (full_pos); i++)
    {
      int p = (int) json_array_get_int_element (full_pos, i);
      gsize len = 0;
      g_autofree guchar *raw = g_base64_decode (json_array_get_string_element (full_b64, i), &len);
      g_assert_cmpuint (len, ==, (gsize) V * 4);
      for (int v = 0; v < V; v++)
        {
          float rv;
          memcpy (&rv, raw + 4 * v, 4);
          st->max_full = fmax (st->max_full, fabs (logits[(size_t) p * V + v] - rv));
        }
    }
}

static void
text_report (const char *who, const TextStats *st)
{
  g_test_message ("%s vs llama.cpp f32: top-1 agreement %d/%d (%.2f %%), max |dlogit| over its top-20 %.4f, "
                  "over the full vocabulary at 3 positions %.4f, largest reference gap at a disagreement %.4f, "
                  "perplexity %.4f vs %.4f (%+.3f %%)",
                  who, st->agree, st->n, 100.0 * st->agree / st->n, st->max_top, st->max_full,
                  st->max_tie_gap, st->ppl, st->ref_ppl, 100.0 * (st->ppl / st->ref_ppl - 1));
}

/* Free-running greedy from each prompt of @r; returns how many of the
 * continuations are identical over all their tokens. */
static int
greedy_identical (HoneBackend *backend, JsonObject *r, const char *who)
{
  JsonArray *conts = json_object_get_array_member (r, "continuations");
  const int V = model->config.vocab;
  g_autofree float *logits = g_new (float, V);
  int identical = 0;

  for (guint c = 0; c < json_array_get_length (conts); c++)
    {
      JsonObject *o = json_array_get_object_element (conts, c);
      g_autoptr(GError) error = NULL;
      g_autofree gint32 *prompt = NULL, *want = NULL;
      int np, nw, same = 0, seq = backend->klass->seq_new (backend, &error);
      HoneBatch b;

      g_assert_no_error (error);
      prompt = ids_of (json_object_get_array_member (o, "prompt_ids"), &np);
      want = ids_of (json_object_get_array_member (o, "greedy_ids"), &nw);
      b = (HoneBatch) { seq, prompt, np, FALSE, logits };
      g_assert_true (hone_backend_forward (backend, &b, NULL, &error));
      g_assert_no_error (error);
      for (; same < nw; same++)
        {
          gint32 tok = argmax (logits, V);
          if (tok != want[same])
            {
              g_test_message ("%s, prompt %u: step %d picks %d, the reference %d (our logits differ by %.4f)",
                              who, c, same, tok, want[same], logits[tok] - logits[want[same]]);
              break;
            }
          if (same + 1 == nw)
            continue;
          b = (HoneBatch) { seq, &tok, 1, FALSE, logits };
          g_assert_true (hone_backend_forward (backend, &b, NULL, &error));
          g_assert_no_error (error);
        }
      if (same == nw)
        identical++;
      g_test_message ("%s, prompt %u: greedy output identical for %d of %d tokens", who, c, same, nw);
      backend->klass->seq_free (backend, seq);
    }
  g_test_message ("%s: %d of %u greedy continuations identical to llama.cpp f32",
                  who, identical, json_array_get_length (conts));
  return identical;
}

static void
test_precise_text (void)
{
  TextStats st;

  text_stats (be_precise, ref32, &st);
  text_report ("precise", &st);
  g_assert_cmpfloat (st.agree, >=, 0.99 * st.n);
  g_assert_cmpfloat (st.max_top, <=, PRECISE_TOP20_BOUND);
  g_assert_cmpfloat (st.max_full, <=, PRECISE_FULL_BOUND);
  g_assert_cmpfloat (fabs (st.ppl / st.ref_ppl - 1), <=, 0.01);
}

static void
test_precise_greedy (void)
{
  JsonArray *conts = json_object_get_array_member (ref32, "continuations");

  g_assert_cmpuint (json_array_get_length (conts), >=, 6);
  g_assert_cmpint (greedy_identical (be_precise, ref32, "precise"), >=, 5);
}

/* The fast path (8-bit activations) against the f32 reference: measured and
 * reported; held to the same near-tie criteria as against llama.cpp Q4_1. */
static void
test_fast_f32_text (void)
{
  TextStats st;

  text_stats (be, ref32, &st);
  text_report ("fast path", &st);
  g_assert_cmpfloat (st.agree, >=, 0.95 * st.n);
  g_assert_cmpfloat (st.max_tie_gap, <=, NEAR_TIE);
  g_assert_cmpfloat (st.max_top, <=, FAST_F32_TOP20_BOUND);
  g_assert_cmpfloat (fabs (st.ppl / st.ref_ppl - 1), <=, 0.01);
}

static void
test_fast_f32_greedy (void)
{
  greedy_identical (be, ref32, "fast path");
}

/* The option travels: an engine with "precise" set (what `hone run --precise`
 * does) generates the f32 reference's greedy continuation of the first prompt
 * (up to its EOS), which the fast path leaves after a few tokens. */
static void
test_precise_engine (void)
{
  JsonObject *o = json_array_get_object_element (json_object_get_array_member (ref32, "continuations"), 0);
  g_autoptr(HoneEngine) engine = hone_engine_new ();
  g_autoptr(GError) error = NULL;
  g_autofree char *path = model_path ();
  g_autofree gint32 *prompt = NULL, *want = NULL;
  HoneSession *session;
  HoneGenerateResult *r;
  HoneSamplerParams params;
  int np, nw, n;

  hone_engine_set_n_threads (engine, 2);
  hone_engine_set_context_length (engine, 256);
  hone_engine_set_precise (engine, TRUE);
  g_assert_true (hone_engine_get_precise (engine));
  g_assert_true (hone_engine_load_sync (engine, path, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  hone_sampler_params_init_greedy (&params);
  params.max_tokens = 64;
  session = hone_session_new (engine);
  r = hone_session_complete_sync (session, json_object_get_string_member (o, "prompt"), &params,
                                  NULL, NULL, NULL, &error);
  g_assert_no_error (error);
  prompt = ids_of (json_object_get_array_member (o, "prompt_ids"), &np);
  want = ids_of (json_object_get_array_member (o, "greedy_ids"), &nw);
  g_assert_cmpmem (r->prompt_tokens->data, r->prompt_tokens->len * sizeof (gint32), prompt, np * sizeof (gint32));
  n = (int) r->generated_tokens->len;
  g_test_message ("engine --precise: %d tokens generated, the reference's first %d", n, n);
  g_assert_cmpint (n, >=, 16);
  g_assert_cmpint (n, <=, nw);
  g_assert_cmpmem (r->generated_tokens->data, n * sizeof (gint32), want, n * sizeof (gint32));
  hone_generate_result_free (r);
  g_object_unref (session);
}

static JsonObject *
load_fixture (JsonParser *parser, const char *name)
{
  g_autoptr(GError) error = NULL;
  g_autofree char *fixture = g_build_filename (g_getenv ("HONE_TEST_DATA") ? g_getenv ("HONE_TEST_DATA") : "tests/data",
                                               "cpu", name, NULL);
  if (!json_parser_load_from_file (parser, fixture, &error))
    g_error ("cannot read %s: %s", fixture, error->message);
  return json_node_get_object (json_parser_get_root (parser));
}

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonParser) parser32 = json_parser_new ();
  g_autofree char *path = model_path ();
  HoneBackendOptions opt = { .n_threads = 2, .max_context = 1024 };
  HoneBackendOptions opt_precise = { .n_threads = 2, .max_context = 1024, .precise_activations = TRUE };
  int rc;

  g_test_init (&argc, &argv, NULL);
  /* the fast backend must be the fast path whatever the caller's environment */
  g_unsetenv ("HONE_CPU_PRECISE");
  ref = load_fixture (parser, "llamacpp-reference.json");
  ref32 = load_fixture (parser32, "llamacpp-f32-reference.json");
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    g_error ("the default model is not at %s (set HONE_DEFAULT_MODEL or run .ci/fetch-model)", path);
  model = hone_model_open (path, &error);
  if (model == NULL)
    g_error ("%s: %s", path, error->message);
  be = hone_cpu_backend_new (&error);
  if (!be->klass->load (be, model, &opt, NULL, NULL, NULL, &error))
    g_error ("load: %s", error->message);
  be_precise = hone_cpu_backend_new (&error);
  if (!be_precise->klass->load (be_precise, model, &opt_precise, NULL, NULL, NULL, &error))
    g_error ("load (precise): %s", error->message);

  g_test_add_func ("/cpu/reference/text", test_text);
  g_test_add_func ("/cpu/reference/greedy", test_greedy);
  g_test_add_func ("/cpu/reference/precise/text", test_precise_text);
  g_test_add_func ("/cpu/reference/precise/greedy", test_precise_greedy);
  g_test_add_func ("/cpu/reference/precise/engine", test_precise_engine);
  g_test_add_func ("/cpu/reference/fast-vs-f32/text", test_fast_f32_text);
  g_test_add_func ("/cpu/reference/fast-vs-f32/greedy", test_fast_f32_greedy);
  rc = g_test_run ();
  hone_backend_free (be_precise);
  hone_backend_free (be);
  hone_model_unref (model);
  return rc;
}
