"""Rewards named from anywhere, as ``trl grpo --reward_funcs`` takes them: TRL's reward names (``trl.rewards``) and
the import path of the user's own function (``package.module:function`` or ``package.module.function``); a name
may carry keyword arguments for a function that makes the reward (``get_soft_overlong_punishment(max_completion_len=
256, soft_punish_cache=64)``). grpo-lite's own names are looked up first (:mod:`~grpo_lite.rewards.registry`).

>>> parse_call("get_soft_overlong_punishment(max_completion_len=256, soft_punish_cache=64)")
('get_soft_overlong_punishment', {'max_completion_len': 256, 'soft_punish_cache': 64})
>>> parse_call("my_project.rewards:reverse_reward")
('my_project.rewards:reverse_reward', {})
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import os
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grpo_lite.errors import ConfigError

__all__ = ["TRL_REWARDS", "import_reward", "parse_call"]

# TRL's reward names (trl.rewards) -> the keyword arguments `trl grpo` makes a factory's reward with (None: a reward)
TRL_REWARDS: dict[str, dict[str, Any] | None] = {
    "accuracy_reward": None,
    "reasoning_accuracy_reward": None,
    "think_format_reward": None,
    "get_soft_overlong_punishment": {"max_completion_len": 1280, "soft_punish_cache": 256},
    "get_cosine_scaled_reward": {},
    "get_repetition_penalty_reward": {},
}


def parse_call(name: str) -> tuple[str, dict[str, Any]]:
    """A reward name and the keyword arguments written after it in parentheses (Python literals).

    Raises:
        ConfigError: the parentheses are not ``name(key=literal, ...)``.
    """
    text = name.strip()
    if not text.endswith(")") or "(" not in text:
        return text, {}
    head = text[: text.index("(")].strip()
    try:
        call = ast.parse(f"reward{text[len(head) :]}", mode="eval").body
        if not isinstance(call, ast.Call) or call.args:
            raise ValueError("only key=value arguments")
        return head, {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}
    except (SyntaxError, ValueError) as exc:
        raise ConfigError(
            f"reward {name!r}: cannot read its arguments ({exc}); write them as name(key=value, ...) with numbers, "
            "strings or lists as values, e.g. get_soft_overlong_punishment(max_completion_len=256, soft_punish_cache=64)"
        ) from None


class _Conversational:
    """A TRL reward (it reads ``completion[0]["content"]``) that also takes text completions: each text, after its
    row's ``prefill``, becomes one assistant message; TRL's ``solution`` column defaults to the gold ``answer``."""

    def __init__(self, func: Callable[..., Any], name: str) -> None:
        self.func, self.__name__ = func, name

    def __call__(self, *args: Any, completions: Sequence[Any] = (), **kwargs: Any) -> Any:
        prefill = kwargs.get("prefill") or [""] * len(completions)
        completions = [
            [{"role": "assistant", "content": (p or "") + c}] if isinstance(c, str) else c
            for p, c in zip(prefill, completions)
        ]
        if "solution" not in kwargs and "answer" in kwargs:
            kwargs["solution"] = kwargs["answer"]
        return self.func(*args, completions=completions, **kwargs)

    def __repr__(self) -> str:
        return f"{self.__name__} (trl.rewards)"


def _trl_reward(name: str, arguments: Mapping[str, Any]) -> Callable[..., Any]:
    import trl.rewards  # heavy: trl

    func = getattr(trl.rewards, name)
    defaults = TRL_REWARDS[name]
    if defaults is None:
        if arguments:
            raise ConfigError(f"reward {name!r} takes no arguments; write {name} alone")
        return _Conversational(func, name)
    try:
        made = func(**(arguments or defaults))  # as `trl grpo` makes it, unless arguments are written
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"reward {name!r}: {exc}; see help(trl.rewards.{name}) for its arguments") from None
    return _Conversational(made, getattr(made, "__name__", name))


def _import_module(module: str, name: str) -> Any:
    """Import the user's module (the working folder on the path, as ``trl grpo`` does); what it prints is kept off
    stdout and said in one warning, and no bytecode is written beside it."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    printed, bytecode = io.StringIO(), sys.dont_write_bytecode
    try:
        sys.dont_write_bytecode = True  # nothing is written beside the user's module (no __pycache__)
        with contextlib.redirect_stdout(printed):
            loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        raise ConfigError(
            f"reward {name!r}: no module {missing!r} (tried grpo-lite's reward names, TRL's, and the import path "
            f"{module!r}); check the spelling, and install your package (pip install -e .) or run from its folder"
        ) from None
    except Exception as exc:  # the user's module raised while importing: say which and what
        raise ConfigError(
            f"reward {name!r}: importing {module!r} raised {type(exc).__name__}: {exc}; fix the module so that "
            "importing it runs nothing that can fail"
        ) from None
    finally:
        sys.dont_write_bytecode = bytecode
    lines = printed.getvalue().splitlines()
    if lines:
        warnings.warn(
            f"importing {module!r} for reward {name!r} printed {len(lines)} line(s) (first: {lines[0][:80]!r}); "
            "a reward module should print nothing when imported: move it under if __name__ == '__main__'",
            stacklevel=4,
        )
    return loaded


def import_reward(name: str, own: Sequence[str] = ()) -> Callable[..., Any]:
    """The reward named ``name``: a TRL reward name, or ``module:function`` / ``module.function`` of the user's
    code, each with optional keyword arguments for a function that makes the reward (``own``: grpo-lite's names,
    for the message).

    Raises:
        ConfigError: one line naming what was tried: the name is neither, the module or the function is missing,
            the module raised on import, or the object is not callable.
    """
    base, arguments = parse_call(name)
    if base in TRL_REWARDS:
        return _trl_reward(base, arguments)
    module, sep, attr = base.rpartition(":") if ":" in base else base.rpartition(".")
    if not sep or not module or not attr:
        raise ConfigError(
            f"unknown reward {name!r}; tried grpo-lite's names ({', '.join(own)}), TRL's ({', '.join(TRL_REWARDS)}) "
            "and an import path "
            "(package.module:function or package.module.function); or pass your own function "
            "f(prompts, completions, **kwargs) -> list[float]"
        )
    found = getattr(_import_module(module, name), attr, None)
    if found is None:
        raise ConfigError(f"reward {name!r}: module {module!r} has no {attr!r}; check the function's name")
    reward = found(**arguments) if arguments else found
    if not callable(reward):
        raise ConfigError(f"reward {name!r}: {module}.{attr} is a {type(reward).__name__}, not a function")
    return reward
