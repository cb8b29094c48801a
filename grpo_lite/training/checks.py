"""What train() checks about its output folder, the model's context and the free disk before it loads anything
(model loading takes minutes; a bad folder must not wait for it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from grpo_lite.defaults import GIB
from grpo_lite.errors import ConfigError, OutputDirError

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan

_FOLDER_OPTION = "(--output-dir DIR; Python: output_dir=...)"


def check_output_dir(out: Path) -> None:
    """Create ``out`` if needed and check that files can be written there.

    Raises:
        OutputDirError: ``out`` (or a folder above it) is a file, or the folder cannot be created or written.
    """
    hint = f"pass a folder you can write to {_FOLDER_OPTION}"
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


def format_bytes(n: float) -> str:
    """``3 * 2**30`` -> '3.00 GiB'; below 1 GiB in MiB.

    >>> format_bytes(3 * 2**30), format_bytes(5 * 2**20)
    ('3.00 GiB', '5.0 MiB')
    """
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 2**20:.1f} MiB"


def check_free_space(out: Path, plan: Plan, *, keep: int | None) -> str | None:
    """Check that the disk holding ``out`` has room for one checkpoint of ``plan``; return a warning line when it
    may not hold the whole run (``keep``: ``save_total_limit`` checkpoints, the one being written, the final model).

    Raises:
        OutputDirError: less free space than one checkpoint needs; the message gives both sizes.
    """
    from grpo_lite.training.run.checkpoints import INCOMPLETE_DIR, checkpoint_bytes  # heavy: imports transformers

    need = checkpoint_bytes(plan)
    free = shutil.disk_usage(out).free
    if free < need:
        cut_off = sum(p.stat().st_size for p in (out / INCOMPLETE_DIR).rglob("*") if p.is_file())
        note = (
            f"; {out / INCOMPLETE_DIR} holds {format_bytes(cut_off)} of cut-off checkpoints you can delete"
            if cut_off
            else ""
        )
        raise OutputDirError(
            f"the disk holding {out} has {format_bytes(free)} free; one checkpoint of this run needs "
            f"about {format_bytes(need)}: free some space or pass another output folder "
            f"{_FOLDER_OPTION}{note}"
        )
    whole = need * ((keep or 1) + 1) + need  # the checkpoints kept, the one being written, the final model
    if free < whole:
        return (
            f"disk: {format_bytes(free)} free in {out}; this run may write up to {format_bytes(whole)} "
            f"(checkpoints of about {format_bytes(need)} each and the final model)"
        )
    return None


def check_positions(prompt_tokens: int, completion: int, context: int | None, model_name: str) -> None:
    """The longest prompt and ``completion`` tokens fit the model's context of ``context`` tokens (None: not checked).

    Raises:
        ConfigError: they do not; the message names the longest ``max_completion_length`` that fits.
    """
    if context is None or prompt_tokens + completion <= context:
        return
    room = context - prompt_tokens
    fix = (
        f"set max_completion_length={room} or lower (--set max_completion_length={room}; in a recipe, "
        f"max_completion_length: {room} under trl:; Python: max_completion_length={room}), or "
        if room >= 1
        else ""
    )
    raise ConfigError(
        f"the longest prompt ({prompt_tokens} tokens) and max_completion_length ({completion}) "
        f"need {prompt_tokens + completion} positions; {model_name} has a context of "
        f"{context} tokens: {fix}shorten the prompts (drop the longest rows from the dataset)"
    )
