"""Speculative decoding from Python (issue 34): generate(..., assistant_model=, prompt_lookup_num_tokens=) as
transformers names them. The output is plain generation's when greedy; sampling, the assistant samples and speculative
sampling's rule keeps its proposals (the model's distribution); the counts come back in GenerateOutput.speculative;
several prompts speculate each on its own; the model as its own assistant, or one of another vocabulary, is refused."""
import pytest

import ferry

REPEATING = [5, 17, 23, 5, 17, 23, 41, 5, 17, 9, 30, 5, 17]


def test_prompt_lookup_and_assistant_keep_the_plain_output(folders, llama):
    plain = llama.generate([REPEATING], max_new_tokens=20, eos_token_id=[])
    lookup = llama.generate([REPEATING], max_new_tokens=20, eos_token_id=[], prompt_lookup_num_tokens=3,
                            return_dict=True)
    assert lookup.sequences.tolist() == plain.tolist()
    assert lookup.speculative["proposed"] > 0
    draft = ferry.AutoModelForCausalLM.from_pretrained(folders["llama"])  # the same weights: agrees every time
    out = llama.generate([REPEATING], max_new_tokens=20, eos_token_id=[], assistant_model=draft,
                         num_assistant_tokens=4, assistant_confidence_threshold=0.0, return_dict=True)
    assert out.sequences.tolist() == plain.tolist()
    s = out.speculative
    assert s["accepted"] + 4 >= s["proposed"] > 0 and s["target_forwards"] < 10 and s["draft_forwards"] > 0
    kw = dict(max_new_tokens=16, do_sample=True, temperature=0.8, top_k=40, eos_token_id=[], seed=11)
    sampled = llama.generate([REPEATING], assistant_model=draft, num_assistant_tokens=4,
                             assistant_confidence_threshold=0.0, return_dict=True, **kw)
    assert len(sampled.generated_ids) == 16
    s = sampled.speculative
    assert s["accepted"] + 4 >= s["proposed"] > 0  # the same weights: p and q agree, every proposal is kept


def test_several_prompts_speculate_each_on_its_own(folders, llama):
    prompts = [REPEATING, [9, 30, 5, 17, 9, 30, 5]]
    plain = llama.generate(prompts, max_new_tokens=12, eos_token_id=[])
    draft = ferry.AutoModelForCausalLM.from_pretrained(folders["llama"])
    for kw in (dict(prompt_lookup_num_tokens=2),
               dict(assistant_model=draft, num_assistant_tokens=3, assistant_confidence_threshold=0.0)):
        assert llama.generate(prompts, max_new_tokens=12, eos_token_id=[], **kw).tolist() == plain.tolist(), kw


def test_refusals(folders, llama):
    # A random assistant is never as sure as transformers' threshold of 0.4: it runs, and proposes nothing.
    draft = ferry.AutoModelForCausalLM.from_pretrained(folders["llama"])
    unsure = llama.generate([REPEATING], max_new_tokens=6, eos_token_id=[], assistant_model=draft,
                            assistant_confidence_threshold=0.4, return_dict=True)
    assert unsure.speculative["proposed"] == 0 and unsure.speculative["draft_forwards"] > 0
    with pytest.raises(ferry.InvalidValueError, match="threshold"):
        llama.generate([REPEATING], max_new_tokens=2, assistant_model=draft, assistant_confidence_threshold=2.0)
    with pytest.raises(ferry.InvalidValueError, match="itself"):
        llama.generate([REPEATING], max_new_tokens=2, assistant_model=llama)
    t5 = ferry.AutoModelForSeq2SeqLM.from_pretrained(folders["t5"])  # 96 tokens against the llama's 320
    with pytest.raises(ferry.InvalidValueError, match="vocabulary"):
        llama.generate([REPEATING], max_new_tokens=2, assistant_model=t5)
