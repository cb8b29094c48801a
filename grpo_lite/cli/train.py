"""``grpo-lite train``: plan the memory preset for a budget and train with GRPO."""

from __future__ import annotations

import argparse

from grpo_lite.cli.options import add_options, parse_set
from grpo_lite.cli.relaunch import add_launch_arguments

__all__ = ["add_parser", "run"]


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "train",
        help="train a model with GRPO under a memory budget",
        description="Pick the memory preset that fits --budget-gb (or the detected GPU), then train with TRL's "
        "GRPOTrainer on GSM8K (or --dataset) with the XML-format and correctness rewards.",
    )
    add_options(p, "model", "budget_gb", "dataset")
    p.add_argument("--reward", action="append", dest="rewards", metavar="NAME", help="reward name (repeatable; default: the GSM8K set)")
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps (default: one epoch)")
    add_options(p, "output_dir", "method", "preset", "seed", "shared_prefix", "show_plan")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output-dir")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --output-dir")
    p.add_argument("--on-oom", choices=("step_down", "raise"), default="step_down",
                   help="on CUDA out-of-memory: step down the preset ladder and go on (default), or stop")
    add_options(p, "set")
    add_launch_arguments(p)  # --num-processes N, --sharding
    return p


def run(args: argparse.Namespace) -> int:
    from grpo_lite.cli.relaunch import maybe_relaunch

    code = maybe_relaunch(args)  # reruns this command under N processes when asked
    if code is not None:
        return code
    from grpo_lite.training.trainer import train

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
        shared_prefix=args.shared_prefix,
        show_plan=args.show_plan,
        **parse_set(args.set, own_options=vars(args)),
    )
    if result.interrupted:
        return 130
    print(f"trained {result.steps} steps in {result.wall_seconds:.0f} s; model in {result.model_dir}")
    return 0
