"""The one registry of built-in rewards: the names users pass, the reward objects, what each checks (docs and the
CLI render from :data:`REWARDS`), and names and callables resolved to what the trainer calls.

>>> list(REWARDS)[:3], DEFAULT_REWARDS[-1]
(['correctness', 'integer', 'strict_format'], 'xml_count')
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from grpo_lite.errors import ConfigError
from grpo_lite.rewards.functions import (
    RewardFunc,
    _Reward,
    correctness_reward,
    integer_reward,
    length_reward,
    soft_format_reward,
    strict_format_reward,
    xml_count_reward,
)
from grpo_lite.rewards.named import import_reward

__all__ = [
    "RewardName",
    "RewardSpec",
    "REWARDS",
    "DEFAULT_REWARDS",
    "get_reward",
    "resolve_rewards",
]

RewardName = Literal["correctness", "integer", "strict_format", "soft_format", "xml_count", "length"]


@dataclass(frozen=True)
class RewardSpec:
    """One registry row: the name users pass, the callable, what it checks, the most it gives."""

    name: str
    func: RewardFunc
    description: str
    max_value: float


_ROWS: tuple[tuple[str, _Reward, str], ...] = (
    ("correctness", correctness_reward, "the last number in the `<answer>` block equals the gold `answer`, as numbers"),
    ("integer", integer_reward, "the `<answer>` block is one whole number (`18`, `2,125`, `$18`, `18.00`)"),
    (
        "strict_format",
        strict_format_reward,
        "exactly `<reasoning>\\n…\\n</reasoning>\\n<answer>\\n…\\n</answer>`, nothing around; real reasoning",
    ),
    ("soft_format", soft_format_reward, "a `<reasoning>` block, then an `<answer>` block; real reasoning"),
    (
        "xml_count",
        xml_count_reward,
        f"+{xml_count_reward.value / 4} per tag present once (real reasoning), "
        f"-{xml_count_reward.trailing_penalty} per character after `</answer>`",
    ),
    ("length", length_reward, f"longer text earns more, up to {length_reward.max_chars} characters (tests, demos)"),
)
REWARDS: dict[str, RewardSpec] = {name: RewardSpec(name, func, text, func.value) for name, func, text in _ROWS}

DEFAULT_REWARDS: tuple[str, ...] = ("correctness", "integer", "strict_format", "soft_format", "xml_count")
"""The five GSM8K rewards used when none are given (maximum total 4.0)."""


def get_reward(name: str) -> RewardFunc:
    """The built-in reward registered under ``name``.

    Raises:
        ConfigError: unknown name; the message lists the valid names.

    >>> get_reward("correctness").__name__
    'correctness_reward'
    """
    spec = REWARDS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ConfigError(
            f"unknown reward {name!r}; valid names: {', '.join(REWARDS)}; "
            "or pass your own function f(prompts, completions, **kwargs) -> list[float]"
        )
    return spec.func


def resolve_rewards(
    items: Sequence[str | Callable[..., Any]] | None, *, weights: bool = True
) -> list[Callable[..., Any]]:
    """Reward callables for the trainer: names (None: :data:`DEFAULT_REWARDS`) looked up, callables as they are.

    A name is one of :data:`REWARDS`, else a TRL reward name or the import path of the user's function
    (:func:`~grpo_lite.rewards.named.import_reward`), else a reward model: a local folder or a hub id
    (``owner/name``), loaded as GRPOTrainer loads one (:func:`load_reward_model`). A model object is taken as it is.
    ``weights=False``: a reward model's config is checked and its name kept, its weights not loaded (the launcher
    checks the rewards before it starts the processes, each of which loads them).

    Raises:
        ConfigError: a name that does not resolve (one line naming what was tried), an item neither a name nor
            callable, an empty list, or two rewards with the same ``__name__`` (TRL logs by it).

    >>> [f.__name__ for f in resolve_rewards(None)][:2]
    ['correctness_reward', 'integer_reward']
    >>> def my_reward(prompts, completions, **kwargs): return [0.0] * len(completions)
    >>> [f.__name__ for f in resolve_rewards(["correctness", my_reward])]
    ['correctness_reward', 'my_reward']
    """
    if items is None:
        items = DEFAULT_REWARDS
    if isinstance(items, str):
        items = [items]
    funcs: list[Callable[..., Any]] = []
    for item in items:
        if isinstance(item, str) and item not in REWARDS and is_reward_model(item):
            funcs.append(load_reward_model(item, weights=weights))
        elif isinstance(item, str):
            funcs.append(REWARDS[item].func if item in REWARDS else import_reward(item, own=tuple(REWARDS)))
        elif callable(item):
            funcs.append(item)
        else:
            raise ConfigError(f"a reward is a name ({', '.join(REWARDS)}) or a callable, got {item!r:.60}")
    if not funcs:
        raise ConfigError(f"give at least one reward (names: {', '.join(REWARDS)}), or None for the defaults")
    names = [reward_name(f) for f in funcs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"rewards given twice: {', '.join(duplicates)}; weight one with reward_weights")
    return funcs


def reward_name(func: Any) -> str:
    """What TRL logs a reward as: a function's ``__name__``, a model's id (the last part of its name or folder).

    >>> reward_name(get_reward("length"))
    'length_reward'
    """
    model_id = func if isinstance(func, str) else getattr(getattr(func, "config", None), "name_or_path", None)
    if model_id:  # a reward model (or its name, unloaded)
        return str(model_id).rstrip("/").split("/")[-1]
    return getattr(func, "__name__", type(func).__name__)


def is_reward_model(name: str) -> bool:
    """Whether a reward name is a reward model, as GRPOTrainer takes one: a local folder, or a hub id (``owner/name``,
    a ``/`` and no ``:``; an import path has none).

    >>> is_reward_model("trl-lib/Qwen2-0.5B-Reward"), is_reward_model("my_project.rewards:solved")
    (True, False)
    """
    return os.path.isdir(os.path.expanduser(name)) or ("/" in name and ":" not in name)  # isdir: False on any OSError


def load_reward_model(name: str, *, weights: bool = True) -> Any:
    """``AutoModelForSequenceClassification.from_pretrained(name, num_labels=1)``, as GRPOTrainer loads a reward
    model given by name (its one logit is the reward), in eval mode. ``weights=False``: its config only, and the name.

    Raises:
        ConfigError: it does not load (one line: what transformers said, and what to pass).
    """
    from transformers import AutoConfig, AutoModelForSequenceClassification  # heavy: transformers

    source = os.path.expanduser(name) if os.path.isdir(os.path.expanduser(name)) else name
    try:
        if not weights:
            AutoConfig.from_pretrained(source)  # what the folder or hub id holds is a model's config
            return name
        return AutoModelForSequenceClassification.from_pretrained(source, num_labels=1).eval()
    except Exception as exc:  # OSError (no folder, no weights, offline), ValueError (not a classifier's config)
        raise ConfigError(
            f"rewards: the reward model {name!r} does not load ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]}); pass a folder with its config.json and weights "
            "(AutoModelForSequenceClassification, num_labels=1), a hub id that is reachable, or the model object"
        ) from None
