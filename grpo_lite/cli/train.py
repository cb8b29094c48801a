"""``grpo-lite train``: plan the memory preset for a budget and train with GRPO."""

from __future__ import annotations

import argparse
from typing import get_args

from grpo_lite.step_settings import Method
from grpo_lite.cli._common import add_set_argument, parse_budget, parse_set
from grpo_lite.relaunch import add_launch_arguments

__all__ = ["add_parser", "run"]

METHODS: tuple[str, ...] = get_args(Method)


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "train",
        help="train a model with GRPO under a memory budget",
        description="Pick the memory preset that fits --budget-gb (or the detected GPU), then train with TRL's "
        "GRPOTrainer on GSM8K (or --dataset) with the XML-format and correctness rewards.",
    )
    p.add_argument("model", help="hub id, short name (Llama-3.2-1B-Instruct), local folder or .gguf file")
    p.add_argument("--budget-gb", type=parse_budget, default=None, help="GPU size in GB (default: detect)")
    p.add_argument("--dataset", default="gsm8k", help="gsm8k, synthetic, or a path (default gsm8k)")
    p.add_argument("--reward", action="append", dest="rewards", metavar="NAME", help="reward name (repeatable; default: the GSM8K set)")
    p.add_argument("--output-dir", default=None, help="run folder (default runs/<model>-<time>)")
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps (default: one epoch)")
    p.add_argument("--method", choices=METHODS, default=None, help="fix the memory method; the planner picks the rest")
    p.add_argument("--preset", default=None, help="fix a preset by name (see grpo-lite presets)")
    p.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output-dir")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --output-dir")
    p.add_argument("--on-oom", choices=("step_down", "raise"), default="step_down",
                   help="on CUDA out-of-memory: step down the preset ladder and go on (default), or stop")
    add_set_argument(p)
    add_launch_arguments(p)  # --num-processes N, --sharding
    return p


def run(args: argparse.Namespace) -> int:
    from grpo_lite.relaunch import maybe_relaunch

    code = maybe_relaunch(args)  # reruns this command under N processes when asked
    if code is not None:
        return code
    from grpo_lite.trainer import train

    result = train(
        args.model,
        args.budget_gb,
        dataset=args.dataset,
        rewards=args.rewards,
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        method=args.method,
        preset=args.preset,
        seed=args.seed,
        resume=args.resume,
        overwrite=args.overwrite,
        on_oom=args.on_oom,
        **parse_set(args.set, own_options=vars(args)),
    )
    if result.interrupted:
        return 130
    print(f"trained {result.steps} steps in {result.wall_seconds:.0f} s; model in {result.model_dir}")
    return 0
