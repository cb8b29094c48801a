"""A plan's model, optimizer and update monitor on the meta device, built as training builds them.

- The model comes from its config (``from_config`` under ``torch.device("meta")``: no weights, no
  download for the known architectures) in the plan's load dtype.
- QLoRA: the decoder linears become bitsandbytes ``Linear4bit`` (transformers' ``replace_with_bnb_linear``,
  the LM head left alone as ``from_pretrained`` leaves it) and each weight is quantized to NF4 on meta by
  bitsandbytes itself (its registered fake kernels give the packed weight and the quantization constants).
- LoRA / QLoRA: PEFT's ``get_peft_model`` with the plan's ``LoraConfig``; QLoRA adapters cast to bf16 as
  TRL does for a quantized base.
- TRL's fused LM head: ``add_fused_lm_head`` on the causal LM, as ``GRPOTrainer.__init__`` adds it.
- Gradient checkpointing: ``activation_checkpointing_enable`` with the ``GRPOConfig``'s keywords, as the
  Trainer calls it.
- The optimizer: :class:`~grpo_lite.training.step.grpo_trainer.LiteGRPOTrainer`'s own ``create_optimizer``
  (transformers' parameter groups, optimizer class and keywords, bitsandbytes' 32-bit override for
  embeddings, layer-wise GaLore hooks; stochastic rounding when the plan asks), then the update monitor.

``GRPOConfig`` is built from :func:`grpo_lite.training.build.grpo_settings` with ``use_cpu=True`` and
``bf16=False``: transformers refuses ``bf16`` on a machine without a GPU, and that flag only decides
autocast, which the simulation emulates (:mod:`~grpo_lite.simulation.autocast`).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from grpo_lite.errors import ModelError

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan
    from grpo_lite.precision.monitor import UpdateMonitor

__all__ = ["Built", "build", "build_model"]


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
    from grpo_lite.memory.models import transformers_config

    arch = plan.model.arch
    if arch.family in ("llama", "qwen2") or arch.config_json:  # known rows: no download
        return transformers_config(arch)
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(plan.model.model_id)
    except (OSError, ValueError) as exc:
        raise ModelError(
            f"cannot read the config of {plan.model.model_id!r} to simulate it: {exc}; pass a local "
            "folder with config.json"
        ) from exc


def grpo_args(plan: Plan) -> Any:
    """The ``GRPOConfig`` training builds for ``plan`` (see the module notes on ``use_cpu`` and ``bf16``)."""
    from grpo_lite.recipe.recipe import Recipe, make_grpo_config
    from grpo_lite.training.build import grpo_settings

    with tempfile.TemporaryDirectory() as out:
        settings = grpo_settings(Recipe.from_plan(plan), output_dir=Path(out), seed=0, max_steps=2)
        settings.update(bf16=False, fp16=False, use_cpu=True, report_to="none", save_strategy="no")
        return make_grpo_config(settings)


def _quantize_nf4(model: nn.Module, quantization: dict[str, Any]) -> list[torch.Tensor]:
    """Replace the decoder linears by ``Linear4bit`` and quantize each weight on meta; return the constants."""
    import bitsandbytes as bnb
    from transformers.integrations.bitsandbytes import replace_with_bnb_linear

    from grpo_lite.recipe.recipe import from_pretrained_kwargs

    config = from_pretrained_kwargs("bfloat16", quantization)["quantization_config"]  # the trainer's own config
    # bitsandbytes caches its blockwise code map on the device of the first tensor it quantizes: make that
    # the CPU, or a later real quantization in this process would copy out of a meta tensor
    qmaps = bnb.functional.name2qmap
    if "dynamic" not in qmaps or qmaps["dynamic"].device.type == "meta":
        qmaps["dynamic"] = bnb.functional.create_dynamic_map()
    replace_with_bnb_linear(model, modules_to_not_convert=["lm_head"], quantization_config=config)
    constants: list[torch.Tensor] = []
    for module in model.modules():
        if isinstance(module, bnb.nn.Linear4bit):
            shape = module.weight.shape
            weight = bnb.nn.Params4bit(
                torch.empty(shape, device="meta", dtype=config.bnb_4bit_compute_dtype),
                requires_grad=False,
                quant_type=config.bnb_4bit_quant_type,
                compress_statistics=config.bnb_4bit_use_double_quant,
                blocksize=64,
                quant_storage=torch.uint8,
                module=module,
            )
            module.weight = weight._quantize("meta")
            state = module.weight.quant_state
            constants += [state.absmax, state.code]
            if state.state2 is not None:
                constants += [state.state2.absmax, state.state2.code]
    model.is_loaded_in_4bit = True
    model.config.quantization_config = config
    return constants


def _with_lora(lora: dict[str, Any], quantized: bool, model: nn.Module) -> nn.Module:
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(model, LoraConfig(**lora))
    if quantized:  # TRL casts the adapters of a quantized base to bf16
        for param in peft_model.parameters():
            if param.requires_grad:
                param.data = param.data.to(torch.bfloat16)
    return peft_model


def _checkpointing(model: nn.Module, checkpointing_kwargs: dict[str, Any] | None) -> None:
    """What the Trainer does when ``gradient_checkpointing`` (``activation_checkpointing``) is set."""
    kwargs = dict(checkpointing_kwargs or {})
    every = kwargs.pop("every_n_layers", 1)
    offload = kwargs.pop("offload", False)
    model.activation_checkpointing_enable(
        activation_checkpointing_kwargs=kwargs or None, every_n_layers=every, offload=offload
    )
    if hasattr(model, "peft_config"):
        model.enable_input_require_grads()  # TRL: PEFT with checkpointing


def _optimizer(plan: Plan, model: nn.Module, args: Any) -> Any:
    """``LiteGRPOTrainer.create_optimizer`` on a trainer shell holding only what it reads."""
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    try:  # bitsandbytes' override registry is process-wide: start from a fresh process's (empty) one
        from bitsandbytes.optim import GlobalOptimManager

        GlobalOptimManager.get_instance().initialize()
    except ImportError:  # pragma: no cover - bitsandbytes is a dependency
        pass
    shell = object.__new__(LiteGRPOTrainer)
    shell.model, shell.args, shell.optimizer, shell.optimizer_cls_and_kwargs = model, args, None, None
    shell.update_rounding = plan.estimate.settings.update_rounding  # filled by StepSettings.resolve
    return LiteGRPOTrainer.create_optimizer(shell)


def build_model(
    config: Any,
    dtype: str,
    *,
    lora: dict[str, Any] | None,
    quantization: dict[str, Any] | None,
    checkpointing: dict[str, Any] | None,
) -> tuple[nn.Module, nn.Module, list[torch.Tensor]]:
    """A model from ``config`` on meta as training loads it: the load dtype, NF4 linears, LoRA, checkpointing.

    Args:
        dtype: the load dtype's name (``"bfloat16"``...).
        lora: ``LoraConfig`` keywords, or None (no adapters).
        quantization: ``BitsAndBytesConfig`` keywords, or None.
        checkpointing: the checkpointing keywords (``{}`` for the defaults), or None (no checkpointing).

    Returns:
        ``(lm, model, quantization constants)``: the causal LM, the model trained (a PeftModel with LoRA).
    """
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        lm = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    lm.config.use_cache = False
    constants = _quantize_nf4(lm, quantization) if quantization else []
    model = _with_lora(lora, bool(quantization), lm) if lora is not None else lm
    if checkpointing is not None:
        _checkpointing(model, checkpointing)
    model.train()
    return lm, model, constants


def build(plan: Plan) -> Built:
    """The plan's model, optimizer and monitor on meta (under :func:`~grpo_lite.simulation.cuda.cuda_semantics`)."""
    from trl.trainer.utils import add_fused_lm_head

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
