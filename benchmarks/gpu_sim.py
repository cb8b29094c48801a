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
STORED = ROOT / "docs" / "memory_simulation.json"
MEMORY_DOC = ROOT / "docs" / "memory.md"
GIB = 1024**3

# label -> model, nominal budget (GB) and what plan() is given; plan(), grpo-lite plan and train() plan with the shared
# prefix on (their default), the rows without it say shared_prefix=False
ROWS: dict[str, dict[str, Any]] = {
    "Llama-3.2-1B @ 16 GB, train()'s plan": dict(model="meta-llama/Llama-3.2-1B-Instruct", budget=16,
                                                 shared_prefix=True),
    "Llama-3.2-1B @ 16 GB, no shared prefix": dict(model="meta-llama/Llama-3.2-1B-Instruct", budget=16,
                                                   shared_prefix=False),
    "Llama-3.2-1B @ 16 GB, 4 x 1024 tokens": dict(model="meta-llama/Llama-3.2-1B-Instruct", budget=16,
                                                  num_generations=4, max_completion_length=1024, shared_prefix=True),
    "Llama-3.2-3B @ 16 GB, train()'s plan": dict(model="meta-llama/Llama-3.2-3B-Instruct", budget=16,
                                                 shared_prefix=True),
    "Llama-3.1-8B QLoRA @ 16 GB": dict(model="meta-llama/Llama-3.1-8B-Instruct", budget=16, method="qlora",
                                       shared_prefix=False),
    "Llama-3.1-8B QLoRA @ 16 GB, shared prefix": dict(model="meta-llama/Llama-3.1-8B-Instruct", budget=16,
                                                      method="qlora", shared_prefix=True),
    "Qwen2.5-14B QLoRA @ 16 GB": dict(model="Qwen/Qwen2.5-14B-Instruct", budget=16, method="qlora",
                                      shared_prefix=True),
    "Qwen2.5-1.5B LoRA @ 6 GB": dict(model="Qwen/Qwen2.5-1.5B-Instruct", budget=6, method="lora",
                                     shared_prefix=True),
    "Qwen2.5-1.5B LoRA @ 6 GB, 4 x 256 tokens": dict(model="Qwen/Qwen2.5-1.5B-Instruct", budget=6, method="lora",
                                                     num_generations=4, max_completion_length=256, shared_prefix=False),
    "Qwen2.5-1.5B LoRA @ 6 GB, beta 0.04 (reference scoring)": dict(model="Qwen/Qwen2.5-1.5B-Instruct", budget=6,
                                                                    method="lora", beta=0.04, shared_prefix=False),
    "Qwen2.5-7B GaLore @ 24 GB": dict(model="Qwen/Qwen2.5-7B-Instruct", budget=24, method="galore",
                                      shared_prefix=False),
    "Qwen2.5-0.5B full @ 8 GB": dict(model="Qwen/Qwen2.5-0.5B-Instruct", budget=8, method="full",
                                     shared_prefix=False),
    "Qwen2.5-0.5B full @ 8 GB, 16 x 1024 tokens": dict(model="Qwen/Qwen2.5-0.5B-Instruct", budget=8, method="full",
                                                       num_generations=16, max_completion_length=1024,
                                                       shared_prefix=True),
}


# the machine the rows plan for: grpo-lite's own dependencies (bitsandbytes, galore-torch), no liger-kernel or vLLM
PLAIN_EXTRAS = dict(liger_kernel=False, vllm=False, galore_torch=True, bitsandbytes=True, deepspeed=False)


def plan_of(label: str) -> Any:
    """The plan a row simulates (for :data:`PLAIN_EXTRAS`, whatever this machine has installed)."""
    from grpo_lite.planning import hardware
    from grpo_lite.planning.choose import plan

    config = dict(ROWS[label])
    installed = hardware.installed_extras
    hardware.installed_extras = lambda: hardware.Extras(**PLAIN_EXTRAS)  # type: ignore[assignment]
    try:
        return plan(config.pop("model"), config.pop("budget"), **config)
    finally:
        hardware.installed_extras = installed  # type: ignore[assignment]


def run_row(label: str) -> dict[str, Any]:
    """Plan and simulate one row; the docs' row (:func:`grpo_lite.simulation.report.row_of`)."""
    from grpo_lite.simulation.report import row_of
    from grpo_lite.simulation.run import simulate

    sim = simulate(plan_of(label))
    row = row_of(label, sim)
    row["plan_kwargs"] = {k: v for k, v in ROWS[label].items()}
    return row


def replan(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row with its planned columns recomputed from the current memory model (simulated kept)."""
    from grpo_lite.simulation.result import planned_tensor_bytes

    the_plan = plan_of(row["label"])
    est = the_plan.estimate
    phases = {}
    for phase, (_, simulated) in row["phases"].items():
        phases[phase] = [round(sum(planned_tensor_bytes(est, phase).values())), simulated]
    non_tensor = sum(c.bytes for c in est.peak.components if c.name in _non_tensor())
    return {**row, "phases": phases, "planned_total": round(est.total_bytes), "planned_peak_phase": est.peak_phase,
            "non_tensor": round(non_tensor)}


def _non_tensor() -> tuple[str, ...]:
    from grpo_lite.simulation.result import NON_TENSOR

    return NON_TENSOR


def show(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        print(f"\n{row['label']}: {row['preset']}, {row['shape']}, shared prefix "
              f"{'on' if row['shared_prefix'] else 'off'} (simulated in {row['wall_s']} s)")
        for phase, (planned, simulated) in row["phases"].items():
            print(f"  {phase:16s} planned {planned / GIB:7.3f} GiB  simulated {simulated / GIB:7.3f} GiB  "
                  f"{simulated / planned - 1:+.1%}")


def write(rows: list[dict[str, Any]]) -> None:
    """Rewrite docs/memory_simulation.json and the GPU table of docs/memory.md."""
    from grpo_lite.planning.tables import splice_section
    from grpo_lite.simulation.report import DOC_END, DOC_START, simulation_markdown

    STORED.write_text(json.dumps({"about": "grpo-lite: planned vs simulated at full size on the meta device "
                                           "(benchmarks/gpu_sim.py)", "rows": rows}, indent=1) + "\n",
                      encoding="utf-8")
    page = MEMORY_DOC.read_text(encoding="utf-8")
    MEMORY_DOC.write_text(splice_section(page, DOC_START, DOC_END, simulation_markdown(rows)), encoding="utf-8")
    print(f"wrote {STORED.relative_to(ROOT)} and the table in {MEMORY_DOC.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="TEXT", help="rows whose label contains TEXT")
    parser.add_argument("--write", action="store_true", help="rewrite docs/memory_simulation.json and docs/memory.md")
    parser.add_argument("--show", action="store_true", help="the stored rows against the current memory model")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.show:
        rows = [replan(r) for r in json.loads(STORED.read_text(encoding="utf-8"))["rows"]]
        show(rows)
        if args.write:
            write(rows)
        return 0
    labels = [k for k in ROWS if not args.only or any(t in k for t in args.only)]
    rows = []
    start = time.perf_counter()
    for label in labels:
        print(f"simulating {label} ...", flush=True)
        rows.append(run_row(label))
        gc.collect()
    show(rows)
    print(f"\n{len(rows)} rows in {time.perf_counter() - start:.0f} s")
    if args.write:
        if args.only and STORED.is_file():  # keep the other stored rows
            kept = {r["label"]: r for r in json.loads(STORED.read_text(encoding="utf-8"))["rows"]}
            kept.update({r["label"]: r for r in rows})
            rows = [kept[k] for k in ROWS if k in kept]
        write(rows)
    worst = max(abs(s / p - 1) for r in rows for p, s in r["phases"].values())
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main())
