"""The Markdown tables the docs hold, rendered from the package: the presets ladder (docs/presets.md), the rewards
(docs/rewards.md), the memory calibration (docs/memory.md) and the GPU simulation (docs/memory.md). Tests compare
each page with its render; the benchmarks that measure a table's rows write it. Nothing in the package uses them.

>>> "| full |" in ladder_markdown()
True
>>> rewards_table_markdown().splitlines()[2].split(" | ")[:3]
['| `correctness`', 'yes', '2.0']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite.defaults import GIB
from grpo_lite.files import write_text
from grpo_lite.memory.measured.calibration import compare, planned, rss_check
from grpo_lite.planning.tables import LADDER_HEADERS, ladder_rows
from grpo_lite.rewards.registry import DEFAULT_REWARDS, REWARDS

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.estimate import MemoryEstimate
    from grpo_lite.simulation.result import Simulation

MIB = 2**20
PRESETS_START = "<!-- presets-table:start -->"
PRESETS_END = "<!-- presets-table:end -->"
CALIBRATION_START = "<!-- calibration-table:start -->"
CALIBRATION_END = "<!-- calibration-table:end -->"
SIMULATION_START = "<!-- simulation-table:start -->"
SIMULATION_END = "<!-- simulation-table:end -->"
HELD_OUT_START = "<!-- heldout-table:start -->"
HELD_OUT_END = "<!-- heldout-table:end -->"
_ORDER = ("generation", "scoring", "backward_head", "backward_layers", "optimizer_step")  # the GPU table's phases


def splice_section(page: str, start_marker: str, end_marker: str, body: str) -> str:
    r"""``page`` with the text between the two markers replaced by ``body`` (the docs' rendered tables).

    >>> splice_section("a\n<!-- s -->\nold\n<!-- e -->\nb", "<!-- s -->", "<!-- e -->", "new")
    'a\n<!-- s -->\nnew\n<!-- e -->\nb'
    """
    start, end = page.index(start_marker) + len(start_marker), page.index(end_marker)
    return page[:start] + "\n" + body + "\n" + page[end:]


# ---- the presets ladder (docs/presets.md) ----------------------------------------------------------
def ladder_markdown() -> str:
    """The ladder as a Markdown table (docs/presets.md between the markers)."""
    lines = ["| " + " | ".join(LADDER_HEADERS) + " |", "|" + "---|" * len(LADDER_HEADERS)]
    lines += ["| " + " | ".join(row) + " |" for row in ladder_rows()]
    return "\n".join(lines)


def update_presets_doc(path: str | Path, *, check: bool = False) -> bool:
    """Rewrite the table between PRESETS_START and PRESETS_END in ``path`` (docs/presets.md), or with ``check`` only say
    whether it is up to date; True when it was up to date before the call."""
    page = Path(path).read_text(encoding="utf-8")
    fresh = splice_section(page, PRESETS_START, PRESETS_END, ladder_markdown())
    if fresh == page:
        return True
    if not check:
        write_text(path, fresh)
    return False


# ---- the rewards (docs/rewards.md) ------------------------------------------------------------------
def rewards_table_markdown() -> str:
    """The rewards table (name, default, max value, what it checks) in Markdown, from :data:`grpo_lite.rewards.REWARDS`."""
    lines = ["| name | default | max | what it checks |", "| --- | --- | --- | --- |"]
    for spec in REWARDS.values():
        default = "yes" if spec.name in DEFAULT_REWARDS else "no"
        lines.append(f"| `{spec.name}` | {default} | {spec.max_value} | {spec.description} |")
    return "\n".join(lines)


# ---- the memory calibration (docs/memory.md) --------------------------------------------------------
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


# ---- the GPU simulation (docs/memory.md) ------------------------------------------------------------
def _g(b: float) -> str:
    return f"{b / GIB:,.2f}"


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
