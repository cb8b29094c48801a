"""``grpo-lite plan``: the memory plan for a model and a budget, or every preset side by side.

Runs offline in well under 2 s for known architectures: no torch, trl, peft, bitsandbytes or
datasets import on this path (torch only to detect a GPU when --budget-gb is omitted, or to count
an unknown config's parameters on the meta device).
"""

from __future__ import annotations

import argparse
import json
from typing import Any, get_args

from grpo_lite.cli.options import add_options, parse_set
from grpo_lite.errors import ConfigError
from grpo_lite.memory.settings import Sharding

__all__ = ["add_parser", "run"]

SHARDINGS: tuple[str, ...] = get_args(Sharding)  # the same values as grpo_lite.scale.distributed.SHARDINGS


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``plan`` on the ``grpo-lite`` parser."""
    p = subparsers.add_parser(
        "plan",
        help="show the memory plan: preset, components, settings, headroom",
        description="Estimate GRPO peak memory and pick the best preset that fits --budget-gb (the card's "
        "nominal size, per device). Offline for known architectures.",
    )
    p.add_argument("models", nargs="+", metavar="MODEL", help="hub id, short name, local folder or .gguf file")
    add_options(p, "budget_gb", "json", "method", "preset")
    p.add_argument("--device", choices=("cuda", "cpu"), default=None, help="target device (default: cuda with a "
                   "budget, else detected)")
    p.add_argument("--num-processes", type=int, default=1, help="processes / GPUs; the budget is per device")
    p.add_argument("--sharding", choices=SHARDINGS, default=None,
                   help="how to split state across processes (default: only when one device cannot hold it)")
    p.add_argument("--max-prompt-length", type=int, default=256, help="prompt tokens to plan for (default 256)")
    p.add_argument("--compare", action="store_true",
                   help="every preset's estimate for each MODEL side by side (models as columns)")
    p.add_argument("--plot", metavar="PATH", default=None,
                   help="also save a bar chart of every preset's peak components for MODEL (needs matplotlib)")
    add_options(p, "set")
    return p


def _compare(args: argparse.Namespace, fixed: dict[str, Any]) -> int:
    from grpo_lite.planning.hardware import nominal_to_usable_gib
    from grpo_lite.planning.tables import compare_data, compare_table

    usable = nominal_to_usable_gib(args.budget_gb) if args.budget_gb else None
    extra = {"max_prompt_length": args.max_prompt_length, "num_processes": args.num_processes, **fixed}
    if args.sharding:
        extra["sharding"] = args.sharding
    data = compare_data(list(args.models), usable, **extra)
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        from rich.console import Console

        Console().print(compare_table(data))
    return 0


def run(args: argparse.Namespace) -> int:
    """Print the plan (or the comparison); GrpoLiteError propagates to main() as one error line."""
    fixed = parse_set(args.set, own_options=vars(args))
    if args.compare:
        return _compare(args, fixed)
    if len(args.models) > 1:
        raise ConfigError(f"got {len(args.models)} models: pass one MODEL, or add --compare to see several")
    from grpo_lite.planning.choose import plan

    if args.plot:
        from grpo_lite.planning.tables import plot_components

        print(f"memory chart: {plot_components(args.plot, args.models[0], **fixed)}")
    the_plan = plan(args.models[0], args.budget_gb, method=args.method, preset=args.preset, device=args.device,
                    num_processes=args.num_processes, sharding=args.sharding,
                    max_prompt_length=args.max_prompt_length, **fixed)
    if args.json:
        print(json.dumps(the_plan.to_dict(), indent=2, default=str))
        return 0
    from rich.console import Console

    from grpo_lite.planning.tables import plan_table

    Console().print(plan_table(the_plan))
    return 0
