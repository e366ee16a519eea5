"""Seeded conversations over the live-host harness tools and their Python Jinja renderings, for
bench/template-parity.bench.ts (which renders the same conversations here and counts equal texts).

    trainer/.venv/bin/python shared/text/__fixtures__/python-parity/figure.py OUT_DIR [COUNT] [SEED]

Writes OUT_DIR/cases.json ({tools, conversations}) and OUT_DIR/python.json ({template: [text, ...]},
null where the template refused). Arguments mix booleans, nulls, ints, floats that hold integers and
others, unicode and quoted strings, nested lists and objects: the values Python prints unlike JavaScript.
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from transformers.utils.chat_template_utils import _compile_jinja_template

from generate import root, template_message, templates


def value(rng: random.Random, depth: int = 0):
    kinds = ["bool", "int", "float", "integral-float", "null", "text", "unicode"]
    kind = rng.choice(kinds + (["list", "object"] if depth < 2 else []))
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "int":
        return rng.randint(-1000, 100000)
    if kind == "float":
        return round(rng.uniform(-1000, 1000), rng.randint(1, 4))
    if kind == "integral-float":
        return float(rng.randint(0, 500))
    if kind == "null":
        return None
    if kind == "text":
        return rng.choice(["A1", "it's \"x\"", "line\nbreak", "tab\there", ""])
    if kind == "unicode":
        return rng.choice(["防晒霜", "😀 emoji", "e\u0301", "\u200bzero"])
    if kind == "list":
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{index}": value(rng, depth + 1) for index in range(rng.randint(0, 3))}


def main() -> None:
    out = Path(sys.argv[1])
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 360
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 34)
    tools = []
    for file in sorted((root / "examples/harness/live-host/tools").glob("*.json")):
        tool = json.loads(file.read_text(encoding="utf-8"))
        tool.pop("x-hat-binding", None)
        tools.append(tool)
    conversations = []
    for number in range(count):
        calls = []
        for index in range(rng.randint(1, 2)):
            function = rng.choice(tools)["function"]
            arguments = {name: value(rng) for name in function["parameters"].get("properties", {})}
            calls.append(
                {
                    "id": f"call{number:04d}{index}",
                    "type": "function",
                    "function": {"name": function["name"], "arguments": json.dumps(arguments, ensure_ascii=False)},
                }
            )
        messages = [
            {"role": "system", "content": "你是直播间的带货助手。"},
            {"role": "user", "content": f"question {number}"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": call["id"], "content": '{"ok": true}'} for call in calls),
            {"role": "assistant", "content": "done"},
        ]
        conversations.append({"name": f"c{number}", "messages": messages})
    renderings: dict[str, list[str | None]] = {}
    for name in ["qwen3", "qwen3_5", "qwen3_coder"]:
        template = _compile_jinja_template(templates[name])
        texts: list[str | None] = []
        for conversation in conversations:
            try:
                texts.append(
                    template.render(
                        messages=[template_message(message) for message in conversation["messages"]],
                        tools=tools,
                        add_generation_prompt=False,
                        bos_token="<s>",
                        eos_token="</s>",
                    )
                )
            except Exception:  # a refusal: counted as a refusal on both sides
                texts.append(None)
        renderings[name] = texts
    out.mkdir(parents=True, exist_ok=True)
    (out / "cases.json").write_text(json.dumps({"tools": tools, "conversations": conversations}, ensure_ascii=False))
    (out / "python.json").write_text(json.dumps(renderings, ensure_ascii=False))


if __name__ == "__main__":
    main()
