"""ferry::Error becomes a Python exception of the right kind, carrying ferry's message."""

import json
import os

import pytest

import ferry


def test_missing_folder_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        ferry.AutoModelForCausalLM.from_pretrained(tmp_path / "nope")
    e = info.value
    assert isinstance(e, ferry.Error) and isinstance(e, ferry.NotFoundError)
    assert e.problem == "model folder not found" and e.where == str(tmp_path / "nope") and e.hint


def test_folder_without_config_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        ferry.AutoModelForCausalLM.from_pretrained(tmp_path)


def test_missing_shard_is_file_not_found(folders, tmp_path):
    copy = tmp_path / "llama"
    copy.mkdir()
    for name in os.listdir(folders["llama_bf16"]):
        if name != "model-00002-of-00004.safetensors" and not name.startswith("model-00002"):
            (copy / name).write_bytes(open(os.path.join(folders["llama_bf16"], name), "rb").read())
    shards = [n for n in os.listdir(folders["llama_bf16"]) if n.startswith("model-0000")]
    if len(shards) < 2:
        pytest.skip("the folder is not sharded")
    with pytest.raises(FileNotFoundError):
        ferry.AutoModelForCausalLM.from_pretrained(copy)


def test_budget_too_small_is_memory_error(folders):
    with pytest.raises(MemoryError) as info:
        ferry.AutoModelForCausalLM.from_pretrained(folders["llama"], device_map="auto",
                                                   max_memory={"cpu": "1KB"}, offload_io="direct")
    assert isinstance(info.value, ferry.OutOfMemoryError) and isinstance(info.value, ferry.Error)


def test_bad_values_are_value_errors(folders, tmp_path):
    with pytest.raises(ValueError, match="unknown dtype"):
        ferry.AutoModelForCausalLM.from_pretrained(folders["llama"], dtype="float13")
    with pytest.raises(ferry.InvalidValueError):
        ferry.AutoModelForCausalLM.from_pretrained(folders["llama"], device_map="everywhere")
    with pytest.raises(ValueError):
        ferry.infer_auto_device_map(folders["llama"], max_memory={"cpu": "5MBB"})
    with pytest.raises(ValueError, match="AutoModelForSeq2SeqLM"):
        ferry.AutoModelForCausalLM.from_pretrained(folders["t5"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "mamba", "architectures": ["MambaForCausalLM"]}))
    with pytest.raises(ValueError, match="unknown architecture"):
        ferry.AutoModelForCausalLM.from_pretrained(bad)


def test_generate_errors(llama):
    with pytest.raises(ValueError):
        llama.generate([[1, 2, 99999]])  # an id outside the vocabulary
    with pytest.raises(ValueError):
        llama.generate([[]])


def test_streamer_exception_propagates(llama):
    def boom(text, token):
        raise RuntimeError("from the streamer")

    with pytest.raises(RuntimeError, match="from the streamer"):
        llama.generate([[1, 2, 3]], max_new_tokens=5, eos_token_id=[], streamer=boom)


def test_classification_of_library_wordings():
    c = ferry._ferry._classify_for_test
    assert c("checkpoint not found", "/x") == "not_found"
    assert c("cannot open file: No such file or directory", "/x") == "not_found"
    assert c("cannot open config.json", "/definitely/not/here/config.json") == "not_found"
    assert c("the model does not fit without disk offload: ...", "") == "out_of_memory"
    assert c("KV cache for 4096 tokens needs 1 GiB on cpu but its budget is 1 MiB", "") == "out_of_memory"
    assert c("out of memory: cannot allocate 5 GiB on cuda:0", "") == "out_of_memory"
    assert c("\"hidden_size\" must be an integer, got string", "config.json") == "invalid_value"
