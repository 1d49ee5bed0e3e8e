"""A pipeline over ranks from Python: `mpirun -np 2 python script.py` — ferry joins MPI's world, the llama folder is
split by a device map whose blocks name rank 1, rank 0 generates (text and ids equal to one process's) and the other
rank follows (PreTrainedModel.follow_pipeline). Skipped without mpirun or a ferry built with MPI."""

import json
import os
import shutil
import subprocess
import sys

import pytest

PROMPTS = ["The capital of France", "Once upon a time there", "1, 2, 3,"]

SCRIPT = r'''
import json, sys
import ferry
PROMPTS = %r

folder = sys.argv[1]
device_map = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.layers.0": "cpu",
              "model.layers.1": "rank1:cpu", "model.layers.2": "rank1:cpu", "model.norm": "cpu", "lm_head": "cpu"}
model = ferry.AutoModelForCausalLM.from_pretrained(folder, device_map=device_map, micro_batches=2)
if ferry.get_rank() != 0:
    model.follow_pipeline()
    sys.exit(0)
tok = ferry.AutoTokenizer.from_pretrained(folder)
out = model.generate(tok("The capital of France")["input_ids"], max_new_tokens=12, return_dict=True)
# Three prompts as one batch, its forwards in two micro-batches.
batch = model.generate([tok(p)["input_ids"] for p in PROMPTS], max_new_tokens=8, return_dict=True)
model.end_pipeline()
print(json.dumps({"rank": ferry.get_rank(), "size": ferry.get_world_size(), "ids": out.generated_ids,
                  "batch": batch.sequences.tolist(), "map": model.hf_device_map}))
'''


def test_generate_over_two_ranks_equals_one_process(folders, llama, tmp_path):
    import ferry

    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun is not installed")
    assert ferry.get_rank() == 0 and ferry.get_world_size() == 1  # not under mpirun
    script = tmp_path / "pipeline.py"
    script.write_text(SCRIPT % (PROMPTS,))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", FERRY_PG_TIMEOUT="60")
    run = subprocess.run([mpirun, "--oversubscribe", "-np", "2", sys.executable, str(script), folders["llama"]],
                         env=env, capture_output=True, text=True, timeout=300)
    lines = [l for l in run.stdout.splitlines() if l.startswith("{")]
    if run.returncode != 0 and "the job has 1 rank" in run.stdout + run.stderr:
        pytest.skip("ferry was built without MPI")
    assert run.returncode == 0, run.stdout + run.stderr
    assert len(lines) == 1, run.stdout  # rank 0 alone prints
    got = json.loads(lines[0])
    assert got["rank"] == 0 and got["size"] == 2
    assert got["map"]["model.layers.1"] == "rank1:cpu"
    tok = ferry.AutoTokenizer.from_pretrained(folders["llama"])
    want = llama.generate(tok("The capital of France")["input_ids"], max_new_tokens=12, return_dict=True)
    assert got["ids"] == want.generated_ids
    batch = llama.generate([tok(p)["input_ids"] for p in PROMPTS], max_new_tokens=8, return_dict=True)
    assert got["batch"] == batch.sequences.tolist()
