"""What train() checks about its output folder, the model's context and the free disk before it loads anything
(model loading takes minutes; a bad folder must not wait for it)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite import files
from grpo_lite.defaults import GIB
from grpo_lite.errors import ConfigError, OutputDirError

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan

_FOLDER_OPTION = "(--output-dir DIR; Python: output_dir=...)"


def check_output_path(output_dir: Any) -> None:
    """``output_dir`` (None: runs/<model>-<time>) names a folder a run may fill: text or a path, not empty (the
    current folder), not the filesystem root, not inside grpo-lite's installed package, with names the file system
    takes. Checked where train() takes it, before anything is loaded.

    Raises:
        ConfigError: it is none of those; the message says what to pass. OutputDirError: a name too long.
    """
    if output_dir is None:
        return
    example = "such as output_dir='runs/my-run' (--output-dir runs/my-run)"
    if not isinstance(output_dir, (str, os.PathLike)) or os.fspath(output_dir) == "":
        raise ConfigError(
            f"output_dir={output_dir!r} names no folder; pass a folder path {example}, or leave it out for "
            "runs/<model>-<time>"
        )
    files.check_name_lengths(output_dir, "--output-dir DIR; Python: output_dir=...")
    out = Path(output_dir).resolve()
    package = Path(__file__).resolve().parents[1]  # grpo_lite/
    if out == Path(out.anchor) or out == package or package in out.parents:
        where = "is the filesystem root" if out == Path(out.anchor) else f"is inside grpo-lite's package ({package})"
        raise ConfigError(
            f"output_dir {os.fspath(output_dir)!r} {where}, not a folder a run may fill; pass a folder of its own "
            f"{example}"
        )


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


# the setting that bounds the completion -> how to set it to {room}
_COMPLETION_SETTINGS = {
    "max_completion_length": "--set max_completion_length={room}; in a recipe, max_completion_length: {room} under "
    "trl:; Python: max_completion_length={room}",
    "max_new_tokens": "--max-new-tokens {room}; Python: max_new_tokens={room}",  # evaluation
}


def check_positions(
    prompt_tokens: int, completion: int, context: int | None, model_name: str, setting: str = "max_completion_length"
) -> None:
    """The longest prompt and ``completion`` tokens fit the model's context of ``context`` tokens (None: not checked).

    Args:
        setting: the setting ``completion`` comes from: ``max_completion_length`` (training) or ``max_new_tokens``.

    Raises:
        ConfigError: they do not; the message names the longest ``setting`` that fits.
    """
    if context is None or prompt_tokens + completion <= context:
        return
    room = context - prompt_tokens
    how = _COMPLETION_SETTINGS[setting].format(room=room)
    fix = f"set {setting}={room} or lower ({how}), or " if room >= 1 else ""
    raise ConfigError(
        f"the longest prompt ({prompt_tokens} tokens) and {setting} ({completion}) "
        f"need {prompt_tokens + completion} positions; {model_name} has a context of "
        f"{context} tokens: {fix}shorten the prompts (drop the longest rows from the dataset)"
    )
