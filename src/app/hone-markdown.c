/* hone-markdown.c — see hone-markdown.h. */
#include "hone-markdown.h"

#include <string.h>

static void
block_free (gpointer data)
{
  HoneMarkdownBlock *b = data;
  g_free (b->text);
  g_free (b->language);
  g_free (b);
}

/* Appends escaped text from [p, end). */
static void
append_escaped (GString *out, const char *p, const char *end)
{
  g_autofree char *e = g_markup_escape_text (p, end - p);
  g_string_append (out, e);
}

char *
hone_markdown_inline_to_markup (const char *text)
{
  GString *out = g_string_new (NULL);
  const char *p = text;
  char stack[8];          /* open emphasis, innermost last: 'b' or 'i' */
  int depth = 0;

  while (*p)
    {
      if (*p == '`')
        {
          const char *close = strchr (p + 1, '`');
          if (close)
            {
              g_string_append (out, "<tt>");
              append_escaped (out, p + 1, close);
              g_string_append (out, "</tt>");
              p = close + 1;
              continue;
            }
        }
      if (*p == '*')
        {
          gboolean strong = p[1] == '*';
          char tag = strong ? 'b' : 'i';
          int len = strong ? 2 : 1;
          gboolean is_open = FALSE;

          for (int k = 0; k < depth; k++)
            is_open |= stack[k] == tag;
          /* Close only the innermost tag (Pango markup must nest); open only
           * when a closing marker follows; anything else is a literal star. */
          if (depth > 0 && stack[depth - 1] == tag)
            {
              g_string_append (out, strong ? "</b>" : "</i>");
              depth--;
              p += len;
              continue;
            }
          if (!is_open && depth < (int) sizeof stack && p[len] && p[len] != ' ' &&
              strstr (p + len, strong ? "**" : "*"))
            {
              g_string_append (out, strong ? "<b>" : "<i>");
              stack[depth++] = tag;
              p += len;
              continue;
            }
        }
      {
        /* copy one UTF-8 character, escaped */
        const char *next = g_utf8_next_char (p);
        append_escaped (out, p, next);
        p = next;
      }
    }
  /* close what an unbalanced line opened, innermost first */
  while (depth > 0)
    g_string_append (out, stack[--depth] == 'b' ? "</b>" : "</i>");
  return g_string_free (out, FALSE);
}

static void
flush_text (GPtrArray *blocks, GString *text)
{
  HoneMarkdownBlock *b;

  while (text->len && text->str[text->len - 1] == '\n')
    g_string_truncate (text, text->len - 1);
  if (text->len == 0)
    return;
  b = g_new0 (HoneMarkdownBlock, 1);
  b->kind = HONE_MARKDOWN_TEXT;
  b->text = g_strdup (text->str);
  g_ptr_array_add (blocks, b);
  g_string_truncate (text, 0);
}

static const char *
skip_spaces (const char *s)
{
  while (*s == ' ' || *s == '\t')
    s++;
  return s;
}

GPtrArray *
hone_markdown_parse (const char *text)
{
  GPtrArray *blocks = g_ptr_array_new_with_free_func (block_free);
  g_auto(GStrv) lines = g_strsplit (text ? text : "", "\n", -1);
  g_autoptr(GString) para = g_string_new (NULL);
  g_autoptr(GString) code = NULL;
  g_autofree char *language = NULL;

  for (guint i = 0; lines[i]; i++)
    {
      const char *line = lines[i];
      const char *t = skip_spaces (line);

      if (g_str_has_prefix (t, "```"))
        {
          if (code)
            {
              HoneMarkdownBlock *b = g_new0 (HoneMarkdownBlock, 1);
              b->kind = HONE_MARKDOWN_CODE;
              b->text = g_string_free (g_steal_pointer (&code), FALSE);
              b->language = g_steal_pointer (&language);
              g_ptr_array_add (blocks, b);
            }
          else
            {
              flush_text (blocks, para);
              code = g_string_new (NULL);
              language = g_strstrip (g_strdup (t + 3));
            }
          continue;
        }
      if (code)
        {
          if (code->len)
            g_string_append_c (code, '\n');
          g_string_append (code, line);
          continue;
        }
      if (*t == '#')
        {
          int level = 0;
          g_autofree char *inner = NULL;
          while (t[level] == '#')
            level++;
          if (t[level] == ' ')
            {
              inner = hone_markdown_inline_to_markup (skip_spaces (t + level));
              if (para->len)
                g_string_append_c (para, '\n');
              g_string_append_printf (para, "<span weight=\"bold\" size=\"%s\">%s</span>",
                                      level <= 1 ? "x-large" : level == 2 ? "large" : "medium", inner);
              continue;
            }
        }
      if ((t[0] == '-' || t[0] == '*' || t[0] == '+') && t[1] == ' ')
        {
          g_autofree char *inner = hone_markdown_inline_to_markup (skip_spaces (t + 2));
          int indent = (int) (t - line);
          if (para->len)
            g_string_append_c (para, '\n');
          g_string_append_printf (para, "%*s• %s", indent, "", inner);
          continue;
        }
      {
        g_autofree char *inner = hone_markdown_inline_to_markup (line);
        if (para->len)
          g_string_append_c (para, '\n');
        g_string_append (para, inner);
      }
    }
  if (code)
    {
      /* unterminated fence: the answer is still streaming */
      HoneMarkdownBlock *b = g_new0 (HoneMarkdownBlock, 1);
      b->kind = HONE_MARKDOWN_CODE;
      b->text = g_string_free (g_steal_pointer (&code), FALSE);
      b->language = g_steal_pointer (&language);
      g_ptr_array_add (blocks, b);
    }
  flush_text (blocks, para);
  return blocks;
}
