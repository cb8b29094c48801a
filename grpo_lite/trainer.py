"""train(): plan -> GRPOConfig, PEFT and bitsandbytes settings -> TRL's GRPOTrainer -> run.json.

The flow, in order: resolve the model, load its tokenizer and the dataset (prompt lengths are
measured, not assumed), plan the memory preset for the budget, load the model as the plan says,
build TRL's ``GRPOTrainer`` with the plan's settings, train, save the model or adapter and
``run.json`` atomically, and print a summary. TRL, PEFT and bitsandbytes are imported here, inside
the function, never at ``import grpo_lite``.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from grpo_lite.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

    from grpo_lite.presets import Method, Plan
    from grpo_lite.prompts import PromptStyle

__all__ = ["TrainResult", "train"]

# Defaults that are not about memory (the plan owns memory); any of them can be overridden.
_RUN_DEFAULTS: dict[str, Any] = {
    "logging_steps": 1,
    "save_strategy": "steps",
    "save_steps": 50,
    "save_total_limit": 2,
    "report_to": "none",
    "warmup_steps": 0.1,  # a float below 1 is a ratio of the total steps
    "lr_scheduler_type": "cosine",
    "max_grad_norm": 0.1,
    "adam_beta2": 0.99,
    "weight_decay": 0.1,
}
_LORA_KEYS = ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")


@dataclass
class TrainResult:
    """What a finished train() run produced.

    Attributes:
        output_dir: the run folder (checkpoints, ``run.json``, ``reward_curve.png``).
        model_dir: the final model, or the LoRA adapter for LoRA/QLoRA runs.
        plan: the memory plan that was applied.
        steps: optimizer steps completed.
        history: one dict per logged step (reward, each reward's mean, loss, memory...).
        peak_memory: measured CUDA peaks in GiB (``max_allocated_gib``, ``max_reserved_gib``), None on CPU.
        wall_seconds: wall time of the training loop.
        model: the trained model in memory (a PeftModel for LoRA/QLoRA), for evaluation right away.
        tokenizer: its tokenizer.
    """

    output_dir: Path
    model_dir: Path
    plan: Plan
    steps: int
    history: list[dict[str, Any]]
    peak_memory: dict[str, float] | None
    wall_seconds: float
    model: Any = field(default=None, repr=False)
    tokenizer: Any = field(default=None, repr=False)

    def reward_change(self, window: int = 3) -> tuple[float | None, float | None]:
        """Mean total reward over the first and the last ``window`` logged steps."""
        from grpo_lite.report import first_last

        return first_last(self.history, window).get("reward", (None, None))


def _default_output_dir(model: str) -> Path:
    slug = Path(str(model)).name.removesuffix(".gguf").replace("/", "-") or "model"
    return Path("runs") / f"{slug}-{datetime.now():%Y%m%d-%H%M%S}"


def _check_config_keys(settings: dict[str, Any], config_cls: type) -> None:
    valid = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(settings) - valid)
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(valid) + list(_LORA_KEYS), n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigError(
            f"unknown training setting(s): {', '.join(hints)}; pass GRPOConfig/TrainingArguments fields "
            f"or LoRA settings ({', '.join(_LORA_KEYS)})"
        )


def _measure_prompt_tokens(dataset: Dataset, tokenizer: Any, sample: int = 512) -> int:
    """The longest prompt, in tokens, over (a sample of) the dataset."""
    rows = dataset.select(range(min(sample, len(dataset))))["prompt"]
    lengths = []
    for prompt in rows:
        if isinstance(prompt, str):
            lengths.append(len(tokenizer(prompt)["input_ids"]))
        else:
            ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
            lengths.append(len(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids))
    return max(lengths)


def _device_map(plan: Plan) -> Any:
    if plan.device != "cuda" or not plan.model_kwargs.get("quantization"):
        return None
    from accelerate import PartialState

    return {"": PartialState().local_process_index}  # bitsandbytes weights must sit on this rank's GPU


def train(
    model: str | os.PathLike,
    budget_gb: float | None = None,
    *,
    dataset: str | os.PathLike | Dataset = "gsm8k",
    rewards: Sequence[str | Callable[..., list[float]]] | None = None,
    output_dir: str | os.PathLike | None = None,
    max_steps: int | None = None,
    method: Method | None = None,
    preset: str | None = None,
    prompt_style: PromptStyle | None = None,
    seed: int = 0,
    callbacks: Sequence[Any] = (),
    quiet: bool = False,
    **overrides: Any,
) -> TrainResult:
    """Fine-tune ``model`` with GRPO on ``dataset`` under a memory plan for ``budget_gb``.

    Args:
        model: a hub id, a short name such as ``"Llama-3.2-1B-Instruct"``, a local folder, or a ``.gguf`` file.
        budget_gb: the GPU's nominal size in GB (16 for a 16 GB card). None detects the current CUDA
            device; without CUDA the run uses a CPU plan.
        dataset: ``"gsm8k"``, ``"synthetic"``, a path to a jsonl/json/parquet/csv file or folder, or a
            ``datasets.Dataset`` with a question (or prompt) column and an answer column.
        rewards: reward names from ``grpo_lite.rewards.REWARDS`` and/or callables with TRL's signature.
            Default: the five GSM8K rewards.
        output_dir: where checkpoints, the final model and ``run.json`` go. Default: ``runs/<model>-<time>``.
        max_steps: optimizer steps; None trains one epoch.
        method: fix the memory method ("full", "galore", "lora", "qlora"); the planner picks the rest.
        preset: fix a whole preset by name (see ``grpo-lite presets``).
        prompt_style: system prompt, one-shot example and assistant prefill. Default: ``PromptStyle()``.
        seed: seed for data order, sampling and adapter initialisation. Default: 0.
        callbacks: extra ``transformers.TrainerCallback`` objects.
        quiet: do not print the plan and the summary table.
        **overrides: any GRPOConfig / TrainingArguments field (e.g. ``learning_rate=1e-5``,
            ``num_generations=4``) or LoRA setting (``lora_r``, ``lora_alpha``, ``lora_dropout``,
            ``lora_target_modules``), applied verbatim: the planner only chooses what is not fixed here.

    Returns:
        A :class:`TrainResult`.
    """
    import torch
    from rich.console import Console

    from grpo_lite import presets, prompts, rewards as reward_lib
    from grpo_lite.data import load_dataset
    from grpo_lite.loading import load_model, load_tokenizer
    from grpo_lite.models import resolve_model

    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise ConfigError(f"max_steps must be a positive integer, got {max_steps!r}")
    console = Console(quiet=quiet)
    spec = resolve_model(model)
    if spec.note:
        console.print(f"[dim]{spec.note}[/dim]")
    reward_funcs = reward_lib.resolve_rewards(rewards)
    style = prompt_style or prompts.PromptStyle()

    tokenizer = load_tokenizer(spec.model_id)
    train_set = load_dataset(dataset, split="train", style=style, seed=seed)
    train_set = prompts.apply_prompt_style(train_set, tokenizer, style)
    prompt_tokens = _measure_prompt_tokens(train_set, tokenizer)

    device = "cuda" if torch.cuda.is_available() else "cpu"
    the_plan = presets.plan(
        spec, budget_gb, method=method, preset=preset, device=device, max_prompt_length=prompt_tokens, **overrides
    )
    if not quiet:
        from grpo_lite.plan_table import plan_table

        console.print(plan_table(the_plan))

    from trl import GRPOConfig, GRPOTrainer

    out = Path(output_dir) if output_dir is not None else _default_output_dir(str(model))
    settings = {**_RUN_DEFAULTS, **the_plan.settings}
    settings.update(output_dir=str(out), seed=seed, max_steps=max_steps if max_steps is not None else -1)
    _check_config_keys(settings, GRPOConfig)
    try:
        args = GRPOConfig(**settings)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"TRL rejected the settings: {exc}") from exc

    torch.manual_seed(seed)
    policy = load_model(
        spec.model_id,
        dtype=the_plan.model_kwargs.get("dtype", "float32"),
        quantization=the_plan.model_kwargs.get("quantization"),
        device_map=_device_map(the_plan),
    )
    peft_config = None
    if the_plan.lora is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(**the_plan.lora)
    from grpo_lite.callbacks import HistoryCallback, MemoryCallback

    memory_cb, history_cb = MemoryCallback(), HistoryCallback()
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=train_set,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[memory_cb, history_cb, *callbacks],
    )
    start = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - start
    model_dir = _save_final(trainer, tokenizer, out)
    result = TrainResult(
        output_dir=out,
        model_dir=model_dir,
        plan=the_plan,
        steps=trainer.state.global_step,
        history=history_cb.rows,
        peak_memory=memory_cb.peak(),
        wall_seconds=wall,
        model=trainer.model,
        tokenizer=tokenizer,
    )
    _write_run_json(result, settings, reward_funcs, prompt_tokens, style)
    _finish_report(result, console)
    return result


def _save_final(trainer: Any, tokenizer: Any, out: Path) -> Path:
    """Save the final model (or adapter) to ``out/final`` through a temporary folder and a rename."""
    import shutil

    final = out / "final"
    tmp = out / ".final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_model(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


def _write_run_json(result: TrainResult, settings: dict[str, Any], reward_funcs: list, prompt_tokens: int, style) -> None:
    import importlib.metadata as md

    from grpo_lite._version import __version__
    from grpo_lite.report import first_last, write_json_atomic

    versions = {"grpo-lite": __version__}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "bitsandbytes"):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    summary = {k: {"first": a, "last": b} for k, (a, b) in first_last(result.history).items()}
    write_json_atomic(
        result.output_dir / "run.json",
        {
            "model": result.plan.model.model_id,
            "plan": result.plan.to_dict(),
            "settings": settings,
            "rewards": [getattr(f, "__name__", repr(f)) for f in reward_funcs],
            "prompt_style": dataclasses.asdict(style),
            "measured_prompt_tokens": prompt_tokens,
            "steps": result.steps,
            "wall_seconds": round(result.wall_seconds, 2),
            "peak_memory": result.peak_memory,
            "planned_peak_gib": result.plan.estimate.total_gib,
            "summary": summary,
            "history": result.history,
            "versions": versions,
            "model_dir": str(result.model_dir),
        },
    )


def _finish_report(result: TrainResult, console: Any) -> None:
    from grpo_lite.report import plot_reward_curve, summary_table

    title = f"GRPO {result.plan.model.name}: {result.steps} steps, preset {result.plan.preset.name}"
    console.print(
        summary_table(result.history, title=title, peak=result.peak_memory, planned_gib=result.plan.estimate.total_gib)
    )
    if result.history:
        png = plot_reward_curve(result.history, result.output_dir / "reward_curve.png")
        console.print(f"reward curve: {png}" if png else "[dim]no reward curve: pip install 'grpo-lite[plot]'[/dim]")
    console.print(f"model saved to {result.model_dir}; run record in {result.output_dir / 'run.json'}")
