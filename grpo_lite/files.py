"""Every file grpo-lite writes is written whole or not at all: :func:`atomic_write`.

The file is written as ``.<name>.tmp-<pid>-<random>`` in its own folder, flushed and synced to disk, then
renamed over ``path`` (``os.replace``, atomic within one filesystem): a reader sees the old file or the new
one, never a part. Any error (a full disk, Ctrl-C) removes the temporary and leaves an older file at
``path`` whole. A process killed outright (SIGKILL, a power cut) cannot remove its temporary; the name
carries its PID, so :func:`remove_stale_temporaries` finds the ones whose process is gone.

Folders (checkpoints, ``final/``) are written under a temporary folder name and renamed by their owners.
Only the standard library is imported.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, Literal

__all__ = ["atomic_write", "remove_stale_temporaries", "write_json", "write_text"]

_TMP = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)-[0-9a-f]+$")


@contextmanager
def atomic_write(path: str | os.PathLike, mode: Literal["w", "wb"] = "w") -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing; on a clean exit sync it and rename it over ``path``.

    Text mode writes UTF-8. The file object's ``name`` is the temporary path, for writers that open the
    file themselves (the GGUF writer). The file gets the mode of any new file (0644 under the usual umask).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with atomic_write(Path(folder) / "a.txt") as f:
    ...         _ = f.write("whole")
    ...     print((Path(folder) / "a.txt").read_text(), sorted(os.listdir(folder)))
    whole ['a.txt']
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode {mode!r} is not valid; choose 'w' (text) or 'wb' (bytes)")
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{secrets.token_hex(3)}")
    handle = open(tmp, "xb") if mode == "wb" else open(tmp, "x", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically and return the path."""
    with atomic_write(path) as f:
        f.write(text)
    return Path(path)


def write_json(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as indented JSON to ``path`` atomically (its folder created if needed) and return the path."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def remove_stale_temporaries(folder: str | os.PathLike, names: tuple[str, ...] | None = None) -> list[Path]:
    """Remove the temporaries of :func:`atomic_write` in ``folder`` whose process is gone; return them.

    Args:
        folder: where to look (not recursive).
        names: only the temporaries of these file names; None: all.
    """
    from grpo_lite.training.runlock import pid_alive

    removed = []
    for child in Path(folder).iterdir() if Path(folder).is_dir() else ():
        found = _TMP.match(child.name)
        if found and (names is None or found["name"] in names) and not pid_alive(int(found["pid"])) and child.is_file():
            child.unlink(missing_ok=True)
            removed.append(child)
    return removed
