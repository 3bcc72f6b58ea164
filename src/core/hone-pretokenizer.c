/* hone-pretokenizer.c — normalizers and regex pre-tokenizers.
 *
 * The regexes are those of HF tokenizer.json files and of llama.cpp's
 * pre-tokenizer types, run by GRegex (PCRE2 with Unicode properties). A
 * pre-tokenizer is a list of stages; each stage splits every piece the
 * previous stage produced, as HF's Sequence and llama.cpp's regex lists do.
 */
#include "hone-tokenizer-private.h"
#include "hone-error.h"
#include "hone-i18n.h"

#include <string.h>

const char hone_pretokenizer_gpt2_regex[] =
  "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* llama.cpp's lists (llama-vocab.cpp, llm_tokenizer_bpe). The GPT-2 entries
 * lack HF's final "|\s+"; text no regex matches still becomes its own piece,
 * so the result is the same. */
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_RE "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const char *const re_gpt2[] = { GPT2_RE, NULL };
static const char *const re_smollm[] = { "\\p{N}", GPT2_RE, NULL };
static const char *const re_llama3[] = { LLAMA3_RE, NULL };
static const char *const re_qwen2[] = { QWEN2_RE, NULL };
static const char *const re_default[] = {
  "[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]", NULL };

const char *const *
hone_pretokenizer_llama_regexes (const char *pre, gboolean *ignore_merges)
{
  static const char *const gpt2_names[] = { "gpt-2", "gpt2", "phi-2", "jina-es", "jina-de",
    "gigachat", "jina-v2-es", "jina-v2-de", "mpt", "olmo", "jais", "trillion", NULL };
  static const char *const smollm_names[] = { "smollm", "starcoder", "refact", "command-r",
    "codeshell", "exaone", "minerva-7b", NULL };
  static const char *const llama3_names[] = { "llama3", "llama-v3", "llama-bpe", "falcon3",
    "smaug-bpe", "dbrx", "pixtral", NULL };
  static const char *const qwen2_names[] = { "qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", NULL };

  *ignore_merges = FALSE;
  if (pre == NULL || g_str_equal (pre, "default"))
    return re_default;
  if (g_strv_contains (gpt2_names, pre))
    return re_gpt2;
  if (g_strv_contains (smollm_names, pre))
    return re_smollm;
  if (g_strv_contains (llama3_names, pre))
    {
      *ignore_merges = !g_str_equal (pre, "smaug-bpe") && !g_str_equal (pre, "dbrx");
      return re_llama3;
    }
  if (g_strv_contains (qwen2_names, pre))
    return re_qwen2;
  return NULL;
}

/* Unicode White_Space, what Oniguruma's and llama.cpp's \s mean. */
#define WS_ITEMS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

GRegex *
hone_pretokenizer_compile (const char *pattern, GError **error)
{
  GString *p = g_string_sized_new (strlen (pattern) + 64);
  GError *local = NULL;
  GRegex *re;
  gboolean in_class = FALSE;
  const char *c;

  for (c = pattern; *c; c++)
    {
      if (*c == '\\' && c[1] != '\0')
        {
          if (c[1] == 's')
            g_string_append (p, in_class ? WS_ITEMS : "[" WS_ITEMS "]");
          else if (c[1] == 'S' && !in_class)
            g_string_append (p, "[^" WS_ITEMS "]");
          else
            g_string_append_len (p, c, 2);
          c++;
          continue;
        }
      if (*c == '[' && !in_class)
        {
          in_class = TRUE;
          g_string_append_c (p, '[');
          /* A ']' right after '[' or '[^' is literal. */
          if (c[1] == '^')
            g_string_append_c (p, *++c);
          if (c[1] == ']')
            g_string_append_c (p, *++c);
          continue;
        }
      if (*c == ']' && in_class)
        in_class = FALSE;
      g_string_append_c (p, *c);
    }

  re = g_regex_new (p->str, G_REGEX_OPTIMIZE, 0, &local);
  g_string_free (p, TRUE);
  if (re == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER,
                   _("Pre-tokenizer regex “%s” does not compile: %s"), pattern, local->message);
      g_error_free (local);
    }
  return re;
}

/* ---- splitting ---- */

typedef struct { guint32 start, end; gboolean delim; } Seg;

static void
emit_split (GArray *out, GArray *segs, HoneSplitBehavior behavior)
{
  Seg *s = (Seg *) segs->data;
  guint i;
  gboolean prev = FALSE;
  guint32 *last;

  for (i = 0; i < segs->len; i++)
    {
      guint32 pair[2] = { s[i].start, s[i].end };
      gboolean d = s[i].delim;
      last = out->len >= 2 ? &g_array_index (out, guint32, out->len - 1) : NULL;
      switch (behavior)
        {
        case HONE_SPLIT_ISOLATED:
          g_array_append_vals (out, pair, 2);
          break;
        case HONE_SPLIT_REMOVED:
          if (!d)
            g_array_append_vals (out, pair, 2);
          break;
        case HONE_SPLIT_MERGED_WITH_PREVIOUS:
          if (d && !prev && last && i > 0)
            *last = pair[1];
          else
            g_array_append_vals (out, pair, 2);
          break;
        case HONE_SPLIT_MERGED_WITH_NEXT:
          if (prev && last && i > 0)
            *last = pair[1];
          else
            g_array_append_vals (out, pair, 2);
          break;
        case HONE_SPLIT_CONTIGUOUS:
          if (d == prev && last && i > 0)
            *last = pair[1];
          else
            g_array_append_vals (out, pair, 2);
          break;
        }
      prev = d;
    }
}

static void
split_piece (const HonePreStage *st, const char *text, guint32 start, guint32 end, GArray *out, GArray *segs)
{
  GMatchInfo *mi = NULL;
  guint32 prev = start;

  g_array_set_size (segs, 0);
  if (st->kind == HONE_PRE_METASPACE_SPLIT)
    {
      /* Split before each U+2581 (HF: split(replacement, MergedWithNext)). */
      guint32 i = start;
      while (i < end)
        {
          if (end - i >= 3 && memcmp (text + i, "\xe2\x96\x81", 3) == 0)
            {
              Seg g = { prev, i, FALSE }, m = { i, i + 3, TRUE };
              if (prev != i)
                g_array_append_vals (segs, &g, 1);
              g_array_append_vals (segs, &m, 1);
              i += 3;
              prev = i;
            }
          else
            i++;
        }
    }
  else
    {
      g_regex_match_full (st->regex, text + start, end - start, 0, 0, &mi, NULL);
      while (g_match_info_matches (mi))
        {
          int ms, me;
          if (g_match_info_fetch_pos (mi, 0, &ms, &me) && me > ms)
            {
              Seg g = { prev, start + (guint32) ms, st->invert };
              Seg m = { start + (guint32) ms, start + (guint32) me, !st->invert };
              if (prev != g.end)
                g_array_append_vals (segs, &g, 1);
              g_array_append_vals (segs, &m, 1);
              prev = m.end;
            }
          if (!g_match_info_next (mi, NULL))
            break;
        }
      g_match_info_free (mi);
    }
  if (prev != end)
    {
      Seg g = { prev, end, st->kind == HONE_PRE_METASPACE_SPLIT ? FALSE : st->invert };
      g_array_append_vals (segs, &g, 1);
    }
  emit_split (out, segs, st->kind == HONE_PRE_METASPACE_SPLIT ? HONE_SPLIT_MERGED_WITH_NEXT : st->behavior);
}

void
hone_pretokenize (const HoneTokenizer *tok, const char *text, gsize len, GArray *pieces, GArray *scratch)
{
  GArray *segs = g_array_new (FALSE, FALSE, sizeof (Seg));
  guint s;

  g_array_set_size (pieces, 0);
  if (len == 0)
    goto out;
  {
    guint32 whole[2] = { 0, (guint32) len };
    g_array_append_vals (pieces, whole, 2);
  }
  for (s = 0; s < tok->n_pre; s++)
    {
      guint i;
      g_array_set_size (scratch, 0);
      for (i = 0; i + 1 < pieces->len; i += 2)
        {
          guint32 a = g_array_index (pieces, guint32, i), b = g_array_index (pieces, guint32, i + 1);
          if (b > a)
            split_piece (&tok->pre[s], text, a, b, scratch, segs);
        }
      g_array_set_size (pieces, 0);
      g_array_append_vals (pieces, scratch->data, scratch->len);
    }
out:
  g_array_unref (segs);
}

/* ---- normalizers ---- */

static char *
replace_all (const char *text, gsize len, const char *pat, const char *with, gsize *out_len)
{
  gsize plen = strlen (pat), i = 0;
  GString *s;
  if (plen == 0)
    return NULL;
  s = g_string_sized_new (len + 16);
  while (i < len)
    {
      if (len - i >= plen && memcmp (text + i, pat, plen) == 0)
        {
          g_string_append (s, with);
          i += plen;
        }
      else
        g_string_append_c (s, text[i++]);
    }
  *out_len = s->len;
  return g_string_free (s, FALSE);
}

char *
hone_normalize (const HoneTokenizer *tok, const char *text, gsize len, gsize *out_len)
{
  char *cur = NULL;   /* owned; NULL while unchanged */
  const char *t = text;
  gsize tlen = len;
  guint i;

  for (i = 0; i < tok->n_norm; i++)
    {
      const HoneNormStep *st = &tok->norm[i];
      char *next = NULL;
      gsize nlen = 0;
      switch (st->kind)
        {
        case HONE_NORM_NFC:
        case HONE_NORM_NFD:
        case HONE_NORM_NFKC:
        case HONE_NORM_NFKD:
          {
            static const GNormalizeMode modes[] = { G_NORMALIZE_NFC, G_NORMALIZE_NFD,
                                                    G_NORMALIZE_NFKC, G_NORMALIZE_NFKD };
            next = g_utf8_normalize (t, (gssize) tlen, modes[st->kind - HONE_NORM_NFC]);
            nlen = next ? strlen (next) : 0;
            break;
          }
        case HONE_NORM_LOWERCASE:
          next = g_utf8_strdown (t, (gssize) tlen);
          nlen = strlen (next);
          break;
        case HONE_NORM_PREPEND:
          if (tlen > 0)
            {
              gsize plen = strlen (st->a);
              next = g_malloc (plen + tlen + 1);
              memcpy (next, st->a, plen);
              memcpy (next + plen, t, tlen);
              next[plen + tlen] = '\0';
              nlen = plen + tlen;
            }
          break;
        case HONE_NORM_REPLACE:
          next = replace_all (t, tlen, st->a, st->b, &nlen);
          break;
        }
      if (next != NULL)
        {
          g_free (cur);
          cur = next;
          t = cur;
          tlen = nlen;
        }
    }
  *out_len = tlen;
  return cur;
}

/* ---- GPT-2 byte ↔ unicode ---- */

static gboolean
byte_is_printable (guint b)
{
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

gunichar
hone_byte_to_unichar (guint8 b)
{
  guint n = 0, i;
  if (byte_is_printable (b))
    return b;
  for (i = 0; i < b; i++)
    if (!byte_is_printable (i))
      n++;
  return 256 + n;
}

int
hone_unichar_to_byte (gunichar c)
{
  guint n = 0, i;
  if (c < 256)
    return byte_is_printable (c) ? (int) c : -1;
  if (c >= 256 + 68)
    return -1;
  for (i = 0; i < 256; i++)
    if (!byte_is_printable (i))
      {
        if (256 + n == c)
          return (int) i;
        n++;
      }
  return -1;
}
