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
    assert e.kind == "not_found"


def test_folder_without_config_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json") as info:
        ferry.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert info.value.kind == "not_found"


def test_folder_without_weights_is_file_not_found(folders, tmp_path):
    (tmp_path / "config.json").write_bytes(open(os.path.join(folders["llama"], "config.json"), "rb").read())
    with pytest.raises(ferry.NotFoundError, match="no checkpoint found"):
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
    with pytest.raises(FileNotFoundError, match="do not exist") as info:
        ferry.AutoModelForCausalLM.from_pretrained(copy)
    assert isinstance(info.value, ferry.NotFoundError) and info.value.kind == "not_found"


def test_budget_too_small_is_memory_error(folders):
    with pytest.raises(MemoryError) as info:
        ferry.AutoModelForCausalLM.from_pretrained(folders["llama"], device_map="auto",
                                                   max_memory={"cpu": "1KB"}, offload_io="direct")
    assert isinstance(info.value, ferry.OutOfMemoryError) and isinstance(info.value, ferry.Error)
    assert info.value.kind == "out_of_memory"


def test_bad_values_are_value_errors(folders, tmp_path):
    with pytest.raises(ValueError, match="unknown dtype") as info:
        ferry.AutoModelForCausalLM.from_pretrained(folders["llama"], dtype="float13")
    assert isinstance(info.value, ferry.InvalidValueError) and info.value.kind == "invalid_value"
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
    # A config.json that is there but corrupt is a bad value, not a missing file.
    (bad / "config.json").write_text("{\"model_type\": ")
    with pytest.raises(ferry.InvalidValueError, match="not valid JSON") as info:
        ferry.AutoModelForCausalLM.from_pretrained(bad)
    assert not isinstance(info.value, FileNotFoundError)


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


def test_the_class_follows_the_kind_not_the_wording():
    # Each kind raises its class whatever the message says: the bindings read ferry::Error::kind().
    raise_ = ferry._ferry._raise_for_test
    expected = {"not_found": (ferry.NotFoundError, FileNotFoundError),
                "out_of_memory": (ferry.OutOfMemoryError, MemoryError),
                "invalid_value": (ferry.InvalidValueError, ValueError)}
    for kind, classes in expected.items():
        for problem in ["checkpoint not found", "the model does not fit without disk offload", "bad value"]:
            with pytest.raises(ferry.Error) as info:
                raise_(kind, problem, "/x", "a hint")
            e = info.value
            assert type(e) is classes[0] and isinstance(e, classes[1]), (kind, problem, type(e))
            assert e.kind == kind and type(e).kind == kind
            assert (e.problem, e.where, e.hint) == (problem, "/x", "a hint")
            assert str(e) == "/x: " + problem + " (a hint)"
    with pytest.raises(ferry.InvalidValueError, match="unknown error kind"):
        raise_("missing", "x")
