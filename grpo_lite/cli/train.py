"""``grpo-lite train``: plan the memory preset for a budget and train with GRPO, or train a recipe as written.

``--config FILE`` reads a recipe (``grpo-lite plan MODEL --write FILE``) the way TRL's CLI reads its
``--config`` (``TrlParser.parse_args_and_config``): the file's values become the defaults of the flags,
then the command line is parsed, so a flag given wins over the file, and ``--set KEY=VALUE`` over its
``trl:``, ``lora:`` and loading settings.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from grpo_lite.cli.options import SHARED, add_options, parse_set
from grpo_lite.cli.relaunch import add_launch_arguments

__all__ = ["add_parser", "run"]

# flags whose default a recipe sets (its keys carry the same names as the flags' dests)
RECIPE_FLAGS = ("model", "budget_gb", "dataset", "preset", "seed", "max_steps", "shared_prefix", "num_processes",
                "sharding")


def _config_value(argv: list[str]) -> str | None:
    """The path after ``--config`` (or in ``--config=PATH``), if any."""
    for i, word in enumerate(argv):
        if word == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith("--config="):
            return word.split("=", 1)[1]
    return None


def _reading_config(parser: argparse.ArgumentParser, parse: Callable[..., Any]) -> Callable[..., Any]:
    """``parser.parse_known_args`` that first makes a ``--config`` recipe's values the flags' defaults (TRL's rule)."""

    def parse_known_args(args: list[str] | None = None, namespace: Any = None) -> Any:
        path = _config_value(list(args or []))
        if path is not None and Path(path).is_file():  # a missing file is reported by run(), as one error line
            from grpo_lite.recipe.recipe import Recipe

            values = Recipe.read(path).to_dict()
            for action in parser._actions:  # argparse keeps its actions here; TrlParser walks them the same way
                if action.dest in RECIPE_FLAGS:
                    action.default = values[action.dest]
        return parse(args, namespace)

    return parse_known_args


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "train",
        help="train a model with GRPO under a memory budget",
        description="Pick the memory preset that fits --budget-gb (or the detected GPU), then train with TRL's "
        "GRPOTrainer on GSM8K (or --dataset) with the XML-format and correctness rewards.",
    )
    p.add_argument("model", nargs="?", default=None, help=SHARED["model"][1]["help"] + " (or the recipe's, with --config)")
    add_options(p, "budget_gb", "dataset", "skip_invalid")
    p.add_argument("--config", metavar="FILE", default=None,
                   help="train a recipe (grpo-lite plan MODEL --write FILE) with every setting as written; flags and "
                   "--set override its values")
    p.add_argument("--reward", action="append", dest="rewards", metavar="NAME", help="reward name (repeatable; default: the GSM8K set)")
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps (default: one epoch)")
    add_options(p, "output_dir", "method", "preset", "seed", "shared_prefix", "show_plan")
    p.add_argument("--resume", action="store_true", help="continue from the newest complete checkpoint in --output-dir")
    p.add_argument("--overwrite", action="store_true", help="replace a run already in --output-dir")
    p.add_argument("--on-oom", choices=("step_down", "raise"), default="step_down",
                   help="on CUDA out-of-memory: step down the preset ladder and go on (default), or stop")
    p.add_argument("--on-stall", choices=("warn", "adapt"), default="warn",
                   help="when the run is not learning: print the cause and a remedy (default), or also raise "
                   "max_completion_length at the next checkpoint when most completions are cut (docs/health.md)")
    add_options(p, "set")
    add_launch_arguments(p)  # --num-processes N, --sharding
    p.parse_known_args = _reading_config(p, p.parse_known_args)  # type: ignore[method-assign]  # --config first
    return p


def run(args: argparse.Namespace) -> int:
    from grpo_lite.cli.relaunch import maybe_relaunch
    from grpo_lite.scale.distributed import in_launched_process

    if args.config is None and args.model is None:
        from grpo_lite.errors import ConfigError

        raise ConfigError("grpo-lite train needs a MODEL, or --config FILE (a recipe: grpo-lite plan MODEL --write FILE)")
    if args.config is not None and args.sharding == "none" and args.num_processes > 1:
        args.sharding = None  # a one-process recipe launched on more: the planner (or --sharding) splits the state
    overrides = parse_set(args.set, own_options=vars(args))
    if args.num_processes > 1 and not in_launched_process():  # settle what it can before the ranks start
        from grpo_lite.rewards import resolve_rewards
        from grpo_lite.training.checks import check_before_launch

        check_before_launch(args.output_dir, overrides, n_rewards=len(resolve_rewards(args.rewards)))
    code = maybe_relaunch(args)  # reruns this command under N processes when asked
    if code is not None:
        return code
    result = _train_recipe(args, overrides) if args.config is not None else _train_model(args, overrides)
    if result.interrupted:
        return 130
    print(f"trained {result.steps} steps in {result.wall_seconds:.0f} s; model in {result.model_dir}")
    return 0


def _train_recipe(args: argparse.Namespace, overrides: dict[str, Any]) -> Any:
    """The recipe with the command line's values (the flags' defaults were the recipe's) and --set applied."""
    from grpo_lite.recipe.recipe import Recipe
    from grpo_lite.training.trainer import train

    values = {key: getattr(args, key) for key in RECIPE_FLAGS}
    if args.rewards:
        values["rewards"] = args.rewards
    recipe = Recipe.read(args.config).with_overrides(**values, **overrides)
    return train(config=recipe, output_dir=args.output_dir, method=args.method, resume=args.resume,
                 overwrite=args.overwrite, on_oom=args.on_oom, on_stall=args.on_stall, skip_invalid=args.skip_invalid,
                 show_plan=args.show_plan)


def _train_model(args: argparse.Namespace, overrides: dict[str, Any]) -> Any:
    from grpo_lite.training.trainer import train

    return train(
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
        on_stall=args.on_stall,
        shared_prefix=args.shared_prefix,
        skip_invalid=args.skip_invalid,
        show_plan=args.show_plan,
        **overrides,
    )
