"""``grpo-lite plan``: the memory plan for a model and a budget, or every preset side by side.

Offline and without torch for known architectures; ``--measure`` (:mod:`grpo_lite.cli.measure`) and ``--simulate``
(:mod:`grpo_lite.simulation`) are the exceptions (docs/internals.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from grpo_lite import files
from grpo_lite.cli import StdoutLost
from grpo_lite.cli.measure import measure_plan
from grpo_lite.cli.options import add_options, parse_set
from grpo_lite.defaults import STEP
from grpo_lite.errors import ConfigError, GrpoLiteError
from grpo_lite.memory.blocks import BLOCK_MODES, DEFAULT_BLOCKS
from grpo_lite.memory.measured.calibration import compare, planned, rss_check
from grpo_lite.memory.meta.gpus import DEFAULT_GPU, GPU_ARCHES
from grpo_lite.planning import choose
from grpo_lite.planning.hardware import nominal_to_usable_gib
from grpo_lite.planning.tables import compare_data, compare_table, measured_table, plan_table
from grpo_lite.recipe.departures import departures, departures_text
from grpo_lite.recipe.recipe import Recipe
from grpo_lite.recipe.values import check_overrides
from grpo_lite.scale.distributed import SHARDINGS
from grpo_lite.simulation import run as sim_run
from grpo_lite.simulation.report import simulation_tables


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
    _add_target(p)
    _add_also(p)
    _add_modelling(p)
    add_options(p, "set")
    p.add_argument(
        "--write",
        metavar="FILE",
        default=None,
        help="also write the plan as a recipe (YAML, each setting with its memory cost) that "
        "grpo-lite train --config FILE runs as written; planned with the shared prefix on, as train() runs",
    )
    return p


def _add_target(p: argparse.ArgumentParser) -> None:
    """The machine planned for: device, processes, how state is split, prompt length."""
    p.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        default=None,
        help="target device (default: cuda with a budget, else detected)",
    )
    p.add_argument(
        "--num-processes",
        type=int,
        default=STEP.num_processes,
        help="processes / GPUs; the budget is per device",
    )
    p.add_argument(
        "--sharding",
        choices=list(SHARDINGS),
        default=None,
        help="how to split state across processes (default: only when one device cannot hold it)",
    )
    p.add_argument(
        "--max-prompt-length",
        type=int,
        default=STEP.max_prompt_length,
        help=f"prompt tokens to plan for (default {STEP.max_prompt_length})",
    )


def _add_also(p: argparse.ArgumentParser) -> None:
    """What else to show beside the plan: every preset, a measured or a simulated step."""
    p.add_argument(
        "--compare", action="store_true", help="every preset's estimate for each MODEL side by side (models as columns)"
    )
    p.add_argument(
        "--measure",
        action="store_true",
        help="also run two real GRPO steps here with the planned settings (worst-case lengths) and "
        "print planned vs measured per phase; needs the model on this machine (a local folder, a "
        ".gguf file or a cached hub model) and takes minutes on CPU",
    )
    p.add_argument(
        "--simulate",
        action="store_true",
        help="also simulate one GRPO step of the plan at full size on the meta device (no GPU, offline "
        "for known architectures, seconds) and print planned vs simulated per phase and component",
    )


def _add_modelling(p: argparse.ArgumentParser) -> None:
    """How the simulated step and a decoder block's bytes are modelled."""
    p.add_argument(
        "--gpu",
        choices=tuple(GPU_ARCHES),
        default=DEFAULT_GPU,
        help="the GPU architecture --simulate takes its attention kernel from: sm86 (RTX 30xx, default), "
        "sm89 (RTX 40xx), sm80 (A100)",
    )
    p.add_argument(
        "--padding",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="whether --simulate's batches carry padding (real ones do; default on): padded batches "
        "pass a mask and run the memory-efficient attention kernel, unpadded ones flash",
    )
    p.add_argument(
        "--blocks",
        choices=BLOCK_MODES,
        default=DEFAULT_BLOCKS,
        help="where one decoder block's bytes per token come from: traced from the model's own layer class "
        "on the meta device (seconds, cached), or the Llama formulas; auto (default): the formulas for "
        "Llama / Qwen2 blocks, traced for every other architecture and for float32 weights under 16-bit "
        "autocast; --compare and --write's costs use the same. The plan table says which it used",
    )


def _compare(args: argparse.Namespace, fixed: dict[str, Any]) -> int:
    usable = nominal_to_usable_gib(args.budget_gb) if args.budget_gb else None
    extra = {
        "max_prompt_length": args.max_prompt_length,
        "num_processes": args.num_processes,
        "blocks": args.blocks,
        **fixed,
    }
    if args.sharding:
        extra["sharding"] = args.sharding
    data = compare_data(list(args.models), usable, **extra)
    if args.json:
        print(json.dumps(data, indent=2, default=str))
    else:
        from rich.console import Console  # loaded to draw: rich

        Console().print(compare_table(data))
    return 0


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def run(args: argparse.Namespace) -> int:
    """Print the plan (or the comparison). Any failure is one error line saying what to do next (main() prints
    it); with ``--json``, one JSON object with an ``error`` field on stdout instead, and exit code 2."""
    try:
        return _run(args)
    except GrpoLiteError as exc:
        failure: GrpoLiteError = exc
    except StdoutLost:  # main() ends the command: nothing more can be printed
        raise
    except Exception as exc:  # noqa: BLE001 - a library's or our own failure: one line, never a traceback
        failure = GrpoLiteError(
            f"grpo-lite plan failed unexpectedly ({type(exc).__name__}: {_one_line(exc)}); "
            "rerun with --blocks formulas (no tracing) and without --simulate, and report the "
            "command with this line"
        )
    if not getattr(args, "json", False):
        raise failure
    print(json.dumps({"error": _one_line(failure), "error_type": type(failure).__name__}))
    return 2


def _simulate(the_plan: Any, args: argparse.Namespace) -> tuple[Any, str | None]:
    """The simulation of the plan, or why it failed (the plan itself stands)."""
    try:
        return sim_run.simulate(the_plan, gpu=args.gpu, padded=args.padding), None
    except Exception as exc:  # noqa: BLE001 - any failure of the simulation: said in one line, the plan is kept
        return None, (
            f"--simulate failed for {the_plan.model.name} ({type(exc).__name__}: {_one_line(exc)}): the plan "
            "above is not checked; rerun without --simulate"
        )


def _run(args: argparse.Namespace) -> int:
    fixed = parse_set(args.set, own_options=vars(args))
    if args.compare and args.write:
        raise ConfigError(
            "--write saves one plan as a recipe; --compare shows every preset: drop one of them "
            "(grpo-lite plan MODEL --budget-gb N --write FILE)"
        )
    if args.compare:
        return _compare(args, fixed)
    if args.write:  # the checks train --config runs on the file, before anything is planned or written
        fixed = check_overrides(fixed)
        files.check_name_lengths(args.write, "--write FILE")
    if len(args.models) > 1:
        raise ConfigError(f"got {len(args.models)} models: pass one MODEL, or add --compare to see several")
    the_plan = choose.plan(
        args.models[0],
        args.budget_gb,
        method=args.method,
        preset=args.preset,
        device=args.device,
        num_processes=args.num_processes,
        sharding=args.sharding,
        max_prompt_length=args.max_prompt_length,
        blocks=args.blocks,
        **fixed,
    )
    if args.write:
        _write_recipe(the_plan, args.write)
    row = sim = sim_error = None
    if args.measure:
        row = measure_plan(the_plan)
    if args.simulate:
        sim, sim_error = _simulate(the_plan, args)
    differences = departures(Recipe.from_plan(the_plan).trl, written=the_plan.fixed, plan=the_plan)
    if args.json:
        data = {**the_plan.to_dict(), "trl_differences": [d.to_dict() for d in differences]}
        if row is not None:
            data["measured"] = _measured_json(row)
        if sim is not None:
            data["simulated"] = sim.to_dict()
        if sim_error is not None:
            data["error"] = sim_error
        print(json.dumps(data, indent=2, default=str))
        return 2 if sim_error else 0
    from rich.console import Console  # loaded to draw: rich

    Console().print(plan_table(the_plan))
    Console().print(departures_text(differences), highlight=False, markup=False)
    if row is not None:
        Console().print(measured_table(row))
    if sim is not None:
        Console().print(simulation_tables(sim))
    if sim_error is not None:
        raise GrpoLiteError(sim_error)
    return 0


def _write_recipe(the_plan: Any, path: str) -> None:
    """Write the plan as a recipe file; say where on stderr (stdout stays the plan, --json included)."""
    recipe = Recipe.from_plan(the_plan)
    Recipe.from_yaml(recipe.to_yaml(path), source=path)  # read back as train --config reads it: refused, not written
    out = recipe.write(path)
    print(f"recipe written to {out}: grpo-lite train --config {out}", file=sys.stderr)


def _measured_json(row: dict[str, Any]) -> dict[str, Any]:
    """Planned against measured, per phase and per component (bytes), and the process's peak."""
    est = planned(row)
    plan_b, meas_b = rss_check(row, est)
    return {
        "lengths": [row["settings"]["max_prompt_length"], row["settings"]["max_completion_length"]],
        "phases": {
            c.phase: {
                "planned": round(c.planned),
                "measured": round(c.measured),
                "ratio": round(c.ratio, 3),
                "components": {k: [round(p), round(m)] for k, (p, m) in c.components.items()},
                **{k: v for k, v in row["measured"][c.phase].items() if k in ("allocated", "reserved")},
            }
            for c in compare(row, est)
        },
        "process": {"planned": round(plan_b), "measured": round(meas_b), "ratio": round(meas_b / plan_b, 3)},
        "wall_s": row.get("wall_s"),
    }
