"""``grpo-lite train``: plan the memory preset for a budget and train with GRPO, or train a recipe as written.

``--config FILE`` follows ``train(config=...)``'s rule (:meth:`~grpo_lite.recipe.recipe.Recipe.with_arguments`):
the file's values, then every flag written (even at its default), then ``--set``. A bad file is one error line.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from pathlib import Path
from typing import Any, Callable

from grpo_lite.cli.options import SHARED, add_options, parse_set
from grpo_lite.cli.relaunch import add_launch_arguments
from grpo_lite.cli.trl_form import is_trl_form
from grpo_lite.settings import flags

INTERRUPTED = (
    "interrupted: stopped without saving; a run continues from its last complete checkpoint with the "
    "same command plus --resume"
)

LAUNCH = ("num_processes", "sharding")  # flags that start processes: added with --num-processes' relaunch


def recipe_flags() -> tuple[str, ...]:
    """The options a recipe also holds (the model and every flag of a recipe setting): with ``--config``, the ones
    typed override the file."""
    return ("model", *(name for name, setting in flags().items() if setting.recipe))


class _FromFile:
    """The default of a recipe flag under ``--config``: the file's value (a flag typed on the command line, even
    at its usual default, replaces it)."""

    def __repr__(self) -> str:
        return "the recipe's"


FROM_FILE = _FromFile()


def _with_recipe_defaults(parser: argparse.ArgumentParser) -> Callable[..., Any]:
    """``parser.parse_known_args`` as TRL's ``TrlParser`` reads a config: ``--config`` alone first, then, with a
    file, every recipe flag's default is :data:`FROM_FILE` and the command line is parsed once."""
    parse, usual = parser.parse_known_args, {key: parser.get_default(key) for key in recipe_flags()}
    config = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    config.add_argument("--config")
    from_file = {key: FROM_FILE for key in recipe_flags() if key != "rewards"}  # --reward appends to its default

    def parse_known_args(args: list[str] | None = None, namespace: Any = None) -> Any:
        if args is not None and is_trl_form(args):  # trl grpo's arguments: TRL's parser reads them in run_trl
            return argparse.Namespace(_run=run_trl, _interrupted=INTERRUPTED, trl_argv=list(args)), []
        try:
            given = config.parse_known_args(args)[0].config
        except argparse.ArgumentError:  # "--config" without a file: the full parse says so
            given = None
        parser.set_defaults(**(usual if given is None else from_file))
        return parse(args, namespace)

    return parse_known_args


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "train",
        help="train a model with GRPO under a memory budget",
        description="Pick the memory preset that fits --budget-gb (or the detected GPU), then train with TRL's "
        "GRPOTrainer on GSM8K (or --dataset) with the XML-format and correctness rewards. Also takes trl grpo's "
        "arguments as they are (--model_name_or_path MODEL ..., or --config with trl grpo's YAML): docs/from_trl.md.",
    )
    p.add_argument(
        "model", nargs="?", default=None, help=SHARED["model"][1]["help"] + " (or the recipe's, with --config)"
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="train a recipe (grpo-lite plan MODEL --write FILE) with every setting as written; flags and "
        "--set override its values",
    )
    add_options(p, *(name for name in flags() if name not in LAUNCH))  # every setting's flag, in the table's order
    p.add_argument("--problem-choice", dest="removed_problem_choice", help=argparse.SUPPRESS)  # 0.6.0: its error
    add_options(p, "set")
    add_launch_arguments(p)  # --num-processes N, --sharding
    p.parse_known_args = _with_recipe_defaults(p)  # type: ignore[method-assign]
    return p


def run(args: argparse.Namespace) -> int:
    from grpo_lite.cli.relaunch import maybe_relaunch
    from grpo_lite.scale.distributed import in_launched_process

    if args.config is None and args.model is None:
        from grpo_lite.errors import ConfigError

        raise ConfigError(
            "grpo-lite train needs a MODEL, or --config FILE (a recipe: grpo-lite plan MODEL --write FILE)"
        )
    if args.removed_problem_choice is not None:
        from grpo_lite.recipe.values import refuse_removed

        refuse_removed({"problem_choice": args.removed_problem_choice}, "--problem-choice: ")
    overrides = parse_set(args.set, own_options=vars(args))
    recipe = _recipe(args, overrides) if args.config is not None else None
    if args.num_processes > 1 and not in_launched_process():
        _check_before_launch(args, overrides, recipe)
    code = maybe_relaunch(args)  # reruns this command under N processes when asked
    if code is not None:
        return code
    return _trained(args, lambda: _train(args, recipe, overrides), args.output_dir)


def run_trl(args: argparse.Namespace) -> int:
    """``grpo-lite train`` with ``trl grpo``'s arguments (:mod:`grpo_lite.cli.trl_form`): one train() call."""
    from grpo_lite.api import train
    from grpo_lite.cli.trl_form import train_arguments, trl_spelling
    from grpo_lite.errors import spelling

    kwargs = train_arguments(args.trl_argv)
    with spelling(trl_spelling):  # what the run says to change, spelled as this command takes it
        return _trained(args, lambda: train(**kwargs), kwargs.get("output_dir"))


def _trained(args: argparse.Namespace, call: Callable[[], Any], output_dir: Any) -> int:
    """Run ``call`` (a train() call) and say how it ended: the exit code, the last line."""
    try:
        result = call()
    except KeyboardInterrupt as exc:  # stopped without saving: what the folder now holds decides what to say
        folder = getattr(exc, "output_dir", None) or output_dir
        args._interrupted = interrupted_line(Path(folder) if folder is not None else None)
        raise
    if result.interrupted:  # 130 after Ctrl-C, 143 after SIGTERM: the shell's code for the signal
        import signal

        return 128 + signal.Signals[result.stop_signal or "SIGINT"].value
    if result.already_finished:  # train() said so; nothing was trained
        return 0
    print(f"trained {result.steps} steps in {result.wall_seconds:.0f} s; model in {result.model_dir}")
    return 0


def interrupted_line(folder: Path | None) -> str:
    """What a run stopped without saving leaves, and the command that goes on from it (:data:`INTERRUPTED` when the
    folder is not known)."""
    if folder is None:
        return INTERRUPTED
    if not folder.exists():
        return (
            f"interrupted before the run wrote anything: nothing was kept ({folder} is removed); run the same "
            "command again"
        )
    from grpo_lite.training.run.checkpoints import scan

    newest = scan(folder).newest
    if newest is None:
        return (
            f"interrupted: stopped without saving, before the first complete checkpoint in {folder}: nothing to "
            "resume; start again with the same command plus --overwrite"
        )
    return (
        f"interrupted: stopped without saving; the run in {folder} continues from its last complete checkpoint "
        f"({newest.name}) with the same command plus --resume"
    )


def _check_before_launch(args: argparse.Namespace, overrides: dict[str, Any], recipe: Any) -> None:
    """What can be checked before ``--num-processes N`` starts its ranks (a rank's error would come back once per
    rank, inside the launcher's traceback): the settings, the prompts against the model's context, the folder, its
    lock and another run in it (as one process refuses it). Each rank checks again, and takes the lock."""
    from grpo_lite.recipe.recipe import Recipe
    from grpo_lite.recipe.values import check_overrides
    from grpo_lite.rewards import resolve_rewards
    from grpo_lite.training.prepare import check_inputs
    from grpo_lite.training.run.folder import check_output_dir, guard_output_dir
    from grpo_lite.training.run.lock import RunLock

    check_overrides(overrides, n_rewards=len(resolve_rewards(args.rewards, weights=False)))  # each rank loads them
    if recipe is None:  # the run train() will make: the flags and --set as a recipe, the preset the planner's
        recipe = Recipe(args.model, None, dataset=args.dataset, seed=args.seed, answer_kind=args.answer_kind)
        recipe = recipe.with_overrides(**overrides)
    check_inputs(recipe, args.skip_invalid, recipe.trl.get("max_completion_length"))
    if args.output_dir is not None:
        check_output_dir(Path(args.output_dir))
        RunLock.check(Path(args.output_dir))  # raises when a live run holds the folder
        if not args.overwrite:  # another run's folder without --resume is refused before the launcher touches it
            guard_output_dir(Path(args.output_dir), resume=args.resume, overwrite=False)


def _recipe(args: argparse.Namespace, overrides: dict[str, Any]) -> Any:
    """The recipe with the flags written and --set applied; the launch (processes, sharding, model) follows it."""
    from grpo_lite.recipe.recipe import Recipe

    typed = {key: getattr(args, key) for key in recipe_flags()}
    written = {key: value for key, value in typed.items() if value is not FROM_FILE and value is not None}
    recipe = Recipe.with_arguments(args.config, {**written, **overrides})
    if "sharding" not in written and recipe.sharding == "none" and recipe.num_processes > 1:
        recipe = recipe.with_overrides(sharding=None)  # a one-process recipe launched on more: the planner splits
    fields = {field.name for field in dataclasses.fields(recipe)} - {"rewards"}
    for key in fields.intersection(recipe_flags()):  # what the relaunch reads, and writes back for each rank
        setattr(args, key, getattr(recipe, key))
    return recipe


def _train(args: argparse.Namespace, recipe: Any, overrides: dict[str, Any]) -> Any:
    """train() with the recipe (its settings already hold the flags and --set), or with the flags and --set."""
    from grpo_lite.api import train

    run = {key: getattr(args, key) for key, setting in flags().items() if not setting.recipe}
    if recipe is not None:
        return train(config=recipe, **run)
    named = inspect.signature(train).parameters
    own = {key: getattr(args, key) for key in recipe_flags() if key not in LAUNCH}
    passed = {key: value for key, value in own.items() if key in named or value is not None}  # a GRPOConfig field's
    return train(**passed, **run, **overrides)
