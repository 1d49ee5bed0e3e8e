"""Converts a Hugging Face model folder to GGUF with llama.cpp's own converter (convert_hf_to_gguf.py and its
gguf-py, which scripts/venv takes from the pinned llama-cpp-python sources into .venv/src/llama.cpp): the oracle
for ferry's GGUF loading (tests/models/gguf_model_test.cc).

    gguf_convert.py CONVERTER_DIR HF_FOLDER OUT.gguf OUTTYPE [--vocab-none | --with-vocab]
    OUTTYPE: f32, f16, bf16, q8_0

--vocab-none records tokenizer.ggml.model = "none" (llama.cpp's vocabulary-less models), so llama.cpp itself can
load the file and run it on token ids (scripts/bench-gguf); --with-vocab runs the converter's own vocabulary step
(a folder with a SentencePiece tokenizer.model: tests/reference/spm_gguf_oracle.py); by default the tokenizer keys
are absent.

Nine things are stood in for, none of which touches the weights or changes the model's hyperparameters:
  - mistral_common (imported by the converter for Mistral's own tokenizers only) is replaced by empty modules
    while the converter is imported;
  - the vocabulary step is skipped (the test folders have random weights and no tokenizer; ferry's GGUF
    tokenizer is tested on its own);
  - the pinned gguf-py lists "model.layers.{bid}.block_sparse_moe.gate" under both FFN_GATE_INP (Mixtral's router)
    and FFN_GATE (for smallthinker), and the later one wins, so this converter names Mixtral's router
    blk.N.ffn_gate, which llama.cpp itself then refuses to load; the FFN_GATE entry is dropped, so the router is
    blk.N.ffn_gate_inp as in every Mixtral GGUF on the Hub;
  - transformers 5 nests rope_theta in config.to_dict()'s rope_parameters, where this converter does not look (it
    reads hparams["rope_theta"]), so it would write no rope.freq_base and llama.cpp would use its 10000 instead of
    the folder's theta; the theta is copied back to the top level, as config.json holds it;
  - for the same reason the converter finds no rope_scaling (Llama 3's "llama3" scaling, which it turns into the
    rope_freqs tensor; Phi-3's LongRoPE factors): a rope_parameters dict of a type other than "default" is copied
    back to rope_scaling, the key Hub checkpoints' config.json files hold it under;
  - and transformers 5's GPTNeoXConfig keeps rotary_pct only as rope_parameters' partial_rotary_factor, where
    this converter does not look (it reads hparams["rotary_pct"] and fails without it): it is copied back;
  - Gemma 3's rope_parameters are nested per layer type; the global layers' dict (full_attention, the one this
    converter writes as rope.freq_base and rope.scaling) is the one copied back as above;
  - without a vocabulary, Gemma 3's converter would still build one to trim token_embd to it (it needs
    tokenizer.model): the trim keeps all vocab_size rows instead;
  - transformers 5's Qwen3MoeConfig calls num_experts num_local_experts, which this converter's Qwen MoE models do not
    read (they read hparams["num_experts"]; the base writes expert_count from num_local_experts, once): the count is
    moved back to num_experts.
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
    import gguf
    gate = gguf.MODEL_TENSOR.FFN_GATE
    gguf.TensorNameMap.block_mappings_cfg[gate] = tuple(
        k for k in gguf.TensorNameMap.block_mappings_cfg[gate] if k != "model.layers.{bid}.block_sparse_moe.gate")
    for n in MISTRAL:  # only the converter's import needed them; transformers must see the package as absent
        sys.modules.pop(n, None)
    load_hparams = c.ModelBase.load_hparams

    def load_hparams_with_rope_theta(dir_model, *args, **kwargs):
        config = load_hparams(dir_model, *args, **kwargs)
        rope = config.get("rope_parameters") or {}
        rope = rope.get("full_attention") or rope  # Gemma 3: per layer type; the converter reads the global one
        if "rope_theta" not in config and "rope_theta" in rope:
            config["rope_theta"] = rope["rope_theta"]
        if not config.get("rope_scaling") and rope.get("rope_type", "default") != "default":
            config["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
        if config.get("model_type") == "gpt_neox" and "rotary_pct" not in config \
                and "partial_rotary_factor" in rope:
            config["rotary_pct"] = rope["partial_rotary_factor"]
        if config.get("model_type") in ("qwen2_moe", "qwen3_moe") and "num_experts" not in config \
                and "num_local_experts" in config:
            config["num_experts"] = config.pop("num_local_experts")
        return config
    c.ModelBase.load_hparams = staticmethod(load_hparams_with_rope_theta)

    def no_vocab(self):  # the weights are under test, not the vocabulary
        if vocab_none:
            self.gguf_writer.add_tokenizer_model("none")
            # llama.cpp then takes the vocabulary's size from {arch}.vocab_size, which only some of the converter's
            # models write themselves (LlamaModel does; Qwen2Model and Qwen3Model do not).
            if "vocab_size" in self.hparams and not isinstance(self, c.LlamaModel):
                self.gguf_writer.add_vocab_size(self.hparams["vocab_size"])
    if "--with-vocab" not in sys.argv[5:]:
        for cls in (c.TextModel, c.LlamaModel, c.Qwen2Model, c.Qwen3MoeModel, c.Phi3MiniModel,
                    c.Gemma2Model, c.Gemma3Model):  # each defines its own set_vocab
            cls.set_vocab = no_vocab
        c.Gemma3Model._create_vocab_sentencepiece = lambda self: ([None] * self.hparams["vocab_size"], None, None)
    sys.argv = ["convert_hf_to_gguf.py", folder, "--outfile", out, "--outtype", outtype]
    c.main()


if __name__ == "__main__":
    main()
