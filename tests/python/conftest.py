"""Fixtures of the Python API tests: tiny random Hugging Face folders written by transformers itself
(tests/reference/hf_make_folder.py for the causal models), each with a byte-level BPE tokenizer.json trained by the
`tokenizers` package, and the same folders loaded by transformers as the reference.

Run by scripts/test with PYTHONPATH=<build>/python and the .venv's python:
    PYTHONPATH=build/python .venv/bin/python -m pytest tests/python
"""

import json
import os
import sys

import pytest

for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(var, "1")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))

LLAMA = {"vocab_size": 320, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1 << 20,
         "bos_token_id": 1, "eos_token_id": 2}
GPT2 = {"vocab_size": 320, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 128,
        "bos_token_id": 0, "eos_token_id": 0}
# A Zephyr-like template: system prompt default, roles, a generation prompt, a loop variable and a filter.
CHAT_TEMPLATE = ("{{ bos_token }}{% if messages[0]['role'] != 'system' %}<|system|>\nYou are helpful.{{ eos_token }}\n"
                 "{% endif %}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] | trim }}{{ eos_token }}"
                 "{% if not loop.last %}\n{% endif %}{% endfor %}{% if add_generation_prompt %}\n<|assistant|>\n"
                 "{% endif %}")
CORPUS = ["The capital of France is Paris.", "Big models run on small machines.",
          "ferry moves weights to the device just in time.", "Hello world! Numbers: 12345, symbols: #@%&."] * 20


def write_tokenizer(folder, vocab_size):
    """A byte-level BPE tokenizer.json trained on CORPUS, with <s> (id 1) prepended as BOS and </s> = 2."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                   "pad_token": "<pad>", "chat_template": CHAT_TEMPLATE}, f)


def make_causal(root, name, arch, config, dtype="float32", fmt="safetensors"):
    import hf_make_folder

    hf_make_folder.make_folder({"name": name, "architecture": arch, "dtype": dtype, "format": fmt,
                                "config": config}, root)
    folder = os.path.join(root, name)
    write_tokenizer(folder, config["vocab_size"])
    return folder


def make_t5(root):
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(3)
    config = T5Config(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, relative_attention_max_distance=20, dropout_rate=0.0,
                      feed_forward_proj="relu", decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)
    model = T5ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape) * 0.5)
    folder = os.path.join(root, "t5")
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def folders(tmp_path_factory):
    """{"llama": ..., "llama_bf16": ..., "gpt2": ..., "t5": ...}: folder paths."""
    root = str(tmp_path_factory.mktemp("hf"))
    return {
        "llama": make_causal(root, "llama", "LlamaForCausalLM", LLAMA),
        "llama_bf16": make_causal(root, "llama_bf16", "LlamaForCausalLM", {**LLAMA, "num_hidden_layers": 4},
                                  dtype="bfloat16", fmt="sharded"),
        "gpt2": make_causal(root, "gpt2", "GPT2LMHeadModel", GPT2),
        "t5": make_t5(root),
    }


@pytest.fixture(scope="session")
def hf():
    """Loads a folder with transformers (f32, eager attention), cached per folder."""
    import torch
    import transformers

    torch.set_num_threads(1)
    cache = {}

    def load(folder, seq2seq=False):
        if folder not in cache:
            cls = transformers.AutoModelForSeq2SeqLM if seq2seq else transformers.AutoModelForCausalLM
            cache[folder] = cls.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
        return cache[folder]

    return load


@pytest.fixture(scope="session")
def llama(folders):
    """The llama folder loaded by ferry, all in RAM."""
    import ferry

    return ferry.AutoModelForCausalLM.from_pretrained(folders["llama"])


def read_json(path):
    with open(path) as f:
        return json.load(f)
