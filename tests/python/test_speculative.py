"""Speculative decoding from Python (issue 34): generate(..., assistant_model=, prompt_lookup_num_tokens=) as
transformers names them. The output is plain generation's, greedy and sampled with a seed; the counts come back in
GenerateOutput.speculative; several prompts, or the model as its own assistant, are refused."""
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
                         num_assistant_tokens=4, return_dict=True)
    assert out.sequences.tolist() == plain.tolist()
    s = out.speculative
    assert s["accepted"] + 4 >= s["proposed"] > 0 and s["target_forwards"] < 10 and s["draft_forwards"] > 0
    kw = dict(max_new_tokens=16, do_sample=True, temperature=0.8, top_k=40, eos_token_id=[], seed=11)
    assert llama.generate([REPEATING], assistant_model=draft, **kw).tolist() == \
        llama.generate([REPEATING], **kw).tolist()


def test_refusals(folders, llama):
    with pytest.raises(ferry.InvalidValueError, match="one prompt"):
        llama.generate([REPEATING, REPEATING], max_new_tokens=2, prompt_lookup_num_tokens=2)
    with pytest.raises(ferry.InvalidValueError, match="itself"):
        llama.generate([REPEATING], max_new_tokens=2, assistant_model=llama)
    t5 = ferry.AutoModelForSeq2SeqLM.from_pretrained(folders["t5"])  # 96 tokens against the llama's 320
    with pytest.raises(ferry.InvalidValueError, match="vocabulary"):
        llama.generate([REPEATING], max_new_tokens=2, assistant_model=t5)
