"""A plan's model, optimizer and update monitor on the meta device, built as training builds them.

The model by :func:`~grpo_lite.memory.meta.model.build_model`, TRL's fused LM head as ``GRPOTrainer.__init__`` adds
it, the optimizer by ``LiteGRPOTrainer.create_optimizer``, then the monitor. The ``GRPOConfig`` is training's
(:func:`~grpo_lite.training.build.grpo_settings`) with ``use_cpu=True`` and ``bf16=False`` (why: docs/internals.md).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from grpo_lite.errors import ModelError
from grpo_lite.memory.meta.model import build_model
from grpo_lite.memory.models import transformers_config
from grpo_lite.recipe.recipe import Recipe, make_grpo_config
from grpo_lite.training.build import grpo_settings

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan
    from grpo_lite.precision.monitor import UpdateMonitor


@dataclass
class Built:
    """What the simulation trains.

    Attributes:
        model: the policy as the trainer holds it (a ``PeftModel`` for LoRA / QLoRA).
        lm: the causal LM TRL gives its fused head (the PEFT base model for LoRA / QLoRA).
        optimizer: the optimizer ``create_optimizer`` returned (layer-wise: transformers' dummy).
        monitor: the update monitor, set up.
        args: the ``GRPOConfig``.
        quant_states: bitsandbytes' quantization constants (tensors outside parameters and buffers).
    """

    model: nn.Module
    lm: nn.Module
    optimizer: Any
    monitor: UpdateMonitor
    args: Any
    quant_states: list[torch.Tensor]


def _config(plan: Plan) -> Any:
    arch = plan.model.arch
    if arch.family in ("llama", "qwen2") or arch.config_json:  # known rows: no download
        return transformers_config(arch)
    from transformers import AutoConfig  # heavy: transformers

    try:
        return AutoConfig.from_pretrained(plan.model.model_id)
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"cannot read the config of {plan.model.model_id!r} to simulate it: {exc}; pass a local "
            "folder with config.json"
        ) from exc


def grpo_args(plan: Plan) -> Any:
    """The ``GRPOConfig`` training builds for ``plan`` (see the module notes on ``use_cpu`` and ``bf16``)."""
    with tempfile.TemporaryDirectory() as out:
        settings = grpo_settings(Recipe.from_plan(plan), output_dir=Path(out), seed=0, max_steps=2)
        settings.update(bf16=False, fp16=False, use_cpu=True, report_to="none", save_strategy="no")
        return make_grpo_config(settings)


def _optimizer(plan: Plan, model: nn.Module, args: Any) -> Any:
    """``LiteGRPOTrainer.create_optimizer`` on a trainer shell holding only what it reads."""
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer  # heavy: TRL

    try:  # bitsandbytes' override registry is process-wide: start from a fresh process's (empty) one
        from bitsandbytes.optim import GlobalOptimManager

        GlobalOptimManager.get_instance().initialize()
    except ImportError:  # pragma: no cover - bitsandbytes is a dependency
        pass
    shell = object.__new__(LiteGRPOTrainer)
    shell.model, shell.args, shell.optimizer, shell.optimizer_cls_and_kwargs = model, args, None, None
    shell.update_rounding = plan.estimate.settings.update_rounding  # filled by StepSettings.resolve
    return LiteGRPOTrainer.create_optimizer(shell)


def build(plan: Plan) -> Built:
    """The plan's model, optimizer and monitor on meta (under :func:`~grpo_lite.memory.meta.cuda.cuda_semantics`)."""
    from trl.trainer.utils import add_fused_lm_head  # heavy: TRL, transformers, peft

    from grpo_lite.precision.monitor import UpdateMonitor

    args = grpo_args(plan)
    checkpointing = args.gradient_checkpointing_kwargs or {} if args.gradient_checkpointing else None
    lm, model, constants = build_model(
        _config(plan),
        plan.model_kwargs.get("dtype", "bfloat16"),
        lora=plan.lora,
        quantization=plan.model_kwargs.get("quantization"),
        checkpointing=checkpointing,
    )
    add_fused_lm_head(
        lm,
        temperature=args.temperature,
        cast_lm_head_to_fp32=args.cast_lm_head_to_fp32,
        outputs=("log_probs", "entropy"),
    )  # as GRPOTrainer.__init__ adds it
    optimizer = _optimizer(plan, model, args)
    monitor = UpdateMonitor(seed=args.seed)
    monitor.setup(model, optimizer)
    return Built(model=model, lm=lm, optimizer=optimizer, monitor=monitor, args=args, quant_states=constants)
