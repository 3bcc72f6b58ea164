/* hone-bpe.c — the BPE merge loops.
 *
 * Rank-based (HF tokenizers' BPE, llama.cpp's BPE): repeatedly merge the
 * adjacent pair with the lowest merge rank, leftmost first among equal ranks.
 * Score-based (llama.cpp's SPM tokenizer for GGUF "llama" vocabularies):
 * repeatedly merge the adjacent pair whose concatenation is a token with the
 * highest score, leftmost first. Both keep their symbols and the priority
 * queue in work buffers that the caller reuses, so the loop never allocates
 * per token.
 */
#include "hone-tokenizer-private.h"

#include <string.h>

/* ---- merge map ---- */

static inline guint32
pair_hash (guint64 key)
{
  key ^= key >> 33;
  key *= G_GUINT64_CONSTANT (0xff51afd7ed558ccd);
  key ^= key >> 33;
  key *= G_GUINT64_CONSTANT (0xc4ceb9fe1a85ec53);
  key ^= key >> 33;
  return (guint32) key;
}

void
hone_merge_map_init (HoneMergeMap *map, guint expected)
{
  guint32 cap = 16;
  while (cap < expected * 2 + 16)
    cap <<= 1;
  map->mask = cap - 1;
  map->keys = g_new0 (guint64, cap);
  map->ranks = g_new (gint32, cap);
  map->merged = g_new (gint32, cap);
}

void
hone_merge_map_clear (HoneMergeMap *map)
{
  g_clear_pointer (&map->keys, g_free);
  g_clear_pointer (&map->ranks, g_free);
  g_clear_pointer (&map->merged, g_free);
  map->mask = 0;
}

/* Returns FALSE if the pair is already present (the first rank wins, as in HF). */
gboolean
hone_merge_map_insert (HoneMergeMap *map, gint32 left, gint32 right, gint32 rank, gint32 merged)
{
  guint64 key = (((guint64) (guint32) left << 32) | (guint32) right) + 1;
  guint32 i = pair_hash (key) & map->mask;
  while (map->keys[i] != 0)
    {
      if (map->keys[i] == key)
        return FALSE;
      i = (i + 1) & map->mask;
    }
  map->keys[i] = key;
  map->ranks[i] = rank;
  map->merged[i] = merged;
  return TRUE;
}

gboolean
hone_merge_map_get (const HoneMergeMap *map, gint32 left, gint32 right, gint32 *rank, gint32 *merged)
{
  guint64 key;
  guint32 i;
  if (map->keys == NULL)
    return FALSE;
  key = (((guint64) (guint32) left << 32) | (guint32) right) + 1;
  i = pair_hash (key) & map->mask;
  while (map->keys[i] != 0)
    {
      if (map->keys[i] == key)
        {
          *rank = map->ranks[i];
          *merged = map->merged[i];
          return TRUE;
        }
      i = (i + 1) & map->mask;
    }
  return FALSE;
}

/* ---- work buffers ---- */

typedef struct {
  gint32 id;
  gint32 prev, next;
  guint32 start, len;   /* bytes of the word; len 0 = merged away */
} HoneBpeSymbol;

typedef struct {
  guint64 key;          /* rank-based: rank << 32 | pos; score-based: see spm_key */
  gint32 a, b;          /* rank-based: a = new id; score-based: a = left, b = right */
  guint32 size;
} HoneBpeMerge;

void
hone_bpe_work_init (HoneBpeWork *w)
{
  w->sym = g_array_sized_new (FALSE, FALSE, sizeof (HoneBpeSymbol), 256);
  w->heap = g_array_sized_new (FALSE, FALSE, sizeof (HoneBpeMerge), 256);
  w->buf = g_byte_array_sized_new (256);
}

void
hone_bpe_work_clear (HoneBpeWork *w)
{
  g_clear_pointer (&w->sym, g_array_unref);
  g_clear_pointer (&w->heap, g_array_unref);
  g_clear_pointer (&w->buf, g_byte_array_unref);
}

/* Binary min-heap on key. */
static void
heap_push (GArray *heap, const HoneBpeMerge *m)
{
  HoneBpeMerge *h;
  guint i;
  g_array_append_vals (heap, m, 1);
  h = (HoneBpeMerge *) heap->data;
  i = heap->len - 1;
  while (i > 0)
    {
      guint parent = (i - 1) / 2;
      HoneBpeMerge tmp;
      if (h[parent].key <= h[i].key)
        break;
      tmp = h[parent]; h[parent] = h[i]; h[i] = tmp;
      i = parent;
    }
}

static HoneBpeMerge
heap_pop (GArray *heap)
{
  HoneBpeMerge *h = (HoneBpeMerge *) heap->data;
  HoneBpeMerge top = h[0];
  guint n = heap->len - 1, i = 0;
  h[0] = h[n];
  g_array_set_size (heap, n);
  for (;;)
    {
      guint l = 2 * i + 1, r = l + 1, m = i;
      HoneBpeMerge tmp;
      if (l < n && h[l].key < h[m].key)
        m = l;
      if (r < n && h[r].key < h[m].key)
        m = r;
      if (m == i)
        break;
      tmp = h[m]; h[m] = h[i]; h[i] = tmp;
      i = m;
    }
  return top;
}

static inline void
push_symbol (GArray *sym, gint32 id, guint32 start, guint32 len)
{
  HoneBpeSymbol s;
  s.id = id;
  s.prev = (gint32) sym->len - 1;
  s.next = (gint32) sym->len + 1;
  s.start = start;
  s.len = len;
  g_array_append_vals (sym, &s, 1);
}

/* A character that is not in the vocabulary: HF's merge_word, with unk fusing. */
typedef struct {
  gint32 unk_id;
  guint32 unk_start, unk_len;
  gboolean pending;
} UnkState;

static inline void
flush_unk (GArray *sym, UnkState *u)
{
  if (u->pending)
    push_symbol (sym, u->unk_id, u->unk_start, u->unk_len);
  u->pending = FALSE;
}

static inline void
add_unknown (const HoneTokenizer *tok, GArray *sym, UnkState *u, guint32 start, guint32 len)
{
  if (tok->unk_id < 0)
    return;   /* no unk token: HF drops the character */
  if (u->pending && tok->fuse_unk)
    {
      u->unk_len += len;
      return;
    }
  flush_unk (sym, u);
  u->pending = TRUE;
  u->unk_id = tok->unk_id;
  u->unk_start = start;
  u->unk_len = len;
}

static void
merge_all (const HoneTokenizer *tok, HoneBpeWork *w, GArray *out)
{
  HoneBpeSymbol *s;
  guint n = w->sym->len, i;
  gint32 rank, merged;

  if (n == 0)
    return;
  s = (HoneBpeSymbol *) w->sym->data;
  s[n - 1].next = -1;
  g_array_set_size (w->heap, 0);
  for (i = 0; i + 1 < n; i++)
    if (hone_merge_map_get (&tok->merges, s[i].id, s[i + 1].id, &rank, &merged))
      {
        HoneBpeMerge m = { ((guint64) (guint32) rank << 32) | i, merged, 0, 0 };
        heap_push (w->heap, &m);
      }

  while (w->heap->len > 0)
    {
      HoneBpeMerge top = heap_pop (w->heap);
      guint pos = (guint) (top.key & 0xffffffffu);
      gint32 next;
      HoneBpeSymbol *cur;

      s = (HoneBpeSymbol *) w->sym->data;
      cur = &s[pos];
      if (cur->len == 0 || cur->next < 0)
        continue;
      next = cur->next;
      /* Stale entry: the pair at pos changed since it was queued. */
      if (!hone_merge_map_get (&tok->merges, cur->id, s[next].id, &rank, &merged) || merged != top.a)
        continue;

      cur->id = top.a;
      cur->len += s[next].len;
      cur->next = s[next].next;
      s[next].len = 0;
      if (cur->next >= 0)
        s[cur->next].prev = (gint32) pos;

      if (cur->prev >= 0 &&
          hone_merge_map_get (&tok->merges, s[cur->prev].id, cur->id, &rank, &merged))
        {
          HoneBpeMerge m = { ((guint64) (guint32) rank << 32) | (guint32) cur->prev, merged, 0, 0 };
          heap_push (w->heap, &m);
        }
      if (cur->next >= 0 &&
          hone_merge_map_get (&tok->merges, cur->id, s[cur->next].id, &rank, &merged))
        {
          HoneBpeMerge m = { ((guint64) (guint32) rank << 32) | pos, merged, 0, 0 };
          heap_push (w->heap, &m);
        }
    }

  s = (HoneBpeSymbol *) w->sym->data;
  for (i = 0; i < n; i++)
    if (s[i].len != 0)
      g_array_append_vals (out, &s[i].id, 1);
}

void
hone_bpe_merge_word (const HoneTokenizer *tok, HoneBpeWork *w, const char *word, gsize len, GArray *out)
{
  UnkState u = { -1, 0, 0, FALSE };
  gsize i = 0;

  if (len == 0)
    return;
  if (tok->ignore_merges)
    {
      gint32 id = _hone_tokenizer_lookup (tok, word, len);
      if (id >= 0)
        {
          g_array_append_vals (out, &id, 1);
          return;
        }
    }

  g_array_set_size (w->sym, 0);
  while (i < len)
    {
      /* The text is valid UTF-8 here (encode sanitizes it first). */
      gsize clen = (gsize) (g_utf8_next_char (word + i) - (word + i));
      gint32 id;
      if (clen > len - i)
        clen = len - i;
      id = _hone_tokenizer_lookup (tok, word + i, clen);
      if (id >= 0)
        {
          flush_unk (w->sym, &u);
          push_symbol (w->sym, id, (guint32) i, (guint32) clen);
        }
      else
        {
          gboolean all = tok->byte_fallback;
          gsize j;
          for (j = 0; all && j < clen; j++)
            all = tok->byte_ids[(guint8) word[i + j]] >= 0;
          if (all)
            {
              /* HF adds the byte tokens without flushing a pending unk first. */
              for (j = 0; j < clen; j++)
                push_symbol (w->sym, tok->byte_ids[(guint8) word[i + j]], (guint32) (i + j), 1);
            }
          else
            add_unknown (tok, w->sym, &u, (guint32) i, (guint32) clen);
        }
      i += clen;
    }
  flush_unk (w->sym, &u);
  merge_all (tok, w, out);
}

void
hone_bpe_merge_bytes (const HoneTokenizer *tok, HoneBpeWork *w, const guint8 *bytes, gsize len, GArray *out)
{
  UnkState u = { -1, 0, 0, FALSE };
  gsize i;

  if (len == 0)
    return;
  if (tok->ignore_merges)
    {
      /* The whole pre-token as a token: needs its mapped text. */
      gint32 id;
      g_byte_array_set_size (w->buf, 0);
      for (i = 0; i < len; i++)
        {
          char utf8[6];
          int n = g_unichar_to_utf8 (hone_byte_to_unichar (bytes[i]), utf8);
          g_byte_array_append (w->buf, (const guint8 *) utf8, n);
        }
      id = _hone_tokenizer_lookup (tok, (const char *) w->buf->data, w->buf->len);
      if (id >= 0)
        {
          g_array_append_vals (out, &id, 1);
          return;
        }
    }

  g_array_set_size (w->sym, 0);
  for (i = 0; i < len; i++)
    {
      gint32 id = tok->byte_ids[bytes[i]];
      if (id >= 0)
        {
          flush_unk (w->sym, &u);
          push_symbol (w->sym, id, (guint32) i, 1);
        }
      else
        add_unknown (tok, w->sym, &u, (guint32) i, 1);
    }
  flush_unk (w->sym, &u);
  merge_all (tok, w, out);
}

/* ---- llama.cpp SPM ---- */

/* Highest score first, then leftmost: order-preserving map of the float score
 * into the high 32 bits (inverted, since the heap pops the smallest key). */
static inline guint64
spm_key (float score, guint32 left)
{
  guint32 bits;
  memcpy (&bits, &score, 4);
  bits = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);   /* ascending order of floats */
  bits = ~bits;                                                  /* descending */
  return ((guint64) bits << 32) | left;
}

static void
spm_try_bigram (const HoneTokenizer *tok, HoneBpeWork *w, const char *text, gint32 left, gint32 right)
{
  HoneBpeSymbol *s = (HoneBpeSymbol *) w->sym->data;
  gint32 id;
  HoneBpeMerge m;
  if (left < 0 || right < 0)
    return;
  id = _hone_tokenizer_lookup (tok, text + s[left].start, s[left].len + s[right].len);
  if (id < 0)
    return;
  m.key = spm_key (tok->scores ? tok->scores[id] : 0.0f, (guint32) left);
  m.a = left;
  m.b = right;
  m.size = s[left].len + s[right].len;
  heap_push (w->heap, &m);
}

void
hone_spm_tokenize (const HoneTokenizer *tok, HoneBpeWork *w, const char *text, gsize len, GArray *out)
{
  static const guint8 utf8_len[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
  HoneBpeSymbol *s;
  gsize off = 0;
  guint i, n;

  g_array_set_size (w->sym, 0);
  g_array_set_size (w->heap, 0);
  while (off < len)
    {
      gsize clen = MIN (len - off, utf8_len[(guint8) text[off] >> 4]);
      push_symbol (w->sym, -1, (guint32) off, (guint32) clen);
      off += clen;
    }
  n = w->sym->len;
  if (n == 0)
    return;
  s = (HoneBpeSymbol *) w->sym->data;
  s[n - 1].next = -1;
  for (i = 1; i < n; i++)
    spm_try_bigram (tok, w, text, (gint32) i - 1, (gint32) i);

  while (w->heap->len > 0)
    {
      HoneBpeMerge top = heap_pop (w->heap);
      HoneBpeSymbol *l, *r;
      s = (HoneBpeSymbol *) w->sym->data;
      l = &s[top.a];
      r = &s[top.b];
      if (l->len == 0 || r->len == 0 || l->len + r->len != top.size)
        continue;
      l->len += r->len;
      r->len = 0;
      l->next = r->next;
      if (r->next >= 0)
        s[r->next].prev = top.a;
      spm_try_bigram (tok, w, text, l->prev, top.a);
      spm_try_bigram (tok, w, text, top.a, l->next);
    }

  s = (HoneBpeSymbol *) w->sym->data;
  for (i = 0; i < n; i++)
    {
      gint32 id;
      guint32 j;
      if (s[i].len == 0)
        continue;
      id = _hone_tokenizer_lookup (tok, text + s[i].start, s[i].len);
      if (id >= 0)
        {
          g_array_append_vals (out, &id, 1);
          continue;
        }
      /* Symbols that are not tokens come out as byte tokens (or unk). */
      for (j = 0; j < s[i].len; j++)
        {
          gint32 b = tok->byte_ids[(guint8) text[s[i].start + j]];
          if (b < 0)
            b = tok->unk_id;
          if (b >= 0)
            g_array_append_vals (out, &b, 1);
        }
    }
}
