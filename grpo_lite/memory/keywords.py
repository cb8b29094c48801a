"""How a plan's model loads and adapts, as the keyword arguments transformers and PEFT take: one builder of each,
for the plan, the meta model of the tracer and the simulation, training and the recipe.

>>> s = StepSettings.resolve(method="qlora", lora_r=8)
>>> model_kwargs(s)["quantization"]["bnb_4bit_quant_type"], lora_kwargs(s, ("q_proj", "v_proj"))
('nf4', {'r': 8, 'lora_alpha': 16, 'lora_dropout': 0.0, 'target_modules': ['q_proj', 'v_proj'], 'task_type': 'CAUSAL_LM'})
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from grpo_lite.defaults import LORA
from grpo_lite.errors import ConfigError
from grpo_lite.memory.step_settings import StepSettings
from grpo_lite.settings import Dtype


def model_kwargs(step: StepSettings) -> dict[str, Any]:
    """How the model loads for these settings: its dtype and the ``BitsAndBytesConfig`` keywords (NF4)."""
    dtype = step.dtype  # StepSettings.resolve decides it (memory.step_settings.load_dtype)
    kwargs: dict[str, Any] = {"dtype": dtype}
    if step.quantization == "nf4":
        kwargs["quantization"] = {
            "load_in_4bit": True,
            "bnb_4bit_quant_type": "nf4",
            "bnb_4bit_compute_dtype": dtype,
            "bnb_4bit_use_double_quant": step.double_quant,
        }
    return kwargs


def lora_kwargs(step: StepSettings, linear_names: Sequence[str], *, alpha: int | None = None) -> dict[str, Any] | None:
    """The ``peft.LoraConfig`` keywords these settings train with, or None when every weight trains.

    Args:
        linear_names: the decoder's linear layers, the targets when the settings name none.
        alpha: the LoRA scale the user set; None: ``defaults.LORA.alpha(r)``.
    """
    if not step.is_peft:
        return None
    targets = step.lora_target_modules or tuple(linear_names)
    return {
        "r": step.lora_r,
        "lora_alpha": LORA.alpha(step.lora_r) if alpha is None else alpha,
        "lora_dropout": step.lora_dropout,
        "target_modules": list(targets) if targets else LORA.target_modules,
        "task_type": "CAUSAL_LM",
    }


def lora_config(lora: dict[str, Any] | None) -> Any:
    """PEFT's ``LoraConfig`` from its keywords, or None when every weight trains."""
    if lora is None:
        return None
    from peft import LoraConfig  # heavy dependency (imports torch): loaded when a config is built

    return LoraConfig(**lora)


def from_pretrained_kwargs(
    dtype: str | None, quantization: dict[str, Any] | None = None, *, device_map: Any = None
) -> dict[str, Any]:
    """``from_pretrained`` keyword arguments for a load dtype name and ``BitsAndBytesConfig`` arguments.

    Raises:
        ConfigError: an unknown dtype.
    """
    if dtype is None or dtype not in get_args(Dtype):
        raise ConfigError(f"unknown dtype {dtype!r}: use one of {', '.join(get_args(Dtype))}")
    import torch  # heavy dependency: loaded when a model is about to load

    kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype)}
    if quantization:
        from transformers import BitsAndBytesConfig  # heavy dependency, as torch

        kwargs["quantization_config"] = BitsAndBytesConfig(**quantization)  # it reads a compute dtype's name too
    if device_map is not None:
        kwargs["device_map"] = device_map
    return kwargs
