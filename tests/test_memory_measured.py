"""The memory model against real GRPO steps of the tiny model on CPU, phase by phase and component by component.

Each case plans with ``plan(..., device="cpu")``, runs two GRPO steps with the plan's settings at
worst-case lengths (``grpo_lite.cli.measure.measure_plan``: one thread, the tensor tracker) and
compares the second step with the model at the measured lengths.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from grpo_lite.memory.measured.calibration import TOLERANCE, compare

CASES = [("full", "float32"), ("lora", "float32"), ("full", "bfloat16"), ("lora", "bfloat16")]
MIB = 2**20


@pytest.fixture(scope="module")
def measured(tiny_model_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """One measured row per case (about 2 s each on one thread)."""
    import torch

    from grpo_lite.cli.measure import measure_plan
    from grpo_lite.planning.choose import plan

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    rows = {}
    try:
        for method, dtype in CASES:
            torch.manual_seed(0)
            the_plan = plan(
                str(tiny_model_dir),
                device="cpu",
                method=method,
                dtype=dtype,
                max_prompt_length=12,
                num_generations=4,
                per_device_train_batch_size=8,
                max_completion_length=16,
            )
            rows[(method, dtype)] = measure_plan(the_plan)
    finally:
        torch.set_num_threads(before)
    return rows


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(c))
def test_each_phase_within_tolerance(measured: dict, case: tuple[str, str]) -> None:
    row = measured[case]
    checks = compare(row)
    assert {c.phase for c in checks} >= {"generation", "backward_head", "backward_layers", "optimizer_step"}
    for c in checks:
        assert abs(c.ratio - 1) <= TOLERANCE, (c.phase, c.planned / MIB, c.measured / MIB, c.components)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(c))
def test_every_measured_component_is_modelled(measured: dict, case: tuple[str, str]) -> None:
    """Each component holding 2% or more of a phase is planned within a factor of 2 (a dropped term fails),
    and the ones holding 10% or more within the tolerance."""
    for c in compare(measured[case]):
        for name, (planned, real) in c.components.items():
            share = real / c.measured
            if share >= 0.02:
                assert 0.5 <= planned / real <= 2.0, (c.phase, name, planned / MIB, real / MIB)
            if share >= 0.10:
                assert abs(planned / real - 1) <= TOLERANCE, (c.phase, name, planned / MIB, real / MIB)


def test_the_measured_run_was_the_worst_case(measured: dict) -> None:
    """Prompts and completions at the planned lengths exactly; LoRA ran as LoRA, bf16 as bf16."""
    for (method, dtype), row in measured.items():
        s = row["settings"]
        assert (s["max_prompt_length"], s["max_completion_length"]) == (12, 16)
        assert (s["method"], s["dtype"], s["device"]) == (method, dtype, "cpu")
        head = next(c for c in compare(row) if c.phase == "backward_head")
        assert head.components["activations"][1] > 0 and head.components["logits"][1] > 0


def test_dropping_a_term_is_caught(measured: dict) -> None:
    """The checks above are sharp enough: without the KV cache or the activations, a phase falls out."""
    row = measured[("full", "float32")]
    checks = {c.phase: c for c in compare(row)}
    gen, layers = checks["generation"], checks["backward_layers"]
    kv_planned, kv_real = gen.components["kv_cache"]
    assert kv_real / gen.measured >= 0.02 and kv_planned > 0
    acts_planned, _ = layers.components["activations"]
    assert abs(layers.measured / (layers.planned - acts_planned) - 1) > TOLERANCE


def test_tracker_categories_on_a_toy_step() -> None:
    """Weights, gradients, optimizer state and activations land in their categories, to the byte."""
    import torch

    from grpo_lite.memory.measured.tracker import PhaseClock, TensorTracker

    clock = PhaseClock()
    tracker = TensorTracker(clock)
    clock.backends = [tracker]
    model = torch.nn.Linear(100, 100)
    tracker.track_module(model)
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    tracker.start()
    try:
        x = torch.randn(64, 100, requires_grad=True)
        with clock.in_phase("forward"):
            y = torch.tanh(model(x))  # tanh saves its output: an activation
        assert tracker.by_category["activation"] >= 64 * 100 * 4
        with clock.in_phase("backward_layers"):
            y.sum().backward()
        with clock.in_phase("optimizer_step"):
            opt.step()
        clock.set_step(1)
    finally:
        tracker.stop()
    params = 4 * (100 * 100 + 100)
    assert tracker.by_category["param"] == params == tracker.by_category["gradient"]
    assert tracker.by_category["optimizer_state"] >= 2 * params
    assert [phase for _, phase in clock.segments] == [
        "other",
        "forward",
        "other",
        "backward_layers",
        "other",
        "optimizer_step",
        "other",
    ]
    assert max(s.peak_bytes for s in tracker.segments()) >= 4 * params


def test_mmap_threshold_is_set_on_linux() -> None:
    from grpo_lite.memory.heap import lift_mmap_threshold, set_mmap_threshold

    assert set_mmap_threshold() is sys.platform.startswith("linux")
    assert lift_mmap_threshold() is sys.platform.startswith("linux")  # the later tests get the heap as it was


THRESHOLD_IN_AND_AFTER_THE_BLOCK = """
from tiny_run import faults_reusing_a_block
from grpo_lite.memory import heap
from grpo_lite.memory.heap import MMAP_THRESHOLD_BYTES, mmap_threshold_on_cpu

with mmap_threshold_on_cpu("cpu") as on:
    assert on and heap._applied == MMAP_THRESHOLD_BYTES
    faults_reusing_a_block(times=16)
    print(*faults_reusing_a_block(times=8))
assert heap._applied is None
faults_reusing_a_block(times=16)
print(*faults_reusing_a_block(times=8))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mmap threshold")
def test_the_threshold_holds_in_the_block_and_is_lifted_after_it() -> None:
    import subprocess

    # In a process of its own: after the simulation tests in this one the block faulted 0 times (what earlier work
    # leaves in the heap decides whether a freed block is mapped afresh: a heap grown large can serve it). The same
    # measurement in the block and after it, each after the same warm-up (16 rounds settle a fresh heap).
    out = subprocess.run(
        [sys.executable, "-c", THRESHOLD_IN_AND_AFTER_THE_BLOCK],
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    (mapped, pages), (faults, _) = (int(out[0]), int(out[1])), (int(out[2]), int(out[3]))
    assert mapped >= 7 * pages  # with the threshold each block is mapped afresh: every page faulted each time
    assert faults < 2 * pages  # lifted: the heap keeps the freed block (once in a while faulted in again)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mmap threshold")
def test_a_threshold_fixed_before_the_block_stays_after_it() -> None:
    from grpo_lite.memory import heap
    from grpo_lite.memory.heap import (
        lift_mmap_threshold,
        mmap_threshold_on_cpu,
        set_mmap_threshold,
    )

    assert set_mmap_threshold(1 << 20)
    try:
        with mmap_threshold_on_cpu("cpu"):
            assert heap._applied == 65536
        assert heap._applied == 1 << 20
        with mmap_threshold_on_cpu("cuda") as on:
            assert not on and heap._applied == 1 << 20
    finally:
        assert lift_mmap_threshold()
    assert heap._applied is None and not lift_mmap_threshold()


def test_measuring_a_plan_lifts_the_threshold_after(measured: dict[tuple[str, str], dict[str, Any]]) -> None:
    from grpo_lite.memory import heap

    assert heap._applied is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the inherited peak is Linux's getrusage")
def test_a_child_process_reports_its_own_peak_not_its_parents() -> None:
    # `grpo-lite plan --measure` runs in a fresh process; getrusage's ru_maxrss survives exec, so a child of a large
    # process (a test runner, a notebook) reported its parent's peak: 910 MB for a 570 MB step in the full suite
    import subprocess

    from grpo_lite.memory.heap import peak_rss_bytes

    ballast = bytearray(600 * 2**20)  # the parent's peak: 600 MB touched
    ballast[::4096] = b"x" * len(ballast[::4096])
    code = "from grpo_lite.memory.heap import peak_rss_bytes; print(peak_rss_bytes())"
    child = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert peak_rss_bytes() > 600 * 2**20
    assert child < 300 * 2**20, f"the child reported {child / 2**20:.0f} MB: its parent's peak"
    del ballast
