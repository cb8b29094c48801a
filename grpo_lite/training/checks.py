"""What train() checks before it loads anything: the settings and the output folder.

- :func:`check_overrides`: every ``train(**overrides)`` / ``--set KEY=VALUE`` value, typed against
  GRPOConfig's (and TrainingArguments') field types and range-checked (:data:`RANGES`: a learning rate
  must be > 0, a beta below 1...). Model loading takes minutes; a typo must not wait for it.
- :func:`check_output_dir`: the folder can be created and written (not a file, not read-only).
- :func:`check_free_space`: after planning, before the model loads: the disk has room for one
  checkpoint (size from the memory model, :func:`grpo_lite.training.checkpoints.checkpoint_bytes`).

Every message names the setting and a value that works, written ``key=value``: the same words work
as ``--set key=value`` and as ``train(..., key=value)``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import types
import typing
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Union

from grpo_lite.errors import ConfigError, OutputDirError
from grpo_lite.planning.candidates import LORA_KEYS, MODEL_KEYS, TRAINER_KEYS

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan

__all__ = ["RANGES", "check_before_launch", "check_free_space", "check_output_dir", "check_overrides", "format_bytes"]

_R = tuple[Callable[[Any], bool], str, Any]  # (accepts, what it must be, a value that works)
RANGES: dict[str, _R] = {
    "learning_rate": (lambda x: x > 0, "> 0", 1e-5),
    "weight_decay": (lambda x: x >= 0, ">= 0", 0.1),
    "adam_beta1": (lambda x: 0 <= x < 1, "in [0, 1)", 0.9),
    "adam_beta2": (lambda x: 0 <= x < 1, "in [0, 1)", 0.99),
    "adam_epsilon": (lambda x: x > 0, "> 0", 1e-8),
    "max_grad_norm": (lambda x: x >= 0, ">= 0 (0 turns clipping off)", 0.1),
    "warmup_steps": (lambda x: x >= 0, ">= 0 (below 1: a share of the steps)", 0.1),
    "num_train_epochs": (lambda x: x > 0, "> 0", 1),
    "logging_steps": (lambda x: x > 0, "> 0", 1),
    "save_steps": (lambda x: x > 0, "> 0 (below 1: a share of the steps)", 50),
    "save_total_limit": (lambda x: x >= 0, ">= 0 (0 or None keeps every checkpoint)", 2),
    "temperature": (lambda x: x > 0, "> 0", 0.7),
    "top_p": (lambda x: 0 < x <= 1, "in (0, 1]", 1.0),
    "top_k": (lambda x: x >= 0, ">= 0 (0 turns it off)", 0),
    "min_p": (lambda x: 0 <= x <= 1, "in [0, 1]", 0.05),
    "repetition_penalty": (lambda x: x > 0, "> 0", 1.0),
    "beta": (lambda x: x >= 0, ">= 0", 0.0),
    "epsilon": (lambda x: x > 0, "> 0", 0.2),
    "epsilon_high": (lambda x: x > 0, "> 0", 0.28),
    "num_iterations": (lambda x: x >= 1, ">= 1", 1),
    "lora_r": (lambda x: x >= 1, ">= 1", 16),
    "lora_alpha": (lambda x: x > 0, "> 0", 32),
    "lora_dropout": (lambda x: 0 <= x < 1, "in [0, 1)", 0.05),
}
"""Settings with a range, in GRPOConfig's order where it has them: (accepts, what it must be, an example)."""

# grpo-lite's own keys that are not GRPOConfig fields, with their types
_OWN_TYPES: dict[str, Any] = {"lora_r": int, "lora_alpha": float, "lora_dropout": float,
                              "lora_target_modules": Union[str, list, None], "dtype": str, "update_rounding": str,
                              "shared_prefix": bool}
_PLANNER_CHOICES = {"optim"}  # enums the planner checks against what it models (a shorter, truer list)


def _field_types() -> dict[str, Any]:
    from trl import GRPOConfig

    hints = typing.get_type_hints(GRPOConfig)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(GRPOConfig) if f.init}


def _enum_of(hint: Any) -> type[Enum] | None:
    for arg in typing.get_args(hint) or (hint,):
        if isinstance(arg, type) and issubclass(arg, Enum):
            return arg
    return None


def _accepts(hint: Any, value: Any) -> bool:
    """Whether ``value`` has type ``hint`` (int for float is fine; bool is not a number here)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if hint is type(None) or hint is None:
        return value is None
    if origin in (Union, types.UnionType):
        return any(_accepts(arg, value) for arg in args)
    if origin is Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return isinstance(value, hint)
    if origin in (list, tuple) or hint in (list, tuple):
        return isinstance(value, (list, tuple)) and (not args or all(_accepts(args[0], v) for v in value))
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    return True  # a type we do not model (ParallelismConfig...): TRL checks it


def _kinds(hint: Any) -> list[str]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        kinds = [k for a in args if a is not type(None) for k in _kinds(a)]
        return list(dict.fromkeys(kinds)) + (["None"] if type(None) in args else [])
    names = {bool: ["True", "False"], int: ["a whole number"], float: ["a number"], str: ["text"], dict: ["a dict"]}
    if hint in names:
        return names[hint]
    if origin in (list, tuple) or hint in (list, tuple):
        return [f"a list of {' or '.join(_kinds(args[0])).removeprefix('a ')}" if args else "a list"]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return [f"one of {', '.join(str(m.value) for m in hint)}"]
    return [getattr(hint, "__name__", str(hint))]


def _describe(hint: Any) -> str:
    """``float`` -> 'a number'; ``bool | None`` -> 'True, False or None'.

    >>> _describe(float), _describe(typing.Optional[bool]), _describe(list[str])
    ('a number', 'True, False or None', 'a list of text')
    """
    kinds = _kinds(hint)
    return kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " or " + kinds[-1]


def _example(key: str, default: Any, hint: Any = Any) -> str:
    """``; e.g. key=<a value that works>``, or nothing when there is no obvious one."""
    if key in RANGES:
        value = RANGES[key][2]
    elif default is not dataclasses.MISSING and default is not None and not callable(default):
        value = default.value if isinstance(default, Enum) else default
    elif "True" in _kinds(hint):
        value = True
    else:
        return ""
    return f"; e.g. {key}={value!r}"


def check_overrides(overrides: dict[str, Any], *, n_rewards: int | None = None) -> None:
    """Check every override's name, type and range before anything loads.

    Args:
        overrides: ``train(**overrides)``, or the parsed ``--set`` values.
        n_rewards: the number of reward functions (``reward_weights`` must give one weight each).

    Raises:
        ConfigError: an unknown name (with the closest valid one), a value of the wrong type, a
            non-finite number, a value out of range, an unknown choice; the message shows a value that works.
    """
    from trl import GRPOConfig

    from grpo_lite.training.build import check_config_keys

    check_config_keys(overrides, also=LORA_KEYS + MODEL_KEYS + TRAINER_KEYS)
    hints = {**_field_types(), **_OWN_TYPES}
    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    for key, value in overrides.items():
        hint, default = hints.get(key, Any), defaults.get(key, dataclasses.MISSING)
        if not _accepts(hint, value):
            raise ConfigError(f"{key}={value!r}: {key} takes {_describe(hint)}{_example(key, default, hint)}")
        enum = _enum_of(hint)
        if enum is not None and key not in _PLANNER_CHOICES and isinstance(value, str):
            choices = [str(m.value) for m in enum]
            if value not in choices:
                raise ConfigError(f"{key}={value!r} is not valid; choose one of {', '.join(choices)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}={value!r} must be a finite number{_example(key, default)}")
        if key in RANGES and isinstance(value, (int, float)) and not isinstance(value, bool):
            accepts, what, _ = RANGES[key]
            if not accepts(value):
                raise ConfigError(f"{key}={value!r} must be {what}{_example(key, default)}")
    weights = overrides.get("reward_weights")
    if weights is not None:
        if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) for w in weights):
            raise ConfigError(f"reward_weights={weights!r} must be finite numbers, one per reward")
        if n_rewards is not None and len(weights) != n_rewards:
            raise ConfigError(f"reward_weights has {len(weights)} weights for {n_rewards} rewards; give one per "
                              "reward, in the order of the rewards")


def check_output_dir(out: Path) -> None:
    """Create ``out`` if needed and check that files can be written there.

    Raises:
        OutputDirError: ``out`` (or a folder above it) is a file, or the folder cannot be created or written.
    """
    hint = "pass a folder you can write to (--output-dir DIR; Python: output_dir=...)"
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"output folder {out} is a file, not a folder; {hint}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in out.parents if p.exists() and not p.is_dir()), out)
        raise OutputDirError(f"cannot create the output folder {out}: {blocker} is a file; {hint}") from None
    except OSError as exc:
        raise OutputDirError(f"cannot create the output folder {out}: {exc.strerror}; {hint}") from None
    probe = out / f".grpo-lite-write-test-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot write in the output folder {out}: {exc.strerror}; {hint}") from None


def check_before_launch(output_dir: str | os.PathLike | None, overrides: dict[str, Any], *, n_rewards: int) -> None:
    """What can be checked before ``grpo-lite train --num-processes N`` starts its ranks: the settings,
    the folder, and whether a live run holds it (a rank's error would come back inside the launcher's
    traceback). Each rank checks again, and takes the lock."""
    from grpo_lite.training.runlock import RunLock

    check_overrides(overrides, n_rewards=n_rewards)
    if output_dir is not None:
        check_output_dir(Path(output_dir))
        RunLock.check(Path(output_dir))  # raises when a live run holds the folder


def format_bytes(n: float) -> str:
    """``3 * 2**30`` -> '3.00 GiB'; below 1 GiB in MiB.

    >>> format_bytes(3 * 2**30), format_bytes(5 * 2**20)
    ('3.00 GiB', '5.0 MiB')
    """
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def check_free_space(out: Path, plan: Plan, *, keep: int | None) -> str | None:
    """Check that the disk holding ``out`` has room for one checkpoint of ``plan``.

    Args:
        keep: ``save_total_limit`` (None: no limit).

    Returns:
        A warning line when the disk may not hold the whole run (``keep`` checkpoints plus the one
        being written and the final model), else None.

    Raises:
        OutputDirError: less free space than one checkpoint needs; the message gives both sizes.
    """
    from grpo_lite.training.checkpoints import INCOMPLETE_DIR, checkpoint_bytes

    need = checkpoint_bytes(plan)
    free = shutil.disk_usage(out).free
    if free < need:
        cut_off = _folder_bytes(out / INCOMPLETE_DIR)
        note = (f"; {out / INCOMPLETE_DIR} holds {format_bytes(cut_off)} of cut-off checkpoints you can delete"
                if cut_off else "")
        raise OutputDirError(f"the disk holding {out} has {format_bytes(free)} free; one checkpoint of this run needs "
                             f"about {format_bytes(need)}: free some space or pass another output folder "
                             f"(--output-dir DIR; Python: output_dir=...){note}")
    whole = need * ((keep or 1) + 1) + need  # the checkpoints kept, the one being written, the final model
    if free < whole:
        return (f"disk: {format_bytes(free)} free in {out}; this run may write up to {format_bytes(whole)} "
                f"(checkpoints of about {format_bytes(need)} each and the final model)")
    return None
