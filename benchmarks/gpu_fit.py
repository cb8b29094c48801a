"""Planned against measured GRPO peak memory, on a GPU capped to a consumer card's size.

For each case (a known architecture and a nominal budget) this script asks ``grpo_lite.plan`` for
the plan, builds the architecture with random weights (no download) and a synthetic word-level
tokenizer of the right vocabulary size, caps the CUDA allocator with
``torch.cuda.set_per_process_memory_fraction`` to the card's usable memory minus the CUDA context
this process already holds, forces worst-case lengths (prompts of exactly ``max_prompt_length``
tokens, ``min_new_tokens = max_completion_length``), runs a few GRPO steps with the plan's settings
and reports the planned peak beside the measured one (max reserved + CUDA context, and max allocated),
then each phase of the last step (``grpo_lite.memory.measured.measure`` with the CUDA allocator's peaks, reset
at every phase boundary) beside the planned phase.

    python benchmarks/gpu_fit.py                     # the three cases on a GPU (meant to take < 8 min on one H200)
    python benchmarks/gpu_fit.py --dry-run           # print the plans only (no torch needed)
    python benchmarks/gpu_fit.py --device cpu --tiny # prove the whole path on CPU with shrunken shapes

Each case runs in its own subprocess (a clean CUDA state, its own cap). ``--out results.json``
keeps the rows. Heavy imports happen inside functions.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

CASES: tuple[tuple[str, float], ...] = (("Llama-3.2-1B", 16), ("Qwen2.5-1.5B", 6), ("Llama-3.1-8B", 16))
TINY = dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=1024)
TINY_FIXED = dict(num_generations=4, max_completion_length=16, per_device_train_batch_size=4)
GIB = 1024**3


def case_plan(name: str, budget_gb: float, *, device: str, tiny: bool, prompt_tokens: int) -> Any:
    """The plan for one case; with ``tiny``, the real case's preset on shrunken shapes, on ``device``."""
    from grpo_lite.memory.models import ModelSpec, resolve_model
    from grpo_lite.planning.choose import plan

    spec = resolve_model(name)
    if not tiny:
        return plan(spec, budget_gb, device=device, max_prompt_length=prompt_tokens)  # type: ignore[arg-type]
    real = plan(spec, budget_gb, device="cuda", max_prompt_length=prompt_tokens)
    arch = dataclasses.replace(spec.arch, name=f"tiny-{spec.arch.name}", n_params=0, **TINY)
    tiny_spec = ModelSpec(name=arch.name, model_id="(random weights)", kind="local", arch=arch)
    return plan(
        tiny_spec,
        budget_gb,
        device=device,
        preset=real.preset.name,  # type: ignore[arg-type]
        max_prompt_length=prompt_tokens,
        **TINY_FIXED,
    )


def synthetic_tokenizer(vocab: int) -> Any:
    """A word-level tokenizer with exactly ``vocab`` ids: ``<pad>``, ``<eos>``, then ``t2`` ... ``t{vocab-1}``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {"<pad>": 0, "<eos>": 1, **{f"t{i}": i for i in range(2, vocab)}}
    core = Tokenizer(models.WordLevel(words, unk_token="<eos>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>", padding_side="left")


def random_model(the_plan: Any, device: str) -> Any:
    """The plan's architecture with random weights in the plan's load dtype, built on ``device``."""
    import torch
    from transformers import AutoModelForCausalLM

    from grpo_lite.memory.models import transformers_config

    config = transformers_config(
        the_plan.model.arch, pad_token_id=0, eos_token_id=1, bos_token_id=1, max_position_embeddings=4096
    )
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, dtype=getattr(torch, the_plan.model_kwargs["dtype"]))


def save_random_weights(the_plan: Any, device: str, workdir: str) -> None:
    """For quantized plans: write random 16-bit weights once (before the cap: they exceed it), then free them."""
    import gc

    import torch

    random_model(the_plan, device).save_pretrained(workdir)
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def load_model(the_plan: Any, device: str, workdir: str) -> Any:
    """Under the cap: random weights directly, or the saved ones through from_pretrained + BitsAndBytesConfig."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    quant = the_plan.model_kwargs.get("quantization")
    if quant is None:
        return random_model(the_plan, device)
    kwargs = {k: getattr(torch, v) if k.endswith("_dtype") else v for k, v in quant.items()}
    return AutoModelForCausalLM.from_pretrained(
        workdir,
        quantization_config=BitsAndBytesConfig(**kwargs),
        dtype=getattr(torch, the_plan.model_kwargs["dtype"]),
        device_map={"": 0} if device == "cuda" else None,
    )


def cap_memory(usable_gib: float) -> dict[str, float]:
    """Cap the caching allocator so allocator + this process's CUDA context fit ``usable_gib``."""
    import torch

    torch.empty(1, device="cuda")  # create the context
    free, total = torch.cuda.mem_get_info()
    context = total - free - torch.cuda.memory_reserved()
    fraction = (usable_gib * GIB - context) / total
    torch.cuda.set_per_process_memory_fraction(fraction)
    torch.cuda.reset_peak_memory_stats()
    return {"context_gib": context / GIB, "fraction": fraction, "device_total_gib": total / GIB}


def run_case(name: str, budget_gb: float, *, device: str, tiny: bool, steps: int, prompt_tokens: int) -> dict:
    """Plan, build, cap, train a few steps; return planned and measured numbers."""
    import random

    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from grpo_lite.memory.measured.measure import measure_training
    from grpo_lite.precision.rounding import state_nbytes
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    the_plan = case_plan(name, budget_gb, device=device, tiny=tiny, prompt_tokens=prompt_tokens)
    arch = the_plan.model.arch
    row: dict[str, Any] = {
        "case": name,
        "budget_gb": budget_gb,
        "tiny": tiny,
        "device": device,
        "preset": the_plan.preset.name,
        "planned_gib": round(the_plan.estimate.total_gib, 3),
        "planned_phase": the_plan.estimate.peak_phase,
        "planned_components": {k: round(v, 3) for k, v in the_plan.estimate.component_gib().items()},
        "settings": the_plan.settings,
    }
    tokenizer = synthetic_tokenizer(arch.vocab)
    rng = random.Random(0)
    prompts = [
        " ".join(f"t{rng.randrange(2, arch.vocab)}" for _ in range(the_plan.max_prompt_length)) for _ in range(256)
    ]
    per_step: list[dict[str, float]] = []

    class Peaks(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if device == "cuda":
                per_step.append(
                    {
                        "allocated_gib": torch.cuda.max_memory_allocated() / GIB,
                        "reserved_gib": torch.cuda.max_memory_reserved() / GIB,
                    }
                )

    def random_reward(completions: list, **kwargs: Any) -> list[float]:
        return [rng.random() for _ in completions]

    completion = the_plan.settings["max_completion_length"]
    settings = {
        **the_plan.settings,
        "output_dir": "",
        "max_steps": steps,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "generation_kwargs": {"min_new_tokens": completion},
    }
    with tempfile.TemporaryDirectory() as workdir:
        settings["output_dir"] = os.path.join(workdir, "out")
        weights = os.path.join(workdir, "model")
        if the_plan.model_kwargs.get("quantization"):
            save_random_weights(the_plan, device, weights)
        if device == "cuda":
            row.update({k: round(v, 3) for k, v in cap_memory(the_plan.budget_gib).items()})
        start = time.time()
        try:
            model = load_model(the_plan, device, weights)
            peft_config = None
            if the_plan.lora is not None:
                from peft import LoraConfig

                peft_config = LoraConfig(**the_plan.lora)
            planned = the_plan.estimate.settings  # the trainer train() builds: rounding and monitor as planned
            trainer = LiteGRPOTrainer(
                model=model,
                reward_funcs=random_reward,
                args=GRPOConfig(**settings),
                train_dataset=Dataset.from_dict({"prompt": prompts}),
                processing_class=tokenizer,
                peft_config=peft_config,
                callbacks=[Peaks()],
                shared_prefix=planned.shared_prefix,
                update_rounding=planned.update_rounding,
            )
            backend = "cuda" if device == "cuda" else "tensor"
            report = measure_training(trainer, (backend,), pad_one=True)  # per phase, padding like real batches
            row["phases"] = phase_rows(the_plan, report.last().phases[backend], backend)
            row["oom"] = False
        except torch.OutOfMemoryError as exc:
            row.update(oom=True, error=str(exc).splitlines()[0][:300])
    row["seconds"] = round(time.time() - start, 1)
    if not row.get("oom"):  # what was really applied, and whether lengths were worst case
        inner = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
        lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
        realized = [h["update/realized"] for h in trainer.state.log_history if "update/realized" in h]
        row.update(
            update_rounding=planned.update_rounding,
            update_realized=[round(r, 3) for r in realized],
            optimizer_state_gib=round(state_nbytes(trainer.optimizer) / GIB, 3),
            monitor_mib=round(trainer.update_monitor.nbytes() / 2**20, 2) if trainer.update_monitor else None,
        )
        row.update(
            optimizer=f"{type(inner).__module__}.{type(inner).__name__}",
            model_class=type(trainer.model).__name__,
            loaded_in_4bit=bool(getattr(model, "is_loaded_in_4bit", False)),
            checkpointing=bool(getattr(trainer.model, "is_gradient_checkpointing", False)),
            mean_completion_length=lengths,
        )
    if device == "cuda":
        row["measured_allocated_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 3)
        row["measured_reserved_gib"] = round(torch.cuda.max_memory_reserved() / GIB, 3)
        row["measured_total_gib"] = round(row["measured_reserved_gib"] + row["context_gib"], 3)
        row["per_step"] = [{k: round(v, 3) for k, v in p.items()} for p in per_step]
    return row


def phase_rows(the_plan: Any, measured: dict[str, Any], backend: str) -> dict[str, dict[str, float]]:
    """Each phase of the last step: planned tensor bytes (no context, no reserve) against the allocator's peaks."""
    from grpo_lite.memory.measured.calibration import PROCESS_COMPONENTS

    planned = {
        p.name: sum(c.bytes for c in p.components if c.name not in PROCESS_COMPONENTS) for p in the_plan.estimate.phases
    }
    out = {}
    for phase, peak in measured.items():
        if phase not in planned:
            continue
        row = {"planned_gib": round(planned[phase] / GIB, 3), "allocated_gib": round(peak.peak_bytes / GIB, 3)}
        if backend == "cuda":
            row["reserved_gib"] = round(peak.categories.get("reserved", 0) / GIB, 3)
        out[phase] = row
    return out


def _print_phases(rows: list[dict]) -> None:
    print("\nper phase of the last step (GiB): planned tensors vs max allocated (and max reserved)")
    for r in rows:
        for phase, p in (r.get("phases") or {}).items():
            ratio = p["allocated_gib"] / p["planned_gib"] if p["planned_gib"] else float("nan")
            print(
                f"{r['case']:14} {phase:16} {p['planned_gib']:8.2f} {p['allocated_gib']:9.2f} {ratio:6.2f} "
                f"{p.get('reserved_gib', '-'):>8}"
            )


def _subprocess(index: int, args: argparse.Namespace) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--case",
        str(index),
        "--device",
        args.device,
        "--steps",
        str(args.steps),
        "--prompt-tokens",
        str(args.prompt_tokens),
    ] + (["--tiny"] if args.tiny else [])
    name, budget = CASES[index]
    # torch prefers cuDNN attention on compute capability 9.0 / 10.x (H100, H200, B200); consumer cards, and the
    # simulation (benchmarks/gpu_sim.py), run flash / memory-efficient: ask for those so the figures compare
    env = {**os.environ, "TORCH_CUDNN_SDPA_DEPRIORITIZED": "1"}
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"case": name, "budget_gb": budget, "error": f"timed out after {args.timeout} s"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        return {"case": name, "budget_gb": budget, "error": (out.stderr.strip().splitlines() or ["?"])[-1][:300]}
    return json.loads(lines[-1])


def _print_table(rows: list[dict]) -> None:
    head = f"{'case':14} {'GB':>4} {'preset':15} {'planned':>8} {'measured':>9} {'alloc':>7} {'ratio':>6}  note"
    print(head + "\n" + "-" * len(head))
    for r in rows:
        if "error" in r and "preset" not in r:
            print(f"{r['case']:14} {r['budget_gb']:>4g} {'-':15} {'-':>8} {'-':>9} {'-':>7} {'-':>6}  {r['error']}")
            continue
        measured = r.get("measured_total_gib")
        ratio = f"{measured / r['planned_gib']:.2f}" if measured else "-"
        note = (
            "OOM: " + r["error"]
            if r.get("oom")
            else (
                f"{r.get('optimizer')} in {r.get('seconds')} s; update {r.get('update_rounding')}, realized "
                f"{r.get('update_realized')}, optimizer state {r.get('optimizer_state_gib')} GiB "
                f"(planned {r['planned_components'].get('optimizer_state')}), monitor {r.get('monitor_mib')} MiB"
            )
        )
        print(
            f"{r['case']:14} {r['budget_gb']:>4g} {r['preset']:15} {r['planned_gib']:>8.2f} "
            f"{measured if measured is not None else '-':>9} {r.get('measured_allocated_gib', '-'):>7} {ratio:>6}  "
            f"{note}"
        )
    print("planned: grpo_lite estimate (GiB); measured: max reserved + CUDA context; alloc: max allocated")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="shrink the shapes (2 layers, hidden 64) to prove the path")
    parser.add_argument("--dry-run", action="store_true", help="print each case's plan and stop")
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per case (default 3)")
    parser.add_argument("--prompt-tokens", type=int, default=256, help="prompt length, exact (default 256)")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only these cases (repeatable)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per case (default 300)")
    parser.add_argument("--out", default=None, help="also write the rows as JSON to this file")
    parser.add_argument("--case", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.case is not None:
        name, budget = CASES[args.case]
        row = run_case(
            name, budget, device=args.device, tiny=args.tiny, steps=args.steps, prompt_tokens=args.prompt_tokens
        )
        print(json.dumps(row, default=str))
        return 0
    chosen = [i for i, (name, _) in enumerate(CASES) if not args.only or name in args.only]
    if args.dry_run:
        for i in chosen:
            name, budget = CASES[i]
            p = case_plan(name, budget, device=args.device, tiny=args.tiny, prompt_tokens=args.prompt_tokens)
            print(
                f"{name} at {budget:g} GB: preset {p.preset.name}, planned {p.estimate.total_gib:.2f} GiB "
                f"({p.estimate.peak_phase}); settings {json.dumps(p.settings)}"
            )
        return 0
    rows = [_subprocess(i, args) for i in chosen]
    _print_table(rows)
    _print_phases(rows)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2, default=str)
    return 0 if all("error" not in r or r.get("oom") is not None for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
