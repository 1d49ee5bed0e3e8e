"""Mixtures of experts through the Python package: a transformers-written Mixtral folder with its experts planned onto
disk computes transformers' logits, the expert cache's counts are visible, and plan_by_expert=False gives
Accelerate's plan by decoder layer."""

import numpy as np
import pytest
import torch
import transformers
from accelerate import init_empty_weights as acc_empty_weights
from accelerate.utils import infer_auto_device_map as acc_infer

import ferry
from conftest import LLAMA, make_causal

PROMPT = [1, 17, 93, 5, 250, 41, 7, 64, 12, 3]
MIXTRAL = dict(LLAMA, num_local_experts=8, num_experts_per_tok=2, num_hidden_layers=2)
BUDGET = {"cpu": "160KB"}  # the dense parts (about 110 KB) fit, the experts (196 KB a layer) do not


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory):
    return make_causal(str(tmp_path_factory.mktemp("moe")), "mixtral", "MixtralForCausalLM", MIXTRAL)


def device_of(plan, module):
    """The device of `module` in a cleaned map: its own entry or its closest ancestor's."""
    while module not in plan:
        assert module, plan
        module = module.rpartition(".")[0]
    return plan[module]


def transformers_logits(folder):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([PROMPT])).logits[0].numpy()


def test_experts_on_disk_compute_transformers_logits_and_count_cache_hits(mixtral, tmp_path):
    want = transformers_logits(mixtral)
    model = ferry.AutoModelForCausalLM.from_pretrained(mixtral, device_map="auto", max_memory=BUDGET,
                                                       offload_folder=str(tmp_path / "off"))
    assert model.experts == {"num_experts": 8, "num_experts_per_tok": 2,
                             "expert_class": "MixtralBlockSparseTop2MLP"}
    plan = model.hf_device_map
    assert device_of(plan, "model.layers.1.block_sparse_moe.experts.7") == "disk", plan
    assert device_of(plan, "model.layers.1.block_sparse_moe.gate") == "cpu", plan
    assert device_of(plan, "model.layers.0.self_attn") == "cpu", plan
    np.testing.assert_allclose(model(PROMPT), want, rtol=1e-4, atol=1e-5)
    stats = model.expert_cache_stats  # by default, what the plan leaves of the cpu budget
    assert stats["misses"] > 0 and 0 < stats["capacity"] < 160_000 and stats["bytes"] <= stats["capacity"]
    # Layer 1's experts are guessed from layer 0's input and counted; guess_experts=True also reads them ahead.
    assert stats["routed"] > 0 and stats["guessed"] > 0 and 0 <= stats["guessed_routed"] <= stats["guessed"]
    ahead = ferry.AutoModelForCausalLM.from_pretrained(mixtral, device_map="auto", max_memory=BUDGET,
                                                       offload_folder=str(tmp_path / "off3"), guess_experts=True)
    np.testing.assert_array_equal(ahead(PROMPT), model(PROMPT))
    assert ahead.expert_cache_stats["guessed"] > 0

    # A cache of a given size is reserved from the budget: one larger than the budget is refused, by name.
    with pytest.raises(ferry.OutOfMemoryError, match="expert cache"):
        ferry.AutoModelForCausalLM.from_pretrained(mixtral, device_map="auto", max_memory=BUDGET,
                                                   offload_folder=str(tmp_path / "off2"), expert_cache="1MiB")
    cached = ferry.AutoModelForCausalLM.from_pretrained(mixtral, device_map="auto", max_memory={"cpu": "1250KB"},
                                                        offload_folder=str(tmp_path / "off2"), expert_cache="1MiB")
    assert device_of(cached.hf_device_map, "model.layers.1.block_sparse_moe.experts.7") == "disk"
    np.testing.assert_array_equal(cached(PROMPT), model(PROMPT))
    first = cached.expert_cache_stats
    assert first["capacity"] == 1 << 20 and first["evictions"] == 0 and 0 <= first["kept"] <= first["misses"]
    cached(PROMPT)  # the same routing again: every expert it reads is now held
    again = cached.expert_cache_stats
    assert again["hits"] == first["misses"] and again["misses"] == first["misses"]


def test_no_expert_cache_reads_every_routed_expert(mixtral, tmp_path):
    model = ferry.AutoModelForCausalLM.from_pretrained(mixtral, device_map="auto", max_memory=BUDGET,
                                                       offload_folder=str(tmp_path / "off"), expert_cache=0)
    model(PROMPT)
    model(PROMPT)
    stats = model.expert_cache_stats
    assert stats["hits"] == 0 and stats["capacity"] == 0 and stats["misses"] > 0
    resident = ferry.AutoModelForCausalLM.from_pretrained(mixtral)
    assert resident.expert_cache_stats is None  # no expert on disk
    np.testing.assert_array_equal(model(PROMPT), resident(PROMPT))


def test_plan_by_decoder_layer_is_accelerates(mixtral, tmp_path):
    model = ferry.AutoModelForCausalLM.from_pretrained(mixtral, device_map="auto", max_memory={"cpu": "300KB"},
                                                       offload_folder=str(tmp_path / "off"), plan_by_expert=False)
    config = transformers.AutoConfig.from_pretrained(mixtral)
    with acc_empty_weights():
        skeleton = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    want = acc_infer(skeleton, max_memory={"cpu": 300_000}, no_split_module_classes=["MixtralDecoderLayer"])
    assert model.hf_device_map == {k: v for k, v in want.items()}
    assert not any(".experts." in k for k in model.hf_device_map)


@pytest.mark.parametrize("bad", [-1, "lots", True])
def test_a_bad_expert_cache_is_an_error_naming_it(mixtral, bad):
    with pytest.raises(ferry.InvalidValueError, match="expert_cache"):
        ferry.AutoModelForCausalLM.from_pretrained(mixtral, expert_cache=bad)
