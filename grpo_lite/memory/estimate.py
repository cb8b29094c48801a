"""The memory model: the peak memory of one GRPO step, as the components of its largest phase (they add up to
``total_bytes``). docs/memory.md has the phases of a TRL 1.16 step and the formulas.

>>> est = estimate("Llama-3.2-1B", method="lora", gradient_checkpointing=True,
...                per_device_train_batch_size=4, gradient_accumulation_steps=2, num_generations=8)
>>> round(est.total_bytes) == round(sum(c.bytes for c in est.components))
True
>>> est.peak_phase, [c.name for c in est.components][:3]
('backward_layers', ['cuda_context', 'weights', 'optimizer_state'])
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from grpo_lite.defaults import GIB, GPU
from grpo_lite.memory import terms as T
from grpo_lite.memory import tokens as K
from grpo_lite.memory.architectures import Architecture
from grpo_lite.memory.blocks import DEFAULT_BLOCKS, block_source
from grpo_lite.memory.models import ModelSpec, resolve_model
from grpo_lite.memory.packing import planned_off_reason
from grpo_lite.memory.step_settings import StepSettings

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.blocks import BlockMode, BlockTerms


PhaseName = Literal["generation", "scoring", "backward_head", "backward_layers", "optimizer_step"]

PHASES: dict[str, str] = {
    "generation": "sampling completions (KV cache)",
    "scoring": "no-grad log-probs (old / reference)",
    "backward_head": "backward through the chunked LM head",
    "backward_layers": "backward through the decoder blocks",
    "optimizer_step": "optimizer step",
}
COMPONENTS: dict[str, str] = {
    "cuda_context": "CUDA context and library workspaces",
    "process_baseline": "the Python process before any tensor (interpreter, torch, transformers, TRL)",
    "weights": "model weights (load dtype / quantized)",
    "reference_model": "frozen reference copy (beta > 0, not PEFT)",
    "reward_models": "reward models' weights (rewards= given as models)",
    "vllm": "colocated vLLM share",
    "optimizer_state": "optimizer state",
    "update_monitor": "update monitor: sampled fp32 shadows of a few weights (update/realized)",
    "gradients": "gradients of trainable parameters",
    "grad_buckets": "DDP gradient buckets",
    "gathered_weights": "ZeRO-3 / FSDP gathered weights",
    "activations": "saved activations of one micro-batch",
    "logits": "log-prob / logits temporaries",
    "kv_cache": "generation KV cache",
    "work_buffers": "forward working set, dequantized weights",
    "optimizer_step": "optimizer step temporaries",
    "kernel_scratch": "scratch inside fused kernels (attention backward), outside any tensor",
    "allocator_reserve": "allocator fragmentation (reserved, unallocated)",
    "heap_slack": "glibc heap pages kept after frees, minus buffer pages never touched (CPU)",
}
FORMULAS = "formulas of a Llama block (docs/memory.md)"
_PERSISTENT = tuple(COMPONENTS)[: list(COMPONENTS).index("gathered_weights")]  # alive through the whole step


@dataclass(frozen=True)
class Component:
    """One named share of a phase's memory."""

    name: str
    bytes: float
    detail: str

    @property
    def gib(self) -> float:
        return self.bytes / GIB


@dataclass(frozen=True)
class Phase:
    """Everything alive at the high point of one phase of the step."""

    name: PhaseName
    components: tuple[Component, ...]

    @property
    def total_bytes(self) -> float:
        return math.fsum(c.bytes for c in self.components)


@dataclass(frozen=True)
class MemoryEstimate:
    """The estimated peak of a GRPO step.

    Attributes:
        arch: the model's shapes.
        settings: the resolved settings the estimate is for.
        phases: each phase with its components (each sums to its own total).
        peak_phase: the phase with the largest total: the step's peak.
        notes: caveats worth showing to the user.
        block_terms: where one block's bytes per token came from: traced (and how), or the Llama formulas.
        blocks: the block source asked for (``estimate(blocks=...)``).
    """

    arch: Architecture
    settings: StepSettings
    phases: tuple[Phase, ...]
    peak_phase: PhaseName
    notes: tuple[str, ...] = ()
    block_terms: str = FORMULAS
    blocks: BlockMode = DEFAULT_BLOCKS

    @property
    def peak(self) -> Phase:
        """The phase at the peak."""
        return next(p for p in self.phases if p.name == self.peak_phase)

    @property
    def components(self) -> tuple[Component, ...]:
        """Components alive at the peak (non-zero ones), in COMPONENTS order; they sum to the total."""
        return tuple(c for c in self.peak.components if c.bytes != 0)  # heap_slack can be < 0 (see terms)

    @property
    def total_bytes(self) -> float:
        """Peak bytes: the sum of :attr:`components`."""
        return math.fsum(c.bytes for c in self.components)

    @property
    def total_gib(self) -> float:
        """Peak in GiB."""
        return self.total_bytes / GIB

    def component_gib(self) -> dict[str, float]:
        """Components at the peak, name -> GiB."""
        return {c.name: c.gib for c in self.components}

    def phase_gib(self) -> dict[str, float]:
        """Each phase's total, name -> GiB."""
        return {p.name: p.total_bytes / GIB for p in self.phases}


def _phase(name: PhaseName, terms: dict[str, T.Term], arch: Architecture, s: StepSettings) -> Phase:
    """Order the components; add the allocator's share of the transient bytes (CUDA) or the heap's (CPU)."""
    transient = math.fsum(t.bytes for key, t in terms.items() if key not in _PERSISTENT)
    if s.device == "cuda":
        reserve = (
            f"{GPU.fragmentation:.0%} of {transient / GIB:.2f} GiB transient: the caching allocator's "
            "reserved-but-unallocated share"
        )
        terms = {**terms, "allocator_reserve": T.Term(GPU.fragmentation * transient, reserve)}
    else:
        head = name in ("backward_head", "scoring") and "logits" in terms
        untouched = K.untouched_buffer(arch, s) if head else 0.0
        terms = {**terms, "heap_slack": T.heap_slack(arch, s, transient, untouched=untouched)}
    ordered = tuple(Component(k, terms[k].bytes, terms[k].detail) for k in COMPONENTS if k in terms)
    return Phase(name, ordered)


def _pending_head(head: float) -> T.Term:
    return T.Term(head, "the tied LM head's weight gradient, pending until the embedding's")


def _layers_phase(
    arch: Architecture,
    s: StepSettings,
    with_grads: dict[str, T.Term],
    extra: dict[str, T.Term],
    block: BlockTerms | None,
) -> dict[str, T.Term]:
    """Backward through the blocks. With gradients from earlier micro-batches (accumulation) everything adds up;
    without, each block's gradients appear as its saved activations are freed, so the peak holds the larger of the
    two, beside the recomputed block, the working set and the LM head's weight gradient (a tied one pending until
    the embedding's arrives)."""
    acts = K.activations(arch, s, recompute=True, block=block)
    extra = {**extra, "work_buffers": K.backward_working_set(arch, s, block)}
    if s.optimizer.layerwise:
        return _layerwise_peak(arch, s, with_grads, extra, acts, block)
    head = K.head_weight_grad(arch, s)
    pending = {"logits": _pending_head(head)} if arch.tied and head else {}
    terms = {**with_grads, **extra, "activations": acts}
    if s.grads_before_backward:
        return {**terms, **pending}
    saved = K.saved_activations(arch, s, block).saved
    grads = with_grads["gradients"]
    if saved >= grads.bytes - head:
        if pending:
            return {**terms, "gradients": T.Term(0.0, "none yet"), **pending}
        return {**terms, "gradients": T.Term(head, "the LM head's weight gradient" if head else "none yet")}
    return {
        **terms,
        "activations": T.Term(acts.bytes - saved, "the last block's"),
        "gradients": T.Term(grads.bytes, f"{grads.detail}, all there by the end of backward"),
    }


def _layerwise_peak(
    arch: Architecture,
    s: StepSettings,
    with_grads: dict[str, T.Term],
    extra: dict[str, T.Term],
    acts: T.Term,
    traced: BlockTerms | None,
) -> dict[str, T.Term]:
    """A layer-wise optimizer steps each tensor inside backward as its gradient arrives. The larger of two moments:
    a block's backward (recomputed block, working set, its largest matrix's gradient and step) and a
    vocabulary-sized gradient with its step when no block is being recomputed (the untied head's at the start;
    the tied one's at the end: the head's part, the embedding's and their sum)."""
    pb, head = s.weight_bytes, K.head_weight_grad(arch, s)
    out, inp = T.largest_projected(arch)
    block_step = T.projected_step(arch, s) if s.optimizer.galore else T.elementwise_step(s, out * inp)
    block = {
        **with_grads,
        **extra,
        "activations": acts,
        "gradients": T.Term(out * inp * pb, f"the {out}x{inp} matrix's gradient, stepped as it arrives"),
        "optimizer_step": block_step,
    }
    if arch.tied and head:
        block["logits"] = _pending_head(head)
    copies = 3 if arch.tied else 1
    vocab = {
        **with_grads,
        **extra,
        "work_buffers": T.Term(0.0, "none"),
        "activations": T.Term(0.0, "none left")
        if arch.tied
        else T.Term(K.saved_activations(arch, s, traced).saved, "every block's, before the first block's backward"),
        "gradients": T.Term(
            copies * arch.embedding_params * pb,
            "the tied embedding's gradient: the head's part, its own and their sum"
            if arch.tied
            else "the LM head's gradient, stepped as it arrives",
        ),
        "optimizer_step": T.elementwise_step(s, arch.embedding_params),
    }
    return block if _sum(block) >= _sum(vocab) else vocab


def _sum(terms: dict[str, T.Term]) -> float:
    return math.fsum(t.bytes for t in terms.values())


def _sampling_peak(arch: Architecture, s: StepSettings) -> dict[str, T.Term]:
    """Sampling peaks at the prefill (the prompts' keys and one block's working set) or at the last decoding
    step (the whole KV cache and the last position's logits), whichever is larger."""
    n, p = s.generation_batch_per_device, s.max_prompt_length
    prefill = {
        "kv_cache": T.kv_cache(arch, s, tokens=p),
        "work_buffers": T.work_buffers(arch, s, tokens=0 if s.use_vllm else n * p, seq=p),
    }
    decode = {
        "kv_cache": T.kv_cache(arch, s),
        "logits": T.generation_logits(arch, s),
        "work_buffers": T.sampling_buffers(arch, s),
    }
    if sum(t.bytes for t in prefill.values()) > sum(t.bytes for t in decode.values()):
        return prefill
    return decode


def build_phases(arch: Architecture, s: StepSettings, block: BlockTerms | None = None) -> tuple[Phase, ...]:
    """Assemble every phase of a step from the component formulas (a block's bytes traced, when ``block``)."""
    with_grads = _persistent(arch, s)
    no_grads = {**with_grads, "gradients": T.Term(0.0, "none yet (set to None after each optimizer step)")}
    blocks = T.gathered_weights(arch, s)
    sampling = with_grads if s.grads_during_generation else no_grads
    phases = [_generation_phase(arch, s, sampling, blocks)]
    if s.needs_scoring:
        phases.append(_scoring_phase(arch, s, sampling, blocks))
    before = with_grads if s.grads_before_backward else no_grads
    phases.append(
        _phase(
            "backward_head",
            {
                **before,
                "gathered_weights": blocks,
                "activations": K.activations(arch, s, recompute=False, block=block),
                "logits": K.logits(arch, s),
            },
            arch,
            s,
        )
    )
    # a dequantized 4-bit weight lives inside its matmul's backward, beside one I-sized gradient: below the peak
    layers = _layers_phase(arch, s, with_grads, {"gathered_weights": blocks}, block)
    if s.device == "cuda":
        layers["kernel_scratch"] = K.kernel_scratch(arch, s)
    phases.append(_phase("backward_layers", layers, arch, s))
    if not s.optimizer.layerwise:
        phases.append(_phase("optimizer_step", {**with_grads, "optimizer_step": T.optimizer_step(arch, s)}, arch, s))
    return tuple(phases)


def _persistent(arch: Architecture, s: StepSettings) -> dict[str, T.Term]:
    """What every phase holds once the gradients exist: the process, weights, optimizer state and gradients."""
    if s.device == "cuda":
        base = {
            "cuda_context": T.Term(
                GPU.cuda_context_bytes,
                "per process: the CUDA context, outside the allocator, and the cuBLAS workspaces",
            )
        }
    else:
        base = {"process_baseline": T.process_baseline(s)}
    return {
        **base,
        "weights": T.weights(arch, s),
        "reference_model": T.reference_model(arch, s),
        "vllm": T.vllm_share(s, generating=False),
        "optimizer_state": T.optimizer_state(arch, s),
        "update_monitor": T.update_monitor(arch, s),
        "gradients": T.gradients(arch, s),
        "grad_buckets": T.grad_buckets(arch, s),
        "reward_models": T.Term(float(s.reward_model_bytes), "measured as loaded"),  # 0: none (left out)
    }


def _generation_phase(arch: Architecture, s: StepSettings, sampling: dict[str, T.Term], blocks: T.Term) -> Phase:
    gather_all = s.sharding == "zero3" and s.ds3_gather_for_generation
    components = {
        **sampling,
        "vllm": T.vllm_share(s),
        **_sampling_peak(arch, s),
        "gathered_weights": T.gathered_weights(arch, s, full_model=gather_all) if not s.use_vllm else blocks,
    }
    return _phase("generation", components, arch, s)


def _scoring_phase(arch: Architecture, s: StepSettings, sampling: dict[str, T.Term], blocks: T.Term) -> Phase:
    """The old / reference log-prob passes: the scoring head's logits or one block's work buffers, the larger."""
    pack = K.packing(s)
    head = K.scoring_head(arch, s)
    old_pass = s.beta == 0 or s.needs_old_logps
    # PEFT scores the reference with the adapter disabled (TRL's use_adapter): no branch unless an old pass runs
    work = T.work_buffers(arch, s, tokens=pack.tokens, seq=pack.seq, adapter=old_pass)
    scoring = {"logits": head} if head.bytes >= work.bytes else {"work_buffers": work}  # never alive together
    return _phase("scoring", {**sampling, "gathered_weights": blocks, **scoring}, arch, s)


def _notes(s: StepSettings, block: BlockTerms | None) -> tuple[str, ...]:
    notes = []
    if s.device == "cpu":
        notes.append(
            "CPU: float32 unless told otherwise; the estimate is the process's peak resident memory "
            "(interpreter and libraries included); train() sets glibc's mmap threshold to 64 KiB"
        )
    if s.device == "cuda" and s.dtype == "float32" and (s.bf16 or s.fp16) and block is None:
        notes.append(
            "float32 weights under 16-bit autocast: activations are planned at 2 bytes, but the residual "
            "stream stays float32: expect up to ~40% more at the blocks' backward (simulated at SmolLM2-360M "
            "LoRA); plan with blocks='auto' (it traces the block under the same autocast), load bfloat16 "
            "weights, or check with --simulate"
        )
    if s.use_liger_kernel:
        notes.append(
            "use_liger_kernel in TRL 1.16 patches RMSNorm/SwiGLU/RoPE only: the log-prob head is "
            "already chunked by TRL, so liger saves activation memory, not logits"
        )
    if s.optimizer.paged:
        notes.append(f"{s.optim} pages its state: it can spill to CPU memory instead of failing (slower)")
    if s.shared_prefix:
        notes.append(
            "shared_prefix: each group's prompt is forwarded once before its completions (SDPA block "
            "mask); the LM head scores completion tokens only"
        )
    if s.shards_weights:
        notes.append("weights sharded: one gathered block (plus prefetch) and the LM head are full at a time")
    return tuple(notes)


def estimate(
    model: str | os.PathLike[str] | ModelSpec | Architecture, *, blocks: BlockMode = DEFAULT_BLOCKS, **settings: Any
) -> MemoryEstimate:
    """Estimate the peak GPU memory of one GRPO step.

    Args:
        model: a name or path (:func:`grpo_lite.memory.models.resolve_model`), a ModelSpec or an Architecture.
        blocks: where one block's bytes per token come from (:func:`grpo_lite.memory.blocks.block_source`).
            Default: ``"auto"``; :attr:`MemoryEstimate.block_terms` says which was used.
        **settings: any of :meth:`StepSettings.keys` (GRPOConfig names where they exist).

    Returns:
        A MemoryEstimate whose ``components`` add up to ``total_bytes``.

    Raises:
        ConfigError: invalid settings. ModelError: the model cannot be resolved (a mixture of experts is refused there).

    >>> est = estimate("Qwen2.5-0.5B", method="full", per_device_train_batch_size=8, num_generations=8)
    >>> sorted(est.phase_gib()) == sorted(["generation", "backward_head", "backward_layers", "optimizer_step"])
    True
    """
    if isinstance(model, Architecture):
        arch = model
    elif isinstance(model, ModelSpec):
        arch = model.arch
    else:
        arch = resolve_model(model).arch
    source = block_source(blocks)
    s = StepSettings.resolve(**settings)
    prefix_off = planned_off_reason(arch, s)
    if prefix_off is not None:  # training turns it off for this model: plan what it will run
        s = replace(s, shared_prefix=False)
    block = source(arch, s) if source is not None else None
    phases = build_phases(arch, s, block)
    peak = max(phases, key=lambda p: p.total_bytes)  # the peak over time: phases never overlap
    notes = _notes(s, block)
    if prefix_off is not None:
        notes = (
            f"shared_prefix planned off: training turns it off for this model ({prefix_off}: the packed "
            "block mask would not carry the window)",
            *notes,
        )
    return MemoryEstimate(
        arch=arch,
        settings=s,
        phases=phases,
        peak_phase=peak.name,
        notes=notes,
        block_terms=block.how if block is not None else FORMULAS,
        blocks=blocks,
    )
