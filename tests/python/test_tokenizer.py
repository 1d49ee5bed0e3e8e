"""ferry.AutoTokenizer against the `tokenizers` package and transformers on the same tokenizer.json."""

import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerFast

import ferry

TEXTS = ["The capital of France is Paris.", "  odd   spacing\tand tabs\n", "ünïcödé ✓ 漢字", "", "12345 #@%&"]


@pytest.fixture(scope="module")
def both(folders):
    path = folders["llama"]
    return ferry.AutoTokenizer.from_pretrained(path), PreTrainedTokenizerFast(tokenizer_file=path + "/tokenizer.json")


def test_encode_decode_match_transformers(both):
    ours, theirs = both
    for text in TEXTS:
        ids = ours.encode(text)
        assert ids == theirs(text)["input_ids"]
        assert ours.encode(text, add_special_tokens=False) == theirs(text, add_special_tokens=False)["input_ids"]
        assert ours.decode(ids) == theirs.decode(ids)
        assert ours.decode(ids, skip_special_tokens=True) == theirs.decode(ids, skip_special_tokens=True)


def test_call_and_tensors(both):
    ours, theirs = both
    out = ours(TEXTS[0])
    assert out["input_ids"] == theirs(TEXTS[0])["input_ids"]
    assert out["attention_mask"] == [1] * len(out["input_ids"])
    batch = ours(TEXTS)
    assert batch["input_ids"] == theirs(TEXTS)["input_ids"]
    arr = ours(TEXTS[0], return_tensors="np")["input_ids"]
    assert arr.shape == (1, len(out["input_ids"])) and arr.dtype == np.int64
    pt = ours(TEXTS[0], return_tensors="pt")["input_ids"]
    assert torch.equal(pt, theirs(TEXTS[0], return_tensors="pt")["input_ids"])
    with pytest.raises(ValueError):
        ours(TEXTS, return_tensors="np")  # different lengths, no padding


def test_vocabulary_lookups(both):
    ours, theirs = both
    assert ours.vocab_size == len(theirs) == len(ours)
    assert ours.convert_tokens_to_ids("</s>") == 2
    assert ours.convert_ids_to_tokens(1) == "<s>"
    assert ours.convert_tokens_to_ids("no such token") is None
    assert set(ours.all_special_ids) == {0, 1, 2}
    ids = np.array([ours.encode("Paris")])
    assert ours.decode(ids) == ours.decode(ids[0].tolist())
    assert ours.batch_decode([[1, 5], [1, 6]]) == [ours.decode([1, 5]), ours.decode([1, 6])]


def test_missing_tokenizer_is_file_not_found(folders):
    with pytest.raises(FileNotFoundError, match="tokenizer.json not found"):
        ferry.AutoTokenizer.from_pretrained(folders["t5"])


def test_apply_chat_template_matches_transformers(folders):
    from transformers import AutoTokenizer

    ours = ferry.AutoTokenizer.from_pretrained(folders["llama"])
    theirs = AutoTokenizer.from_pretrained(folders["llama"])
    chats = [
        [{"role": "user", "content": "What is the capital of France?"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": " Hi "},
         {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Paris?"}],
    ]
    for chat in chats:
        for gen in (False, True):
            text = ours.apply_chat_template(chat, tokenize=False, add_generation_prompt=gen)
            assert text == theirs.apply_chat_template(chat, tokenize=False, add_generation_prompt=gen)
            ids = ours.apply_chat_template(chat, add_generation_prompt=gen)
            expected = theirs.apply_chat_template(chat, add_generation_prompt=gen)
            expected = expected["input_ids"] if isinstance(expected, dict) or hasattr(expected, "keys") else expected
            assert ids == list(expected)
    assert ours.apply_chat_template(chats[0], return_tensors="np").shape[0] == 1
    assert ours.apply_chat_template(chats[0], tokenize=False, chat_template="{{ messages[0]['content'] }}") == \
        chats[0][0]["content"]
    model = ferry.AutoModelForCausalLM.from_pretrained(folders["llama"])
    assert model.tokenizer.chat_template == ours.chat_template
    prompt = model.tokenizer.apply_chat_template(chats[0], tokenize=False, add_generation_prompt=True)
    assert isinstance(model.generate(prompt, max_new_tokens=4, add_special_tokens=False), str)


def test_no_chat_template_is_a_value_error(folders, tmp_path):
    import shutil

    shutil.copy(folders["llama"] + "/tokenizer.json", tmp_path / "tokenizer.json")
    tok = ferry.AutoTokenizer.from_pretrained(tmp_path)
    assert tok.chat_template is None
    with pytest.raises(ValueError, match="no chat template"):
        tok.apply_chat_template([{"role": "user", "content": "hi"}])
