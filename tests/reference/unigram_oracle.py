#!/usr/bin/env python3
"""Oracle for ferry's Unigram model and Precompiled normalizer: Hugging Face `tokenizers` itself.

Makes T5-family tokenizer.json files the way real ones were made: trains SentencePiece Unigram models with
`sentencepiece` on a generated multilingual corpus (accents, CJK, digits, punctuation, emoji, compatibility
characters that NFKC rewrites), then converts them with transformers:
  t5             T5Tokenizer from spiece.model (nmt_nfkc Precompiled charsmap, WhitespaceSplit + Metaspace
                 "always", Metaspace decoder, </s> appended by TemplateProcessing, 100 <extra_id_N> tokens)
  byte_fallback  transformers' generic SentencePiece conversion (TokenizersBackend from tokenizer.model) of a
                 byte_fallback model with nmt_nfkc_cf (case folding), user-defined symbols and
                 legacy=False: Precompiled + Replace normalizers, Metaspace "first", Split, ByteFallback decoder
  identity       the same conversion of a model with the identity rule and no dummy prefix (no Precompiled
                 normalizer, no Metaspace), low character coverage so many characters are <unk>
  t5_never       the t5 file edited: Strip + Precompiled + Replace normalizers, Metaspace "never"
  no_unk         the identity file edited: unk_id null, so unknown characters are an encode error
Each file is reloaded from disk with tokenizers.Tokenizer.from_file, so the oracle reads scores exactly as
ferry must (serde_json's float parsing). Then, for a few hundred varied strings (empty, spaces, unknown
characters, emoji, combining sequences, mixed scripts, control characters, invalid UTF-8 stored as hex and
repaired as in tokenizer_oracle.py), it records encode ids (with and without special tokens) and decode
strings (with and without skipping special tokens); encode errors are recorded as {"error": message}.

Usage: unigram_oracle.py --out DIR   (writes DIR/<name>.json tokenizers and DIR/oracle.json)
Exits 77 (the test then skips) when sentencepiece, transformers or protobuf cannot be imported.
"""
import argparse
import io
import json
import os
import random
import sys

try:
    import sentencepiece as spm
    import tokenizers
    from tokenizers import Tokenizer
    import google.protobuf  # noqa: F401  (transformers reads .model files through it)
    from transformers import T5Tokenizer, TokenizersBackend
except ImportError as e:  # pragma: no cover
    print(f"unigram_oracle.py: cannot import {e.name} (run scripts/venv)", file=sys.stderr)
    sys.exit(77)

WORDS = {
    "en": "the quick brown fox jumps over lazy dog while we read books about history science and music "
          "tokenizer models translate sentences into pieces every day people write letters".split(),
    "fr": "le renard brun rapide saute par dessus chien paresseux où est hôtel ça coûte élève façon "
          "naïve cœur été déjà très bientôt".split(),
    "de": "der schnelle braune fuchs springt über den faulen hund straße größe übermaß müller".split(),
    "es": "el rápido zorro marrón salta sobre perro perezoso dónde está biblioteca niño años".split(),
    "ru": "быстрая коричневая лиса прыгает через ленивую собаку съешь же ещё этих мягких булок".split(),
    "el": "η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο καλημέρα κόσμε".split(),
    "zh": "敏捷的 棕色 狐狸 跳过 了 懒狗 我们 今天 去 北京 大学 图书馆 看书 然后 吃饭 中文 分词".split(),
    "ja": "素早い 茶色 の 狐 が 怠け者 犬 を 飛び越えた 東京 で 寿司 食べ ましょう ひらがな カタカナ".split(),
    "ko": "빠른 갈색 여우가 게으른 개를 뛰어넘었다 안녕하세요 만나서 반갑습니다".split(),
    "hi": "तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है नमस्ते दुनिया".split(),
}
SYMBOLS = list("0123456789.,;:!?()[]{}-–—'\"“”‘’«»…%$€£¥@#&*+=/\\|<>~^_")
EMOJI = ["😀", "😃", "👍", "👍🏽", "👨‍👩‍👧", "🇫🇷", "🇯🇵", "❤️", "🚀", "✨", "🎉", "☕", "#️⃣"]
# Characters nmt_nfkc rewrites: fullwidth forms, ligatures, circled and super/subscript digits, roman numerals,
# compatibility spaces, half-width katakana, decomposed accents.
COMPAT = ["Ｈｅｌｌｏ", "ﬁ", "ﬂ", "①", "②", "²", "³", "½", "Ⅻ", "™", "㍻", "ｶﾀｶﾅ", "\u3000", "\u00a0", "e\u0301",
          "A\u030a", "ǅ", "µ", "℃", "Ω", "ﾟ", "…"]


def corpus(rng, lines=700):
    out = []
    for _ in range(lines):
        lang = rng.choice(list(WORDS))
        words = [rng.choice(WORDS[lang]) for _ in range(rng.randint(3, 12))]
        if rng.random() < 0.3:
            words.insert(rng.randrange(len(words) + 1), str(rng.randint(0, 99999)))
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words) + 1), rng.choice(EMOJI))
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words) + 1), rng.choice(COMPAT))
        sep = "" if lang in ("zh", "ja") and rng.random() < 0.5 else " "
        line = sep.join(words)
        if rng.random() < 0.5:
            line = line[0].upper() + line[1:]
        out.append(line + rng.choice([".", "!", "?", ",", ":", ""]))
    return out


def train(lines, **options):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
                                   hard_vocab_limit=False, num_threads=1, minloglevel=2, **options)
    return model.getvalue()


def convert_t5(model_bytes, folder):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "spiece.model"), "wb") as f:
        f.write(model_bytes)
    T5Tokenizer.from_pretrained(folder).save_pretrained(folder)
    return os.path.join(folder, "tokenizer.json")


def convert_generic(model_bytes, folder, legacy):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "tokenizer.model")
    with open(path, "wb") as f:
        f.write(model_bytes)
    TokenizersBackend.from_pretrained(folder, vocab_file=path, legacy=legacy).save_pretrained(folder)
    return os.path.join(folder, "tokenizer.json")


def make_t5_never(t5_path, out_path):
    data = json.load(open(t5_path, encoding="utf-8"))
    precompiled = data["normalizer"]
    assert precompiled["type"] == "Precompiled", precompiled
    data["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True}, precompiled,
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    for part in (data["pre_tokenizer"]["pretokenizers"][1], data["decoder"]):
        assert part["type"] == "Metaspace", part
        part["prepend_scheme"] = "never"
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    return out_path


def make_no_unk(path, out_path):
    """The identity file without an unk_id: HF then fails on every character no piece covers."""
    data = json.load(open(path, encoding="utf-8"))
    data["model"]["unk_id"] = None
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    return out_path


def test_strings(rng, lines):
    fixed = [
        "", " ", "  ", "   leading", "trailing   ", "a  b   c", "\t", "\n", "\r\n", "a\r\nb", "tab\tseparated\tvalues",
        "Hello world", "hello World!", "HELLO", "The year 2024 had 366 days.", "3.14159 2,718 1e-9 0x1F",
        "</s>", "<unk>", "<pad>", "a</s>b", "<extra_id_0>", "x <extra_id_99> y", "<extra_id_0><extra_id_1>",
        "<sep>", "a<sep>b", "@@x", "▁", "▁▁a", "a▁b", " ▁ ", "\u2581hello",
        "e\u0301", "Ａ\u0301", "ﬁ\u0301", "a\u0301\u0302", "\u0301", "\u0301a", "n\u0303o", "\u00e9", "Å",
        "Ｈｅｌｌｏ　Ｗｏｒｌｄ", "①②③", "x²+y³", "½ cup", "™®©", "ﬁnance ﬂow", "㍻", "ｶﾀｶﾅ", "ﾊﾟ", "µ℃Ω",
        "\u00a0nbsp\u00a0", "\u3000ideographic\u3000space", "\u200b", "a\u200db", "\u200c", "\ufeffbom",
        "😀", "👍🏽", "👨‍👩‍👧", "🇫🇷🇯🇵", "🇫", "❤️", "#️⃣", "#\u20e3", "☕\ufe0f", "🦄🦄", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟏𝟐𝟑",
        "ᏣᎳᎩ", "ꦧꦱꦗꦮ", "𓀀𓀁", "ⴰⵣⵓⵍ", "ሰላም", "ᠮᠣᠩᠭᠣᠯ", "ئۇيغۇر", "ภาษาไทย", "ພາສາລາວ", "ភាសាខ្មែរ",
        "가각갂", "\u1100\u1161", "\u1100\u1161\u11a8", "क्ष", "कि", "नमस्ते", "مرحبا", "שלום", "Ελληνικά",
        "\x00", "a\x00b", "\x01\x02\x1f\x7f", "\x1e", "\u0085", "\u2028", "\ufffd", "\ue000", "\U0010ffff",
        "𠀀𠀁", "龘", "〇", "々", "ー", "・", "「」", "（）", "！？", "，。", "…", "——", "~~~", "!!!", "???",
        "a" * 300, "ab" * 150, "🚀" * 50, "é" * 80, " ".join(["word"] * 100), "x" + " " * 50 + "y",
        "mixed English, français, 中文, 日本語, 한국어, русский, العربية 😀 123",
    ]
    out = [s.encode("utf-8") for s in fixed]
    out += [b"\xff", b"a\xc3", b"\xe2\x82", b"ok\x80ok", b"\xf0\x9f\x98", b"\xed\xa0\x80x"]  # invalid UTF-8
    out += [l.encode("utf-8") for l in rng.sample(lines, 120)]
    pool = [c for w in WORDS.values() for c in "".join(w)] + SYMBOLS + EMOJI + COMPAT + [" ", " ", " ", "  ", "\n"]
    for _ in range(120):  # character soup
        out.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 30))).encode("utf-8"))
    for _ in range(40):  # random code points from the BMP and beyond (no surrogates)
        cps = [rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff), rng.randint(0x3000, 0xd7ff),
                           rng.randint(0xe000, 0xfffd), rng.randint(0x10000, 0x1faff)]) for _ in range(rng.randint(1, 12))]
        out.append("".join(map(chr, cps)).encode("utf-8"))
    return out


def record(tok, raw):
    text = raw.decode("utf-8", "replace")
    case = {}
    try:
        case["ids"] = tok.encode(text).ids
        case["ids_plain"] = tok.encode(text, add_special_tokens=False).ids
    except Exception as e:  # noqa: BLE001  (HF raises on characters no piece covers without an unk_id)
        return {"error": str(e)}
    case["decoded"] = tok.decode(case["ids"], skip_special_tokens=False)
    case["decoded_skip"] = tok.decode(case["ids"], skip_special_tokens=True)
    return case


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = random.Random(18)
    lines = corpus(rng)
    work = os.path.join(args.out, "work")

    t5_model = train(lines, vocab_size=800, normalization_rule_name="nmt_nfkc", character_coverage=0.9995,
                     pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    fallback_model = train(lines, vocab_size=700, normalization_rule_name="nmt_nfkc_cf", character_coverage=0.98,
                           byte_fallback=True, user_defined_symbols=["<sep>", "@@"], unk_id=0, bos_id=1, eos_id=2)
    identity_model = train(lines, vocab_size=600, normalization_rule_name="identity", character_coverage=0.98,
                           add_dummy_prefix=False, remove_extra_whitespaces=False, unk_id=0, bos_id=1, eos_id=2)
    sources = {
        "t5": convert_t5(t5_model, os.path.join(work, "t5")),
        "byte_fallback": convert_generic(fallback_model, os.path.join(work, "byte_fallback"), legacy=False),
        "identity": convert_generic(identity_model, os.path.join(work, "identity"), legacy=True),
    }
    sources["t5_never"] = make_t5_never(sources["t5"], os.path.join(work, "t5_never.json"))
    sources["no_unk"] = make_no_unk(sources["identity"], os.path.join(work, "no_unk.json"))

    inputs = test_strings(rng, lines)
    oracle = {"tokenizers_version": tokenizers.__version__, "inputs": [s.hex() for s in inputs], "tokenizers": []}
    for name, source in sources.items():
        file = name + ".json"
        with open(source, "rb") as src, open(os.path.join(args.out, file), "wb") as dst:
            dst.write(src.read())
        tok = Tokenizer.from_file(os.path.join(args.out, file))  # as ferry reads it: scores through serde_json
        model = json.loads(tok.to_str())["model"]
        assert model["type"] == "Unigram", (name, model["type"])
        oracle["tokenizers"].append({"name": name, "file": file, "byte_fallback": model["byte_fallback"],
                                     "vocab_size": tok.get_vocab_size(),
                                     "cases": [record(tok, raw) for raw in inputs]})
    with open(os.path.join(args.out, "oracle.json"), "w", encoding="utf-8") as f:
        json.dump(oracle, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
