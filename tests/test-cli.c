/* test-cli.c — the `hone` command, run as a subprocess (no shell).
 *
 * Usage: test-cli HONE_BINARY [--model]
 *   unit suite: a tiny generated model (hone-test-models.h);
 *   --model: the default model, checked against committed references from
 *   HF tokenizers (tests/data/tokenizer) and jinja2 (tests/data/templates).
 *
 * Every failure must be exactly one line "hone: …" on stderr and a non-zero
 * exit status. */
#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <string.h>
#include <sys/stat.h>

#include "hone.h"
#include "hone-test-models.h"

static const char *hone_bin;
static char *tmp_dir;
static char *tiny;            /* tiny model path */
static char *default_model;   /* --model suite */

typedef struct {
  int status;
  char *out;
  char *err;
} Run;

static void
run_clear (Run *r)
{
  g_free (r->out);
  g_free (r->err);
}

/* argv without the binary, NULL-terminated; @input to stdin (may be NULL);
 * extra environment "KEY=VALUE" (may be NULL). */
static Run
run_hone (const char *const *args, const char *input, const char *env_kv)
{
  g_autoptr (GSubprocessLauncher) l = g_subprocess_launcher_new (G_SUBPROCESS_FLAGS_STDIN_PIPE
                                                                | G_SUBPROCESS_FLAGS_STDOUT_PIPE
                                                                | G_SUBPROCESS_FLAGS_STDERR_PIPE);
  g_autoptr (GPtrArray) argv = g_ptr_array_new ();
  g_autoptr (GSubprocess) p = NULL;
  GError *error = NULL;
  Run r = { 0 };

  g_ptr_array_add (argv, (gpointer) hone_bin);
  for (int i = 0; args[i] != NULL; i++)
    g_ptr_array_add (argv, (gpointer) args[i]);
  g_ptr_array_add (argv, NULL);
  g_subprocess_launcher_setenv (l, "LC_ALL", "C.UTF-8", TRUE);
  if (env_kv != NULL)
    {
      g_auto (GStrv) kv = g_strsplit (env_kv, "=", 2);
      g_subprocess_launcher_setenv (l, kv[0], kv[1], TRUE);
    }
  p = g_subprocess_launcher_spawnv (l, (const char *const *) argv->pdata, &error);
  g_assert_no_error (error);
  g_subprocess_communicate_utf8 (p, input != NULL ? input : "", NULL, &r.out, &r.err, &error);
  g_assert_no_error (error);
  g_assert_true (g_subprocess_get_if_exited (p));
  r.status = g_subprocess_get_exit_status (p);
  return r;
}

/* Non-zero exit and exactly one line "hone: …" on stderr. */
static void
assert_one_line_failure (const char *const *args, const char *input, const char *env_kv, const char *expect_substr)
{
  Run r = run_hone (args, input, env_kv);
  const char *nl;

  if (r.status == 0 || r.err == NULL || !g_str_has_prefix (r.err, "hone: "))
    g_printerr ("args[0]=%s status=%d stderr=«%s»\n", args[0], r.status, r.err);
  g_assert_cmpint (r.status, !=, 0);
  g_assert_true (g_str_has_prefix (r.err, "hone: "));
  nl = strchr (r.err, '\n');
  g_assert_nonnull (nl);
  g_assert_cmpstr (nl + 1, ==, "");
  if (expect_substr != NULL && strstr (r.err, expect_substr) == NULL)
    g_error ("stderr «%s» lacks «%s»", r.err, expect_substr);
  run_clear (&r);
}

static JsonNode *
parse_json (const char *text)
{
  g_autoptr (JsonParser) p = json_parser_new ();
  GError *error = NULL;

  json_parser_load_from_data (p, text, -1, &error);
  g_assert_no_error (error);
  return json_node_copy (json_parser_get_root (p));
}

static GArray *
json_ids (JsonArray *a)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  for (guint i = 0; i < json_array_get_length (a); i++)
    {
      gint32 v = (gint32) json_array_get_int_element (a, i);
      g_array_append_val (ids, v);
    }
  return ids;
}

static void
assert_ids_equal (GArray *a, GArray *b)
{
  g_assert_cmpmem (a->data, a->len * sizeof (gint32), b->data, b->len * sizeof (gint32));
}

/* ---- unit suite (tiny model) ---------------------------------------------------- */

static void
check_run_json_deterministic (const char *model, const char *prompt, int n)
{
  g_autofree char *ns = g_strdup_printf ("%d", n);
  const char *args[] = { "run", "-m", model, "-p", prompt, "--json", "--temp", "0", "-n", ns, "-t", "2",
                         "--device", "cpu", NULL };
  Run a = run_hone (args, NULL, NULL);
  Run b = run_hone (args, NULL, NULL);
  g_autoptr (JsonNode) ja = NULL;
  g_autoptr (JsonNode) jb = NULL;
  JsonObject *oa, *ob, *m;
  g_autoptr (GArray) gen = NULL;
  g_autoptr (GArray) prompt_ids = NULL;

  g_assert_cmpint (a.status, ==, 0);
  g_assert_cmpint (b.status, ==, 0);
  g_assert_cmpstr (a.err, ==, "");
  ja = parse_json (a.out);
  jb = parse_json (b.out);
  oa = json_node_get_object (ja);
  ob = json_node_get_object (jb);
  gen = json_ids (json_object_get_array_member (oa, "generated_tokens"));
  prompt_ids = json_ids (json_object_get_array_member (oa, "prompt_tokens"));
  g_assert_cmpuint (gen->len, >=, 1);
  g_assert_cmpuint (gen->len, <=, (guint) n);
  g_assert_cmpuint (prompt_ids->len, >=, 1);
  /* Deterministic: the same ids and text twice. */
  {
    g_autoptr (GArray) gen_b = json_ids (json_object_get_array_member (ob, "generated_tokens"));
    assert_ids_equal (gen, gen_b);
  }
  g_assert_cmpstr (json_object_get_string_member (oa, "text"), ==, json_object_get_string_member (ob, "text"));
  m = json_object_get_object_member (oa, "metrics");
  g_assert_cmpint (json_object_get_int_member (m, "prompt_tokens"), ==, prompt_ids->len);
  g_assert_cmpint (json_object_get_int_member (m, "generated_tokens"), ==, gen->len);
  g_assert_cmpfloat (json_object_get_double_member (m, "ttft_ms"), >, 0.0);

  /* The prompt ids are what `hone tokenize` says. */
  {
    const char *targs[] = { "tokenize", "-m", model, NULL };
    Run t = run_hone (targs, prompt, NULL);
    g_autoptr (JsonNode) jt = NULL;
    g_autoptr (GArray) tids = NULL;
    g_assert_cmpint (t.status, ==, 0);
    jt = parse_json (t.out);
    tids = json_ids (json_node_get_array (jt));
    assert_ids_equal (tids, prompt_ids);
    run_clear (&t);
  }
  run_clear (&a);
  run_clear (&b);
}

static void
test_run_json (void)
{
  check_run_json_deterministic (tiny, "hello world", 8);
}

static void
test_tokenize_round_trip (void)
{
  const char *text = "Hello, wörld! 123 <|im_start|>tokens\n";
  const char *enc[] = { "tokenize", "-m", tiny, "--no-special", NULL };
  const char *enc_special[] = { "tokenize", "-m", tiny, NULL };
  const char *dec[] = { "tokenize", "-m", tiny, "--decode", NULL };
  Run a = run_hone (enc, text, NULL);
  Run s = run_hone (enc_special, text, NULL);
  Run d;
  g_autoptr (JsonNode) ja = NULL;
  g_autoptr (JsonNode) js = NULL;
  g_autoptr (GArray) ids = NULL;
  g_autoptr (GArray) ids_s = NULL;
  gboolean has_im_start = FALSE;

  g_assert_cmpint (a.status, ==, 0);
  ja = parse_json (a.out);
  ids = json_ids (json_node_get_array (ja));
  /* Without specials "<|im_start|>" is plain text: id 1 never appears. */
  for (guint i = 0; i < ids->len; i++)
    g_assert_cmpint (g_array_index (ids, gint32, i), !=, 1);
  d = run_hone (dec, a.out, NULL);
  g_assert_cmpint (d.status, ==, 0);
  g_assert_cmpstr (d.out, ==, text);
  run_clear (&d);

  /* With specials the marker becomes token 1 and decodes back to its text. */
  g_assert_cmpint (s.status, ==, 0);
  js = parse_json (s.out);
  ids_s = json_ids (json_node_get_array (js));
  for (guint i = 0; i < ids_s->len; i++)
    has_im_start |= g_array_index (ids_s, gint32, i) == 1;
  g_assert_true (has_im_start);
  g_assert_cmpuint (ids_s->len, <, ids->len);

  /* Bad decode input. */
  assert_one_line_failure (dec, "[1, 2, \"x\"]", NULL, NULL);
  assert_one_line_failure (dec, "[1, 99999]", NULL, "99999");
  assert_one_line_failure (dec, "not json", NULL, NULL);
  run_clear (&a);
  run_clear (&s);
}

static void
test_template_tiny (void)
{
  const char *args[] = { "template", "-m", tiny, "--add-generation-prompt", NULL };
  const char *args_nogen[] = { "template", "-m", tiny, NULL };
  const char *conv = "[{\"role\": \"system\", \"content\": \"Be nice.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]";
  Run a = run_hone (args, conv, NULL);
  Run b = run_hone (args_nogen, conv, NULL);

  /* ChatML, as the tiny model's template defines it. */
  g_assert_cmpint (a.status, ==, 0);
  g_assert_cmpstr (a.out, ==,
                   "<|im_start|>system\nBe nice.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  g_assert_cmpint (b.status, ==, 0);
  g_assert_cmpstr (b.out, ==, "<|im_start|>system\nBe nice.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
  assert_one_line_failure (args, "{\"role\": \"user\"}", NULL, NULL);
  assert_one_line_failure (args, "[", NULL, NULL);
  run_clear (&a);
  run_clear (&b);
}

static void
test_info_tiny (void)
{
  const char *args[] = { "info", tiny, "--json", "--context", "128", NULL };
  const char *text_args[] = { "info", tiny, NULL };
  Run r = run_hone (args, NULL, NULL);
  Run t = run_hone (text_args, NULL, NULL);
  g_autoptr (JsonNode) j = NULL;
  g_autoptr (HoneModel) m = NULL;
  JsonObject *o;
  GError *error = NULL;

  g_assert_cmpint (r.status, ==, 0);
  j = parse_json (r.out);
  o = json_node_get_object (j);
  m = hone_model_open (tiny, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_object_get_string_member (o, "architecture"), ==, "llama");
  g_assert_cmpint (json_object_get_int_member (o, "n_params"), ==, hone_model_n_params (m));
  g_assert_true (json_object_get_boolean_member (o, "chat_template"));
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (o, "memory_estimate"), "kv_cache"),
                   ==, hone_model_kv_bytes (&m->config, 128, 2));
  g_assert_cmpint (t.status, ==, 0);
  g_assert_nonnull (strstr (t.out, "Q8_0"));
  run_clear (&r);
  run_clear (&t);
}

static void
test_chat_session (void)
{
  const char *args[] = { "chat", "-m", tiny, "--temp", "0", "-n", "4", "--metrics", NULL };
  Run r = run_hone (args, "Hello\nAgain\n/reset\nHello\n/quit\n", NULL);
  g_auto (GStrv) lines = NULL;
  int turns = 0;

  g_assert_cmpint (r.status, ==, 0);
  /* One metrics line per answer; the second turn reuses the first's cache,
   * the one after /reset starts from nothing. */
  lines = g_strsplit (r.err, "\n", -1);
  for (int i = 0; lines[i] != NULL; i++)
    if (g_str_has_prefix (lines[i], "[answer cut"))   /* /cli/stop-notes checks these */
      g_assert_cmpstr (lines[i], ==, "[answer cut at the -n limit of 4 tokens]");
    else if (g_str_has_prefix (lines[i], "["))
      {
        int cached = -1, prefilled = -1;
        g_assert_cmpint (sscanf (lines[i], "[%d cached + %d prefilled", &cached, &prefilled), ==, 2);
        if (turns == 0 || turns == 2)
          g_assert_cmpint (cached, ==, 0);
        else
          g_assert_cmpint (cached, >, 0);
        turns++;
      }
  g_assert_cmpint (turns, ==, 3);
  run_clear (&r);
}

/* Why an answer ended, when the user did not pick it: `run` says so when the
 * context filled up (not at its -n limit, which the user set), `chat` also
 * when -n cut an answer; --json carries stop_reason instead. */
static const char *
run_stop_reason (const char *const *args, JsonNode **out)
{
  Run r = run_hone (args, NULL, NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.err, ==, "");
  *out = parse_json (r.out);
  run_clear (&r);
  return json_object_get_string_member (json_node_get_object (*out), "stop_reason");
}

static void
test_stop_notes (void)
{
  g_autoptr (JsonNode) j1 = NULL;
  g_autoptr (JsonNode) j2 = NULL;
  g_autoptr (JsonNode) j3 = NULL;
  const char *one[] = { "run", "-m", tiny, "-p", "hello world", "--temp", "0", "-n", "1", "--json", "--device", "cpu",
                        NULL };
  g_autofree char *ctx = NULL;
  g_autofree char *expect = NULL;
  int prompt_tokens;

  /* -n reached: --json says so, the text form stays quiet */
  g_assert_cmpstr (run_stop_reason (one, &j1), ==, "max-tokens");
  {
    const char *text[] = { "run", "-m", tiny, "-p", "hello world", "--temp", "0", "-n", "1", "--device", "cpu", NULL };
    Run r = run_hone (text, NULL, NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "");
    run_clear (&r);
  }
  /* a context two tokens longer than the prompt fills up */
  prompt_tokens = (int) json_array_get_length (json_object_get_array_member (json_node_get_object (j1),
                                                                             "prompt_tokens"));
  ctx = g_strdup_printf ("%d", prompt_tokens + 2);
  {
    const char *full[] = { "run", "-m", tiny, "-p", "hello world", "--temp", "0", "-c", ctx, "--json", "--device",
                           "cpu", NULL };
    const char *text[] = { "run", "-m", tiny, "-p", "hello world", "--temp", "0", "-c", ctx, "--device", "cpu", NULL };
    Run r;
    g_assert_cmpstr (run_stop_reason (full, &j2), ==, "context-full");
    r = run_hone (text, NULL, NULL);
    g_assert_cmpint (r.status, ==, 0);
    expect = g_strdup_printf ("hone: the answer stopped because the context (%d tokens) is full; "
                              "-c sets a longer one\n", prompt_tokens + 2);
    g_assert_cmpstr (r.err, ==, expect);
    run_clear (&r);
  }
  /* chat: the same turn as `run --chat`, cut at -n 3 exactly when run says max-tokens */
  {
    const char *rchat[] = { "run", "-m", tiny, "--chat", "-p", "Hello", "--temp", "0", "-n", "3", "--json",
                            "--device", "cpu", NULL };
    const char *chat[] = { "chat", "-m", tiny, "--temp", "0", "-n", "3", "--device", "cpu", NULL };
    const char *reason = run_stop_reason (rchat, &j3);
    Run r = run_hone (chat, "Hello\n/quit\n", NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, g_str_equal (reason, "max-tokens") ? "[answer cut at the -n limit of 3 tokens]\n" : "");
    g_test_message ("run --chat -n 3 stopped for %s", reason);
    run_clear (&r);
  }
}

/* hone quantize end to end on the tiny model: calibration on a document,
 * the quality table and its verdict (--eval), the AutoAWQ folder written, a
 * note when the calibration has few tokens; bad options fail in one line and
 * leave nothing behind. */
static void
test_quantize (void)
{
  g_autofree char *doc = g_build_filename (tmp_dir, "notes.txt", NULL);
  g_autofree char *out = g_build_filename (tmp_dir, "tiny-awq", NULL);
  g_autofree char *cfg = g_build_filename (out, "config.json", NULL);
  g_autofree char *st = g_build_filename (out, "model.safetensors", NULL);
  g_autofree char *bad_out = g_build_filename (tmp_dir, "not-written", NULL);
  GString *text = g_string_new (NULL);

  for (int i = 0; i < 200; i++)
    g_string_append_printf (text, "Line %d: the cat sat on the mat and the dog sat on the log. ", i);
  g_assert_true (g_file_set_contents (doc, text->str, -1, NULL));
  g_string_free (text, TRUE);
  {
    const char *a[] = { "quantize", "-m", tiny, "-d", doc, "-g", "32", "-n", "2", "-l", "64", "--eval",
                        "--eval-samples", "2", "-t", "2", "-q", "-o", out, NULL };
    Run r = run_hone (a, NULL, NULL);
    if (r.status != 0)
      g_printerr ("stderr «%s»\n", r.err);
    g_assert_cmpint (r.status, ==, 0);
    /* 2 × 64 = 128 calibration tokens: the note, and nothing else on stderr (-q) */
    g_assert_cmpstr (r.err, ==, "hone: only 128 calibration tokens: AWQ may fit these documents more than general "
                                "use (the defaults take 4096 on the CPU, 65536 with a GPU); --eval shows how it does "
                                "on generic text\n");
    g_assert_nonnull (strstr (r.out, "Held-out text ("));
    g_assert_nonnull (strstr (r.out, "  original  ppl"));
    g_assert_nonnull (strstr (r.out, "  AWQ       ppl"));
    g_assert_nonnull (strstr (r.out, "\nVerdict: "));
    g_assert_true (g_file_test (cfg, G_FILE_TEST_IS_REGULAR));
    g_assert_true (g_file_test (st, G_FILE_TEST_IS_REGULAR));
    run_clear (&r);
  }
  {
    /* enough tokens (4 × 512 > 2048): no note */
    g_autofree char *out2 = g_build_filename (tmp_dir, "tiny-awq-2", NULL);
    const char *a[] = { "quantize", "-m", tiny, "-d", doc, "-g", "32", "-n", "5", "-l", "500", "-t", "2", "-q",
                        "-o", out2, NULL };
    Run r = run_hone (a, NULL, NULL);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "");
    run_clear (&r);
  }
  {
    const char *a[] = { "quantize", "-m", tiny, "-d", doc, "-g", "48", "-o", bad_out, NULL };
    assert_one_line_failure (a, NULL, NULL, "48");
    g_assert_false (g_file_test (bad_out, G_FILE_TEST_EXISTS));
  }
  {
    /* --rtn reads no documents: a hone away from the source tree (where the built-in calibration
     * set is not found unless installed) exports all the same, the same bytes as with documents */
    g_autofree char *bin_dir = g_build_filename (tmp_dir, "away", "bin", NULL);
    g_autofree char *bin = g_build_filename (bin_dir, "hone", NULL);
    g_autofree char *out3 = g_build_filename (tmp_dir, "tiny-rtn", NULL);
    g_autofree char *out4 = g_build_filename (tmp_dir, "tiny-rtn-docs", NULL);
    g_autofree char *st3 = g_build_filename (out3, "model.safetensors", NULL);
    g_autofree char *st4 = g_build_filename (out4, "model.safetensors", NULL);
    g_autofree char *b3 = NULL, *b4 = NULL;
    gsize n3, n4;
    g_autoptr(GFile) from = g_file_new_for_path (hone_bin);
    g_autoptr(GFile) to = g_file_new_for_path (bin);
    const char *saved = hone_bin;
    GError *error = NULL;
    const char *a[] = { "quantize", "-m", tiny, "--rtn", "-g", "32", "-q", "-o", out3, NULL };
    const char *b[] = { "quantize", "-m", tiny, "-d", doc, "--rtn", "-g", "32", "-q", "-o", out4, NULL };
    Run r;

    g_assert_cmpint (g_mkdir_with_parents (bin_dir, 0755), ==, 0);
    g_file_copy (from, to, G_FILE_COPY_OVERWRITE, NULL, NULL, NULL, &error);
    g_assert_no_error (error);
    g_assert_cmpint (g_chmod (bin, 0755), ==, 0);
    hone_bin = bin;
    r = run_hone (a, NULL, "HONE_SOURCE_ROOT=");
    hone_bin = saved;
    if (r.status != 0)
      g_printerr ("stderr «%s»\n", r.err);
    g_assert_cmpint (r.status, ==, 0);
    g_assert_cmpstr (r.err, ==, "");
    run_clear (&r);
    r = run_hone (b, NULL, NULL);
    g_assert_cmpint (r.status, ==, 0);
    run_clear (&r);
    g_assert_true (g_file_get_contents (st3, &b3, &n3, NULL));
    g_assert_true (g_file_get_contents (st4, &b4, &n4, NULL));
    g_assert_cmpmem (b3, n3, b4, n4);
  }
}

/* --device auto, the default: the device hone_engine_pick_device picks. When
 * that is the CPU for a reason (a CUDA build without a usable GPU), one line
 * says why once the model is loaded, and nothing else; a build without CUDA,
 * a GPU found, or a named device: nothing on stderr. A named GPU that is not
 * there fails in one line, with no fallback. */
static void
test_device_auto (void)
{
  g_autofree char *why = NULL;
  g_autofree char *picked = hone_engine_pick_device ("auto", &why);
  const char *a[] = { "run", "-m", tiny, "-p", "hi", "-n", "2", "--temp", "0", NULL };
  const char *b[] = { "run", "-m", tiny, "-p", "hi", "-n", "2", "--temp", "0", "--device", "auto", NULL };
  const char *c[] = { "run", "-m", tiny, "-p", "hi", "-n", "2", "--temp", "0", "--device", "cpu", NULL };
  g_autofree char *expected = why != NULL ? g_strdup_printf ("hone: running on the CPU: %s\n", why)
                                          : g_strdup ("");
  Run r;

  g_assert_true (g_str_equal (picked, "cpu") || g_str_has_prefix (picked, "cuda:"));
#ifdef HONE_HAVE_CUDA
  g_assert_true (why == NULL || g_str_equal (picked, "cpu"));
#else
  g_assert_cmpstr (picked, ==, "cpu");
  g_assert_null (why);
#endif
  for (int i = 0; i < 2; i++)
    {
      r = run_hone (i == 0 ? a : b, NULL, NULL);
      g_assert_cmpint (r.status, ==, 0);
      g_assert_cmpstr (r.err, ==, expected);
      run_clear (&r);
    }
  r = run_hone (c, NULL, NULL);
  g_assert_cmpint (r.status, ==, 0);
  g_assert_cmpstr (r.err, ==, "");
  run_clear (&r);
  if (g_str_equal (picked, "cpu"))
    {
      const char *d[] = { "run", "-m", tiny, "-p", "hi", "-n", "2", "--device", "cuda:0", NULL };
      assert_one_line_failure (d, NULL, NULL, NULL);
    }
}

static void
test_ppl_and_bench_tiny (void)
{
  g_autofree char *text_path = g_build_filename (tmp_dir, "text.txt", NULL);
  const char *text = "the cat sat on the mat and the dog sat on the log; the end of the story is near.\n";
  const char *args[] = { "ppl", tiny, text_path, "--context", "16", "--stride", "8", "--json", NULL };
  const char *bargs[] = { "bench", "-m", tiny, "--runs", "2", "--warmup", "0", "--prompt-tokens", "16",
                          "--gen-tokens", "4", "--json", "--bandwidth", "20", NULL };
  Run r, b;
  g_autoptr (JsonNode) j = NULL;
  g_autoptr (JsonNode) jb = NULL;
  g_autoptr (HoneModel) m = NULL;
  g_autoptr (GArray) ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  GError *error = NULL;

  g_assert_true (g_file_set_contents (text_path, text, -1, NULL));
  m = hone_model_open (tiny, &error);
  g_assert_no_error (error);
  g_assert_true (hone_tokenizer_encode (m->tokenizer, text, -1, HONE_ENCODE_ADD_SPECIAL, ids, &error));
  r = run_hone (args, NULL, NULL);
  g_assert_cmpint (r.status, ==, 0);
  j = parse_json (r.out);
  /* Every token but the first is scored exactly once. */
  g_assert_cmpint (json_object_get_int_member (json_node_get_object (j), "tokens_scored"), ==, ids->len - 1);
  g_assert_cmpfloat (json_object_get_double_member (json_node_get_object (j), "perplexity"), >, 1.0);
  {
    /* -m MODEL FILE and FILE alone (the default model, here through HONE_DEFAULT_MODEL) give the same figure */
    const char *am[] = { "ppl", "-m", tiny, text_path, "--context", "16", "--stride", "8", "--json", NULL };
    const char *ad[] = { "ppl", text_path, "--context", "16", "--stride", "8", "--json", NULL };
    g_autofree char *env = g_strdup_printf ("HONE_DEFAULT_MODEL=%s", tiny);
    Run rm = run_hone (am, NULL, NULL), rd = run_hone (ad, NULL, env);
    g_autoptr (JsonNode) jm = NULL;
    g_autoptr (JsonNode) jd = NULL;

    g_assert_cmpint (rm.status, ==, 0);
    g_assert_cmpint (rd.status, ==, 0);
    jm = parse_json (rm.out);
    jd = parse_json (rd.out);
    g_assert_cmpfloat (json_object_get_double_member (json_node_get_object (jm), "perplexity"), ==,
                       json_object_get_double_member (json_node_get_object (j), "perplexity"));
    g_assert_cmpfloat (json_object_get_double_member (json_node_get_object (jd), "perplexity"), ==,
                       json_object_get_double_member (json_node_get_object (j), "perplexity"));
    run_clear (&rm);
    run_clear (&rd);
  }

  b = run_hone (bargs, NULL, NULL);
  g_assert_cmpint (b.status, ==, 0);
  jb = parse_json (b.out);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (json_node_get_object (jb), "per_run")), ==, 2);
  g_assert_cmpfloat (json_object_get_double_member (json_object_get_object_member (json_node_get_object (jb),
                                                                                    "decode_tps"), "median"), >, 0.0);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (jb), "sampling"), ==, "greedy");
  run_clear (&b);
  /* --sample: the chat's default sampling */
  {
    const char *sargs[] = { "bench", "-m", tiny, "--runs", "1", "--warmup", "0", "--prompt-tokens", "16",
                            "--gen-tokens", "4", "--json", "--sample", "--bandwidth", "20", NULL };
    g_autoptr (JsonNode) js = NULL;
    b = run_hone (sargs, NULL, NULL);
    g_assert_cmpint (b.status, ==, 0);
    js = parse_json (b.out);
    g_assert_cmpstr (json_object_get_string_member (json_node_get_object (js), "sampling"), ==, "chat-defaults");
  }
  run_clear (&r);
  run_clear (&b);
}

static void
test_bad_input (void)
{
  g_autofree char *corrupt = g_build_filename (tmp_dir, "corrupt.gguf", NULL);
  g_autofree char *mamba = g_build_filename (tmp_dir, "mamba.gguf", NULL);
  g_autofree char *missing_env = g_strdup_printf ("HONE_DEFAULT_MODEL=%s/absent.gguf", tmp_dir);
  g_autofree char *truncated = g_build_filename (tmp_dir, "truncated.gguf", NULL);
  GError *error = NULL;

  /* A file that starts like GGUF and then is garbage; a truncated model. */
  g_assert_true (g_file_set_contents (corrupt, "GGUF\x03\0\0\0\xff\xff\xff\xff\xff\xff\xff\x7f garbage", 24, NULL));
  {
    g_autofree char *data = NULL;
    gsize len = 0;
    g_assert_true (g_file_get_contents (tiny, &data, &len, NULL));
    g_assert_true (g_file_set_contents (truncated, data, len / 2, NULL));
  }
  /* A well-formed GGUF of an architecture we do not run. */
  {
    g_autoptr (HoneGgufWriter) w = hone_gguf_writer_new ();
    float one = 1.0f;
    int64_t ne[1] = { 1 };
    hone_gguf_writer_add_string (w, "general.architecture", "mamba", -1);
    hone_gguf_writer_add_u32 (w, "mamba.block_count", 1);
    hone_gguf_writer_add_u32 (w, "mamba.embedding_length", 8);
    g_assert_true (hone_gguf_writer_add_tensor (w, "token_embd.weight", HONE_DTYPE_F32, 1, ne, &one, 4, &error));
    g_assert_true (hone_gguf_writer_write (w, mamba, &error));
    g_assert_no_error (error);
  }

  {
    const char *a[] = { "run", "-m", "/nonexistent/model.gguf", "-p", "hi", NULL };
    assert_one_line_failure (a, NULL, NULL, "/nonexistent/model.gguf");
  }
  {
    const char *a[] = { "run", "-m", corrupt, "-p", "hi", NULL };
    assert_one_line_failure (a, NULL, NULL, NULL);
  }
  {
    const char *a[] = { "run", "-m", truncated, "-p", "hi", NULL };
    assert_one_line_failure (a, NULL, NULL, NULL);
  }
  {
    const char *a[] = { "run", "-m", mamba, "-p", "hi", NULL };
    assert_one_line_failure (a, NULL, NULL, "mamba");
  }
  {
    /* JSON json-glib 1.6 would read into a non-UTF-8 string (\351 as the byte 0xE9) */
    const char *a[] = { "template", "-m", tiny, NULL };
    assert_one_line_failure (a, "[{\"role\": \"user\", \"content\": \"caf\\351\"}]", NULL,
                             "escape JSON does not allow");
  }
  {
    /* not a file: a FIFO would block the open until a writer came, a device maps nothing */
    g_autofree char *fifo = g_build_filename (tmp_dir, "model.fifo", NULL);
    const char *a[] = { "run", "-m", fifo, "-p", "hi", NULL };
    const char *b[] = { "info", fifo, NULL };
    const char *c[] = { "run", "-m", "/dev/null", "-p", "hi", NULL };
    g_assert_cmpint (mkfifo (fifo, 0600), ==, 0);
    assert_one_line_failure (a, NULL, NULL, "is not a regular file");
    assert_one_line_failure (b, NULL, NULL, "is not a regular file");
    assert_one_line_failure (c, NULL, NULL, "is not a regular file");
  }
  {
    const char *a[] = { "info", mamba, NULL };
    assert_one_line_failure (a, NULL, NULL, "mamba");
  }
  {
    const char *a[] = { "run", "-m", tiny, "-p", "", NULL };
    assert_one_line_failure (a, NULL, NULL, "empty");
  }
  {
    const char *a[] = { "run", "-m", tiny, NULL };
    assert_one_line_failure (a, NULL, NULL, NULL);
  }
  {
    const char *a[] = { "run", "-m", tiny, "-p", "hi", "--temp", "abc", NULL };
    assert_one_line_failure (a, NULL, NULL, "temp");
  }
  {
    const char *a[] = { "run", "-m", tiny, "-p", "hi", "--top-p", "1.5", NULL };
    assert_one_line_failure (a, NULL, NULL, "top-p");
  }
  {
    const char *a[] = { "run", "-m", tiny, "-p", "hi", "--temp", "-1", NULL };
    assert_one_line_failure (a, NULL, NULL, "temperature");
  }
  {
    const char *a[] = { "run", "-m", tiny, "-p", "hi", "--bogus", NULL };
    assert_one_line_failure (a, NULL, NULL, "bogus");
  }
  {
    const char *a[] = { "frobnicate", NULL };
    assert_one_line_failure (a, NULL, NULL, "frobnicate");
  }
  {
    /* No -m and no default model: point at `hone fetch`. */
    const char *a[] = { "run", "-p", "hi", NULL };
    assert_one_line_failure (a, NULL, missing_env, "hone fetch");
  }
  {
    const char *a[] = { "ppl", tiny, "/nonexistent/text.txt", NULL };
    assert_one_line_failure (a, NULL, NULL, NULL);
  }
  {
    /* a model twice (-m and an argument), or no file */
    const char *a[] = { "ppl", "-m", tiny, tiny, "/nonexistent/text.txt", NULL };
    const char *b[] = { "ppl", NULL };
    assert_one_line_failure (a, NULL, NULL, "usage");
    assert_one_line_failure (b, NULL, NULL, "usage");
  }
  {
    const char *a[] = { "bench", "-m", tiny, "--runs", "0", NULL };
    assert_one_line_failure (a, NULL, NULL, NULL);
  }
  {
    /* A prompt longer than the context. */
    g_autoptr (GString) big = g_string_new (NULL);
    for (int i = 0; i < 300; i++)
      g_string_append (big, "word ");
    {
      const char *a[] = { "run", "-m", tiny, "-c", "32", "-p", big->str, "--device", "cpu", NULL };
      assert_one_line_failure (a, NULL, NULL, "context");
    }
  }
}

/* ---- model suite (the default model) ---------------------------------------------- */

static void
test_default_run_json (void)
{
  check_run_json_deterministic (default_model, "The capital of France is", 12);
}

static void
test_default_tokenize (void)
{
  g_autofree char *data = g_build_filename (g_getenv ("HONE_TEST_DATA"), "tokenizer", NULL);
  g_autofree char *corpus_path = g_build_filename (data, "corpus.json", NULL);
  g_autofree char *expected_path = g_build_filename (data, "smollm2-expected.json", NULL);
  g_autoptr (JsonParser) pc = json_parser_new ();
  g_autoptr (JsonParser) pe = json_parser_new ();
  GError *error = NULL;
  JsonArray *strings, *ids;
  int checked = 0;

  json_parser_load_from_file (pc, corpus_path, &error);
  g_assert_no_error (error);
  json_parser_load_from_file (pe, expected_path, &error);
  g_assert_no_error (error);
  strings = json_object_get_array_member (json_node_get_object (json_parser_get_root (pc)), "strings_b64");
  ids = json_object_get_array_member (json_node_get_object (json_parser_get_root (pe)), "ids");

  /* A handful of corpus strings through the command: ids as HF tokenizers
   * gives them, and decoding gives the text back. */
  for (guint i = 0; i < json_array_get_length (strings) && checked < 6; i++)
    {
      gsize len = 0;
      g_autofree guchar *raw = g_base64_decode (json_array_get_string_element (strings, i), &len);
      g_autofree char *text = g_strndup ((const char *) raw, len);
      const char *enc[] = { "tokenize", "-m", default_model, "--no-special", NULL };
      const char *dec[] = { "tokenize", "-m", default_model, "--decode", NULL };
      g_autoptr (JsonNode) got = NULL;
      g_autoptr (GArray) got_ids = NULL;
      g_autoptr (GArray) want = NULL;
      Run a, d;

      if (strlen (text) != len || !g_utf8_validate (text, len, NULL) || len == 0)
        continue;
      a = run_hone (enc, text, NULL);
      g_assert_cmpint (a.status, ==, 0);
      got = parse_json (a.out);
      got_ids = json_ids (json_node_get_array (got));
      want = json_ids (json_array_get_array_element (ids, i));
      assert_ids_equal (got_ids, want);
      d = run_hone (dec, a.out, NULL);
      g_assert_cmpint (d.status, ==, 0);
      g_assert_cmpstr (d.out, ==, text);
      run_clear (&a);
      run_clear (&d);
      checked++;
    }
  g_assert_cmpint (checked, ==, 6);
}

static void
test_default_template (void)
{
  g_autofree char *path = g_build_filename (g_getenv ("HONE_TEST_DATA"), "templates", "smollm2.json", NULL);
  g_autoptr (JsonParser) p = json_parser_new ();
  GError *error = NULL;
  JsonArray *cases;
  int checked = 0;

  json_parser_load_from_file (p, path, &error);
  g_assert_no_error (error);
  cases = json_object_get_array_member (json_node_get_object (json_parser_get_root (p)), "cases");
  for (guint i = 0; i < json_array_get_length (cases); i++)
    {
      JsonObject *c = json_array_get_object_element (cases, i);
      JsonObject *extra = json_object_get_object_member (c, "extra");
      gboolean agp = json_object_get_boolean_member (c, "add_generation_prompt");
      const char *args[] = { "template", "-m", default_model, agp ? "--add-generation-prompt" : NULL, NULL };
      g_autofree char *input = NULL;
      Run r;

      /* The conversation, with the case's extra variables beside it. */
      {
        JsonObject *o = json_object_new ();
        JsonNode *n = json_node_new (JSON_NODE_OBJECT);
        json_object_set_member (o, "messages", json_node_copy (json_object_get_member (c, "messages")));
        if (extra != NULL)
          {
            g_autoptr (GList) members = json_object_get_members (extra);
            for (GList *l = members; l != NULL; l = l->next)
              json_object_set_member (o, l->data, json_node_copy (json_object_get_member (extra, l->data)));
          }
        json_node_take_object (n, o);
        input = json_to_string (n, FALSE);
        json_node_unref (n);
      }
      if (json_object_has_member (c, "error"))
        {
          /* jinja2 raised: one line naming the same error. */
          const char *msg = json_object_get_string_member (json_object_get_object_member (c, "error"), "message");
          assert_one_line_failure (args, input, NULL, msg);
          checked++;
          continue;
        }
      r = run_hone (args, input, NULL);
      if (r.status != 0)
        g_printerr ("case %s: %s", json_object_get_string_member (c, "name"), r.err);
      g_assert_cmpint (r.status, ==, 0);
      if (g_strcmp0 (r.out, json_object_get_string_member (c, "expected")) != 0)
        g_printerr ("case %s differs\n", json_object_get_string_member (c, "name"));
      g_assert_cmpstr (r.out, ==, json_object_get_string_member (c, "expected"));
      run_clear (&r);
      checked++;
    }
  g_assert_cmpint (checked, ==, (int) json_array_get_length (cases));
}

static void
test_default_no_model_flag (void)
{
  g_autofree char *env = g_strdup_printf ("HONE_DEFAULT_MODEL=%s", default_model);
  const char *args[] = { "info", "--json", NULL };
  Run r = run_hone (args, NULL, env);
  g_autoptr (JsonNode) j = NULL;

  g_assert_cmpint (r.status, ==, 0);
  j = parse_json (r.out);
  g_assert_cmpint (json_object_get_int_member (json_node_get_object (j), "n_layers"), ==, 30);
  g_assert_cmpint (json_object_get_int_member (json_node_get_object (j), "vocab_size"), ==, 49152);
  run_clear (&r);
}

int
main (int argc, char **argv)
{
  HoneTestModelSpec spec;
  GError *error = NULL;
  gboolean model_suite;
  int status;

  g_test_init (&argc, &argv, NULL);
  if (argc < 2)
    g_error ("usage: test-cli HONE_BINARY [--model]");
  hone_bin = argv[1];
  model_suite = argc > 2 && g_str_equal (argv[2], "--model");

  tmp_dir = g_dir_make_tmp ("hone-cli-XXXXXX", &error);
  g_assert_no_error (error);
  if (model_suite)
    {
      default_model = hone_default_model_path ();
      if (!g_file_test (default_model, G_FILE_TEST_IS_REGULAR))
        g_error ("the default model is not at %s: run .ci/fetch-model or `hone fetch`", default_model);
      g_test_add_func ("/cli/model/run-json", test_default_run_json);
      g_test_add_func ("/cli/model/tokenize", test_default_tokenize);
      g_test_add_func ("/cli/model/template", test_default_template);
      g_test_add_func ("/cli/model/default-model", test_default_no_model_flag);
    }
  else
    {
      hone_test_model_spec_init (&spec, HONE_ARCH_LLAMA, HONE_DTYPE_Q8_0);
      tiny = hone_test_model_write_gguf (tmp_dir, &spec, &error);
      g_assert_no_error (error);
      g_test_add_func ("/cli/run-json", test_run_json);
      g_test_add_func ("/cli/tokenize", test_tokenize_round_trip);
      g_test_add_func ("/cli/template", test_template_tiny);
      g_test_add_func ("/cli/info", test_info_tiny);
      g_test_add_func ("/cli/chat", test_chat_session);
      g_test_add_func ("/cli/stop-notes", test_stop_notes);
      g_test_add_func ("/cli/quantize", test_quantize);
      g_test_add_func ("/cli/ppl-bench", test_ppl_and_bench_tiny);
      g_test_add_func ("/cli/device-auto", test_device_auto);
      g_test_add_func ("/cli/bad-input", test_bad_input);
    }
  status = g_test_run ();
  hone_test_rm_rf (tmp_dir);
  g_free (tmp_dir);
  g_free (tiny);
  g_free (default_model);
  return status;
}
