"""Every file grpo-lite writes is written whole or not at all; nothing of a run is written or deleted through a link
(docs/internals.md).
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import IO, Any, Iterator, Literal

from psutil import pid_exists

from grpo_lite.errors import OutputDirError

_SAMPLES, _SAMPLE_BYTES = 16, 4096  # a file's fingerprint reads 16 samples of 4 KiB: a 2 GB file costs 64 KiB


def sampled_digest(files: list[Path]) -> str:
    """A fingerprint of ``files``: each one's name, size and 16 samples of 4 KiB (a small file read whole). Cheap
    for any size; it sees a change of length and most edits, and not a file's time, which a copy or a checkout
    changes while the content stays."""
    digest = hashlib.sha256()
    for path in files:
        size = path.stat().st_size
        digest.update(f"{path.name}:{size}".encode())
        with open(path, "rb") as f:
            for i in range(_SAMPLES):
                f.seek(size * i // _SAMPLES)
                digest.update(f.read(_SAMPLE_BYTES))
    return digest.hexdigest()[:16]


RUN_GGUF = "final.gguf"  # a run's export, next to its final/ model
# What a run and its export write in the run folder (names or fnmatch patterns); the lock is RunLock's own.
RUN_ENTRIES = (
    "run.json",
    "run.json.corrupt",
    "history.jsonl",
    "reward_curve.png",
    "README.md",  # TRL's model card
    "final",
    "incomplete",
    "ranks",
    "checkpoint-*",
    "stepdown-*",
    RUN_GGUF,
    "final.Modelfile",
    "final.system_prompt.txt",
)


NAME_MAX = 255  # bytes in one file or folder name (ext4, APFS, NTFS)
NAME_ROOM = NAME_MAX - 32  # what a name may use: a temporary beside a file adds ".", ".tmp-PID-HEX"


def check_name_lengths(path: str | os.PathLike, option: str) -> None:
    """Refuse ``path`` when one of its names is longer than the file system takes (with a temporary's suffix).

    Raises:
        OutputDirError: naming the long name's start, its length and ``option`` (where to pass a shorter one).
    """
    for part in Path(path).parts:
        if len(os.fsencode(part)) > NAME_ROOM:
            raise OutputDirError(
                f"the name {part[:24]}... in {option.split()[0]} is {len(os.fsencode(part))} bytes; a file or folder "
                f"name may have at most {NAME_ROOM} here (the file system takes {NAME_MAX}, less the suffix of a "
                f"temporary file): pass a shorter one ({option})"
            )


class Together:
    """Files written to temporaries beside their paths, renamed over them together once all are written
    (:func:`together`); an error before removes every temporary, the files already there stay whole."""

    def __init__(self) -> None:
        self.staged: list[tuple[Path, Path]] = []  # (temporary, path), renamed in order
        self.removed: list[Path] = []  # removed when the others are renamed

    @contextlib.contextmanager
    def write(self, path: str | os.PathLike, mode: Literal["w", "wb"] = "w") -> Iterator[IO[Any]]:
        """The temporary of ``path`` open in ``mode`` (text: UTF-8), synced when the block ends; renamed by
        :meth:`commit`. Its ``name`` is the temporary path, for writers that open the file themselves."""
        if mode not in ("w", "wb"):
            raise ValueError(f"atomic_write mode {mode!r} is not valid; choose 'w' (text) or 'wb' (bytes)")
        tmp = Path(path).with_name(f".{Path(path).name}.tmp-{os.getpid()}-{secrets.token_hex(3)}")
        handle = open(tmp, "xb") if mode == "wb" else open(tmp, "x", encoding="utf-8")  # noqa: SIM115 - closed below
        self.staged.append((tmp, Path(path)))
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())

    def staged_sizes(self) -> list[int]:
        """The sizes of the temporaries not yet renamed: what an error gives back."""
        return [tmp.stat().st_size for tmp, _ in self.staged if tmp.exists()]

    def remove(self, path: str | os.PathLike) -> None:
        """Remove ``path`` (a file or a link) when the others are renamed."""
        self.removed.append(Path(path))

    def commit(self) -> None:
        """Rename every temporary over its path (a link there is replaced, never followed); remove the others."""
        for tmp, path in self.staged:
            os.replace(tmp, path)
        self.staged = []
        for path in self.removed:
            path.unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove every temporary not yet renamed."""
        for tmp, _ in self.staged:
            with contextlib.suppress(OSError):  # a folder gone read-only: the error that matters is the one raised
                tmp.unlink(missing_ok=True)
        self.staged = []


@contextlib.contextmanager
def together() -> Iterator[Together]:
    """A :class:`Together`: its files renamed into place on a clean exit, none of them on an error."""
    group = Together()
    try:
        yield group
        group.commit()
    except BaseException:
        group.discard()
        raise


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: Literal["w", "wb"] = "w") -> Iterator[IO[Any]]:
    """:meth:`Together.write` for one file: renamed over ``path`` on a clean exit."""
    with together() as group, group.write(path, mode) as handle:
        yield handle


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
    for child in folder.glob(".*.tmp-*"):
        found = re.fullmatch(r"\.(.+)\.tmp-(\d+)-[0-9a-f]+", child.name)
        if found and found[1] in names and not pid_exists(int(found[2])):
            child.unlink(missing_ok=True)


def export_companions(gguf: Path) -> tuple[Path, Path]:
    """The Ollama Modelfile and the system prompt file that go next to the exported ``gguf``.

    >>> [p.name for p in export_companions(Path("runs/demo/final.gguf"))]
    ['final.Modelfile', 'final.system_prompt.txt']
    """
    return gguf.with_suffix(".Modelfile"), gguf.with_suffix(".system_prompt.txt")


def run_entries(run_dir: str | os.PathLike) -> list[Path]:
    """The entries of ``run_dir`` that a run or its export wrote (:data:`RUN_ENTRIES`), links included."""
    try:
        children = sorted(Path(run_dir).iterdir())
    except FileNotFoundError:
        return []
    return [c for c in children if any(fnmatch.fnmatchcase(c.name, pattern) for pattern in RUN_ENTRIES)]


def _link_error(link: Path, what: str) -> Any:
    try:
        target = f" (to {os.readlink(link)})"
    except OSError:  # pragma: no cover - removed meanwhile
        target = ""
    return OutputDirError(
        f"{link} is a symbolic link{target}; {what}, so nothing is written or deleted through it: remove the link "
        f"(rm {link}), or pass another output_dir (--output-dir)"
    )


def inside(root: str | os.PathLike, *parts: str) -> Path:
    """``root/parts...``, refused when one of the parts below ``root`` is a symbolic link (``root`` itself may be).

    >>> inside("runs/x", "incomplete", "checkpoint-3").as_posix()
    'runs/x/incomplete/checkpoint-3'

    Raises:
        OutputDirError: a part is a link; the message names it and its target.
    """
    path = Path(root)
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise _link_error(path, "a run folder's files stay inside it")
    return path


def refuse_links(run_dir: str | os.PathLike) -> None:
    """Raise when an entry a run writes in ``run_dir`` (:data:`RUN_ENTRIES`), or anything under one, is a link.

    Raises:
        OutputDirError: the first link found, named with its target.
    """
    for entry in run_entries(run_dir):
        if entry.is_symlink():
            raise _link_error(entry, "a run writes there")
        if entry.is_dir():
            for folder, dirs, names in os.walk(entry):  # os.walk lists a linked folder without entering it
                for name in sorted(dirs + names):
                    if os.path.islink(os.path.join(folder, name)):
                        raise _link_error(Path(folder) / name, "a run writes there")


def remove(path: str | os.PathLike) -> None:
    """Remove ``path``: a link is unlinked (its target kept), a folder removed with what it holds (links inside
    unlinked, never followed), a file unlinked; a missing one is fine."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)  # removes links inside as links; refuses a link at the top (handled above)
