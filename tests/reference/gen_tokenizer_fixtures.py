#!/usr/bin/env python3
"""Generates tests/data/tokenizer/*: the corpus and the expected token ids.

References (versions pinned in requirements.txt):
  * HF tokenizers — the tokenizer.json path (ids for every vocabulary);
  * llama.cpp through llama-cpp-python — the GGUF path (vocab_only load).

Vocabularies:
  smollm2   the default model's GGUF (gpt2 + pre "smollm"); for HF a
            tokenizer.json is built from its tokens/merges with the same
            pre-tokenizer as SmolLM2's own (Digits individual + ByteLevel).
            Expected ids only; the GGUF is not committed (model suite).
  spm       a small Llama-2-style BPE with byte_fallback trained here
            (tokenizer.json + tokenizer_config.json, and a GGUF "llama" with scores);
            spm-metaspace is the same vocabulary with a Metaspace pre-tokenizer.
  qwen2     a small byte-level BPE with Qwen2's Split regex + NFC.
  llama3    a small byte-level BPE with Llama-3's Split regex, ignore_merges, BOS template.
  The byte-level ones are also written as GGUF (pre "qwen2" / "llama-bpe") for llama.cpp.

Malformed UTF-8: the tokenizer replaces each byte that does not start a
well-formed sequence by U+FFFD (llama.cpp's rule); HF gets that replaced
string (tokenizer_corpus.replace_invalid), llama.cpp the raw bytes.

Usage: python3 tests/reference/gen_tokenizer_fixtures.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import base64
import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers, Regex

sys.path.insert(0, os.path.dirname(__file__))
import tokenizer_corpus  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "tokenizer")
DEFAULT_GGUF = os.path.expanduser(os.environ.get(
    "HONE_DEFAULT_MODEL", "~/.cache/hone/models/SmolLM2-135M-Instruct.Q4_1.gguf"))

QWEN2_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
LLAMA3_RE = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"


def dump(obj, name):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


# ---------------------------------------------------------------- HF encoding

def hf_expected(tok, texts, n_add_special=60):
    ids, ids_special, ids_add = [], {}, {}
    for i, t in enumerate(texts):
        tok.encode_special_tokens = True
        a = tok.encode(t, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        b = tok.encode(t, add_special_tokens=False).ids
        ids.append(a)
        if b != a:
            ids_special[str(i)] = b
        if i < n_add_special:
            ids_add[str(i)] = tok.encode(t, add_special_tokens=True).ids
    tok.encode_special_tokens = False
    # Decode references (HF decode of the parsed-special ids, with and without specials).
    decoded = {}
    for i in range(0, len(texts), 7):
        b = ids_special.get(str(i), ids[i])
        decoded[str(i)] = [tok.decode(b, skip_special_tokens=False), tok.decode(b, skip_special_tokens=True)]
    return {"ids": ids, "ids_special": ids_special, "ids_add_special": ids_add, "decoded": decoded}


def llama_expected(gguf_path, raw, hf):
    """llama.cpp ids on the raw bytes; stored only where they differ from HF's."""
    from llama_cpp import Llama
    m = Llama(model_path=gguf_path, vocab_only=True, verbose=False)
    diff, diff_special, mismatches = {}, {}, []
    for i, b in enumerate(raw):
        a = m.tokenize(b, add_bos=False, special=False)
        s = m.tokenize(b, add_bos=False, special=True)
        if a != hf["ids"][i]:
            diff[str(i)] = a
            mismatches.append(i)
        if s != hf["ids_special"].get(str(i), hf["ids"][i]):
            diff_special[str(i)] = s
            if i not in mismatches:
                mismatches.append(i)
    add = {}
    for i in range(0, 60):
        add[str(i)] = m.tokenize(raw[i], add_bos=True, special=False)
    return {"ids": diff, "ids_special": diff_special, "ids_add_special": add,
            "hf_disagreements": len(mismatches), "hf_disagreement_examples":
            [base64.b64encode(raw[i]).decode() for i in mismatches[:20]]}


# ---------------------------------------------------------------- vocabularies

def smollm_from_gguf(path):
    from gguf import GGUFReader
    r = GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = strings("tokenizer.ggml.merges")
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])
    return tok


def train_corpus():
    texts = [tokenizer_corpus.replace_invalid(b) for b in tokenizer_corpus.corpus()]
    return [t for t in texts if "<" not in t] * 3 + tokenizer_corpus.PROSE * 20 + tokenizer_corpus.CODE * 10


def train_spm():
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    # Training splits words at ▁ (as sentencepiece does); the saved tokenizer has no pre-tokenizer.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens,
                                  limit_alphabet=200, show_progress=False)
    tok.train_from_iterator(train_corpus(), trainer)
    tok.pre_tokenizer = None
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    j = json.loads(tok.to_str())
    # Byte tokens are plain vocabulary entries in Llama-2's tokenizer.json.
    j["added_tokens"] = [a for a in j["added_tokens"] if a["content"] in ("<unk>", "<s>", "</s>")]
    return Tokenizer.from_str(json.dumps(j))


def train_bytelevel(regex, specials, ignore_merges, nfc, template):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=2500, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_corpus(), trainer)
    tok.decoder = decoders.ByteLevel()
    if template:
        # A user-defined (non-special) added token that strips whitespace on both
        # sides: always split out, even without special parsing.
        tok.add_tokens([tokenizers.AddedToken("<mask>", lstrip=True, rstrip=True, special=False,
                                              normalized=False)])
        tok.post_processor = processors.TemplateProcessing(
            single=f"{template} $A", pair=f"{template} $A {template} $B",
            special_tokens=[(template, tok.token_to_id(template))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def write_gguf(tok, path, model, pre=None, add_bos=False, scores=None):
    import gguf
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    n = max(vocab.values()) + 1
    for a in j["added_tokens"]:
        n = max(n, a["id"] + 1)
    tokens = [""] * n
    for t, i in vocab.items():
        tokens[i] = t
    special = {a["id"] for a in j["added_tokens"] if a["special"]}
    for a in j["added_tokens"]:
        tokens[a["id"]] = a["content"]
    types = []
    for i, t in enumerate(tokens):
        if i in special:
            types.append(2 if t == "<unk>" else 3)
        elif any(a["id"] == i for a in j["added_tokens"]):
            types.append(4)   # USER_DEFINED
        elif model == "llama" and len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
            types.append(6)
        else:
            types.append(1)
    w = gguf.GGUFWriter(path, "llama")
    w.add_block_count(1)
    w.add_context_length(256)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model(model)
    if pre:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if model == "llama":
        w.add_token_scores(scores)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        w.add_add_space_prefix(True)
    else:
        merges = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
        w.add_token_merges(merges)
        bos = tok.token_to_id("<|begin_of_text|>")
        if bos is not None:
            w.add_bos_token_id(bos)
        eos = tok.token_to_id("<|end_of_text|>") or tok.token_to_id("<|endoftext|>")
        if eos is not None:
            w.add_eos_token_id(eos)
    w.add_add_bos_token(add_bos)
    w.add_add_eos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def main():
    import llama_cpp
    os.makedirs(OUT, exist_ok=True)
    raw = tokenizer_corpus.corpus()
    texts = [tokenizer_corpus.replace_invalid(b) for b in raw]
    meta = {"tokenizers": tokenizers.__version__, "llama_cpp_python": llama_cpp.__version__,
            "seed": tokenizer_corpus.SEED}
    dump({"meta": meta, "strings_b64": [base64.b64encode(b).decode() for b in raw]}, "corpus.json")

    # Trained vocabularies (unit suite).
    spm = train_spm()
    d = os.path.join(OUT, "spm")
    os.makedirs(d, exist_ok=True)
    spm.save(os.path.join(d, "tokenizer.json"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                   "add_bos_token": True, "add_eos_token": False}, f, indent=1)
    vocab = spm.get_vocab()
    scores = [0.0] * len(vocab)
    for t, i in vocab.items():
        # Later merges score lower; llama.cpp's SPM merges the best-scoring token first.
        scores[i] = 0.0 if i < 259 else -float(i)
    spm_gguf = os.path.join(d, "spm.gguf")
    write_gguf(spm, spm_gguf, "llama", add_bos=True, scores=scores)
    exp = hf_expected(spm, texts)
    exp["llama_cpp"] = llama_expected(spm_gguf, raw, exp)
    exp["meta"] = meta
    dump(exp, "spm-expected.json")
    print("spm: HF vs llama.cpp disagreements:", exp["llama_cpp"]["hf_disagreements"])

    # The same vocabulary with the newer Metaspace pre-tokenizer (prepend_scheme
    # "first": no ▁ after a special token) instead of the Prepend/Replace normalizer.
    j = json.loads(spm.to_str())
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    meta_tok = Tokenizer.from_str(json.dumps(j))
    d = os.path.join(OUT, "spm-metaspace")
    os.makedirs(d, exist_ok=True)
    meta_tok.save(os.path.join(d, "tokenizer.json"))
    exp = hf_expected(meta_tok, texts)
    exp["meta"] = meta
    dump(exp, "spm-metaspace-expected.json")

    for name, regex, specials, ignore, nfc, template, pre in [
        ("qwen2", QWEN2_RE, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], False, True, None, "qwen2"),
        ("llama3", LLAMA3_RE, ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                               "<|end_header_id|>", "<|eot_id|>"], True, False, "<|begin_of_text|>", "llama-bpe"),
    ]:
        tok = train_bytelevel(regex, specials, ignore, nfc, template)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        g = os.path.join(d, name + ".gguf")
        write_gguf(tok, g, "gpt2", pre=pre, add_bos=template is not None)
        exp = hf_expected(tok, texts)
        exp["llama_cpp"] = llama_expected(g, raw, exp)
        exp["meta"] = meta
        dump(exp, f"{name}-expected.json")
        print(f"{name}: HF vs llama.cpp disagreements:", exp["llama_cpp"]["hf_disagreements"])

    # The default model (model suite).
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_GGUF
    tok = smollm_from_gguf(path)
    exp = hf_expected(tok, texts)
    exp["llama_cpp"] = llama_expected(path, raw, exp)
    exp["meta"] = dict(meta, gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53")
    dump(exp, "smollm2-expected.json")
    print("smollm2: HF vs llama.cpp disagreements:", exp["llama_cpp"]["hf_disagreements"])


if __name__ == "__main__":
    main()
