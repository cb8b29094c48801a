"""What a run leaves behind: run.json (atomic), the rich summary table, the reward curve."""

from __future__ import annotations

import importlib.metadata as md
import math
import os
from pathlib import Path
from typing import Any

from grpo_lite._version import __version__
from grpo_lite.run_record import is_step_down, step_down_presets  # the record's reader: one definition

# Metrics shown in the summary, in order; reward columns are added for every reward function.
_SUMMARY_KEYS = ("reward", "reward_std", "completions/mean_length", "loss", "grad_norm", "kl", "entropy")


def _mean(values: list[Any]) -> float | None:
    clean = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    return sum(clean) / len(clean) if clean else None


def first_last(history: list[dict[str, Any]], window: int = 3) -> dict[str, tuple[float | None, float | None]]:
    """Mean of each metric over the first and the last ``window`` logged steps.

    >>> rows = [{"reward": 0.0}, {"reward": 1.0}, {"reward": 3.0}, {"reward": 4.0}]
    >>> first_last(rows, window=2)["reward"]
    (0.5, 3.5)
    """
    if not history:
        return {}
    window = max(1, min(window, len(history) // 2 or 1))
    keys = [k for k in _SUMMARY_KEYS if any(k in r for r in history)]
    keys += sorted({k for r in history for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    keys += sorted({k for r in history for k in r if k.startswith("memory/")})
    first, last = history[:window], history[-window:]
    return {key: (_mean([r.get(key) for r in first]), _mean([r.get(key) for r in last])) for key in keys}


def summary_table(
    history: list[dict[str, Any]], *, title: str, peak: dict[str, float] | None = None, planned_gib: float | None = None
):
    """A rich Table: each metric over the first and last logged steps, and memory against the plan."""
    from rich.table import Table  # loaded to draw: rich

    table = Table(title=title)
    table.add_column("metric")
    for column in ("first steps", "last steps", "change"):
        table.add_column(column, justify="right")
    fmt = lambda v: "-" if v is None else f"{v:.4g}"  # noqa: E731
    for key, (first, last) in first_last(history).items():
        change = None if first is None or last is None else last - first
        name = key.removeprefix("rewards/").removesuffix("/mean") if key.startswith("rewards/") else key
        table.add_row(name, fmt(first), fmt(last), "-" if change is None else f"{change:+.4g}")
    if peak is not None:
        planned = "-" if planned_gib is None else f"{planned_gib:.2f} GiB planned"
        table.add_row("peak allocated (GiB)", planned, f"{peak['max_allocated_gib']:.2f}", "")
        table.add_row("peak reserved (GiB)", "", f"{peak['max_reserved_gib']:.2f}", "")
    return table


def plot_reward_curve(history: list[dict[str, Any]], path: str | os.PathLike) -> Path | None:
    """Draw total and per-function mean reward against step; None without matplotlib (the ``plot`` extra)."""
    try:
        import matplotlib  # optional: matplotlib (the plot extra)

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    steps = [r["step"] for r in history]
    fig, ax = plt.subplots(figsize=(7, 4))
    keys = ["reward"] + sorted({k for r in history for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    for key in keys:
        ys = [r.get(key) for r in history]
        if any(y is not None for y in ys):
            label = key.removeprefix("rewards/").removesuffix("/mean")
            ax.plot(steps, [math.nan if y is None else y for y in ys], label=label, lw=2 if key == "reward" else 1)
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward")
    ax.set_title("GRPO reward per step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def versions() -> dict[str, str | None]:
    """Installed versions of grpo-lite and the libraries a run depends on (for run.json)."""
    out: dict[str, str | None] = {"grpo-lite": __version__}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "bitsandbytes"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def finish_report(result: Any, console: Any) -> None:
    """Print the summary table, draw reward_curve.png, say where the model and run.json are."""
    title = f"GRPO {result.plan.model.name}: {result.steps} steps, preset {result.plan.preset.name}"
    planned = result.plan.estimate.total_gib
    console.print(summary_table(result.history, title=title, peak=result.peak_memory, planned_gib=planned))
    for event in result.events:
        if is_step_down(event):
            low, high = step_down_presets(event)
            came = event["step"] + 1  # the event records the steps reached; the error came in the next
            console.print(f"stepped down {low} -> {high} after OOM at step {came}")
    if result.history:
        png = plot_reward_curve(result.history, result.output_dir / "reward_curve.png")
        console.print(f"reward curve: {png}" if png else "[dim]no reward curve: pip install 'grpo-lite[plot]'[/dim]")
    if result.model_dir is not None:
        console.print(f"model saved to {result.model_dir}; run record in {result.output_dir / 'run.json'}")
