"""One run per output folder: a lock held for the run's life.

``<output_dir>/.grpo-lite.lock`` holds the PID, host and start time of the run that owns the folder,
and that process holds the kernel's advisory lock on it (``fcntl.flock``). A second run into the
same folder fails at once with an :class:`~grpo_lite.errors.OutputDirError` that names the first
one's PID. When the owner dies (SIGKILL, a crash, a reboot) the kernel drops its lock: the file is
stale, and the next run takes it over and reports whose it was (``RunLock.stale``). A clean end
removes the file. Where ``flock`` is missing (Windows, some network filesystems) the recorded PID
is checked instead. With several processes only the main one (rank 0) takes the lock.

Only the standard library is imported.
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

from grpo_lite.errors import OutputDirError

try:  # pragma: no cover - absent on Windows
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_NAME", "RunLock", "pid_alive"]

LOCK_NAME = ".grpo-lite.lock"
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.ENOSYS}


def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists on this machine.

    >>> pid_alive(os.getpid())
    True
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except OSError:  # pragma: no cover - e.g. Windows without the process
        return False
    return True


def _read(fd: int) -> dict[str, Any] | None:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 4096)
    try:
        record = json.loads(raw.decode()) if raw.strip() else None
    except (UnicodeDecodeError, ValueError):
        return {"pid": None, "raw": raw[:80].decode(errors="replace")}
    return record if isinstance(record, dict) else None


def _describe(record: dict[str, Any] | None) -> str:
    if not record:
        return "another process"
    when = record.get("started")
    since = f", started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(when))}" if isinstance(when, (int, float)) else ""
    host = record.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return f"PID {record.get('pid')}{where}{since}"


@dataclass
class RunLock:
    """The lock on one run folder (see the module docstring).

    Attributes:
        path: the lock file.
        stale: the record of a dead run whose lock was taken over, or None.
    """

    path: Path
    fd: int | None
    stale: dict[str, Any] | None = None

    @classmethod
    def acquire(cls, output_dir: Path) -> RunLock:
        """Take the lock of ``output_dir`` (created if needed).

        Raises:
            OutputDirError: another live run holds it; the message names its PID.
        """
        path = Path(output_dir) / LOCK_NAME
        for _ in range(5):  # the holder may remove the file between our open and our lock: try again
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                held = cls._lock(fd, path)
            except BaseException:
                os.close(fd)
                raise
            if held:
                break
            os.close(fd)
        else:  # pragma: no cover - five races in a row
            raise OutputDirError(f"could not take the lock {path}: other runs keep starting in {output_dir}")
        previous = _read(fd)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(record).encode())
        os.fsync(fd)
        stale = previous if previous and previous.get("pid") != os.getpid() else None
        return cls(path, fd, stale)

    @classmethod
    def check(cls, output_dir: Path) -> None:
        """Raise :class:`OutputDirError` when a live run holds ``output_dir``; change nothing on disk."""
        path = Path(output_dir) / LOCK_NAME
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            cls._lock(fd, path)
        finally:
            os.close(fd)  # closing drops the lock again

    @staticmethod
    def _lock(fd: int, path: Path) -> bool:
        """Lock ``fd``; False when the file was replaced meanwhile. Raises OutputDirError when held."""
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OutputDirError(
                    f"another grpo-lite run ({_describe(_read(fd))}) is writing to {path.parent}; wait for it to "
                    "finish or stop it, or pass another output_dir (--output-dir)") from None
            except OSError as exc:
                if exc.errno not in _NO_FLOCK:
                    raise
            else:
                try:
                    return os.fstat(fd).st_ino == os.stat(path).st_ino
                except FileNotFoundError:
                    return False
        record = _read(fd)  # no flock here: trust a live PID on this host
        pid = record.get("pid") if record else None
        if isinstance(pid, int) and pid != os.getpid() and record.get("host") in (None, socket.gethostname()) \
                and pid_alive(pid):
            raise OutputDirError(f"another grpo-lite run ({_describe(record)}) is writing to {path.parent}; wait "
                                 "for it to finish or stop it, or pass another output_dir (--output-dir)")
        return True

    def stale_note(self) -> str | None:
        """One line about the stale lock taken over, or None."""
        if self.stale is None:
            return None
        return f"the lock of an earlier run ({_describe(self.stale)}) was left behind: that process is gone; taken over"

    def release(self) -> None:
        """Remove the lock file and drop the lock (idempotent)."""
        if self.fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(self.fd)  # closing drops the flock
            self.fd = None
