"""What the machine has: GPU memory (nominal card size <-> usable GiB), free RAM, and optional extras; detected
inside functions, never at import (tests monkeypatch them).

>>> round(nominal_to_usable_gib(16), 2)
15.73
>>> round(usable_to_nominal_gb(15.73), 1)
16.0
"""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass, fields
from pathlib import Path

from grpo_lite.defaults import GIB, GPU
from grpo_lite.errors import ConfigError


def nominal_to_usable_gib(nominal_gb: float) -> float:
    """GiB PyTorch reports for a card sold as ``nominal_gb`` GB: the driver keeps a share and a fixed part (anchored
    on a 16 GB RTX 3080 Laptop's 15.73 GiB, docs/memory.md).

    >>> round(nominal_to_usable_gib(24), 2)
    23.67
    """
    return nominal_gb * (1 - GPU.driver_reserve_share) - GPU.driver_reserve_gib


def usable_to_nominal_gb(usable_gib: float) -> float:
    """The nominal card size whose usable memory is ``usable_gib`` (inverse of the rule).

    >>> round(usable_to_nominal_gb(nominal_to_usable_gib(6)), 6)
    6.0
    """
    return (usable_gib + GPU.driver_reserve_gib) / (1 - GPU.driver_reserve_share)


def validate_budget_gb(budget_gb: object) -> float:
    """Check a nominal budget: a positive, finite number of GB no larger than any single GPU.

    Raises:
        ConfigError: says what was wrong and what to pass.

    >>> validate_budget_gb(16)
    16.0
    >>> validate_budget_gb(-1)
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: budget_gb=-1 must be > 0: pass the card's nominal size in GB, e.g. 16 for a 16 GB GPU
    """
    hint = "pass the card's nominal size in GB, e.g. 16 for a 16 GB GPU"
    if isinstance(budget_gb, bool) or not isinstance(budget_gb, (int, float)):
        raise ConfigError(f"budget_gb={budget_gb!r} is not a number: {hint}")
    value = float(budget_gb)
    if math.isnan(value) or math.isinf(value):
        raise ConfigError(f"budget_gb={budget_gb!r} is not a finite number: {hint}")
    if value <= 0:
        raise ConfigError(f"budget_gb={budget_gb!r} must be > 0: {hint}")
    if value > GPU.max_budget_gb:
        raise ConfigError(
            f"budget_gb={budget_gb!r} is larger than any single GPU ({GPU.max_budget_gb:.0f} GB); "
            f"budget_gb is per device: {hint}"
        )
    if nominal_to_usable_gib(value) <= 0:
        raise ConfigError(f"budget_gb={budget_gb!r} leaves no usable memory after the driver's share: {hint}")
    return value


def detect_vram() -> tuple[float | None, str]:
    """Total memory of the current CUDA device in GiB, and a sentence saying what was found.

    Returns:
        ``(gib, reason)``; ``gib`` is None when there is no usable CUDA device.
    """
    try:
        import torch  # heavy: torch
    except ImportError:
        return None, "torch is not installed: no CUDA device to plan for"
    try:
        if not torch.cuda.is_available():
            return None, "no CUDA device (torch.cuda.is_available() is False)"
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        total = props.total_memory / GIB
        free, _ = torch.cuda.mem_get_info(index)
    except Exception as exc:  # noqa: BLE001 - a broken driver must not crash planning
        return None, f"CUDA is present but could not be queried ({type(exc).__name__}: {exc})"
    reason = (
        f"detected CUDA device {index}: {props.name}, {total:.2f} GiB total "
        f"(a {usable_to_nominal_gb(total):.0f} GB card)"
    )
    free_gib = free / GIB
    if free_gib < 0.9 * total:
        reason += f"; only {free_gib:.2f} GiB free now: other processes hold memory"
    return total, reason


def _cgroup_room(cgroup: Path) -> int | None:
    """Bytes left under a cgroup v2 memory limit (a container's), or None without a limit."""
    try:
        limit = (cgroup / "memory.max").read_text(encoding="ascii").strip()
        if limit == "max":
            return None
        return max(int(limit) - int((cgroup / "memory.current").read_text(encoding="ascii")), 0)
    except (OSError, ValueError):
        return None


def detect_ram(cgroup: Path = Path("/sys/fs/cgroup")) -> tuple[float | None, str]:
    """RAM a CPU run may use now, in GiB: what the system can give without swapping (psutil's ``available``: the
    kernel's ``MemAvailable`` on Linux) capped by a container's cgroup v2 limit, and a sentence saying where the
    figure came from.

    Returns:
        ``(gib, reason)``; ``gib`` is None when nothing could be read.
    """
    import psutil  # a dependency, loaded when a CPU plan reads the RAM

    try:
        available, source = psutil.virtual_memory().available, "MemAvailable, read by psutil"
    except (OSError, RuntimeError):
        return None, "free RAM could not be read: pass budget_gb with device='cpu' to plan for your RAM"
    room = _cgroup_room(cgroup)
    if room is not None and room < available:
        available, source = room, "room left under the container's memory limit"
    gib = available / GIB
    return gib, f"{gib:.1f} GiB of RAM available now ({source})"


@dataclass(frozen=True)
class Extras:
    """Optional packages that unlock memory or speed savers, by module name."""

    liger_kernel: bool
    vllm: bool
    galore_torch: bool
    bitsandbytes: bool
    deepspeed: bool


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def installed_extras() -> Extras:
    """Which optional packages are importable (checked now, without importing them)."""
    return Extras(**{f.name: _has(f.name) for f in fields(Extras)})
