/* hone-tokenizer-private.h — internals shared by the tokenizer's files.
 *
 * hone-tokenizer.c      vocabulary maps, encode/decode orchestration, streaming decoder
 * hone-tokenizer-json.c loading a HF tokenizer.json (+ tokenizer_config.json)
 * hone-tokenizer-gguf.c loading tokenizer.ggml.* metadata
 * hone-pretokenizer.c   normalizers and regex pre-tokenizers (GRegex / PCRE2)
 * hone-bpe.c            the merge loops (rank-based as HF/llama.cpp BPE, score-based as llama.cpp SPM)
 */
#pragma once

#include <glib.h>
#include "hone-tokenizer.h"

G_BEGIN_DECLS

/* Token attributes (as llama.cpp's GGUF token_type; HF added tokens map onto them). */
typedef enum {
  HONE_TOKEN_NORMAL       = 1,
  HONE_TOKEN_UNKNOWN      = 2,
  HONE_TOKEN_CONTROL      = 3,
  HONE_TOKEN_USER_DEFINED = 4,
  HONE_TOKEN_UNUSED       = 5,
  HONE_TOKEN_BYTE         = 6,
} HoneTokenType;

/* Open-addressing map from a byte string to a token id; keys live in the
 * tokenizer's text arena, so lookups of a (pointer, length) span never allocate. */
typedef struct {
  gint32  *slots;      /* token id or -1 */
  guint32  mask;
} HoneStrMap;

/* (left id, right id) → (rank, merged id). */
typedef struct {
  guint64 *keys;       /* (left << 32 | right) + 1; 0 = empty */
  gint32  *ranks;
  gint32  *merged;
  guint32  mask;
} HoneMergeMap;

/* Pre-token → ids cache: open addressing over entries whose keys and ids
 * live in two arenas; emptied wholesale when full. */
typedef struct {
  guint32 hash, key_off, key_len, val_off, val_len;
} HoneCacheEntry;

typedef struct {
  guint32 *slots;          /* entry index + 1; 0 = empty */
  guint32 mask;
  HoneCacheEntry *entries;
  guint32 n_entries, max_entries;
  GByteArray *keys;
  GArray *vals;            /* gint32 */
} HonePieceCache;

typedef enum {
  HONE_PRE_SPLIT_REGEX,     /* HF Split{Regex} / llama.cpp regex list entry */
  HONE_PRE_DIGITS,          /* HF Digits */
  HONE_PRE_METASPACE_SPLIT, /* HF Metaspace split=true: split before each replacement char */
} HonePreKind;

typedef enum {
  HONE_SPLIT_ISOLATED,
  HONE_SPLIT_REMOVED,
  HONE_SPLIT_MERGED_WITH_PREVIOUS,
  HONE_SPLIT_MERGED_WITH_NEXT,
  HONE_SPLIT_CONTIGUOUS,
} HoneSplitBehavior;

typedef struct {
  HonePreKind kind;
  GRegex *regex;
  HoneSplitBehavior behavior;
  gboolean invert;
  gboolean individual_digits;
} HonePreStage;

typedef enum {
  HONE_NORM_NFC, HONE_NORM_NFD, HONE_NORM_NFKC, HONE_NORM_NFKD,
  HONE_NORM_PREPEND, HONE_NORM_REPLACE, HONE_NORM_LOWERCASE,
} HoneNormKind;

typedef struct {
  HoneNormKind kind;
  char *a;   /* prepend text / replace pattern */
  char *b;   /* replace content */
} HoneNormStep;

typedef struct {
  gint32 id;
  const char *text;   /* points into the arena */
  guint32 len;
  gboolean special;   /* split only when HONE_ENCODE_PARSE_SPECIAL */
  gboolean lstrip, rstrip;
} HoneAddedToken;

struct _HoneTokenizer {
  HoneTokenizerKind kind;
  int n_vocab;

  /* Vocabulary: token i is arena[offsets[i]] .. + lens[i], NUL-terminated. */
  GByteArray *arena;
  guint32 *offsets;
  guint32 *lens;
  guint8  *types;      /* HoneTokenType */
  float   *scores;     /* NULL unless score-based */
  HoneStrMap vocab;

  /* Merges (rank-based BPE); empty for score-based SPM. */
  HoneMergeMap merges;
  gboolean use_scores;      /* llama.cpp SPM: merge by the merged token's score */
  gboolean byte_level;      /* GPT-2 byte↔unicode mapping */
  gboolean byte_fallback;   /* <0xNN> tokens for characters not in the vocab */
  gboolean ignore_merges;   /* a pre-token that is a whole token is taken as is */
  gboolean fuse_unk;
  int unk_id;
  gint32 byte_ids[256];     /* byte-level: id of the mapped char; SPM: id of <0xNN>; -1 if none */

  /* Special tokens and post-processing. */
  int bos, eos;
  GArray *prefix_ids;       /* added before the text when ADD_SPECIAL */
  GArray *suffix_ids;
  gboolean *eog;            /* per id */
  HoneAddedToken *added;    /* sorted by length, longest first */
  guint n_added, added_cap;
  guint8 *added_mark;       /* per id: already in added */
  gint32 added_first[256];  /* index of the first added token starting with byte b, or -1 */
  guint16 *added_next;      /* next added token with the same first byte, in length order */

  /* Text pipeline. */
  HoneNormStep *norm;
  guint n_norm;
  HonePreStage *pre;
  guint n_pre;
  gboolean metaspace;           /* Metaspace pre-tokenizer: replace ' ' and prepend */
  char *metaspace_repl;
  int metaspace_prepend;        /* 0 never, 1 first, 2 always */
  gboolean byte_level_prefix_space;
  gboolean spm_add_space_prefix;   /* llama.cpp SPM (GGUF "llama") */
  gboolean strip_leading_space;    /* decode: drop one leading space (SPM decoders) */

  /* Pre-token → ids cache (byte-level only), taken with a trylock for a
   * whole encode call: a second thread encoding at the same time goes without. */
  GMutex cache_lock;
  HonePieceCache cache;
};

/* hone-tokenizer.c */
HoneTokenizer *_hone_tokenizer_alloc (HoneTokenizerKind kind, int n_vocab);
/* Sets token @id's text; fails on duplicates. */
gboolean _hone_tokenizer_set_token (HoneTokenizer *tok, int id, const char *text, gsize len,
                                    HoneTokenType type, GError **error);
/* After all tokens are set: builds the vocab map, byte tables, added-token index, eog. */
gboolean _hone_tokenizer_finish (HoneTokenizer *tok, GError **error);
gint32 _hone_tokenizer_lookup (const HoneTokenizer *tok, const char *text, gsize len);
gboolean _hone_tokenizer_add_merge (HoneTokenizer *tok, const char *left, gsize left_len,
                                    const char *right, gsize right_len, int rank, GError **error);
void _hone_tokenizer_add_added (HoneTokenizer *tok, int id, gboolean special,
                                gboolean lstrip, gboolean rstrip);

/* hone-bpe.c */
void hone_merge_map_init (HoneMergeMap *map, guint expected);
void hone_merge_map_clear (HoneMergeMap *map);
gboolean hone_merge_map_insert (HoneMergeMap *map, gint32 left, gint32 right, gint32 rank, gint32 merged);
gboolean hone_merge_map_get (const HoneMergeMap *map, gint32 left, gint32 right, gint32 *rank, gint32 *merged);

typedef struct {
  GArray *sym;    /* HoneBpeSymbol */
  GArray *heap;   /* HoneBpeMerge */
  GByteArray *buf;
} HoneBpeWork;
void hone_bpe_work_init (HoneBpeWork *w);
void hone_bpe_work_clear (HoneBpeWork *w);
/* Rank-based merge (HF BPE::merge_word + Word::merge_all) of a UTF-8 word
 * already mapped (byte-level) or normalized (SPM). Appends ids to @out. */
void hone_bpe_merge_word (const HoneTokenizer *tok, HoneBpeWork *w, const char *word, gsize len, GArray *out);
/* Byte-level fast path: the word's raw bytes, each mapped through byte_ids. */
void hone_bpe_merge_bytes (const HoneTokenizer *tok, HoneBpeWork *w, const guint8 *bytes, gsize len, GArray *out);
/* llama.cpp SPM (score-based) on escaped text. */
void hone_spm_tokenize (const HoneTokenizer *tok, HoneBpeWork *w, const char *text, gsize len, GArray *out);

/* hone-pretokenizer.c */
/* GRegex from a HF/llama.cpp pattern; \s and \S are rewritten to the Unicode
 * White_Space set (what Oniguruma and llama.cpp use; PCRE2 also counts U+180E). */
GRegex *hone_pretokenizer_compile (const char *pattern, GError **error);
/* Splits [0,len) of @text into pieces (start, end pairs in @pieces, guint32). */
void hone_pretokenize (const HoneTokenizer *tok, const char *text, gsize len, GArray *pieces, GArray *scratch);
/* Applies the normalizer steps; returns a new string or NULL if unchanged. */
char *hone_normalize (const HoneTokenizer *tok, const char *text, gsize len, gsize *out_len);
/* Regex lists of llama.cpp's pre-tokenizer types; NULL if unknown. */
const char *const *hone_pretokenizer_llama_regexes (const char *pre, gboolean *ignore_merges);
/* The HF ByteLevel pre-tokenizer's regex. */
extern const char hone_pretokenizer_gpt2_regex[];

/* GPT-2 byte↔unicode mapping. */
gunichar hone_byte_to_unichar (guint8 b);
int hone_unichar_to_byte (gunichar c);   /* -1 if not a mapped char */

G_END_DECLS
