"""A GGUF file with a SentencePiece ("llama") vocabulary, and llama.cpp's tokenization of it: the oracle of
tests/models/gguf_tokenizer_test.cc.

    spm_gguf_oracle.py CONVERTER_DIR OUT_DIR

1. trains a small SentencePiece BPE model (byte fallback, digits split, a user-defined symbol: Llama's settings) on
   the built-in corpus;
2. writes a tiny random Llama folder around it (transformers) and converts it with llama.cpp's own converter,
   vocabulary included (gguf_convert.py --with-vocab), to OUT_DIR/spm.gguf;
3. loads that file in llama.cpp (vocab only) and writes OUT_DIR/spm.json: for each text its ids without and with
   BOS (special tokens parsed), and SentencePiece's own decoding of the first (control tokens dropped).
"""
import json
import os
import subprocess
import sys

CORPUS = """The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with a single step.
In 2024, the model processed 12345 tokens per second; the year before it managed 678.
def tokenize(text): return [ord(c) for c in text]  # a comment, with punctuation!
Les élèves ont étudié la leçon à l'école. Über den Wolken muss die Freiheit wohl grenzenlos sein.
Hello world, hello again, and hello once more: the tokenizer learns frequent pieces like "hello" and "the".
Numbers 0 1 2 3 4 5 6 7 8 9 and 3.14159 or 2.71828 appear too. Newlines
separate lines, and    runs of spaces    stay spaces.
"""
TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    " leading space and  double  spaces ",
    "digits 12345 and 3.14",
    "line one\nline two\n\nthree",
    "unseen characters: 🙂 中文 ß ø",
    "<s>Hello</s> world<s>",
    "user symbol <|sep|> inside<|sep|>",
    "élève über",
    "",
]


def main():
    converter_dir, out = sys.argv[1:3]
    import sentencepiece as spm
    hf = os.path.join(out, "hf")
    os.makedirs(hf, exist_ok=True)
    corpus = os.path.join(out, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        f.write(CORPUS * 3)
    spm.SentencePieceTrainer.train(
        input=corpus, model_prefix=os.path.join(hf, "tokenizer"), model_type="bpe", vocab_size=420,
        byte_fallback=True, split_digits=True, character_coverage=1.0, add_dummy_prefix=True,
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True, normalization_rule_name="identity",
        user_defined_symbols=["<|sep|>"], hard_vocab_limit=False, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(hf, "tokenizer.model"))

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=sp.get_piece_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=128,
                         bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(hf)
    gguf = os.path.join(out, "spm.gguf")
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run([sys.executable, os.path.join(here, "gguf_convert.py"), converter_dir, hf, gguf, "f32",
                    "--with-vocab"], check=True, stdout=subprocess.DEVNULL)

    from llama_cpp import Llama
    llm = Llama(model_path=gguf, vocab_only=True, verbose=False)
    texts = []
    for t in TEXTS:
        ids = llm.tokenize(t.encode("utf-8"), add_bos=False, special=True)
        texts.append({"text": t, "ids": ids, "ids_bos": llm.tokenize(t.encode("utf-8"), add_bos=True, special=True),
                      "decoded": sp.decode(ids)})
    with open(os.path.join(out, "spm.json"), "w") as f:
        json.dump({"gguf": gguf, "texts": texts}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
