"""Reward values checked where they leave the reward function: one number (or None) per completion.

:func:`check_rewards` wraps each callable (keeping ``__name__``, ``async`` and the attributes TRL reads) so that a bad
value raises :class:`~grpo_lite.errors.RewardError` and a step without any reward warns once. Why: docs/internals.md.

>>> def bad(prompts, completions, **kwargs): return ["1.0"] * len(completions)
>>> checked = check_rewards([bad])[0]
>>> checked.__name__
'bad'
>>> checked(prompts=["q"], completions=["a"])
Traceback (most recent call last):
...
grpo_lite.errors.RewardError: reward function 'bad' returned a str at index 0, not a number: ['1.0']; return one float per completion (None for a completion it does not apply to)
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from grpo_lite.errors import GrpoLiteError, RewardError

__all__ = ["NoRewardWarning", "check_rewards", "check_values"]

_ADVICE = "return one float per completion (None for a completion it does not apply to)"


class NoRewardWarning(UserWarning):
    """Every reward function returned None for every completion of a step: that step learns nothing."""


def _sample(values: Sequence[Any], width: int = 100) -> str:
    text = repr(list(values[:4]))
    if len(values) > 4:
        text = text[:-1] + ", ...]"
    return text if len(text) <= width else text[: width - 4] + " ...]"


def _number(value: Any) -> float | None:
    """``value`` as a float when it is a real number (bool, int, float, NumPy or 0-d tensor), else None."""
    if isinstance(value, numbers.Real):
        return float(value)
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a 0-d tensor or array
        item = value.item()
        return float(item) if isinstance(item, numbers.Real) else None
    return None


def check_values(name: str, values: Any, n: int) -> bool:
    """Check one call's output of reward ``name`` for ``n`` completions; True when every value is None.

    Raises:
        RewardError: not a list of ``n`` values that are finite numbers or None (naming the function, with a sample).

    >>> check_values("f", [1, 0.5, None], 3), check_values("f", [None, None], 2)
    (False, True)
    >>> check_values("f", 1.0, 4)
    Traceback (most recent call last):
    ...
    grpo_lite.errors.RewardError: reward function 'f' returned a float (1.0), not a list of 4 values; return one float per completion (None for a completion it does not apply to)
    >>> check_values("f", [0.0, float("inf")], 2)
    Traceback (most recent call last):
    ...
    grpo_lite.errors.RewardError: reward function 'f' returned inf at index 1: [0.0, inf]; return a finite number (None for a completion it does not apply to)
    """
    if not isinstance(values, (list, tuple)):
        raise RewardError(
            f"reward function {name!r} returned a {type(values).__name__} ({values!r:.60}), "
            f"not a list of {n} values; {_ADVICE}"
        )
    if len(values) != n:
        raise RewardError(
            f"reward function {name!r} returned {len(values)} values for {n} completions: {_sample(values)}; {_ADVICE}"
        )
    for i, value in enumerate(values):
        if value is None:
            continue
        number = _number(value)
        if number is None:
            raise RewardError(
                f"reward function {name!r} returned a {type(value).__name__} at index {i}, not a "
                f"number: {_sample(values)}; {_ADVICE}"
            )
        if not math.isfinite(number):
            raise RewardError(
                f"reward function {name!r} returned {number} at index {i}: {_sample(values)}; "
                "return a finite number (None for a completion it does not apply to)"
            )
    return all(value is None for value in values)


class _Steps:
    """Collects, per batch, whether each reward returned only None; warns once when all of them did."""

    def __init__(self, names: list[str]) -> None:
        self.names = set(names)
        self.seen: dict[str, bool] = {}
        self.warned = False

    def report(self, name: str, all_none: bool) -> None:
        if name in self.seen:  # a new batch (the last one ended early, e.g. a reward raised)
            self.seen.clear()
        self.seen[name] = all_none
        if self.seen.keys() != self.names:
            return
        if all(self.seen.values()) and not self.warned:
            self.warned = True
            warnings.warn(
                f"every reward function ({', '.join(sorted(self.names))}) returned None for every completion of a "
                "step: the step has no reward to learn from and the weights do not change. Return a number for the "
                "completions each reward applies to",
                NoRewardWarning,
                stacklevel=2,
            )
        self.seen.clear()


def _row_of(kwargs: dict[str, Any], i: int) -> dict[str, Any]:
    """Completion ``i``'s own keyword arguments: each per-completion list cut to its one value."""
    n = len(kwargs.get("completions") or ())
    return {k: v[i : i + 1] if isinstance(v, (list, tuple)) and len(v) == n else v for k, v in kwargs.items()}


def _failing_row(func: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
    """The first completion a reward raises on when called for it alone (None: each alone passes), and its row."""
    for i in range(len(kwargs.get("completions") or ())):
        row = _row_of(kwargs, i)
        try:
            func(**row)
        except Exception:
            return i, row
    return None, kwargs


def _shown(row: dict[str, Any]) -> str:
    """The row a person recognizes: its question, else its prompt's last user message or last characters."""
    for key in ("question", "prompt", "prompts"):
        value = row.get(key)
        if isinstance(value, (list, tuple)) and len(value) == 1:
            value = value[0]
            if isinstance(value, list):  # messages
                value = next((m.get("content") for m in reversed(value) if m.get("role") == "user"), value)
            text = " ".join(str(value).split())
            return f"{key.rstrip('s')} {('…' + text[-70:]) if len(text) > 70 else text!r}"
    return "a batch of completions"


def _raised(name: str, exc: Exception, index: int | None, row: dict[str, Any]) -> RewardError:
    where = f"completion {index} ({_shown(row)})" if index is not None else _shown(row)
    return RewardError(
        f"reward function {name!r} raised {type(exc).__name__}: {str(exc)[:200]} on {where}; fix the reward, or "
        "return None for a completion it does not apply to"
    )


class _CheckedReward:
    """A reward callable whose every output is checked (see the module docstring)."""

    def __init__(self, func: Callable[..., Any], name: str, steps: _Steps) -> None:
        self.func, self.__name__, self._steps = func, name, steps
        self.__wrapped__ = func

    def _check(self, out: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        completions = kwargs.get("completions", args[1] if len(args) > 1 else None)
        n = len(completions) if completions is not None else len(out) if isinstance(out, (list, tuple)) else None
        all_none = check_values(self.__name__, out, n)
        self._steps.report(self.__name__, all_none)
        return out

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            out = self.func(*args, **kwargs)
        except GrpoLiteError:  # grpo-lite's own rewards say what to change
            raise
        except Exception as exc:
            raise _raised(self.__name__, exc, *_failing_row(self.func, kwargs)) from exc
        return self._check(out, args, kwargs)

    def __getattr__(self, attr: str) -> Any:  # value, name, ... of the wrapped reward
        if attr == "func":  # not set yet (unpickling): no recursion
            raise AttributeError(attr)
        return getattr(self.func, attr)

    def __repr__(self) -> str:
        return f"checked({self.func!r})"


class _AsyncCheckedReward(_CheckedReward):
    """The same for an ``async`` reward: stays awaitable, so TRL runs it with the other async rewards."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        try:
            out = await self.func(*args, **kwargs)
        except GrpoLiteError:
            raise
        except Exception as exc:
            raise _raised(self.__name__, exc, None, kwargs) from exc
        return self._check(out, args, kwargs)


def _is_async(func: Any) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


def _is_module(func: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(func, torch.nn.Module)


def check_rewards(funcs: Sequence[Callable[..., Any]]) -> list[Callable[..., Any]]:
    """Wrap each reward callable (TRL's signature ``f(prompts, completions, **kwargs)``) so that every call's output
    is checked; reward models pass through.

    >>> def one(prompts, completions, **kwargs): return [1.0] * len(completions)
    >>> check_rewards([one])[0](prompts=["q", "q"], completions=["a", "b"])
    [1.0, 1.0]
    """

    def name_of(f: Any) -> str:
        while isinstance(f, functools.partial):
            f = f.func
        return getattr(f, "__name__", type(f).__name__)

    names = [name_of(f) for f in funcs if not _is_module(f)]
    steps = _Steps(names)
    out: list[Callable[..., Any]] = []
    for f in funcs:
        if _is_module(f) or isinstance(f, _CheckedReward):
            out.append(f)
        else:
            out.append((_AsyncCheckedReward if _is_async(f) else _CheckedReward)(f, name_of(f), steps))
    return out
