"""What train() checks before it loads anything (model loading takes minutes; a bad argument must not wait for it):
the output folder it names, and the longest prompt with the completions against the model's context."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from grpo_lite import files
from grpo_lite.errors import ConfigError


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
