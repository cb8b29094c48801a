"""The Plan: what the planner chose (rung, settings, model and LoRA kwargs), its estimate, and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from grpo_lite.defaults import STEP
from grpo_lite.memory.estimate import MemoryEstimate
from grpo_lite.memory.models import ModelSpec
from grpo_lite.planning.ladder import Preset
from grpo_lite.settings import Sharding


@dataclass
class Plan:
    """The chosen setup, ready for GRPOConfig, from_pretrained and peft.LoraConfig.

    Attributes:
        budget_gib: usable GiB per device the plan was checked against (None: CPU plan without a budget).
        headroom_gib: usable memory left above the estimated peak.
        fits: whether the peak plus the required headroom fits.
        settings: GRPOConfig keyword arguments, user-fixed keys verbatim.
        model_kwargs: from_pretrained keyword arguments (plain, JSON-able values).
        lora: peft.LoraConfig keyword arguments, or None.
        reasons: why this rung, what did not fit and by how much, notes.
        fixed: what the user fixed, verbatim.
        max_prompt_length: prompt tokens the estimate assumes (truncate prompts to this).
        budget_gb: nominal card size in GB, when known.
        memory_check: a CPU plan without a budget: what its peak was checked against (None: nothing read).
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
    max_prompt_length: int = STEP.max_prompt_length
    num_processes: int = STEP.num_processes
    sharding: Sharding = "none"
    budget_gb: float | None = None
    required_headroom_gib: float = field(default=0.0)
    memory_check: str | None = None

    @property
    def precision(self) -> dict[str, str]:
        """How the trained weights are held and updated: ``{"weights": dtype, "update": how}``."""
        s = self.estimate.settings
        trained = s.trained_dtype
        if trained == "float32":
            update = "fp32"
        elif s.sharding in ("zero2", "zero3") and not s.is_peft:
            update = "fp32 master weights"
        else:
            update = "stochastic rounding" if s.rounds_stochastically else "round to nearest"
        return {"weights": trained, "update": update}

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
            "block_terms": self.estimate.block_terms,
            "settings": dict(self.settings),
            "precision": self.precision,
            "model_kwargs": dict(self.model_kwargs),
            "lora": None if self.lora is None else dict(self.lora),
            "max_prompt_length": self.max_prompt_length,
            "num_processes": self.num_processes,
            "sharding": self.sharding,
            "reasons": list(self.reasons),
            "fixed": {
                k: v if isinstance(v, (str, int, float, bool, type(None), list, dict)) else repr(v)
                for k, v in self.fixed.items()
            },
        }
