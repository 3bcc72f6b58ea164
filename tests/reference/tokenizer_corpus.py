"""Deterministic tokenizer test corpus (bytes), built from the snippets below.

corpus() returns a list of byte strings: the snippets themselves, then seeded
random recombinations (mixing scripts, whitespace, digits, special-token text
and malformed UTF-8) until there are at least N_STRINGS.
"""
import random

N_STRINGS = 2400
SEED = 20261129

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Call me Ishmael. Some years ago—never mind how long precisely—having little or no money in my purse,",
    "I can't believe it's already 5 o'clock! We'll be late, won't we? They're waiting; you've seen them.",
    "She said: \"Don't touch that.\" He'd already done it. I'm sure he'll regret it.",
    "THE END. The End. the end... ¿Qué? ¡Olé! Naïve café, résumé, coöperate, façade.",
    "Mr. Smith's dog's bone — it's the dogs' bones now; isn't it? 'Tis the season.",
    "In 1969, 600 million people watched Apollo 11 land; 3.14159 is pi, 2.71828 is e, 1,000,000 is a million.",
    "Email me at someone@example.com or visit https://example.org/path?q=1&r=2#frag.",
    "Über straße, Ärger, Öl; Ελληνικά κείμενα; русский текст с цифрами 123; עברית; العربية ١٢٣٤.",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt.",
    "Tabs\tand\ttabs\t\tdouble, and  two spaces,   three spaces,    four.",
    "Line one\nLine two\n\nLine four\n\n\nLine seven\r\nWindows line\r\n\r\nend",
    "   leading spaces and trailing spaces   ",
    "\n\n\nstarts with newlines",
    "ends with newlines\n\n",
    "A sentence with 'single quotes' and \"double quotes\" and `backticks`.",
    "He paid $1,234.56 for 7 items at 12:45pm on 2024-03-15 (that's 99.9% off!).",
    "Roman numerals Ⅻ and Ⅳ, superscripts x² y³, fractions ½ ¼ ¾, circled ① ② ③.",
    "Full-width ＡＢＣ １２３ and ligatures ﬁ ﬂ; combining e\u0301 vs é; Å vs A\u030a.",
]

CODE = [
    "#include <stdio.h>\n\nint main(void)\n{\n    printf(\"Hello, world!\\n\");\n    return 0;\n}\n",
    "static int add(int a, int b) { return a + b; } // sum\n/* block comment */\n",
    "for (size_t i = 0; i < n; i++) {\n\tif (x[i] != 0 && y[i] >= 0x7f) buf[i] = x[i] << 2;\n}\n",
    "def fib(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
    "class Foo(Bar):\n    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n        self.x = {'a': 1, \"b\": [2, 3]}\n",
    "import numpy as np\nx = np.arange(10) ** 2  # squares\nprint(f\"{x.sum():.3f}\")\n",
    "{\"name\": \"hone\", \"version\": \"0.1.0\", \"tags\": [\"llm\", \"gtk\"], \"n\": 42, \"pi\": 3.14, \"ok\": true, \"none\": null}",
    "[\n  {\n    \"id\": 1,\n    \"text\": \"line\\nbreak\"\n  },\n  {\"id\": 2}\n]\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<html><body><p class=\"x\">Hello &amp; goodbye</p></body></html>",
    "$ ls -la /usr/share | grep -v '^d' > out.txt 2>&1 && echo \"done\"",
    "x+=1;y-=2;z*=3;w/=4;a%=5;b&=6;c|=7;d^=8;e<<=9;f>>=10;g=h?i:j;k->l;m::n;",
    "    indented four\n        indented eight\n\t\ttabbed twice\n",
    "fn main() { let v: Vec<u32> = (0..10).map(|x| x * 2).collect(); println!(\"{:?}\", v); }",
]

CJK = [
    "今天天气很好，我们去公园散步吧。",
    "机器学习是人工智能的一个分支，它使计算机能够从数据中学习。",
    "中华人民共和国成立于1949年10月1日。",
    "我有3个苹果和12个橘子，一共15个水果。",
    "日本語のテキストです。ひらがな、カタカナ、漢字が混ざっています。",
    "東京は日本の首都です。人口は約1400万人です。",
    "トークナイザーのテストを行います！「かぎかっこ」と『二重かぎ』。",
    "한국어 문장도 있습니다. 안녕하세요!",
    "混合 mixed 文本 text 日本語 English 123 四五六",
    "全角スペース　を含む　文章",
]

EMOJI = [
    "I love it 😀😃😄! 👍🏽 👍🏿 👋🏻",
    "Family: 👨‍👩‍👧‍👦 couple: 👩‍❤️‍👨 flag: 🇯🇵 🇺🇸 🏳️‍🌈",
    "Tech 🧑🏾‍💻 and 👩🏼‍🔬 and 🤷‍♂️ shrug",
    "Keycaps 1️⃣ 2️⃣ #️⃣ and hearts ❤️ 💔 ♥",
    "🔥🔥🔥 fire emoji run 🚀🚀 rockets",
    "Symbols ™ © ® ° ± × ÷ ≠ ≤ ≥ ∞ √ ∑ ∫ → ← ↔ ⇒ • … ‰ € £ ¥ ₹",
]

WHITESPACE = [
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r\n\r\n", " \n ", "\t \t",
    "a  b", "a\tb", "a\t\tb", "a \n b", "a\n\n\nb", "a\r\nb", "  a", "a  ", "\u00a0nbsp\u00a0", "\u3000ideo\u3000",
    "x\u2003em\u2009thin\u200bzero-width", "\u2028line sep\u2029para sep", "\x0bvtab\x0cff",
]

DIGITS = [
    "0", "7", "42", "123", "1234", "12345", "123456789", "3.14159265358979", "1,234,567",
    "2024-11-29", "007", "10^6", "1e-9", "0xDEADBEEF", "v1.2.3", "123abc456", "٣٤٥", "１２３", "²³",
]

CONTRACTIONS = [
    "it's", "they're", "we'll", "I've", "I'm", "he'd", "don't", "IT'S", "THEY'RE", "We'LL",
    "'s", "'re", "'ll", "'ve", "'m", "'d", "'t", "rock 'n' roll", "o'clock", "'tis", "y'all'd've",
]

SPECIAL_TEXT = [
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "text<|endoftext|>more text",
    "<|im_start|>system\nYou are helpful.<|im_end|>",
    "<|im_end|><|im_end|>",
    "<|im_start|> spaced <|im_end|>",
    "<s>[INST] Hi [/INST] Hello</s>",
    "<s>",
    "</s>",
    "<unk>",
    "a<s>b</s>c",
    "<|im_start|",
    "<|im_start|>",
    "<repo_name>hone<file_sep>main.c<filename>x.py",
    "<|endoftext|><|endoftext|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|im_start|>assistant\n<think>\n\n</think>\n\nOK<|im_end|>",
    "fill the <mask> here",
    "a\t \n<mask>\n \u3000b",
    "<mask><mask>  <mask>",
    "x <|eot_id|> y",
]

# Malformed UTF-8: truncated sequences, stray continuation bytes, invalid
# lead bytes. (Overlong forms and encoded surrogates are left out: llama.cpp
# decodes them leniently, HF cannot take them; see the generator.)
MALFORMED = [
    b"\xff", b"\xfe\xff", b"abc\x80def", b"\xc3", b"\xc3(", b"x\xe4\xb8", b"\xe4\xb8 x",
    b"\xf0\x9f\x98", b"\xf0\x9f\x98 ok", b"\x80\x81\x82", b"caf\xe9", b"na\xefve",
    b"\xe2\x82", b"ok\xf8\x88\x80\x80\x80ok", b"\xc0", b"\xf5\xf6\xf7", b"mid\xbfdle",
    b"\xe4\xb8\xad\xe6\x96", b"\xed", b"\xf4", b"end\xe2",
]

SNIPPETS = PROSE + CODE + CJK + EMOJI + WHITESPACE + DIGITS + CONTRACTIONS + SPECIAL_TEXT


def _words(rng, pool):
    s = rng.choice(pool)
    if len(s) > 12 and rng.random() < 0.6:
        a = rng.randrange(len(s))
        b = rng.randrange(a, min(len(s), a + rng.randrange(1, 40)) + 1)
        s = s[a:b]
    return s


def corpus():
    rng = random.Random(SEED)
    out = [s.encode("utf-8") for s in SNIPPETS] + list(MALFORMED)
    seps = ["", " ", "  ", "\n", "\n\n", "\t", "\r\n", " \n", "   ", "\n\n\n"]
    pools = [PROSE, CODE, CJK, EMOJI, WHITESPACE, DIGITS, CONTRACTIONS, SPECIAL_TEXT]
    while len(out) < N_STRINGS:
        n = rng.randrange(1, 6)
        parts = []
        for _ in range(n):
            pool = rng.choice(pools)
            parts.append(_words(rng, pool))
            parts.append(rng.choice(seps))
        s = "".join(parts)
        if rng.random() < 0.15:
            s = s.upper()
        if rng.random() < 0.1:
            s = "".join(str(rng.randrange(10)) for _ in range(rng.randrange(1, 30))) + s
        b = s.encode("utf-8")
        if rng.random() < 0.08:
            m = rng.choice(MALFORMED)
            p = rng.randrange(len(b) + 1)
            c = b[:p] + m + b[p:]
            # Keep it only where llama.cpp's lenient decoder and strict UTF-8 agree.
            if lenient_decode(c) == [ord(ch) for ch in replace_invalid(c)]:
                b = c
        out.append(b)
    # Deduplicate, keeping order.
    seen = set()
    uniq = []
    for b in out:
        if b not in seen:
            seen.add(b)
            uniq.append(b)
    return uniq


def lenient_decode(b: bytes):
    """llama.cpp's unicode_cpts_from_utf8: accepts overlong forms and surrogates;
    each byte it cannot decode becomes U+FFFD."""
    out, i = [], 0
    while i < len(b):
        c = b[i]
        n = 1 if c < 0x80 else 0 if c < 0xC0 else 2 if c < 0xE0 else 3 if c < 0xF0 else 4 if c < 0xF8 else 0
        if n == 0 or i + n > len(b) or any((b[i + k] & 0xC0) != 0x80 for k in range(1, n)):
            out.append(0xFFFD)
            i += 1
            continue
        cp = c & (0x7F if n == 1 else 0x1F if n == 2 else 0x0F if n == 3 else 0x07)
        for k in range(1, n):
            cp = (cp << 6) | (b[i + k] & 0x3F)
        out.append(cp)
        i += n
    return out


def replace_invalid(b: bytes) -> str:
    """The tokenizer's malformed-input rule: each byte that does not start a
    well-formed UTF-8 sequence becomes U+FFFD (one per byte, as llama.cpp and
    g_utf8_make_valid do; Python's 'replace' would merge maximal subparts)."""
    out = []
    i = 0
    while i < len(b):
        try:
            out.append(b[i:].decode("utf-8"))
            break
        except UnicodeDecodeError as e:
            out.append(b[i:i + e.start].decode("utf-8"))
            out.append("\ufffd")
            i += e.start + 1
    return "".join(out)


if __name__ == "__main__":
    c = corpus()
    print(len(c), "strings,", sum(len(x) for x in c), "bytes")
