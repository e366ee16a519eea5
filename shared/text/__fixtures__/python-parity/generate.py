"""Writes the Python Jinja renderings the python-parity test compares with (shared/text/__golden__/python-parity/).

Run on purpose only, when cases.json or a template changes, with a Python that has transformers:
    trainer/.venv/bin/python shared/text/__fixtures__/python-parity/generate.py
Renders (or records the refusal of) every shipped template (differential.py's list) and values.jinja over each
conversation of cases.json as serving does: transformers' apply_chat_template environment (its own `tojson`), tool-call
arguments parsed with json.loads (invalid JSON left as the text; kept as text for DeepSeek-V3.1, as the pipeline's probe
finds), a null content of a tool-calling turn as ''.
"""
from __future__ import annotations

import json

from transformers.utils.chat_template_utils import _compile_jinja_template

from differential import here, root, template_message, templates as shipped  # noqa: F401 (root: figure.py)

text_dir = here.parent.parent
out_dir = text_dir / "__golden__" / "python-parity"

templates = {**shipped, "values": (here / "values.jinja").read_text(encoding="utf-8")}

# How the pipeline hands tool-calling turns to each template (its probe, template-features.ts; python-parity.golden.test.ts
# checks the probe still says so): DeepSeek-V3.1 concatenates the arguments as text, the others read them parsed.
default_conventions = {"toolCallContent": "empty-string", "toolArguments": "object"}
conventions = {"deepseek_v3_1": {"toolCallContent": "empty-string", "toolArguments": "string"}}


def main() -> None:
    cases = json.loads((here / "cases.json").read_text(encoding="utf-8"))
    for name, source in templates.items():
        template = _compile_jinja_template(source)
        (out_dir / name).mkdir(parents=True, exist_ok=True)
        for conversation in cases["conversations"]:
            try:
                text = template.render(
                    messages=[
                        template_message(message, conventions.get(name, default_conventions))
                        for message in conversation["messages"]
                    ],
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
