#!/usr/bin/env python3
"""Renders every chat template of tests/data/chat_templates with transformers' own rendering path, for
tests/text/jinja_oracle_test.cc (ferry's Jinja engine must match byte for byte).

For each template and each case (a message list, add_generation_prompt, tools, extra template variables) it calls
transformers.utils.chat_template_utils.render_jinja_template exactly as tokenizer.apply_chat_template(tokenize=False)
does: messages normalized with _normalize_chat_messages (null values dropped), the template's special tokens as
keyword arguments, then the extra variables. strftime_now() is given a fixed clock (2024-07-26 12:00:00, local
time) by replacing the module's `datetime`, and the C++ side passes the same time, so templates that print the
date are compared too. A template that jinja2 cannot compile is recorded as {"compile_error"}; a render that raises
(raise_exception, undefined attribute, ...) as {"error"}; ferry must then fail too.

Usage: jinja_oracle.py --out DIR [--corpus tests/data/chat_templates]  -> DIR/oracle.json
Exit code 77 (with the reason on stderr) when transformers or jinja2 cannot be imported.
"""
import argparse
import datetime as _datetime
import json
import os
import sys

try:
    import jinja2
    import transformers
    from transformers.utils import chat_template_utils as ctu
except Exception as e:  # pragma: no cover - environment check
    print(f"transformers/jinja2 not importable: {e}", file=sys.stderr)
    sys.exit(77)

FIXED_NOW = _datetime.datetime(2024, 7, 26, 12, 0, 0)


class _FixedDatetime(_datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return FIXED_NOW


ctu.datetime = _FixedDatetime

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city, in \"celsius\" or 'fahrenheit'.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city, e.g. Zürich"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1.5},
                },
                "required": ["city"],
            },
        },
    }
]

ODD = "Quotes ' and \" and a backslash \\ \n\tTabbed, {{ not a tag }} {% raw %} — é 日本語 🙂  "

CASES = [
    {"messages": [{"role": "user", "content": "Hello!"}]},
    {"messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hi there"}]},
    {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "2+2 = 4."},
            {"role": "user", "content": "And 3+3?"},
        ]
    },
    {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": "Blue"},
        ]
    },
    {"messages": [{"role": "user", "content": ODD}, {"role": "assistant", "content": "  padded\n\n"}, {"role": "user", "content": ""}]},
    {"messages": [{"role": "assistant", "content": "I speak first."}, {"role": "user", "content": "ok"}]},
    {"messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]},
    {"messages": [{"role": "system", "content": ""}, {"role": "user", "content": "x", "name": "bob"}]},
    {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS},
    {
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}
                ],
            },
            {"role": "tool", "content": "{\"temp\": 22.5}", "tool_call_id": "call_1", "name": "get_weather"},
        ],
        "tools": TOOLS,
    },
    {
        "messages": [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}
                ],
            },
            {"role": "tool", "content": "cold", "tool_call_id": "call_9"},
            {"role": "assistant", "content": "It is cold."},
        ],
        "tools": TOOLS,
    },
    {
        "messages": [
            {"role": "user", "content": "Think first."},
            {"role": "assistant", "content": "The answer is 42.", "reasoning_content": "Let me think... 6*7."},
            {"role": "user", "content": "Again"},
        ],
        "extra": {"enable_thinking": False},
    },
    {"messages": [{"role": "user", "content": "Today?"}], "extra": {"date_string": "1 Jan 2025", "custom_flag": True}},
    {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Describe"}, {"type": "image"}]},
        ]
    },
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--corpus", default=os.path.join(os.path.dirname(__file__), "..", "data", "chat_templates"))
    args = ap.parse_args()
    corpus = os.path.abspath(args.corpus)
    with open(os.path.join(corpus, "special_tokens.json"), encoding="utf-8") as f:
        special = json.load(f)
    files = sorted(n for n in os.listdir(corpus) if n.endswith(".jinja"))
    cases = []
    for case in CASES:
        for agp in (True, False):
            c = dict(case)
            c["add_generation_prompt"] = agp
            cases.append(c)
    templates = []
    for name in files:
        with open(os.path.join(corpus, name), encoding="utf-8") as f:
            source = f.read()
        entry = {"file": name, "special_tokens": special.get(name, {}), "results": []}
        try:
            ctu._compile_jinja_template(source)
        except Exception as e:
            entry["compile_error"] = f"{type(e).__name__}: {e}"
            templates.append(entry)
            continue
        for case in cases:
            messages = ctu._normalize_chat_messages(json.loads(json.dumps(case["messages"])))
            kwargs = dict(entry["special_tokens"])
            kwargs.update(case.get("extra", {}))
            try:
                rendered, _ = ctu.render_jinja_template(
                    conversations=[messages],
                    tools=case.get("tools"),
                    chat_template=source,
                    add_generation_prompt=case["add_generation_prompt"],
                    **kwargs,
                )
                entry["results"].append({"output": rendered[0]})
            except Exception as e:
                entry["results"].append({"error": f"{type(e).__name__}: {e}"})
        templates.append(entry)
    out = {
        "transformers_version": transformers.__version__,
        "jinja2_version": jinja2.__version__,
        "now": FIXED_NOW.isoformat(),
        "cases": cases,
        "templates": templates,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "oracle.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
