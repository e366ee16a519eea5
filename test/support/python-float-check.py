"""The Python side of test/tool-schema-floats.int.test.ts: reads what collect, augment and shard wrote for a
harness whose tool schemas hold floats (`1.0`, `2.50`, `1e16`) and checks it the way a Python trainer and
vLLM's chat template would read it.

    trainer/.venv/bin/python test/support/python-float-check.py PLAN.json OUT.json

PLAN.json: {"harnesses": {"canonical": DIR, "<variant hash>": DIR, ...}, "trajectories": [JSONL.GZ, ...],
"exports": {"openai": [JSONL, ...], "ms-swift": [...], "llama-factory": [...]}, "verl": [PARQUET, ...],
"packed": [PARQUET, ...], "tokenizer": DIR (tokenizer.json and tokenizer_config.json with its chat template)}.

Checks, each counted in OUT.json with the first mismatches named:
- trajectories: the `tools` of every line are, byte for byte, what json.dumps(tools, separators=(',', ':'),
  ensure_ascii=False) writes for the value json.loads reads, and every tool's parameters are the tool file's
  (canonical, or the variant's for an augmented line) as json.loads reads the file (1 and 1.0 differ);
- exports: every JSONL line is what json.dumps writes for the value it holds, and its `tools` string is the
  source trajectory's tools;
- verl Parquet: the `tools` column is the openai export's tools for the same sample, the `messages` column
  what json.dumps writes;
- renderings: every packed sample, decoded with the tokenizer, equals apply_chat_template of its openai export
  record (messages, tools=json.loads(tools)), the text vLLM would feed the model.
"""
from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pyarrow.parquet as parquet
from transformers import AutoTokenizer


def dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def lines_of(path: str) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as file:
        return [line.rstrip("\n") for line in file if line.strip()]


def integral_floats(value) -> int:
    """How many floats that hold an integer (what JSON.stringify writes without `.0`) a value holds."""
    if isinstance(value, float):
        return 1 if value.is_integer() else 0
    if isinstance(value, list):
        return sum(integral_floats(item) for item in value)
    if isinstance(value, dict):
        return sum(integral_floats(item) for item in value.values())
    return 0


class Check:
    def __init__(self) -> None:
        self.checked = 0
        self.with_floats = 0
        self.mismatches: list[str] = []

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.mismatches.append(what[:600])

    def report(self) -> dict:
        return {"checked": self.checked, "withFloats": self.with_floats, "mismatches": self.mismatches[:5],
                "mismatchCount": len(self.mismatches)}


def tool_files(directory: str) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in Path(directory, "tools").glob("*.json")}


def main(plan_path: str, out_path: str) -> None:
    plan = json.loads(Path(plan_path).read_text(encoding="utf-8"))
    harnesses = {name: tool_files(directory) for name, directory in plan["harnesses"].items()}

    trajectories = Check()
    tools_by_trajectory: dict[str, str] = {}
    for path in plan["trajectories"]:
        for line in lines_of(path):
            record = json.loads(line)
            trajectories.checked += 1
            trajectories.with_floats += integral_floats(record["tools"]) > 0
            written = dumps(record["tools"])
            tools_by_trajectory[record["id"]] = written
            trajectories.expect(f'"tools":{written},"harness":' in line, f"{record['id']}: tools are not json.dumps'")
            files = harnesses.get(record["harness"].get("variantHash", "canonical"))
            trajectories.expect(files is not None, f"{record['id']}: no tool files for its harness")
            for tool in record["tools"] if files else []:
                name = tool["function"]["name"]
                expected = files.get(name, {}).get("function", {}).get("parameters")
                trajectories.expect(
                    dumps(tool["function"]["parameters"]) == dumps(expected),
                    f"{record['id']}: {name} parameters {dumps(tool['function']['parameters'])} != file {dumps(expected)}",
                )

    exports = Check()
    openai_records: dict[str, dict] = {}
    for format_name, paths in plan["exports"].items():
        for path in paths:
            for line in lines_of(path):
                record = json.loads(line)
                exports.checked += 1
                tools = json.loads(record["tools"])
                exports.with_floats += integral_floats(tools) > 0
                exports.expect(dumps(record) == line, f"{format_name} {record['id']}: line is not json.dumps'")
                exports.expect(
                    record["tools"] == tools_by_trajectory.get(record["source_id"]),
                    f"{format_name} {record['id']}: tools differ from trajectory {record['source_id']}",
                )
                if format_name == "openai":
                    openai_records.setdefault(record["source_id"], record)

    verl = Check()
    for path in plan["verl"]:
        for row in parquet.read_table(path).to_pylist():
            verl.checked += 1
            verl.with_floats += integral_floats(json.loads(row["tools"])) > 0
            openai = openai_records.get(row["source_id"])
            verl.expect(openai is not None and row["tools"] == openai["tools"], f"verl {row['id']}: tools differ")
            verl.expect(dumps(json.loads(row["messages"])) == row["messages"], f"verl {row['id']}: messages")

    renderings = Check()
    tokenizer = AutoTokenizer.from_pretrained(plan["tokenizer"])
    for path in plan["packed"]:
        for row in parquet.read_table(path).to_pylist():
            for index, source_id in enumerate(row["source_ids"]):
                ids = row["input_ids"][row["cu_seqlens"][index]:row["cu_seqlens"][index + 1]]
                shard_text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
                record = openai_records.get(source_id)
                renderings.checked += 1
                if record is None:
                    renderings.expect(False, f"{source_id}: no openai export record")
                    continue
                tools = json.loads(record["tools"])
                renderings.with_floats += integral_floats(tools) > 0
                python_text = tokenizer.apply_chat_template(
                    record["messages"], tools=tools or None, tokenize=False, add_generation_prompt=False)
                if python_text != shard_text:
                    at = next((i for i, (a, b) in enumerate(zip(python_text, shard_text)) if a != b),
                              min(len(python_text), len(shard_text)))
                    renderings.expect(False, f"{source_id}: differs at {at}: Python {python_text[at - 40:at + 40]!r}, "
                                             f"shard {shard_text[at - 40:at + 40]!r}")

    Path(out_path).write_text(json.dumps({
        "trajectories": trajectories.report(), "exports": exports.report(), "verl": verl.report(),
        "renderings": renderings.report(),
    }, ensure_ascii=False, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
