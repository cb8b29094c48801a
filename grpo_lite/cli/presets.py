"""``grpo-lite presets``: list the ladder."""

from __future__ import annotations

import argparse
import json

from grpo_lite.cli.options import add_options
from grpo_lite.planning.ladder import LADDER
from grpo_lite.planning.tables import ladder_table


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``presets`` on the ``grpo-lite`` parser."""
    p = subparsers.add_parser(
        "presets",
        help="list the memory presets, best quality first",
        description="The preset ladder plan() walks, from best quality and speed to most frugal.",
    )
    add_options(p, "json")
    return p


def run(args: argparse.Namespace) -> int:
    """Print the ladder."""
    if args.json:
        keys = ("name", "method", "optim", "cpu_optim", "gradient_checkpointing", "quantization", "learning_rate")
        print(json.dumps([{**{k: getattr(p, k) for k in keys}, "summary": p.summary} for p in LADDER], indent=2))
    else:
        from rich.console import Console  # loaded to draw: rich

        Console().print(ladder_table())
    return 0
