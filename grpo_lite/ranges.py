"""The range of every numeric setting TRL's parser does not check, and :func:`check`, called where a value enters
(a recipe file, a Python argument, a CLI flag): the code after it trusts the value.

>>> check("num_processes", 2)
2
>>> check("num_processes", 0)
Traceback (most recent call last):
...
grpo_lite.errors.ConfigError: num_processes=0 must be a positive integer; e.g. num_processes=1
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Collection

from grpo_lite.defaults import EVALUATION, LORA, RESILIENCE, RUN, STEP
from grpo_lite.errors import ConfigError


@dataclass(frozen=True)
class Range:
    """What a setting's value must be: ``accepts(value)``, said as ``what``, with ``example`` a value that works."""

    accepts: Callable[[Any], bool]
    what: str
    example: Any
    whole: bool = False  # a whole number (True and False are not)
    takes_none: bool = True  # False: written as None it is refused (the planner needs a number; leave it out)


def _whole(example: int, what: str = "a positive integer", least: int = 1, *, takes_none: bool = True) -> Range:
    return Range(lambda x: x >= least, what, example, whole=True, takes_none=takes_none)


MAX_STEPS = 10**8  # about three years at a step a second: more is a typo (a warmup share of it never ends)


RANGES: dict[str, Range] = {  # GRPOConfig's fields first, in its order
    # GRPOConfig fields: TRL's parser types them, it does not bound them
    "learning_rate": Range(lambda x: x > 0, "> 0", 1e-5),
    "weight_decay": Range(lambda x: x >= 0, ">= 0", RUN["weight_decay"]),
    "adam_beta1": Range(lambda x: 0 <= x < 1, "in [0, 1)", 0.9),
    "adam_beta2": Range(lambda x: 0 <= x < 1, "in [0, 1)", RUN["adam_beta2"]),
    "adam_epsilon": Range(lambda x: x > 0, "> 0", 1e-8),
    "max_grad_norm": Range(lambda x: x >= 0, ">= 0 (0 turns clipping off)", RUN["max_grad_norm"]),
    "warmup_steps": Range(lambda x: x >= 0, ">= 0 (below 1: a share of the steps)", RUN["warmup_steps"]),
    "num_train_epochs": Range(lambda x: x > 0, "> 0", RUN["num_train_epochs"]),
    "logging_steps": Range(lambda x: x > 0, "> 0", RUN["logging_steps"]),
    "save_steps": Range(lambda x: x > 0, "> 0 (below 1: a share of the steps)", RUN["save_steps"]),
    "save_total_limit": Range(lambda x: x >= 0, ">= 0 (0 or None keeps every checkpoint)", RUN["save_total_limit"]),
    "temperature": Range(lambda x: x > 0, "> 0", 0.7),
    "top_p": Range(lambda x: 0 < x <= 1, "in (0, 1]", 1.0),
    "top_k": Range(lambda x: x >= 0, ">= 0 (0 turns it off)", 0),
    "min_p": Range(lambda x: 0 <= x <= 1, "in [0, 1]", 0.05),
    "repetition_penalty": Range(lambda x: x > 0, "> 0", 1.0),
    "beta": Range(lambda x: x >= 0, ">= 0", STEP.beta),
    "epsilon": Range(lambda x: x > 0, "> 0", 0.2),
    "epsilon_high": Range(lambda x: x > 0, "> 0", 0.28),
    "num_iterations": _whole(STEP.num_iterations, ">= 1"),
    "num_generations": _whole(STEP.num_generations, ">= 2 (GRPO compares a group)", least=2, takes_none=False),
    "vllm_gpu_memory_utilization": Range(lambda x: 0 < x <= 1, "in (0, 1]", STEP.vllm_gpu_memory_utilization),
    "per_device_train_batch_size": _whole(STEP.per_device_train_batch_size),
    "gradient_accumulation_steps": _whole(STEP.gradient_accumulation_steps),
    "max_prompt_length": _whole(STEP.max_prompt_length),
    "max_completion_length": _whole(STEP.max_completion_length, takes_none=False),
    "max_steps": Range(lambda x: 1 <= x <= MAX_STEPS, f"a whole number from 1 to {MAX_STEPS:_}", 1, whole=True),
    "seed": Range(lambda x: 0 <= x < 2**32, "a whole number from 0 to 2**32 - 1 (numpy's seeds)", 0, whole=True),
    # grpo-lite's own: train(), plan(), estimate(), evaluate(), the recipe's keys and the CLI's flags
    "num_processes": _whole(STEP.num_processes),
    "oom_window_steps": _whole(RESILIENCE.oom_window_steps, "a whole number >= 0 (0 never steps down)", least=0),
    "lora_r": _whole(LORA.r, ">= 1"),
    "lora_alpha": Range(lambda x: x > 0, "> 0", LORA.alpha(LORA.r)),
    "lora_dropout": Range(lambda x: 0 <= x < 1, "in [0, 1)", 0.05),
    "batch_size": _whole(EVALUATION.batch_size),  # evaluate()
    "max_new_tokens": _whole(EVALUATION.max_new_tokens),  # evaluate()
}


def check(
    key: str,
    value: Any,
    choices: Collection[Any] | None = None,
    *,
    written: str | None = None,
    named: str | None = None,
    sep: str = "=",
) -> Any:
    """Return ``value`` when it is in the range of the setting ``key``; None (not set) and an unbounded setting pass.

    Args:
        choices: the values a setting of a few named values takes (its ``Literal``'s), instead of a range.
        written: how the user wrote it, for the message. Default: ``named=value``.
        named: the setting's name as the user wrote it (``lora.r``'s ``r``), for the example. Default: ``key``.
        sep: ``"="`` (Python, ``--set``) or ``": "`` (a recipe file) between the name and the example.

    Raises:
        ConfigError: out of range, not finite, or not one of ``choices`` (with a value that works).
    """
    if value is None:
        return value
    rule = RANGES.get(key)
    name = named or key
    written = written or f"{name}{sep}{value!r}"
    if choices is not None:
        if value not in choices:
            raise ConfigError(f"{written} is not valid; choose one of {', '.join(map(str, choices))}")
        return value
    example = f"; e.g. {name}{sep}{rule.example!r}" if rule is not None else ""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{written} must be a finite number{example}")
    if rule is None:
        return value
    number = (int,) if rule.whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, number) or not rule.accepts(value):
        raise ConfigError(f"{written} must be {rule.what}{example}")
    return value


def check_written(key: str, value: Any, **how: Any) -> Any:
    """:func:`check` for a value the user wrote (an override, ``--set``, a recipe's ``trl:``), where None is not
    "not set": a setting the planner needs as a number refuses it (``how``: :func:`check`'s keywords).

    Raises:
        ConfigError: None for such a setting (leave it out instead), or what :func:`check` raises.
    """
    rule = RANGES.get(key)
    if value is None and rule is not None and not rule.takes_none:
        written = how.get("written") or f"{key}=None"
        raise ConfigError(
            f"{written}: {key} must be a number; leave it out for the planner's choice, or e.g. {key}={rule.example!r}"
        )
    return check(key, value, **how)
