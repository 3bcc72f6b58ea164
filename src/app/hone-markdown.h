/* hone-markdown.h — "Markdown-lite" for chat messages.
 *
 * Enough of Markdown for model answers: fenced code blocks (```lang),
 * headings (#), bullet and numbered lists, and inline `code`, **bold**,
 * *italic*. Text becomes Pango markup (escaped); code blocks stay raw text
 * for a monospace view with a copy button. An unterminated fence (an answer
 * still streaming) is a code block up to the end.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  HONE_MARKDOWN_TEXT,     /* paragraph(s), lists, headings: Pango markup */
  HONE_MARKDOWN_CODE,     /* fenced code: raw text */
} HoneMarkdownKind;

typedef struct {
  HoneMarkdownKind kind;
  char *text;             /* markup (TEXT) or raw code (CODE) */
  char *language;         /* CODE: the fence's info string, may be "" */
} HoneMarkdownBlock;

/* Array of HoneMarkdownBlock* (free with g_ptr_array_unref). */
GPtrArray *hone_markdown_parse (const char *text);
/* One line/paragraph of inline Markdown → Pango markup. */
char      *hone_markdown_inline_to_markup (const char *text);

G_END_DECLS
