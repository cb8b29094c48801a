"""The options the subcommands share (added with :func:`add_options`): each setting's from its declaration in
:class:`grpo_lite.settings.LiteArguments`, the others in :data:`SHARED`; and the parsers of their values.
"""

from __future__ import annotations

import argparse
import ast
import math
from typing import Any, Iterable

from grpo_lite.defaults import GPU
from grpo_lite.errors import ConfigError
from grpo_lite.recipe.values import none_is_text
from grpo_lite.settings import PLANNER, Setting, settings


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
        value = _value(raw)
        out[key] = raw.strip() if value is None and none_is_text(key) else value  # scale_rewards=none: TRL's text
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


# how a setting's value is read on the command line, where its type alone does not say
_READ: dict[str, dict[str, Any]] = {
    "budget_gb": {"type": parse_budget},
    "rewards": {"action": "append", "dest": "rewards", "metavar": "NAME"},
    "num_processes": {"metavar": "N"},
}


def setting_option(setting: Setting) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A setting's option, all from its declaration (its :class:`~grpo_lite.settings.LiteArguments` field): its flag, help, default,
    choices, and a type from its Python type or range (a value with neither is read as :func:`_value` reads it).

    >>> setting_option(settings()["seed"])
    (('--seed',), {'help': 'seed (default 0)', 'default': 0, 'type': <class 'int'>})
    """
    assert setting.flag is not None, setting.name
    kwargs: dict[str, Any] = {"help": setting.help, "default": None if setting.default is PLANNER else setting.default}
    if setting.type is bool:
        kwargs["action"] = argparse.BooleanOptionalAction if setting.default else "store_true"
    elif setting.choices is not None:
        kwargs["choices"] = setting.choices
    elif setting.type in (int, float):
        kwargs["type"] = setting.type
    elif setting.range is not None:
        kwargs["type"] = int if setting.range.whole else float
    elif setting.type is None and setting.goes != "run":
        kwargs["type"] = _value  # a GRPOConfig field: typed by TRL's parser where it enters
    return (setting.flag,), {**kwargs, **_READ.get(setting.name, {})}


# option name -> (flags, argparse keyword arguments): every setting's flag from its declaration, and the options
# that are not settings
SHARED: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "model": (("model",), {"help": settings()["model"].help}),
    "json": (("--json",), {"action": "store_true", "help": "print one JSON object instead of tables"}),
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
        flags, kwargs = SHARED[name] if name in SHARED else setting_option(settings()[name])
        if name in defaults:
            kwargs = {**kwargs, "default": defaults[name]}
        parser.add_argument(*flags, **kwargs)
