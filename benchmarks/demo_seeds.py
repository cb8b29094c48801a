"""The demo over several seeds: does it learn to be right, not only to be formatted?

Runs ``grpo-lite demo --seed S --output-dir OUT/demo_seedS`` for each seed, one after the other in
fresh processes (stdout kept in ``OUT/demo_seedS.log``), then prints one row per seed: accuracy and
accuracy among well-formatted answers before -> after on the held-out problems (greedy), the format
rate, the training correctness reward (the share of sampled completions that were right, from
``run.json``) over the first and the second half of the steps, and the wall time.

    python benchmarks/demo_seeds.py --seeds 0 1 2 --out runs/seeds       # about 5-6 minutes a seed on 2 cores
    python benchmarks/demo_seeds.py --seeds 0 1 2 --out runs/seeds --summarize   # the table from earlier runs
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

_EVAL = re.compile(r"^(before|after): accuracy ([\d.]+)%, format ([\d.]+)%, among formatted ([\d.]+)%")
_TOOK = re.compile(r"^demo took (\d+) s")


def run_seed(seed: int, out: Path, extra: list[str]) -> None:
    log = out / f"demo_seed{seed}.log"
    cmd = [
        sys.executable,
        "-m",
        "grpo_lite",
        "demo",
        "--seed",
        str(seed),
        "--output-dir",
        str(out / f"demo_seed{seed}"),
        *extra,
    ]
    with log.open("w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True)


def summarize(seed: int, out: Path) -> dict:
    text = (out / f"demo_seed{seed}.log").read_text(errors="replace").splitlines()
    row: dict = {"seed": seed}
    for line in text:
        line = line.strip()
        if m := _EVAL.match(line):
            row[m[1]] = {"accuracy": float(m[2]), "format": float(m[3]), "formatted_accuracy": float(m[4])}
        elif m := _TOOK.match(line):
            row["seconds"] = int(m[1])
    history = json.loads((out / f"demo_seed{seed}" / "run.json").read_text())["history"]
    from grpo_lite.rewards import correctness_reward

    full = correctness_reward.value  # the reward a right answer earns
    correct = [h["rewards/correctness_reward/mean"] / full for h in history if "rewards/correctness_reward/mean" in h]
    half = len(correct) // 2
    row["correct_first_half"] = 100 * sum(correct[:half]) / max(1, half)
    row["correct_second_half"] = 100 * sum(correct[half:]) / max(1, len(correct) - half)
    row["steps_with_a_right_answer"] = sum(c > 0 for c in correct)
    row["steps"] = len(correct)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("runs/seeds"))
    parser.add_argument("--summarize", action="store_true", help="only read OUT's logs and run.json files")
    args, extra = parser.parse_known_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.summarize:
        for seed in args.seeds:
            run_seed(seed, args.out, extra)
    print(
        "| seed | accuracy before -> after | among formatted before -> after | format before -> after "
        "| training correct %, first -> second half | steps with a right sample | wall s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for seed in args.seeds:
        r = summarize(seed, args.out)
        b, a = r["before"], r["after"]
        print(
            f"| {seed} | {b['accuracy']:.0f}% -> {a['accuracy']:.0f}% | {b['formatted_accuracy']:.1f}% -> "
            f"{a['formatted_accuracy']:.1f}% | {b['format']:.0f}% -> {a['format']:.0f}% | "
            f"{r['correct_first_half']:.1f} -> {r['correct_second_half']:.1f} | {r['steps_with_a_right_answer']} of "
            f"{r['steps']} | {r.get('seconds', '-')} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
