"""A simulation as tables: planned against simulated per phase and per component (rich, for the CLI), the
GPU choices, the named non-tensor components; and the rows of docs/memory.md's GPU table (markdown)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_lite.defaults import GIB

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Group

    from grpo_lite.simulation.result import Simulation

__all__ = [
    "DOC_END", "DOC_START", "HELD_OUT_END", "HELD_OUT_START", "held_out_markdown", "row_of", "simulation_markdown",
    "simulation_tables",
]  # fmt: skip

DOC_START = "<!-- simulation-table:start -->"
DOC_END = "<!-- simulation-table:end -->"
HELD_OUT_START = "<!-- heldout-table:start -->"
HELD_OUT_END = "<!-- heldout-table:end -->"


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


def row_of(label: str, sim: Simulation) -> dict[str, Any]:
    """One row of the docs' GPU table: the settings, each phase planned / simulated (bytes), the plan's total."""
    s = sim.estimate.settings
    return {
        "label": label,
        "model": sim.model,
        "preset": sim.preset,
        "shape": f"{s.num_generations} x {s.max_prompt_length} + {s.max_completion_length}, "
        f"{s.per_device_train_batch_size} x {s.gradient_accumulation_steps}",
        "shared_prefix": s.shared_prefix,
        "checkpointing": s.gradient_checkpointing,
        "optim": s.optim,
        "phases": {c.phase: [round(c.planned), round(c.measured)] for c in sim.checks()},
        "planned_total": round(sim.estimate.total_bytes),
        "planned_peak_phase": sim.estimate.peak_phase,
        "non_tensor": round(sum(b for b, _ in sim.non_tensor().values())),
        "wall_s": round(sim.wall_s, 1),
        "attention": dict(sim.choices.attention),
        "optimizer": sim.choices.optimizer,
    }


_ORDER = ("generation", "scoring", "backward_head", "backward_layers", "optimizer_step")


def _largest_error(row: dict[str, Any]) -> float:
    return max(abs(simulated / planned - 1) for planned, simulated in row["phases"].values())


def simulation_markdown(rows: list[dict[str, Any]], *, held_out: bool = False) -> str:
    """docs/memory.md's GPU table: per row the step's largest phase, and every phase planned / simulated.

    The first column says whether the memory model's terms were tuned on the row (``held_out=False``: the rows of
    benchmarks/gpu_sim.py) or not (the held-out rows); a held-out row that did not run says why.
    """
    head = (
        "| rows | configuration | preset | checkpointing | generations x P + C, micro-batch | shared prefix | "
        "planned peak GiB (tensors + constants) | "
        + " | ".join(f"{p}: planned / simulated GiB" for p in _ORDER)
        + " | largest error |"
    )
    lines = [head, "|" + "---|" * 6 + "---:|" + "---:|" * len(_ORDER) + "---:|"]
    kind = "held out" if held_out else "tuned on"
    for row in rows:
        if "error" in row:
            config = row["plan_kwargs"]
            lines.append(
                f"| {kind} | {row['label']} | {config.get('preset', '')} | "
                f"{'on' if config.get('gradient_checkpointing') else 'off'} | did not run: "
                f"{row['error'].replace('|', '/')[:160]} |" + " |" * (len(_ORDER) + 3)
            )
            continue
        cells = []
        for phase in _ORDER:
            pair = row["phases"].get(phase)
            if pair is None:
                cells.append("-")
                continue
            planned, simulated = pair
            cells.append(f"{_g(planned)} / {_g(simulated)} ({simulated / planned - 1:+.1%})")
        total = row["planned_total"]
        lines.append(
            f"| {kind} | {row['label']} | {row['preset']} | {'on' if row['checkpointing'] else 'off'} | "
            f"{row['shape']} | {'on' if row['shared_prefix'] else 'off'} | {_g(total)} "
            f"({_g(total - row['non_tensor'])} + {_g(row['non_tensor'])}) | "
            + " | ".join(cells)
            + f" | {_largest_error(row):.1%} |"
        )
    return "\n".join(lines)


def held_out_markdown(rows: list[dict[str, Any]]) -> str:
    """The held-out table and its summary: how many rows ran, the median and the worst of their largest errors."""
    ran = sorted(_largest_error(r) for r in rows if "error" not in r)
    if not ran:
        summary = f"None of the {len(rows)} held-out rows ran."
    else:
        mid = len(ran) // 2
        median = ran[mid] if len(ran) % 2 else (ran[mid - 1] + ran[mid]) / 2
        over = sum(e > 0.05 for e in ran)
        summary = (
            f"{len(ran)} of {len(rows)} held-out rows ran; the largest phase error of a row: median "
            f"{median:.1%}, worst {ran[-1]:.1%}; {over} row{'s' if over != 1 else ''} over 5%."
        )
    return simulation_markdown(rows, held_out=True) + "\n\n" + summary
