/* test-json.c — hone_json_load: the checks every JSON reader goes through
 * before json-glib parses (src/core/hone-json.h). Valid JSON parses to the
 * strings Python's json module gives for it (written out here); text json-glib
 * 1.6 would turn into non-UTF-8 strings, nests too deep or is not UTF-8 is
 * refused with HONE_ERROR_INVALID_JSON. The typed member getters give the
 * member only where it has their type. */
#include "hone-error.h"
#include "hone-json.h"

#include <string.h>

/* The string member "a" of @json, parsed through hone_json_load; NULL and
 * *@error when refused. */
static char *
member_a (const char *json, GError **error)
{
  g_autoptr(JsonParser) p = json_parser_new ();
  if (!hone_json_load (p, json, -1, 8, error))
    return NULL;
  return g_strdup (json_object_get_string_member (json_node_get_object (json_parser_get_root (p)), "a"));
}

static void
test_valid (void)
{
  static const struct { const char *json, *want; } cases[] = {
    /* every escape JSON has; the expected strings are json.loads()'s */
    { "{\"a\": \"q\\\" b\\\\ s\\/ \\b\\f\\n\\r\\t\"}", "q\" b\\ s/ \b\f\n\r\t" },
    { "{\"a\": \"caf\\u00e9\"}", "caf\xc3\xa9" },
    { "{\"a\": \"\\ud83d\\ude00!\"}", "\xf0\x9f\x98\x80!" },
    { "{\"a\": \"\\uD83D\\uDE00\"}", "\xf0\x9f\x98\x80" },
    { "{\"a\": \"raw \xe4\xb8\xad\xe6\x96\x87\"}", "raw \xe4\xb8\xad\xe6\x96\x87" },
    /* a backslash-quote does not end the string; brackets in strings do not nest */
    { "{\"a\": \"x\\\"[[[[[[[[[[[[\", \"b\": 1}", "x\"[[[[[[[[[[[[" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS (cases); i++)
    {
      GError *error = NULL;
      g_autofree char *a = member_a (cases[i].json, &error);
      g_assert_no_error (error);
      g_assert_cmpstr (a, ==, cases[i].want);
      g_assert_true (g_utf8_validate (a, -1, NULL));
    }
}

static void
test_refused (void)
{
  static const char *const bad[] = {
    "{\"a\": \"caf\\351\"}",            /* GScanner: the raw byte 0xE9 (tests/fuzz/corpus-awq-docs) */
    "{\"a\": \"\\x41\"}",               /* GScanner: hex */
    "{\"a\": \"\\q\"}",                 /* GScanner: dropped backslash */
    "{\"a\": \"\\ud800\"}",             /* a lone high surrogate: not UTF-8 once decoded */
    "{\"a\": \"\\ud800x\"}",
    "{\"a\": \"\\ud800\\u0041\"}",      /* high surrogate, then no low one */
    "{\"a\": \"\\udc00\"}",             /* a lone low surrogate */
    "{\"a\": \"\\u12\"}",               /* too few hex digits */
    "{\"a\": \"\\u12g4\"}",
    "{\"a\": \"end\\",                  /* a backslash at the very end */
    "{\"a\": \"\xe9\"}",                /* not UTF-8 */
    "[[[[[[[[[\"a\"]]]]]]]]]",          /* 9 levels, the limit 8 */
  };
  for (gsize i = 0; i < G_N_ELEMENTS (bad); i++)
    {
      GError *error = NULL;
      g_autofree char *a = member_a (bad[i], &error);
      if (a)
        g_test_message ("%s gave %s", bad[i], a);
      g_assert_null (a);
      g_assert_error (error, HONE_ERROR, HONE_ERROR_INVALID_JSON);
      g_clear_error (&error);
    }
  /* json-glib's own errors come through as they are */
  {
    GError *error = NULL;
    g_autoptr(JsonParser) p = json_parser_new ();
    g_assert_false (hone_json_load (p, "{\"a\": }", -1, 8, &error));
    g_assert_nonnull (error);
    g_clear_error (&error);
  }
}

static void
test_depth (void)
{
  g_assert_cmpint (hone_json_nesting_depth ("{\"a\": [1, {\"b\": 2}]}", 20, 10), ==, 3);
  g_assert_cmpint (hone_json_nesting_depth ("\"[[[[\\\"[[\"", 10, 10), ==, 0);
  g_assert_cmpint (hone_json_nesting_depth ("[[[[[[", 6, 3), ==, 4);
}

/* The typed getters give the member where it has their type and the default
 * everywhere else, without a warning (g_test_init makes criticals fatal:
 * json-glib's *_with_default getters raise one on "o" and "a" here). */
static void
test_members (void)
{
  static const char *const members[] = { "s", "i", "d", "di", "big", "neg", "t", "n", "o", "a", "inf", "missing" };
  g_autoptr(JsonParser) p = json_parser_new ();
  JsonObject *o;
  g_assert_true (hone_json_load (p, "{\"s\": \"text\", \"i\": 42, \"d\": 2.5, \"di\": 7.0, \"big\": 1e300, \"inf\": 1e400, "
                                    "\"neg\": -3, \"t\": true, \"n\": null, \"o\": {\"k\": 1}, \"a\": [1]}",
                                 -1, 8, NULL));
  o = json_node_get_object (json_parser_get_root (p));

  g_assert_cmpstr (hone_json_get_string (o, "s", "x"), ==, "text");
  g_assert_cmpint (hone_json_get_int (o, "i", 0), ==, 42);
  g_assert_cmpint (hone_json_get_int (o, "neg", 0), ==, -3);
  g_assert_cmpint (hone_json_get_int (o, "di", 0), ==, 7);
  g_assert_cmpfloat (hone_json_get_double (o, "d", 0), ==, 2.5);
  g_assert_cmpfloat (hone_json_get_double (o, "i", 0), ==, 42.0);
  g_assert_true (hone_json_get_bool (o, "t", FALSE));
  g_assert_nonnull (hone_json_get_object (o, "o"));
  g_assert_cmpint (json_array_get_length (hone_json_get_array (o, "a")), ==, 1);

  for (gsize i = 0; i < G_N_ELEMENTS (members); i++)
    {
      const char *m = members[i];
      const gboolean str = !strcmp (m, "s"), num = !strcmp (m, "i") || !strcmp (m, "d") || !strcmp (m, "di")
                                                    || !strcmp (m, "big") || !strcmp (m, "neg");   /* big: finite */
      const gboolean integral = !strcmp (m, "i") || !strcmp (m, "di") || !strcmp (m, "neg");
      if (!str)
        g_assert_cmpstr (hone_json_get_string (o, m, "dflt"), ==, "dflt");
      if (!integral)
        g_assert_cmpint (hone_json_get_int (o, m, -99), ==, -99);
      if (!num)
        g_assert_cmpfloat (hone_json_get_double (o, m, -9.5), ==, -9.5);
      if (strcmp (m, "t"))
        g_assert_cmpint (hone_json_get_bool (o, m, 2), ==, 2);
      if (strcmp (m, "o"))
        g_assert_null (hone_json_get_object (o, m));
      if (strcmp (m, "a"))
        g_assert_null (hone_json_get_array (o, m));
    }
  g_assert_cmpstr (hone_json_get_string (NULL, "s", "dflt"), ==, "dflt");
  g_assert_null (hone_json_get_object (NULL, "o"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/json/valid", test_valid);
  g_test_add_func ("/json/refused", test_refused);
  g_test_add_func ("/json/depth", test_depth);
  g_test_add_func ("/json/members", test_members);
  return g_test_run ();
}
