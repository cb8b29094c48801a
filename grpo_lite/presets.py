"""The preset ladder and plan(): pick the best GRPO setup that fits a memory budget, and say why.

The ladder runs from best quality and speed to most frugal. plan() walks it, estimates candidates
within each rung (trading micro-batch, then completion length, then generations, above the floors),
and returns the first that fits with headroom. What the user fixed is kept verbatim. No torch /
trl import on this path: ``grpo-lite plan`` stays fast.

>>> [p.name for p in LADDER]
['full', 'full-8bit', 'full-8bit-ckpt', 'galore', 'lora', 'qlora']
>>> p = plan("Llama-3.2-1B-Instruct", budget_gb=16)
>>> p.preset.name, p.fits, p.settings["optim"]
('full', True, 'adamw_torch_fused')
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from grpo_lite import hardware
from grpo_lite.errors import ConfigError
from grpo_lite.memory import MemoryEstimate
from grpo_lite.models import ModelSpec, resolve_model
from grpo_lite.optimizers import GaloreArgs
from grpo_lite.step_settings import Method, Quantization, Sharding

__all__ = ["Method", "Preset", "LADDER", "get_preset", "Plan", "plan"]

METHODS: tuple[str, ...] = get_args(Method)


@dataclass(frozen=True)
class Preset:
    """One rung of the ladder.

    Attributes:
        name: stable id used on the CLI.
        method: full, galore, lora or qlora.
        summary: the one-line trade-off.
        optim: optimizer on CUDA; cpu_optim: on CPU; multi_optim: with several processes (or None).
        gradient_checkpointing: recompute blocks in backward.
        quantization: how the frozen base is loaded (qlora: nf4).
        learning_rate: default learning rate (TRL docs: 1e-6 full, 1e-5 LoRA).
        lora_r: LoRA rank (PEFT rungs).
        requires: installed packages the rung needs (fields of hardware.Extras).
        galore_args: GaLore ``optim_args`` (galore rung).
    """

    name: str
    method: Method
    summary: str
    optim: str
    cpu_optim: str
    gradient_checkpointing: bool
    quantization: Quantization = "none"
    learning_rate: float = 1e-6
    lora_r: int = 16
    requires: tuple[str, ...] = ()
    multi_optim: str | None = None
    galore_args: str | None = None


LADDER: tuple[Preset, ...] = (
    Preset("full", "full", "bf16 weights, AdamW states in bf16, no recompute: best quality and speed "
           "(8 bytes/param + activations)", "adamw_torch_fused", "adamw_torch", False),
    Preset("full-8bit", "full", "8-bit AdamW states: half the bf16 optimizer memory (-75% vs fp32), same quality "
           "in practice", "adamw_8bit", "adamw_8bit", False, requires=("bitsandbytes",)),
    Preset("full-8bit-ckpt", "full", "+ gradient checkpointing: keeps one tensor per block and recomputes the rest "
           "in backward (~20-30% slower)", "adamw_8bit", "adamw_8bit", True, requires=("bitsandbytes",)),
    Preset("galore", "galore", "full-parameter, GaLore rank-128 8-bit states updated block by block inside "
           "backward: no gradient buffer (the GaLore paper's 7B-in-24GB setting)", "galore_adamw_8bit_layerwise",
           "galore_adamw_layerwise", True, requires=("galore_torch",), multi_optim="galore_adamw_8bit",
           galore_args=GaloreArgs().to_optim_args()),
    Preset("lora", "lora", "frozen bf16 base + rank-16 LoRA on every linear: tiny optimizer state, "
           "adapter-only updates", "adamw_torch_fused", "adamw_torch", True, learning_rate=1e-5),
    Preset("qlora", "qlora", "4-bit NF4 base (double quant) + rank-16 LoRA, paged 8-bit AdamW: ~0.52 bytes "
           "per linear weight", "paged_adamw_8bit", "paged_adamw_8bit", True, quantization="nf4",
           learning_rate=1e-5, requires=("bitsandbytes",)),
)


def get_preset(name: str) -> Preset:
    """Look a rung up by name.

    Raises:
        ConfigError: unknown name; the message lists the rungs.

    >>> get_preset("qlora").method
    'qlora'
    >>> get_preset("tiny")
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: unknown preset 'tiny'; choose one of: full, full-8bit, ..., lora, qlora
    """
    for preset in LADDER:
        if preset.name == name:
            return preset
    raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join(p.name for p in LADDER)}")


@dataclass
class Plan:
    """The chosen setup, ready for GRPOConfig, from_pretrained and peft.LoraConfig.

    Attributes:
        model: the resolved model.
        preset: the chosen rung.
        device: "cuda" or "cpu".
        budget_gib: usable GiB the plan was checked against (None: CPU plan without a budget).
        headroom_gib: usable memory left above the estimated peak.
        fits: whether the peak plus the required headroom fits.
        estimate: the memory estimate of the chosen settings.
        settings: GRPOConfig keyword arguments, user-fixed keys verbatim.
        model_kwargs: from_pretrained keyword arguments (plain, JSON-able values).
        lora: peft.LoraConfig keyword arguments, or None.
        reasons: why this rung, what did not fit and by how much, notes.
        fixed: what the user fixed, verbatim.
        max_prompt_length: prompt tokens the estimate assumes (truncate prompts to this).
        num_processes: processes (GPUs); budget_gib is per device.
        sharding: how state is split across processes.
        budget_gb: nominal card size in GB, when known.
    """

    model: ModelSpec
    preset: Preset
    device: Literal["cuda", "cpu"]
    budget_gib: float | None
    headroom_gib: float
    fits: bool
    estimate: MemoryEstimate
    settings: dict[str, Any]
    model_kwargs: dict[str, Any]
    lora: dict[str, Any] | None
    reasons: list[str]
    fixed: dict[str, Any]
    max_prompt_length: int = 256
    num_processes: int = 1
    sharding: Sharding = "none"
    budget_gb: float | None = None
    required_headroom_gib: float = field(default=0.0)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able summary: preset, fits, estimate_gib, budget_gib, components, settings, ..."""
        return {
            "model": self.model.model_id,
            "model_name": self.model.name,
            "preset": self.preset.name,
            "method": self.preset.method,
            "device": self.device,
            "fits": self.fits,
            "estimate_gib": round(self.estimate.total_gib, 3),
            "budget_gib": None if self.budget_gib is None else round(self.budget_gib, 3),
            "budget_gb": self.budget_gb,
            "headroom_gib": None if self.budget_gib is None else round(self.headroom_gib, 3),
            "required_headroom_gib": round(self.required_headroom_gib, 3),
            "peak_phase": self.estimate.peak_phase,
            "components": {k: round(v, 3) for k, v in self.estimate.component_gib().items()},
            "phases": {k: round(v, 3) for k, v in self.estimate.phase_gib().items()},
            "settings": dict(self.settings),
            "model_kwargs": dict(self.model_kwargs),
            "lora": None if self.lora is None else dict(self.lora),
            "max_prompt_length": self.max_prompt_length,
            "num_processes": self.num_processes,
            "sharding": self.sharding,
            "reasons": list(self.reasons),
            "fixed": {k: v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else repr(v)
                      for k, v in self.fixed.items()},
        }


def plan(model: str | os.PathLike[str] | ModelSpec, budget_gb: float | None = None, *, method: Method | None = None,
         preset: str | None = None, device: Literal["cuda", "cpu"] | None = None, num_processes: int = 1,
         sharding: Sharding | None = None, max_prompt_length: int = 256, **fixed: Any) -> Plan:
    """Choose the best rung and settings that fit ``budget_gb``.

    Args:
        model: name, path or ModelSpec.
        budget_gb: the card's nominal size in GB, per device (16 for a "16 GB" card, 15.73 GiB
            usable). None: detect the current CUDA device; no CUDA gives a CPU plan.
        method: restrict the ladder to one method.
        preset: use exactly this rung (only its settings are traded).
        device: "cuda" or "cpu"; Default: cuda when a budget is given, else what is detected.
        num_processes: processes (one GPU each).
        sharding: none, ddp, zero2, zero3 or fsdp; Default: chosen only when one device cannot
            hold the model otherwise.
        max_prompt_length: prompt tokens to plan for (truncate prompts to this).
        **fixed: GRPOConfig fields (kept verbatim in ``settings``) and lora_r, lora_alpha,
            lora_dropout, lora_target_modules (go to ``lora``).

    Raises:
        ConfigError: invalid budget, method, preset, sharding or fixed values that break TRL's rules.
        DoesNotFitError: nothing fits; names the smallest budget that would and its preset.
        ModelError: the model cannot be resolved.
    """
    from grpo_lite.plan_search import search

    spec = model if isinstance(model, ModelSpec) else resolve_model(model)
    if method is not None and method not in METHODS:
        raise ConfigError(f"method={method!r} is not valid; choose one of {', '.join(METHODS)}")
    if device is not None and device not in ("cuda", "cpu"):
        raise ConfigError(f"device={device!r} is not valid; choose cuda or cpu")
    if sharding is not None and sharding not in get_args(Sharding):
        raise ConfigError(f"sharding={sharding!r} is not valid; choose one of {', '.join(get_args(Sharding))}")
    if isinstance(num_processes, bool) or not isinstance(num_processes, int) or num_processes < 1:
        raise ConfigError(f"num_processes={num_processes!r} must be a positive integer")
    if isinstance(max_prompt_length, bool) or not isinstance(max_prompt_length, int) or max_prompt_length < 1:
        raise ConfigError(f"max_prompt_length={max_prompt_length!r} must be a positive integer")
    if fixed.get("use_cpu") is True:
        if device == "cuda":
            raise ConfigError("use_cpu=True contradicts device='cuda'; drop one of them")
        device = "cpu"
    reasons: list[str] = []
    nominal: float | None = None
    usable: float | None = None
    if budget_gb is not None:
        nominal = hardware.validate_budget_gb(budget_gb)
        usable = hardware.nominal_to_usable_gib(nominal)
        device = device or "cuda"
        reasons.append(f"budget: a {nominal:g} GB card has about {usable:.2f} GiB usable (per device)")
    elif device != "cpu":
        gib, why = hardware.detect_vram()
        reasons.append(why)
        if gib is None:
            if device == "cuda":
                raise ConfigError(f"device='cuda' but {why}; pass budget_gb to plan for a GPU that is not here")
            device = "cpu"
            reasons.append("no CUDA device: CPU plan, memory estimate shown for reference")
        else:
            usable, device = gib, "cuda"
            nominal = round(hardware.usable_to_nominal_gb(gib), 1)
    else:
        reasons.append("no CUDA device in use (device='cpu'): CPU plan, memory estimate shown for reference")
    return search(spec, device=device or "cpu", usable_gib=usable, nominal_gb=nominal, method=method,
                  preset_name=preset, num_processes=num_processes, sharding=sharding,
                  max_prompt_length=max_prompt_length, fixed=dict(fixed), reasons=reasons)
