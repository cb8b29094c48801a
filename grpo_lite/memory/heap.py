"""The process's heap on CPU: glibc's mmap threshold, and resident-set readings.

With glibc's defaults, freeing a large block raises the dynamic mmap threshold (up to 32 MiB), so
the next GRPO step's tiles come from the heap, and the heap keeps their pages after they are freed:
peak RSS creeps up step after step and stays high. A fixed threshold (``mallopt(M_MMAP_THRESHOLD,
65536)``, what ``MALLOC_MMAP_THRESHOLD_=65536`` does) serves every block of 64 KiB or more with its
own mapping that goes back to the system when freed; it also turns the dynamic adjustment off.
``train()`` sets it on CPU, and the CPU memory model plans for it.

Standard library only: nothing heavy is imported here.

>>> now = current_rss_bytes()
>>> peak_rss_bytes() >= now > 0
True
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import resource
import sys

__all__ = [
    "MMAP_THRESHOLD_BYTES",
    "current_rss_bytes",
    "peak_rss_bytes",
    "set_mmap_threshold",
    "use_mmap_threshold_on_cpu",
]

MMAP_THRESHOLD_BYTES = 65536  # blocks of this size or more get their own mapping, returned when freed
_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
_applied: int | None = None


def set_mmap_threshold(nbytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Set glibc's mmap threshold for this process (Linux with glibc only; elsewhere a no-op).

    Returns:
        True when the threshold is in force (set now or earlier), False where glibc is absent or
        refused it.
    """
    global _applied
    if _applied == nbytes:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        ok = bool(libc.mallopt(_M_MMAP_THRESHOLD, int(nbytes)))
    except (OSError, AttributeError):  # musl or another libc without mallopt
        return False
    if ok:
        _applied = nbytes
    return ok


def use_mmap_threshold_on_cpu() -> bool:
    """Set the mmap threshold when this process trains on CPU (no CUDA device); ``train()`` calls it first.

    Returns:
        True when the threshold is in force.
    """
    import torch

    if torch.cuda.is_available():
        return False
    return set_mmap_threshold()


def current_rss_bytes() -> int:
    """Resident set size of this process now (Linux ``/proc/self/statm``; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def peak_rss_bytes() -> int:
    """The highest resident set size of this process so far (``getrusage``; kilobytes on Linux).

    Linux updates the high-water mark lazily, so the RSS of this moment can be above it: the larger of
    the two is returned.
    """
    scale = 1 if sys.platform == "darwin" else 1024
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale, current_rss_bytes())
