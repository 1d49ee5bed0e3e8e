"""Device maps against Accelerate: ferry.infer_auto_device_map on a folder, on a config dict and on a skeleton built
under ferry.init_empty_weights(), and hf_device_map after from_pretrained(device_map="auto"), each equal to what
Accelerate / transformers plan for the same model and budget."""

import pytest
import torch
import transformers
from accelerate import init_empty_weights as acc_empty_weights
from accelerate.utils import infer_auto_device_map as acc_infer

import ferry

from conftest import read_json

BUDGETS = [
    {"cpu": "60KB"},
    {0: "40KB", "cpu": "50KB"},
    {0: 30000, 1: 30000, "cpu": 100000},
    {"cpu": "1GB"},
]


def accelerate_plan(folder, max_memory, no_split, dtype=None):
    config = transformers.AutoConfig.from_pretrained(folder)
    with acc_empty_weights():
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return dict(acc_infer(model, max_memory=max_memory, no_split_module_classes=no_split, dtype=dtype))


@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("dtype", [None, "bfloat16"])
def test_infer_auto_device_map_matches_accelerate(folders, budget, dtype):
    folder = folders["llama"]
    ours = ferry.infer_auto_device_map(folder, max_memory=budget, no_split_module_classes=["LlamaDecoderLayer"],
                                       dtype=dtype)
    theirs = accelerate_plan(folder, budget, ["LlamaDecoderLayer"], getattr(torch, dtype) if dtype else None)
    assert ours == theirs


def test_config_dict_and_skeleton_give_the_same_plan(folders):
    folder = folders["llama"]
    budget = {0: "40KB", "cpu": "50KB"}
    from_path = ferry.infer_auto_device_map(folder, max_memory=budget, no_split_module_classes=["LlamaDecoderLayer"])
    config = read_json(folder + "/config.json")
    assert ferry.infer_auto_device_map(config, max_memory=budget,
                                       no_split_module_classes=["LlamaDecoderLayer"]) == from_path
    with ferry.init_empty_weights():
        skeleton = ferry.AutoModelForCausalLM.from_config(config)
    assert ferry.infer_auto_device_map(skeleton, max_memory=budget,
                                       no_split_module_classes=["LlamaDecoderLayer"]) == from_path
    with pytest.raises(ferry.Error):  # meta weights cannot run
        skeleton([1, 2, 3])
    real = ferry.AutoModelForCausalLM.from_config(config)  # outside the block: random weights
    assert real([1, 2, 3]).shape == (3, 320)


@pytest.mark.parametrize("budget", [{"cpu": "45KB"}, {"cpu": "70KB"}])
def test_hf_device_map_matches_transformers(folders, budget, tmp_path):
    folder = folders["llama"]
    ours = ferry.AutoModelForCausalLM.from_pretrained(folder, device_map="auto", max_memory=budget,
                                                      offload_folder=tmp_path / "ferry")
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, device_map="auto", max_memory=budget,
                                                               offload_folder=str(tmp_path / "hf"))
    assert ours.hf_device_map == dict(theirs.hf_device_map)


def test_explicit_device_map_is_kept(folders, tmp_path):
    folder = folders["llama"]
    plan = {"model.embed_tokens": "cpu", "model.layers": "disk", "model.norm": "cpu", "model.rotary_emb": "cpu",
            "lm_head": "cpu"}
    model = ferry.AutoModelForCausalLM.from_pretrained(folder, device_map=plan, offload_folder=tmp_path)
    assert model.hf_device_map == plan
    assert model([1, 2, 3]).shape == (3, 320)


def test_fast_strategy_keeps_the_t5_decoder_in_ram(folders, hf, tmp_path):
    """device_map="fast" (beyond Accelerate): a T5's decoder goes to RAM before its encoder; the same tokens as
    transformers. strategy="fast" plans the same from a folder; "accelerate" stays Accelerate's order."""
    folder = folders["t5"]
    weights = sum(p.numel() * 4 for p in hf(folder, seq2seq=True).parameters())
    budget = {"cpu": weights * 7 // 10}
    accelerate = ferry.infer_auto_device_map(folder, max_memory=budget, no_split_module_classes=["T5Block"])
    fast = ferry.infer_auto_device_map(folder, max_memory=budget, no_split_module_classes=["T5Block"],
                                       strategy="fast")

    def device_of(plan, tensor):  # the longest entry covering the tensor
        keys = [k for k in plan if k == "" or tensor == k or tensor.startswith(k + ".")]
        return plan[max(keys, key=len)]

    encoder_q, decoder_q = "encoder.block.0.layer.0.SelfAttention.q.weight", "decoder.block.0.layer.0.SelfAttention.q.weight"
    assert (device_of(accelerate, encoder_q), device_of(accelerate, decoder_q)) == ("cpu", "disk")
    assert (device_of(fast, encoder_q), device_of(fast, decoder_q)) == ("disk", "cpu")
    with pytest.raises(ValueError, match="strategy"):
        ferry.infer_auto_device_map(folder, max_memory=budget, strategy="fastest")
    model = ferry.AutoModelForSeq2SeqLM.from_pretrained(folder, device_map="fast", max_memory=budget,
                                                        offload_folder=tmp_path)
    assert model.hf_device_map == fast
    ids = [5, 9, 13, 2, 40, 1]
    with torch.no_grad():
        theirs = hf(folder, seq2seq=True).generate(torch.tensor([ids]), max_new_tokens=5, do_sample=False)
    assert model.generate([ids], max_new_tokens=5).tolist() == theirs.tolist()
