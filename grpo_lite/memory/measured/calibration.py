"""Planned against measured: calibration rows (what one measured run leaves, kept in docs/memory_calibration.json),
per-phase and per-component ratios (docs/internals.md; the docs' table: tools/doc_tables.py). No torch import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from grpo_lite.memory.architectures import Architecture
from grpo_lite.memory.estimate import MemoryEstimate, estimate

TOLERANCE = 0.15  # measured / planned must stay within 1 +- this, per phase and for the peak RSS
MIB = 2**20
# what the tracker calls a byte -> the model's component
CATEGORY_COMPONENT: dict[str, str] = {
    "param": "weights",
    "buffer": "weights",
    "reference": "reference_model",
    "gradient": "gradients",
    "optimizer_state": "optimizer_state",
    "activation": "activations",
    "kv_cache": "kv_cache",
    "lm_head": "logits",
    "optimizer_temp": "optimizer_step",
    "temporary": "work_buffers",
    "monitor": "update_monitor",
}
# components outside the tensors: the process (CPU) or the device (CUDA); not in tensor-level phases
PROCESS_COMPONENTS = ("cuda_context", "allocator_reserve", "kernel_scratch", "process_baseline", "heap_slack")
COMPARED_PHASES = ("generation", "scoring", "backward_head", "backward_layers", "optimizer_step")


def make_row(
    arch: Architecture,
    settings: dict[str, Any],
    measured: dict[str, Any],
    extra: dict[str, Any],
    *,
    model: str,
    label: str | None = None,
) -> dict[str, Any]:
    """A calibration row: shapes, settings at the measured lengths, measured phases, and run facts."""
    row: dict[str, Any] = {
        "label": label or model,
        "model": model,
        "arch": dataclasses.asdict(arch),
        "settings": dict(settings),
        "measured": measured,
        **extra,
    }
    row["arch"]["hub_ids"] = list(arch.hub_ids)
    row["arch"]["linear_names"] = list(arch.linear_names)
    return row


def planned(row: dict[str, Any]) -> MemoryEstimate:
    """The model's estimate for a row's shapes and settings."""
    fields = {
        **row["arch"],
        "hub_ids": tuple(row["arch"]["hub_ids"]),
        "linear_names": tuple(row["arch"]["linear_names"]),
    }
    return estimate(Architecture(**fields), **row["settings"])


@dataclass(frozen=True)
class PhaseCheck:
    """One phase of a row: tensor-level planned and measured bytes, and each component's pair."""

    phase: str
    planned: float
    measured: float
    components: dict[str, tuple[float, float]]  # component -> (planned, measured)

    @property
    def ratio(self) -> float:
        """measured / planned."""
        return self.measured / self.planned if self.planned else float("inf")


def _tensor_level(est: MemoryEstimate, phase: str) -> dict[str, float]:
    got = next((p for p in est.phases if p.name == phase), None)
    if got is None:
        return {}
    return {c.name: c.bytes for c in got.components if c.name not in PROCESS_COMPONENTS}


def compare(row: dict[str, Any], est: MemoryEstimate | None = None) -> list[PhaseCheck]:
    """Each modelled phase that ran: planned (recomputed) against measured, in total and by component."""
    est = est or planned(row)
    out = []
    for phase in COMPARED_PHASES:
        meas = row["measured"].get(phase)
        plan = _tensor_level(est, phase)
        if meas is None or not plan:
            continue
        by_comp: dict[str, float] = {}
        for cat, b in meas["categories"].items():
            comp = CATEGORY_COMPONENT[cat]
            by_comp[comp] = by_comp.get(comp, 0.0) + b
        names = [n for n in plan if plan[n] or by_comp.get(n)] + [n for n in by_comp if n not in plan and by_comp[n]]
        comps = {n: (plan.get(n, 0.0), by_comp.get(n, 0.0)) for n in names}
        out.append(PhaseCheck(phase, sum(plan.values()), float(meas["peak"]), comps))
    return out


def rss_check(row: dict[str, Any], est: MemoryEstimate | None = None) -> tuple[float, float]:
    """``(planned peak, measured peak)`` of the whole process: its peak RSS on CPU, the device's peak
    (max reserved + CUDA context) on CUDA."""
    est = est or planned(row)
    measured = row["peak_device"] if row["settings"].get("device") == "cuda" else row["peak_rss"]
    return est.total_bytes, float(measured)
