#!/usr/bin/env python3
"""transformers' chat prompt ids for a GGUF file: AutoTokenizer.from_pretrained(dir, gguf_file=...) then
apply_chat_template(messages, add_generation_prompt=True, tokenize=True). Prints the ids as JSON.

  gguf_chat_ids.py FILE.gguf MESSAGES_JSON
"""
import json
import os
import sys

from transformers import AutoTokenizer


def main():
    path, messages = sys.argv[1], json.loads(sys.argv[2])
    tok = AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if not isinstance(ids, list):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    print(json.dumps(ids))


if __name__ == "__main__":
    main()
