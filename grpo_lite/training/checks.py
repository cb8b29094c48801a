"""What train() checks before it loads anything: the settings and the output folder.

- :func:`check_overrides`: every ``train(**overrides)`` / ``--set KEY=VALUE`` value, typed as TRL's own
  parser types GRPOConfig's fields (:func:`grpo_lite.recipe.values.typed`) and range-checked (:data:`RANGES`: a learning rate
  must be > 0, a beta below 1...). Model loading takes minutes; a typo must not wait for it.
- :func:`check_output_dir`: the folder can be created and written (not a file, not read-only).
- :func:`check_free_space`: after planning, before the model loads: the disk has room for one
  checkpoint (size from the memory model, :func:`grpo_lite.training.checkpoints.checkpoint_bytes`).

Every message names the setting and a value that works, written ``key=value``: the same words work
as ``--set key=value`` and as ``train(..., key=value)``.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

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

def _example(key: str) -> str:
    """``; e.g. key=<a value that works>`` for a setting with a range."""
    return f"; e.g. {key}={RANGES[key][2]!r}" if key in RANGES else ""


def check_overrides(overrides: dict[str, Any], *, n_rewards: int | None = None) -> dict[str, Any]:
    """Check every override's name, type and range before anything loads; return them typed.

    Args:
        overrides: ``train(**overrides)``, or the parsed ``--set`` values.
        n_rewards: the number of reward functions (``reward_weights`` must give one weight each).

    Returns:
        The overrides typed as TRL's parser types them (``"1e-5"`` -> ``1e-05``; :func:`grpo_lite.recipe.values.typed`).

    Raises:
        ConfigError: an unknown name (with the closest valid one), a value of the wrong type, a
            non-finite number, a value out of range, an unknown choice; the message shows a value that works.
    """
    from grpo_lite.recipe.values import typed
    from grpo_lite.training.build import check_config_keys

    check_config_keys(overrides, also=(*LORA_KEYS, *MODEL_KEYS, *TRAINER_KEYS))
    overrides = {key: typed(key, value) for key, value in overrides.items()}
    for key, value in overrides.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}={value!r} must be a finite number{_example(key)}")
        if key in RANGES and isinstance(value, (int, float)) and not isinstance(value, bool):
            accepts, what, _ = RANGES[key]
            if not accepts(value):
                raise ConfigError(f"{key}={value!r} must be {what}{_example(key)}")
    weights = overrides.get("reward_weights")
    if weights is not None:
        if not all(isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) for w in weights):
            raise ConfigError(f"reward_weights={weights!r} must be finite numbers, one per reward")
        if n_rewards is not None and len(weights) != n_rewards:
            raise ConfigError(f"reward_weights has {len(weights)} weights for {n_rewards} rewards; give one per "
                              "reward, in the order of the rewards")
    return overrides


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
