"""Rewards named from anywhere, as ``trl grpo --reward_funcs`` takes them: TRL's reward names (``trl.rewards``) and
the import path of the user's own function (``package.module:function`` or ``package.module.function``). A name
runs no code beyond importing its module: only a factory is called, with the keyword arguments written after it
(``get_soft_overlong_punishment(max_completion_len=256, soft_punish_cache=64)``): TRL's, and the functions a user's
module lists in ``REWARD_FACTORIES = ["make_reward"]``. grpo-lite's own names are looked up first
(:mod:`~grpo_lite.rewards.registry`).

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
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from grpo_lite.errors import ConfigError

__all__ = ["TRL_REWARDS", "import_reward", "parse_call"]

_FACTORIES = "REWARD_FACTORIES"  # a user's module lists its reward factories in it: the only calls a name may make

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
    if ("(" in text) != text.endswith(")"):  # YAML's [a, f(x=1, y=2)] is 'a', 'f(x=1', 'y=2)'
        raise ConfigError(
            f"reward {_shown(name)}: its parentheses do not close; in a YAML list [...] a comma ends a name: quote "
            'a name with arguments whole ("f(x=1, y=2)")'
        )
    if "(" not in text:
        return text, {}
    head = text[: text.index("(")].strip()
    try:
        call = ast.parse(f"reward{text[len(head) :]}", mode="eval").body
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name) or call.args:
            raise ValueError("only key=value arguments")
        if any(k.arg is None for k in call.keywords):
            raise ValueError("no **")
        return head, {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}
    except (SyntaxError, ValueError) as exc:
        raise ConfigError(
            f"reward {_shown(name)}: cannot read its arguments ({exc}); write them as name(key=value, ...) with "
            "numbers, strings or lists as values, e.g. get_soft_overlong_punishment(max_completion_len=256, "
            "soft_punish_cache=64)"
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


def _shown(text: str) -> str:
    """``text`` quoted for a message; a long one cut to its head, with its length (a 1 MB name is not echoed)."""
    return repr(text) if len(text) <= 120 else f"{text[:80]!r}... ({len(text):,} characters)"


@contextlib.contextmanager
def _users_code(name: str, doing: str, fix: str) -> Iterator[None]:
    """Run the user's code (an import, a factory) as ``trl grpo`` does, with the working folder on the path, and
    leave no trace: the path restored, no bytecode written beside the module, what it prints (``print`` and file
    descriptor 1 alike) kept off stdout and said in one warning. What it raises, ``SystemExit`` too, is one
    ConfigError naming ``doing``; Ctrl-C stays Ctrl-C."""
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ beside the user's module
    printed = io.StringIO()
    with tempfile.TemporaryFile() as written:
        for stream in (sys.stdout, sys.__stdout__):
            if stream is not None:
                stream.flush()  # what was printed before goes out, not into `written`
        saved = os.dup(1)
        try:
            os.dup2(written.fileno(), 1)
            with contextlib.redirect_stdout(printed):
                yield
        except (ConfigError, KeyboardInterrupt):
            raise
        except BaseException as exc:  # SystemExit from an import is the user's error, not the run's exit
            raise ConfigError(f"reward {_shown(name)}: {doing} raised {type(exc).__name__}: {exc}; {fix}") from None
        finally:
            if sys.__stdout__ is not None:
                sys.__stdout__.flush()
            os.dup2(saved, 1)
            os.close(saved)
            sys.dont_write_bytecode = bytecode
            if added and os.getcwd() in sys.path:
                sys.path.remove(os.getcwd())
        written.seek(0)
        lines = printed.getvalue().splitlines() + written.read().decode(errors="replace").splitlines()
    if lines:
        warnings.warn(
            f"{doing} for reward {_shown(name)} printed {len(lines)} line(s) (first: {lines[0][:80]!r}); "
            "a reward module should print nothing when imported or called to make a reward: move it under "
            "if __name__ == '__main__'",
            stacklevel=4,
        )


def _import_module(module: str, name: str) -> Any:
    """The user's module ``module``, imported for the reward ``name``."""
    if not all(part.isidentifier() for part in module.split(".")) or (
        module.endswith(".py") and os.path.isfile(module)
    ):
        raise ConfigError(
            f"reward {_shown(name)}: {_shown(module)} is not an import path: write package.module:function, dotted "
            "names (no folder, no .py); to use a file, run from its folder or install its package (pip install -e .)"
        )
    with _users_code(
        name, f"importing {_shown(module)}", "fix the module so that importing it runs nothing that can fail"
    ):
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise ConfigError(
                f"reward {_shown(name)}: no module {_shown(exc.name or module)} (tried grpo-lite's reward names, "
                f"TRL's, and the import path {_shown(module)}); check the spelling, and install your package "
                "(pip install -e .) or run from its folder"
            ) from None


def _factories(module: Any, name: str) -> tuple[str, ...]:
    """The names ``module`` marks as reward factories: its ``REWARD_FACTORIES`` list (none when it has no list)."""
    marked = getattr(module, _FACTORIES, ())
    if not isinstance(marked, (list, tuple)) or not all(isinstance(n, str) for n in marked):
        raise ConfigError(
            f"reward {_shown(name)}: {module.__name__}.{_FACTORIES} must be a list of function names, "
            f'e.g. {_FACTORIES} = ["make_reward"], got {marked!r:.60}'
        )
    return tuple(marked)


def import_reward(name: str, own: Sequence[str] = ()) -> Callable[..., Any]:
    """The reward named ``name``: a TRL reward name, or ``module:function`` / ``module.function`` of the user's
    code; a factory (TRL's, or one the module lists in ``REWARD_FACTORIES``) is called with the keyword arguments
    written after it, and nothing else is called (``own``: grpo-lite's names, for the message).

    Raises:
        ConfigError: one line naming what was tried: the name is neither, the module or the function is missing,
            the module or the factory raised, arguments follow a function not marked as a factory, or the object
            is not callable.
    """
    base, arguments = parse_call(name)
    if base in TRL_REWARDS:
        return _trl_reward(base, arguments)
    module, sep, attr = base.rpartition(":") if ":" in base else base.rpartition(".")
    if not sep or not module or not attr:
        raise ConfigError(
            f"unknown reward {_shown(name)}; tried grpo-lite's names ({', '.join(own)}), "
            f"TRL's ({', '.join(TRL_REWARDS)}) and an import path "
            "(package.module:function or package.module.function); or pass your own function "
            "f(prompts, completions, **kwargs) -> list[float]"
        )
    loaded = _import_module(module, name)
    found = getattr(loaded, attr, None)
    if found is None:
        raise ConfigError(
            f"reward {_shown(name)}: module {_shown(module)} has no {_shown(attr)}; check the function's name"
        )
    marked = attr in _factories(loaded, name)
    if name.strip() != base and not marked:  # a call of anything else: a name in data runs no code but an import
        raise ConfigError(
            f"reward {_shown(name)}: {module}.{attr} is not marked as a reward factory, and only a factory is "
            f"called with arguments; name the reward without them ({module}:{attr}), or mark the function in its "
            f'module: {_FACTORIES} = ["{attr}"]'
        )
    reward = found
    if marked:
        making = f"making the reward {module}.{attr}(...)"
        with _users_code(name, making, "fix the factory, or the arguments written after its name"):
            reward = found(**arguments)
    if not callable(reward):
        raise ConfigError(f"reward {_shown(name)}: {module}.{attr} is a {type(reward).__name__}, not a function")
    return reward
