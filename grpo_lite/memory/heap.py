"""The process's heap on CPU: glibc's mmap threshold, which ``train()`` fixes at 64 KiB for its run so peak RSS does
not creep up step after step (docs/internals.md), and resident-set readings.

>>> now = current_rss_bytes()
>>> peak_rss_bytes() >= now > 0
True
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import resource
import sys
from typing import Iterator

MMAP_THRESHOLD_BYTES = 65536  # blocks of this size or more get their own mapping, returned when freed
# the highest mmap threshold glibc's dynamic adjustment reaches (malloc.c: DEFAULT_MMAP_THRESHOLD_MAX,
# 4 MiB * sizeof(long): 32 MiB on 64-bit); it sets the trim threshold to twice the mmap threshold
LIFTED_MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)
_M_TRIM_THRESHOLD = -1  # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3
_applied: int | None = None


def _mallopt(param: int, value: int) -> bool:
    """glibc's ``mallopt(param, value)``; False on another platform or libc, or when glibc refused it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(param, int(value)))
    except (OSError, AttributeError):  # musl or another libc without mallopt
        return False


def set_mmap_threshold(nbytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Set glibc's mmap threshold for this process; True when it is in force (False without glibc, or refused)."""
    global _applied
    if _applied == nbytes:
        return True
    ok = _mallopt(_M_MMAP_THRESHOLD, nbytes)
    if ok:
        _applied = nbytes
    return ok


def lift_mmap_threshold() -> bool:
    """Lift the threshold :func:`set_mmap_threshold` fixed to what glibc's dynamic adjustment climbs to, as near to
    its defaults as ``mallopt`` goes back; True when lifted (False: none was in force)."""
    global _applied
    if _applied is None:
        return False
    _applied = None
    ok = _mallopt(_M_MMAP_THRESHOLD, LIFTED_MMAP_THRESHOLD_BYTES)
    return _mallopt(_M_TRIM_THRESHOLD, 2 * LIFTED_MMAP_THRESHOLD_BYTES) and ok


@contextlib.contextmanager
def mmap_threshold_on_cpu(device: str | None = None) -> Iterator[bool]:
    """The mmap threshold in force for the block when it runs on CPU, and at its end, even on an error, the heap as
    it was before.

    Args:
        device: ``"cpu"`` sets the threshold, another device leaves the heap alone. Default: the CPU when there is
            no CUDA device.

    Yields:
        True when the threshold is in force in the block.
    """
    if device is None:
        import torch  # heavy: torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    earlier = _applied
    on = device == "cpu" and set_mmap_threshold()
    try:
        yield on
    finally:
        if on and earlier is None:
            lift_mmap_threshold()
        elif on and earlier is not None:
            set_mmap_threshold(earlier)


def current_rss_bytes() -> int:
    """Resident set size of this process now (psutil)."""
    import psutil  # a dependency, loaded when memory is read

    return int(psutil.Process().memory_info().rss)


def peak_rss_bytes() -> int:
    """The highest resident set size of this process so far, at least the current.

    Linux: ``VmHWM`` of ``/proc/self/status``, the high-water mark of this program's own memory. Not ``getrusage``:
    its ``ru_maxrss`` survives ``exec``, so a process started from a large one (``subprocess`` from a test runner
    or a notebook) would report its parent's peak. Elsewhere: ``getrusage``.
    """
    try:
        with open("/proc/self/status", "rb") as f:
            hwm = next((line.split()[1] for line in f if line.startswith(b"VmHWM:")), None)
    except OSError:
        hwm = None
    if hwm is not None:
        return max(int(hwm) * 1024, current_rss_bytes())
    scale = 1 if sys.platform == "darwin" else 1024
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale, current_rss_bytes())
