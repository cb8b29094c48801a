"""The memory model against one GRPO step simulated at full size on the meta device, for the ladder's headline plans.

Each row plans with ``grpo_lite.plan`` for a GPU budget (the settings below fixed), then simulates one
step of that plan (:func:`grpo_lite.simulation.run.simulate`: the real model code from its config, the
plan's method, the GPU's kernel choices, the tensor tracker per phase) and sets each phase's planned
tensor bytes beside the simulated peak. No GPU and no download: known architectures only.

    python benchmarks/gpu_sim.py                  # every row (about 5 minutes on 2 busy cores)
    python benchmarks/gpu_sim.py --only 8B        # the rows whose label contains "8B"
    python benchmarks/gpu_sim.py --write          # also rewrite docs/memory_simulation.json and the GPU table
                                                  # in docs/memory.md
    python benchmarks/gpu_sim.py --show           # the stored rows against the current memory model
    python benchmarks/gpu_sim.py --held-out --write   # the held-out rows: docs/memory_heldout.json and its table

The rows of :data:`ROWS` are the ones the memory model's terms were tuned on; :data:`HELD_OUT` rows (every
architecture beyond Llama / Qwen2.5, every method, checkpointing on and off) were not used to tune any term.

Rows run one after the other in this process (imports once). Real-GPU figures come from
``benchmarks/gpu_fit.py`` on a GPU.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools/ (the docs' tables), beside this folder
STORED = ROOT / "docs" / "memory_simulation.json"
HELD_OUT_STORED = ROOT / "docs" / "memory_heldout.json"
MEMORY_DOC = ROOT / "docs" / "memory.md"
GIB = 1024**3

# label -> model, nominal budget (GB) and what plan() is given; plan(), grpo-lite plan and train() plan with the shared
# prefix on (their default), the rows without it say shared_prefix=False
ROWS: dict[str, dict[str, Any]] = {
    "Llama-3.2-1B @ 16 GB, train()'s plan": dict(
        model="meta-llama/Llama-3.2-1B-Instruct", budget=16, shared_prefix=True
    ),
    "Llama-3.2-1B @ 16 GB, no shared prefix": dict(
        model="meta-llama/Llama-3.2-1B-Instruct", budget=16, shared_prefix=False
    ),
    "Llama-3.2-1B @ 16 GB, 4 x 1024 tokens": dict(
        model="meta-llama/Llama-3.2-1B-Instruct",
        budget=16,
        num_generations=4,
        max_completion_length=1024,
        shared_prefix=True,
    ),
    "Llama-3.2-3B @ 16 GB, train()'s plan": dict(
        model="meta-llama/Llama-3.2-3B-Instruct", budget=16, shared_prefix=True
    ),
    "Llama-3.1-8B QLoRA @ 16 GB": dict(
        model="meta-llama/Llama-3.1-8B-Instruct", budget=16, method="qlora", shared_prefix=False
    ),
    "Llama-3.1-8B QLoRA @ 16 GB, shared prefix": dict(
        model="meta-llama/Llama-3.1-8B-Instruct", budget=16, method="qlora", shared_prefix=True
    ),
    "Qwen2.5-14B QLoRA @ 16 GB": dict(model="Qwen/Qwen2.5-14B-Instruct", budget=16, method="qlora", shared_prefix=True),
    "Qwen2.5-1.5B LoRA @ 6 GB": dict(model="Qwen/Qwen2.5-1.5B-Instruct", budget=6, method="lora", shared_prefix=True),
    "Qwen2.5-1.5B LoRA @ 6 GB, 4 x 256 tokens": dict(
        model="Qwen/Qwen2.5-1.5B-Instruct",
        budget=6,
        method="lora",
        num_generations=4,
        max_completion_length=256,
        shared_prefix=False,
    ),
    "Qwen2.5-1.5B LoRA @ 6 GB, beta 0.04 (reference scoring)": dict(
        model="Qwen/Qwen2.5-1.5B-Instruct", budget=6, method="lora", beta=0.04, shared_prefix=False
    ),
    "Qwen2.5-7B GaLore @ 24 GB": dict(
        model="Qwen/Qwen2.5-7B-Instruct", budget=24, method="galore", shared_prefix=False
    ),
    "Qwen2.5-0.5B full @ 8 GB": dict(model="Qwen/Qwen2.5-0.5B-Instruct", budget=8, method="full", shared_prefix=False),
    "Qwen2.5-0.5B full @ 8 GB, 16 x 1024 tokens": dict(
        model="Qwen/Qwen2.5-0.5B-Instruct",
        budget=8,
        method="full",
        num_generations=16,
        max_completion_length=1024,
        shared_prefix=True,
    ),
}


def _held(model: str, preset: str, checkpointing: bool) -> dict[str, Any]:
    return dict(model=model, budget=80, preset=preset, gradient_checkpointing=checkpointing)


# label -> what plan() is given: an 80 GB card, the method's preset, checkpointing on or off, everything else
# planned (shared prefix: plan()'s default, off where training turns it off). No term was tuned on these rows.
HELD_OUT: dict[str, dict[str, Any]] = {
    f"{model.split('/')[1]} {preset}, ckpt {'on' if ckpt else 'off'}": _held(model, preset, ckpt)
    for model, ((preset_on, preset_off)) in {
        "Qwen/Qwen3-0.6B": ("full", "galore"),
        "google/gemma-2-2b-it": ("qlora", "full-8bit"),
        "google/gemma-3-1b-it": ("full-8bit", "lora"),
        "mistralai/Mistral-7B-Instruct-v0.1": ("qlora", "lora"),
        "microsoft/Phi-3-mini-4k-instruct": ("galore", "qlora"),
        "microsoft/Phi-4-mini-instruct": ("lora", "full-8bit"),
        "HuggingFaceTB/SmolLM3-3B": ("lora", "qlora"),
        "ibm-granite/granite-3.1-2b-instruct": ("full", "galore"),
        "allenai/OLMo-2-0425-1B-Instruct": ("galore", "full"),
    }.items()
    for preset, ckpt in ((preset_on, True), (preset_off, False))
}

# the machine the rows plan for: grpo-lite's own dependencies (bitsandbytes, galore-torch), no liger-kernel or vLLM
PLAIN_EXTRAS = dict(liger_kernel=False, vllm=False, galore_torch=True, bitsandbytes=True, deepspeed=False)


def plan_of(config: dict[str, Any]) -> Any:
    """The plan a row simulates (for :data:`PLAIN_EXTRAS`, whatever this machine has installed)."""
    from grpo_lite.planning import hardware
    from grpo_lite.planning.choose import plan

    config = dict(config)
    installed = hardware.installed_extras
    hardware.installed_extras = lambda: hardware.Extras(**PLAIN_EXTRAS)  # type: ignore[assignment]
    try:
        return plan(config.pop("model"), config.pop("budget"), **config)
    finally:
        hardware.installed_extras = installed  # type: ignore[assignment]


def run_row(label: str, config: dict[str, Any]) -> dict[str, Any]:
    """Plan and simulate one row; the docs' row (:func:`tools.doc_tables.row_of`)."""
    from grpo_lite.simulation.run import simulate
    from tools.doc_tables import row_of

    sim = simulate(plan_of(config))
    row = row_of(label, sim)
    row["plan_kwargs"] = dict(config)
    return row


def replan(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row with its planned columns recomputed from the current memory model (simulated kept)."""
    from grpo_lite.simulation.result import planned_tensor_bytes

    the_plan = plan_of(row["plan_kwargs"])
    est = the_plan.estimate
    phases = {}
    for phase, (_, simulated) in row["phases"].items():
        phases[phase] = [round(sum(planned_tensor_bytes(est, phase).values())), simulated]
    non_tensor = sum(c.bytes for c in est.peak.components if c.name in _non_tensor())
    return {
        **row,
        "phases": phases,
        "planned_total": round(est.total_bytes),
        "planned_peak_phase": est.peak_phase,
        "non_tensor": round(non_tensor),
    }


def _non_tensor() -> tuple[str, ...]:
    from grpo_lite.simulation.result import NON_TENSOR

    return NON_TENSOR


def show(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        print(
            f"\n{row['label']}: {row['preset']}, {row['shape']}, shared prefix "
            f"{'on' if row['shared_prefix'] else 'off'} (simulated in {row['wall_s']} s)"
        )
        for phase, (planned, simulated) in row["phases"].items():
            print(
                f"  {phase:16s} planned {planned / GIB:7.3f} GiB  simulated {simulated / GIB:7.3f} GiB  "
                f"{simulated / planned - 1:+.1%}"
            )


def write(rows: list[dict[str, Any]], held_out: bool = False) -> None:
    """Rewrite docs/memory_simulation.json (docs/memory_heldout.json) and its table in docs/memory.md."""
    from tools import doc_tables as report
    from tools.doc_tables import splice_section

    stored = HELD_OUT_STORED if held_out else STORED
    about = "held-out rows, no term tuned on them" if held_out else "the rows the memory model's terms were tuned on"
    stored.write_text(
        json.dumps(
            {
                "about": f"grpo-lite: planned vs simulated at full size on the meta device, {about} "
                f"(benchmarks/gpu_sim.py{' --held-out' if held_out else ''})",
                "rows": rows,
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    page = MEMORY_DOC.read_text(encoding="utf-8")
    if held_out:
        page = splice_section(page, report.HELD_OUT_START, report.HELD_OUT_END, report.held_out_markdown(rows))
    else:
        page = splice_section(page, report.SIMULATION_START, report.SIMULATION_END, report.simulation_markdown(rows))
    MEMORY_DOC.write_text(page, encoding="utf-8")
    print(f"wrote {stored.relative_to(ROOT)} and the table in {MEMORY_DOC.relative_to(ROOT)}")


def _try_row(label: str, config: dict[str, Any]) -> dict[str, Any]:
    """A held-out row, or the row with the reason it did not run (the table says so)."""
    try:
        return run_row(label, config)
    except Exception as exc:  # noqa: BLE001 - a held-out row that fails is reported, not dropped
        return {"label": label, "plan_kwargs": dict(config), "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="TEXT", help="rows whose label contains TEXT")
    parser.add_argument(
        "--write",
        action="store_true",
        help="rewrite the stored rows (docs/memory_simulation.json) and their table in docs/memory.md",
    )
    parser.add_argument("--show", action="store_true", help="the stored rows against the current memory model")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="the held-out rows (docs/memory_heldout.json): no term was tuned on them",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    table, stored = (HELD_OUT, HELD_OUT_STORED) if args.held_out else (ROWS, STORED)
    if args.show:
        rows = [r if "error" in r else replan(r) for r in json.loads(stored.read_text(encoding="utf-8"))["rows"]]
        show([r for r in rows if "error" not in r])
        if args.write:
            write(rows, args.held_out)
        return 0
    labels = [k for k in table if not args.only or any(t in k for t in args.only)]
    kept = (
        {r["label"]: r for r in json.loads(stored.read_text(encoding="utf-8"))["rows"]}
        if args.only and stored.is_file()
        else {}
    )  # --only keeps the other stored rows
    rows = []
    start = time.perf_counter()
    for label in labels:
        print(f"simulating {label} ...", flush=True)
        rows.append(_try_row(label, table[label]) if args.held_out else run_row(label, table[label]))
        if "error" in rows[-1]:
            print(f"  did not run: {rows[-1]['error']}", flush=True)
        if args.write and args.held_out:  # each row as it finishes: a long run keeps what it simulated
            kept[label] = rows[-1]
            write([kept[k] for k in table if k in kept], held_out=True)
        gc.collect()
    show([r for r in rows if "error" not in r])
    print(f"\n{len(rows)} rows in {time.perf_counter() - start:.0f} s")
    if args.write and not args.held_out:
        kept.update({r["label"]: r for r in rows})
        write([kept[k] for k in table if k in kept])
    ran = [r for r in rows if "error" not in r]
    worst = max((abs(s / p - 1) for r in ran for p, s in r["phases"].values()), default=0.0)
    return 0 if worst <= 0.05 and len(ran) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
