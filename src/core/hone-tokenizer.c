/* hone-tokenizer.c — vocabulary, encoding and decoding.
 *
 * Encoding follows the reference implementations step by step: the text is
 * made valid UTF-8 (each byte that does not belong to a well-formed sequence
 * becomes U+FFFD, as llama.cpp's decoder and g_utf8_make_valid do; only the
 * score-based SPM of GGUF "llama" vocabularies keeps raw bytes, as llama.cpp
 * does, and byte-falls-back on them), split on
 * added/special tokens (leftmost-longest, as HF's AddedVocabulary), each
 * remaining segment normalized, pre-tokenized and merged (hone-bpe.c).
 * Byte-level pre-tokens are cached, since text repeats its words.
 */
#include "hone-tokenizer-private.h"
#include "hone-error.h"
#include "hone-i18n.h"

#include <string.h>

#define CACHE_MAX_ENTRIES 65536
#define CACHE_MAX_PIECE   64

/* ---- vocabulary map ---- */

static inline guint32
bytes_hash (const char *s, gsize len)
{
  guint32 h = 2166136261u;
  gsize i;
  for (i = 0; i < len; i++)
    h = (h ^ (guint8) s[i]) * 16777619u;
  return h;
}

static inline const char *
token_ptr (const HoneTokenizer *tok, int id)
{
  return (const char *) tok->arena->data + tok->offsets[id];
}

gint32
_hone_tokenizer_lookup (const HoneTokenizer *tok, const char *text, gsize len)
{
  guint32 i;
  if (tok->vocab.slots == NULL)
    return -1;
  i = bytes_hash (text, len) & tok->vocab.mask;
  for (;;)
    {
      gint32 id = tok->vocab.slots[i];
      if (id < 0)
        return -1;
      if (tok->lens[id] == len && memcmp (token_ptr (tok, id), text, len) == 0)
        return id;
      i = (i + 1) & tok->vocab.mask;
    }
}

static void
vocab_insert (HoneTokenizer *tok, gint32 id)
{
  guint32 i = bytes_hash (token_ptr (tok, id), tok->lens[id]) & tok->vocab.mask;
  for (;;)
    {
      gint32 cur = tok->vocab.slots[i];
      if (cur < 0)
        {
          tok->vocab.slots[i] = id;
          return;
        }
      if (tok->lens[cur] == tok->lens[id] &&
          memcmp (token_ptr (tok, cur), token_ptr (tok, id), tok->lens[id]) == 0)
        {
          /* Duplicate text (GGUF allows it): the later id wins, as llama.cpp's map. */
          tok->vocab.slots[i] = id;
          return;
        }
      i = (i + 1) & tok->vocab.mask;
    }
}

/* ---- construction ---- */

HoneTokenizer *
_hone_tokenizer_alloc (HoneTokenizerKind kind, int n_vocab)
{
  HoneTokenizer *tok = g_new0 (HoneTokenizer, 1);
  int i;
  tok->kind = kind;
  tok->n_vocab = n_vocab;
  tok->arena = g_byte_array_sized_new ((guint) n_vocab * 8 + 16);
  tok->offsets = g_new (guint32, n_vocab);
  tok->lens = g_new0 (guint32, n_vocab);
  tok->types = g_new0 (guint8, n_vocab);
  tok->added_mark = g_new0 (guint8, n_vocab);
  for (i = 0; i < n_vocab; i++)
    tok->offsets[i] = G_MAXUINT32;
  tok->unk_id = -1;
  tok->bos = tok->eos = -1;
  tok->prefix_ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  tok->suffix_ids = g_array_new (FALSE, FALSE, sizeof (gint32));
  for (i = 0; i < 256; i++)
    {
      tok->byte_ids[i] = -1;
      tok->added_first[i] = -1;
    }
  g_mutex_init (&tok->cache_lock);
  return tok;
}

gboolean
_hone_tokenizer_set_token (HoneTokenizer *tok, int id, const char *text, gsize len,
                           HoneTokenType type, GError **error)
{
  if (id < 0 || id >= tok->n_vocab)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER,
                   _("Token id %d is outside the vocabulary (size %d)"), id, tok->n_vocab);
      return FALSE;
    }
  if (tok->offsets[id] != G_MAXUINT32)
    {
      if (tok->lens[id] == len && memcmp (token_ptr (tok, id), text, len) == 0)
        {
          tok->types[id] = (guint8) type;
          return TRUE;
        }
      g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER,
                   _("Token id %d is given twice (“%s” and “%.*s”)"),
                   id, token_ptr (tok, id), (int) MIN (len, 64), text);
      return FALSE;
    }
  if (len > G_MAXUINT32 / 2 || tok->arena->len > G_MAXUINT32 / 2)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER, _("Vocabulary too large"));
      return FALSE;
    }
  tok->offsets[id] = tok->arena->len;
  tok->lens[id] = (guint32) len;
  tok->types[id] = (guint8) type;
  g_byte_array_append (tok->arena, (const guint8 *) text, (guint) len);
  g_byte_array_append (tok->arena, (const guint8 *) "", 1);
  return TRUE;
}

gboolean
_hone_tokenizer_add_merge (HoneTokenizer *tok, const char *left, gsize left_len,
                           const char *right, gsize right_len, int rank, GError **error)
{
  gint32 l = _hone_tokenizer_lookup (tok, left, left_len);
  gint32 r = _hone_tokenizer_lookup (tok, right, right_len);
  gint32 m;
  char *cat;

  if (l < 0 || r < 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER,
                   _("Merge %d (“%.*s” “%.*s”) refers to a token that is not in the vocabulary"),
                   rank, (int) MIN (left_len, 64), left, (int) MIN (right_len, 64), right);
      return FALSE;
    }
  cat = g_malloc (left_len + right_len);
  memcpy (cat, left, left_len);
  memcpy (cat + left_len, right, right_len);
  m = _hone_tokenizer_lookup (tok, cat, left_len + right_len);
  g_free (cat);
  if (m < 0)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER,
                   _("Merge %d (“%.*s” “%.*s”) makes a token that is not in the vocabulary"),
                   rank, (int) MIN (left_len, 64), left, (int) MIN (right_len, 64), right);
      return FALSE;
    }
  hone_merge_map_insert (&tok->merges, l, r, rank, m);
  return TRUE;
}

void
_hone_tokenizer_add_added (HoneTokenizer *tok, int id, gboolean special, gboolean lstrip, gboolean rstrip)
{
  HoneAddedToken *a;
  if (id < 0 || id >= tok->n_vocab || tok->added_mark[id])
    return;
  tok->added_mark[id] = TRUE;
  if (tok->n_added == tok->added_cap)
    {
      tok->added_cap = MAX (16, tok->added_cap * 2);
      tok->added = g_renew (HoneAddedToken, tok->added, tok->added_cap);
    }
  a = &tok->added[tok->n_added++];
  a->id = id;
  a->text = NULL;   /* resolved in finish, when the arena stops moving */
  a->len = 0;
  a->special = special;
  a->lstrip = lstrip;
  a->rstrip = rstrip;
}

static int
added_cmp (gconstpointer pa, gconstpointer pb)
{
  const HoneAddedToken *a = pa, *b = pb;
  if (a->len != b->len)
    return a->len > b->len ? -1 : 1;
  return a->id - b->id;
}

gboolean
_hone_tokenizer_finish (HoneTokenizer *tok, GError **error)
{
  static const char *const eog_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", NULL };
  guint32 cap = 16;
  int i;
  guint a;

  for (i = 0; i < tok->n_vocab; i++)
    if (tok->offsets[i] == G_MAXUINT32)
      {
        g_set_error (error, HONE_ERROR, HONE_ERROR_TOKENIZER,
                     _("Token id %d is missing: the vocabulary’s ids have a gap"), i);
        return FALSE;
      }

  while (cap < (guint32) tok->n_vocab * 2 + 16)
    cap <<= 1;
  tok->vocab.mask = cap - 1;
  tok->vocab.slots = g_new (gint32, cap);
  memset (tok->vocab.slots, 0xff, sizeof (gint32) * cap);
  for (i = 0; i < tok->n_vocab; i++)
    vocab_insert (tok, i);

  for (i = 0; i < 256; i++)
    {
      char buf[16];
      int n;
      if (tok->byte_level)
        n = g_unichar_to_utf8 (hone_byte_to_unichar ((guint8) i), buf);
      else
        n = g_snprintf (buf, sizeof buf, "<0x%02X>", i);
      tok->byte_ids[i] = _hone_tokenizer_lookup (tok, buf, (gsize) n);
    }

  /* Added tokens: longest first, chained by first byte. */
  for (a = 0; a < tok->n_added; a++)
    {
      tok->added[a].text = token_ptr (tok, tok->added[a].id);
      tok->added[a].len = tok->lens[tok->added[a].id];
    }
  if (tok->n_added > 0)
    qsort (tok->added, tok->n_added, sizeof (HoneAddedToken), added_cmp);
  tok->added_next = g_new (guint16, tok->n_added + 1);
  for (a = tok->n_added; a-- > 0;)
    {
      guint8 b;
      if (tok->added[a].len == 0 || a >= G_MAXUINT16)
        continue;
      b = (guint8) tok->added[a].text[0];
      tok->added_next[a] = tok->added_first[b] < 0 ? G_MAXUINT16 : (guint16) tok->added_first[b];
      tok->added_first[b] = (gint32) a;
    }

  tok->eog = g_new0 (gboolean, tok->n_vocab);
  if (tok->eos >= 0 && tok->eos < tok->n_vocab)
    tok->eog[tok->eos] = TRUE;
  for (i = 0; eog_names[i]; i++)
    {
      gint32 id = _hone_tokenizer_lookup (tok, eog_names[i], strlen (eog_names[i]));
      if (id >= 0)
        tok->eog[id] = TRUE;
    }
  return TRUE;
}

void
hone_tokenizer_free (HoneTokenizer *tok)
{
  guint i;
  if (tok == NULL)
    return;
  g_byte_array_unref (tok->arena);
  g_free (tok->offsets);
  g_free (tok->lens);
  g_free (tok->types);
  g_free (tok->scores);
  g_free (tok->vocab.slots);
  hone_merge_map_clear (&tok->merges);
  g_array_unref (tok->prefix_ids);
  g_array_unref (tok->suffix_ids);
  g_free (tok->eog);
  g_free (tok->added);
  g_free (tok->added_mark);
  g_free (tok->added_next);
  for (i = 0; i < tok->n_norm; i++)
    {
      g_free (tok->norm[i].a);
      g_free (tok->norm[i].b);
    }
  g_free (tok->norm);
  for (i = 0; i < tok->n_pre; i++)
    if (tok->pre[i].regex)
      g_regex_unref (tok->pre[i].regex);
  g_free (tok->pre);
  g_free (tok->metaspace_repl);
  g_free (tok->cache.slots);
  g_free (tok->cache.entries);
  if (tok->cache.keys)
    g_byte_array_unref (tok->cache.keys);
  if (tok->cache.vals)
    g_array_unref (tok->cache.vals);
  g_mutex_clear (&tok->cache_lock);
  g_free (tok);
}

/* ---- accessors ---- */

HoneTokenizerKind hone_tokenizer_kind (const HoneTokenizer *tok) { return tok->kind; }
int hone_tokenizer_n_vocab (const HoneTokenizer *tok) { return tok->n_vocab; }
int hone_tokenizer_bos (const HoneTokenizer *tok) { return tok->bos; }
int hone_tokenizer_eos (const HoneTokenizer *tok) { return tok->eos; }

gboolean
hone_tokenizer_adds_bos (const HoneTokenizer *tok)
{
  guint i;
  for (i = 0; i < tok->prefix_ids->len; i++)
    if (g_array_index (tok->prefix_ids, gint32, i) == tok->bos && tok->bos >= 0)
      return TRUE;
  return FALSE;
}

gboolean
hone_tokenizer_is_eog (const HoneTokenizer *tok, int id)
{
  return id >= 0 && id < tok->n_vocab && tok->eog[id];
}

gboolean
hone_tokenizer_is_special (const HoneTokenizer *tok, int id)
{
  return id >= 0 && id < tok->n_vocab &&
         (tok->types[id] == HONE_TOKEN_CONTROL || tok->types[id] == HONE_TOKEN_UNKNOWN);
}

const char *
hone_tokenizer_token_text (const HoneTokenizer *tok, int id)
{
  if (id < 0 || id >= tok->n_vocab)
    return NULL;
  return token_ptr (tok, id);
}

int
hone_tokenizer_token_id (const HoneTokenizer *tok, const char *text)
{
  return text ? _hone_tokenizer_lookup (tok, text, strlen (text)) : -1;
}

/* ---- UTF-8 ---- */

/* Length of the well-formed UTF-8 sequence at s (Unicode Table 3-7), 0 if
 * none; *incomplete is set when the bytes so far are a valid prefix that the
 * end of the buffer cut short. NUL is a valid character here. */
static gsize
utf8_seq_len (const guint8 *s, gsize avail, gboolean *incomplete)
{
  guint8 b = s[0], lo = 0x80, hi = 0xBF;
  gsize n, i;
  *incomplete = FALSE;
  if (b < 0x80)
    return 1;
  if (b >= 0xC2 && b <= 0xDF)
    n = 2;
  else if (b >= 0xE0 && b <= 0xEF)
    {
      n = 3;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    }
  else if (b >= 0xF0 && b <= 0xF4)
    {
      n = 4;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    }
  else
    return 0;
  for (i = 1; i < n; i++)
    {
      guint8 c;
      if (i >= avail)
        {
          *incomplete = TRUE;
          return 0;
        }
      c = s[i];
      if (i == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF))
        return 0;
    }
  return n;
}

/* Appends @len bytes as valid UTF-8, each stray byte as U+FFFD; returns how
 * many bytes were consumed (a cut-short tail is left when @keep_tail). */
static gsize
append_valid_utf8 (GString *out, const char *text, gsize len, gboolean keep_tail)
{
  gsize i = 0;
  while (i < len)
    {
      gboolean inc;
      gsize n = utf8_seq_len ((const guint8 *) text + i, len - i, &inc);
      if (n > 0)
        {
          g_string_append_len (out, text + i, (gssize) n);
          i += n;
        }
      else if (inc && keep_tail)
        break;
      else
        {
          g_string_append (out, "\xef\xbf\xbd");
          i++;
        }
    }
  return i;
}

static gboolean
is_valid_utf8 (const char *text, gsize len)
{
  gsize i = 0;
  while (i < len)
    {
      gboolean inc;
      gsize n;
      if ((guint8) text[i] < 0x80)
        {
          i++;
          continue;
        }
      n = utf8_seq_len ((const guint8 *) text + i, len - i, &inc);
      if (n == 0)
        return FALSE;
      i += n;
    }
  return TRUE;
}

/* ---- encoding ---- */

typedef struct {
  HoneBpeWork bpe;
  GArray *pieces, *scratch;
  GByteArray *buf;
  HonePieceCache *cache;   /* NULL: another thread holds it */
} EncodeWork;

static const gint32 *
cache_lookup (const HonePieceCache *c, guint32 h, const char *p, gsize len, guint32 *n)
{
  guint32 i;
  if (c->slots == NULL)
    return NULL;
  for (i = h & c->mask; c->slots[i] != 0; i = (i + 1) & c->mask)
    {
      const HoneCacheEntry *e = &c->entries[c->slots[i] - 1];
      if (e->hash == h && e->key_len == len && memcmp (c->keys->data + e->key_off, p, len) == 0)
        {
          *n = e->val_len;
          return &g_array_index (c->vals, gint32, e->val_off);
        }
    }
  return NULL;
}

static void
cache_insert (HonePieceCache *c, guint32 h, const char *p, gsize len, const gint32 *ids, guint32 n)
{
  HoneCacheEntry *e;
  guint32 i;
  if (c->slots == NULL)
    {
      c->max_entries = CACHE_MAX_ENTRIES;
      c->mask = CACHE_MAX_ENTRIES * 2 - 1;
      c->slots = g_new0 (guint32, CACHE_MAX_ENTRIES * 2);
      c->entries = g_new (HoneCacheEntry, CACHE_MAX_ENTRIES);
      c->keys = g_byte_array_sized_new (CACHE_MAX_ENTRIES * 8);
      c->vals = g_array_sized_new (FALSE, FALSE, sizeof (gint32), CACHE_MAX_ENTRIES * 2);
    }
  if (c->n_entries >= c->max_entries)
    {
      memset (c->slots, 0, sizeof (guint32) * (c->mask + 1));
      c->n_entries = 0;
      g_byte_array_set_size (c->keys, 0);
      g_array_set_size (c->vals, 0);
    }
  e = &c->entries[c->n_entries];
  e->hash = h;
  e->key_off = c->keys->len;
  e->key_len = (guint32) len;
  e->val_off = c->vals->len;
  e->val_len = n;
  g_byte_array_append (c->keys, (const guint8 *) p, (guint) len);
  g_array_append_vals (c->vals, ids, n);
  for (i = h & c->mask; c->slots[i] != 0; i = (i + 1) & c->mask)
    ;
  c->slots[i] = ++c->n_entries;
}

static void
encode_piece_bytes (const HoneTokenizer *tok, EncodeWork *w, const char *p, gsize len, GArray *out)
{
  guint32 h = 0, n;
  guint before;
  if (w->cache && len <= CACHE_MAX_PIECE)
    {
      const gint32 *hit;
      h = bytes_hash (p, len);
      hit = cache_lookup (w->cache, h, p, len, &n);
      if (hit)
        {
          g_array_append_vals (out, hit, n);
          return;
        }
    }
  before = out->len;
  hone_bpe_merge_bytes (tok, &w->bpe, (const guint8 *) p, len, out);
  if (w->cache && len <= CACHE_MAX_PIECE)
    {
      guint n_ids = out->len - before;
      cache_insert (w->cache, h, p, len, n_ids ? &g_array_index (out, gint32, before) : NULL, n_ids);
    }
}

static void
encode_segment (const HoneTokenizer *tok, EncodeWork *w, const char *seg, gsize len,
                gboolean first, gboolean after_special, GArray *out)
{
  char *norm = NULL;
  const char *t = seg;
  gsize tlen = len, i;

  if (tok->use_scores)
    {
      /* llama.cpp SPM: a space before the first fragment and after each special
       * token, then every ' ' becomes U+2581. */
      g_byte_array_set_size (w->buf, 0);
      if (len == 0)
        return;
      if (tok->spm_add_space_prefix && after_special)
        g_byte_array_append (w->buf, (const guint8 *) "\xe2\x96\x81", 3);
      for (i = 0; i < len; i++)
        {
          if (seg[i] == ' ')
            g_byte_array_append (w->buf, (const guint8 *) "\xe2\x96\x81", 3);
          else
            g_byte_array_append (w->buf, (const guint8 *) seg + i, 1);
        }
      hone_spm_tokenize (tok, &w->bpe, (const char *) w->buf->data, w->buf->len, out);
      return;
    }

  if (tok->n_norm > 0)
    {
      norm = hone_normalize (tok, seg, len, &tlen);
      if (norm)
        t = norm;
    }
  if (tok->metaspace || tok->byte_level_prefix_space)
    {
      GString *s = g_string_sized_new (tlen + 8);
      if (tok->metaspace)
        {
          const char *r = tok->metaspace_repl;
          gsize rl = strlen (r);
          for (i = 0; i < tlen; i++)
            {
              if (t[i] == ' ')
                g_string_append (s, r);
              else
                g_string_append_c (s, t[i]);
            }
          if ((tok->metaspace_prepend == 2 || (tok->metaspace_prepend == 1 && first)) &&
              !(s->len >= rl && memcmp (s->str, r, rl) == 0))
            g_string_prepend (s, r);
        }
      else
        {
          g_string_append_len (s, t, (gssize) tlen);
          if (tlen > 0 && t[0] != ' ')
            g_string_prepend_c (s, ' ');
        }
      g_free (norm);
      tlen = s->len;
      norm = g_string_free (s, FALSE);
      t = norm;
    }

  if (tok->n_pre == 0)
    {
      if (tok->byte_level)
        encode_piece_bytes (tok, w, t, tlen, out);
      else
        hone_bpe_merge_word (tok, &w->bpe, t, tlen, out);
    }
  else
    {
      hone_pretokenize (tok, t, tlen, w->pieces, w->scratch);
      for (i = 0; i + 1 < w->pieces->len; i += 2)
        {
          guint32 a = g_array_index (w->pieces, guint32, i);
          guint32 b = g_array_index (w->pieces, guint32, i + 1);
          if (tok->byte_level)
            encode_piece_bytes (tok, w, t + a, b - a, out);
          else
            hone_bpe_merge_word (tok, &w->bpe, t + a, b - a, out);
        }
    }
  g_free (norm);
}

/* Unicode White_Space (Rust's char::is_whitespace, which HF's lstrip/rstrip use). */
static gboolean
is_white_space (gunichar c)
{
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

static gsize
utf8_prev_space_start (const char *text, gsize start, gsize end)
{
  /* Moves end back over whitespace characters, not before start. */
  while (end > start)
    {
      const char *p = g_utf8_find_prev_char (text + start, text + end);
      if (p == NULL || !is_white_space (g_utf8_get_char (p)))
        break;
      end = (gsize) (p - text);
    }
  return end;
}

gboolean
hone_tokenizer_encode (const HoneTokenizer *tok, const char *text, gssize length,
                       HoneEncodeFlags flags, GArray *out, GError **error)
{
  GString *valid = NULL;
  EncodeWork w;
  gsize len, i, seg_start = 0;
  gboolean parse_special = (flags & HONE_ENCODE_PARSE_SPECIAL) != 0;
  gboolean after_special = TRUE;

  g_return_val_if_fail (tok != NULL && out != NULL, FALSE);
  if (text == NULL)
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT, _("No text to encode"));
      return FALSE;
    }
  if (g_array_get_element_size (out) != sizeof (gint32))
    {
      g_set_error (error, HONE_ERROR, HONE_ERROR_INVALID_ARGUMENT,
                   _("The output array must hold gint32 elements"));
      return FALSE;
    }
  len = length < 0 ? strlen (text) : (gsize) length;
  /* llama.cpp's SPM takes raw bytes (what is not a token falls back to
   * <0xNN>); everything else works on valid UTF-8. */
  if (!tok->use_scores && !is_valid_utf8 (text, len))
    {
      valid = g_string_sized_new (len + 16);
      append_valid_utf8 (valid, text, len, FALSE);
      text = valid->str;
      len = valid->len;
    }

  if (flags & HONE_ENCODE_ADD_SPECIAL)
    g_array_append_vals (out, tok->prefix_ids->data, tok->prefix_ids->len);

  hone_bpe_work_init (&w.bpe);
  w.pieces = g_array_new (FALSE, FALSE, sizeof (guint32));
  w.scratch = g_array_new (FALSE, FALSE, sizeof (guint32));
  w.buf = g_byte_array_new ();
  w.cache = NULL;
  if (tok->byte_level && g_mutex_trylock (&((HoneTokenizer *) tok)->cache_lock))
    w.cache = &((HoneTokenizer *) tok)->cache;

  for (i = 0; i < len;)
    {
      gint32 a = tok->added_first[(guint8) text[i]];
      const HoneAddedToken *hit = NULL;
      while (a >= 0)
        {
          const HoneAddedToken *t = &tok->added[a];
          if ((parse_special || !t->special) && t->len <= len - i &&
              memcmp (text + i, t->text, t->len) == 0)
            {
              hit = t;
              break;
            }
          a = tok->added_next[a] == G_MAXUINT16 ? -1 : tok->added_next[a];
        }
      if (hit == NULL)
        {
          i++;
          continue;
        }
      {
        gsize seg_end = hit->lstrip ? utf8_prev_space_start (text, seg_start, i) : i;
        if (seg_end > seg_start)
          encode_segment (tok, &w, text + seg_start, seg_end - seg_start,
                          seg_start == 0, after_special, out);
        g_array_append_vals (out, &hit->id, 1);
        after_special = TRUE;
        i += hit->len;
        if (hit->rstrip)
          while (i < len && is_white_space (g_utf8_get_char (text + i)))
            i = (gsize) (g_utf8_next_char (text + i) - text);
        seg_start = i;
      }
    }
  if (len > seg_start)
    encode_segment (tok, &w, text + seg_start, len - seg_start, seg_start == 0, after_special, out);

  if (flags & HONE_ENCODE_ADD_SPECIAL)
    g_array_append_vals (out, tok->suffix_ids->data, tok->suffix_ids->len);

  if (w.cache)
    g_mutex_unlock (&((HoneTokenizer *) tok)->cache_lock);
  hone_bpe_work_clear (&w.bpe);
  g_array_unref (w.pieces);
  g_array_unref (w.scratch);
  g_byte_array_unref (w.buf);
  if (valid)
    g_string_free (valid, TRUE);
  return TRUE;
}

/* ---- decoding ---- */

static int
parse_byte_token (const char *s, gsize len)
{
  /* "<0xNN>" */
  if (len == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' &&
      g_ascii_isxdigit (s[3]) && g_ascii_isxdigit (s[4]))
    return g_ascii_xdigit_value (s[3]) * 16 + g_ascii_xdigit_value (s[4]);
  return -1;
}

void
hone_tokenizer_token_bytes (const HoneTokenizer *tok, int id, GByteArray *out)
{
  const char *s;
  gsize len;
  if (id < 0 || id >= tok->n_vocab)
    return;
  s = token_ptr (tok, id);
  len = tok->lens[id];
  if (tok->byte_level)
    {
      /* HF ByteLevel decoder: map every char back to its byte; a token with a
       * char outside the mapping (an added token such as “<|im_start|>” is all
       * printable ASCII, which maps to itself) is taken as it is. */
      guint start = out->len;
      const char *p = s, *end = s + len;
      while (p < end)
        {
          int b = hone_unichar_to_byte (g_utf8_get_char (p));
          guint8 byte;
          if (b < 0)
            {
              g_byte_array_set_size (out, start);
              g_byte_array_append (out, (const guint8 *) s, (guint) len);
              return;
            }
          byte = (guint8) b;
          g_byte_array_append (out, &byte, 1);
          p = g_utf8_next_char (p);
        }
      return;
    }
  else
    {
      int b = parse_byte_token (s, len);
      gsize i = 0;
      if (b >= 0 && (tok->types[id] == HONE_TOKEN_BYTE || tok->byte_ids[b] == id))
        {
          guint8 byte = (guint8) b;
          g_byte_array_append (out, &byte, 1);
          return;
        }
      while (i < len)
        {
          if (len - i >= 3 && memcmp (s + i, "\xe2\x96\x81", 3) == 0)
            {
              g_byte_array_append (out, (const guint8 *) " ", 1);
              i += 3;
            }
          else
            {
              g_byte_array_append (out, (const guint8 *) s + i, 1);
              i++;
            }
        }
    }
}

char *
hone_tokenizer_decode (const HoneTokenizer *tok, const gint32 *ids, gsize n,
                       gboolean skip_special, gsize *out_length)
{
  GByteArray *out = g_byte_array_new ();
  gsize i;
  for (i = 0; i < n; i++)
    {
      if (skip_special && hone_tokenizer_is_special (tok, ids[i]))
        continue;
      hone_tokenizer_token_bytes (tok, ids[i], out);
    }
  if (tok->strip_leading_space && out->len > 0 && out->data[0] == ' ')
    g_byte_array_remove_index (out, 0);
  if (out_length)
    *out_length = out->len;
  g_byte_array_append (out, (const guint8 *) "", 1);
  return (char *) g_byte_array_free (out, FALSE);
}

/* ---- streaming decoder ---- */

struct _HoneDecodeStream {
  const HoneTokenizer *tok;
  gboolean skip_special;
  gboolean at_start;
  GByteArray *pending;   /* bytes not yet emitted: a cut-short UTF-8 sequence */
};

HoneDecodeStream *
hone_decode_stream_new (const HoneTokenizer *tok, gboolean skip_special)
{
  HoneDecodeStream *s = g_new0 (HoneDecodeStream, 1);
  s->tok = tok;
  s->skip_special = skip_special;
  s->at_start = TRUE;
  s->pending = g_byte_array_new ();
  return s;
}

char *
hone_decode_stream_push (HoneDecodeStream *stream, gint32 id)
{
  GString *out = g_string_new (NULL);
  gsize used;
  if (!(stream->skip_special && hone_tokenizer_is_special (stream->tok, id)))
    {
      guint before = stream->pending->len;
      hone_tokenizer_token_bytes (stream->tok, id, stream->pending);
      if (stream->at_start && stream->pending->len > before)
        {
          /* Only the very first byte of the text may be dropped, as decode does. */
          if (stream->tok->strip_leading_space && stream->pending->data[0] == ' ')
            g_byte_array_remove_index (stream->pending, 0);
          stream->at_start = FALSE;
        }
    }
  used = append_valid_utf8 (out, (const char *) stream->pending->data, stream->pending->len, TRUE);
  g_byte_array_remove_range (stream->pending, 0, (guint) used);
  return g_string_free (out, FALSE);
}

char *
hone_decode_stream_finish (HoneDecodeStream *stream)
{
  GString *out = g_string_new (NULL);
  append_valid_utf8 (out, (const char *) stream->pending->data, stream->pending->len, FALSE);
  g_byte_array_set_size (stream->pending, 0);
  return g_string_free (out, FALSE);
}

void
hone_decode_stream_free (HoneDecodeStream *stream)
{
  if (stream == NULL)
    return;
  g_byte_array_unref (stream->pending);
  g_free (stream);
}
