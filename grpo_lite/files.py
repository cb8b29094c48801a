"""Every file grpo-lite writes is written whole or not at all: :func:`atomic_write`.

The file is written as ``.<name>.tmp-<pid>-<random>`` beside ``path``, synced and renamed over it; any error
removes it. A killed process cannot: :func:`remove_stale_temporaries` removes those whose PID is gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from pathlib import Path
from typing import IO, Any, Iterator, Literal

__all__ = ["atomic_write", "remove_stale_temporaries", "write_json", "write_text"]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: Literal["w", "wb"] = "w") -> Iterator[IO[Any]]:
    """The temporary file of ``path`` open in ``mode`` (text: UTF-8), renamed over ``path`` on a clean exit.
    Its ``name`` is the temporary path, for writers that open the file themselves (the GGUF writer)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode {mode!r} is not valid; choose 'w' (text) or 'wb' (bytes)")
    tmp = Path(path).with_name(f".{Path(path).name}.tmp-{os.getpid()}-{secrets.token_hex(3)}")
    handle = open(tmp, "xb") if mode == "wb" else open(tmp, "x", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # a folder gone read-only: the error that matters is the one raised
            tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (its folder made if needed) and return the path."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as f:
        f.write(text)
    return Path(path)


def write_json(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as indented JSON to ``path`` atomically and return the path."""
    return write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def remove_stale_temporaries(folder: Path, names: tuple[str, ...]) -> None:
    """Remove the temporaries of ``names`` in ``folder`` whose process is gone (a live one may be writing;
    another user's process counts as live)."""
    from psutil import pid_exists

    for child in folder.glob(".*.tmp-*"):
        found = re.fullmatch(r"\.(.+)\.tmp-(\d+)-[0-9a-f]+", child.name)
        if found and found[1] in names and not pid_exists(int(found[2])):
            child.unlink(missing_ok=True)
