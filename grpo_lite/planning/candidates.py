"""The search inside one rung of the ladder: candidate settings, best first, and the fit test.

Within a rung the planner trades the micro-batch (speed only), then the completion length, then the number of
generations; values the user fixed are never traded.

>>> [s["per_device_train_batch_size"] for s in batch_shapes(8, num_processes=1, fixed={})]
[8, 4, 2, 1]
>>> headroom_gib(15.73)
0.7865
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grpo_lite.defaults import GIB, LORA, PLANNER, STEP
from grpo_lite.errors import ConfigError
from grpo_lite.memory import terms as memory_terms
from grpo_lite.memory.blocks import DEFAULT_BLOCKS
from grpo_lite.memory.estimate import MemoryEstimate, estimate
from grpo_lite.memory.step_settings import StepSettings
from grpo_lite.planning.hardware import nominal_to_usable_gib, usable_to_nominal_gb
from grpo_lite.settings import settings, where

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.architectures import Architecture
    from grpo_lite.memory.blocks import BlockMode
    from grpo_lite.planning.hardware import Extras
    from grpo_lite.planning.ladder import Preset
    from grpo_lite.settings import Device, Sharding


BATCH_KEYS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "generation_batch_size",
    "steps_per_generation",
)  # what num_generations must divide: refitted by the planner with it
# train()'s and plan()'s LoRA settings -> peft.LoraConfig's names (a recipe's lora: section), read from their rows
LORA_KEYS: dict[str, str] = {name: settings()[name].peft or name for name in where("lora")}
# what the user fixed that goes to estimate() as it is
PLAN_ONLY = ("reward_model_bytes",)  # what a plan prices that no setting of the run holds (train() measures it)
_PASSED_ON = ("num_iterations", "cast_lm_head_to_fp32", "bf16", "fp16", "ds3_gather_for_generation", *PLAN_ONLY)
_VLLM_PASSED_ON = ("vllm_mode", "vllm_importance_sampling_correction", "vllm_enable_sleep_mode")


def headroom_gib(usable_gib: float) -> float:
    """Free memory a plan must leave: a share of the usable memory, at least PLANNER.headroom_min_gib."""
    return round(max(PLANNER.headroom_share * usable_gib, PLANNER.headroom_min_gib), 4)


def fits(est: MemoryEstimate | float, usable_gib: float) -> bool:
    """Whether the estimated peak (an estimate, or its GiB) plus the headroom stays within the usable memory."""
    total = est if isinstance(est, (int, float)) else est.total_gib
    return total + headroom_gib(usable_gib) <= usable_gib


def required_nominal_gb(total_gib: float, *, device: str = STEP.device) -> int:
    """The smallest whole nominal GB (card, or RAM on CPU) whose usable memory holds ``total_gib`` plus headroom.

    >>> required_nominal_gb(10.0), required_nominal_gb(10.0, device="cpu")
    (11, 11)
    """
    usable = max(total_gib / (1 - PLANNER.headroom_share), total_gib + PLANNER.headroom_min_gib)
    gb = math.ceil((usable if device == "cpu" else usable_to_nominal_gb(usable)) - 1e-9)
    while not fits(total_gib, gb if device == "cpu" else nominal_to_usable_gib(gb)):  # rounding at the boundary
        gb += 1
    return gb


def _divisors_desc(n: int) -> list[int]:
    return [d for d in range(n, 0, -1) if n % d == 0]


def _batch_options(num_generations: int, fixed: dict[str, Any], shared_prefix: bool) -> list[int]:
    """per_device_train_batch_size values to try, largest first (whole groups first when sharing prompts)."""
    if "per_device_train_batch_size" in fixed:
        return [fixed["per_device_train_batch_size"]]
    options = _divisors_desc(num_generations)
    if not shared_prefix:
        return options
    gen = fixed.get("generation_batch_size")
    groups = gen // num_generations if isinstance(gen, int) and gen >= num_generations else 1
    whole = [k * num_generations for k in _divisors_desc(groups)]  # every prompt's completions in one micro-batch
    return whole + [o for o in options if o not in whole]


def batch_shapes(
    num_generations: int,
    *,
    num_processes: int,
    fixed: dict[str, Any],
    layerwise: bool = False,
    shared_prefix: bool | None = None,
) -> list[dict[str, Any]]:
    """Micro-batch / accumulation pairs for ``num_generations``, largest micro-batch first.

    Each device generates one prompt group per step unless ``fixed`` sets the batch keys (kept as they are; TRL's
    divisibility rule is StepSettings'). With a shared prefix, shapes that keep whole groups in one micro-batch
    come first.

    >>> [tuple(s.values()) for s in batch_shapes(8, num_processes=2, fixed={})]
    [(8, 1), (4, 1), (2, 2), (1, 4)]
    >>> batch_shapes(4, num_processes=1, fixed={"per_device_train_batch_size": 1})
    [{'per_device_train_batch_size': 1, 'gradient_accumulation_steps': 4}]
    >>> fixed = {"shared_prefix": True, "generation_batch_size": 16}
    >>> [s["per_device_train_batch_size"] for s in batch_shapes(4, num_processes=1, fixed=fixed)]
    [16, 8, 4, 2, 1]
    """
    sharing = bool(fixed.get("shared_prefix", STEP.shared_prefix)) if shared_prefix is None else shared_prefix
    shapes = []
    for pdbs in _batch_options(num_generations, fixed, sharing):
        shape: dict[str, Any] = {"per_device_train_batch_size": pdbs}
        if "gradient_accumulation_steps" in fixed:
            shape["gradient_accumulation_steps"] = fixed["gradient_accumulation_steps"]
        elif layerwise:
            shape["gradient_accumulation_steps"] = 1
        elif "steps_per_generation" in fixed:
            shape["gradient_accumulation_steps"] = fixed["steps_per_generation"]
        elif "generation_batch_size" in fixed and isinstance(pdbs, int) and pdbs > 0:
            shape["gradient_accumulation_steps"] = max(1, fixed["generation_batch_size"] // (pdbs * num_processes))
        else:
            global_batch = pdbs * num_processes
            shape["gradient_accumulation_steps"] = num_generations // math.gcd(num_generations, global_batch)
        for key in ("steps_per_generation", "generation_batch_size"):
            if key in fixed:
                shape[key] = fixed[key]
        if layerwise and shape["gradient_accumulation_steps"] != 1:
            continue
        if shape not in shapes:
            shapes.append(shape)
    return shapes


@dataclass
class Candidate:
    """One concrete configuration of a rung, with its estimate."""

    preset: Preset
    sharding: Sharding
    kwargs: dict[str, Any]  # estimate() keyword arguments
    estimate: MemoryEstimate | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def rung_optim(preset: Preset, device: Device, num_processes: int) -> str:
    """The rung's optimizer on this device and process count (GPU-only / layerwise swaps)."""
    if num_processes > 1 and preset.multi_optim:
        return preset.multi_optim if device == "cuda" else preset.multi_optim.replace("_8bit", "")
    return preset.optim if device == "cuda" else preset.cpu_optim


def candidates(
    arch: Architecture,
    preset: Preset,
    *,
    device: Device,
    usable_gib: float | None,
    sharding: Sharding,
    num_processes: int,
    max_prompt_length: int,
    fixed: dict[str, Any],
    extras: Extras,
    cpu_reference: bool = False,
    blocks: BlockMode = DEFAULT_BLOCKS,
) -> Iterator[Candidate]:
    """Yield the rung's candidates best first, each already estimated (or carrying its ConfigError).

    Args:
        usable_gib: the usable memory (sizes a colocated vLLM share); None for a CPU reference plan.
        fixed: what the user fixed (GRPOConfig and lora_* keys), kept verbatim.
        cpu_reference: a CPU plan without a budget: one candidate at the CPU defaults.
    """
    optim = fixed.get("optim", rung_optim(preset, device, num_processes))
    layerwise = optim.endswith("layerwise")
    ckpt = fixed.get("gradient_checkpointing", preset.gradient_checkpointing and not cpu_reference)
    liger = fixed.get("use_liger_kernel", device == "cuda" and extras.liger_kernel)
    gens = [fixed["num_generations"]] if "num_generations" in fixed else list(PLANNER.generations)
    lengths = (
        [fixed["max_completion_length"]]
        if "max_completion_length" in fixed
        else ([PLANNER.cpu_completion_length] if cpu_reference else list(PLANNER.completion_lengths))
    )
    if "use_vllm" in fixed:
        vllm_options = [bool(fixed["use_vllm"])]
    else:
        vllm_options = [True, False] if (device == "cuda" and extras.vllm and usable_gib) else [False]
    base: dict[str, Any] = {
        "method": preset.method,
        "device": device,
        "optim": optim,
        "gradient_checkpointing": ckpt,
        "use_liger_kernel": liger,
        "max_prompt_length": max_prompt_length,
        "num_processes": num_processes,
        "sharding": sharding,
        "budget_gib": usable_gib,
        "beta": fixed.get("beta", STEP.beta),
        "lora_r": fixed.get("lora_r", preset.lora_r),
        "lora_dropout": fixed.get("lora_dropout", LORA.dropout),
        "shared_prefix": bool(fixed.get("shared_prefix", STEP.shared_prefix)),  # train()'s default: the plan it runs
        "update_rounding": fixed.get("update_rounding"),  # None: stochastic when the trained weights are bf16
    }
    if fixed.get("dtype") is not None:  # otherwise StepSettings.resolve picks it (memory.step_settings.load_dtype)
        base["dtype"] = fixed["dtype"]  # validated by StepSettings (bfloat16, float16, float32)
    if preset.method == "galore":
        base["optim_args"] = fixed.get("optim_args") or preset.galore_args
    if "lora_target_modules" in fixed:
        base["lora_target_modules"] = fixed["lora_target_modules"]
    base.update({key: fixed[key] for key in (*_PASSED_ON, *_VLLM_PASSED_ON) if key in fixed})
    for gens_n in gens:
        for length in lengths:
            for use_vllm in vllm_options:
                for shape in batch_shapes(gens_n, num_processes=num_processes, fixed=fixed, layerwise=layerwise):
                    kwargs = {
                        **base,
                        **shape,
                        "num_generations": gens_n,
                        "max_completion_length": length,
                        "use_vllm": use_vllm,
                    }
                    cand = Candidate(preset, sharding, kwargs)
                    if use_vllm and not _size_vllm(arch, cand, fixed, usable_gib):
                        continue
                    try:
                        cand.estimate = estimate(arch, blocks=blocks, **kwargs)
                    except ConfigError as exc:
                        cand.error = str(exc)
                    yield cand
                    if cpu_reference:
                        return


def _size_vllm(arch: Architecture, cand: Candidate, fixed: dict[str, Any], usable_gib: float | None) -> bool:
    """Pick vllm_gpu_memory_utilization (unless fixed): enough for bf16 weights, the KV cache, overhead."""
    if usable_gib is None:  # a CPU plan: estimate() says that vLLM needs a GPU
        return True
    if "vllm_gpu_memory_utilization" in fixed:
        cand.kwargs["vllm_gpu_memory_utilization"] = fixed["vllm_gpu_memory_utilization"]
        return True
    try:
        settings = StepSettings.resolve(**{**cand.kwargs, "use_vllm": False})
    except ConfigError:
        return True  # let estimate() report the error
    share = memory_terms.vllm_needed(arch, settings) / (usable_gib * GIB)
    util = math.ceil(share * 20) / 20
    if util > PLANNER.vllm_max_share:
        return False
    cand.kwargs["vllm_gpu_memory_utilization"] = util
    return True
