"""GPU check of the sharding path: grpo-lite under FSDP / ZeRO-3 on one GPU, planned against measured.

NCCL needs one GPU per rank, so on a single GPU each sharding runs with ONE process. That proves
the config path end to end (``grpo-lite train --num-processes 1 --sharding S`` -> ``accelerate launch``
with the shipped config -> the model wrapped by FSDP2 / DeepSpeed -> a few GRPO steps -> run.json,
the rank record and the final save) and compares the planner's per-device peak for N=1 with the
CUDA peak measured by train(). It cannot measure the division across N: that needs N GPUs (run the
same command with --num-processes N there). The planner's per-device peaks for N = 1, 2, 4, 8 are
printed beside it. ZeRO-3 runs only when deepspeed is installed; otherwise it is reported as skipped.

    python benchmarks/gpu_sharding.py --dry-run            # the commands and planned numbers, no GPU needed
    python benchmarks/gpu_sharding.py [--steps 3] [--out DIR] [--shardings none fsdp zero3]
    python benchmarks/gpu_sharding.py --docs docs/scaling.md [--check]   # refresh (or check) the doc's tables

Budget: under 8 minutes on one H200 (a 0.5B random Llama built locally, nothing downloaded; three
runs of 3 steps, 8 generations x 256 tokens). Writes DIR/gpu_sharding.json; the last line is
``gpu_sharding: ok``, ``gpu_sharding: FAILED`` or ``gpu_sharding: dry run``. Needs grpo-lite's
dependencies with a CUDA torch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

# The model and settings every run uses: fixed, so the planner's numbers are reproducible.
MODEL_SHAPE = dict(hidden_size=2048, num_layers=16, num_heads=32)  # ~0.55B parameters, 2 KV heads
RUN_SETTINGS = dict(
    num_generations=8,
    per_device_train_batch_size=8,
    gradient_accumulation_steps=1,
    max_completion_length=256,
    gradient_checkpointing=True,
    use_vllm=False,
    save_strategy="no",
)
COUNTS = (1, 2, 4, 8)
# docs/scaling.md: one full fine-tune compared across shardings, and what the planner picks.
DOC_MODEL = "Qwen2.5-7B-Instruct"
DOC_SETTINGS = dict(
    method="full",
    optim="adamw_torch_fused",
    gradient_checkpointing=True,
    num_generations=8,
    per_device_train_batch_size=2,
    gradient_accumulation_steps=4,
    max_completion_length=512,
    max_prompt_length=256,
)
DOC_PROCESSES = 4
DOC_PLANS = (("Llama-3.1-8B-Instruct", (24, 80)), ("Qwen2.5-14B-Instruct", (8, 24, 80)))
DOC_MARKERS = {
    "modes": ("<!-- modes-table:start -->", "<!-- modes-table:end -->"),
    "sharding": ("<!-- sharding-table:start -->", "<!-- sharding-table:end -->"),
    "planner": ("<!-- planner-table:start -->", "<!-- planner-table:end -->"),
}


# ---- planned numbers (no GPU) -----------------------------------------------------------------------
@contextlib.contextmanager
def _doc_extras() -> Iterator[None]:
    """Plan as if bitsandbytes, galore-torch and deepspeed were installed (and vLLM, liger were not)."""
    from unittest import mock

    from grpo_lite.planning import hardware

    extras = hardware.Extras(liger_kernel=False, vllm=False, galore_torch=True, bitsandbytes=True, deepspeed=True)
    with mock.patch.object(hardware, "installed_extras", lambda: extras):
        yield


def sharding_rows(model: str, num_processes: int, **settings: Any) -> list[dict[str, Any]]:
    """Per-device GiB of each sharding (``none`` on one process) from :func:`grpo_lite.memory.estimate.estimate`."""
    from grpo_lite.memory.estimate import estimate
    from grpo_lite.scale.distributed import SHARDINGS

    rows = []
    for name in SHARDINGS:
        n = 1 if name == "none" else num_processes
        est = estimate(model, num_processes=n, sharding=name, **settings)
        parts: dict[str, float] = {}
        for phase in est.phases:  # persistent parts are equal in every phase; gathered weights vary
            for comp in phase.components:
                parts[comp.name] = max(parts.get(comp.name, 0.0), comp.gib)
        rows.append({"sharding": name, "processes": n, **parts, "peak": est.total_gib, "phase": est.peak_phase})
    return rows


def planner_rows(model: str, budget_gb: float, counts: tuple[int, ...] = COUNTS, **fixed: Any) -> list[dict]:
    """What :func:`grpo_lite.planning.choose.plan` picks for ``model`` on ``budget_gb`` per device, for each N."""
    from grpo_lite.errors import DoesNotFitError
    from grpo_lite.planning.choose import plan

    rows = []
    for n in counts:
        try:
            p = plan(model, budget_gb, num_processes=n, **fixed)
        except DoesNotFitError as exc:
            rows.append(
                {
                    "model": model,
                    "budget_gb": budget_gb,
                    "processes": n,
                    "fits": False,
                    "smallest_gb": exc.smallest_budget_gb,
                    "preset": exc.preset,
                }
            )
            continue
        s = p.settings
        rows.append(
            {
                "model": model,
                "budget_gb": budget_gb,
                "processes": n,
                "fits": True,
                "preset": p.preset.name,
                "sharding": p.sharding,
                "micro_batch": s["per_device_train_batch_size"],
                "accumulation": s["gradient_accumulation_steps"],
                "generations": s["num_generations"],
                "completion": s["max_completion_length"],
                "generation_batch": p.estimate.settings.generation_batch_per_device * n,
                "peak": p.estimate.total_gib,
            }
        )
    return rows


def _md(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def modes_markdown() -> str:
    """docs/scaling.md's table of sharding modes, from grpo_lite.scale.distributed.SHARDINGS."""
    from grpo_lite.scale.distributed import SHARDINGS

    rows = [
        [
            f"`{m.name}`",
            m.engine,
            m.divided,
            m.whole,
            f"`{m.config}`" if m.config else "-",
            ", ".join(m.requires) or "-",
            "yes" if m.cpu else "no",
        ]
        for m in SHARDINGS.values()
    ]
    return _md(
        ["sharding", "engine", "divided across N", "whole on every device", "accelerate config", "needs", "CPU"], rows
    )


def sharding_markdown() -> str:
    """docs/scaling.md's per-device table (DOC_MODEL, DOC_SETTINGS, DOC_PROCESSES)."""
    cols = ("weights", "gradients", "grad_buckets", "optimizer_state", "gathered_weights", "activations")
    rows = [
        [
            r["sharding"],
            str(r["processes"]),
            *(f"{r.get(c, 0.0):.2f}" for c in cols),
            f"**{r['peak']:.2f}**",
            r["phase"],
        ]
        for r in sharding_rows(DOC_MODEL, DOC_PROCESSES, **DOC_SETTINGS)
    ]
    return _md(["sharding", "processes", *cols, "peak GiB / device", "peak phase"], rows)


def planner_markdown() -> str:
    """docs/scaling.md's table of what the planner picks (DOC_PLANS x COUNTS)."""
    rows = []
    with _doc_extras():
        for model, budgets in DOC_PLANS:
            for gb in budgets:
                for r in planner_rows(model, gb):
                    head = [model, f"{gb:g}", str(r["processes"])]
                    if not r["fits"]:
                        rows.append(head + [f"does not fit (needs {r['smallest_gb']:g} GB, {r['preset']})"] + [""] * 4)
                        continue
                    rows.append(
                        head
                        + [
                            r["preset"],
                            r["sharding"],
                            f"{r['micro_batch']} x {r['accumulation']}",
                            f"{r['generation_batch']} = {r['generations']} x "
                            f"{r['generation_batch'] // r['generations']}",
                            f"{r['peak']:.2f}",
                        ]
                    )
    return _md(
        [
            "model",
            "GB / device",
            "processes",
            "preset",
            "sharding",
            "micro-batch x accumulation",
            "generation batch = generations x prompts",
            "peak GiB / device",
        ],
        rows,
    )


def update_doc(path: Path, *, check: bool = False) -> bool:
    """Rewrite the tables between the markers of ``path``; True when it was already up to date."""
    page = fresh = path.read_text(encoding="utf-8")
    for key, render in (("modes", modes_markdown), ("sharding", sharding_markdown), ("planner", planner_markdown)):
        start, end = DOC_MARKERS[key]
        i, j = fresh.index(start) + len(start), fresh.index(end)
        fresh = fresh[:i] + "\n" + render() + "\n" + fresh[j:]
    if fresh != page and not check:
        path.write_text(fresh, encoding="utf-8")
    return fresh == page


# ---- the GPU runs -----------------------------------------------------------------------------------
def train_command(model_dir: Path, out: Path, sharding: str, steps: int, budget_gb: float | None) -> list[str]:
    """``grpo-lite train`` for one sharding (one process), full fine-tuning, the fixed RUN_SETTINGS."""
    cmd = [
        sys.executable,
        "-m",
        "grpo_lite",
        "train",
        str(model_dir),
        "--method",
        "full",
        "--dataset",
        "synthetic",
        "--reward",
        "length",
        "--max-steps",
        str(steps),
        "--output-dir",
        str(out),
    ]
    cmd += [f"--set={k}={v}" for k, v in RUN_SETTINGS.items()]
    if budget_gb is not None:
        cmd += ["--budget-gb", f"{budget_gb:g}"]
    if sharding != "none":
        cmd += ["--num-processes", "1", "--sharding", sharding]
    return cmd


def _measure(cmd: list[str], out: Path, timeout: int) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        code, tail = done.returncode, done.stderr[-2000:]
    except subprocess.TimeoutExpired:
        code, tail = -1, f"timed out after {timeout} s"
    result: dict[str, Any] = {"exit_code": code, "wall_s": round(time.perf_counter() - start, 1)}
    if code != 0:
        result["stderr_tail"] = tail
        return result
    record = json.loads((out / "run.json").read_text())
    peak = record.get("peak_memory") or {}
    result.update(
        planned_gib=record["planned_peak_gib"],
        measured_allocated_gib=peak.get("max_allocated_gib"),
        measured_reserved_gib=peak.get("max_reserved_gib"),
        planned_sharding=record["plan"]["sharding"],
        steps=record["steps"],
        train_wall_s=record["wall_seconds"],
    )
    ranks = sorted((out / "ranks").glob("rank*.json")) if (out / "ranks").is_dir() else []
    result["ranks"] = [json.loads(p.read_text()) for p in ranks]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the commands and planned numbers only")
    parser.add_argument("--shardings", nargs="+", default=["none", "fsdp", "zero3"])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--budget-gb", type=float, default=None, help="per device (default: detected; 141 dry)")
    parser.add_argument("--timeout", type=int, default=150, help="seconds per run")
    parser.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--docs", type=Path, default=None, help="refresh the tables of this page and exit")
    parser.add_argument("--check", action="store_true", help="with --docs: only check, exit 1 if stale")
    args = parser.parse_args()
    if args.docs is not None:
        fresh = update_doc(args.docs, check=args.check)
        print(f"{args.docs}: {'up to date' if fresh else ('stale' if args.check else 'updated')}")
        return 1 if args.check and not fresh else 0

    import importlib.util

    from grpo_lite.tiny import build_tiny_model

    work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="grpo-lite-sharding-"))
    work.mkdir(parents=True, exist_ok=True)
    model_dir = work / "model"
    if args.dry_run:
        _config_only(model_dir)  # the planner reads config.json; no weights needed
    elif not (model_dir / "model.safetensors").is_file():
        build_tiny_model(model_dir, **MODEL_SHAPE)
    budget = args.budget_gb if args.budget_gb is not None else (141.0 if args.dry_run else None)
    plan_budget = budget if budget is not None else _detected_budget()
    fixed = {k: v for k, v in RUN_SETTINGS.items() if k != "save_strategy"}
    planned = {
        s: planner_rows(str(model_dir), plan_budget, COUNTS[1:], method="full", sharding=s, **fixed)
        for s in ("ddp", "zero2", "zero3", "fsdp")
    }
    planned["none"] = planner_rows(str(model_dir), plan_budget, (1,), method="full", **fixed)
    print(f"planned peak GiB per device ({plan_budget:g} GB cards); none: N=1, the others: N = {COUNTS[1:]}")
    for s, rows in planned.items():
        print(f"  {s:6s} " + "  ".join("-" if not r["fits"] else f"{r['peak']:.2f}" for r in rows))
    summary: dict[str, Any] = {
        "model": MODEL_SHAPE,
        "settings": RUN_SETTINGS,
        "budget_gb": plan_budget,
        "planned_by_processes": planned,
        "runs": {},
    }
    ok = True
    for sharding in args.shardings:
        out = work / f"run-{sharding}"
        cmd = train_command(model_dir, out, sharding, args.steps, budget)
        needs_ds = sharding in ("zero2", "zero3") and importlib.util.find_spec("deepspeed") is None
        if args.dry_run or needs_ds:
            print(("skipped (pip install deepspeed): " if needs_ds else "would run: ") + " ".join(cmd))
            summary["runs"][sharding] = {"skipped": "deepspeed not installed" if needs_ds else "dry run"}
            continue
        result = _measure(cmd, out, args.timeout)
        summary["runs"][sharding] = result
        ok &= result["exit_code"] == 0 and all(r["world_size"] == 1 for r in result.get("ranks", []))
        print(f"{sharding}: " + json.dumps({k: v for k, v in result.items() if k != "ranks"}))
    (work / "gpu_sharding.json").write_text(json.dumps(summary, indent=2))
    print(f"summary: {work / 'gpu_sharding.json'}")
    print(f"gpu_sharding: {'dry run' if args.dry_run else ('ok' if ok else 'FAILED')}")
    return 0 if ok else 1


def _config_only(path: Path) -> None:
    """The config.json build_tiny_model(**MODEL_SHAPE) writes (512-token vocabulary), without weights."""
    from transformers import LlamaConfig

    h = MODEL_SHAPE["hidden_size"]
    LlamaConfig(
        vocab_size=512,
        hidden_size=h,
        intermediate_size=2 * h,
        num_hidden_layers=MODEL_SHAPE["num_layers"],
        num_attention_heads=MODEL_SHAPE["num_heads"],
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
    ).save_pretrained(path)


def _detected_budget() -> float:
    from grpo_lite.planning.hardware import detect_vram, usable_to_nominal_gb

    gib, why = detect_vram()
    if gib is None:
        raise SystemExit(f"no GPU: {why}; use --dry-run or --budget-gb")
    return round(usable_to_nominal_gb(gib), 1)


if __name__ == "__main__":
    raise SystemExit(main())
