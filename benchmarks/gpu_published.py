"""Published GPU memory figures, re-run as simulations of the code that produced them, beside the planner.

Each row is a peak-memory figure someone measured on a real GPU and published (an issue, a pull request),
with the configuration it was measured at. The row is simulated at full size on PyTorch's ``meta`` device
with the code path that run took, counted by grpo-lite's tensor tracker (``grpo_lite/memory/measured/tracker.py``):

- ``logprob`` rows: a log-prob function on a logits tensor of the published shape (the naive
  ``log_softmax`` + ``gather``, or TRL's own ``selective_log_softmax`` of the TRL version named);
- ``lm_head_loss`` rows: Liger-Kernel's benchmark of the GRPO loss through the LM head, its ``torch``
  provider (``TorchLMHeadGRPO`` of Liger's tests: ``x @ W.T``, ``log_softmax`` in fp32, ``gather``, the
  reference logits, the clipped loss), forward and backward, with every tensor its benchmark script holds;
- ``grpo_step`` rows: one training step of TRL's ``GRPOTrainer`` of the version the run used (its own
  ``_compute_loss`` and ``_get_per_token_logps``, which materialise the full logits), on the model built
  from its config on meta, with the reference copy, AdamW state from a warm-up step, and the optimizer step;
- ``cce_baseline`` rows: the ``baseline`` of Apple's Cut Cross-Entropy benchmark (``e @ c.T``, softcapping,
  ``F.cross_entropy`` of the fp32 logits) in its ``Stats.measure`` window (peak minus the allocation at the
  window's start);
- ``lora_head_ce`` rows: Chunk-loss-LoRA's head benchmark (``f``, or ``chunked_f`` with its ``ChunkedCE``), with
  the tensors the script holds and ``triton.testing.do_bench``'s L2-flush buffer;
- ``softmax_backward`` rows: a leaf, ``softmax``, ``mean``, backward (the script of a PyTorch issue);
- ``hf_trainer_step`` rows: one optimizer step of the Trainer loop of transformers 4.16 (micro-batches of forward
  with labels and backward, clipping, that version's own ``AdamW`` or ``Adafactor``, ``zero_grad`` in place) on
  the model built from its config on meta.

The published code comes from its own package or repository, kept in one folder (``--sources``, default
``~/.cache/grpo-lite``). Old TRL versions run in a subprocess with that version first on ``PYTHONPATH``; the
other code is read from its source and the named class or function alone is executed (the modules import
Triton, a GPU or the hub). Fetch them once (S=~/.cache/grpo-lite)::

    pip install --no-deps --target $S/trl-old-0.17.0 trl==0.17.0
    pip install --no-deps --target $S/trl-old-0.15.2 trl==0.15.2
    pip download --no-deps --no-binary :all: liger-kernel==0.6.1 -d /tmp && tar xzf /tmp/liger_kernel-0.6.1.tar.gz -C $S
    pip download --no-deps transformers==4.16.0 -d /tmp && \
        unzip -q /tmp/transformers-4.16.0-py3-none-any.whl -d $S/transformers-4.16.0
    # with GitHub clones of apple/ml-cross-entropy in /tmp/cce and malaysia-ai/Chunk-loss-LoRA in /tmp/cll:
    mkdir $S/ml-cross-entropy-af5f96a && \
        git -C /tmp/cce archive af5f96a benchmark | tar x -C $S/ml-cross-entropy-af5f96a
    mkdir $S/Chunk-loss-LoRA-e4cacc8 && \
        git -C /tmp/cll archive e4cacc8 benchmark chunk_loss_lora | tar x -C $S/Chunk-loss-LoRA-e4cacc8

A figure read from ``nvidia-smi`` is the allocator's reserved memory plus the CUDA context: the simulated
peak gets the project's named constants for both (``GPU.cuda_context_bytes``, ``GPU.fragmentation`` of the
transient bytes, ``grpo_lite/memory/terms.py``), or the context the source itself measured where it did
(``cuda_context_mib``). The planner (``grpo_lite.estimate``) plans TRL 1.16, which
never materialises the logits: its column says what the same configuration costs today, not what the
published run cost. Nothing in the simulation or the planner is tuned to these figures.

    python benchmarks/gpu_published.py           # every row (about 4 minutes on 2 busy cores)
    python benchmarks/gpu_published.py --write   # also docs/memory_published.json and the table in docs/memory.md
    python benchmarks/gpu_published.py --show    # the stored rows
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from published_rows import ARCHS, ROWS, Published
from published_sims import worker

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tools/ (the docs' tables), beside this folder
STORED = ROOT / "docs" / "memory_published.json"
MEMORY_DOC = ROOT / "docs" / "memory.md"
DOC_START, DOC_END = "<!-- published-table:start -->", "<!-- published-table:end -->"
GIB = 1024**3


# ---- the driver ---------------------------------------------------------------------------------------------------
def trl_dir(root: Path, version: str) -> Path:
    """Where TRL ``version`` is installed for the rows that run it (see the module notes)."""
    path = root / f"trl-old-{version}"
    if not (path / "trl" / "__init__.py").is_file():
        raise SystemExit(
            f"TRL {version} is not installed in {path}: run "
            f"`pip install --no-deps --target {path} trl=={version}` (or pass another --sources)"
        )
    return path


def simulate_row(row: Published, root: Path) -> dict[str, Any]:
    """The row's simulation, in a subprocess whose ``PYTHONPATH`` starts with the row's TRL."""
    paths = ([str(trl_dir(root, row.trl))] if row.trl else []) + [str(ROOT)]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]),
        "HF_HUB_OFFLINE": "1",
    }
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", row.label, "--sources", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{row.label}: the simulation failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def device_figure(row: Published, sim: dict[str, Any]) -> int:
    """The simulated tensor peak as the published figure counts memory (see the module notes)."""
    if row.measures in ("max_allocated", "allocated_delta"):  # the simulations return the figure's own window
        return sim["peak_bytes"]
    if row.measures != "nvidia_smi":
        raise ValueError(
            f"{row.label}: unknown measure {row.measures!r}; 'max_allocated', 'allocated_delta' or 'nvidia_smi'"
        )
    from grpo_lite.defaults import GPU
    from grpo_lite.memory.measured.tracker import PERSISTENT

    transient = sum(v for k, v in sim["categories"].items() if k not in PERSISTENT)
    context = row.config["cuda_context_mib"] * 2**20 if "cuda_context_mib" in row.config else GPU.cuda_context_bytes
    return round(sim["peak_bytes"] + GPU.fragmentation * transient + context)


def planned(row: Published) -> int | None:
    """What grpo-lite plans for the row's configuration (TRL 1.16's step), or None where it cannot say."""
    if row.kind != "grpo_step":
        return None
    from transformers import AutoConfig

    from grpo_lite.memory.estimate import estimate
    from grpo_lite.memory.models import architecture_from_config

    c = row.config
    spec = dict(ARCHS[c["model"]])
    arch = architecture_from_config(AutoConfig.for_model(spec.pop("model_type"), **spec), name=c["model"])
    est = estimate(
        arch,
        method=c["method"],
        device="cuda",
        dtype=c["dtype"],
        bf16=c["bf16"],
        beta=c["beta"],
        per_device_train_batch_size=c["per_device_train_batch_size"],
        num_generations=c["num_generations"],
        max_prompt_length=c["max_prompt_length"],
        max_completion_length=c["max_completion_length"],
        gradient_checkpointing=c["gradient_checkpointing"],
        optim=c["optimizer"],
    )
    if row.measures == "max_allocated":
        from grpo_lite.simulation.result import NON_TENSOR

        return round(est.total_bytes - sum(x.bytes for x in est.peak.components if x.name in NON_TENSOR))
    return round(est.total_bytes)


def result_row(row: Published, sim: dict[str, Any]) -> dict[str, Any]:
    simulated = device_figure(row, sim)
    plan = planned(row)
    return {
        "label": row.label,
        "cite": row.cite,
        "quote": row.quote,
        "measures": row.measures,
        "gpu": row.gpu,
        "kind": row.kind,
        "trl": row.trl,
        "config": row.config,
        "assumed": row.assumed,
        "measured_bytes": row.measured_bytes,
        "simulated_tensor_peak_bytes": sim["peak_bytes"],
        "simulated_bytes": simulated,
        "simulated_categories": sim["categories"],
        "planned_bytes": plan,
        "simulated_error": simulated / row.measured_bytes - 1,
        "planned_error": None if plan is None else plan / row.measured_bytes - 1,
        "attention": sim.get("attention", {}),
        "wall_s": sim["wall_s"],
    }


def _gib(n: float | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Median and worst absolute error of the simulated figures."""
    errors = [abs(r["simulated_error"]) for r in rows]
    return {"median": statistics.median(errors), "worst": max(errors)}


def markdown(rows: list[dict[str, Any]]) -> str:
    """The docs' table of published against simulated and planned figures."""
    lines = [
        "| published figure | source | GPU | TRL | what it counts | measured GiB | simulated GiB | error | "
        "planned GiB (TRL 1.16) | planned vs measured |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        what = {
            "max_allocated": "max allocated",
            "allocated_delta": "peak allocated over the inputs",
            "nvidia_smi": "nvidia-smi (context + reserved)",
        }[r["measures"]]
        lines.append(
            f"| {r['label']} | `{r['cite']}` | {r['gpu']} | {r['trl'] or '-'} | {what} | "
            f"{_gib(r['measured_bytes'])} | {_gib(r['simulated_bytes'])} | {_pct(r['simulated_error'])} | "
            f"{_gib(r['planned_bytes'])} | {_pct(r['planned_error'])} |"
        )
    s = summary(rows)
    lines.append("")
    lines.append(
        f"Simulated against measured, {len(rows)} rows: median error {s['median']:.1%}, worst {s['worst']:.1%}."
    )
    return "\n".join(lines)


def show(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        print(
            f"{r['label']}\n  {r['cite']}\n  measured {_gib(r['measured_bytes'])} GiB ({r['measures']}), simulated "
            f"{_gib(r['simulated_bytes'])} GiB ({_pct(r['simulated_error'])}; tensors "
            f"{_gib(r['simulated_tensor_peak_bytes'])} GiB), planned {_gib(r['planned_bytes'])} GiB "
            f"({_pct(r['planned_error'])})"
        )
    s = summary(rows)
    print(f"\nsimulated vs measured: median {s['median']:.1%}, worst {s['worst']:.1%} over {len(rows)} rows")


def write(rows: list[dict[str, Any]]) -> None:
    """Rewrite docs/memory_published.json and the published-figures table of docs/memory.md."""
    from tools.doc_tables import splice_section

    STORED.write_text(
        json.dumps(
            {
                "about": "grpo-lite: published GPU memory figures against their simulation "
                "(benchmarks/gpu_published.py)",
                "summary": summary(rows),
                "rows": rows,
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    page = MEMORY_DOC.read_text(encoding="utf-8")
    MEMORY_DOC.write_text(splice_section(page, DOC_START, DOC_END, markdown(rows)), encoding="utf-8")
    print(f"wrote {STORED.relative_to(ROOT)} and the table in {MEMORY_DOC.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sources",
        type=Path,
        default=Path.home() / ".cache" / "grpo-lite",
        help="folder holding the published code: trl-old-<version>/, liger_kernel-0.6.1/, ... (module "
        "notes; default: ~/.cache/grpo-lite)",
    )
    parser.add_argument("--only", action="append", metavar="TEXT", help="rows whose label contains TEXT")
    parser.add_argument("--write", action="store_true", help="rewrite docs/memory_published.json and docs/memory.md")
    parser.add_argument("--show", action="store_true", help="print the stored rows (no simulation)")
    parser.add_argument("--worker", metavar="LABEL", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.sources)))
        return 0
    if args.show:
        show(json.loads(STORED.read_text(encoding="utf-8"))["rows"])
        return 0
    if args.write and args.only:
        raise SystemExit("--write rewrites the whole table: run it without --only")
    for row in ROWS:
        if row.missing():
            raise SystemExit(f"{row.label}: configuration lacks {', '.join(row.missing())}")
    results = []
    for row in ROWS:
        if args.only and not any(t in row.label for t in args.only):
            continue
        print(f"simulating {row.label} ...", flush=True)
        results.append(result_row(row, simulate_row(row, args.sources)))
    show(results)
    if args.write:
        write(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
