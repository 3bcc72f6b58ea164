/* fuzz-tokenizer.c — libFuzzer target: tokenizer.json loading and encoding arbitrary bytes.
 *
 * Input byte 0 picks the mode:
 *   even: the rest is text, encoded (with and without special parsing) by a
 *         byte-level and a SentencePiece-style tokenizer built in, then decoded
 *         in one go and through the streaming decoder (whose output must be valid UTF-8);
 *   odd:  the rest is a tokenizer.json; if it loads, it encodes a few strings
 *         and its own text, and decodes the result.
 */
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hone-tokenizer.h"

static const char byte_level_json[] =
  "{\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{"
  "\"a\":0,\"b\":1,\"c\":2,\"\xc4\xa0\":3,\"1\":4,\"2\":5,\"ab\":6,\"\xc4\xa0" "a\":7,\"abc\":8,\"\xc3\xa4\":9,\"\xc2\xb8\":10,"
  "\"\xc4\x8a\":11,\"<|im_start|>\":12,\"<|im_end|>\":13,\"\xc4\xa0\xc4\xa0\":14},"
  "\"merges\":[\"a b\",\"\xc4\xa0 a\",\"ab c\",\"\xc4\xa0 \xc4\xa0\"]},"
  "\"added_tokens\":[{\"id\":12,\"content\":\"<|im_start|>\",\"special\":true},"
  "{\"id\":13,\"content\":\"<|im_end|>\",\"special\":true,\"lstrip\":true,\"rstrip\":true}],"
  "\"normalizer\":{\"type\":\"NFC\"},"
  "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},"
  "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(?i:'s|'t)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\"},"
  "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}]},"
  "\"decoder\":{\"type\":\"ByteLevel\"}}";

static const char spm_json[] =
  "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"fuse_unk\":true,\"unk_token\":\"<unk>\",\"vocab\":{"
  "\"<unk>\":0,\"<s>\":1,\"</s>\":2,\"<0x00>\":3,\"<0xE4>\":4,\"<0xB8>\":5,\"<0xAD>\":6,\"<0x0A>\":7,"
  "\"\xe2\x96\x81\":8,\"a\":9,\"b\":10,\"\xe2\x96\x81" "a\":11,\"ab\":12,\"\xe2\x96\x81" "ab\":13},"
  "\"merges\":[[\"\xe2\x96\x81\",\"a\"],[\"a\",\"b\"],[\"\xe2\x96\x81" "a\",\"b\"]]},"
  "\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},{\"id\":1,\"content\":\"<s>\",\"special\":true},"
  "{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
  "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
  "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]},"
  "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},"
  "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
  "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],\"tokens\":[\"<s>\"]}}}}";

static HoneTokenizer *toks[2];

static void
exercise (HoneTokenizer *tok, const char *text, gsize len)
{
  int flags;
  for (flags = 0; flags < 4; flags++)
    {
      GArray *ids = g_array_new (FALSE, FALSE, sizeof (gint32));
      gsize out_len, i;
      char *dec;
      HoneDecodeStream *st;
      GString *acc = g_string_new (NULL);
      char *rest;
      if (!hone_tokenizer_encode (tok, text, (gssize) len, (HoneEncodeFlags) flags, ids, NULL))
        abort ();
      for (i = 0; i < ids->len; i++)
        if (g_array_index (ids, gint32, i) < 0 || g_array_index (ids, gint32, i) >= hone_tokenizer_n_vocab (tok))
          abort ();
      dec = hone_tokenizer_decode (tok, (const gint32 *) ids->data, ids->len, flags & 1, &out_len);
      st = hone_decode_stream_new (tok, flags & 1);
      for (i = 0; i < ids->len; i++)
        {
          char *c = hone_decode_stream_push (st, g_array_index (ids, gint32, i));
          if (!g_utf8_validate (c, -1, NULL))
            abort ();
          g_string_append (acc, c);
          g_free (c);
        }
      /* Out-of-range ids are ignored, not trusted. */
      g_free (hone_decode_stream_push (st, -5));
      g_free (hone_decode_stream_push (st, 1 << 30));
      rest = hone_decode_stream_finish (st);
      if (!g_utf8_validate (rest, -1, NULL))
        abort ();
      g_string_append (acc, rest);
      g_free (rest);
      hone_decode_stream_free (st);
      g_string_free (acc, TRUE);
      g_free (dec);
      g_array_unref (ids);
    }
}

int LLVMFuzzerInitialize (int *argc, char ***argv);

/* A GLib critical or warning (a g_return_if_fail tripping, json-glib asserting
 * on a member of the wrong type) is a finding too: make it a crash libFuzzer sees. */
int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (toks[0] == NULL)
    {
      toks[0] = hone_tokenizer_new_from_json (byte_level_json, -1, NULL, 0, NULL);
      toks[1] = hone_tokenizer_new_from_json (spm_json, -1, "{\"add_bos_token\":true,\"bos_token\":\"<s>\"}", -1, NULL);
      if (toks[0] == NULL || toks[1] == NULL)
        abort ();
    }
  if (size == 0)
    return 0;
  if ((data[0] & 1) == 0)
    {
      exercise (toks[0], (const char *) data + 1, size - 1);
      exercise (toks[1], (const char *) data + 1, size - 1);
    }
  else
    {
      GError *error = NULL;
      HoneTokenizer *tok = hone_tokenizer_new_from_json ((const char *) data + 1, (gssize) size - 1, NULL, 0, &error);
      if (tok)
        {
          exercise (tok, "Hello world 123 <|im_start|> \xe4\xb8\xad\xff", 23);
          exercise (tok, (const char *) data + 1, MIN (size - 1, 256));
          hone_tokenizer_free (tok);
        }
      else
        g_error_free (error);
    }
  return 0;
}
