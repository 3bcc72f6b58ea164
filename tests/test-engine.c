/* test-engine.c — HoneEngine with a tiny generated model: loading, streaming,
 * cancellation, session prefix reuse, errors, unload during generation,
 * perplexity and the bench protocol.
 *
 * The reference for generated tokens is an independent greedy loop written
 * here directly over the CPU backend (forward → argmax → forward), without the
 * engine's queue, sessions, sampler or chunking. */
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <glib/gstdio.h>

#include "hone.h"
#include "hone-test-models.h"

#define N_THREADS 2

static char *tmp_dir;
static char *model_path;
static GThread *main_thread;

/* ---- helpers ------------------------------------------------------------------- */

static void
wait_for (GAsyncResult **res)
{
  while (*res == NULL)
    g_main_context_iteration (NULL, TRUE);
}

static void
store_result (GObject *source, GAsyncResult *res, gpointer data)
{
  *(GAsyncResult **) data = g_object_ref (res);
}

static HoneEngine *
new_engine (void)
{
  HoneEngine *e = hone_engine_new ();
  hone_engine_set_n_threads (e, N_THREADS);
  return e;
}

static void
load_ok (HoneEngine *e)
{
  GError *error = NULL;
  g_assert_true (hone_engine_load_sync (e, model_path, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
}

typedef struct {
  GArray *ids;
  GString *text;
  int calls;
  gboolean after_done;      /* a token arrived after the completion callback */
  gboolean wrong_thread;
  GCancellable *cancel_at;  /* cancel this after cancel_after tokens */
  int cancel_after;
  HoneEngine *unload_engine;   /* unload after cancel_after tokens */
  GAsyncResult **unload_res;
  gboolean done;
} Stream;

static void
stream_init (Stream *s)
{
  memset (s, 0, sizeof *s);
  s->ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  s->text = g_string_new (NULL);
}

static void
stream_clear (Stream *s)
{
  g_array_unref (s->ids);
  g_string_free (s->text, TRUE);
}

static void
on_token (const char *piece, gint32 id, gpointer data)
{
  Stream *s = data;

  if (g_thread_self () != main_thread)
    s->wrong_thread = TRUE;
  if (s->done)
    s->after_done = TRUE;
  if (id >= 0)
    g_array_append_val (s->ids, id);
  g_string_append (s->text, piece);
  s->calls++;
  if (s->cancel_at != NULL && (int) s->ids->len == s->cancel_after)
    g_cancellable_cancel (s->cancel_at);
  if (s->unload_engine != NULL && (int) s->ids->len == s->cancel_after)
    {
      hone_engine_unload_async (s->unload_engine, NULL, store_result, s->unload_res);
      s->unload_engine = NULL;
    }
}

typedef struct {
  Stream *stream;
  GAsyncResult *res;
} Done;

static void
on_done (GObject *source, GAsyncResult *res, gpointer data)
{
  Done *d = data;
  if (d->stream != NULL)
    d->stream->done = TRUE;
  d->res = g_object_ref (res);
}

static HoneGenerateResult *
generate_tokens (HoneSession *session, const gint32 *ids, gsize n, const HoneSamplerParams *p,
                 Stream *stream, GCancellable *cancel, GError **error)
{
  Done d = { stream, NULL };
  HoneGenerateResult *r;

  hone_session_complete_tokens_async (session, ids, n, p, stream != NULL ? on_token : NULL, stream, NULL,
                                      cancel, on_done, &d);
  wait_for (&d.res);
  r = hone_session_generate_finish (session, d.res, error);
  g_object_unref (d.res);
  return r;
}

static HoneGenerateResult *
generate_chat (HoneSession *session, JsonNode *messages, const HoneSamplerParams *p, GError **error)
{
  Done d = { NULL, NULL };
  HoneGenerateResult *r;

  hone_session_chat_async (session, messages, p, NULL, NULL, NULL, NULL, on_done, &d);
  wait_for (&d.res);
  r = hone_session_generate_finish (session, d.res, error);
  g_object_unref (d.res);
  return r;
}

/* The independent reference: greedy decoding straight on the CPU backend.
 * redo_last: after the prompt, its last token is dropped from the cache and
 * run again alone (what a regenerate with the prompt cached does). */
static GArray *
reference_greedy (const gint32 *prompt, int n_prompt, int n_gen, gboolean redo_last)
{
  GError *error = NULL;
  g_autoptr (HoneModel) model = hone_model_open (model_path, &error);
  HoneBackend *be;
  HoneBackendOptions o = { 0 };
  GArray *out = g_array_new (FALSE, FALSE, sizeof (gint32));
  float *logits;
  int seq, vocab;

  g_assert_no_error (error);
  vocab = model->config.vocab;
  be = hone_cpu_backend_new (&error);
  g_assert_no_error (error);
  o.n_threads = N_THREADS;
  o.max_context = model->config.max_context;
  g_assert_true (be->klass->load (be, model, &o, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  seq = be->klass->seq_new (be, &error);
  g_assert_cmpint (seq, >=, 0);
  logits = g_new (float, vocab);
  {
    HoneBatch b = { seq, prompt, n_prompt, FALSE, logits };
    g_assert_true (hone_backend_forward (be, &b, NULL, &error));
  }
  if (redo_last)
    {
      HoneBatch b = { seq, prompt + n_prompt - 1, 1, FALSE, logits };
      be->klass->seq_truncate (be, seq, n_prompt - 1);
      g_assert_true (hone_backend_forward (be, &b, NULL, &error));
    }
  for (int i = 0; i < n_gen; i++)
    {
      gint32 t = hone_argmax (logits, vocab);
      HoneBatch b = { seq, &t, 1, FALSE, logits };
      g_array_append_val (out, t);
      if (i + 1 < n_gen)
        g_assert_true (hone_backend_forward (be, &b, NULL, &error));
    }
  g_free (logits);
  be->klass->seq_free (be, seq);
  be->klass->unload (be);
  hone_backend_free (be);
  return out;
}

static JsonNode *
conversation (const char *const *pairs /* role, content, …, NULL */)
{
  JsonArray *a = json_array_new ();
  JsonNode *n = json_node_new (JSON_NODE_ARRAY);

  for (int i = 0; pairs[i] != NULL; i += 2)
    {
      JsonObject *o = json_object_new ();
      json_object_set_string_member (o, "role", pairs[i]);
      json_object_set_string_member (o, "content", pairs[i + 1]);
      json_array_add_object_element (a, o);
    }
  json_node_take_array (n, a);
  return n;
}

/* ---- tests ------------------------------------------------------------------------ */

typedef struct {
  double last;
  int calls;
  gboolean monotonic;
  gboolean wrong_thread;
} Progress;

static void
on_progress (double f, gpointer data)
{
  Progress *p = data;
  if (f < p->last)
    p->monotonic = FALSE;
  if (g_thread_self () != main_thread)
    p->wrong_thread = TRUE;
  p->last = f;
  p->calls++;
}

static void
on_notify (GObject *obj, GParamSpec *pspec, gpointer data)
{
  (*(int *) data)++;
}

/* notify::load-progress: the property, read on the owner's context, never steps back. */
static void
on_load_progress (GObject *e, GParamSpec *pspec, gpointer data)
{
  Progress *p = data;
  double f = 0.0;

  g_object_get (e, "load-progress", &f, NULL);
  if (f < p->last)
    p->monotonic = FALSE;
  p->last = f;
  p->calls++;
}

/* VmHWM of /proc/self/status in bytes, -1 if unknown. */
static gint64
peak_rss (void)
{
  g_autofree char *status = NULL;
  const char *p;

  if (!g_file_get_contents ("/proc/self/status", &status, NULL, NULL) || (p = strstr (status, "VmHWM:")) == NULL)
    return -1;
  return g_ascii_strtoll (p + 6, NULL, 10) * 1024;
}

/* Touches @bytes of fresh pages and gives them back: the process's peak RSS
 * now counts them (the CPU bandwidth probe's buffer does the same). */
static void
touch_and_release (gsize bytes)
{
  char *m = mmap (NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  g_assert_true (m != MAP_FAILED);
  for (gsize i = 0; i < bytes; i += 4096)
    m[i] = 1;
  munmap (m, bytes);
}

/* The memory peak the CPU backend reports is the process's peak RSS: a buffer
 * freed before (the bandwidth probe's) or a model unloaded must not count in
 * the peaks after it — the reset, and the engine's reload, start it again
 * from what is resident. */
static void
test_memory_peak_reset (void)
{
  const gsize big = (gsize) 256 << 20;
  g_autoptr (HoneEngine) e = new_engine ();
  GError *error = NULL;
  HoneEngineMetrics m;
  gint64 before;

  touch_and_release (big);
  before = peak_rss ();
  if (before < 0 || !hone_metrics_reset_peak_rss ())
    {
      g_test_skip ("no /proc/self/clear_refs peak reset on this kernel");
      return;
    }
  g_assert_cmpint (peak_rss (), <, before - (gint64) (200 << 20));

  g_assert_true (hone_engine_load_sync (e, model_path, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  touch_and_release (big);
  g_assert_true (hone_engine_load_sync (e, model_path, NULL, NULL, NULL, &error));   /* drops the first */
  g_assert_no_error (error);
  hone_engine_get_metrics_snapshot (e, &m);
  g_assert_cmpint (m.memory_peak, >, 0);
  g_assert_cmpint (m.memory_peak, <, m.memory_used + (gint64) (200 << 20));
}

static void
test_load (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  GAsyncResult *res = NULL;
  Progress p = { -1.0, 0, TRUE, FALSE };
  Progress prop = { 0.0, 0, TRUE, FALSE };
  GError *error = NULL;
  int state_notifies = 0;
  HoneModelInfo *info;
  HoneEngineMetrics m;
  g_autoptr (GPtrArray) devices = hone_engine_list_devices ();

  g_assert_cmpuint (devices->len, >=, 1);
  g_assert_cmpstr (((HoneDevice *) devices->pdata[0])->id, ==, "cpu");

  g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_EMPTY);
  g_signal_connect (e, "notify::state", G_CALLBACK (on_notify), &state_notifies);
  g_signal_connect (e, "notify::load-progress", G_CALLBACK (on_load_progress), &prop);
  hone_engine_load_async (e, model_path, on_progress, &p, NULL, NULL, store_result, &res);
  wait_for (&res);
  g_assert_true (hone_engine_load_finish (e, res, &error));
  g_assert_no_error (error);
  g_object_unref (res);
  g_assert_cmpfloat (p.last, ==, 1.0);
  g_assert_true (p.monotonic);
  g_assert_false (p.wrong_thread);
  g_assert_cmpint (p.calls, >=, 2);
  g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_READY);
  /* The notifications come on this (the owner) context. */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_cmpint (state_notifies, >=, 1);
  g_signal_handlers_disconnect_by_func (e, on_load_progress, &prop);
  g_assert_true (prop.monotonic);
  g_assert_cmpint (prop.calls, >=, 1);
  g_assert_cmpfloat (prop.last, ==, 1.0);

  info = hone_engine_get_model_info (e);
  g_assert_nonnull (info);
  g_assert_cmpstr (hone_model_info_get_architecture (info), ==, "llama");
  g_assert_cmpint (hone_model_info_get_n_layers (info), ==, 2);
  g_assert_true (hone_model_info_get_has_chat_template (info));
  g_assert_cmpint (hone_engine_get_active_context_length (e), ==, 512);

  hone_engine_get_metrics_snapshot (e, &m);
  g_assert_cmpint (m.state, ==, HONE_ENGINE_STATE_READY);
  g_assert_cmpint (m.memory_used, >, 0);
  g_assert_cmpint (m.memory_total, >=, m.memory_used);

  /* Loading a missing or corrupt file fails cleanly and leaves the loaded model in place. */
  g_assert_false (hone_engine_load_sync (e, "/nonexistent/model.gguf", NULL, NULL, NULL, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_IO);
  g_clear_error (&error);
  g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_READY);
  g_assert_true (hone_engine_get_model_info (e) == info);
  {
    g_autofree char *dir = g_dir_make_tmp ("hone-engine-XXXXXX", NULL);
    g_autofree char *bad = g_build_filename (dir, "corrupt.gguf", NULL);
    g_autoptr (HoneSession) s = NULL;
    HoneSamplerParams sp;
    gint32 prompt[] = { 1, 40, 50, 60 };
    g_autoptr (HoneGenerateResult) r = NULL;

    g_assert_true (g_file_set_contents (bad, "GGUF\003\000\000\000garbage", 16, NULL));
    g_assert_false (hone_engine_load_sync (e, bad, NULL, NULL, NULL, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_FILE_CORRUPT);
    g_clear_error (&error);
    g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_READY);
    g_assert_true (hone_engine_get_model_info (e) == info);

    /* …and it still generates. */
    s = hone_session_new (e);
    hone_sampler_params_init_greedy (&sp);
    sp.max_tokens = 2;
    sp.ignore_eog = TRUE;
    r = generate_tokens (s, prompt, 4, &sp, NULL, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (r->generated_tokens->len, ==, 2);
    g_unlink (bad);
    g_rmdir (dir);
  }

  /* A load that fails after the old model was let go (over the memory budget here, as a
   * GPU out of memory would) brings the previous model back. */
  g_object_set (e, "memory-budget", (gint64) 4096, NULL);
  g_assert_false (hone_engine_load_sync (e, model_path, NULL, NULL, NULL, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_OUT_OF_MEMORY);
  g_assert_nonnull (strstr (error->message, "previous model"));
  g_clear_error (&error);
  g_object_set (e, "memory-budget", (gint64) 0, NULL);
  g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_READY);
  g_assert_nonnull (hone_engine_get_model_info (e));
  {
    g_autoptr (HoneSession) s2 = hone_session_new (e);
    HoneSamplerParams sp2;
    gint32 prompt2[] = { 1, 40, 50, 60 };
    g_autoptr (HoneGenerateResult) r2 = NULL;
    hone_sampler_params_init_greedy (&sp2);
    sp2.max_tokens = 2;
    sp2.ignore_eog = TRUE;
    r2 = generate_tokens (s2, prompt2, 4, &sp2, NULL, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (r2->generated_tokens->len, ==, 2);
  }

  /* Unload empties it. */
  res = NULL;
  hone_engine_unload_async (e, NULL, store_result, &res);
  wait_for (&res);
  g_assert_true (hone_engine_unload_finish (e, res, &error));
  g_assert_no_error (error);
  g_clear_object (&res);
  g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_EMPTY);
  g_assert_null (hone_engine_get_model_info (e));
}

static void
cancel_on_first_progress (double f, gpointer data)
{
  g_cancellable_cancel (G_CANCELLABLE (data));
}

static void
test_load_cancel (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  g_autoptr (GCancellable) c = g_cancellable_new ();
  GError *error = NULL;
  GAsyncResult *res = NULL;

  /* Cancelled before it starts. */
  g_cancellable_cancel (c);
  g_assert_false (hone_engine_load_sync (e, model_path, NULL, NULL, c, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
  g_clear_error (&error);
  g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_EMPTY);

  /* Cancelled from its first progress report: either it was still running
   * (CANCELLED, empty) or it had finished; the engine works afterwards. */
  g_cancellable_reset (c);
  hone_engine_load_async (e, model_path, cancel_on_first_progress, c, NULL, c, store_result, &res);
  wait_for (&res);
  if (!hone_engine_load_finish (e, res, &error))
    {
      g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
      g_clear_error (&error);
      g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_EMPTY);
    }
  g_object_unref (res);

  load_ok (e);
  {
    g_autoptr (HoneSession) s = hone_session_new (e);
    HoneSamplerParams p;
    gint32 prompt[] = { 1, 40, 50, 60 };
    g_autoptr (HoneGenerateResult) r = NULL;
    hone_sampler_params_init_greedy (&p);
    p.max_tokens = 3;
    p.ignore_eog = TRUE;
    r = generate_tokens (s, prompt, 4, &p, NULL, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpuint (r->generated_tokens->len, ==, 3);
  }
}

static void
test_greedy_matches_backend (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  g_autoptr (HoneSession) s = NULL;
  g_autoptr (HoneGenerateResult) r = NULL;
  g_autoptr (GArray) ref = NULL;
  gint32 prompt[] = { 1, 72, 104, 105, 35, 200, 17, 99, 120 };
  const int n_gen = 24;
  HoneSamplerParams p;
  Stream st;
  GError *error = NULL;

  load_ok (e);
  s = hone_session_new (e);
  hone_sampler_params_init_greedy (&p);
  p.max_tokens = n_gen;
  p.ignore_eog = TRUE;
  stream_init (&st);
  r = generate_tokens (s, prompt, G_N_ELEMENTS (prompt), &p, &st, NULL, &error);
  g_assert_no_error (error);

  ref = reference_greedy (prompt, G_N_ELEMENTS (prompt), n_gen, FALSE);
  g_assert_cmpuint (r->generated_tokens->len, ==, n_gen);
  g_assert_cmpmem (r->generated_tokens->data, n_gen * 4, ref->data, n_gen * 4);
  /* Streamed in order, on this thread, all before the completion. */
  g_assert_cmpmem (st.ids->data, st.ids->len * 4, ref->data, n_gen * 4);
  g_assert_false (st.wrong_thread);
  g_assert_false (st.after_done);
  g_assert_cmpstr (st.text->str, ==, r->text);
  g_assert_cmpmem (r->prompt_tokens->data, r->prompt_tokens->len * 4, prompt, sizeof prompt);

  /* Metrics are consistent with what happened. */
  g_assert_cmpint (r->metrics.prompt_tokens, ==, G_N_ELEMENTS (prompt));
  g_assert_cmpint (r->metrics.prefill_tokens, ==, G_N_ELEMENTS (prompt));
  g_assert_cmpint (r->metrics.cached_tokens, ==, 0);
  g_assert_cmpint (r->metrics.generated_tokens, ==, n_gen);
  g_assert_cmpint (r->metrics.decode_tokens, ==, n_gen - 1);
  g_assert_cmpint (r->metrics.stop_reason, ==, HONE_STOP_MAX_TOKENS);
  g_assert_cmpfloat (r->metrics.ttft_ms, >, 0.0);
  g_assert_cmpfloat (r->metrics.ttft_ms, <=, r->metrics.total_ms);
  g_assert_cmpfloat (r->metrics.queue_ms, <=, r->metrics.ttft_ms);
  g_assert_cmpfloat (r->metrics.prefill_tps, >, 0.0);
  g_assert_cmpfloat (r->metrics.decode_tps, >, 0.0);
  g_assert_cmpfloat (r->metrics.prefill_share, >, 0.0);
  g_assert_cmpfloat (r->metrics.prefill_share, <, 1.0);
  g_assert_cmpint (r->metrics.memory_peak, >=, r->metrics.memory_steady);
  g_assert_cmpint (r->metrics.memory_steady, >, 0);

  /* The session now holds prompt + all generated tokens but the last. */
  {
    g_autoptr (GArray) held = hone_session_get_tokens (s);
    g_assert_cmpuint (held->len, ==, G_N_ELEMENTS (prompt) + n_gen - 1);
  }

  /* Same prompt again (regenerate): only the last prompt token is recomputed,
   * and greedy gives the tokens of the backend doing just that. (Alone, that
   * token runs the decode kernels, which round differently from the prompt's
   * batch, so on this random model the list may part from ref at a near tie.) */
  {
    g_autoptr (HoneGenerateResult) r2 = generate_tokens (s, prompt, G_N_ELEMENTS (prompt), &p, NULL, NULL, &error);
    g_autoptr (GArray) ref2 = reference_greedy (prompt, G_N_ELEMENTS (prompt), n_gen, TRUE);
    g_assert_no_error (error);
    g_assert_cmpint (r2->metrics.cached_tokens, ==, G_N_ELEMENTS (prompt) - 1);
    g_assert_cmpint (r2->metrics.prefill_tokens, ==, 1);
    g_assert_cmpmem (r2->generated_tokens->data, n_gen * 4, ref2->data, n_gen * 4);
  }
  stream_clear (&st);
}

static void
test_cancel_generation (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  g_autoptr (HoneSession) s = NULL;
  g_autoptr (GCancellable) c = g_cancellable_new ();
  gint32 prompt[] = { 1, 50, 51, 52 };
  HoneSamplerParams p;
  Stream st;
  GError *error = NULL;
  HoneGenerateResult *r;

  load_ok (e);
  s = hone_session_new (e);
  hone_sampler_params_init_greedy (&p);
  p.ignore_eog = TRUE;       /* would run to the end of the context */
  stream_init (&st);
  st.cancel_at = c;
  st.cancel_after = 3;
  r = generate_tokens (s, prompt, 4, &p, &st, c, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
  g_clear_error (&error);
  /* Tokens delivered before the cancel was seen; far fewer than the context. */
  g_assert_cmpuint (st.ids->len, >=, 3);
  g_assert_cmpuint (st.ids->len, <, 200);
  g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_READY);
  stream_clear (&st);

  /* The engine and the session still work. */
  p.max_tokens = 2;
  r = generate_tokens (s, prompt, 4, &p, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpuint (r->generated_tokens->len, ==, 2);
  hone_generate_result_free (r);
}

/* Length of the common prefix of two token arrays. */
static guint
lcp (GArray *a, GArray *b)
{
  guint n = 0;
  while (n < a->len && n < b->len && g_array_index (a, gint32, n) == g_array_index (b, gint32, n))
    n++;
  return n;
}

static void
test_chat_prefix_reuse (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  g_autoptr (HoneSession) s = NULL;
  const char *turn1[] = { "system", "Be brief.", "user", "Hello there", NULL };
  g_autoptr (JsonNode) c1 = conversation (turn1);
  g_autoptr (HoneGenerateResult) r1 = NULL;
  g_autoptr (HoneGenerateResult) r2 = NULL;
  g_autoptr (HoneGenerateResult) r3 = NULL;
  g_autoptr (JsonNode) c2 = NULL;
  g_autoptr (GArray) held = NULL;
  g_autoptr (GArray) p2 = NULL;
  g_autofree char *rendered = NULL;
  HoneSamplerParams p;
  GError *error = NULL;

  load_ok (e);
  s = hone_session_new (e);
  hone_sampler_params_init_greedy (&p);
  p.max_tokens = 6;
  r1 = generate_chat (s, c1, &p, &error);
  g_assert_no_error (error);
  g_assert_cmpint (r1->metrics.cached_tokens, ==, 0);
  held = hone_session_get_tokens (s);

  {
    const char *turn2[] = { "system", "Be brief.", "user", "Hello there", "assistant", r1->text,
                            "user", "And again?", NULL };
    c2 = conversation (turn2);
  }
  /* What the second prompt is, tokenized independently of the session. */
  rendered = hone_engine_render_chat (e, c2, TRUE, &error);
  g_assert_no_error (error);
  p2 = hone_engine_tokenize (e, rendered, FALSE, TRUE, &error);
  g_assert_no_error (error);

  r2 = generate_chat (s, c2, &p, &error);
  g_assert_no_error (error);
  g_assert_cmpmem (r2->prompt_tokens->data, r2->prompt_tokens->len * 4, p2->data, p2->len * 4);
  /* Only the tokens past the cached common prefix are prefilled. */
  g_assert_cmpint (r2->metrics.cached_tokens, ==, (int) lcp (held, p2));
  g_assert_cmpint (r2->metrics.prefill_tokens, ==, (int) p2->len - (int) lcp (held, p2));
  g_assert_cmpint (r2->metrics.cached_tokens, >=, (int) r1->prompt_tokens->len);
  g_assert_cmpint (r2->metrics.prefill_tokens, <, (int) p2->len);

  /* Edit: back to the first turn with a different question — the cache is
   * truncated where they diverge, and the result equals a fresh session's. */
  {
    const char *edit[] = { "system", "Be brief.", "user", "Hi there", NULL };
    g_autoptr (JsonNode) ce = conversation (edit);
    g_autoptr (HoneSession) fresh = hone_session_new (e);
    g_autoptr (HoneGenerateResult) rf = NULL;
    r3 = generate_chat (s, ce, &p, &error);
    g_assert_no_error (error);
    g_assert_cmpint (r3->metrics.cached_tokens, <, (int) r1->prompt_tokens->len);
    rf = generate_chat (fresh, ce, &p, &error);
    g_assert_no_error (error);
    g_assert_cmpint (rf->metrics.cached_tokens, ==, 0);
    g_assert_cmpuint (rf->generated_tokens->len, ==, r3->generated_tokens->len);
    g_assert_cmpmem (rf->generated_tokens->data, rf->generated_tokens->len * 4,
                     r3->generated_tokens->data, r3->generated_tokens->len * 4);
  }

  /* reset() drops the cache. */
  hone_session_reset (s);
  {
    g_autoptr (HoneGenerateResult) r4 = generate_chat (s, c1, &p, &error);
    g_assert_no_error (error);
    g_assert_cmpint (r4->metrics.cached_tokens, ==, 0);
    g_assert_cmpmem (r4->generated_tokens->data, r4->generated_tokens->len * 4,
                     r1->generated_tokens->data, r1->generated_tokens->len * 4);
  }
}

/* A conversation longer than the context keeps going: the oldest turns after
 * the system message are left out, a user message and its reply at a time;
 * the fewest that leave max_tokens and an eighth of the context free. What
 * the engine prompted with is checked against the kept messages rendered and
 * tokenized independently; one turn fewer left out would not have fit. */
static JsonNode *
kept_messages (JsonNode *all, int dropped)
{
  JsonArray *a = json_node_get_array (all), *k = json_array_new ();
  JsonNode *n = json_node_new (JSON_NODE_ARRAY);

  json_array_add_element (k, json_node_copy (json_array_get_element (a, 0)));   /* the system message */
  for (guint i = 1 + (guint) dropped; i < json_array_get_length (a); i++)
    json_array_add_element (k, json_node_copy (json_array_get_element (a, i)));
  json_node_take_array (n, k);
  return n;
}

static GArray *
chat_tokens (HoneEngine *e, JsonNode *messages)
{
  GError *error = NULL;
  g_autofree char *text = hone_engine_render_chat (e, messages, TRUE, &error);
  GArray *ids;

  g_assert_no_error (error);
  ids = hone_engine_tokenize (e, text, FALSE, TRUE, &error);
  g_assert_no_error (error);
  return ids;
}

static void
test_chat_fits_context (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  g_autoptr (HoneSession) s = NULL;
  const int n_ctx = 160, max_tokens = 8;
  const int target = n_ctx - max_tokens - n_ctx / 8;
  g_autoptr (GPtrArray) pairs = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (JsonNode) all = NULL;
  g_autoptr (GArray) full = NULL;
  g_autoptr (GArray) want = NULL;
  g_autoptr (GArray) one_more = NULL;
  g_autoptr (JsonNode) kept = NULL;
  g_autoptr (JsonNode) kept_more = NULL;
  g_autoptr (HoneGenerateResult) r = NULL;
  HoneSamplerParams p;
  GError *error = NULL;

  hone_engine_set_context_length (e, n_ctx);
  load_ok (e);
  s = hone_session_new (e);
  hone_sampler_params_init_greedy (&p);
  p.max_tokens = max_tokens;

  g_ptr_array_add (pairs, g_strdup ("system"));
  g_ptr_array_add (pairs, g_strdup ("Answer in one line."));
  for (int t = 0; t < 12; t++)
    {
      g_ptr_array_add (pairs, g_strdup ("user"));
      g_ptr_array_add (pairs, g_strdup_printf ("Question %d: what is %d times %d?", t, t + 3, t + 7));
      g_ptr_array_add (pairs, g_strdup ("assistant"));
      g_ptr_array_add (pairs, g_strdup_printf ("It is %d.", (t + 3) * (t + 7)));
    }
  g_ptr_array_add (pairs, g_strdup ("user"));
  g_ptr_array_add (pairs, g_strdup ("And the last question: what is 2 plus 2?"));
  g_ptr_array_add (pairs, NULL);
  all = conversation ((const char *const *) pairs->pdata);
  full = chat_tokens (e, all);
  g_assert_cmpint ((int) full->len, >, n_ctx);   /* the whole conversation would not fit at all */

  r = generate_chat (s, all, &p, &error);
  g_assert_no_error (error);
  g_assert_cmpint (r->metrics.dropped_messages, >, 0);
  g_assert_cmpint (r->metrics.dropped_messages % 2, ==, 0);   /* whole turns */
  g_assert_cmpuint (json_array_get_length (json_node_get_array (all)), ==, 2 + 12 * 2);   /* not changed */
  kept = kept_messages (all, r->metrics.dropped_messages);
  want = chat_tokens (e, kept);
  g_assert_cmpuint (r->prompt_tokens->len, ==, want->len);
  g_assert_cmpmem (r->prompt_tokens->data, want->len * 4, want->data, want->len * 4);
  g_assert_cmpint ((int) want->len, <=, target);
  /* the fewest: one turn fewer left out would not leave the room */
  kept_more = kept_messages (all, r->metrics.dropped_messages - 2);
  one_more = chat_tokens (e, kept_more);
  g_assert_cmpint ((int) one_more->len, >, target);
  g_assert_cmpint (r->generated_tokens->len, >, 0);

  /* a conversation that fits: nothing left out */
  {
    const char *small[] = { "system", "Answer in one line.", "user", "Hi", NULL };
    g_autoptr (JsonNode) c = conversation (small);
    g_autoptr (HoneGenerateResult) rs = generate_chat (s, c, &p, &error);
    g_assert_no_error (error);
    g_assert_cmpint (rs->metrics.dropped_messages, ==, 0);
  }
  /* the last message alone does not fit: the one clear error, the engine still usable */
  {
    g_autoptr (GString) big = g_string_new ("Repeat:");
    g_autoptr (HoneGenerateResult) rb = NULL;
    for (int i = 0; i < 200; i++)
      g_string_append (big, " word");
    {
      const char *huge[] = { "system", "Answer in one line.", "user", "Hi", "assistant", "Hello.", "user", big->str, NULL };
      g_autoptr (JsonNode) c = conversation (huge);
      rb = generate_chat (s, c, &p, &error);
      g_assert_null (rb);
      g_assert_error (error, HONE_ERROR, HONE_ERROR_CONTEXT_OVERFLOW);
      g_clear_error (&error);
    }
    g_clear_pointer (&r, hone_generate_result_free);
    r = generate_chat (s, all, &p, &error);
    g_assert_no_error (error);
    g_assert_cmpmem (r->prompt_tokens->data, want->len * 4, want->data, want->len * 4);
  }
  /* hostile messages (roles that are numbers, objects, null, missing) in a conversation that must be cut:
   * the template's answer, or its one error — no warning (fatal here), no crash. (This model's ChatML
   * template concatenates the role, so it stops at the first number; a template that only compares roles
   * would hand them to the cutting, which reads a role only when it is a string.) */
  {
    g_autoptr (JsonNode) odd = json_from_string (
        "[{\"role\": \"system\", \"content\": \"Answer in one line.\"},"
        " {\"role\": 7, \"content\": \"what is seven times seven, and then seven more?\"},"
        " {\"role\": {\"x\": 1}, \"content\": \"an object for a role, and some words to fill it up\"},"
        " {\"role\": null, \"content\": \"a null role, and again some words to fill the context\"},"
        " {\"content\": \"no role at all, and yet more words to fill the context up\"},"
        " [1, 2, 3],"
        " {\"role\": \"user\", \"content\": \"Question: what is 2 plus 2, and why is it four?\"},"
        " {\"role\": \"assistant\", \"content\": \"It is four, because two and two make four.\"},"
        " {\"role\": \"user\", \"content\": \"And the last question: what is 3 plus 3?\"}]", &error);
    g_autoptr (HoneGenerateResult) ro = NULL;
    g_assert_no_error (error);
    ro = generate_chat (s, odd, &p, &error);
    g_assert_true ((ro != NULL) != (error != NULL));
    if (error != NULL)
      {
        g_assert_true (error->domain == HONE_ERROR);
        g_test_message ("odd roles: %s", error->message);
        g_clear_error (&error);
      }
    else
      g_test_message ("odd roles: answered, %d messages left out", ro->metrics.dropped_messages);
  }
}

static void
test_errors (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  g_autoptr (HoneSession) s = hone_session_new (e);
  HoneSamplerParams p;
  GError *error = NULL;
  gint32 prompt[] = { 1, 2, 3 };
  HoneGenerateResult *r;

  hone_sampler_params_init_greedy (&p);
  p.max_tokens = 2;
  /* No model yet. */
  r = generate_tokens (s, prompt, 3, &p, NULL, NULL, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_NO_MODEL);
  g_clear_error (&error);

  hone_engine_set_context_length (e, 64);
  load_ok (e);
  g_assert_cmpint (hone_engine_get_active_context_length (e), ==, 64);

  /* Invalid sampling parameters name the parameter. */
  p.top_p = 1.5f;
  r = generate_tokens (s, prompt, 3, &p, NULL, NULL, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_assert_nonnull (strstr (error->message, "top-p"));
  g_clear_error (&error);
  p.top_p = 1.0f;

  /* Empty prompts. */
  r = generate_tokens (s, prompt, 0, &p, NULL, NULL, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  {
    Done d = { NULL, NULL };
    hone_session_complete_async (s, "", &p, NULL, NULL, NULL, NULL, on_done, &d);
    wait_for (&d.res);
    g_assert_null (hone_session_generate_finish (s, d.res, &error));
    g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
    g_object_unref (d.res);
  }
  /* Token ids outside the vocabulary. */
  {
    gint32 bad[] = { 1, 300 };
    r = generate_tokens (s, bad, 2, &p, NULL, NULL, &error);
    g_assert_null (r);
    g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
    g_clear_error (&error);
  }
  /* A prompt longer than the context. */
  {
    gint32 big[100];
    for (int i = 0; i < 100; i++)
      big[i] = 3 + i;
    r = generate_tokens (s, big, 100, &p, NULL, NULL, &error);
    g_assert_null (r);
    g_assert_error (error, HONE_ERROR, HONE_ERROR_CONTEXT_OVERFLOW);
    g_clear_error (&error);

    /* Generation that reaches the end of the context stops there. */
    p.max_tokens = 0;
    p.ignore_eog = TRUE;
    r = generate_tokens (s, big, 60, &p, NULL, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpint (r->metrics.stop_reason, ==, HONE_STOP_CONTEXT_FULL);
    g_assert_cmpuint (r->generated_tokens->len, ==, 64 - 60 + 1);
    hone_generate_result_free (r);
  }
  /* Messages that are not an array. */
  {
    g_autoptr (JsonNode) notarray = json_node_new (JSON_NODE_OBJECT);
    json_node_take_object (notarray, json_object_new ());
    r = generate_chat (s, notarray, &p, &error);
    g_assert_null (r);
    g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON);
    g_clear_error (&error);
  }
}

static void
test_unload_while_generating (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  g_autoptr (HoneSession) s = NULL;
  GAsyncResult *unload_res = NULL;
  gint32 prompt[] = { 1, 80, 81 };
  HoneSamplerParams p;
  Stream st;
  GError *error = NULL;
  HoneGenerateResult *r;

  load_ok (e);
  s = hone_session_new (e);
  hone_sampler_params_init_greedy (&p);
  p.ignore_eog = TRUE;
  stream_init (&st);
  st.unload_engine = e;
  st.unload_res = &unload_res;
  st.cancel_after = 2;
  r = generate_tokens (s, prompt, 3, &p, &st, NULL, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_CANCELLED);
  g_clear_error (&error);
  wait_for (&unload_res);
  g_assert_true (hone_engine_unload_finish (e, unload_res, &error));
  g_assert_no_error (error);
  g_object_unref (unload_res);
  g_assert_cmpint (hone_engine_get_state (e), ==, HONE_ENGINE_STATE_EMPTY);
  stream_clear (&st);

  p.max_tokens = 2;
  r = generate_tokens (s, prompt, 3, &p, NULL, NULL, &error);
  g_assert_null (r);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_NO_MODEL);
  g_clear_error (&error);

  /* Reload: the old session starts over on the new model. */
  load_ok (e);
  r = generate_tokens (s, prompt, 3, &p, NULL, NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpint (r->metrics.cached_tokens, ==, 0);
  hone_generate_result_free (r);
}

/* Requests hold the engine; once the last one is done and the last ref is
 * dropped, dispose joins the engine thread and the engine is gone. */
static void
test_dispose (void)
{
  HoneEngine *e = new_engine ();
  HoneSession *s;
  HoneSamplerParams p;
  gint32 prompt[] = { 1, 5, 6 };
  Done d = { NULL, NULL };
  GError *error = NULL;
  HoneGenerateResult *r;

  load_ok (e);
  s = hone_session_new (e);
  hone_sampler_params_init_greedy (&p);
  p.max_tokens = 4;
  p.ignore_eog = TRUE;
  hone_session_complete_tokens_async (s, prompt, 3, &p, NULL, NULL, NULL, NULL, on_done, &d);
  g_object_add_weak_pointer (G_OBJECT (e), (gpointer *) &e);
  g_object_unref (s);
  g_object_unref (e);            /* the request still holds it */
  g_assert_nonnull (e);
  wait_for (&d.res);
  {
    GObject *src = g_async_result_get_source_object (d.res);   /* a new ref */
    r = hone_session_generate_finish (HONE_SESSION (src), d.res, &error);
    g_object_unref (src);
  }
  g_assert_no_error (error);
  g_assert_cmpuint (r->generated_tokens->len, ==, 4);
  hone_generate_result_free (r);
  g_object_unref (d.res);
  while (e != NULL && g_main_context_iteration (NULL, FALSE))
    ;
  g_assert_null (e);
}

static void
test_perplexity (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  g_autoptr (HoneModel) model = NULL;
  GError *error = NULL;
  gint32 toks[40];
  GAsyncResult *res = NULL;
  HonePerplexityResult pr;
  double nll = 0.0;
  int vocab;
  HoneBackend *be;
  HoneBackendOptions o = { 0 };
  float *logits;
  int seq;

  for (int i = 0; i < 40; i++)
    toks[i] = 3 + (i * 37) % 250;
  load_ok (e);
  /* Windows of 16 with stride 8 over 40 tokens: [0,16) scores 1..15,
   * [8,24) 16..23, [16,32) 24..31, [24,40) 32..39. */
  hone_engine_perplexity_async (e, toks, 40, 16, 8, NULL, NULL, NULL, NULL, store_result, &res);
  wait_for (&res);
  g_assert_true (hone_engine_perplexity_finish (e, res, &pr, &error));
  g_assert_no_error (error);
  g_object_unref (res);
  g_assert_cmpint (pr.n_scored, ==, 39);
  g_assert_cmpint (pr.n_windows, ==, 4);

  /* The same sums straight from the backend's logits. */
  model = hone_model_open (model_path, &error);
  g_assert_no_error (error);
  vocab = model->config.vocab;
  be = hone_cpu_backend_new (&error);
  o.n_threads = N_THREADS;
  o.max_context = 64;
  g_assert_true (be->klass->load (be, model, &o, NULL, NULL, NULL, &error));
  seq = be->klass->seq_new (be, &error);
  logits = g_new (float, 16 * vocab);
  for (int begin = 0, prev_end = 0; begin < 40; begin += 8)
    {
      int end = MIN (begin + 16, 40);
      HoneBatch b = { seq, toks + begin, end - begin, TRUE, logits };
      be->klass->seq_truncate (be, seq, 0);
      g_assert_true (hone_backend_forward (be, &b, NULL, &error));
      for (int t = MAX (prev_end, begin + 1); t < end; t++)
        {
          const float *l = logits + (gsize) (t - 1 - begin) * vocab;
          double mx = -INFINITY, z = 0.0;
          for (int v = 0; v < vocab; v++)
            mx = MAX (mx, l[v]);
          for (int v = 0; v < vocab; v++)
            z += exp (l[v] - mx);
          nll += -(l[toks[t]] - mx - log (z));
        }
      prev_end = end;
      if (end == 40)
        break;
    }
  g_assert_cmpfloat_with_epsilon (pr.nll_sum, nll, 1e-6 * fabs (nll) + 1e-9);
  g_assert_cmpfloat_with_epsilon (pr.perplexity, exp (nll / 39), 1e-9 * exp (nll / 39));
  g_free (logits);
  be->klass->seq_free (be, seq);
  be->klass->unload (be);
  hone_backend_free (be);
}

static void
test_bench (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  HoneBenchParams bp;
  GAsyncResult *res = NULL;
  GError *error = NULL;
  g_autoptr (HoneBenchResult) r = NULL;
  double v[] = { 4.0, 1.0, 3.0, 2.0 };
  HoneBenchStat st;

  /* numpy.percentile([1,2,3,4], [10,50,90]) = 1.3, 2.5, 3.7 */
  hone_bench_stat_compute (v, 4, &st);
  g_assert_cmpfloat_with_epsilon (st.p10, 1.3, 1e-12);
  g_assert_cmpfloat_with_epsilon (st.median, 2.5, 1e-12);
  g_assert_cmpfloat_with_epsilon (st.p90, 3.7, 1e-12);

  hone_bench_params_init (&bp);
  bp.prompt_tokens = 20;
  bp.gen_tokens = 6;
  bp.runs = 3;
  bp.warmup = 1;
  bp.bandwidth_gbs = 10.0;

  /* No model → NO_MODEL. */
  hone_engine_bench_async (e, &bp, NULL, NULL, NULL, NULL, store_result, &res);
  wait_for (&res);
  g_assert_null (hone_engine_bench_finish (e, res, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_NO_MODEL);
  g_clear_error (&error);
  g_clear_object (&res);

  load_ok (e);
  hone_engine_bench_async (e, &bp, NULL, NULL, NULL, NULL, store_result, &res);
  wait_for (&res);
  r = hone_engine_bench_finish (e, res, &error);
  g_assert_no_error (error);
  g_clear_object (&res);
  g_assert_cmpuint (r->runs->len, ==, 3);
  for (guint i = 0; i < 3; i++)
    {
      HoneRequestMetrics *m = &g_array_index (r->runs, HoneRequestMetrics, i);
      g_assert_cmpint (m->prompt_tokens, ==, 20);
      g_assert_cmpint (m->prefill_tokens, ==, 20);   /* fresh cache each run */
      g_assert_cmpint (m->generated_tokens, ==, 6);
    }
  g_assert_cmpfloat (r->decode_tps.median, >, 0.0);
  g_assert_cmpfloat (r->decode_tps.p10, <=, r->decode_tps.median);
  g_assert_cmpfloat (r->decode_tps.median, <=, r->decode_tps.p90);
  g_assert_cmpint (r->bytes_per_token, >, r->weight_bytes_per_token);
  g_assert_cmpfloat_with_epsilon (r->roofline_fraction, r->achieved_gbs / 10.0, 1e-12);
  /* the threads the CPU ran on: the engine's n-threads here (a GPU run says 0) */
  g_assert_cmpint (r->n_threads, ==, g_strcmp0 (r->device, "cpu") == 0 ? N_THREADS : 0);
  {
    g_autoptr (JsonNode) j = hone_bench_result_to_json (r);
    g_autofree char *text = hone_bench_result_to_text (r);
    g_assert_true (JSON_NODE_HOLDS_OBJECT (j));
    g_assert_cmpstr (json_object_get_string_member (json_node_get_object (j), "sampling"), ==, "greedy");
    g_assert_nonnull (strstr (text, "greedy"));
  }

  /* Sampled (--sample): the chat's default sampler with a fixed seed. */
  {
    g_autoptr (HoneBenchResult) rs = NULL;
    bp.sampled = TRUE;
    hone_engine_bench_async (e, &bp, NULL, NULL, NULL, NULL, store_result, &res);
    wait_for (&res);
    rs = hone_engine_bench_finish (e, res, &error);
    g_assert_no_error (error);
    g_clear_object (&res);
    g_assert_cmpuint (rs->runs->len, ==, 3);
    for (guint i = 0; i < 3; i++)
      g_assert_cmpint (g_array_index (rs->runs, HoneRequestMetrics, i).generated_tokens, ==, 6);
    g_assert_cmpfloat (rs->decode_tps.median, >, 0.0);
    {
      g_autoptr (JsonNode) j = hone_bench_result_to_json (rs);
      g_autofree char *text = hone_bench_result_to_text (rs);
      g_assert_cmpstr (json_object_get_string_member (json_node_get_object (j), "sampling"), ==, "chat-defaults");
      g_assert_nonnull (strstr (text, "top-k 40"));
    }
    bp.sampled = FALSE;
  }

  /* Does not fit the context → INVALID_ARGUMENT. */
  bp.prompt_tokens = 600;
  hone_engine_bench_async (e, &bp, NULL, NULL, NULL, NULL, store_result, &res);
  wait_for (&res);
  g_assert_null (hone_engine_bench_finish (e, res, &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT);
  g_clear_error (&error);
  g_clear_object (&res);
}

static void
test_model_info (void)
{
  GError *error = NULL;
  g_autoptr (HoneModelInfo) info = hone_model_info_new_for_path (model_path, &error);
  g_autoptr (HoneModel) model = NULL;
  const HoneTensorTypeCount *types;
  guint n_types = 0;
  gint64 n_tensors = 0, bytes = 0;
  HoneMemoryEstimate est;

  g_assert_no_error (error);
  model = hone_model_open (model_path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (hone_model_info_get_n_params (info), ==, hone_model_n_params (model));
  g_assert_cmpint (hone_model_info_get_vocab_size (info), ==, 300);
  g_assert_cmpint (hone_model_info_get_hidden_size (info), ==, 256);
  types = hone_model_info_get_tensor_types (info, &n_types);
  g_assert_cmpuint (n_types, >=, 2);   /* F32 norms + the weight type */
  for (guint i = 0; i < n_types; i++)
    {
      n_tensors += types[i].count;
      bytes += types[i].bytes;
    }
  /* 2 layers × 9 tensors + embeddings, output norm, output. */
  g_assert_cmpint (n_tensors, ==, 2 * 9 + 3);
  g_assert_cmpint (bytes, ==, hone_model_info_get_weights_bytes (info));
  g_assert_cmpint (hone_model_info_get_file_size (info), >, bytes);
  hone_model_info_estimate_memory (info, 128, FALSE, &est);
  g_assert_cmpint (est.kv_cache, ==, hone_model_kv_bytes (&model->config, 128, 2));
  g_assert_cmpint (est.total, ==, est.weights + est.kv_cache + est.workspace);

  /* The same card from a Hugging Face folder (config.json + safetensors). */
  {
    HoneTestModelSpec spec;
    g_autofree char *hf = NULL;
    g_autoptr (HoneModelInfo) hinfo = NULL;
    g_autoptr (HoneModel) hmodel = NULL;
    hone_test_model_spec_init (&spec, HONE_ARCH_QWEN2, HONE_DTYPE_F32);
    hf = hone_test_model_write_hf (tmp_dir, &spec, &error);
    g_assert_no_error (error);
    hinfo = hone_model_info_new_for_path (hf, &error);
    g_assert_no_error (error);
    hmodel = hone_model_open (hf, &error);
    g_assert_no_error (error);
    g_assert_cmpstr (hone_model_info_get_architecture (hinfo), ==, "qwen2");
    g_assert_cmpstr (hone_model_info_get_source (hinfo), ==, "safetensors");
    g_assert_cmpint (hone_model_info_get_n_params (hinfo), ==, hone_model_n_params (hmodel));
    g_assert_true (hone_model_info_get_has_chat_template (hinfo));
    g_assert_cmpstr (hone_model_info_get_tokenizer_kind (hinfo), ==, "byte-level BPE");
  }

  g_assert_null (hone_model_info_new_for_path ("/nonexistent", &error));
  g_assert_error (error, HONE_ERROR, HONE_ERROR_IO);
  g_clear_error (&error);
}

/* hone_engine_pick_device: a named device is kept as it is (no check: the
 * load says what is wrong with it); NULL, "" and "auto" pick the same, the
 * CPU or a CUDA GPU, and say why only when a CUDA build ends on the CPU — the
 * reason hone_cuda_device_check gives for the first GPU (or for device 0 when
 * none is listed). */
static void
test_pick_device (void)
{
  char *why = (char *) "unset";
  g_autofree char *cpu = hone_engine_pick_device ("cpu", &why);
  g_autofree char *named = NULL;
  g_autofree char *a = NULL, *b = NULL, *c = NULL;
  g_autofree char *wa = NULL, *wb = NULL, *wc = NULL;

  g_assert_cmpstr (cpu, ==, "cpu");
  g_assert_null (why);
  named = hone_engine_pick_device ("cuda:3", &why);
  g_assert_cmpstr (named, ==, "cuda:3");
  g_assert_null (why);
  a = hone_engine_pick_device (NULL, &wa);
  b = hone_engine_pick_device ("", &wb);
  c = hone_engine_pick_device ("auto", &wc);
  g_assert_cmpstr (a, ==, c);
  g_assert_cmpstr (b, ==, c);
  g_assert_cmpstr (wa, ==, wc);
  g_assert_cmpstr (wb, ==, wc);
#ifdef HONE_HAVE_CUDA
  if (g_str_equal (c, "cpu"))
    {
      g_autoptr (GPtrArray) devices = hone_engine_list_devices ();
      g_autoptr (GError) error = NULL;
      int first = -1;
      for (guint i = 0; i < devices->len && first < 0; i++)
        {
          const HoneDevice *d = g_ptr_array_index (devices, i);
          if (d->kind == HONE_DEVICE_CUDA)
            first = atoi (d->id + 5);
        }
      g_assert_false (hone_cuda_device_check (first < 0 ? 0 : first, &error));
      g_assert_nonnull (wc);
      g_assert_cmpstr (wc, ==, error->message);
    }
  else
    {
      g_assert_true (g_str_has_prefix (c, "cuda:"));
      g_assert_null (wc);
      g_assert_true (hone_cuda_device_check (atoi (c + 5), NULL));
    }
#else
  g_assert_cmpstr (c, ==, "cpu");
  g_assert_null (wc);
#endif
  /* without the out-parameter */
  g_free (a);
  a = hone_engine_pick_device ("auto", NULL);
  g_assert_cmpstr (a, ==, c);
}

/* The engine's "auto" device: resolved at each load to what
 * hone_engine_pick_device picks, with its reason as the device note (a CUDA
 * build without a usable GPU), or no note (a GPU found, a build without CUDA,
 * a named device); the note goes with the model (NULL after unload) and is
 * announced on the owner's context. (A GPU too small for the model: the
 * /cuda/auto-fallback test on the GPU machine.) */
static void
test_device_auto (void)
{
  g_autoptr (HoneEngine) e = new_engine ();
  g_autofree char *why = NULL;
  g_autofree char *picked = hone_engine_pick_device ("auto", &why);
  GAsyncResult *res = NULL;
  GError *error = NULL;
  int note_notifies = 0;

  g_signal_connect (e, "notify::device-note", G_CALLBACK (on_notify), &note_notifies);
  for (int round = 0; round < 2; round++)
    {
      g_autofree char *active = NULL, *note = NULL;

      hone_engine_set_device (e, round == 0 ? "auto" : "");
      g_assert_cmpstr (hone_engine_get_device (e), ==, round == 0 ? "auto" : "");
      g_assert_true (hone_engine_load_sync (e, model_path, NULL, NULL, NULL, &error));
      g_assert_no_error (error);
      g_object_get (e, "active-device", &active, "device-note", &note, NULL);
      g_assert_cmpstr (active, ==, picked);
      g_assert_cmpstr (note, ==, why);
    }
  while (g_main_context_iteration (NULL, FALSE))
    ;
  if (why != NULL)
    g_assert_cmpint (note_notifies, >=, 1);

  /* a named device: no note, and none left from the previous load */
  hone_engine_set_device (e, "cpu");
  g_assert_true (hone_engine_load_sync (e, model_path, NULL, NULL, NULL, &error));
  g_assert_no_error (error);
  {
    g_autofree char *active = NULL, *note = NULL;
    g_object_get (e, "active-device", &active, "device-note", &note, NULL);
    g_assert_cmpstr (active, ==, "cpu");
    g_assert_null (note);
  }

  /* unloading drops the note with the model */
  hone_engine_set_device (e, "auto");
  g_assert_true (hone_engine_load_sync (e, model_path, NULL, NULL, NULL, &error));
  hone_engine_unload_async (e, NULL, store_result, &res);
  wait_for (&res);
  g_assert_true (hone_engine_unload_finish (e, res, &error));
  g_assert_no_error (error);
  g_object_unref (res);
  {
    g_autofree char *note = NULL;
    g_object_get (e, "device-note", &note, NULL);
    g_assert_null (note);
  }
}

int
main (int argc, char **argv)
{
  HoneTestModelSpec spec;
  GError *error = NULL;
  int status;

  g_test_init (&argc, &argv, NULL);
  main_thread = g_thread_self ();
  hone_test_model_spec_init (&spec, HONE_ARCH_LLAMA, HONE_DTYPE_Q8_0);
  tmp_dir = g_dir_make_tmp ("hone-engine-XXXXXX", &error);
  g_assert_no_error (error);
  model_path = hone_test_model_write_gguf (tmp_dir, &spec, &error);
  g_assert_no_error (error);

  g_test_add_func ("/engine/model-info", test_model_info);
  g_test_add_func ("/engine/pick-device", test_pick_device);
  g_test_add_func ("/engine/device-auto", test_device_auto);
  g_test_add_func ("/engine/load", test_load);
  g_test_add_func ("/engine/memory-peak-reset", test_memory_peak_reset);
  g_test_add_func ("/engine/load-cancel", test_load_cancel);
  g_test_add_func ("/engine/greedy-matches-backend", test_greedy_matches_backend);
  g_test_add_func ("/engine/cancel-generation", test_cancel_generation);
  g_test_add_func ("/engine/chat-prefix-reuse", test_chat_prefix_reuse);
  g_test_add_func ("/engine/chat-fits-context", test_chat_fits_context);
  g_test_add_func ("/engine/errors", test_errors);
  g_test_add_func ("/engine/unload-while-generating", test_unload_while_generating);
  g_test_add_func ("/engine/dispose", test_dispose);
  g_test_add_func ("/engine/perplexity", test_perplexity);
  g_test_add_func ("/engine/bench", test_bench);
  status = g_test_run ();

  hone_test_rm_rf (tmp_dir);
  g_free (tmp_dir);
  g_free (model_path);
  return status;
}
