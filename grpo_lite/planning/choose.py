"""plan(): validate what the user asked, find the budget (given or detected), and hand it to the search, which
returns the first candidate of the ladder that fits with headroom. No torch / trl import on this path.

>>> p = plan("Llama-3.2-1B-Instruct", budget_gb=16)
>>> p.preset.name, p.fits, p.settings["optim"], p.precision["update"]
('full-8bit', True, 'adamw_8bit', 'stochastic rounding')
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

from grpo_lite.defaults import STEP
from grpo_lite.errors import ConfigError, DoesNotFitError
from grpo_lite.memory.blocks import DEFAULT_BLOCKS, block_source
from grpo_lite.memory.models import ModelSpec, resolve_model
from grpo_lite.planning import hardware
from grpo_lite.planning.candidates import fits
from grpo_lite.planning.result import Plan
from grpo_lite.planning.search import search
from grpo_lite.settings import Method, Sharding, check, check_written

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.blocks import BlockMode


def plan(
    model: str | os.PathLike[str] | ModelSpec,
    budget_gb: float | None = None,
    *,
    method: Method | None = None,
    preset: str | None = None,
    device: Literal["cuda", "cpu"] | None = None,
    num_processes: int | None = None,
    sharding: Sharding | None = None,
    max_prompt_length: int | None = None,
    blocks: BlockMode = DEFAULT_BLOCKS,
    **fixed: Any,
) -> Plan:
    """Choose the best rung and settings that fit ``budget_gb``.

    Args:
        model: name, path or ModelSpec.
        budget_gb: the card's nominal size in GB, per device (16 for a "16 GB" card); with ``device="cpu"``, the
            RAM the run may use (GiB). None: detect the current CUDA device; without one, a CPU plan at the CPU
            defaults, planned again for the RAM available now when those would not fit.
        method: restrict the ladder to one method.
        preset: use exactly this rung (only its settings are traded).
        device: "cuda" or "cpu". Default: cuda when a budget is given, else what is detected.
        num_processes: processes (one GPU each). Default: 1.
        sharding: none, ddp, zero2, zero3 or fsdp. Default: chosen only when one device cannot hold the model.
        max_prompt_length: prompt tokens to plan for. Default: 256 (``train()`` passes the longest prompt).
        blocks: where one block's bytes per token come from (:func:`grpo_lite.memory.blocks.block_source`).
            Default: ``"auto"``, as ``train()`` and ``grpo-lite plan``.
        **fixed: GRPOConfig fields (kept verbatim in ``settings``), lora_r, lora_alpha, lora_dropout,
            lora_target_modules (go to ``lora``) and ``shared_prefix`` (Default: on); any setting left out is
            ``estimate()``'s first choice (``grpo_lite.defaults``), traded down to fit.

    Raises:
        ConfigError: invalid budget, method, preset, sharding, blocks or fixed values that break TRL's rules.
        DoesNotFitError: nothing fits; names the smallest budget that would and its preset.
        ModelError: the model cannot be resolved.
    """
    spec = model if isinstance(model, ModelSpec) else resolve_model(model)
    num_processes = STEP.num_processes if num_processes is None else num_processes
    max_prompt_length = STEP.max_prompt_length if max_prompt_length is None else max_prompt_length
    check("method", method)
    check("device", device)
    check("sharding", sharding)
    check("num_processes", num_processes)
    check("max_prompt_length", max_prompt_length)
    for key, value in fixed.items():  # the ranges train() checks, with its messages (before: a ZeroDivisionError)
        check_written(key, value)
    block_source(blocks)  # an unknown mode fails here, before the search
    if fixed.get("use_cpu") is True:
        if device == "cuda":
            raise ConfigError("use_cpu=True contradicts device='cuda'; drop one of them")
        device = "cpu"
    reasons: list[str] = []
    nominal: float | None = None
    usable: float | None = None
    if budget_gb is not None and device == "cpu":
        nominal = usable = hardware.validate_budget_gb(budget_gb)
        reasons.append(
            f"budget: {nominal:g} GB of RAM for the run: the plan's peak is the process's peak resident "
            "memory (interpreter and libraries included)"
        )
    elif budget_gb is not None:
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
    common: dict[str, Any] = {
        "method": method,
        "preset_name": preset,
        "num_processes": num_processes,
        "sharding": sharding,
        "max_prompt_length": max_prompt_length,
        "fixed": dict(fixed),
        "blocks": blocks,
    }
    if usable is None:
        return _cpu_plan(spec, reasons, common)
    return search(spec, device=device or "cpu", usable_gib=usable, nominal_gb=nominal, reasons=reasons, **common)


def _cpu_plan(spec: ModelSpec, reasons: list[str], common: dict[str, Any]) -> Plan:
    """A CPU plan without a budget: the CPU defaults, planned again for the RAM available now when they do not fit."""
    reference = search(spec, device="cpu", usable_gib=None, nominal_gb=None, reasons=list(reasons), **common)
    ram, why = hardware.detect_ram()
    need = reference.estimate.total_gib
    if ram is None:
        reference.reasons.append(why)
        return reference
    if fits(reference.estimate, ram):
        reference.reasons.append(f"{why}: the plan's peak of {need:.2f} GiB fits")
        reference.memory_check = f"fits the {ram:.1f} GiB of RAM available now"
        return reference
    if common["num_processes"] > 1:  # each rank reads the RAM at its own moment: planning again could differ by rank
        reference.memory_check = f"may not fit the {ram:.1f} GiB of RAM available now"
        reference.reasons.append(
            f"{why}: the CPU defaults peak at {need:.2f} GiB per process and may not fit; "
            "pass budget_gb with device='cpu' to plan all processes for the same RAM"
        )
        return reference
    reasons.append(
        f"{why}: the CPU defaults would peak at {need:.2f} GiB, more than fits; planning for the "
        "available RAM (budget_gb with device='cpu' plans for another amount)"
    )
    try:
        return search(spec, device="cpu", usable_gib=ram, nominal_gb=round(ram, 1), reasons=reasons, **common)
    except DoesNotFitError as exc:
        raise DoesNotFitError(
            f"{exc} Planned for the RAM available now ({why}); pass budget_gb with device='cpu' "
            "to plan for more (swap makes it slow, not impossible).",
            smallest_budget_gb=exc.smallest_budget_gb,
            preset=exc.preset,
        ) from None
