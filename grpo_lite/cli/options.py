"""The options the subcommands share, declared once in :data:`SHARED` (added with :func:`add_options`), and the
parsers of their values.
"""

from __future__ import annotations

import argparse
import ast
import math
from typing import Any, Iterable

from grpo_lite.data.answer_kinds import ANSWER_KINDS
from grpo_lite.defaults import GPU, STEP, TRAINER
from grpo_lite.errors import ConfigError
from grpo_lite.memory.settings import METHODS


def _value(text: str) -> Any:
    """A typed value from the command line: numbers, booleans, None, lists; anything else stays a string.

    >>> _value("1e-5"), _value("true"), _value("[1, 2]"), _value("adamw_8bit"), _value("nan")
    (1e-05, True, [1, 2], 'adamw_8bit', nan)
    """
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    if lowered.lstrip("+-") in ("nan", "inf", "infinity"):  # numbers, so that the range check names them
        return float(lowered)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def parse_set(items: list[str] | None, own_options: Iterable[str] = ()) -> dict[str, Any]:
    """``["learning_rate=1e-5", "num_generations=4"]`` -> ``{"learning_rate": 1e-05, "num_generations": 4}``.

    Args:
        items: the ``--set`` values.
        own_options: names the command has its own option for (``vars(args)``): setting them
            with ``--set`` is an error that names the option.

    >>> parse_set(["learning_rate=1e-5", "num_generations=4"])
    {'learning_rate': 1e-05, 'num_generations': 4}
    >>> parse_set(["max_steps=3"], own_options=["max_steps"])
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: max_steps has its own option: use --max-steps instead of --set max_steps=...
    """
    out: dict[str, Any] = {}
    own = set(own_options)
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r} (for example --set learning_rate=1e-5)")
        if key in own:
            raise ConfigError(f"{key} has its own option: use --{key.replace('_', '-')} instead of --set {key}=...")
        out[key] = _value(raw)
    return out


def parse_budget(text: str) -> float:
    """argparse type for --budget-gb: a positive number of GB, at most 2048 (``grpo_lite.defaults.GPU.max_budget_gb``).

    >>> parse_budget("16")
    16.0
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--budget-gb must be a number of GB like 16, got {text!r}") from None
    if not math.isfinite(value) or value <= 0 or value > GPU.max_budget_gb:
        raise argparse.ArgumentTypeError(f"--budget-gb must be between 0 and {GPU.max_budget_gb:g} GB, got {text!r}")
    return value


_MODEL_HELP = "hub id, short name (Llama-3.2-1B-Instruct), local folder or .gguf file"

# option name -> (flags, argparse keyword arguments); the one declaration of every shared option
SHARED: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "model": (("model",), {"help": _MODEL_HELP}),
    "budget_gb": (
        ("--budget-gb",),
        {
            "type": parse_budget,
            "default": None,
            "help": "GPU size in GB, e.g. 16, per device (default: detect the current CUDA device)",
        },
    ),
    "method": (
        ("--method",),
        {
            "choices": METHODS,
            "default": None,
            "help": "fix the memory method; the planner picks the rest of the preset",
        },
    ),
    "preset": (("--preset",), {"default": None, "help": "use exactly this preset (see grpo-lite presets)"}),
    "dataset": (
        ("--dataset",),
        {"default": TRAINER.dataset, "help": f"gsm8k, synthetic, or a path (default {TRAINER.dataset})"},
    ),
    "seed": (("--seed",), {"type": int, "default": 0, "help": "seed (default 0)"}),
    "output_dir": (("--output-dir",), {"default": None, "help": "run folder (default runs/<model>-<time>)"}),
    "shared_prefix": (
        ("--shared-prefix",),
        {
            "action": argparse.BooleanOptionalAction,
            "default": STEP.shared_prefix,
            "help": "forward each prompt once for all its completions (same "
            "log-probs, checked on the first step; default on)",
        },
    ),
    "show_plan": (
        ("--show-plan",),
        {"action": "store_true", "help": "print the whole plan (components, reasons, settings), not its summary"},
    ),
    "rewards": (
        ("--reward",),
        {
            "action": "append",
            "dest": "rewards",
            "metavar": "NAME",
            "help": "reward (repeatable): a grpo-lite or TRL reward name, or your module:function "
            "(default: the GSM8K set)",
        },
    ),
    "json": (("--json",), {"action": "store_true", "help": "print one JSON object instead of tables"}),
    "answer_kind": (
        ("--answer-kind",),
        {
            "choices": ANSWER_KINDS,
            "default": None,
            "help": "how answers compare with the golds: number, math (LaTeX), choice (a letter), text "
            "(default: the dataset's, else chosen from its golds)",
        },
    ),
    "skip_invalid": (
        ("--skip-invalid",),
        {
            "action": "store_true",
            "help": "skip dataset rows without a usable question or answer (a task: prompt; one "
            "warning gives the count) instead of stopping at the first",
        },
    ),
    "set": (
        ("--set",),
        {
            "dest": "set",
            "action": "append",
            "metavar": "KEY=VALUE",
            "help": "fix a GRPOConfig/TrainingArguments field or LoRA setting (repeatable), "
            "e.g. --set learning_rate=1e-5",
        },
    ),
}


def add_options(parser: argparse.ArgumentParser, *names: str, **defaults: Any) -> None:
    """Add the shared options ``names`` to ``parser``; ``defaults`` overrides an option's default.

    >>> p = argparse.ArgumentParser(); add_options(p, "seed", "json", seed=3)
    >>> p.parse_args([]).seed, p.parse_args(["--json"]).json
    (3, True)
    """
    for name in names:
        flags, kwargs = SHARED[name]
        if name in defaults:
            kwargs = {**kwargs, "default": defaults[name]}
        parser.add_argument(*flags, **kwargs)
