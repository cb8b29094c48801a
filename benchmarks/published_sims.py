"""The simulations behind benchmarks/gpu_published.py: one published row, run on PyTorch's ``meta`` device.

Each ``_simulate_<kind>`` rebuilds what the published run held and ran (the published code itself, read from its
source where it is not importable), counted by grpo-lite's tensor tracker; :func:`worker` runs one row in a process
whose TRL is the row's (the driver, gpu_published.py, starts that process).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

from published_rows import ARCHS, REQUIRED, ROWS_BY_LABEL, Published


def _trl_flags_fixed() -> None:
    """Old TRL asks transformers whether vLLM, mergekit... are installed; transformers 5 answers with a truthy
    tuple even when they are not. Set each flag to whether the package is importable."""
    import importlib.util

    import trl.import_utils as iu

    for name, value in list(vars(iu).items()):
        if name.startswith("_") and name.endswith("_available") and not callable(value):
            setattr(iu, name, importlib.util.find_spec(name[1 : -len("_available")]) is not None)


def _naive_logprobs(logits: Any, index: Any) -> Any:
    """``log_softmax`` over the vocabulary, then ``gather`` (what TRL, OpenRLHF and verl did before early 2025)."""
    import torch

    return torch.gather(logits.log_softmax(dim=-1), dim=-1, index=index.unsqueeze(-1)).squeeze(-1)


def _tracked(run: Any, register: Any = None, *, saved_hook: bool = True) -> dict[str, Any]:
    """Run ``run()`` under the tensor tracker; the peak and its categories. ``saved_hook=False``: without the
    tracker's saved-tensor hook (it only names what autograd keeps ``activation``; ``torch.func`` refuses such
    hooks), so what autograd keeps stays ``temporary``; the bytes are the same."""
    from grpo_lite.memory.measured.tracker import PhaseClock, TensorTracker

    clock = PhaseClock()
    tracker = TensorTracker(clock, device_type="meta")
    clock.backends = [tracker]
    if register is not None:
        register(tracker)
    tracker.start()
    if not saved_hook:
        hook = getattr(tracker, "_saved_hooks", None)
        if hook is None:
            tracker.stop()
            raise RuntimeError(
                "TensorTracker no longer keeps its saved-tensor hook in _saved_hooks: update _tracked "
                "(grpo_lite/memory/measured/tracker.py) to turn it off for torch.func code"
            )
        hook.__exit__(None, None, None)
        tracker._saved_hooks = None
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


def _simulate_softmax_backward(row: Published) -> dict[str, Any]:
    """The issue's script: a leaf, ``softmax`` over its last dimension (rebinding the name), ``mean``, backward."""
    import torch

    c = row.config
    if c["loss"] != "mean":
        raise ValueError(f"{row.label}: unknown loss {c['loss']!r}; only 'mean' is simulated")
    held: list[Any] = []

    def run(_clock: Any) -> None:
        x = torch.empty(c["shape"], dtype=getattr(torch, c["dtype"]), device="meta", requires_grad=True)
        held.append(x)  # the graph the loss references keeps the leaf (and its gradient) alive
        x = torch.nn.functional.softmax(x, dim=c["dim"])
        loss = torch.mean(x)
        loss.backward()
        held.append(x)

    return _tracked(run)


def _simulate_hf_trainer_step(row: Published, sources: Path) -> dict[str, Any]:
    """One optimizer step of the Trainer loop of January 2022 (transformers 4.16 on PyTorch 1.10): per micro-batch
    the forward with the labels and the backward (through ``torch.utils.checkpoint`` per layer when checkpointing),
    then gradient clipping, that version's own optimizer step (AdamW or Adafactor, read from its source) and
    ``model.zero_grad()`` in place; the optimizer's state from a warm-up step."""
    import math
    import typing
    import warnings

    import torch
    from torch import nn
    from transformers import AutoConfig, AutoModelForSequenceClassification

    c = row.config
    if (c["head"], c["attention"], c["zero_grad"]) != ("sequence_classification", "eager", "in_place"):
        raise ValueError(f"{row.label}: only an eager sequence classifier with in-place zero_grad is simulated here")
    path, name = _source(sources, c["optimizer"])
    optimizer_cls = _definition_from_source(
        path,
        name,
        {
            "torch": torch,
            "nn": nn,
            "math": math,
            "warnings": warnings,
            "Optimizer": torch.optim.Optimizer,
            **{n: getattr(typing, n) for n in ("Callable", "Iterable", "Optional", "Tuple", "Union")},
            "require_version": lambda *_a, **_k: None,
        },
    )
    # Trainer.get_optimizer_cls_and_kwargs of 4.16 with TrainingArguments' defaults (lr 5e-5, eps 1e-8)
    kwargs = (
        {"lr": 5e-5, "scale_parameter": False, "relative_step": False}
        if name == "Adafactor"
        else {"lr": 5e-5, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": c["weight_decay"]}
    )
    if name == "AdamW":
        kwargs["no_deprecation_warning"] = True
    spec = dict(ARCHS[c["model"]])
    config = AutoConfig.for_model(spec.pop("model_type"), num_labels=c["num_labels"], **spec)
    config._attn_implementation = c["attention"]
    with torch.device("meta"):
        model = AutoModelForSequenceClassification.from_config(config, dtype=getattr(torch, c["dtype"]))
        input_ids = torch.empty(c["batch"], c["seq_len"], dtype=torch.long)
        labels = torch.empty(c["batch"], dtype=torch.long)
    if c["gradient_checkpointing"]:  # PyTorch 1.10's torch.utils.checkpoint is the reentrant one
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.train()
    optimizer = optimizer_cls(model.parameters(), **kwargs)
    accumulation = c["gradient_accumulation_steps"]

    def one_step() -> None:
        for _ in range(accumulation):
            loss = model(input_ids=input_ids, labels=labels).loss / accumulation
            loss.backward()
            del loss
        nn.utils.clip_grad_norm_(model.parameters(), c["max_grad_norm"], foreach=False)
        optimizer.step()
        model.zero_grad(set_to_none=False)

    one_step()  # the steps before: the optimizer's state and the zeroed gradients exist

    def register(tracker: Any) -> None:
        tracker.track_module(model)
        tracker.track_optimizer(optimizer)
        tracker.register(input_ids, "param")
        tracker.register(labels, "param")

    return _tracked(lambda _clock: one_step(), register)


def _definition_from_source(path: Path, name: str, namespace: dict[str, Any]) -> Any:
    """The class or function ``name`` of the Python file ``path``, executed alone in ``namespace`` (the file's own
    imports need Triton, a GPU or the hub)."""
    import ast

    if not path.is_file():
        raise RuntimeError(f"{path} is missing: fetch the published sources (module notes)")
    source = path.read_text(encoding="utf-8")
    node = next(
        (n for n in ast.parse(source).body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == name), None
    )
    if node is None:
        raise RuntimeError(f"{path} defines no {name}: not the source this row was written against")
    exec(compile(ast.Module([node], type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace[name]


def _source(sources: Path, spec: str) -> tuple[Path, str]:
    """``folder/file.py:name`` -> (the file under ``sources``, the name)."""
    file, _, name = spec.partition(":")
    return sources / file, name


def _simulate_lm_head_loss(row: Published, sources: Path) -> dict[str, Any]:
    """Liger's GRPO loss benchmark, torch provider: its ``full()`` (forward + backward), the second iteration."""
    import torch
    import torch.nn.functional as F

    c = row.config
    torch_grpo = _definition_from_source(*_source(sources, c["source"]), {"torch": torch, "F": F})
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


def _simulate_cce_baseline(row: Published, sources: Path) -> dict[str, Any]:
    """The Cut Cross-Entropy benchmark's ``baseline`` (``e @ c.T``, softcapping, ``F.cross_entropy`` of the fp32
    logits) under its ``Stats.measure``: the allocator's peak over the measured call(s) minus what was allocated
    when they began (the inputs)."""
    import torch
    import torch.nn.functional as F

    from grpo_lite.memory.measured.tracker import PhaseClock, TensorTracker

    c = row.config
    harness, _ = _source(sources, c["harness"])
    if "allocated_bytes.all.peak" not in (harness.read_text(encoding="utf-8") if harness.is_file() else ""):
        raise RuntimeError(
            f"{harness}: not the harness this row was written against (it measures "
            "allocated_bytes.all.peak deltas); fetch the published sources (module notes)"
        )
    baseline = _definition_from_source(*_source(sources, c["source"]), {"torch": torch, "F": F, "IGNORE_INDEX": -100})
    if c["phase"] not in ("loss-fw", "loss-bw", "loss-fw-bw"):
        raise ValueError(f"{row.label}: unknown phase {c['phase']!r}; 'loss-fw', 'loss-bw' or 'loss-fw-bw'")
    dtype = getattr(torch, c["dtype"])
    with torch.device("meta"):
        e = torch.empty(c["tokens"], c["hidden"], dtype=dtype, requires_grad=True)
        classifier = torch.empty(c["vocab"], c["hidden"], dtype=dtype, requires_grad=True)
        targets = torch.empty(c["tokens"], dtype=torch.long)

    clock = PhaseClock()
    tracker = TensorTracker(clock, device_type="meta")
    clock.backends = [tracker]
    for t in (e, classifier, targets):
        tracker.register(t, "param")
    tracker.start()
    try:
        clock.push("forward")
        loss = baseline(e, classifier, targets, softcap=c["softcap"])
        clock.replace("backward")
        if c["phase"] != "loss-fw":
            loss.backward()
        clock.pop()
    finally:
        tracker.stop()
    seg = dict(zip((phase for _, phase in clock.segments), tracker.segments(), strict=True))
    fw, bw = seg["forward"], seg["backward"]
    if c["phase"] == "loss-fw":
        start, top = fw.start_bytes, fw
    elif c["phase"] == "loss-bw":
        start, top = bw.start_bytes, bw
    else:
        start, top = fw.start_bytes, max(fw, bw, key=lambda x: x.peak_bytes)
    return {"peak_bytes": top.peak_bytes - start, "categories": {k: v for k, v in top.categories.items() if v}}


def _simulate_lora_head_ce(row: Published, sources: Path) -> dict[str, Any]:
    """Chunk-loss-LoRA's head benchmark: its ``f`` (frozen head + LoRA, ``nn.CrossEntropyLoss``, backward) or its
    ``chunked_f`` (its ``ChunkedCE``, eager), called again after the warm-up with every tensor the script holds and
    ``do_bench``'s L2-flush buffer, as ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats`` sees it."""
    import ast
    import contextlib

    import torch
    from torch import nn

    c = row.config
    path, name = _source(sources, c["source"])
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: fetch the published sources (module notes)")
    constants: dict[str, Any] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:  # the script's own sizes, checked against the row
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.Constant)):
            names = [
                t.id
                for t in (node.targets[0].elts if isinstance(node.targets[0], ast.Tuple) else node.targets)
                if isinstance(t, ast.Name)
            ]
            values = ast.literal_eval(node.value)
            values = values if isinstance(values, tuple) else (values,)
            if len(names) == len(values):  # plain names only (not ``m.weight.requires_grad = False``)
                constants.update(zip(names, values, strict=True))
    stated = {"B": c["batch"], "T": c["seq_len"], "D": c["hidden"], "V": c["vocab"], "R": c["rank"], "r": c["scale"]}
    if {k: constants.get(k) for k in stated} != stated:
        raise RuntimeError(f"{path}: sizes {constants} differ from the row's {stated}")
    dtype = getattr(torch, c["dtype"])
    b, t, d, v, r = c["batch"], c["seq_len"], c["hidden"], c["vocab"], c["rank"]
    with torch.device("meta"):
        head, lora_a, lora_b = (
            nn.Linear(d, v, bias=False).to(dtype),
            nn.Linear(d, r, bias=False).to(dtype),
            nn.Linear(r, v, bias=False).to(dtype),
        )
        head.weight.requires_grad = False
        x = torch.empty(b, t, d, dtype=dtype, requires_grad=True)
        label = torch.empty(b, t, dtype=torch.long)
    namespace: dict[str, Any] = {
        "torch": torch,
        "nn": nn,
        "m": head,
        "m_a": lora_a,
        "m_b": lora_b,
        "r": c["scale"],
        "ce": nn.CrossEntropyLoss(),
        "D": d,
        "V": v,
    }
    if name == "chunked_f":
        namespace["ChunkedCE"] = _definition_from_source(
            path.parents[1] / "chunk_loss_lora" / "ce.py",
            "ChunkedCE",
            {
                "torch": torch,
                "nn": nn,
                "nullcontext": contextlib.nullcontext,
                "deepspeed": None,
                "CHUNK_SIZE": c["chunk_size"],
                "ce": nn.CrossEntropyLoss(),
            },
        )
    fn = _definition_from_source(path, name, namespace)
    fn(x, label)  # the warm-up calls: the gradients they leave stay for the measured ones

    def register(tracker: Any) -> None:
        for module in (head, lora_a, lora_b):
            tracker.track_module(module)
        tracker.register(x, "param")
        tracker.register(x.grad, "gradient")
        tracker.register(label, "param")

    def measured(_clock: Any) -> None:
        l2_flush = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int, device="meta")  # do_bench's buffer
        fn(x, label)
        del l2_flush

    return _tracked(measured, register, saved_hook=name != "chunked_f")  # ChunkedCE runs torch.func.grad_and_value


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

    from grpo_lite.memory.meta.attention import cuda_sdpa
    from grpo_lite.memory.meta.cuda import _patch_padding, _Patches  # cuda_semantics() also patches TRL 1.16's head

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
    shell.accelerator = types.SimpleNamespace(
        gather_for_metrics=lambda t: torch.zeros(1),  # metrics: not memory
        is_main_process=True,
    )
    shell._metrics = {"train": collections.defaultdict(list), "eval": collections.defaultdict(list)}

    b, p, n = c["per_device_train_batch_size"], c["max_prompt_length"], c["max_completion_length"]

    def inputs() -> dict[str, Any]:
        ids = lambda k: torch.empty(b, k, dtype=torch.long, device="meta")  # noqa: E731
        batch = {
            "prompt_ids": ids(p),
            "prompt_mask": ids(p),
            "completion_ids": ids(n),
            "completion_mask": ids(n),
            "advantages": torch.empty(b, device="meta"),
        }
        if c["beta"] != 0:
            with torch.no_grad():  # TRL scores the reference log-probs before the loss
                full = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
                batch["ref_per_token_logps"] = GRPOTrainer._get_per_token_logps(
                    shell, ref, full, torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1), n
                )
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
        patches.close()
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
            raise RuntimeError(
                f"{label}: needs TRL {row.trl}, this process imports TRL {trl.__version__} from {trl.__file__}"
            )
    start = time.perf_counter()
    if row.kind == "logprob":
        out = _simulate_logprob(row)
    elif row.kind == "lm_head_loss":
        out = _simulate_lm_head_loss(row, sources)
    elif row.kind == "grpo_step":
        out = _simulate_grpo_step(row)
    elif row.kind == "hf_trainer_step":
        out = _simulate_hf_trainer_step(row, sources)
    elif row.kind == "softmax_backward":
        out = _simulate_softmax_backward(row)
    elif row.kind == "cce_baseline":
        out = _simulate_cce_baseline(row, sources)
    elif row.kind == "lora_head_ce":
        out = _simulate_lora_head_ce(row, sources)
    else:
        raise ValueError(f"{label}: unknown kind {row.kind!r}; one of {', '.join(REQUIRED)}")
    out["wall_s"] = round(time.perf_counter() - start, 1)
    return out
