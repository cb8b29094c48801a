"""``grpo-lite presets``: list the ladder; ``--plot memory.png`` draws each preset's peak components."""

from __future__ import annotations

import argparse
import json

from grpo_lite.cli.options import add_options
from grpo_lite.defaults import DEMO
from grpo_lite.planning.ladder import LADDER
from grpo_lite.planning.tables import ladder_table, plot_components


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``presets`` on the ``grpo-lite`` parser."""
    p = subparsers.add_parser(
        "presets",
        help="list the memory presets, best quality first",
        description="The preset ladder plan() walks, from best quality and speed to most frugal.",
    )
    add_options(p, "json")
    p.add_argument(
        "--plot",
        metavar="PATH",
        default=None,
        help="save a stacked bar chart of each preset's peak components (needs matplotlib)",
    )
    p.add_argument("--model", default=DEMO.plot_model, help=f"model for --plot (default {DEMO.plot_model})")
    return p


def run(args: argparse.Namespace) -> int:
    """Print the ladder, and draw the chart when asked."""
    if args.json:
        keys = ("name", "method", "optim", "cpu_optim", "gradient_checkpointing", "quantization", "learning_rate")
        print(json.dumps([{**{k: getattr(p, k) for k in keys}, "summary": p.summary} for p in LADDER], indent=2))
    else:
        from rich.console import Console  # loaded to draw: rich

        Console().print(ladder_table())
    if args.plot:
        out = plot_components(args.plot, args.model)
        print(f"wrote {out}")
    return 0
