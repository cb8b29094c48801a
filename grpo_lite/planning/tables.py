"""Render plans and the ladder: rich tables for the terminal (rich loaded to draw; the docs' Markdown tables:
tools/doc_tables.py).

>>> ladder_rows()[0][1]
'full'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_lite.defaults import GIB
from grpo_lite.errors import ConfigError
from grpo_lite.memory.estimate import PHASES, estimate
from grpo_lite.memory.measured.calibration import compare, planned, rss_check
from grpo_lite.memory.models import resolve_model
from grpo_lite.memory.step_settings import StepSettings
from grpo_lite.planning.candidates import fits
from grpo_lite.planning.ladder import LADDER

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Group
    from rich.table import Table

    from grpo_lite.memory.estimate import MemoryEstimate
    from grpo_lite.planning.ladder import Preset
    from grpo_lite.planning.result import Plan


# Settings every rung is compared at (docs, `plan --compare`): StepSettings' defaults
_KEYS = ("num_generations", "per_device_train_batch_size", "gradient_accumulation_steps", "max_completion_length")
REFERENCE_SETTINGS: dict[str, Any] = {key: getattr(StepSettings, key) for key in _KEYS}


def estimate_table(est: MemoryEstimate, title: str | None = None) -> Table:
    """Components at the peak: GiB, share of the total, how each was computed."""
    from rich.table import Column, Table  # loaded to draw: rich

    what = "peak resident memory of the process" if est.settings.device == "cpu" else "peak memory"
    title = title or f"{what}: {est.total_gib:.2f} GiB ({PHASES[est.peak_phase]})"
    columns = ("component", Column("GiB", justify="right"), Column("share", justify="right"))
    table = Table(*columns, Column("how", overflow="fold", style="dim"), title=title, title_justify="left")
    total = est.total_bytes or 1.0
    for comp in est.components:
        table.add_row(comp.name, f"{comp.gib:.2f}", f"{comp.bytes / total:.0%}", comp.detail)
    table.add_row("[bold]total[/bold]", f"[bold]{est.total_gib:.2f}[/bold]", "100%", "sum of the rows above")
    others = [f"{PHASES[name]} {gib:.2f}" for name, gib in est.phase_gib().items() if name != est.peak_phase]
    lines = [f"per-block bytes: {est.block_terms}"]
    if others:
        lines.append("other phases (GiB): " + "; ".join(others))
    table.caption = "\n".join(lines)
    table.caption_justify = "left"
    return table


def plan_headline(plan: Plan) -> str:
    """The plan in one line: model, preset, and whether its peak fits the memory it was checked against."""
    name, preset = plan.model.name, plan.preset.name
    if plan.budget_gib is None:
        check = plan.memory_check or "not checked (no budget given, and the RAM available could not be read)"
        return f"{name}: preset {preset} on CPU, peak {plan.estimate.total_gib:.2f} GiB, {check}"
    where = f"{plan.num_processes} x " if plan.num_processes > 1 else ""
    nominal = f"{plan.budget_gb:g} GB, " if plan.budget_gb else ""
    room = (
        f"{plan.budget_gb:g} GB of RAM"
        if plan.device == "cpu"
        else f"{where}{nominal}{plan.budget_gib:.2f} GiB per device"
    )
    return f"{name}: preset {preset} fits {room}" if plan.fits else f"{name}: does NOT fit"


def plan_summary(plan: Plan) -> str:
    """Two lines for a run's start: the headline with the peak against the budget, then the preset's trade-off."""
    line = plan_headline(plan)
    if plan.budget_gib is not None:
        line += f": peak {plan.estimate.total_gib:.2f} of {plan.budget_gib:.2f} GiB usable"
    return f"plan: {line}\n  {plan.preset.name}: {plan.preset.summary} (--show-plan or show_plan=True: the whole plan)"


def plan_table(plan: Plan) -> Group:
    """The whole plan: preset and why, components, headroom, settings."""
    from rich.console import Group  # loaded to draw: rich
    from rich.table import Column, Table
    from rich.text import Text

    head = Text(plan_headline(plan), style="bold")
    if plan.budget_gib is None:
        budget = "no budget: estimate shown for reference"
    else:
        budget = (
            f"estimate {plan.estimate.total_gib:.2f} GiB of {plan.budget_gib:.2f} GiB usable: headroom "
            f"{plan.headroom_gib:.2f} GiB (at least {plan.required_headroom_gib:.2f} required)"
        )
    reasons = Text("\n".join(f"- {r}" for r in plan.reasons))
    settings = Table(
        "key", Column("value", overflow="fold"), title="settings (GRPOConfig)", title_justify="left", show_header=False
    )
    for key, value in plan.settings.items():
        settings.add_row(key, repr(value))
    for key, value in plan.model_kwargs.items():
        settings.add_row(f"model: {key}", repr(value))
    if plan.lora:
        settings.add_row("lora", repr(plan.lora))
    if plan.sharding != "none":
        settings.add_row("sharding", f"{plan.sharding} over {plan.num_processes} processes")
    settings.add_row("precision", "{weights} weights, updates: {update}".format(**plan.precision))
    return Group(head, estimate_table(plan.estimate), Text(budget), reasons, settings)


def _weights_label(preset: Preset) -> str:
    """The weights on CUDA and how their updates land (docs/presets.md, "Updates that land")."""
    if preset.quantization == "nf4":
        return "NF4 + LoRA (SR)"
    return "bf16 + LoRA" if preset.method == "lora" else "bf16 (SR)"


def ladder_rows() -> list[tuple[str, ...]]:
    """One row per rung: order, name, method, weights, optimizer, checkpointing, learning rate, trade-off."""
    return [
        (
            str(i),
            p.name,
            p.method,
            _weights_label(p),
            p.optim,
            "yes" if p.gradient_checkpointing else "no",
            f"{p.learning_rate:g}",
            p.summary,
        )
        for i, p in enumerate(LADDER, 1)
    ]


LADDER_HEADERS = ("#", "preset", "method", "weights", "optimizer (CUDA)", "ckpt", "lr", "trade-off")


def ladder_table() -> Group:
    """The ladder as a rich table plus one trade-off line per rung (``grpo-lite presets``)."""
    from rich import box  # loaded to draw: rich
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    # no column rules: the five columns fit 80 (with rules, the lr column was cut to "1e-...")
    table = Table(
        title="presets, best quality and speed first", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False
    )
    shown = (1, 3, 4, 5, 6)  # preset, weights, optimizer, ckpt, lr
    for i in shown:
        table.add_column(LADDER_HEADERS[i], no_wrap=True)
    rows = ladder_rows()
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    notes = Text("\n".join(f"{row[1]}: {row[-1]}" for row in rows))
    return Group(table, notes)


def reference_estimates(model: str, **settings: Any) -> list[tuple[Preset, MemoryEstimate | None, str]]:
    """Every rung's ``(preset, estimate or None, error message or "")`` at the reference settings (overridable)."""
    arch = resolve_model(model).arch
    rows: list[tuple[Preset, MemoryEstimate | None, str]] = []
    for preset in LADDER:
        kwargs = {
            **REFERENCE_SETTINGS,
            "method": preset.method,
            "optim": preset.optim,
            "gradient_checkpointing": preset.gradient_checkpointing,
            **settings,
        }
        if preset.galore_args:
            kwargs.setdefault("optim_args", preset.galore_args)
        try:
            rows.append((preset, estimate(arch, **kwargs), ""))
        except ConfigError as exc:
            rows.append((preset, None, str(exc)))
    return rows


def compare_data(models: list[str], budget_gib: float | None = None, **settings: Any) -> dict[str, Any]:
    """Every rung's peak for each model at the reference settings: models as columns, presets as rows.

    Returns:
        ``{"settings", "budget_gib", "models", "rows": [{"preset", "method", "gib": {model: GiB or None},
        "fits": {model: bool or None}}]}`` (JSON-able).
    """
    per_model = {
        m: reference_estimates(m, **({"budget_gib": budget_gib} if budget_gib else {}), **settings) for m in models
    }
    rows = []
    for i, (preset, _, _) in enumerate(next(iter(per_model.values()))):
        cells = {m: per_model[m][i][1] for m in models}
        gib_cells = {m: None if est is None else round(est.total_gib, 2) for m, est in cells.items()}
        fit_cells = {
            m: None if est is None or budget_gib is None else fits(est, budget_gib) for m, est in cells.items()
        }
        rows.append({"preset": preset.name, "method": preset.method, "gib": gib_cells, "fits": fit_cells})
    return {
        "settings": {**REFERENCE_SETTINGS, **settings},
        "budget_gib": budget_gib,
        "models": list(models),
        "rows": rows,
    }


def compare_table(data: dict[str, Any]) -> Table:
    """Render :func:`compare_data` in the shape of the published GRPO VRAM tables."""
    from rich.table import Column, Table  # loaded to draw: rich

    s = data["settings"]
    title = (
        f"GRPO peak GiB per device ({s['num_generations']} generations x {s['max_completion_length']} tokens, "
        f"micro-batch {s['per_device_train_batch_size']})"
    )
    if data["budget_gib"]:
        title += f"; fits {data['budget_gib']:.2f} GiB usable: yes/no"
    models = (Column(model, justify="right") for model in data["models"])
    table = Table("preset", *models, title=title, title_justify="left")
    for row in data["rows"]:
        cells = []
        for model in data["models"]:
            value, ok = row["gib"][model], row["fits"][model]
            text = "n/a" if value is None else f"{value:.1f}"
            cells.append(text if ok is None else f"{text} {'yes' if ok else 'no'}")
        table.add_row(row["preset"], *cells)
    return table


def measured_table(row: dict[str, Any]) -> Group:
    """``plan --measure``: each phase planned against measured (tensor bytes), the peak phase's components,
    and the whole process's peak (RSS on CPU, reserved + context on CUDA)."""
    from rich.console import Group  # loaded to draw: rich
    from rich.table import Column, Table
    from rich.text import Text

    est = planned(row)
    checks = compare(row, est)
    s = row["settings"]
    table = Table(
        title=f"planned vs measured, MiB ({s['per_device_train_batch_size']} sequences of "
        f"{s['max_prompt_length']} + {s['max_completion_length']} tokens)",
        title_justify="left",
    )
    cuda = any("allocated" in m for m in row["measured"].values())
    cols = ("phase", "planned", "measured", "measured/planned") + (("max allocated", "max reserved") if cuda else ())
    for col in cols:
        table.add_column(col, justify="left" if col == "phase" else "right")
    for c in checks:
        cells = [c.phase, f"{c.planned / 2**20:,.1f}", f"{c.measured / 2**20:,.1f}", f"{c.ratio:.2f}"]
        if cuda:
            m = row["measured"][c.phase]
            cells += [f"{m.get('allocated', 0) / 2**20:,.1f}", f"{m.get('reserved', 0) / 2**20:,.1f}"]
        table.add_row(*cells)
    peak = max(checks, key=lambda c: c.measured)
    sizes = (Column("planned", justify="right"), Column("measured", justify="right"))
    parts = Table("component", *sizes, title=f"components at the measured peak ({peak.phase})", title_justify="left")
    for name, (p, m) in peak.components.items():
        if max(p, m) >= 0.05 * 2**20:
            parts.add_row(name, f"{p / 2**20:,.1f}", f"{m / 2**20:,.1f}")
    plan_b, meas_b = rss_check(row, est)
    what = "peak reserved + CUDA context" if s.get("device") == "cuda" else "peak resident memory (RSS)"
    line = Text(
        f"whole process, {what}: planned {plan_b / GIB:.2f} GiB, measured {meas_b / GIB:.2f} GiB "
        f"({meas_b / plan_b:.2f}); two steps took {row.get('wall_s', '?')} s"
    )
    return Group(table, parts, line)
