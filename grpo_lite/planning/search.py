"""Walk the ladder for :func:`grpo_lite.planning.choose.plan`: first fit, settings, reasons, or the smallest budget.

With several processes the walk runs the whole ladder under DDP first, then ZeRO-2, then FSDP.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_lite.defaults import PLANNER, STEP
from grpo_lite.errors import ConfigError, DoesNotFitError
from grpo_lite.memory.blocks import DEFAULT_BLOCKS
from grpo_lite.memory.keywords import lora_kwargs, model_kwargs
from grpo_lite.memory.optimizers import get_optimizer
from grpo_lite.planning import hardware
from grpo_lite.planning.candidates import (
    LORA_KEYS,
    PLAN_ONLY,
    Candidate,
    candidates,
    fits,
    headroom_gib,
    required_nominal_gb,
)
from grpo_lite.planning.ladder import LADDER, Preset, get_preset
from grpo_lite.planning.result import Plan
from grpo_lite.settings import where

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.blocks import BlockMode
    from grpo_lite.memory.models import ModelSpec
    from grpo_lite.settings import Device, Method, Sharding


def _install(package: str) -> str:
    """The command that installs an optional package (a field of :class:`~grpo_lite.planning.hardware.Extras`)."""
    return f"pip install {package.replace('_', '-')}"


def _rungs(method: Method | None, preset_name: str | None, lora_fixed: list[str], cpu_reference: bool) -> list[Preset]:
    if preset_name is not None:
        rung = get_preset(preset_name)
        if method is not None and rung.method != method:
            raise ConfigError(f"preset {preset_name!r} is method {rung.method!r}, not {method!r}; drop one of them")
        return [rung]
    rungs = [p for p in LADDER if method is None or p.method == method]
    if lora_fixed:
        if method in ("full", "galore"):
            raise ConfigError(f"{', '.join(lora_fixed)} only apply to method lora or qlora, not {method!r}")
        rungs = [p for p in rungs if p.method in ("lora", "qlora")]
    if cpu_reference and method is None:
        rungs = [p for p in rungs if p.method == "lora"]
    return rungs


def _shardings(
    sharding: Sharding | None, num_processes: int, extras: hardware.Extras, reasons: list[str]
) -> list[Sharding]:
    if sharding is not None:
        return [sharding]
    if num_processes == 1:
        return ["none"]
    if not extras.deepspeed:
        reasons.append(f"deepspeed not installed: ZeRO-2 not considered ({_install('deepspeed')})")
        return ["ddp", "fsdp"]
    return ["ddp", "zero2", "fsdp"]


def _describe(cand: Candidate) -> str:
    k = cand.kwargs
    return (
        f"{k['num_generations']} generations x {k['max_completion_length']} tokens, micro-batch "
        f"{k['per_device_train_batch_size']} x {k['gradient_accumulation_steps']} accumulation"
    )


def search(
    spec: ModelSpec,
    *,
    device: Device,
    usable_gib: float | None,
    nominal_gb: float | None,
    method: Method | None,
    preset_name: str | None,
    num_processes: int,
    sharding: Sharding | None,
    max_prompt_length: int,
    fixed: dict[str, Any],
    reasons: list[str],
    blocks: BlockMode = DEFAULT_BLOCKS,
) -> Plan:
    """Return the first candidate that fits (see :func:`grpo_lite.planning.choose.plan` for the arguments)."""
    extras = hardware.installed_extras()
    if "optim" in fixed:
        get_optimizer(fixed["optim"])
    cpu_reference = usable_gib is None
    lora_fixed = [k for k in LORA_KEYS if k in fixed]
    explicit = preset_name is not None or method is not None
    rungs = _rungs(method, preset_name, lora_fixed, cpu_reference)
    failures: list[Candidate] = []
    errors: list[str] = []
    where: dict[str, Any] = dict(device=device, usable_gib=usable_gib, num_processes=num_processes, fixed=fixed)
    where.update(max_prompt_length=max_prompt_length, extras=extras, cpu_reference=cpu_reference, blocks=blocks)
    for shard in _shardings(sharding, num_processes, extras, reasons):
        for rung in rungs:
            missing = [r for r in rung.requires if not getattr(extras, r)]
            if missing and not explicit:
                reasons.append(
                    f"{rung.name}: skipped, needs {', '.join(missing)} ({'; '.join(_install(m) for m in missing)})"
                )
                continue
            smallest: Candidate | None = None
            for cand in candidates(spec.arch, rung, sharding=shard, **where):
                if cand.estimate is None:
                    errors.append(cand.error or "invalid settings")
                    continue
                if cpu_reference or fits(cand.estimate, usable_gib):  # type: ignore[arg-type]
                    if missing:
                        install = "; ".join(_install(m) for m in missing)
                        reasons.append(f"{rung.name} needs {', '.join(missing)}: {install}")
                    return _build(
                        spec, cand, device, usable_gib, nominal_gb, fixed, failures, reasons, max_prompt_length, extras
                    )
                if smallest is None or cand.estimate.total_bytes < smallest.estimate.total_bytes:  # type: ignore
                    smallest = cand
            if smallest is not None:
                failures.append(smallest)
    if not failures:
        if errors:
            raise ConfigError(errors[0])
        raise ConfigError("no preset is available here: " + "; ".join(reasons))
    raise _does_not_fit(spec, failures, usable_gib, nominal_gb, num_processes, device, preset_name)


def _does_not_fit(
    spec: ModelSpec,
    failures: list[Candidate],
    usable: float | None,
    nominal: float | None,
    num_processes: int,
    device: Device,
    preset_name: str | None = None,
) -> DoesNotFitError:
    best = min(failures, key=lambda c: c.estimate.total_bytes)  # type: ignore[union-attr]
    need = best.estimate.total_gib  # type: ignore[union-attr]
    gb = required_nominal_gb(need, device=device)
    if device == "cpu":
        card = f"{nominal:g} GB of RAM"
    elif num_processes > 1:
        card = f"{num_processes} x {nominal:g} GB cards ({usable:.2f} GiB usable each)"
    else:
        card = f"a {nominal:g} GB card ({usable:.2f} GiB usable)"
    shard = f", sharding {best.sharding}" if best.sharding not in ("none", "ddp") else ""
    which = f"with preset {preset_name}" if preset_name is not None else "with any preset"
    msg = (
        f"{spec.name} does not fit {card} {which}: the most frugal candidate, {best.preset.name}"
        f"{shard} at {_describe(best)}, needs {need:.2f} GiB plus headroom. The smallest budget that fits is "
        f"{gb} GB (preset {best.preset.name}). Or shorten max_prompt_length / max_completion_length, lower "
        "num_generations (floor 4) with --set, or spread over more GPUs (num_processes with sharding)."
    )
    return DoesNotFitError(msg, smallest_budget_gb=float(gb), preset=best.preset.name)


def _build(
    spec: ModelSpec,
    cand: Candidate,
    device: Device,
    usable: float | None,
    nominal: float | None,
    fixed: dict[str, Any],
    failures: list[Candidate],
    reasons: list[str],
    max_prompt_length: int,
    extras: hardware.Extras,
) -> Plan:
    est = cand.estimate
    assert est is not None
    k, rung = cand.kwargs, cand.preset
    for fail in failures:
        allowed = (usable or 0) - headroom_gib(usable or 0)
        reasons.append(
            f"{fail.preset.name}"
            f"{'' if fail.sharding in ('none', 'ddp') else ' (' + fail.sharding + ')'}: does not fit, "
            f"needs at least {fail.estimate.total_gib:.2f} GiB ({_describe(fail)}) "  # type: ignore
            f"> {allowed:.2f} GiB allowed"
        )
    if usable is not None:
        head = headroom_gib(usable)
        reasons.append(
            f"chose {rung.name}: {rung.summary}. Peak {est.total_gib:.2f} GiB ({est.peak_phase}) "
            f"<= {usable - head:.2f} GiB allowed ({usable:.2f} usable - {head:.2f} headroom)"
        )
    else:
        reasons.append(f"chose {rung.name}: {rung.summary}")
    traded = []
    if "num_generations" not in fixed and k["num_generations"] < PLANNER.generations[0]:
        traded.append(f"num_generations {PLANNER.generations[0]} -> {k['num_generations']}")
    if "max_completion_length" not in fixed and k["max_completion_length"] < PLANNER.completion_lengths[0]:
        traded.append(f"max_completion_length {PLANNER.completion_lengths[0]} -> {k['max_completion_length']}")
    if traded and usable is not None:
        reasons.append("traded to fit (floors: 4 generations, 256 tokens): " + ", ".join(traded))
    reasons.append(
        f"batch: {_describe(cand)} (generation batch {est.settings.generation_batch_per_device} sequences per device)"
    )
    if cand.sharding not in ("none", "ddp"):
        reasons.append(f"sharding {cand.sharding}: one device cannot hold any rung replicated (DDP)")
    if fixed:
        reasons.append("kept as you set: " + ", ".join(f"{key}={value!r}" for key, value in fixed.items()))
    if device == "cuda" and not extras.liger_kernel and "use_liger_kernel" not in fixed:
        reasons.append(f"liger-kernel not installed: {_install('liger_kernel')} would cut activation memory")
    reasons.extend(est.notes)
    head = headroom_gib(usable) if usable is not None else 0.0
    return Plan(
        model=spec,
        preset=rung,
        device=device,
        budget_gib=usable,
        headroom_gib=(usable - est.total_gib) if usable is not None else 0.0,
        fits=True,
        estimate=est,
        settings=_settings(spec, cand, device, fixed),
        model_kwargs=model_kwargs(est.settings),
        lora=lora_kwargs(est.settings, spec.arch.linear_names, alpha=fixed.get("lora_alpha")),
        reasons=reasons,
        fixed=fixed,
        max_prompt_length=max_prompt_length,
        num_processes=k["num_processes"],
        sharding=cand.sharding,
        budget_gb=nominal,
        required_headroom_gib=head,
    )


def _settings(spec: ModelSpec, cand: Candidate, device: Device, fixed: dict[str, Any]) -> dict[str, Any]:
    k, galore = cand.kwargs, cand.preset.method == "galore"
    settings: dict[str, Any] = {
        "per_device_train_batch_size": k["per_device_train_batch_size"],
        "gradient_accumulation_steps": k["gradient_accumulation_steps"],
        "num_generations": k["num_generations"],
        "max_completion_length": k["max_completion_length"],
        "gradient_checkpointing": k["gradient_checkpointing"],
        "optim": k["optim"],
        "optim_target_modules": (list(spec.arch.linear_names) or "all-linear") if galore else None,
        "optim_args": k.get("optim_args") if galore else None,
        "bf16": cand.estimate.settings.bf16,  # type: ignore[union-attr]  # StepSettings.resolve decides it
        "use_cpu": device == "cpu",
        "beta": k["beta"],
        "learning_rate": cand.preset.learning_rate,
        "use_liger_kernel": k["use_liger_kernel"],
        "use_vllm": k["use_vllm"],
    }
    if k["use_vllm"]:
        settings["vllm_mode"] = k.get("vllm_mode", STEP.vllm_mode)
        settings["vllm_gpu_memory_utilization"] = k["vllm_gpu_memory_utilization"]
    settings.update(
        {k: v for k, v in fixed.items() if k not in (*LORA_KEYS, *where("load"), *where("trainer"), *PLAN_ONLY)}
    )
    return settings
