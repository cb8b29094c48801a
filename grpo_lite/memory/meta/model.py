"""A model on the meta device from its config, loaded and adapted as training does (the load dtype, NF4, LoRA,
gradient checkpointing, with :mod:`grpo_lite.memory.keywords`): no weights, no download. Imports torch at the top.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from grpo_lite.memory.keywords import from_pretrained_kwargs, lora_config
from grpo_lite.memory.meta.private import quantize


def _quantize_nf4(model: nn.Module, quantization: dict[str, Any]) -> list[torch.Tensor]:
    """Replace the decoder linears by ``Linear4bit`` and quantize each weight on meta; return the constants."""
    import bitsandbytes as bnb  # heavy dependencies, as torch: loaded for a quantized model only
    from transformers.integrations.bitsandbytes import replace_with_bnb_linear

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
            module.weight = quantize(weight, "meta")
            state = module.weight.quant_state
            constants += [state.absmax, state.code]
            if state.state2 is not None:
                constants += [state.state2.absmax, state.state2.code]
    model.is_loaded_in_4bit = True
    model.config.quantization_config = config
    return constants


def _with_lora(lora: dict[str, Any], quantized: bool, model: nn.Module) -> nn.Module:
    from peft import get_peft_model  # heavy dependency: loaded for adapters only

    peft_model = get_peft_model(model, lora_config(lora))
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


def build_model(
    config: Any,
    dtype: str,
    *,
    lora: dict[str, Any] | None,
    quantization: dict[str, Any] | None,
    checkpointing: dict[str, Any] | None,
) -> tuple[nn.Module, nn.Module, list[torch.Tensor]]:
    """A model from ``config`` on meta as training loads it.

    Args:
        dtype: the load dtype's name (``"bfloat16"``...).
        lora, quantization: ``LoraConfig`` / ``BitsAndBytesConfig`` keywords, or None.
        checkpointing: the checkpointing keywords (``{}`` for the defaults), or None (no checkpointing).

    Returns:
        ``(lm, model, quantization constants)``: the causal LM, the model trained (a PeftModel with LoRA).
    """
    from transformers import AutoModelForCausalLM  # heavy dependency: loaded when a model is built

    with torch.device("meta"):
        lm = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    lm.config.use_cache = False
    constants = _quantize_nf4(lm, quantization) if quantization else []
    model = _with_lora(lora, bool(quantization), lm) if lora is not None else lm
    if checkpointing is not None:
        _checkpointing(model, checkpointing)
    model.train()
    return lm, model, constants
