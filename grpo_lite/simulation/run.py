"""simulate(): one GRPO step of a plan at full size on the meta device, planned against simulated.

Seconds to a minute per plan (docs/memory.md has the table of the headline plans)::

    from grpo_lite import simulate
    sim = simulate("meta-llama/Llama-3.1-8B-Instruct", budget_gb=16)
    sim.agrees(), [(c.phase, round(c.ratio, 3)) for c in sim.checks()]   # True, [('generation', 0.995), ...]
"""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite.errors import ConfigError, GrpoLiteError, SimulationError
from grpo_lite.memory.meta.gpus import DEFAULT_GPU, GPU_ARCHES
from grpo_lite.planning.choose import plan
from grpo_lite.planning.result import Plan
from grpo_lite.simulation.result import Simulation, aggregate
from grpo_lite.training.report.quiet import quiet_libraries

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.meta.gpus import GpuArch
    from grpo_lite.memory.models import ModelSpec


def _check(plan: Plan) -> None:
    s = plan.estimate.settings
    why = []
    if s.device != "cuda":
        why.append("it is a CPU plan (the simulation is of a GPU step: pass budget_gb, or device='cuda')")
    if s.num_processes > 1:
        why.append(f"it spans {s.num_processes} processes (sharding is not simulated: plan one device)")
    if s.use_vllm:
        why.append("it generates with vLLM (its engine is not simulated: set use_vllm=False)")
    if s.beta != 0 and not s.is_peft:
        why.append("beta > 0 keeps a reference copy (not simulated: set beta=0)")
    if why:
        raise ConfigError(f"cannot simulate {plan.model.name} with preset {plan.preset.name}: " + "; ".join(why))


def describe_optimizer(optimizer: Any, rounding: bool) -> str:
    """The implementation the step ran: class, torch's foreach / fused choice for CUDA tensors, wrappers."""
    import torch  # heavy: torch (and the modules below)

    from grpo_lite.memory.meta.private import default_to_fused_or_foreach
    from grpo_lite.precision.rounding import inner_optimizers, unwrap

    inner = inner_optimizers(optimizer)
    first = inner[0]
    name = f"{type(first).__module__.split('.')[0]}.{type(first).__name__}"
    args = getattr(first, "args", None)
    if args is not None:  # bitsandbytes
        name += f" ({args.optim_bits}-bit state{', paged' if getattr(first, 'is_paged', False) else ''}"
        name += f", update-norm clipping at {args.max_unorm:g}" if args.max_unorm else ""
        wide = [
            p
            for o in inner
            for p, st in o.state.items()
            if p.numel() >= args.min_8bit_size and getattr(st.get("state1"), "dtype", None) == torch.float32
        ]
        if args.optim_bits == 8 and wide:
            name += f"; {len(wide)} large tensor(s) in 32-bit state: transformers' override for embeddings"
        name += ")"
    if "foreach" in first.defaults or "fused" in first.defaults:
        group = first.param_groups[0]
        if group.get("fused"):
            impl = "fused"
        elif group.get("foreach") is None:
            params = [p for g in first.param_groups for p in g["params"]]
            impl = "foreach" if default_to_fused_or_foreach()(params, False, False)[1] else "for-loop"
            impl += " (torch's default for CUDA tensors)"
        else:
            impl = "foreach" if group["foreach"] else "for-loop"
        name += f", {impl}"
    if hasattr(unwrap(optimizer), "optimizer_dict"):
        name += f", layer-wise: {len(inner)} per-parameter optimizers stepped inside backward"
    if rounding:
        name += f"; stochastic rounding, tensors over {_chunk():,} elements stepped in slices"
    return name


def _where(exc: BaseException) -> str:
    """The innermost frame of ``exc``'s traceback outside torch: the code that made the failing call."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/torch/" not in f.filename]
    if not frames:
        return "an unknown place"
    frame = frames[-1]
    return f"{'/'.join(Path(frame.filename).parts[-2:])}:{frame.lineno} ({frame.name})"


def _chunk() -> int:
    from grpo_lite.precision.rounding import SR_CHUNK  # heavy: torch

    return SR_CHUNK


@quiet_libraries()  # as train(); a QLoRA plan's layers may be the program's first import of bitsandbytes
def simulate(
    model: str | os.PathLike[str] | ModelSpec | Plan,
    budget_gb: float | None = None,
    *,
    gpu: GpuArch = DEFAULT_GPU,
    padded: bool = True,
    **plan_kwargs: Any,
) -> Simulation:
    """Simulate one GRPO step of a plan at full size on the meta device and set it beside the plan.

    Args:
        model: a :class:`~grpo_lite.planning.result.Plan`, or what :func:`grpo_lite.plan` takes (then
            ``budget_gb`` and ``plan_kwargs`` go to ``plan()``).
        budget_gb: the card's nominal size (when ``model`` is not a plan).
        gpu: the GPU's compute capability: ``sm86`` (RTX 30xx), ``sm89`` (RTX 40xx), ``sm80`` (A100); it
            decides the attention kernel (:mod:`grpo_lite.memory.meta.attention`).
        padded: whether batches carry padding (real ones do: prompts differ in length, completions end
            early); without, attention runs the flash kernel with no mask.
        **plan_kwargs: ``plan()``'s keywords (method, preset, max_prompt_length, blocks, GRPOConfig fields...).

    Returns:
        A :class:`~grpo_lite.simulation.result.Simulation`: simulated bytes per phase and component, the
        plan's tensor bytes beside them, and every choice made in the GPU's place.

    Raises:
        ConfigError: a plan the simulation does not cover (CPU, several processes, vLLM, a reference copy),
            or an unknown ``gpu``.
        SimulationError: the model's own code, or TRL's, failed on meta: one line naming where, and what to do.
    """
    if isinstance(model, Plan):
        the_plan = model
    else:
        the_plan = plan(model, budget_gb, **plan_kwargs)
    if gpu not in GPU_ARCHES:
        raise ConfigError(
            f"gpu={gpu!r} is not simulated; choose one of {', '.join(GPU_ARCHES)} "
            f"({'; '.join(f'{k}: {v}' for k, v in GPU_ARCHES.items())})"
        )
    _check(the_plan)
    from grpo_lite.memory.meta.cuda import cuda_semantics  # heavy: torch (and the modules below)
    from grpo_lite.simulation.build import build
    from grpo_lite.simulation.step import run_step

    s = the_plan.estimate.settings
    start = time.perf_counter()
    stage = "building the model on meta"
    try:
        with cuda_semantics(gpu, padded=padded) as choices:
            built = build(the_plan)
            stage = "running the step"
            clock, tracker = run_step(built, s, choices)
            choices.optimizer = describe_optimizer(built.optimizer, s.rounds_stochastically)
    except GrpoLiteError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the model's own code on meta becomes one line
        raise SimulationError(
            f"cannot simulate {the_plan.model.name} ({the_plan.preset.name}): {stage} failed at "
            f"{_where(exc)}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}. The plan itself "
            "stands without it: drop --simulate, or check it with two real steps (--measure, the weights on this machine)"
        ) from exc
    choices.autocast = "CUDA autocast to bfloat16, emulated (torch's CUDA op lists)" if s.bf16 else "none"
    if s.shared_prefix:
        choices.notes.append(
            "sampling is simulated without the shared prompt prefix (forwarded once, its cache "
            "repeated): that only shrinks the prefill; the last decoding step is the same"
        )
    if s.gradient_accumulation_steps > 2:
        choices.notes.append(
            f"{s.gradient_accumulation_steps} micro-batches per step: two simulated (the second "
            "holds the first's gradients, as every later one does)"
        )
    phases = aggregate(clock.segments, tracker.segments(), step=2)
    return Simulation(
        model=the_plan.model.name,
        preset=the_plan.preset.name,
        estimate=the_plan.estimate,
        phases=phases,
        choices=choices,
        wall_s=time.perf_counter() - start,
    )
