"""Reward values checked where they leave the reward function: one number (or None) per completion.

:func:`check_rewards` wraps each callable (keeping ``__name__``, ``async`` and the attributes TRL reads) so that each
call gets its own copies of the inputs, is made once, and a bad value or an exception raises
:class:`~grpo_lite.errors.RewardError`; a step without any reward warns once. Why: docs/internals.md.

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

import contextlib
import functools
import inspect
import math
import numbers
import struct
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
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
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item") and not getattr(value, "is_meta", False):
        item = value.item()  # a 0-d tensor or array (a meta tensor holds no value)
        return float(item) if isinstance(item, numbers.Real) else None
    return None


def _in_float32(number: float) -> bool:
    """Whether ``number`` stays finite in float32, the dtype TRL keeps rewards in (3.4e38 does, 3.5e38 does not)."""
    try:
        return math.isfinite(struct.unpack("f", struct.pack("f", number))[0])
    except OverflowError:
        return False


def _as_list(name: str, values: Any, n: int | None) -> list[Any]:
    """``values`` as a list of ``n`` entries: a list or tuple, or a 1-d NumPy array or tensor (TRL takes them too)."""
    if getattr(values, "ndim", None) == 1 and hasattr(values, "tolist") and not getattr(values, "is_meta", False):
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        where = " on the meta device, which holds no values" if getattr(values, "is_meta", False) else ""
        raise RewardError(
            f"reward function {name!r} returned a {type(values).__name__}{where} ({values!r:.60}), "
            f"not a list of {n} values; {_ADVICE}"
        )
    if n is not None and len(values) != n:
        raise RewardError(
            f"reward function {name!r} returned {len(values)} values for {n} completions: {_sample(values)}; {_ADVICE}"
        )
    return list(values)


def check_values(name: str, values: Any, n: int | None) -> list[float | None]:
    """Check one call's output of reward ``name`` for ``n`` completions (None: any number of them); returns it as a
    list of floats and None.

    Raises:
        RewardError: not a list (or 1-d array or tensor) of ``n`` values, each None or a number that is finite in
            float32, TRL's dtype for rewards (naming the function, with a sample).

    >>> check_values("f", [1, 0.5, None], 3)
    [1.0, 0.5, None]
    >>> check_values("f", 1.0, 4)
    Traceback (most recent call last):
    ...
    grpo_lite.errors.RewardError: reward function 'f' returned a float (1.0), not a list of 4 values; return one float per completion (None for a completion it does not apply to)
    >>> check_values("f", [0.0, float("inf")], 2)
    Traceback (most recent call last):
    ...
    grpo_lite.errors.RewardError: reward function 'f' returned inf at index 1: [0.0, inf]; return a finite number (None for a completion it does not apply to)
    """
    values = _as_list(name, values, n)
    out: list[float | None] = []
    for i, value in enumerate(values):
        if value is None:
            out.append(None)
            continue
        number = _number(value)
        if number is None:
            meta = " on the meta device, which holds no value" if getattr(value, "is_meta", False) else ""
            raise RewardError(
                f"reward function {name!r} returned a {type(value).__name__}{meta} at index {i}, not a "
                f"number: {_sample(values)}; {_ADVICE}"
            )
        if not math.isfinite(number):
            raise RewardError(
                f"reward function {name!r} returned {number} at index {i}: {_sample(values)}; "
                "return a finite number (None for a completion it does not apply to)"
            )
        if not _in_float32(number):
            raise RewardError(
                f"reward function {name!r} returned {number:g} at index {i}, past float32's range (±3.4e38), in "
                f"which TRL keeps rewards: {_sample(values)}; return a number within ±3.4e38 (None for a completion "
                "it does not apply to)"
            )
        out.append(number)
    return out


class _Steps:
    """Collects, per batch, which completions each reward returned None for; warns once when every reward did for
    some completions (TRL scores them 0), once when for all of them (the step learns nothing)."""

    def __init__(self, names: list[str]) -> None:
        self.names = set(names)
        self.seen: dict[str, list[bool]] = {}
        self.warned: set[bool] = set()

    def report(self, name: str, nones: list[bool]) -> None:
        if name in self.seen:  # a new batch (the last one ended early, e.g. a reward raised)
            self.seen.clear()
        self.seen[name] = nones
        if self.seen.keys() != self.names:
            return
        rows = [all(row) for row in zip(*self.seen.values())]
        self.seen.clear()
        if not any(rows) or all(rows) in self.warned:
            return
        self.warned.add(all(rows))
        what = (
            "every completion of a step: the step has no reward to learn from and the weights do not change"
            if all(rows)
            else f"{sum(rows)} of {len(rows)} completions of a step: TRL scores each of them 0"
        )
        warnings.warn(
            f"every reward function ({', '.join(sorted(self.names))}) returned None for {what}. Return a number "
            "for the completions each reward applies to",
            NoRewardWarning,
            stacklevel=3,
        )


def _own(value: Any) -> Any:
    """A copy of ``value``'s lists and dicts (each reward gets its own inputs: one that edits them changes nothing
    for the next reward, TRL or the evaluation); other objects are shared."""
    if isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
        return [_own(v) for v in value]
    if isinstance(value, dict):
        return {k: _own(v) for k, v in value.items()}
    return value.copy() if isinstance(value, list) else value


def _raised(func: Any, name: str, exc: BaseException, n: int | None) -> RewardError:
    """The one error of a reward that raised (it is not called again: a judge may be slow or have side effects),
    with the line that raised: the last in the reward's own file, else the innermost (not this module's frames)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename not in (__file__, contextlib.__file__)]
    own = getattr(getattr(func, "__code__", None), "co_filename", None)
    frame = next((f for f in reversed(frames) if f.filename == own), frames[-1] if frames else None)
    where = f" at {Path(frame.filename).name}:{frame.lineno}" if frame else ""
    return RewardError(
        f"reward function {name!r} raised {type(exc).__name__}: {str(exc)[:200]}{where} on a batch of {n} "
        "completions; fix the reward, or return None for a completion it does not apply to"
    )


class _CheckedReward:
    """A reward callable whose every output is checked (see the module docstring)."""

    def __init__(self, func: Callable[..., Any], name: str, steps: _Steps | None) -> None:
        self.func, self.__name__, self._steps = func, name, steps
        self.__wrapped__ = func

    def _inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int | None, tuple[Any, ...], dict]:
        """The number of completions, and the reward's own copies of its inputs."""
        completions = kwargs.get("completions", args[1] if len(args) > 1 else None)
        n = len(completions) if completions is not None else None
        return n, tuple(_own(a) for a in args), {k: _own(v) for k, v in kwargs.items()}

    def _check(self, out: Any, n: int | None) -> list[float | None]:
        values = check_values(self.__name__, out, n)
        if self._steps is not None:
            self._steps.report(self.__name__, [v is None for v in values])
        return values

    @contextlib.contextmanager
    def _raising(self, n: int | None) -> Iterator[None]:
        """What the reward raises, as one :class:`RewardError` (:func:`_raised`)."""
        try:
            yield
        except (GrpoLiteError, KeyboardInterrupt):  # grpo-lite's own rewards say what to change; Ctrl-C stops
            raise
        except BaseException as exc:  # SystemExit too: the run fails with this line, not exit 0
            raise _raised(self.func, self.__name__, exc, n) from exc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        n, args, kwargs = self._inputs(args, kwargs)
        with self._raising(n):
            out = self.func(*args, **kwargs)
        return self._check(out, n)

    def __getattr__(self, attr: str) -> Any:  # value, name, ... of the wrapped reward
        if attr == "func":  # not set yet (unpickling): no recursion
            raise AttributeError(attr)
        return getattr(self.func, attr)

    def __repr__(self) -> str:
        return f"checked({self.func!r})"


class _AsyncCheckedReward(_CheckedReward):
    """The same for an ``async`` reward: stays awaitable, so TRL runs it with the other async rewards."""

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        n, args, kwargs = self._inputs(args, kwargs)
        with self._raising(n):
            out = await self.func(*args, **kwargs)
        return self._check(out, n)


def _is_async(func: Any) -> bool:
    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


def _is_module(func: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(func, torch.nn.Module)


def check_rewards(funcs: Sequence[Callable[..., Any]], *, steps: bool = True) -> list[Callable[..., Any]]:
    """Wrap each reward callable (TRL's signature ``f(prompts, completions, **kwargs)``) so that every call's output
    is checked; reward models pass through. ``steps``: warn when the rewards leave completions of a training step
    without any (False: an evaluation, where no weights change).

    >>> def one(prompts, completions, **kwargs): return [1] * len(completions)
    >>> check_rewards([one])[0](prompts=["q", "q"], completions=["a", "b"])
    [1.0, 1.0]
    """

    def name_of(f: Any) -> str:
        while isinstance(f, functools.partial):
            f = f.func
        return getattr(f, "__name__", type(f).__name__)

    names = [name_of(f) for f in funcs if not _is_module(f)]
    seen = _Steps(names) if steps else None
    out: list[Callable[..., Any]] = []
    for f in funcs:
        if _is_module(f) or isinstance(f, _CheckedReward):
            out.append(f)
        else:
            out.append((_AsyncCheckedReward if _is_async(f) else _CheckedReward)(f, name_of(f), seen))
    return out
