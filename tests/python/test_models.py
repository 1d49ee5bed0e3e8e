"""ferry.AutoModelForCausalLM / AutoModelForSeq2SeqLM against transformers on the same random folders: logits of a
forward, greedy ids of generate, and what the model object offers (numpy/DLPack logits, text in and out, streamers)."""

import copy
import os

import numpy as np
import pytest
import torch
from bf16_linear_inputs import round_linear_inputs_to_bf16

import ferry

PROMPT = [1, 17, 93, 5, 250, 41, 7, 64]


def rounds_bf16_activations():
    """Whether ferry's bf16 kernels round activations to bf16 here: a CPU with AVX512_BF16 (and AVX-512 VNNI, the
    rest of ferry's AVX512 set) whose ISA is not capped below AVX512 by FERRY_ISA."""
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return ("avx512_bf16" in flags and "avx512_vnni" in flags and
            os.environ.get("FERRY_ISA", "").lower() not in ("scalar", "avx2"))


def hf_logits(model, ids, **kw):
    with torch.no_grad():
        return model(torch.tensor([ids]), **kw).logits[0].float().numpy()


@pytest.mark.parametrize("name", ["llama", "gpt2", "llama_bf16"])
def test_logits_match_transformers(folders, hf, name):
    model = ferry.AutoModelForCausalLM.from_pretrained(folders[name])
    ours = model(PROMPT)
    assert ours.shape == (len(PROMPT), 320) and ours.dtype == np.float32
    # bf16 weights: transformers upcast to f32 computes what ferry computes — f32 activations over bf16 weights, or,
    # on CPUs with AVX512_BF16, every Linear's input rounded to bf16 first (ferry's vdpbf16ps kernels).
    theirs = hf(folders[name])
    if name.endswith("_bf16") and rounds_bf16_activations():
        theirs = round_linear_inputs_to_bf16(copy.deepcopy(theirs))
    np.testing.assert_allclose(ours, hf_logits(theirs, PROMPT), rtol=1e-3, atol=2e-4)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_greedy_ids_match_transformers(folders, hf, name):
    model = ferry.AutoModelForCausalLM.from_pretrained(folders[name])
    ours = model.generate([PROMPT], max_new_tokens=12)  # both stop at generation_config.json's eos_token_id
    with torch.no_grad():
        theirs = hf(folders[name]).generate(torch.tensor([PROMPT]), max_new_tokens=12, do_sample=False,
                                            pad_token_id=0)
    assert ours.tolist() == theirs.tolist()


def test_seq2seq_logits_and_greedy_ids_match_transformers(folders, hf):
    model = ferry.AutoModelForSeq2SeqLM.from_pretrained(folders["t5"])
    assert model.is_encoder_decoder and model.architecture == "T5ForConditionalGeneration"
    ids = [5, 17, 33, 60, 2, 9]
    ref = hf(folders["t5"], seq2seq=True)
    dec = [0, 12, 40]
    np.testing.assert_allclose(model(ids, decoder_input_ids=dec),
                               hf_logits(ref, ids, decoder_input_ids=torch.tensor([dec])), rtol=1e-3, atol=2e-4)
    with torch.no_grad():
        theirs = ref.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False)
    ours = model.generate([ids], max_new_tokens=8)
    assert ours.tolist() == theirs.tolist()


def test_logits_are_zero_copy_and_dlpack(llama):
    logits = llama([PROMPT])
    assert logits.shape == (1, len(PROMPT), 320)
    assert not logits.flags["OWNDATA"]  # a view of ferry's tensor
    shared = torch.from_dlpack(logits)
    shared[0, 0, 0] = 1234.5
    assert logits[0, 0, 0] == np.float32(1234.5)
    del llama  # the array keeps ferry's tensor alive on its own
    assert float(logits.sum()) == float(logits.sum())


def test_input_forms_and_batches(llama):
    one = llama(PROMPT)
    np.testing.assert_array_equal(llama(np.array(PROMPT)), one)
    np.testing.assert_array_equal(llama(torch.tensor([PROMPT]))[0], one)
    batch = llama([PROMPT, PROMPT[::-1]])
    assert batch.shape == (2, len(PROMPT), 320)
    np.testing.assert_array_equal(batch[0], one)
    np.testing.assert_array_equal(batch[1], llama(PROMPT[::-1]))
    np.testing.assert_allclose(llama(PROMPT, logits_to_keep=1), one[-1:], rtol=1e-5, atol=1e-6)  # one row: GEMV


def test_text_generation_streams_the_returned_text(llama):
    pieces = []
    out = llama.generate("The capital of France is", max_new_tokens=10, streamer=lambda t, i: pieces.append(t))
    assert isinstance(out, str)
    assert "".join(pieces) == out
    full = llama.generate("The capital of France is", max_new_tokens=10, return_dict=True)
    assert full.text == out and len(full.generated_ids) <= 10
    assert full.stop_reason in ("eos_token", "max_new_tokens")
    tok = llama.tokenizer
    prompt = tok.encode("The capital of France is")
    assert full.sequences.shape == (1, len(prompt) + len(full.generated_ids))
    assert full.sequences[0].tolist()[:len(prompt)] == prompt


def test_streamer_can_stop_and_sampling_is_seeded(llama):
    seen = []
    out = llama.generate([PROMPT], max_new_tokens=50, eos_token_id=[], streamer=lambda t, i: len(seen) < 3
                         and not seen.append(i), return_dict=True)
    # the token whose call returned False is kept, as in the C++ API
    assert out.stop_reason == "cancelled" and out.generated_ids[:3] == seen and len(out.generated_ids) == 4
    kw = dict(max_new_tokens=16, do_sample=True, temperature=0.9, top_p=0.9, top_k=40, eos_token_id=[])
    a = llama.generate([PROMPT], seed=7, **kw)
    assert a.tolist() == llama.generate([PROMPT], seed=7, **kw).tolist()


def test_stop_strings_cut_the_text(llama):
    text = llama.generate("Hello", max_new_tokens=20, eos_token_id=[])
    assert len(text) > 2
    stop = text[1:3]
    cut = llama.generate("Hello", max_new_tokens=20, eos_token_id=[], stop=[stop], return_dict=True)
    assert cut.stop_reason == "stop_string" and stop not in cut.text


def test_offloaded_model_gives_the_same_logits(folders, llama, tmp_path):
    model = ferry.AutoModelForCausalLM.from_pretrained(folders["llama"], device_map="auto",
                                                       max_memory={"cpu": "40KB"}, offload_folder=tmp_path,
                                                       prefetch=1)
    assert "disk" in model.hf_device_map.values()
    np.testing.assert_allclose(model(PROMPT), llama(PROMPT), rtol=1e-5, atol=1e-6)
    assert model.generate([PROMPT], max_new_tokens=6).tolist() == llama.generate([PROMPT], max_new_tokens=6).tolist()


@pytest.mark.parametrize("prefetch", ["auto", 0, 2])
def test_every_prefetch_setting_gives_the_same_ids(folders, llama, tmp_path, prefetch):
    model = ferry.AutoModelForCausalLM.from_pretrained(folders["llama"], device_map="auto",
                                                       max_memory={"cpu": "40KB"}, offload_folder=tmp_path,
                                                       prefetch=prefetch)
    assert "disk" in model.hf_device_map.values()
    assert model.generate([PROMPT], max_new_tokens=6).tolist() == llama.generate([PROMPT], max_new_tokens=6).tolist()


@pytest.mark.parametrize("prefetch", ["two", -1, 2.5, True, "2x"])
def test_a_bad_prefetch_setting_is_refused(folders, prefetch):
    with pytest.raises(ferry.InvalidValueError, match="prefetch"):
        ferry.AutoModelForCausalLM.from_pretrained(folders["llama"], prefetch=prefetch)


def test_model_properties(llama, folders):
    assert llama.hf_device_map is None
    assert llama.config["model_type"] == "llama"
    assert llama.eos_token_id == [2]
    assert llama.num_parameters() > 0
    cpu = ferry.AutoModelForCausalLM.from_pretrained(folders["llama"], device_map="cpu", dtype="bfloat16")
    assert cpu.hf_device_map == {"": "cpu"}
