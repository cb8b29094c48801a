"""A simulation as tables: planned against simulated per phase and per component (rich, for the CLI), the
GPU choices, the named non-tensor components (docs/memory.md's GPU table: tools/doc_tables.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grpo_lite.defaults import GIB

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Group

    from grpo_lite.simulation.result import Simulation


def _g(b: float) -> str:
    return f"{b / GIB:,.2f}"


def simulation_tables(sim: Simulation) -> Group:
    """``plan --simulate``: each phase planned (tensors) against simulated, every phase's components, what a GPU
    would choose, and the non-tensor components the plan adds on top."""
    from rich.console import Group  # loaded to draw: rich
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    s = sim.estimate.settings
    checks = {c.phase: c for c in sim.checks()}
    title = (
        f"simulated at full size on the meta device, GiB: {sim.model}, {sim.preset}, {s.num_generations} x "
        f"{s.max_prompt_length} + {s.max_completion_length} tokens, micro-batch {s.per_device_train_batch_size}"
        f" x {s.gradient_accumulation_steps}{', shared prefix' if s.shared_prefix else ''}"
    )
    phases = Table(title=title, title_justify="left")
    for col in ("phase", "planned (tensors)", "simulated", "simulated/planned"):
        phases.add_column(col, justify="left" if col == "phase" else "right")
    for p in sim.phases:
        c = checks.get(p.name)
        if c is None:
            phases.add_row(p.name, "(in backward_head)", _g(p.peak_bytes), "")
        else:
            phases.add_row(p.name, _g(c.planned), _g(c.measured), f"{c.ratio:.3f}")
    parts = Table(title="components, planned / simulated GiB", title_justify="left")
    parts.add_column("component")
    for name in checks:
        parts.add_column(name, justify="right")
    names = list(dict.fromkeys(n for c in checks.values() for n in c.components))
    for name in names:
        cells = []
        for c in checks.values():
            p, m = c.components.get(name, (0.0, 0.0))
            cells.append(f"{_g(p)} / {_g(m)}" if max(p, m) >= 0.005 * GIB else "")
        if any(cells):
            parts.add_row(name, *cells)
    gpu = sim.choices
    choices = Table(title=f"what a GPU ({gpu.arch}) runs, and the simulation ran in its place", title_justify="left")
    choices.add_column("choice")
    choices.add_column("simulated as")
    choices.add_row(
        "attention",
        ", ".join(f"{k} x {v}" for k, v in sorted(gpu.attention.items()))
        + (" (batches padded: a mask)" if gpu.padded else " (no padding: no mask)"),
    )
    choices.add_row("optimizer", escape(gpu.optimizer))
    choices.add_row("LM head", escape(gpu.lm_head))
    choices.add_row("autocast", escape(gpu.autocast))
    for note in gpu.notes:
        choices.add_row("note", escape(note))
    constants = Table(title="not tensors: named components the plan adds (not simulated)", title_justify="left")
    for col in ("component", "GiB", "how"):
        constants.add_column(col, justify="right" if col == "GiB" else "left")
    for name, (b, detail) in sim.non_tensor().items():
        if b:
            constants.add_row(name, _g(b), escape(detail))
    verdict = "agrees" if sim.agrees() else "DISAGREES"
    line = Text(
        f"{verdict}: the largest phase error is {sim.worst_error():.1%} (tolerance {sim.tolerance:.0%}); "
        f"simulated peak {_g(sim.peak.peak_bytes)} GiB ({sim.peak.name}) + the constants above; "
        f"the simulation took {sim.wall_s:.1f} s"
    )
    return Group(phases, parts, choices, constants, line)
