"""Random T5 folders written by transformers (save_pretrained) and their golden logits, for ferry's T5 tests.

Variants: "t5_v10" (relu FFN, lm_head tied to shared, output scaled by d_model^-0.5), "t5_v11" (gated-gelu FFN,
untied lm_head as in T5 v1.1 / T0pp / Flan-T5 checkpoints: written with its own lm_head.weight and
tie_word_embeddings false), "mt5" (the v1.1 graph as MT5ForConditionalGeneration), "umt5" (a relative bias in every layer), each in f32 (t5_v10 in shards); "t5_v11_bf16" and
"t5_v11_f16" in half precision (golden logits from the weights upcast to f32, what ferry computes; for t5_v11_bf16
also logits_bf16x / encoder_bf16x, the same decoder_ids with every nn.Linear's input rounded to bf16, what ferry
computes on CPUs with AVX512_BF16). For each: input_ids [S] for the encoder, then greedy decoding from decoder_start_token_id for STEPS steps,
one token per forward with the cache. Writes ROOT/NAME/ ROOT/NAME.golden.safetensors and ROOT/NAME.plans.json (Accelerate's
infer_auto_device_map for several cpu budgets):
  input_ids i64 [S]; decoder_ids i64 [STEPS] (the tokens fed: start, then the greedy choices);
  logits f32 [STEPS, V] (the decoder's logits after feeding decoder_ids[i]); encoder f32 [S, C].
Usage: python hf_t5_reference.py ROOT [--steps 8]
"""

import argparse
import json
import os
import zlib

for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY"):
    os.environ.setdefault(var, "1")

import torch  # noqa: E402
from bf16_linear_inputs import round_linear_inputs_to_bf16  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
from transformers import (MT5Config, MT5ForConditionalGeneration, T5Config,  # noqa: E402
                          T5ForConditionalGeneration, UMT5Config, UMT5ForConditionalGeneration)

SIZES = dict(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=3, num_heads=4,
             relative_attention_num_buckets=8, relative_attention_max_distance=20, dropout_rate=0.0)


def make(root, name, cls, config, dtype, untied):
    # A seed from the name that is the same in every process (str hash() is salted per process: the weights, and
    # with them how close the bf16-rounded references come to a rounding boundary, changed from run to run).
    torch.manual_seed(zlib.crc32(name.encode()) % 1000)
    model = cls(config).eval()
    folder = os.path.join(root, name)
    # t5_v10 is written in shards, as big checkpoints are
    model.to(dtype).save_pretrained(folder, max_shard_size="100KB" if name == "t5_v10" else "5GB")
    if untied:  # a v1.1 checkpoint: its own lm_head, and a config saying so
        path = os.path.join(folder, "model.safetensors")  # (unsharded: only t5_v10 is sharded)
        sd = load_file(path)
        sd["lm_head.weight"] = (torch.randn(config.vocab_size, config.d_model) * 0.5).to(dtype)
        save_file(sd, path, metadata={"format": "pt"})
        cfg_path = os.path.join(folder, "config.json")
        cfg = json.load(open(cfg_path))
        cfg["tie_word_embeddings"] = False
        cfg.pop("scale_decoder_outputs", None)
        json.dump(cfg, open(cfg_path, "w"), indent=2)
    return cls.from_pretrained(folder, dtype=torch.float32).eval(), folder


def golden(model, steps, seed):
    g = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(2, model.config.vocab_size, (13,), generator=g)
    with torch.no_grad():
        enc = model.get_encoder()(input_ids=input_ids[None]).last_hidden_state
        start = getattr(model.generation_config, "decoder_start_token_id", None)
        start = start if start is not None else model.config.pad_token_id
        fed, rows = [start], []
        cache = None
        for _ in range(steps):
            out = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([[fed[-1]]]), past_key_values=cache,
                        use_cache=True)
            cache = out.past_key_values
            rows.append(out.logits[0, -1].float())
            fed.append(int(out.logits[0, -1].argmax()))
    return {"input_ids": input_ids, "decoder_ids": torch.tensor(fed[:steps]), "logits": torch.stack(rows),
            "encoder": enc[0].float().contiguous()}


def golden_bf16x(model, ref):
    """encoder_bf16x and logits_bf16x: ref's input_ids and decoder_ids (teacher forcing) through `model` with its
    linear inputs rounded to bf16."""
    model = round_linear_inputs_to_bf16(model)
    with torch.no_grad():
        enc = model.get_encoder()(input_ids=ref["input_ids"][None]).last_hidden_state
        rows, cache = [], None
        for token in ref["decoder_ids"].tolist():
            out = model(encoder_outputs=(enc,), decoder_input_ids=torch.tensor([[token]]), past_key_values=cache,
                        use_cache=True)
            cache = out.past_key_values
            rows.append(out.logits[0, -1].float())
    return {"logits_bf16x": torch.stack(rows), "encoder_bf16x": enc[0].float().contiguous()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--steps", type=int, default=8)
    a = p.parse_args()
    os.makedirs(a.root, exist_ok=True)
    cases = [
        ("t5_v10", T5ForConditionalGeneration, T5Config(**SIZES, feed_forward_proj="relu"), torch.float32, False),
        ("t5_v11", T5ForConditionalGeneration, T5Config(**SIZES, feed_forward_proj="gated-gelu"), torch.float32, True),
        ("mt5", MT5ForConditionalGeneration, MT5Config(**SIZES, feed_forward_proj="gated-gelu"), torch.float32, True),
        ("umt5", UMT5ForConditionalGeneration, UMT5Config(**SIZES, feed_forward_proj="gated-gelu"), torch.float32,
         True),
        ("t5_v11_bf16", T5ForConditionalGeneration, T5Config(**SIZES, feed_forward_proj="gated-gelu"),
         torch.bfloat16, True),
        ("t5_v11_f16", T5ForConditionalGeneration, T5Config(**SIZES, feed_forward_proj="gated-gelu"),
         torch.float16, True),
    ]
    for i, (name, cls, config, dtype, untied) in enumerate(cases):
        model, folder = make(a.root, name, cls, config, dtype, untied)
        g = golden(model, a.steps, 100 + i)
        if dtype == torch.bfloat16:
            g.update(golden_bf16x(model, g))
        save_file(g, folder + ".golden.safetensors")
        with open(folder + ".plans.json", "w") as f:
            json.dump(plans(folder, cls), f)
        print(name, "written")
    text_case(a.root)
    print("t5_text written")


def text_case(root):
    """t5_text: a T5 v1.1 folder with a real T5 tokenizer (a SentencePiece Unigram model trained on a small corpus,
    converted by transformers' T5Tokenizer: Precompiled nmt_nfkc, Metaspace, </s> appended, 100 extra ids), and
    transformers' generate() on a text prompt: ROOT/t5_text.generate.json = {prompt, input_ids, generated_ids, text}."""
    import io
    import random
    import sentencepiece as spm
    from transformers import T5Tokenizer
    rng = random.Random(3)
    words = ("the house is small big green red blue translate English to German French summarize question answer "
             "a of and in on with for dog cat tree river city water fire over under quick brown fox jumps lazy").split()
    lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 10))) + rng.choice([".", "!", "?", ""])
             for _ in range(400)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
                                   vocab_size=120, hard_vocab_limit=False, num_threads=1, minloglevel=2,
                                   pad_id=0, eos_id=1, unk_id=2, bos_id=-1, normalization_rule_name="nmt_nfkc")
    folder = os.path.join(root, "t5_text")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "spiece.model"), "wb") as f:
        f.write(model.getvalue())
    tok = T5Tokenizer.from_pretrained(folder)
    tok.save_pretrained(folder)
    # num_decoder_layers = num_layers: transformers 5.24 sizes generate()'s cache by num_layers (IndexError otherwise)
    config = T5Config(**{**SIZES, "vocab_size": ((len(tok) + 15) // 16) * 16, "num_decoder_layers": 2},
                      feed_forward_proj="gated-gelu")
    torch.manual_seed(11)
    T5ForConditionalGeneration(config).eval().save_pretrained(folder)
    os.remove(os.path.join(folder, "spiece.model"))  # ferry reads tokenizer.json
    model = T5ForConditionalGeneration.from_pretrained(folder).eval()
    prompt = "translate English to German: the quick brown fox jumps over the lazy dog."
    ids = tok(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=10, do_sample=False, decoder_start_token_id=0)
    gen = out[0, 1:].tolist()
    with open(os.path.join(root, "t5_text.generate.json"), "w") as f:
        json.dump({"prompt": prompt, "input_ids": ids[0].tolist(), "generated_ids": gen,
                   "text": tok.decode(gen, skip_special_tokens=True)}, f)


def plans(folder, cls):
    """Accelerate's infer_auto_device_map for the folder's model (built on meta from its config.json, as
    transformers' from_pretrained does) with no_split_module_classes=["T5Block"], for several cpu budgets."""
    from accelerate import infer_auto_device_map, init_empty_weights
    from transformers import AutoConfig
    config = AutoConfig.from_pretrained(folder)
    with init_empty_weights():
        model = cls(config)
    model.tie_weights()
    out = []
    for budget in (20000, 60000, 120000, 200000, 400000):
        device_map = infer_auto_device_map(model, max_memory={"cpu": budget, "disk": 10**12},
                                           no_split_module_classes=["T5Block"])
        out.append({"cpu": budget, "device_map": {k: str(v) for k, v in device_map.items()}})
    return out


if __name__ == "__main__":
    main()
