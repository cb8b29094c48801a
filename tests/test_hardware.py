"""VRAM detection, nominal GB <-> usable GiB, budget validation, optional extras."""

from __future__ import annotations

import os
import sys
import types

import pytest

from grpo_lite.errors import ConfigError
from grpo_lite.planning import hardware


@pytest.mark.parametrize("nominal,usable", [(16, 15.73), (24, 23.67), (8, 7.79), (6, 5.80), (80, 79.25)])
def test_nominal_to_usable(nominal: float, usable: float) -> None:
    assert hardware.nominal_to_usable_gib(nominal) == pytest.approx(usable, abs=0.006)


@pytest.mark.parametrize("nominal", [4, 6, 12, 16, 24, 48, 80, 141])
def test_round_trip(nominal: float) -> None:
    assert hardware.usable_to_nominal_gb(hardware.nominal_to_usable_gib(nominal)) == pytest.approx(nominal)


@pytest.mark.parametrize(
    "value,match",
    [
        (0, "must be > 0"),
        (-4, "must be > 0"),
        (float("nan"), "not a finite number"),
        (float("inf"), "not a finite number"),
        ("16", "is not a number"),
        (True, "is not a number"),
        (None, "is not a number"),
        (4096, "larger than any single GPU"),
        (0.1, "no usable memory"),
    ],
)
def test_invalid_budgets(value: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        hardware.validate_budget_gb(value)
    assert "e.g. 16" in str(info.value)


def test_valid_budget_is_a_float() -> None:
    assert hardware.validate_budget_gb(16) == 16.0


def test_the_suite_sees_no_gpu() -> None:
    """tests/conftest.py hides CUDA so that the suite runs as on a CPU machine; if this fails, something
    initialised CUDA before the conftest could (a pytest plugin, say)."""
    import torch

    assert os.environ["CUDA_VISIBLE_DEVICES"] == "" and not torch.cuda.is_available()


def test_detect_vram_without_cuda_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(0, 0, available=False))
    gib, reason = hardware.detect_vram()
    assert gib is None and reason == "no CUDA device (torch.cuda.is_available() is False)"


def test_detect_vram_with_a_broken_driver_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_torch(0, 0)
    fake.cuda.current_device = lambda: 1 / 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake)
    gib, reason = hardware.detect_vram()
    assert gib is None and reason.startswith("CUDA is present but could not be queried (ZeroDivisionError")


def _fake_torch(total_bytes: int, free_bytes: int, available: bool = True) -> types.ModuleType:
    cuda = types.SimpleNamespace(
        is_available=lambda: available,
        current_device=lambda: 0,
        get_device_properties=lambda i: types.SimpleNamespace(
            name="NVIDIA GeForce RTX 3080 Laptop GPU", total_memory=total_bytes
        ),
        mem_get_info=lambda i: (free_bytes, total_bytes),
    )
    module = types.ModuleType("torch")
    module.cuda = cuda  # type: ignore[attr-defined]
    return module


def test_detect_vram_reports_the_card(monkeypatch: pytest.MonkeyPatch) -> None:
    total = int(15.73 * 1024**3)
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(total, total))
    gib, reason = hardware.detect_vram()
    assert gib == pytest.approx(15.73)
    assert "RTX 3080 Laptop" in reason and "15.73 GiB" in reason and "16 GB card" in reason
    assert "free" not in reason


def test_detect_vram_mentions_memory_held_by_others(monkeypatch: pytest.MonkeyPatch) -> None:
    total = 24 * 1024**3
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(total, total // 2))
    _, reason = hardware.detect_vram()
    assert "12.00 GiB free" in reason


def test_installed_extras_are_probed_without_import() -> None:
    extras = hardware.installed_extras()
    assert extras.bitsandbytes  # a hard dependency
    assert all(isinstance(v, bool) for v in vars(extras).values())
    assert "vllm" not in sys.modules or extras.vllm


DETECT_RAM = hardware.__dict__["detect_ram"]  # conftest pins hardware.detect_ram; this is the real one


@pytest.fixture
def available_8_gib(monkeypatch):
    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", lambda: types.SimpleNamespace(available=8 * 1024**3))


def test_detect_ram_reads_what_is_available(tmp_path, available_8_gib) -> None:
    gib, why = DETECT_RAM(tmp_path / "no-cgroup")
    assert gib == 8.0 and why == "8.0 GiB of RAM available now (MemAvailable, read by psutil)"


def test_detect_ram_is_capped_by_a_container_limit(tmp_path, available_8_gib) -> None:
    (tmp_path / "memory.max").write_text(f"{6 * 1024**3}\n")
    (tmp_path / "memory.current").write_text(f"{2 * 1024**3}\n")
    gib, why = DETECT_RAM(tmp_path)
    assert gib == 4.0 and "container's memory limit" in why


def test_detect_ram_ignores_an_unlimited_container(tmp_path, available_8_gib) -> None:
    (tmp_path / "memory.max").write_text("max\n")
    assert DETECT_RAM(tmp_path)[0] == 8.0


def test_detect_ram_that_cannot_be_read_says_what_to_pass(tmp_path, monkeypatch) -> None:
    import psutil

    monkeypatch.setattr(psutil, "virtual_memory", lambda: (_ for _ in ()).throw(OSError("no /proc")))
    gib, why = DETECT_RAM(tmp_path)
    assert gib is None and "pass budget_gb with device='cpu'" in why


def test_detect_ram_reads_this_machine(tmp_path) -> None:
    gib, why = DETECT_RAM(tmp_path / "absent")
    assert gib is not None and gib > 0 and "psutil" in why
