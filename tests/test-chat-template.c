/* test-chat-template.c — chat templates rendered byte-identically to jinja2.
 *
 * Fixtures (tests/data/templates/NAME.json) come from
 * tests/reference/gen_template_fixtures.py, which renders real model templates
 * and mini feature templates with jinja2 3.1.6 configured as HF transformers
 * does.  Each case must render to exactly the expected bytes, or fail where
 * jinja2 failed (raise_exception with the same message).  Hostile templates
 * must stop with the right error code quickly.
 */
#include "hone-chat-template.h"
#include "hone-error.h"

#include <string.h>

static char *
data_path (const char *name)
{
  const char *dir = g_getenv ("HONE_TEST_DATA");
  return g_build_filename (dir ? dir : "tests/data", "templates", name, NULL);
}

typedef struct {
  int checked;
  int failed;
} Counts;

static void
check_case (const char *file, JsonObject *c, const char *source, Counts *counts)
{
  const char *name = json_object_get_string_member (c, "name");
  JsonNode *messages = json_object_get_member (c, "messages");
  gboolean agp = json_object_get_boolean_member (c, "add_generation_prompt");
  const char *bos = json_object_get_string_member (c, "bos_token");
  const char *eos = json_object_get_string_member (c, "eos_token");
  JsonObject *extra = json_object_has_member (c, "extra") ? json_object_get_object_member (c, "extra") : NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (HoneChatTemplate) tmpl = hone_chat_template_new (source, -1, &error);
  g_autofree char *out = NULL;
  gint64 t0 = g_get_monotonic_time ();

  if (tmpl) {
    hone_chat_template_set_now (tmpl, 1721995200);
    out = hone_chat_template_render (tmpl, messages, agp, bos, eos, extra, &error);
  }
  counts->checked++;
  if (g_get_monotonic_time () - t0 > G_USEC_PER_SEC) {
    g_printerr ("%s %s: took more than a second\n", file, name);
    counts->failed++;
  }
  if (json_object_has_member (c, "expected")) {
    const char *expected = json_object_get_string_member (c, "expected");
    if (!out) {
      g_printerr ("%s %s: expected output, got error: %s\n", file, name, error->message);
      counts->failed++;
    } else if (strcmp (out, expected) != 0) {
      g_printerr ("%s %s: output differs\n--- expected\n%s\n--- got\n%s\n---\n", file, name, expected, out);
      counts->failed++;
    }
  } else {
    JsonObject *e = json_object_get_object_member (c, "error");
    const char *kind = json_object_get_string_member (e, "kind");
    const char *msg = json_object_get_string_member (e, "message");
    if (out) {
      g_printerr ("%s %s: expected %s error (%s), got output:\n%s\n", file, name, kind, msg, out);
      counts->failed++;
    } else if (!g_error_matches (error, HONE_ERROR, HONE_ERROR_TEMPLATE_SYNTAX) &&
               !g_error_matches (error, HONE_ERROR, HONE_ERROR_TEMPLATE_RUNTIME) &&
               !g_error_matches (error, HONE_ERROR, HONE_ERROR_TEMPLATE_LIMIT)) {
      g_printerr ("%s %s: wrong error domain/code: %s\n", file, name, error->message);
      counts->failed++;
    } else if (!strcmp (kind, "syntax") && error->code != HONE_ERROR_TEMPLATE_SYNTAX) {
      g_printerr ("%s %s: expected a syntax error (%s), got: %s\n", file, name, msg, error->message);
      counts->failed++;
    } else if (!strcmp (kind, "raise") &&
               (error->code != HONE_ERROR_TEMPLATE_RUNTIME || strcmp (error->message, msg) != 0)) {
      g_printerr ("%s %s: expected raise_exception('%s'), got: %s\n", file, name, msg, error->message);
      counts->failed++;
    } else if (!strcmp (kind, "runtime") && error->code == HONE_ERROR_TEMPLATE_SYNTAX) {
      g_printerr ("%s %s: expected a runtime error (%s), got: %s\n", file, name, msg, error->message);
      counts->failed++;
    }
  }
}

static void
test_fixtures (void)
{
  g_autofree char *index_path = data_path ("index.txt");
  g_autofree char *index = NULL;
  g_auto (GStrv) files = NULL;
  g_autoptr (GError) error = NULL;
  Counts counts = { 0, 0 };
  int nfiles = 0, i;

  g_assert_true (g_file_get_contents (index_path, &index, NULL, &error));
  g_assert_no_error (error);
  files = g_strsplit (index, "\n", -1);
  for (i = 0; files[i]; i++) {
    g_autofree char *path = NULL, *source = NULL;
    g_autoptr (JsonParser) parser = json_parser_new ();
    JsonObject *root;
    JsonArray *cases;
    guint k;
    if (!*files[i])
      continue;
    path = data_path (files[i]);
    g_assert_true (json_parser_load_from_file (parser, path, &error));
    g_assert_no_error (error);
    root = json_node_get_object (json_parser_get_root (parser));
    if (json_object_has_member (root, "template")) {
      g_autofree char *tpath = data_path (json_object_get_string_member (root, "template"));
      g_assert_true (g_file_get_contents (tpath, &source, NULL, &error));
      g_assert_no_error (error);
    }
    cases = json_object_get_array_member (root, "cases");
    for (k = 0; k < json_array_get_length (cases); k++) {
      JsonObject *c = json_array_get_object_element (cases, k);
      const char *src = json_object_has_member (c, "source") ? json_object_get_string_member (c, "source") : source;
      check_case (files[i], c, src, &counts);
    }
    nfiles++;
  }
  g_print ("# chat templates: %d cases from %d fixture files checked against jinja2, %d failed\n", counts.checked,
           nfiles, counts.failed);
  g_assert_cmpint (counts.checked, >=, 500);
  g_assert_cmpint (counts.failed, ==, 0);
}

/* ---- hostile templates ---------------------------------------------------- */

typedef struct {
  const char *what;
  const char *source;  /* NULL: built by the test */
  int code;
} Hostile;

static void
expect_failure (const char *what, const char *source, gssize len, int code)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (HoneChatTemplate) tmpl = NULL;
  g_autofree char *out = NULL;
  g_autoptr (JsonNode) messages = json_from_string ("[{\"role\": \"user\", \"content\": \"hi\"}]", NULL);
  gint64 t0 = g_get_monotonic_time (), elapsed;

  tmpl = hone_chat_template_new (source, len, &error);
  if (tmpl)
    out = hone_chat_template_render (tmpl, messages, TRUE, "<s>", "</s>", NULL, &error);
  elapsed = g_get_monotonic_time () - t0;
  if (out)
    g_printerr ("%s: rendered %zu bytes instead of failing\n", what, strlen (out));
  g_assert_null (out);
  g_assert_nonnull (error);
  if (!g_error_matches (error, HONE_ERROR, code))
    g_printerr ("%s: got %s (%d): %s\n", what, hone_error_code_name (error->code), error->code, error->message);
  g_assert_error (error, HONE_ERROR, code);
  g_print ("# %-40s %-16s %6.1f ms  %s\n", what, hone_error_code_name (code), elapsed / 1000.0, error->message);
  /* generous bound for loaded CI machines and sanitizer builds; typical figures are printed above */
  g_assert_cmpint (elapsed, <, 5 * G_USEC_PER_SEC);
}

static void
test_hostile (void)
{
  static const Hostile cases[] = {
    { "macro recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", HONE_ERROR_TEMPLATE_LIMIT },
    { "mutual macro recursion",
      "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
      HONE_ERROR_TEMPLATE_LIMIT },
    { "range(10**9)", "{% for i in range(10**9) %}x{% endfor %}", HONE_ERROR_TEMPLATE_LIMIT },
    { "nested loops", "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}{% endfor %}",
      HONE_ERROR_TEMPLATE_LIMIT },
    { "output explosion", "{% for a in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", HONE_ERROR_TEMPLATE_LIMIT },
    { "string multiplication", "{{ 'abc' * 1000000000 }}", HONE_ERROR_TEMPLATE_LIMIT },
    { "list multiplication", "{{ ([1] * 100000) * 100000 }}", HONE_ERROR_TEMPLATE_LIMIT },
    { "doubling string", "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
      HONE_ERROR_TEMPLATE_LIMIT },
    { "doubling list", "{% set ns = namespace(s=[1]) %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
      HONE_ERROR_TEMPLATE_LIMIT },
    { "integer overflow", "{{ 2 ** 200 }}", HONE_ERROR_TEMPLATE_LIMIT },
    { "deep equality in a loop",
      "{% set a = [[1] * 1000] * 1000 %}{% set b = [[1] * 1000] * 1000 %}"
      "{% for i in range(100000) %}{% if a == b %}{% endif %}{% endfor %}", HONE_ERROR_TEMPLATE_LIMIT },
    { "unicode indexing in a loop",
      "{% set s = '\u00e9' * 1000000 %}{% for i in range(100000) %}{{ s[i] }}{% endfor %}", HONE_ERROR_TEMPLATE_LIMIT },
    { "repr of shared structure", "{{ [[[1] * 1000] * 1000] * 1000 }}", HONE_ERROR_TEMPLATE_LIMIT },
    { "namespace cycle", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns.me.me.me.x }}{{ ns|tojson }}",
      HONE_ERROR_TEMPLATE_RUNTIME },
    { "unterminated block", "{% if true %}never closed", HONE_ERROR_TEMPLATE_SYNTAX },
    { "unterminated print", "{{ messages[0].content ", HONE_ERROR_TEMPLATE_SYNTAX },
    { "unterminated comment", "{# nothing ends this", HONE_ERROR_TEMPLATE_SYNTAX },
    { "unterminated string", "{{ 'abc }}", HONE_ERROR_TEMPLATE_SYNTAX },
    { "bad syntax", "{% for in %}{% endfor %}", HONE_ERROR_TEMPLATE_SYNTAX },
    { "unknown tag", "{% include 'x.jinja' %}", HONE_ERROR_TEMPLATE_SYNTAX },
    { "stray end tag", "{% endfor %}", HONE_ERROR_TEMPLATE_SYNTAX },
    { "unbalanced brackets", "{{ (1 + 2]] }}", HONE_ERROR_TEMPLATE_SYNTAX },
    { "raise_exception", "{{ raise_exception('nope') }}", HONE_ERROR_TEMPLATE_RUNTIME },
    { "sandbox: list.append", "{% set l = [] %}{{ l.append(1) }}", HONE_ERROR_TEMPLATE_RUNTIME },
    { "sandbox: dunder call", "{{ ''.__class__.__mro__() }}", HONE_ERROR_TEMPLATE_RUNTIME },
    { "undefined call", "{{ cycler() }}", HONE_ERROR_TEMPLATE_RUNTIME },
    { "invalid UTF-8", "abc \xff\xfe {{ 1 }}", HONE_ERROR_TEMPLATE_SYNTAX },
  };
  gsize i;
  for (i = 0; i < G_N_ELEMENTS (cases); i++)
    expect_failure (cases[i].what, cases[i].source, -1, cases[i].code);

  /* deeply nested expressions and blocks must not exhaust the C stack */
  {
    GString *s = g_string_new ("{{ ");
    for (i = 0; i < 100000; i++)
      g_string_append_c (s, '(');
    g_string_append (s, "1");
    for (i = 0; i < 100000; i++)
      g_string_append_c (s, ')');
    g_string_append (s, " }}");
    expect_failure ("100000 nested parentheses", s->str, s->len, HONE_ERROR_TEMPLATE_LIMIT);
    g_string_free (s, TRUE);
  }
  {
    GString *s = g_string_new ("{{ ");
    for (i = 0; i < 50000; i++)
      g_string_append (s, "not -");
    g_string_append (s, "1 }}");
    expect_failure ("50000 nested unary operators", s->str, s->len, HONE_ERROR_TEMPLATE_LIMIT);
    g_string_free (s, TRUE);
  }
  {
    GString *s = g_string_new (NULL);
    for (i = 0; i < 20000; i++)
      g_string_append (s, "{% if true %}");
    for (i = 0; i < 20000; i++)
      g_string_append (s, "{% endif %}");
    expect_failure ("20000 nested if blocks", s->str, s->len, HONE_ERROR_TEMPLATE_LIMIT);
    g_string_free (s, TRUE);
  }
  {
    GString *s = g_string_new ("{{ x");
    for (i = 0; i < 100000; i++)
      g_string_append (s, "[0]");
    g_string_append (s, " }}");
    expect_failure ("100000 chained subscripts", s->str, s->len, HONE_ERROR_TEMPLATE_LIMIT);
    g_string_free (s, TRUE);
  }
}

static void
test_syntax_position (void)
{
  g_autoptr (GError) error = NULL;
  HoneChatTemplate *tmpl = hone_chat_template_new ("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}", -1, &error);
  g_assert_null (tmpl);
  g_assert_error (error, HONE_ERROR, HONE_ERROR_TEMPLATE_SYNTAX);
  g_assert_nonnull (strstr (error->message, "3:"));
}

static void
test_api_defaults (void)
{
  /* NULL bos/eos render as "", NULL messages as [], tools/documents are none */
  g_autoptr (GError) error = NULL;
  g_autoptr (HoneChatTemplate) tmpl =
    hone_chat_template_new ("[{{ bos_token }}|{{ eos_token }}|{{ messages|length }}|{{ tools is none }}|"
                            "{{ documents is none }}|{{ add_generation_prompt }}|{{ extra_var }}]", -1, &error);
  g_autoptr (JsonObject) extra = json_object_new ();
  g_autofree char *out = NULL;
  g_assert_no_error (error);
  json_object_set_string_member (extra, "extra_var", "v");
  out = hone_chat_template_render (tmpl, NULL, FALSE, NULL, NULL, extra, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (out, ==, "[||0|True|True|False|v]");
}

static void
test_default_model_template (void)
{
  /* the template shipped in the default model file renders a ChatML prompt */
  g_autofree char *path = data_path ("smollm2-135m-instruct.jinja");
  g_autofree char *source = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (HoneChatTemplate) tmpl = NULL;
  g_autoptr (JsonNode) messages = json_from_string ("[{\"role\": \"user\", \"content\": \"Hi\"}]", NULL);
  g_autofree char *out = NULL;
  g_assert_true (g_file_get_contents (path, &source, NULL, &error));
  tmpl = hone_chat_template_new (source, -1, &error);
  g_assert_no_error (error);
  out = hone_chat_template_render (tmpl, messages, TRUE, "<|im_start|>", "<|im_end|>", NULL, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (out, ==,
                   "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                   "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

typedef struct {
  HoneChatTemplate *tmpl;
  JsonNode *messages;
  const char *expected;
  int mismatches;
} ThreadJob;

static gpointer
render_many (gpointer data)
{
  ThreadJob *job = data;
  int k;
  for (k = 0; k < 50; k++) {
    g_autofree char *out = hone_chat_template_render (job->tmpl, job->messages, TRUE, "<s>", "</s>", NULL, NULL);
    if (!out || strcmp (out, job->expected) != 0)
      job->mismatches++;
  }
  return NULL;
}

static void
test_concurrent_renders (void)
{
  /* one parsed template rendered from several threads at once */
  g_autofree char *path = data_path ("qwen3-0.6b.jinja");
  g_autofree char *source = NULL, *expected = NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (HoneChatTemplate) tmpl = NULL;
  g_autoptr (JsonNode) messages = json_from_string (
    "[{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"q\"},"
    " {\"role\": \"assistant\", \"content\": \"<think>r</think>a\"}, {\"role\": \"user\", \"content\": \"q2\"}]", NULL);
  ThreadJob jobs[4];
  GThread *threads[4];
  int i;
  g_assert_true (g_file_get_contents (path, &source, NULL, &error));
  tmpl = hone_chat_template_new (source, -1, &error);
  g_assert_no_error (error);
  expected = hone_chat_template_render (tmpl, messages, TRUE, "<s>", "</s>", NULL, &error);
  g_assert_no_error (error);
  for (i = 0; i < 4; i++) {
    jobs[i] = (ThreadJob) { tmpl, messages, expected, 0 };
    threads[i] = g_thread_new ("render", render_many, &jobs[i]);
  }
  for (i = 0; i < 4; i++) {
    g_thread_join (threads[i]);
    g_assert_cmpint (jobs[i].mismatches, ==, 0);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/chat-template/jinja2-fixtures", test_fixtures);
  g_test_add_func ("/chat-template/hostile", test_hostile);
  g_test_add_func ("/chat-template/syntax-position", test_syntax_position);
  g_test_add_func ("/chat-template/api-defaults", test_api_defaults);
  g_test_add_func ("/chat-template/default-model-template", test_default_model_template);
  g_test_add_func ("/chat-template/concurrent-renders", test_concurrent_renders);
  return g_test_run ();
}
