"""One run per output folder: a lock held for the run's life (``filelock``), naming its owner's PID.

A stale lock (its owner died) is taken over and reported; a link at the lock path is refused (docs/internals.md).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from grpo_lite.errors import OutputDirError

LOCK_NAME = ".grpo-lite.lock"


class RunHeld(OutputDirError):
    """Another live process holds the folder's lock."""


def _read(fd: int) -> dict[str, Any] | None:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 4096)
    try:
        record = json.loads(raw.decode()) if raw.strip() else None
    except (UnicodeDecodeError, ValueError):
        return {"pid": None, "raw": raw[:80].decode(errors="replace")}
    return record if isinstance(record, dict) else None


def _holder(path: Path) -> dict[str, Any] | None:
    """The record a live owner wrote in the lock file (None when unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        return _read(fd)
    finally:
        os.close(fd)


def _describe(record: dict[str, Any] | None) -> str:
    if not record:
        return "another process"
    when = record.get("started")
    since = (
        f", started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when))}"
        if isinstance(when, (int, float))
        else ""
    )
    host = record.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return f"PID {record.get('pid')}{where}{since}"


@dataclass
class RunLock:
    """The lock on one run folder."""

    path: Path  # the lock file
    lock: Any  # filelock.FileLock, held; None once released
    stale: dict[str, Any] | None = None  # the record of a dead run whose lock was taken over

    @classmethod
    def acquire(cls, output_dir: Path) -> RunLock:
        """Take the lock of ``output_dir`` (created if needed).

        Raises:
            OutputDirError: another live run holds it (the message names its PID), or the lock path is a symlink.
        """
        path = Path(output_dir) / LOCK_NAME
        found: list[dict[str, Any] | None] = []

        def own(fd: int) -> None:  # filelock calls this with the lock held: keep the last owner's record, write ours
            found.append(_read(fd))
            os.ftruncate(fd, 0)
            os.pwrite(
                fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}).encode(), 0
            )
            os.fsync(fd)

        lock = cls._take(path, on_acquired=own)
        previous = found[-1] if found else None
        return cls(path, lock, previous if previous and previous.get("pid") != os.getpid() else None)

    @classmethod
    def check(cls, output_dir: Path) -> None:
        """Raise :class:`OutputDirError` when a live run holds ``output_dir``; change nothing on disk."""
        path = Path(output_dir) / LOCK_NAME
        if os.path.lexists(path):
            cls._take(path, preserve_lock_file=True).release()

    @staticmethod
    def _take(path: Path, **options: Any) -> Any:
        lock = FileLock(path, timeout=0, thread_local=False, **options)
        try:
            lock.acquire()
        except Timeout:
            raise RunHeld(
                f"another grpo-lite run ({_describe(_holder(path))}) is writing to {path.parent}; wait for it to "
                "finish or stop it, or pass another output_dir (--output-dir)"
            ) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP or path.is_symlink():
                raise OutputDirError(
                    f"{path} is a symbolic link; a run's lock is never followed out of its folder: "
                    "remove the link, or pass another output_dir (--output-dir)"
                ) from None
            if exc.errno == errno.ENOSYS:
                raise OutputDirError(
                    f"the filesystem holding {path.parent} has no file locks (flock); pass an "
                    "output_dir on a local disk (--output-dir)"
                ) from None
            raise
        return lock

    def stale_note(self) -> str | None:
        """One line about the stale lock taken over, or None."""
        if self.stale is None:
            return None
        return f"the lock of an earlier run ({_describe(self.stale)}) was left behind: that process is gone; taken over"

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        if self.lock is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while held: a waiter that opened it sees it unlinked and retries
        finally:
            self.lock.release()
            self.lock = None
