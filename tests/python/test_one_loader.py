"""The CLI, the server and the Python package load a model through one loader (text::from_pretrained and the functions
beside it): for the same folder or GGUF file and the same budget they report the same device map (the one that ran),
EOS ids and chat template; and Python's multi-prompt generate (a BatchGenerator) gives the CLI's batched ids."""

import json
import os
import re
import signal
import subprocess
import time
import urllib.request

import pytest

import ferry
import ferry.__main__ as cli

BUDGET = "40KB"  # the llama folder is ~170 KB in f32: layers go to disk


def ferry_bin():
    path = cli.find_cli()
    if path is None:
        pytest.skip("no ferry command next to this package or on PATH")
    return path


@pytest.fixture(scope="module")
def gguf(folders, tmp_path_factory):
    """The llama folder as an f32 GGUF written by `ferry quantize` (its chat template included)."""
    out = str(tmp_path_factory.mktemp("gguf") / "llama.f32.gguf")
    r = subprocess.run([ferry_bin(), "quantize", "-m", folders["llama"], "-o", out, "--type", "f32"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def from_python(path, offload):
    m = ferry.AutoModelForCausalLM.from_pretrained(path, device_map="auto", max_memory={"cpu": BUDGET},
                                                   offload_folder=offload)
    return {"architecture": m.architecture, "device_map": m.hf_device_map, "eos_token_ids": m.eos_token_id,
            "chat_template": m.tokenizer.chat_template}


def from_cli(path, flags):
    r = subprocess.run([ferry_bin(), "generate", "-m", path, *flags, "--prompt-ids", "1,5,9", "-n", "1", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["model"]


def from_server(path, flags, tmp_path):
    log = open(tmp_path / "serve.out", "w+")
    proc = subprocess.Popen([ferry_bin(), "serve", "-m", path, *flags, "--port", "0", "--model-id", "m"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        deadline = time.time() + 120
        while port is None and time.time() < deadline and proc.poll() is None:
            log.seek(0)
            found = re.search(r"listening on http://127\.0\.0\.1:(\d+)\n", log.read())
            port = int(found.group(1)) if found else None
            time.sleep(0.05)
        assert port, "the server did not start: " + open(tmp_path / "serve.out").read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models/m", timeout=30) as r:
            return json.load(r)["ferry"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()


@pytest.mark.parametrize("kind", ["folder", "gguf"])
def test_cli_server_and_python_report_the_same_model(folders, gguf, tmp_path, kind):
    path = folders["llama"] if kind == "folder" else gguf
    offload = str(tmp_path / "offload")
    flags = ["--device-map", "auto", "--max-memory", "cpu=" + BUDGET, "--offload-folder", offload]
    py = from_python(path, offload)
    assert "disk" in py["device_map"].values()  # the budget really offloads
    assert py["chat_template"] and py["eos_token_ids"] == [2]
    for name, other in (("cli", from_cli(path, flags)), ("server", from_server(path, flags, tmp_path))):
        assert other == py, name


def test_python_multi_prompt_generate_equals_the_cli_batch(folders, tmp_path):
    """Rows of different lengths need no padding: each is its own sequence of one batch."""
    prompts = [[1, 5, 9], [1, 44, 7, 100, 3], [1, 2], [1, 300, 200, 100, 50, 25, 12]]
    n = 12
    model = ferry.AutoModelForCausalLM.from_pretrained(folders["llama"])
    ours = model.generate(prompts, max_new_tokens=n).tolist()
    file = tmp_path / "prompts.jsonl"
    file.write_text("".join(json.dumps({"prompt_ids": p}) + "\n" for p in prompts))
    r = subprocess.run([ferry_bin(), "generate", "-m", folders["llama"], "-i", str(file), "--batch", "4", "-n", str(n),
                        "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    theirs = [x["prompt_ids"] + x["generated_ids"] for x in lines]
    width = max(len(row) for row in theirs)
    assert ours == [row + [model.eos_token_id[0]] * (width - len(row)) for row in theirs]
    # One prompt alone gives the same ids as in the batch.
    assert model.generate([prompts[1]], max_new_tokens=n).tolist()[0] == theirs[1]
