/* hone-tokenizer.h — BPE tokenizers (byte-level and SentencePiece-style).
 *
 * Loaded from GGUF metadata (tokenizer.ggml.*) or a HF tokenizer.json
 * (+ tokenizer_config.json for BOS/EOS/add_bos rules). Token ids must equal
 * the model's own tokenizer (HF tokenizers / llama.cpp) exactly.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct _HoneTokenizer HoneTokenizer;
typedef struct _HoneGguf HoneGguf;

typedef enum {
  HONE_TOKENIZER_BYTE_BPE,    /* GPT-2 style byte-level BPE (SmolLM, Qwen2, Llama-3) */
  HONE_TOKENIZER_SPM_BPE,     /* SentencePiece-style BPE with byte fallback (Llama-2, Mistral) */
} HoneTokenizerKind;

typedef enum {
  HONE_ENCODE_ADD_SPECIAL   = 1 << 0,  /* add BOS/EOS as the model's rules say */
  HONE_ENCODE_PARSE_SPECIAL = 1 << 1,  /* text like "<|im_start|>" becomes the special token */
} HoneEncodeFlags;

HoneTokenizer *hone_tokenizer_new_from_gguf (const HoneGguf *gguf, GError **error);
/* tokenizer_config_json may be NULL. */
HoneTokenizer *hone_tokenizer_new_from_json (const char *tokenizer_json, gssize length,
                                             const char *tokenizer_config_json, gssize config_length,
                                             GError **error);
/* Loads tokenizer.json (+ tokenizer_config.json if present) from a HF folder. */
HoneTokenizer *hone_tokenizer_new_from_hf_dir (const char *dir, GError **error);
void           hone_tokenizer_free (HoneTokenizer *tok);

HoneTokenizerKind hone_tokenizer_kind (const HoneTokenizer *tok);
int            hone_tokenizer_n_vocab (const HoneTokenizer *tok);
int            hone_tokenizer_bos (const HoneTokenizer *tok);   /* -1 if none */
int            hone_tokenizer_eos (const HoneTokenizer *tok);   /* -1 if none */
gboolean       hone_tokenizer_adds_bos (const HoneTokenizer *tok);
/* End of generation: EOS or a turn-end token such as <|im_end|>, <|eot_id|>. */
gboolean       hone_tokenizer_is_eog (const HoneTokenizer *tok, int id);
gboolean       hone_tokenizer_is_special (const HoneTokenizer *tok, int id);
/* The token's string as stored in the vocab (e.g. "Ġhello", "▁the", "<0x0A>"). */
const char    *hone_tokenizer_token_text (const HoneTokenizer *tok, int id);
int            hone_tokenizer_token_id (const HoneTokenizer *tok, const char *text);  /* -1 if absent */

/* Encode UTF-8 (malformed sequences are handled as the reference does).
 * Appends gint32 ids to @out. length -1: NUL-terminated.
 * Malformed UTF-8: each byte that does not start a well-formed sequence
 * becomes U+FFFD before tokenizing (llama.cpp's rule; HF is compared on the
 * replaced string). Exception, as in llama.cpp: the score-based SPM of GGUF
 * "llama" vocabularies keeps the raw bytes, which fall back to <0xNN>.
 * Thread-safe: one tokenizer may encode from several threads at once. */
gboolean       hone_tokenizer_encode (const HoneTokenizer *tok, const char *text, gssize length,
                                      HoneEncodeFlags flags, GArray *out, GError **error);
/* Decode ids to bytes (may be invalid UTF-8 if the ids split a character).
 * skip_special: leave out special tokens' text. */
char          *hone_tokenizer_decode (const HoneTokenizer *tok, const gint32 *ids, gsize n,
                                      gboolean skip_special, gsize *out_length);
/* The bytes one token contributes (piece), appended to @out. */
void           hone_tokenizer_token_bytes (const HoneTokenizer *tok, int id, GByteArray *out);

/* Streaming decoder: feed ids one at a time, get only complete UTF-8 text back. */
typedef struct _HoneDecodeStream HoneDecodeStream;
HoneDecodeStream *hone_decode_stream_new (const HoneTokenizer *tok, gboolean skip_special);
/* Returns newly completed text (possibly ""), owned by the caller. */
char          *hone_decode_stream_push (HoneDecodeStream *stream, gint32 id);
/* Flush what is left (incomplete sequences become U+FFFD). */
char          *hone_decode_stream_finish (HoneDecodeStream *stream);
void           hone_decode_stream_free (HoneDecodeStream *stream);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneTokenizer, hone_tokenizer_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (HoneDecodeStream, hone_decode_stream_free)

G_END_DECLS
