"""Argument helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import ast
import math
from typing import Any, Iterable

from grpo_lite.errors import ConfigError

__all__ = ["add_set_argument", "parse_budget", "parse_set"]


def _value(text: str) -> Any:
    """A typed value from the command line: numbers, booleans, None, lists; anything else stays a string.

    >>> _value("1e-5"), _value("true"), _value("[1, 2]"), _value("adamw_8bit")
    (1e-05, True, [1, 2], 'adamw_8bit')
    """
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
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
    """argparse type for --budget-gb: a positive number of GB, at most 2048.

    >>> parse_budget("16")
    16.0
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--budget-gb must be a number of GB like 16, got {text!r}") from None
    if not math.isfinite(value) or value <= 0 or value > 2048:
        raise argparse.ArgumentTypeError(f"--budget-gb must be between 0 and 2048 GB, got {text!r}")
    return value


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    """Add the repeatable ``--set KEY=VALUE`` option (any GRPOConfig field or LoRA setting)."""
    parser.add_argument(
        "--set",
        dest="set",
        action="append",
        metavar="KEY=VALUE",
        help="fix a GRPOConfig/TrainingArguments field or LoRA setting (repeatable), e.g. --set learning_rate=1e-5",
    )
