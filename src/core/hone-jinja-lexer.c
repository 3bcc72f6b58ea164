/* hone-jinja-lexer.c — tokenizer for the chat-template Jinja2 subset.
 *
 * Mirrors jinja2 3.1's Lexer.tokeniter with trim_blocks=True and
 * lstrip_blocks=True: `{%-`/`-%}` strip all whitespace, `{%+`/`+%}` disable
 * lstrip/trim for that side, lstrip_blocks removes the spaces before a block
 * or comment tag that starts a line, trim_blocks eats one newline after a
 * block or comment tag.  Inside tags, end markers are only recognised while
 * brackets are balanced (so `{{ {'a': {}} }}` works), as in jinja2.
 */
#include "hone-jinja-private.h"
#include "hone-error.h"
#include "hone-i18n.h"

#include <errno.h>
#include <string.h>

typedef struct {
  const char *src;
  gsize len;
  gsize pos;
  GArray *toks;
  gboolean line_starting;
  /* incremental line/column bookkeeping (positions only move forward) */
  gsize lc_pos;
  int lc_line;
  gsize lc_line_start;
  char balance[HJ_MAX_PARSE_DEPTH];
  int nbalance;
  GError **error;
} Lexer;

gboolean
hj_unichar_isspace (gunichar c)
{
  /* Python's str.isspace() / re's \s for str patterns. */
  if (c < 0x80)
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
  return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
         c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Byte length of the whitespace character at p, or 0. */
static gsize
ws_at (const char *p, const char *end)
{
  gunichar c;
  if (p >= end)
    return 0;
  if ((guchar) *p < 0x80)
    return hj_unichar_isspace ((guchar) *p) ? 1 : 0;
  c = g_utf8_get_char_validated (p, end - p);
  if (c == (gunichar) -1 || c == (gunichar) -2 || !hj_unichar_isspace (c))
    return 0;
  return g_utf8_next_char (p) - p;
}

static void
position (Lexer *lx, gsize pos, int *line, int *col)
{
  if (pos < lx->lc_pos) {
    lx->lc_pos = 0;
    lx->lc_line = 1;
    lx->lc_line_start = 0;
  }
  for (; lx->lc_pos < pos && lx->lc_pos < lx->len; lx->lc_pos++)
    if (lx->src[lx->lc_pos] == '\n') {
      lx->lc_line++;
      lx->lc_line_start = lx->lc_pos + 1;
    }
  *line = lx->lc_line;
  *col = (int) (pos - lx->lc_line_start) + 1;
}

static gboolean
fail (Lexer *lx, gsize pos, const char *msg)
{
  int line, col;
  position (lx, pos, &line, &col);
  g_set_error (lx->error, HONE_ERROR, HONE_ERROR_TEMPLATE_SYNTAX, _("chat template syntax error at %d:%d: %s"),
               line, col, msg);
  return FALSE;
}

static HjToken *
push (Lexer *lx, HjTokType type, gsize pos)
{
  HjToken t = { 0 };
  t.type = type;
  position (lx, pos, &t.line, &t.col);
  g_array_append_val (lx->toks, t);
  return &g_array_index (lx->toks, HjToken, lx->toks->len - 1);
}

static void
push_text (Lexer *lx, gsize start, gsize end)
{
  HjToken *t;
  if (end <= start)
    return;
  t = push (lx, HJ_TOK_TEXT, start);
  t->text = g_strndup (lx->src + start, end - start);
  t->len = end - start;
}

/* Python's str.rstrip(): returns the new end. */
static gsize
rstrip_end (const char *s, gsize start, gsize end)
{
  while (end > start) {
    const char *p = g_utf8_find_prev_char (s + start, s + end);
    if (!p || ws_at (p, s + end) == 0)
      break;
    end = p - s;
  }
  return end;
}

static gsize
skip_ws (Lexer *lx, gsize pos)
{
  gsize n;
  while ((n = ws_at (lx->src + pos, lx->src + lx->len)) > 0)
    pos += n;
  return pos;
}

static gboolean
starts (Lexer *lx, gsize pos, const char *lit)
{
  gsize n = strlen (lit);
  return pos + n <= lx->len && memcmp (lx->src + pos, lit, n) == 0;
}

/* Emits the data before a tag, applying `-` stripping or lstrip_blocks. */
static void
emit_data (Lexer *lx, gsize start, gsize end, char sign, gboolean is_variable)
{
  if (sign == '-')
    end = rstrip_end (lx->src, start, end);
  else if (sign != '+' && !is_variable) {
    gsize l_pos = start, i, p;
    for (i = end; i > start; i--)
      if (lx->src[i - 1] == '\n') {
        l_pos = i;
        break;
      }
    if (l_pos > start || lx->line_starting) {
      gboolean all_ws = TRUE;
      for (p = l_pos; p < end;) {
        gsize n = ws_at (lx->src + p, lx->src + end);
        if (n == 0) {
          all_ws = FALSE;
          break;
        }
        p += n;
      }
      if (all_ws)
        end = l_pos;
    }
  }
  push_text (lx, start, end);
}

/* `{% raw %}` opener at pos? Returns the position after it (0 if not raw). */
static gsize
match_raw_begin (Lexer *lx, gsize pos)
{
  gsize p = pos + 2;
  if (p < lx->len && (lx->src[p] == '-' || lx->src[p] == '+'))
    p++;
  p = skip_ws (lx, p);
  if (!starts (lx, p, "raw"))
    return 0;
  p = skip_ws (lx, p + 3);
  if (starts (lx, p, "-%}"))
    return skip_ws (lx, p + 3);
  if (starts (lx, p, "%}"))
    return p + 2;
  return 0;
}

static gboolean
lex_raw (Lexer *lx, gsize body)
{
  gsize p = body;
  for (;;) {
    const char *hit = memmem (lx->src + p, lx->len - p, "{%", 2);
    gsize q, tag, after;
    char sign = 0;
    if (!hit)
      return fail (lx, body, _("missing end of raw directive"));
    tag = hit - lx->src;
    q = tag + 2;
    if (q < lx->len && (lx->src[q] == '-' || lx->src[q] == '+'))
      sign = lx->src[q++];
    q = skip_ws (lx, q);
    if (!starts (lx, q, "endraw")) {
      p = tag + 2;
      continue;
    }
    q = skip_ws (lx, q + 6);
    if (starts (lx, q, "+%}"))
      after = q + 3;
    else if (starts (lx, q, "-%}"))
      after = skip_ws (lx, q + 3);
    else if (starts (lx, q, "%}")) {
      after = q + 2;
      if (after < lx->len && lx->src[after] == '\n')
        after++;
    } else {
      p = tag + 2;
      continue;
    }
    lx->line_starting = FALSE;  /* the raw-begin match ended with '}' or whitespace */
    if (body > 0 && lx->src[body - 1] == '\n')
      lx->line_starting = TRUE;
    emit_data (lx, body, tag, sign, FALSE);
    lx->line_starting = after > 0 && lx->src[after - 1] == '\n';
    lx->pos = after;
    return TRUE;
  }
}

static gboolean
lex_comment (Lexer *lx, gsize body)
{
  gsize p = body;
  if (body >= lx->len) {
    /* jinja2 stops quietly when "{#" is the very end of the source */
    lx->pos = lx->len;
    return TRUE;
  }
  for (;;) {
    const char *hit = memmem (lx->src + p, lx->len - p, "#}", 2);
    gsize q, after;
    if (!hit)
      return fail (lx, body, _("missing end of comment tag"));
    q = hit - lx->src;
    if (q > body && lx->src[q - 1] == '+')
      after = q + 2;
    else if (q > body && lx->src[q - 1] == '-')
      after = skip_ws (lx, q + 2);
    else {
      after = q + 2;
      if (after < lx->len && lx->src[after] == '\n')
        after++;
    }
    lx->line_starting = lx->src[after - 1] == '\n';
    lx->pos = after;
    return TRUE;
  }
}

static gboolean
is_name_start (const char *p, const char *end)
{
  guchar c = *p;
  if (c < 0x80)
    return g_ascii_isalpha (c) || c == '_';
  return g_unichar_isalpha (g_utf8_get_char_validated (p, end - p));
}

static gboolean
is_name_char (const char *p, const char *end)
{
  guchar c = *p;
  if (c < 0x80)
    return g_ascii_isalnum (c) || c == '_';
  {
    gunichar u = g_utf8_get_char_validated (p, end - p);
    return g_unichar_isalnum (u) || g_unichar_ismark (u);
  }
}

/* digits with single '_' separators: returns end or start when none */
static gsize
digits (Lexer *lx, gsize p, gboolean (*ok) (int))
{
  gsize start = p;
  if (p >= lx->len || !ok ((guchar) lx->src[p]))
    return start;
  p++;
  for (;;) {
    if (p < lx->len && ok ((guchar) lx->src[p]))
      p++;
    else if (p + 1 < lx->len && lx->src[p] == '_' && ok ((guchar) lx->src[p + 1]))
      p += 2;
    else
      break;
  }
  return p;
}

static gboolean is_dec (int c) { return c >= '0' && c <= '9'; }
static gboolean is_bin (int c) { return c == '0' || c == '1'; }
static gboolean is_oct (int c) { return c >= '0' && c <= '7'; }
static gboolean is_hex (int c) { return g_ascii_isxdigit (c); }

static char *
strip_underscores (const char *s, gsize n)
{
  char *out = g_malloc (n + 1);
  gsize i, j = 0;
  for (i = 0; i < n; i++)
    if (s[i] != '_')
      out[j++] = s[i];
  out[j] = 0;
  return out;
}

/* Numbers as jinja2's float_re / integer_re. Returns TRUE when one was lexed. */
static gboolean
lex_number (Lexer *lx, gsize pos, gboolean *ok)
{
  const char *s = lx->src;
  gsize p, q;
  *ok = TRUE;
  if (!is_dec ((guchar) s[pos]))
    return FALSE;
  /* float: (?<!\.) digits ( (\.digits)? e[+-]?digits | \.digits ) */
  if (pos == 0 || s[pos - 1] != '.') {
    gsize intend = digits (lx, pos, is_dec), fend = 0;
    p = intend;
    if (p < lx->len && s[p] == '.' && (q = digits (lx, p + 1, is_dec)) > p + 1)
      fend = q;
    q = fend ? fend : intend;
    if (q < lx->len && (s[q] == 'e' || s[q] == 'E')) {
      gsize e = q + 1, ee;
      if (e < lx->len && (s[e] == '+' || s[e] == '-'))
        e++;
      ee = digits (lx, e, is_dec);
      if (ee > e)
        fend = ee;
    }
    if (fend) {
      char *clean = strip_underscores (s + pos, fend - pos);
      HjToken *t = push (lx, HJ_TOK_FLOAT, pos);
      t->fval = g_ascii_strtod (clean, NULL);
      g_free (clean);
      lx->pos = fend;
      return TRUE;
    }
  }
  /* integer */
  {
    int base = 10;
    gsize start = pos, end;
    char *clean;
    HjToken *t;
    if (s[pos] == '0' && pos + 1 < lx->len && strchr ("bBoOxX", s[pos + 1]) && s[pos + 1]) {
      char k = g_ascii_tolower (s[pos + 1]);
      gboolean (*okf) (int) = k == 'b' ? is_bin : k == 'o' ? is_oct : is_hex;
      p = pos + 2;
      if (p < lx->len && s[p] == '_')
        p++;
      end = digits (lx, p, okf);
      if (end > p) {
        base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
        start = pos + 2;
      } else
        end = pos + 1;  /* just "0" */
    } else if (s[pos] == '0') {
      end = pos + 1;
      for (;;) {
        if (end < lx->len && s[end] == '0')
          end++;
        else if (end + 1 < lx->len && s[end] == '_' && s[end + 1] == '0')
          end += 2;
        else
          break;
      }
    } else
      end = digits (lx, pos, is_dec);
    clean = strip_underscores (s + start, end - start);
    t = push (lx, HJ_TOK_INT, pos);
    {
      char *endp = NULL;
      guint64 u;
      errno = 0;
      u = g_ascii_strtoull (clean, &endp, base);
      if (errno != 0 || u > G_MAXINT64) {
        g_free (clean);
        *ok = fail (lx, pos, _("integer literal too large"));
        return TRUE;
      }
      t->ival = (gint64) u;
    }
    g_free (clean);
    lx->pos = end;
    return TRUE;
  }
}

static int
hexval (char c)
{
  return g_ascii_xdigit_value (c);
}

static void
append_unichar (GString *out, gunichar c)
{
  g_string_append_unichar (out, c);
}

/* Decodes a string literal body as Python's "unicode-escape" codec does. */
static gboolean
decode_string (Lexer *lx, gsize pos, const char *s, gsize n, GString *out)
{
  gsize i = 0;
  while (i < n) {
    char c = s[i];
    if (c != '\\') {
      g_string_append_c (out, c);
      i++;
      continue;
    }
    if (i + 1 >= n)
      return fail (lx, pos, _("\\ at end of string"));
    c = s[i + 1];
    i += 2;
    switch (c) {
    case '\n': break;
    case '\\': g_string_append_c (out, '\\'); break;
    case '\'': g_string_append_c (out, '\''); break;
    case '"': g_string_append_c (out, '"'); break;
    case 'a': g_string_append_c (out, '\a'); break;
    case 'b': g_string_append_c (out, '\b'); break;
    case 'f': g_string_append_c (out, '\f'); break;
    case 'n': g_string_append_c (out, '\n'); break;
    case 'r': g_string_append_c (out, '\r'); break;
    case 't': g_string_append_c (out, '\t'); break;
    case 'v': g_string_append_c (out, '\v'); break;
    case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
      gunichar v = c - '0';
      int k;
      for (k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++)
        v = v * 8 + (s[i++] - '0');
      append_unichar (out, v);
      break;
    }
    case 'x': case 'u': case 'U': {
      int want = c == 'x' ? 2 : c == 'u' ? 4 : 8, k;
      gunichar v = 0;
      for (k = 0; k < want; k++) {
        if (i + k >= n || hexval (s[i + k]) < 0)
          return fail (lx, pos, _("truncated escape sequence in string literal"));
        v = v * 16 + hexval (s[i + k]);
      }
      i += want;
      if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return fail (lx, pos, _("escape sequence is not a valid character"));
      append_unichar (out, v);
      break;
    }
    case 'N':
      return fail (lx, pos, _("\\N{…} escapes are not supported"));
    default:
      /* unknown escapes stay as written (Python keeps the backslash) */
      g_string_append_c (out, '\\');
      i--;
      break;
    }
  }
  return TRUE;
}

static const struct {
  const char *text;
  int op;
} operators[] = {
  { "//", HJ_OP_FLOORDIV }, { "**", HJ_OP_POW }, { "==", HJ_OP_EQ }, { "!=", HJ_OP_NE },
  { ">=", HJ_OP_GE }, { "<=", HJ_OP_LE }, { "+", HJ_OP_ADD }, { "-", HJ_OP_SUB },
  { "/", HJ_OP_DIV }, { "*", HJ_OP_MUL }, { "%", HJ_OP_MOD }, { "~", HJ_OP_TILDE },
  { "[", HJ_OP_LBRACKET }, { "]", HJ_OP_RBRACKET }, { "(", HJ_OP_LPAREN }, { ")", HJ_OP_RPAREN },
  { "{", HJ_OP_LBRACE }, { "}", HJ_OP_RBRACE }, { ">", HJ_OP_GT }, { "<", HJ_OP_LT },
  { "=", HJ_OP_ASSIGN }, { ".", HJ_OP_DOT }, { ":", HJ_OP_COLON }, { "|", HJ_OP_PIPE },
  { ",", HJ_OP_COMMA }, { ";", HJ_OP_SEMICOLON },
};

const char *
hj_op_text (int op)
{
  gsize i;
  for (i = 0; i < G_N_ELEMENTS (operators); i++)
    if (operators[i].op == op)
      return operators[i].text;
  switch (op) {
  case HJ_OP_IN: return "in";
  case HJ_OP_NOTIN: return "not in";
  case HJ_OP_NOT: return "not";
  default: return "?";
  }
}

/* Lexes the inside of a `{%` or `{{` tag up to and including its end marker. */
static gboolean
lex_tag (Lexer *lx, gboolean is_block)
{
  const char *s = lx->src;
  for (;;) {
    gsize pos = lx->pos, n;
    gboolean ok;
    if (pos >= lx->len)
      return TRUE;  /* the parser reports the unexpected end */
    if (lx->nbalance == 0) {
      if (is_block) {
        if (starts (lx, pos, "+%}")) {
          push (lx, HJ_TOK_BLOCK_END, pos);
          lx->pos = pos + 3;
          lx->line_starting = FALSE;
          return TRUE;
        }
        if (starts (lx, pos, "-%}")) {
          push (lx, HJ_TOK_BLOCK_END, pos);
          lx->pos = skip_ws (lx, pos + 3);
          lx->line_starting = s[lx->pos - 1] == '\n';
          return TRUE;
        }
        if (starts (lx, pos, "%}")) {
          push (lx, HJ_TOK_BLOCK_END, pos);
          lx->pos = pos + 2;
          if (lx->pos < lx->len && s[lx->pos] == '\n')
            lx->pos++;
          lx->line_starting = s[lx->pos - 1] == '\n';
          return TRUE;
        }
      } else {
        if (starts (lx, pos, "-}}")) {
          push (lx, HJ_TOK_VAR_END, pos);
          lx->pos = skip_ws (lx, pos + 3);
          lx->line_starting = s[lx->pos - 1] == '\n';
          return TRUE;
        }
        if (starts (lx, pos, "}}")) {
          push (lx, HJ_TOK_VAR_END, pos);
          lx->pos = pos + 2;
          lx->line_starting = FALSE;
          return TRUE;
        }
      }
    }
    if ((n = ws_at (s + pos, s + lx->len)) > 0) {
      lx->pos = skip_ws (lx, pos);
      continue;
    }
    if (lex_number (lx, pos, &ok)) {
      if (!ok)
        return FALSE;
      continue;
    }
    if (is_name_start (s + pos, s + lx->len)) {
      gsize p = pos;
      HjToken *t;
      while (p < lx->len && is_name_char (s + p, s + lx->len))
        p = g_utf8_next_char (s + p) - s;
      t = push (lx, HJ_TOK_NAME, pos);
      t->text = g_strndup (s + pos, p - pos);
      t->len = p - pos;
      lx->pos = p;
      continue;
    }
    if (s[pos] == '\'' || s[pos] == '"') {
      char q = s[pos];
      gsize p = pos + 1;
      while (p < lx->len && s[p] != q) {
        if (s[p] == '\\' && p + 1 < lx->len)
          p++;
        p++;
      }
      if (p < lx->len) {
        GString *buf = g_string_new (NULL);
        HjToken *t;
        if (!decode_string (lx, pos, s + pos + 1, p - pos - 1, buf)) {
          g_string_free (buf, TRUE);
          return FALSE;
        }
        t = push (lx, HJ_TOK_STRING, pos);
        t->len = buf->len;
        t->text = g_string_free (buf, FALSE);
        lx->pos = p + 1;
        continue;
      }
      /* unterminated: falls through to the operator rule, which fails */
    }
    {
      gsize i;
      for (i = 0; i < G_N_ELEMENTS (operators); i++)
        if (starts (lx, pos, operators[i].text))
          break;
      if (i == G_N_ELEMENTS (operators)) {
        char msg[64];
        gunichar c = g_utf8_get_char_validated (s + pos, lx->len - pos);
        char ch[8] = { 0 };
        if (c == (gunichar) -1 || c == (gunichar) -2)
          c = '?';
        g_unichar_to_utf8 (c, ch);
        g_snprintf (msg, sizeof msg, "unexpected char '%s'", ch);
        return fail (lx, pos, msg);
      }
      {
        int op = operators[i].op;
        HjToken *t;
        if (op == HJ_OP_LPAREN || op == HJ_OP_LBRACKET || op == HJ_OP_LBRACE) {
          if (lx->nbalance >= HJ_MAX_PARSE_DEPTH) {
            int line, col;
            position (lx, pos, &line, &col);
            g_set_error (lx->error, HONE_ERROR, HONE_ERROR_TEMPLATE_LIMIT,
                         _("chat template nests brackets too deeply at %d:%d"), line, col);
            return FALSE;
          }
          lx->balance[lx->nbalance++] = op == HJ_OP_LPAREN ? ')' : op == HJ_OP_LBRACKET ? ']' : '}';
        } else if (op == HJ_OP_RPAREN || op == HJ_OP_RBRACKET || op == HJ_OP_RBRACE) {
          char want = op == HJ_OP_RPAREN ? ')' : op == HJ_OP_RBRACKET ? ']' : '}';
          char msg[64];
          if (lx->nbalance == 0) {
            g_snprintf (msg, sizeof msg, "unexpected '%c'", want);
            return fail (lx, pos, msg);
          }
          if (lx->balance[lx->nbalance - 1] != want) {
            g_snprintf (msg, sizeof msg, "unexpected '%c', expected '%c'", want, lx->balance[lx->nbalance - 1]);
            return fail (lx, pos, msg);
          }
          lx->nbalance--;
        }
        t = push (lx, HJ_TOK_OP, pos);
        t->op = op;
        lx->pos = pos + strlen (operators[i].text);
      }
    }
  }
}

GArray *
hj_lex (const char *source, gsize len, GError **error)
{
  Lexer lx = { 0 };
  lx.src = source;
  lx.len = len;
  lx.toks = g_array_new (FALSE, TRUE, sizeof (HjToken));
  lx.line_starting = TRUE;
  lx.lc_line = 1;
  lx.error = error;

  while (lx.pos < lx.len) {
    gsize start = lx.pos, tag = 0, body, raw_end;
    const char *p = lx.src + start, *end = lx.src + lx.len;
    char kind = 0, sign = 0;
    /* earliest "{{", "{%" or "{#" */
    while ((p = memchr (p, '{', end - p)) != NULL) {
      if (p + 1 < end && (p[1] == '{' || p[1] == '%' || p[1] == '#')) {
        kind = p[1];
        tag = p - lx.src;
        break;
      }
      p++;
    }
    if (!kind) {
      push_text (&lx, start, lx.len);
      break;
    }
    body = tag + 2;
    if (body < lx.len && (lx.src[body] == '-' || lx.src[body] == '+'))
      sign = lx.src[body++];
    if (kind == '%' && (raw_end = match_raw_begin (&lx, tag)) > 0) {
      emit_data (&lx, start, tag, sign, FALSE);
      if (!lex_raw (&lx, raw_end))
        goto error;
      continue;
    }
    emit_data (&lx, start, tag, sign, kind == '{');
    lx.line_starting = FALSE;
    if (kind == '#') {
      if (!lex_comment (&lx, body))
        goto error;
      continue;
    }
    push (&lx, kind == '%' ? HJ_TOK_BLOCK_BEGIN : HJ_TOK_VAR_BEGIN, tag);
    lx.pos = body;
    lx.nbalance = 0;
    if (!lex_tag (&lx, kind == '%'))
      goto error;
  }
  push (&lx, HJ_TOK_EOF, lx.len);
  return lx.toks;

error:
  hj_tokens_free (lx.toks);
  return NULL;
}

void
hj_tokens_free (GArray *tokens)
{
  guint i;
  if (!tokens)
    return;
  for (i = 0; i < tokens->len; i++)
    g_free (g_array_index (tokens, HjToken, i).text);
  g_array_free (tokens, TRUE);
}
