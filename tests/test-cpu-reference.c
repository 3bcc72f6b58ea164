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
 */
#include <glib.h>
#include <json-glib/json-glib.h>
#include <math.h>
#include <string.h>

#include "hone-backend.h"
#include "hone-model.h"

/* Measured maxima × ~1.4 (see above). */
#define TOP20_BOUND 1.5
#define FULL_BOUND 1.0
#define NEAR_TIE 0.3

static JsonObject *ref;
static HoneModel *model;
static HoneBackend *be;

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

int
main (int argc, char **argv)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree char *fixture = NULL, *path = model_path ();
  HoneBackendOptions opt = { .n_threads = 2, .max_context = 1024 };
  int rc;

  g_test_init (&argc, &argv, NULL);
  fixture = g_build_filename (g_getenv ("HONE_TEST_DATA") ? g_getenv ("HONE_TEST_DATA") : "tests/data",
                              "cpu", "llamacpp-reference.json", NULL);
  if (!json_parser_load_from_file (parser, fixture, &error))
    g_error ("cannot read %s: %s", fixture, error->message);
  ref = json_node_get_object (json_parser_get_root (parser));
  if (!g_file_test (path, G_FILE_TEST_EXISTS))
    g_error ("the default model is not at %s (set HONE_DEFAULT_MODEL or run .ci/fetch-model)", path);
  model = hone_model_open (path, &error);
  if (model == NULL)
    g_error ("%s: %s", path, error->message);
  be = hone_cpu_backend_new (&error);
  if (!be->klass->load (be, model, &opt, NULL, NULL, NULL, &error))
    g_error ("load: %s", error->message);

  g_test_add_func ("/cpu/reference/text", test_text);
  g_test_add_func ("/cpu/reference/greedy", test_greedy);
  rc = g_test_run ();
  hone_backend_free (be);
  hone_model_unref (model);
  return rc;
}
