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

G_END_DECLS
