"""Planned against measured: calibration rows (what one measured run leaves, kept in docs/memory_calibration.json),
per-phase and per-component ratios, the docs table (docs/internals.md). No torch import.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_lite.files import write_text
from grpo_lite.memory.architectures import Architecture
from grpo_lite.memory.estimate import MemoryEstimate, estimate

__all__ = [
    "CATEGORY_COMPONENT",
    "PROCESS_COMPONENTS",
    "PhaseCheck",
    "calibration_markdown",
    "compare",
    "load_rows",
    "make_row",
    "planned",
    "rss_check",
    "save_rows",
    "DOC_START",
    "DOC_END",
    "TOLERANCE",
]

TOLERANCE = 0.15  # measured / planned must stay within 1 +- this, per phase and for the peak RSS
MIB = 2**20
DOC_START = "<!-- calibration-table:start -->"
DOC_END = "<!-- calibration-table:end -->"
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


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a calibration file (a JSON list)."""
    return list(json.loads(Path(path).read_text(encoding="utf-8"))["rows"])


def save_rows(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Write rows with their planned columns (for readers without grpo_lite) to ``path``."""
    out = [{**row, "planned": _planned_columns(row, planned(row))} for row in rows]
    text = json.dumps(
        {"about": "grpo-lite memory calibration: planned vs measured (benchmarks/memory_fit.py)", "rows": out},
        indent=1,
        sort_keys=False,
    )
    write_text(path, text + "\n")


def _planned_columns(row: dict[str, Any], est: MemoryEstimate) -> dict[str, Any]:
    phases = {c.phase: round(c.planned) for c in compare(row, est)}
    return {"phases": phases, "peak_process": round(est.total_bytes), "peak_phase": est.peak_phase}


def _mib(b: float) -> str:
    return f"{b / MIB:,.0f}" if b >= 10 * MIB else f"{b / MIB:.1f}"


def calibration_markdown(rows: list[dict[str, Any]]) -> str:
    """The calibration tables of docs/memory.md: per row the step's peak and the process's peak, then every phase."""
    summary = [
        (
            "| configuration | P + C | step's peak: planned MiB | measured | error | peak RSS: planned MiB | "
            "measured | error |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    detail = [
        "| configuration | phase | planned MiB | measured MiB | error | largest components, planned / measured MiB |",
        "|---|---|---:|---:|---:|---|",
    ]
    for row in rows:
        est = planned(row)
        checks = compare(row, est)
        top = max(checks, key=lambda c: c.planned)
        rss_plan, rss_meas = rss_check(row, est)
        s = row["settings"]
        summary.append(
            f"| {row['label']} | {s['max_prompt_length']} + {s['max_completion_length']} | "
            f"{_mib(top.planned)} | {_mib(top.measured)} | {top.ratio - 1:+.1%} | {_mib(rss_plan)} | "
            f"{_mib(rss_meas)} | {rss_meas / rss_plan - 1:+.1%} |"
        )
        for c in checks:
            big = sorted(c.components.items(), key=lambda kv: -max(kv[1]))[:3]
            parts = ", ".join(f"{name} {_mib(p)} / {_mib(m)}" for name, (p, m) in big)
            detail.append(
                f"| {row['label']} | {c.phase} | {_mib(c.planned)} | {_mib(c.measured)} | "
                f"{c.ratio - 1:+.1%} | {parts} |"
            )
    return "\n".join(summary) + "\n\n" + "\n".join(detail)
