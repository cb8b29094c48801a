"""The simulated step beside its plan: per phase, the simulated peak against the plan's tensor bytes.

The plan minus the constants no tensor-level simulation sees (:data:`NON_TENSOR`: the CUDA context, the allocator's
reserve, kernel scratch, a colocated vLLM) is set beside the simulated peak, phase by phase and component by
component (the tracker's categories mapped to the model's components).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grpo_lite.memory.estimate import GIB
from grpo_lite.memory.measured.calibration import CATEGORY_COMPONENT, PhaseCheck

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.estimate import MemoryEstimate
    from grpo_lite.memory.meta.cuda import GpuChoices


TOLERANCE = 0.05  # simulated / planned tensor bytes must stay within 1 +- this, per phase
SIMULATED_PHASES = ("generation", "scoring", "forward", "backward_head", "backward_layers", "optimizer_step")
# components outside the tensors: named constants with their source (docs/memory.md), never simulated
NON_TENSOR = ("cuda_context", "allocator_reserve", "kernel_scratch", "vllm", "process_baseline", "heap_slack")


@dataclass(frozen=True)
class SimulatedPhase:
    """The high point of one phase of the simulated step.

    Attributes:
        name: the phase.
        peak_bytes: live tensor bytes at its high point.
        components: those bytes by memory-model component (weights, gradients, activations, ...).
    """

    name: str
    peak_bytes: int
    components: dict[str, int]

    @property
    def gib(self) -> float:
        """Peak in GiB."""
        return self.peak_bytes / GIB


def planned_tensor_bytes(est: MemoryEstimate, phase: str) -> dict[str, float]:
    """The plan's components of ``phase`` without the named non-tensor constants (empty: no such phase)."""
    got = next((p for p in est.phases if p.name == phase), None)
    if got is None:
        return {}
    return {c.name: c.bytes for c in got.components if c.name not in NON_TENSOR}


def compare(est: MemoryEstimate, phases: tuple[SimulatedPhase, ...]) -> list[PhaseCheck]:
    """Each phase both have: planned tensor bytes against the simulated peak, in total and by component."""
    out = []
    for sim in phases:
        plan = planned_tensor_bytes(est, sim.name)
        if not plan:
            continue
        names = [n for n in plan if plan[n] or sim.components.get(n)]
        names += [n for n in sim.components if n not in plan and sim.components[n]]
        comps = {n: (plan.get(n, 0.0), float(sim.components.get(n, 0))) for n in names}
        out.append(PhaseCheck(sim.name, math.fsum(plan.values()), float(sim.peak_bytes), comps))
    return out


@dataclass
class Simulation:
    """One GRPO step of a plan simulated at full size on the meta device (:func:`grpo_lite.simulate`).

    Attributes:
        model: the model's name.
        preset: the plan's rung.
        estimate: the plan's memory estimate (its settings are the simulated ones).
        phases: each simulated phase's peak, in step order (``forward`` has no planned counterpart: the
            plan's ``backward_head`` holds everything the forward does, and more).
        choices: what a GPU would choose, and the simulation ran in its place.
        wall_s: seconds the simulation took (building the model included).
    """

    model: str
    preset: str
    estimate: MemoryEstimate
    phases: tuple[SimulatedPhase, ...]
    choices: GpuChoices
    wall_s: float
    tolerance: float = field(default=TOLERANCE)

    def checks(self, est: MemoryEstimate | None = None) -> list[PhaseCheck]:
        """Planned (``est``, default the plan's) against simulated, per phase."""
        return compare(est or self.estimate, self.phases)

    def worst_error(self, est: MemoryEstimate | None = None) -> float:
        """The largest ``|simulated / planned - 1|`` over the phases."""
        return max(abs(c.ratio - 1) for c in self.checks(est))

    def agrees(self, est: MemoryEstimate | None = None) -> bool:
        """Whether every phase is within :attr:`tolerance`."""
        return self.worst_error(est) <= self.tolerance

    @property
    def peak(self) -> SimulatedPhase:
        """The phase with the most simulated bytes."""
        return max(self.phases, key=lambda p: p.peak_bytes)

    def non_tensor(self) -> dict[str, tuple[float, str]]:
        """The plan's named constants at its peak phase: name -> (bytes, how)."""
        return {c.name: (c.bytes, c.detail) for c in self.estimate.peak.components if c.name in NON_TENSOR}

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: simulated bytes per phase and component, the plan's tensor bytes, the choices."""
        checks = {c.phase: c for c in self.checks()}
        phases = {}
        for p in self.phases:
            row: dict[str, Any] = {"simulated": p.peak_bytes, "components": dict(p.components)}
            if p.name in checks:
                row.update(planned=round(checks[p.name].planned), ratio=round(checks[p.name].ratio, 4))
            phases[p.name] = row
        return {
            "model": self.model,
            "preset": self.preset,
            "phases": phases,
            "simulated_peak_phase": self.peak.name,
            "simulated_peak": self.peak.peak_bytes,
            "planned_peak_phase": self.estimate.peak_phase,
            "planned_total": round(self.estimate.total_bytes),
            "non_tensor": {k: {"bytes": round(b), "detail": d} for k, (b, d) in self.non_tensor().items()},
            "worst_error": round(self.worst_error(), 4),
            "agrees": self.agrees(),
            "tolerance": self.tolerance,
            "gpu": self.choices.to_dict(),
            "wall_s": round(self.wall_s, 2),
        }


def aggregate(segments: list[tuple[int, str]], peaks: list[Any], step: int) -> tuple[SimulatedPhase, ...]:
    """Each phase's highest segment of ``step`` (a phase runs once per micro-batch), categories as components."""
    best: dict[str, Any] = {}
    for (seg_step, phase), peak in zip(segments, peaks):
        if seg_step != step or phase not in SIMULATED_PHASES:
            continue
        if phase not in best or peak.peak_bytes > best[phase].peak_bytes:
            best[phase] = peak
    out = []
    for phase in SIMULATED_PHASES:
        if phase not in best:
            continue
        comps: dict[str, int] = {}
        for category, b in best[phase].categories.items():
            if b:
                name = CATEGORY_COMPONENT[category]
                comps[name] = comps.get(name, 0) + b
        out.append(SimulatedPhase(phase, best[phase].peak_bytes, comps))
    return tuple(out)
