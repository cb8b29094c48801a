"""From a Plan to TRL objects: GRPOConfig settings, the model as the plan loads it, GRPOTrainer.

Also the two ways a run's weights leave the trainer: the final save (atomic rename) and the
carried state when stepping down after an out-of-memory error. Imported only inside train().
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from grpo_lite.errors import ConfigError
from grpo_lite.planning.candidates import LORA_KEYS, MODEL_KEYS  # the one list of each

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

    from grpo_lite.planning.result import Plan

__all__ = ["RUN_DEFAULTS", "build_trainer", "carry_weights", "grpo_settings", "measure_prompt_tokens", "save_final"]

# Defaults that are not about memory (the plan owns memory); every one can be overridden.
RUN_DEFAULTS: dict[str, Any] = {
    "num_train_epochs": 1,  # GRPOConfig's default is 3; max_steps=None means one epoch here
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


def check_config_keys(settings: dict[str, Any], also: Sequence[str] = ()) -> None:
    """Raise ConfigError for keys that are not GRPOConfig fields (or in ``also``), with the closest valid name."""
    from trl import GRPOConfig

    valid = {f.name for f in dataclasses.fields(GRPOConfig)} | set(also)
    unknown = sorted(set(settings) - valid)
    if unknown:
        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, sorted(valid) + list(LORA_KEYS + MODEL_KEYS), n=1)
            hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigError(
            f"unknown training setting(s): {', '.join(hints)}; pass GRPOConfig/TrainingArguments fields, "
            f"LoRA settings ({', '.join(LORA_KEYS)}) or the weights' dtype ({', '.join(MODEL_KEYS)})"
        )


def grpo_settings(plan: Plan, *, output_dir: Path, seed: int, max_steps: int | None) -> dict[str, Any]:
    """RUN_DEFAULTS, then the plan's settings (user-fixed keys verbatim), then the run's own."""
    settings = {**RUN_DEFAULTS, **plan.settings}
    settings.update(output_dir=str(output_dir), seed=seed, max_steps=max_steps if max_steps is not None else -1)
    check_config_keys(settings)
    return settings


def measure_prompt_tokens(dataset: Dataset, tokenizer: Any) -> int:
    """The longest prompt of the dataset, in tokens: the planner's prompt length (TRL does not truncate)."""
    prompts = dataset["prompt"]
    texts = [
        p if isinstance(p, str) else tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False)
        for p in prompts
    ]
    special = all(isinstance(p, str) for p in prompts)  # plain prompts are tokenized by TRL with special tokens
    return max(len(ids) for ids in tokenizer(texts, add_special_tokens=special)["input_ids"])


def _device_map(plan: Plan) -> Any:
    if plan.device != "cuda" or not plan.model_kwargs.get("quantization"):
        return None
    from accelerate import PartialState

    return {"": PartialState().local_process_index}  # bitsandbytes weights must sit on this rank's GPU


def build_trainer(
    source: str,
    plan: Plan,
    settings: dict[str, Any],
    dataset: Dataset,
    tokenizer: Any,
    reward_funcs: Sequence[Callable[..., Any]],
    callbacks: Sequence[Any],
    *,
    shared_prefix: bool = True,
    stop_strings: Sequence[str] = (),
) -> Any:
    """Load the model from ``source`` as the plan says and wrap everything in a GRPOTrainer
    (:class:`~grpo_lite.training.grpo_trainer.LiteGRPOTrainer`: shared-prefix forward, stop strings)."""
    import torch
    from trl import GRPOConfig

    from grpo_lite.training.grpo_trainer import LiteGRPOTrainer

    from grpo_lite.training.loading import load_model

    try:
        with warnings.catch_warnings():  # TRL still declares gradient_checkpointing; transformers 5 renamed it
            warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning)
            args = GRPOConfig(**settings)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"TRL rejected the settings: {exc}") from exc
    torch.manual_seed(settings["seed"])
    policy = load_model(
        source,
        dtype=plan.model_kwargs.get("dtype", "float32"),
        quantization=plan.model_kwargs.get("quantization"),
        device_map=_device_map(plan),
    )
    peft_config = None
    if plan.lora is not None:
        from peft import LoraConfig

        peft_config = LoraConfig(**plan.lora)
    return LiteGRPOTrainer(
        shared_prefix=shared_prefix,
        stop_strings=stop_strings,
        update_rounding=plan.estimate.settings.update_rounding or "nearest",
        model=policy,
        reward_funcs=list(reward_funcs),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=list(callbacks),
    )


def save_final(trainer: Any, tokenizer: Any, out: Path) -> Path:
    """Save the final model (or adapter) to ``out/final`` via a temporary folder and a rename."""
    final, tmp = out / "final", out / ".final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    trainer.save_model(str(tmp))
    if trainer.accelerator.is_main_process:
        tokenizer.save_pretrained(str(tmp))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    return final


def carry_weights(trainer: Any, tokenizer: Any, path: Path) -> Path:
    """Save the weights reached so far as a plain model folder (LoRA merged in) to restart from."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    shutil.rmtree(path, ignore_errors=True)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path
