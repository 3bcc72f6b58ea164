/* hone-json.h — JSON text checked before json-glib parses it.
 *
 * Every JSON reader of Hone's (config.json, tokenizer.json and
 * tokenizer_config.json, safetensors headers and indexes, quantization
 * configs, calibration documents, saved conversations, the CLI's stdin)
 * parses through hone_json_load(), which refuses, before json-glib sees them:
 *  - text that is not UTF-8;
 *  - nesting deeper than a limit (json-glib's parser recurses);
 *  - string escapes JSON does not have. json-glib 1.6 reads strings with
 *    GScanner, which takes \351 as the raw byte 0xE9, \x41, \q, and a lone
 *    \uD800, and hands back strings that are not UTF-8 (found by
 *    tests/fuzz/fuzz-awq-docs). Only \" \\ \/ \b \f \n \r \t and \uXXXX are
 *    JSON, surrogates only in high-low pairs.
 */
#pragma once

#include <json-glib/json-glib.h>

G_BEGIN_DECLS

/* Nesting depth of a JSON text (brackets outside strings), stopping early
 * once it passes @limit. */
int      hone_json_nesting_depth (const char *text, gsize length, int limit);

/* The checks above, then json_parser_load_from_data(). @length < 0: up to
 * the NUL. FALSE with HONE_ERROR_INVALID_JSON (or json-glib's own error) and
 * a message saying what and where. */
gboolean hone_json_load (JsonParser *parser, const char *text, gssize length, int max_depth, GError **error);

/* Typed members of a JSON object that never warn: each gives @dflt (NULL for
 * the object and array getters) unless @name is a member of @o holding that
 * type — a string; an integer (a number with no fraction, within ±2⁵³ when
 * written as a double); a finite number (1e400 parses to inf, and json-glib
 * would write that back as "inf", which no JSON reader takes); a boolean; an
 * object; an array. json-glib's own *_with_default getters raise a critical
 * when the member is an object or an array, and the string one gives NULL
 * for a number, so a hostile file could reach code that assumed a string.
 * @o may be NULL. */
const char *hone_json_get_string (JsonObject *o, const char *name, const char *dflt);
gint64      hone_json_get_int (JsonObject *o, const char *name, gint64 dflt);
double      hone_json_get_double (JsonObject *o, const char *name, double dflt);
gboolean    hone_json_get_bool (JsonObject *o, const char *name, gboolean dflt);
JsonObject *hone_json_get_object (JsonObject *o, const char *name);
JsonArray  *hone_json_get_array (JsonObject *o, const char *name);

G_END_DECLS
