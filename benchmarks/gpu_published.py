"""Published GPU memory figures, re-run as simulations of the code that produced them, beside the planner.

Each row is a peak-memory figure someone measured on a real GPU and published (an issue, a pull request),
with the configuration it was measured at. The row is simulated at full size on PyTorch's ``meta`` device
with the code path that run took, counted by grpo-lite's tensor tracker (``grpo_lite/memory/tracker.py``):

- ``logprob`` rows: a log-prob function on a logits tensor of the published shape (the naive
  ``log_softmax`` + ``gather``, or TRL's own ``selective_log_softmax`` of the TRL version named);
- ``lm_head_loss`` rows: Liger-Kernel's benchmark of the GRPO loss through the LM head, its ``torch``
  provider (``TorchLMHeadGRPO`` of Liger's tests: ``x @ W.T``, ``log_softmax`` in fp32, ``gather``, the
  reference logits, the clipped loss), forward and backward, with every tensor its benchmark script holds;
- ``grpo_step`` rows: one training step of TRL's ``GRPOTrainer`` of the version the run used (its own
  ``_compute_loss`` and ``_get_per_token_logps``, which materialise the full logits), on the model built
  from its config on meta, with the reference copy, AdamW state from a warm-up step, and the optimizer step.

The published code comes from its own package, kept in one folder (``--sources``, default
``~/.cache/grpo-lite``). Old TRL versions run in a subprocess with that version first on ``PYTHONPATH``;
Liger's test class is read from its source distribution (its module imports Triton kernels, so the class
alone is executed). Fetch them once::

    pip install --no-deps --target ~/.cache/grpo-lite/trl-old-0.17.0 trl==0.17.0
    pip install --no-deps --target ~/.cache/grpo-lite/trl-old-0.15.2 trl==0.15.2
    pip download --no-deps --no-binary :all: liger-kernel==0.6.1 -d /tmp
    tar xzf /tmp/liger_kernel-0.6.1.tar.gz -C ~/.cache/grpo-lite

A figure read from ``nvidia-smi`` is the allocator's reserved memory plus the CUDA context: the simulated
peak gets the project's named constants for both (``CUDA_CONTEXT_BYTES``, ``FRAGMENTATION`` of the
transient bytes, ``grpo_lite/memory/terms.py``). The planner (``grpo_lite.estimate``) plans TRL 1.16, which
never materialises the logits: its column says what the same configuration costs today, not what the
published run cost. Nothing in the simulation or the planner is tuned to these figures.

    python benchmarks/gpu_published.py           # every row (about 3 minutes on 2 busy cores)
    python benchmarks/gpu_published.py --write   # also docs/memory_published.json and the table in docs/memory.md
    python benchmarks/gpu_published.py --show    # the stored rows
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from published_rows import ARCHS, REQUIRED, ROWS, ROWS_BY_LABEL, Published

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "docs" / "memory_published.json"
MEMORY_DOC = ROOT / "docs" / "memory.md"
DOC_START, DOC_END = "<!-- published-table:start -->", "<!-- published-table:end -->"
GIB = 1024**3


# ---- the worker: one row, in a process whose TRL is the row's ---------------------------------------------------
def _trl_flags_fixed() -> None:
    """Old TRL asks transformers whether vLLM, mergekit... are installed; transformers 5 answers with a truthy
    tuple even when they are not. Set each flag to whether the package is importable."""
    import importlib.util

    import trl.import_utils as iu

    for name, value in list(vars(iu).items()):
        if name.startswith("_") and name.endswith("_available") and not callable(value):
            setattr(iu, name, importlib.util.find_spec(name[1:-len("_available")]) is not None)


def _naive_logprobs(logits: Any, index: Any) -> Any:
    """``log_softmax`` over the vocabulary, then ``gather`` (what TRL, OpenRLHF and verl did before early 2025)."""
    import torch

    return torch.gather(logits.log_softmax(dim=-1), dim=-1, index=index.unsqueeze(-1)).squeeze(-1)


def _tracked(run: Any, register: Any = None) -> dict[str, Any]:
    """Run ``run()`` under the tensor tracker; the peak and its categories."""
    from grpo_lite.memory.tracker import PhaseClock, TensorTracker

    clock = PhaseClock()
    tracker = TensorTracker(clock, device_type="meta")
    clock.backends = [tracker]
    if register is not None:
        register(tracker)
    tracker.start()
    try:
        clock.push("step")
        run(clock)
        clock.pop()
    finally:
        tracker.stop()
    peak = max(tracker.segments(), key=lambda s: s.peak_bytes)
    return {"peak_bytes": peak.peak_bytes, "categories": {k: v for k, v in peak.categories.items() if v}}


def _simulate_logprob(row: Published) -> dict[str, Any]:
    import torch

    c = row.config
    dtype = getattr(torch, c["dtype"])
    if c["function"] == "naive":
        fn = _naive_logprobs
    elif c["function"] == "trl.selective_log_softmax":
        from trl.trainer.utils import selective_log_softmax as fn
    else:
        raise ValueError(f"unknown log-prob function {c['function']!r}")
    held: list[Any] = []

    def run(_clock: Any) -> None:
        logits = torch.empty(c["batch"], c["seq_len"], c["vocab"], dtype=dtype, device="meta")
        index = torch.empty(c["batch"], c["seq_len"], dtype=torch.long, device="meta")
        held.append(fn(logits, index))

    return _tracked(run)


def _class_from_source(path: Path, name: str, namespace: dict[str, Any]) -> Any:
    """The class ``name`` of the Python file ``path``, executed alone in ``namespace`` (the file's own imports
    need Triton)."""
    import ast

    source = path.read_text(encoding="utf-8")
    node = next((n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if node is None:
        raise RuntimeError(f"{path} defines no class {name}: not the source this row was written against")
    exec(compile(ast.Module([node], type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace[name]


def _simulate_lm_head_loss(row: Published, sources: Path) -> dict[str, Any]:
    """Liger's GRPO loss benchmark, torch provider: its ``full()`` (forward + backward), the second iteration."""
    import torch
    import torch.nn.functional as F

    c = row.config
    path = sources / c["source"].split(":")[0]
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: fetch Liger's source distribution (module notes)")
    torch_grpo = _class_from_source(path, c["source"].split(":")[1], {"torch": torch, "F": F})
    b, t, h, v, dtype = c["batch"], c["seq_len"], c["hidden"], c["vocab"], getattr(torch, c["dtype"])
    with torch.device("meta"):
        module = torch_grpo(H=h, V=v, dtype=dtype, beta=c["beta"])
        liger_weights = [torch.empty(v, h, dtype=dtype) for _ in range(2)]  # LigerLMHeadGRPO's lin and ref_lin
        x = torch.empty(b, t, h, dtype=dtype, requires_grad=True)
        ids = torch.empty(b, t, dtype=torch.long)
        mask = torch.ones(b, t)
        advantages = torch.empty(b, dtype=dtype)
        ref_input = torch.empty(b, t, h, dtype=dtype)

    def full() -> None:
        module(x, ids, mask, advantages, ref_input=ref_input)[0].backward()

    full()  # the first of the benchmark's 10 iterations: the gradients it leaves stay for the next ones

    def register(tracker: Any) -> None:
        tracker.track_module(module)
        for t_ in (*liger_weights, x, ids, mask, advantages, ref_input):
            tracker.register(t_, "param")
        tracker.register(x.grad, "gradient")

    return _tracked(lambda _clock: full(), register)


def _qwen3_meta(name: str, dtype: Any) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(ARCHS[name])
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    config._attn_implementation = "sdpa"
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.config.use_cache = False
    return model


def _simulate_grpo_step(row: Published) -> dict[str, Any]:
    """One step of the installed TRL's GRPOTrainer loss on meta (TRL's own methods, on a trainer shell)."""
    import collections
    import types
    from collections import Counter

    import torch
    import torch.nn.functional as F

    from grpo_lite.simulation.attention import cuda_sdpa
    from grpo_lite.simulation.cuda import _patch_padding, _Patches  # cuda_semantics() also patches TRL 1.16's head

    _trl_flags_fixed()
    from trl.trainer.grpo_trainer import GRPOTrainer

    c = row.config
    if c["method"] != "full" or c["gradient_checkpointing"] or c["bf16"]:
        raise ValueError(f"{row.label}: only full fine-tuning without checkpointing or autocast is simulated here")
    defaults = {f.name: f.default for f in dataclasses.fields(_grpo_config())}
    dtype = getattr(torch, c["dtype"])
    model, ref = _qwen3_meta(c["model"], dtype), _qwen3_meta(c["model"], dtype)
    ref.requires_grad_(False)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=defaults["learning_rate"], foreach=True)  # CUDA's default

    shell = object.__new__(GRPOTrainer)
    shell.temperature, shell.beta = defaults["temperature"], c["beta"]
    shell.num_iterations, shell.loss_type = defaults["num_iterations"], defaults["loss_type"]
    shell.epsilon_low = defaults["epsilon"]
    shell.epsilon_high = defaults["epsilon_high"] if defaults["epsilon_high"] is not None else defaults["epsilon"]
    shell.max_completion_length = c["max_completion_length"]
    shell.control = types.SimpleNamespace(should_evaluate=False)
    shell.args = types.SimpleNamespace(report_to=[])  # TRL's profiling decorator reads it
    shell.accelerator = types.SimpleNamespace(gather_for_metrics=lambda t: torch.zeros(1),  # metrics: not memory
                                              is_main_process=True)
    shell._metrics = {"train": collections.defaultdict(list), "eval": collections.defaultdict(list)}

    b, p, n = c["per_device_train_batch_size"], c["max_prompt_length"], c["max_completion_length"]

    def inputs() -> dict[str, Any]:
        ids = lambda k: torch.empty(b, k, dtype=torch.long, device="meta")  # noqa: E731
        batch = {"prompt_ids": ids(p), "prompt_mask": ids(p), "completion_ids": ids(n), "completion_mask": ids(n),
                 "advantages": torch.empty(b, device="meta")}
        if c["beta"] != 0:
            with torch.no_grad():  # TRL scores the reference log-probs before the loss
                full = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
                batch["ref_per_token_logps"] = GRPOTrainer._get_per_token_logps(
                    shell, ref, full, torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1), n)
        return batch

    def one_step() -> None:
        loss = GRPOTrainer._compute_loss(shell, model, inputs())
        loss.backward()
        del loss
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    calls: Counter[str] = Counter()
    patches = _Patches()
    patches.set(F, "scaled_dot_product_attention", cuda_sdpa("sm80", calls))  # the A100's kernel choice
    _patch_padding(patches, padded=True)  # padded batches: transformers builds the 4-D mask, as on the GPU
    try:
        one_step()  # warm-up: creates AdamW's state, as the step before the measured one did

        def register(tracker: Any) -> None:
            tracker.track_module(model)
            tracker.track_module(ref, "reference")
            tracker.track_optimizer(optimizer)

        result = _tracked(lambda _clock: one_step(), register)
    finally:
        patches.undo()
    result["attention"] = dict(calls)
    return result


def _grpo_config() -> Any:
    from trl.trainer.grpo_config import GRPOConfig

    return GRPOConfig


def worker(label: str, sources: Path) -> dict[str, Any]:
    """Simulate one row in this process (its TRL must be the one on ``sys.path``)."""
    row = ROWS_BY_LABEL[label]
    if row.trl is not None:
        import trl

        if trl.__version__ != row.trl:
            raise RuntimeError(f"{label}: needs TRL {row.trl}, this process imports TRL {trl.__version__} "
                               f"from {trl.__file__}")
    start = time.perf_counter()
    if row.kind == "logprob":
        out = _simulate_logprob(row)
    elif row.kind == "lm_head_loss":
        out = _simulate_lm_head_loss(row, sources)
    elif row.kind == "grpo_step":
        out = _simulate_grpo_step(row)
    else:
        raise ValueError(f"{label}: unknown kind {row.kind!r}; one of {', '.join(REQUIRED)}")
    out["wall_s"] = round(time.perf_counter() - start, 1)
    return out




# ---- the driver ---------------------------------------------------------------------------------------------------
def trl_dir(root: Path, version: str) -> Path:
    """Where TRL ``version`` is installed for the rows that run it (see the module notes)."""
    path = root / f"trl-old-{version}"
    if not (path / "trl" / "__init__.py").is_file():
        raise SystemExit(f"TRL {version} is not installed in {path}: run "
                         f"`pip install --no-deps --target {path} trl=={version}` (or pass another --sources)")
    return path


def simulate_row(row: Published, root: Path) -> dict[str, Any]:
    """The row's simulation, in a subprocess whose ``PYTHONPATH`` starts with the row's TRL."""
    paths = ([str(trl_dir(root, row.trl))] if row.trl else []) + [str(ROOT)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, __file__, "--worker", row.label, "--sources", str(root)], env=env,
                          capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{row.label}: the simulation failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def device_figure(row: Published, sim: dict[str, Any]) -> int:
    """The simulated tensor peak as the published figure counts memory (see the module notes)."""
    if row.measures == "max_allocated":
        return sim["peak_bytes"]
    if row.measures != "nvidia_smi":
        raise ValueError(f"{row.label}: unknown measure {row.measures!r}; 'max_allocated' or 'nvidia_smi'")
    from grpo_lite.memory.terms import CUDA_CONTEXT_BYTES, FRAGMENTATION
    from grpo_lite.memory.tracker import PERSISTENT

    transient = sum(v for k, v in sim["categories"].items() if k not in PERSISTENT)
    return round(sim["peak_bytes"] + FRAGMENTATION * transient + CUDA_CONTEXT_BYTES)


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
    est = estimate(arch, method=c["method"], device="cuda", dtype=c["dtype"], bf16=c["bf16"], beta=c["beta"],
                   per_device_train_batch_size=c["per_device_train_batch_size"],
                   num_generations=c["num_generations"], max_prompt_length=c["max_prompt_length"],
                   max_completion_length=c["max_completion_length"],
                   gradient_checkpointing=c["gradient_checkpointing"], optim=c["optimizer"])
    if row.measures == "max_allocated":
        from grpo_lite.simulation.result import NON_TENSOR

        return round(est.total_bytes - sum(x.bytes for x in est.peak.components if x.name in NON_TENSOR))
    return round(est.total_bytes)


def result_row(row: Published, sim: dict[str, Any]) -> dict[str, Any]:
    simulated = device_figure(row, sim)
    plan = planned(row)
    return {
        "label": row.label, "cite": row.cite, "quote": row.quote, "measures": row.measures, "gpu": row.gpu,
        "kind": row.kind, "trl": row.trl, "config": row.config, "assumed": row.assumed,
        "measured_bytes": row.measured_bytes, "simulated_tensor_peak_bytes": sim["peak_bytes"],
        "simulated_bytes": simulated, "simulated_categories": sim["categories"], "planned_bytes": plan,
        "simulated_error": simulated / row.measured_bytes - 1,
        "planned_error": None if plan is None else plan / row.measured_bytes - 1,
        "attention": sim.get("attention", {}), "wall_s": sim["wall_s"],
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
    lines = ["| published figure | source | GPU | TRL | what it counts | measured GiB | simulated GiB | error | "
             "planned GiB (TRL 1.16) | planned vs measured |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        what = {"max_allocated": "max allocated", "nvidia_smi": "nvidia-smi (context + reserved)"}[r["measures"]]
        lines.append(f"| {r['label']} | `{r['cite']}` | {r['gpu']} | {r['trl'] or '-'} | {what} | "
                     f"{_gib(r['measured_bytes'])} | {_gib(r['simulated_bytes'])} | {_pct(r['simulated_error'])} | "
                     f"{_gib(r['planned_bytes'])} | {_pct(r['planned_error'])} |")
    s = summary(rows)
    lines.append("")
    lines.append(f"Simulated against measured, {len(rows)} rows: median error {s['median']:.1%}, "
                 f"worst {s['worst']:.1%}.")
    return "\n".join(lines)


def show(rows: list[dict[str, Any]]) -> None:
    for r in rows:
        print(f"{r['label']}\n  {r['cite']}\n  measured {_gib(r['measured_bytes'])} GiB ({r['measures']}), simulated "
              f"{_gib(r['simulated_bytes'])} GiB ({_pct(r['simulated_error'])}; tensors "
              f"{_gib(r['simulated_tensor_peak_bytes'])} GiB), planned {_gib(r['planned_bytes'])} GiB "
              f"({_pct(r['planned_error'])})")
    s = summary(rows)
    print(f"\nsimulated vs measured: median {s['median']:.1%}, worst {s['worst']:.1%} over {len(rows)} rows")


def write(rows: list[dict[str, Any]]) -> None:
    """Rewrite docs/memory_published.json and the published-figures table of docs/memory.md."""
    from grpo_lite.planning.tables import splice_section

    STORED.write_text(json.dumps({"about": "grpo-lite: published GPU memory figures against their simulation "
                                           "(benchmarks/gpu_published.py)", "summary": summary(rows), "rows": rows},
                                 indent=1) + "\n", encoding="utf-8")
    page = MEMORY_DOC.read_text(encoding="utf-8")
    MEMORY_DOC.write_text(splice_section(page, DOC_START, DOC_END, markdown(rows)), encoding="utf-8")
    print(f"wrote {STORED.relative_to(ROOT)} and the table in {MEMORY_DOC.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=Path, default=Path.home() / ".cache" / "grpo-lite",
                        help="folder holding trl-old-<version>/ and liger_kernel-0.6.1/ (default: ~/.cache/grpo-lite)")
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
