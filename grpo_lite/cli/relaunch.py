"""The CLI side of scaling out: ``--num-processes`` / ``--sharding`` and the relaunch under N processes.

Cheap to import: no torch, transformers or yaml at the top (the GPU count is asked in a child process).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

from grpo_lite.cli.options import add_options, parse_set
from grpo_lite.errors import ConfigError
from grpo_lite.files import write_json
from grpo_lite.planning.choose import plan
from grpo_lite.planning.hardware import usable_to_nominal_gb
from grpo_lite.run_record import RUN_RECORD, read_run_record
from grpo_lite.scale.distributed import SHARDINGS, _mode, in_launched_process, launch_command, launched_world_size
from grpo_lite.settings import Sharding, check
from grpo_lite.training.run.folder import default_output_dir
from grpo_lite.training.run.ranks import _clear_records, check_ranks, failure_fields, read_rank_records


def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--num-processes`` and ``--sharding`` to a subcommand."""
    add_options(parser, "num_processes", "sharding")


def _detect_gpus() -> tuple[int, float | None]:
    """GPU count and device 0's GiB, asked in a child process so this one creates no CUDA context."""
    code = (
        "import json, torch\nfrom grpo_lite.planning.hardware import detect_vram\n"
        "n = torch.cuda.device_count()\nprint(json.dumps([n, detect_vram()[0] if n else None]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return 0, None
    count, gib = json.loads(done.stdout.strip().splitlines()[-1])
    return int(count), gib


def _choose_sharding(args: argparse.Namespace, cuda: bool, gib: float | None) -> Sharding:
    if args.sharding is not None:
        return args.sharding
    if not cuda:
        return "ddp"
    budget = args.budget_gb if args.budget_gb is not None else round(usable_to_nominal_gb(gib or 0.0), 1)
    return plan(
        args.model,
        budget,
        method=args.method,
        preset=args.preset,
        device="cuda",
        num_processes=args.num_processes,
        **parse_set(args.set),
    ).sharding


def maybe_relaunch(args: argparse.Namespace) -> int | None:
    """Rerun ``grpo-lite train`` under ``args.num_processes`` processes when asked; None: train here.

    Inside a launched process it only checks that the world size matches ``--num-processes``.
    Otherwise it picks the sharding (``--sharding``, else the planner's choice; ddp on CPU), reruns the command
    line (``args._argv``, kept by :func:`grpo_lite.cli.main`) with the output folder fixed so that every rank
    writes to the same one, under :func:`launch_command`, and checks the ranks' records (:func:`check_ranks`); when
    the ranks failed, it names the rank that failed first (:func:`_name_the_failure`).

    Returns:
        The launcher's exit code, or None when this process should train itself.
    """
    n = check("num_processes", args.num_processes)
    if in_launched_process():
        world = launched_world_size()
        if n > 1 and world != n:
            raise ConfigError(
                f"--num-processes {n} but this process was launched with WORLD_SIZE={world}; "
                "drop --num-processes when you start the processes yourself"
            )
        return None
    if n == 1 and args.sharding in (None, "none", "ddp"):
        return None
    count, gib = _detect_gpus()
    if count and n > count:
        raise ConfigError(f"--num-processes {n} needs {n} GPUs, one per process; {count} found")
    sharding = _choose_sharding(args, cuda=count > 0, gib=gib)
    if sharding == "none":
        return None
    missing = [pkg for pkg in _mode(sharding).requires if importlib.util.find_spec(pkg) is None]
    if missing:
        raise ConfigError(f"sharding {sharding!r} needs {', '.join(missing)}: pip install {' '.join(missing)}")
    out = Path(args.output_dir) if args.output_dir is not None else default_output_dir(str(args.model))
    argv = [*args._argv, f"--output-dir={out}", f"--sharding={sharding}"]  # the last of a flag wins: every rank
    cmd = launch_command(argv, n, sharding, cuda=count > 0)
    _clear_records(out)
    print(f"launching {n} processes ({SHARDINGS[sharding].engine}): {shlex.join(cmd)}", file=sys.stderr, flush=True)
    launcher = subprocess.Popen(cmd)
    try:
        code = launcher.wait()
    except KeyboardInterrupt:  # the ranks got the same Ctrl-C: let them save their checkpoint and exit
        code = launcher.wait()
    if code == 0 and (out / "ranks").is_dir():
        records = check_ranks(out, n)
        print("ranks: " + "; ".join(f"rank {r.rank}: {r.steps} steps, {r.local_samples} samples" for r in records))
    elif code != 0:
        _name_the_failure(out)
    return code


def _name_the_failure(out: Path) -> None:
    """After the ranks failed: the failed event in run.json names the error of the rank that failed first (rank 0
    wrote the event when it failed itself, maybe before that rank had recorded its error), and the last line says
    it with what to change."""
    record, _ = read_run_record(out, keep_corrupt=False)
    events = (record or {}).get("events") or []
    if record is None or record.get("status") != "failed" or not events or events[-1]["event"] != "failed":
        return  # no failed event: rank 0 was stopped before it wrote one
    try:
        records = read_rank_records(out)
    except (OSError, ValueError, TypeError):  # a record unreadable, or of another version: run.json stays as written
        return
    event = events[-1]
    fields = failure_fields(records, event.get("rank0_error", event.get("error", "")))
    if any(event.get(key) != value for key, value in fields.items()):
        event.update(fields)
        write_json(out / RUN_RECORD, record)
    advice = f"; {fields['advice']}" if "advice" in fields else ""
    print(f"failed: {fields['error']}{advice} (run.json in {out})", file=sys.stderr, flush=True)
