"""What each setting of a recipe costs in memory and what it trades: the plan estimated with and without it
(one alternative each, in ``estimate()``'s own names; docs/internals.md).

>>> from grpo_lite.planning.choose import plan
>>> notes = setting_notes(plan("Llama-3.2-1B-Instruct", budget_gb=16))
>>> notes["trl.optim"].text().split(";")[0]
'optimizer_state 3.80 GiB'
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, get_args

from grpo_lite.defaults import PLANNER
from grpo_lite.errors import ConfigError
from grpo_lite.memory.estimate import GIB, MemoryEstimate, StepSettings, estimate
from grpo_lite.memory.optimizers import get_optimizer
from grpo_lite.planning.candidates import batch_shapes
from grpo_lite.settings import UpdateRounding

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan


def show_value(value: Any) -> str:
    """A value as YAML writes it in one line (``true``, ``null``, ``adamw_8bit``, ``[q_proj, v_proj]``)."""
    import yaml  # loaded on use: yaml

    return yaml.safe_dump([value], default_flow_style=True, width=10**6).strip()[1:-1]


@dataclass(frozen=True)
class SettingNote:
    """The comment beside one setting of a recipe."""

    key: str  # where the setting sits in the recipe ("dtype", "lora.r", "trl.optim")
    tradeoff: str  # what the setting trades, in one line
    component: str | None = None  # a component of the plan's peak the setting sizes ("weights")...
    size_gib: float | None = None  # ...and its size at the peak
    alternative: dict[str, Any] | None = None  # the estimate() settings changed for the comparison
    delta_gib: float | None = None  # the alternative's peak minus the plan's (> 0: the setting saves memory)
    changed: str | None = None  # the component whose size changes most between the two

    def text(self) -> str:
        """``[component X GiB; ]saves|costs Y GiB at the peak (component) vs k=v, ...; trade-off``."""
        parts = []
        if self.component is not None and self.size_gib is not None:
            parts.append(f"{self.component} {self.size_gib:.2f} GiB")
        if self.alternative is not None and self.delta_gib is not None:
            alt = ", ".join(f"{k}={show_value(v)}" for k, v in self.alternative.items())
            if round(abs(self.delta_gib), 2) == 0:
                parts.append(f"same peak vs {alt}")
            else:
                verb = "saves" if self.delta_gib > 0 else "costs"
                parts.append(f"{verb} {abs(self.delta_gib):.2f} GiB at the peak ({self.changed}) vs {alt}")
        parts.append(self.tradeoff)
        return "; ".join(parts)


@dataclass(frozen=True)
class Knob:
    """One commented setting: where it sits, its alternative, the component it sizes, its trade-off."""

    key: str
    tradeoff: str
    alternative: Callable[[StepSettings], dict[str, Any] | None] = lambda s: None
    component: str | None = None
    applies: Callable[[StepSettings], bool] = lambda s: True


def _smaller_micro_batch(s: StepSettings) -> dict[str, Any] | None:
    """Half the micro-batch, twice the accumulation: the same sequences per optimizer step."""
    if s.per_device_train_batch_size % 2 or s.steps_per_generation is not None or s.generation_batch_size is not None:
        return None
    return {
        "per_device_train_batch_size": s.per_device_train_batch_size // 2,
        "gradient_accumulation_steps": s.gradient_accumulation_steps * 2,
    }


def _fewer_generations(s: StepSettings) -> dict[str, Any] | None:
    """The planner's next group size down, with the first batch shape it would try for it."""
    lower = [g for g in PLANNER.generations if g < s.num_generations]
    if not lower:
        return None
    shapes = batch_shapes(
        lower[0],
        num_processes=s.num_processes,
        fixed={},
        layerwise=s.optimizer.layerwise,
        shared_prefix=s.shared_prefix,
    )
    shape = next((x for x in shapes if x["per_device_train_batch_size"] <= s.per_device_train_batch_size), None)
    return None if shape is None else {"num_generations": lower[0], **shape}


def _shorter_completions(s: StepSettings) -> dict[str, Any] | None:
    """The planner's next completion length down; half the length below its list."""
    lower = [n for n in PLANNER.completion_lengths if n < s.max_completion_length]
    if lower:
        return {"max_completion_length": lower[0]}
    return {"max_completion_length": s.max_completion_length // 2} if s.max_completion_length >= 32 else None


_OTHER_STATES = {
    "adamw_8bit": "adamw_torch",
    "adamw_bnb_8bit": "adamw_torch",
    "paged_adamw_8bit": "paged_adamw_32bit",
    "paged_adamw_32bit": "paged_adamw_8bit",
    "adamw_torch": "adamw_8bit",
    "adamw_torch_fused": "adamw_8bit",
}


def _other_optimizer(s: StepSettings) -> dict[str, Any] | None:
    """8-bit states against 32-bit ones (or the weights' dtype), the same optimizer otherwise."""
    other = _OTHER_STATES.get(s.optim)
    return None if other is None else {"optim": other}


# The commented settings, in the order they appear in a recipe.
KNOBS: tuple[Knob, ...] = (
    Knob(
        "dtype",
        "bfloat16 is half of float32; bf16 weights need update_rounding: stochastic for small updates to land",
        lambda s: {"dtype": "float32" if s.dtype != "float32" else "bfloat16"},
        component="weights",
    ),
    Knob(
        "quantization",
        "NF4 base with double quantization (~0.52 bytes per linear weight), dequantized in each forward: slower",
        lambda s: {"method": "lora", "quantization": "none"},
        component="weights",
        applies=lambda s: s.quantization == "nf4",
    ),
    Knob(
        "lora.r",
        "adapter rank: more capacity per update, more adapter state",
        lambda s: {"lora_r": 2 * s.lora_r},
        component="optimizer_state",
        applies=lambda s: s.is_peft,
    ),
    Knob(
        "update_rounding",
        "stochastic: each step runs on an fp32 copy and rounds back at random, so updates below "
        "half a bf16 spacing land; nearest drops them",
        lambda s: {"update_rounding": next(r for r in get_args(UpdateRounding) if r != s.update_rounding)},
        applies=lambda s: s.trains_bf16,
    ),
    Knob(
        "shared_prefix",
        "each prompt forwarded once for its group's completions (same log-probs, checked on the first step)",
        lambda s: {"shared_prefix": not s.shared_prefix},
    ),
    Knob(
        "trl.per_device_train_batch_size",
        "sequences per forward and backward; a smaller micro-batch takes more "
        "micro-steps (slower) for the same generation batch",
        _smaller_micro_batch,
    ),
    Knob(
        "trl.gradient_accumulation_steps",
        "micro-batches per optimizer step: per_device_train_batch_size x this = sequences sampled per step and device",
    ),
    Knob(
        "trl.num_generations",
        "completions sampled per prompt: fewer give a noisier group baseline (the planner's floor is 4)",
        _fewer_generations,
    ),
    Knob(
        "trl.max_completion_length",
        "longer answers are cut and miss the format reward (the planner's floor is 256)",
        _shorter_completions,
    ),
    Knob(
        "trl.gradient_checkpointing",
        "true keeps one tensor per block and recomputes the rest in backward: ~20-30% slower",
        lambda s: {"gradient_checkpointing": not s.gradient_checkpointing},
    ),
    Knob("trl.optim", "", _other_optimizer, component="optimizer_state"),  # trade-off: the optimizer's own summary
    Knob(
        "trl.beta",
        "KL penalty to a frozen reference: a reference copy (LoRA: the base with adapters off) and a scoring pass",
        lambda s: {"beta": 0.04 if s.beta == 0 else 0.0},
    ),
    Knob(
        "trl.use_liger_kernel",
        "Liger's fused RMSNorm/SwiGLU/RoPE kernels (CUDA; pip install liger-kernel)",
        lambda s: {"use_liger_kernel": not s.use_liger_kernel},
        applies=lambda s: s.device == "cuda",
    ),
    Knob(
        "trl.use_vllm",
        "vLLM samples faster; colocated, it takes vllm_gpu_memory_utilization of the card",
        applies=lambda s: s.device == "cuda",
    ),
    Knob(
        "trl.bf16",
        "bf16 autocast: 2-byte activations (fast on recent GPUs, slow on most CPUs)",
        lambda s: {"bf16": not s.bf16, **({"fp16": False} if s.fp16 and not s.bf16 else {})},
    ),
)


def estimate_settings(step: StepSettings) -> dict[str, Any]:
    """The ``estimate()`` keyword arguments that reproduce a resolved step (every field)."""
    return {f.name: getattr(step, f.name) for f in fields(StepSettings)}


def _changed_most(a: MemoryEstimate, b: MemoryEstimate) -> str:
    ca, cb = a.component_gib(), b.component_gib()
    return max(sorted(set(ca) | set(cb)), key=lambda k: abs(cb.get(k, 0.0) - ca.get(k, 0.0)))


def setting_notes(plan: Plan) -> dict[str, SettingNote]:
    """The note of every commented setting of ``plan``'s recipe, keyed like :attr:`SettingNote.key`."""
    est = plan.estimate
    step = est.settings
    base = estimate_settings(step)
    components = est.component_gib()
    notes: dict[str, SettingNote] = {}
    for knob in KNOBS:
        if not knob.applies(step):
            continue
        tradeoff = knob.tradeoff or get_optimizer(step.optim).summary
        change = knob.alternative(step)
        note = SettingNote(knob.key, tradeoff)
        if knob.component in components:
            note = replace(note, component=knob.component, size_gib=components[knob.component])
        try:
            alt = estimate(est.arch, blocks=est.blocks, **{**base, **change}) if change is not None else None
        except ConfigError:  # the alternative breaks a rule (batch divisibility, a GPU-only option): no figure
            alt = None
        if alt is not None:
            delta = (alt.total_bytes - est.total_bytes) / GIB
            note = replace(note, alternative=change, delta_gib=delta, changed=_changed_most(est, alt))
        notes[knob.key] = note
    return notes


def peak_line(plan: Plan) -> str:
    """``planned peak 13.76 GiB (backward_head) of 15.73 GiB usable per device: headroom 1.97 GiB (0.79 required)``."""
    est = plan.estimate
    if plan.budget_gib is None:
        return f"planned peak {est.total_gib:.2f} GiB ({est.peak_phase}), not checked against a budget"
    where = "RAM" if plan.device == "cpu" else "usable per device"
    return (
        f"planned peak {est.total_gib:.2f} GiB ({est.peak_phase}) of {plan.budget_gib:.2f} GiB {where}: "
        f"headroom {plan.headroom_gib:.2f} GiB ({plan.required_headroom_gib:.2f} required)"
    )


def components_line(plan: Plan) -> str:
    """The peak's components, largest first: ``weights 2.30, optimizer_state 2.30, ... (GiB)``."""
    parts = sorted(plan.estimate.component_gib().items(), key=lambda kv: -abs(kv[1]))
    return ", ".join(f"{name} {gib:.2f}" for name, gib in parts if not math.isclose(gib, 0.0, abs_tol=0.005)) + " (GiB)"
