"""Converts a Hugging Face model folder to GGUF with llama.cpp's own converter (convert_hf_to_gguf.py and its
gguf-py, which scripts/venv takes from the pinned llama-cpp-python sources into .venv/src/llama.cpp): the oracle
for ferry's GGUF loading (tests/models/gguf_model_test.cc).

    gguf_convert.py CONVERTER_DIR HF_FOLDER OUT.gguf OUTTYPE [--vocab-none | --with-vocab]
    OUTTYPE: f32, f16, bf16, q8_0

--vocab-none records tokenizer.ggml.model = "none" (llama.cpp's vocabulary-less models), so llama.cpp itself can
load the file and run it on token ids (scripts/bench-gguf); --with-vocab runs the converter's own vocabulary step
(a folder with a SentencePiece tokenizer.model: tests/reference/spm_gguf_oracle.py); by default the tokenizer keys
are absent.

Two things are stood in for, neither of which touches the weights or the model's hyperparameters:
  - mistral_common (imported by the converter for Mistral's own tokenizers only) is replaced by empty modules
    while the converter is imported;
  - the vocabulary step is skipped (the test folders have random weights and no tokenizer; ferry's GGUF
    tokenizer is tested on its own).
"""
import sys
import types


MISTRAL = ["mistral_common", "mistral_common.tokens", "mistral_common.tokens.tokenizers",
             "mistral_common.tokens.tokenizers.base", "mistral_common.tokens.tokenizers.multimodal",
             "mistral_common.tokens.tokenizers.tekken", "mistral_common.tokens.tokenizers.sentencepiece",
             "mistral_common.tokens.tokenizers.mistral", "mistral_common.tokens.tokenizers.utils"]


def stub_mistral_common():
    for n in MISTRAL:
        sys.modules.setdefault(n, types.ModuleType(n))
    t = "mistral_common.tokens.tokenizers."
    sys.modules[t + "base"].TokenizerVersion = type("TokenizerVersion", (), {})
    sys.modules[t + "multimodal"].DATASET_MEAN = sys.modules[t + "multimodal"].DATASET_STD = None
    sys.modules[t + "tekken"].Tekkenizer = type("Tekkenizer", (), {})
    sys.modules[t + "sentencepiece"].SentencePieceTokenizer = type("SentencePieceTokenizer", (), {})


def main():
    converter_dir, folder, out, outtype = sys.argv[1:5]
    vocab_none = "--vocab-none" in sys.argv[5:]
    import transformers  # noqa: F401  (first: it records that mistral_common is absent before the stubs exist)
    stub_mistral_common()
    sys.path.insert(0, converter_dir)
    import convert_hf_to_gguf as c
    for n in MISTRAL:  # only the converter's import needed them; transformers must see the package as absent
        sys.modules.pop(n, None)
    def no_vocab(self):  # the weights are under test, not the vocabulary
        if vocab_none:
            self.gguf_writer.add_tokenizer_model("none")
            # llama.cpp then takes the vocabulary's size from {arch}.vocab_size, which only some of the converter's
            # models write themselves (LlamaModel does; Qwen2Model and Qwen3Model do not).
            if "vocab_size" in self.hparams and not isinstance(self, c.LlamaModel):
                self.gguf_writer.add_vocab_size(self.hparams["vocab_size"])
    if "--with-vocab" not in sys.argv[5:]:
        for cls in (c.TextModel, c.LlamaModel, c.Qwen2Model):
            cls.set_vocab = no_vocab
    sys.argv = ["convert_hf_to_gguf.py", folder, "--outfile", out, "--outtype", outtype]
    c.main()


if __name__ == "__main__":
    main()
