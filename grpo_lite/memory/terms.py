"""Byte formulas for each memory component of a GRPO step (derivations: docs/memory.md), each a :class:`Term`: bytes
and the formula with its numbers. Pure arithmetic; :mod:`grpo_lite.memory.estimate` assembles them into phases.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from grpo_lite.defaults import GIB, GPU
from grpo_lite.memory.models import kv_windows
from grpo_lite.memory.optimizers import MONITOR_ELEMENTS, MONITOR_TENSORS, SR_CHUNK, parse_galore_args, state_bytes

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.architectures import Architecture
    from grpo_lite.memory.step_settings import StepSettings

TOKEN_TILE = 4096  # TRL's chunked log-prob kernel: tokens per projection tile
VOCAB_TILE = 32768  # TRL's chunked log-prob kernel: vocabulary columns per tile
PAGE = 4096
NF4_BYTES = 0.5  # 4 bits per weight
NF4_CONST_DOUBLE = 1 / 64 + 4 / (64 * 256)  # 8-bit absmax per 64 weights + fp32 per 256 blocks
NF4_CONST_SINGLE = 4 / 64  # fp32 absmax per 64 weights


@dataclass(frozen=True)
class Term:
    """Bytes of one component and how they were computed."""

    bytes: float
    detail: str


def _g(x: float) -> str:
    return f"{x / GIB:.2f} GiB"


def lora_targets(arch: Architecture, s: StepSettings) -> tuple[tuple[str, int, int], ...]:
    """The decoder linears LoRA wraps (all of them unless ``lora_target_modules`` names a subset)."""
    shapes = arch.linear_shapes()
    if s.lora_target_modules is None:
        return shapes
    picked = tuple(shape for shape in shapes if shape[0] in s.lora_target_modules)
    return picked or shapes  # names of another family: assume every linear (an upper bound)


def lora_params(arch: Architecture, s: StepSettings) -> int:
    """LoRA adapter parameters: r x (in + out) per wrapped linear per layer."""
    return arch.layers * sum(s.lora_r * (out + inp) for _, out, inp in lora_targets(arch, s))


def trainable(arch: Architecture, s: StepSettings) -> tuple[int, int, float]:
    """``(trainable params, largest trainable tensor, bytes per trainable param)``."""
    if s.is_peft:
        largest = max(s.lora_r * max(out, inp) for _, out, inp in lora_targets(arch, s))
        return lora_params(arch, s), largest, s.adapter_bytes
    largest = max(arch.embedding_params, arch.intermediate * arch.hidden)
    return arch.n_params, largest, s.weight_bytes


def weights(arch: Architecture, s: StepSettings) -> Term:
    """Model weights by load dtype; quantization applies to the decoder linears only."""
    e = s.weight_bytes
    head_extra = (4 - e) * arch.vocab * arch.hidden if s.cast_lm_head_to_fp32 else 0
    if s.quantization == "nf4":
        per = NF4_BYTES + (NF4_CONST_DOUBLE if s.double_quant else NF4_CONST_SINGLE)
        b = arch.linear_params * per + arch.other_params * e
        detail = f"{arch.linear_params:,} linear x {per:.4f} B (NF4 + constants) + {arch.other_params:,} x {e} B"
    elif s.quantization == "int8":
        rows = arch.layers * sum(out for _, out, _ in arch.linear_shapes())
        b = arch.linear_params * 1 + rows * 4 + arch.other_params * e
        detail = f"{arch.linear_params:,} linear x 1 B + fp32 row scales + {arch.other_params:,} x {e} B"
    else:
        b = arch.n_params * e
        detail = f"{arch.n_params:,} params x {e} B ({s.dtype})"
    if s.is_peft:
        b += lora_params(arch, s) * s.adapter_bytes
        detail += f" + LoRA {lora_params(arch, s):,} x {s.adapter_bytes} B"
    b += head_extra
    if s.shards_weights:
        b /= s.num_processes
        detail += f", sharded / {s.num_processes}"
    return Term(b, detail)


def reference_model(arch: Architecture, s: StepSettings) -> Term:
    """A frozen copy of the policy, only when beta > 0 and the policy is not a PEFT model."""
    if s.beta == 0 or s.is_peft:
        why = "beta = 0" if s.beta == 0 else "PEFT: the adapter is disabled instead"
        return Term(0.0, f"none ({why})")
    w = weights(arch, s)
    return Term(w.bytes, f"copy of the weights (beta = {s.beta}): {w.detail}")


def gradients(arch: Architecture, s: StepSettings) -> Term:
    """Gradient buffers of the trainable parameters (one tensor at a time for layerwise optimizers)."""
    n, largest, pb = trainable(arch, s)
    if s.optimizer.layerwise:
        return Term(largest * pb, f"layerwise: one tensor at a time, largest {largest:,} x {pb} B")
    b = n * pb
    detail = f"{n:,} trainable x {pb} B"
    if s.shards_grads:
        b /= s.num_processes
        detail += f", sharded / {s.num_processes}"
    return Term(b, detail)


def grad_buckets(arch: Architecture, s: StepSettings) -> Term:
    """DDP's gradient buckets: a second copy of the gradients (gradient_as_bucket_view=False)."""
    if s.sharding != "ddp":
        return Term(0.0, "no DDP")
    n, _, pb = trainable(arch, s)
    return Term(n * pb, f"DDP buckets: {n:,} x {pb} B")


def optimizer_state(arch: Architecture, s: StepSettings) -> Term:
    """Adam moments (+ GaLore projectors, + fp32 master weights under DeepSpeed ZeRO)."""
    opt = s.optimizer
    n, _, pb = trainable(arch, s)
    deepspeed = s.sharding in ("zero2", "zero3")
    # DeepSpeed keeps fp32 master weights and builds states on them; stochastic rounding steps an fp32
    # copy of each bf16 parameter, so states sized from the parameter are created in fp32 too
    state_pb = 4 if deepspeed or s.rounds_stochastically else pb
    # the RMSNorm weights (h each) that full-parameter methods train: each too small for an 8-bit state
    small = arch.layers * 2 * arch.hidden + arch.hidden
    small_state = (2 * arch.layers + 1) * state_bytes(opt, arch.hidden, state_pb)
    if s.is_peft:
        targets = lora_targets(arch, s)
        adapters = [s.lora_r * inp for _, _, inp in targets] + [s.lora_r * out for _, out, _ in targets]
        b = arch.layers * sum(state_bytes(opt, numel, state_pb) for numel in adapters)
        detail = f"{opt.name}: LoRA {n:,} params"
    elif opt.galore:
        g = parse_galore_args(s.optim_args)
        b, projected = 0.0, 0
        for _, out, inp in arch.linear_shapes():
            r = min(g.rank, out, inp)
            b += arch.layers * (state_bytes(opt, r * max(out, inp), state_pb) + r * min(out, inp) * state_pb)
            projected += arch.layers * out * inp
        rest = n - projected - small
        b += state_bytes(opt, rest, state_pb) + small_state
        detail = f"{opt.name}: rank-{g.rank} states for {projected:,} params, full states for {rest + small:,}"
    elif opt.embedding_32bit and opt.state == "int8":
        emb = arch.embedding_params  # transformers keeps nn.Embedding in 32-bit state (tied: the head too)
        b = state_bytes(opt, n - small - emb, state_pb) + small_state + 8.0 * emb
        detail = (
            f"{opt.name}: {n - emb:,} params x {_state_label(opt.state, state_pb)}; the {emb:,}-parameter "
            "embedding in 32-bit state (8 B: transformers' override for bitsandbytes)"
        )
    else:
        b = state_bytes(opt, n - small, state_pb) + small_state
        detail = f"{opt.name}: {n:,} params x {_state_label(opt.state, state_pb)}"
    if deepspeed:
        b += 4 * n
        detail += " + fp32 master weights"
    elif s.rounds_stochastically and opt.state == "param":
        detail += " (fp32: the step runs on an fp32 copy, rounded back stochastically)"
    if s.shards_grads:
        b /= s.num_processes
        detail += f", sharded / {s.num_processes}"
    if opt.paged:
        detail += " (paged: can spill to CPU)"
    return Term(b + monitor_state(arch, s), detail + " + the update monitor's shadow state")


def update_monitor(arch: Architecture, s: StepSettings) -> Term:
    """The update monitor's sampled elements (grpo_lite.precision.monitor): fp32 shadows, window sums, indices, each
    step's snapshot; its shadow optimizer's state is in :func:`monitor_state`."""
    k = MONITOR_TENSORS * MONITOR_ELEMENTS
    per_element = 4 + 4 + 4 + 8 + 4  # shadow, applied, intended, index (int64), before
    if s.optimizer.galore and not s.is_peft:  # GaLore mixes a tensor's elements: whole smallest linears
        out, inp = _smallest_linear(arch)
        return Term(
            k * (per_element - 4) + MONITOR_TENSORS * out * inp * 4,
            f"{MONITOR_TENSORS} whole {out}x{inp} fp32 shadows + {k:,} sampled elements",
        )
    return Term(k * per_element, f"{MONITOR_TENSORS} x {MONITOR_ELEMENTS:,} sampled elements x {per_element} B")


def _smallest_linear(arch: Architecture) -> tuple[int, int]:
    """(out, in) of the smallest linear weight: what the monitor shadows whole under GaLore."""
    _, out, inp = min(arch.linear_shapes(), key=lambda t: t[1] * t[2])
    return out, inp


def monitor_state(arch: Architecture, s: StepSettings) -> float:
    """Bytes of the update monitor's shadow optimizer state: two fp32 moments per shadow element whatever the run's
    state dtype; GaLore: rank-r fp32 states and an fp32 projector per shadowed linear."""
    fp32_moments = 2 * 4
    if s.optimizer.galore and not s.is_peft:
        g = parse_galore_args(s.optim_args)
        out, inp = _smallest_linear(arch)
        r = min(g.rank, out, inp)
        return MONITOR_TENSORS * (fp32_moments * r * max(out, inp) + r * min(out, inp) * 4)
    return MONITOR_TENSORS * fp32_moments * MONITOR_ELEMENTS


def _state_label(state: str, param_bytes: float) -> str:
    if state == "param":
        return f"2 moments x {param_bytes:g} B (the weights' dtype)"
    return "2 moments x 4 B (fp32)" if state == "fp32" else "2 moments x 1 B (blockwise 8-bit) + absmax"


def optimizer_step(arch: Architecture, s: StepSettings) -> Term:
    """Temporaries of the step: foreach AdamW's sqrt buffer, GaLore's SVD of the largest matrix; under
    stochastic rounding the step runs one tensor (or slice) at a time on fp32 copies of it and its gradient."""
    n, largest, pb = trainable(arch, s)
    if not s.rounds_stochastically:
        return _step_temporaries(arch, s, n, largest, pb)
    if not (s.optimizer.galore and not s.is_peft):
        return elementwise_step(s, largest)
    sliced = elementwise_step(s, arch.embedding_params)  # the largest tensor GaLore does not project
    projected = projected_step(arch, s)  # GaLore's projected matrices are stepped whole
    return projected if projected.bytes > sliced.bytes else sliced


def elementwise_step(s: StepSettings, numel: int) -> Term:
    """The step of one tensor of ``numel`` elements updated element-wise; under stochastic rounding one slice of at
    most SR_CHUNK elements at a time, on fp32 copies (grpo_lite.precision.rounding)."""
    if not s.rounds_stochastically:
        return _elementwise_temporaries(s, numel, s.weight_bytes)
    size = min(SR_CHUNK, numel)
    inner = _elementwise_temporaries(s, size, 4)
    return Term(
        8 * size + max(inner.bytes, 6 * size),  # fp32 slice and its gradient; then the step, or the noise
        f"stochastic rounding: fp32 copies of one slice and its gradient ({size:,} x 8 B, tensors over "
        f"{SR_CHUNK:,} elements go in slices), then the larger of: {inner.detail}; the rounding noise",
    )


def _elementwise_temporaries(s: StepSettings, size: int, pb: float) -> Term:
    """Temporaries of an element-wise step of ``size`` elements (one tensor visible to the optimizer)."""
    opt = s.optimizer
    if opt.galore and opt.state == "param":  # galore_torch's AdamW: sqrt(v) + eps, then m / that
        return Term(2.0 * pb * size, f"GaLore's AdamW: 2 temporaries of {size:,} x {pb:g} B")
    if opt.step_temp and s.device == "cpu":
        return Term(2.0 * pb * size, f"single-tensor AdamW: sqrt(v) and the update, {size:,} x {pb:g} B each")
    if opt.step_temp:
        return Term(pb * size, f"foreach AdamW's sqrt(v) of one tensor: {size:,} x {pb:g} B")
    return Term(0.0, f"{opt.name}: in place")


def largest_projected(arch: Architecture) -> tuple[int, int]:
    """``(out, in)`` of the largest decoder matrix: the largest one GaLore projects."""
    _, out, inp = max(arch.linear_shapes(), key=lambda t: t[1] * t[2])
    return out, inp


def projected_step(arch: Architecture, s: StepSettings) -> Term:
    """GaLore's step of its largest projected matrix, stepped whole: the SVD's fp32 U ``[out, k]`` and Vh
    ``[k, in]`` (the projector keeps the one it slices), the update projected back to full size; under stochastic
    rounding fp32 copies of the matrix and its gradient, and the 8-bit AdamW's ``saved_data`` clone.
    """
    out, inp = largest_projected(arch)
    big, k = out * inp, min(out, inp)
    if not s.rounds_stochastically:
        b = 4 * big + 4 * (out * k + k * inp) + s.weight_bytes * big
        return Term(b, f"GaLore SVD of a {out}x{inp} gradient in fp32 (copy, U, Vh) + full-size update")
    kept = 4 * k * (inp if out >= inp else out)
    # the SVD's own moment (8 B and both fp32 factors) is exactly as large: k is the full rank
    b = 12 * big + kept
    how = "the weight's saved_data clone" if s.optimizer.state == "int8" else "the projected-back update"
    return Term(
        b,
        f"GaLore, stochastic rounding: the {out}x{inp} matrix stepped whole: fp32 copies of it and its "
        f"gradient (8 B), {how} (4 B) and the kept SVD factor (as large as both factors during the SVD)",
    )


def _step_temporaries(arch: Architecture, s: StepSettings, n: int, largest: int, pb: float) -> Term:
    opt = s.optimizer
    if opt.galore and not s.is_peft:
        return projected_step(arch, s)
    if opt.step_temp and s.device == "cpu":  # foreach is PyTorch's default only when every tensor is on CUDA
        return Term(
            2 * largest * pb,
            f"single-tensor AdamW: sqrt(v) and the update of the largest tensor ({largest:,} x {pb} B) x 2",
        )
    if opt.step_temp:
        b = n * pb / (s.num_processes if s.shards_grads else 1)
        return Term(b, f"foreach AdamW sqrt(v) buffer: {n:,} x {pb} B")
    return Term(0.0, f"{opt.name}: in place")


def kv_cache(arch: Architecture, s: StepSettings, *, tokens: int | None = None) -> Term:
    """Generation KV cache of every sequence generated at once (transformers generate).

    Args:
        tokens: tokens per sequence cached (the prefill: every layer holds them all). Default: ``P + C`` (the last
            decoding step: a sliding-window layer holds its window), plus one layer's old keys during the cat.
    """
    if s.use_vllm:
        return Term(0.0, "inside vLLM's share")
    seq = s.max_prompt_length + s.max_completion_length if tokens is None else tokens
    windows = kv_windows(arch) if tokens is None else ()
    sliding = sum(n for _, n in windows)
    kept = [(min(seq, window), n) for window, n in windows] + [(seq, arch.layers - sliding)]
    per_layer_token = 2 * arch.kv_dim * s.generation_bytes * s.generation_batch_per_device
    b = per_layer_token * sum(held * n for held, n in kept)
    detail = f"2 x {arch.kv_dim} x {s.generation_bytes} B x {s.generation_batch_per_device} sequences x " + " + ".join(
        f"{n} layers x {held} tokens" for held, n in kept if n
    )
    if sliding:
        detail += f" (sliding windows of {', '.join(str(w) for w, _ in windows)})"
    if tokens is None:
        b += per_layer_token / 2 * max(held for held, n in kept if n)
        detail += ", plus one layer's old keys during the cat"
    return Term(b, detail)


GENERATION_VOCAB_VECTORS = 7  # fp32 vocabulary-sized vectors per sequence while sampling (measured)


def generation_logits(arch: Architecture, s: StepSettings) -> Term:
    """The last position's logits at a decoding step (the model's output)."""
    if s.use_vllm:
        return Term(0.0, "inside vLLM's share")
    b = s.generation_batch_per_device * arch.vocab * s.generation_bytes
    return Term(b, f"{s.generation_batch_per_device} sequences x {arch.vocab:,} vocab x {s.generation_bytes} B")


def sampling_buffers(arch: Architecture, s: StepSettings) -> Term:
    """What sampling a token allocates after the logits: GENERATION_VOCAB_VECTORS fp32 vectors per sequence."""
    if s.use_vllm:
        return Term(0.0, "inside vLLM's share")
    per = 4 * GENERATION_VOCAB_VECTORS
    b = s.generation_batch_per_device * arch.vocab * per
    return Term(b, f"sampling: {s.generation_batch_per_device} sequences x {arch.vocab:,} vocab x {per} B")


def lora_copy_bytes(s: StepSettings) -> int:
    """Bytes per element of the copy of a wrapped linear's input that ``lora_A`` works on (0: none): PEFT casts it to
    the adapters' dtype; under autocast ``lora_A`` saves autocast's 16-bit copy instead."""
    if not s.is_peft:
        return 0
    after_peft = s.adapter_bytes
    if (s.bf16 or s.fp16) and after_peft != s.act_bytes:
        return s.act_bytes
    return after_peft if after_peft != s.weight_bytes else 0


def work_buffers(arch: Architecture, s: StepSettings, *, tokens: int, seq: int, adapter: bool = True) -> Term:
    """No-grad forward working set (one block's intermediates, LoRA's branch) + a dequantized weight when quantized.
    ``adapter=False``: a PEFT forward with the adapter disabled (TRL's reference pass), no branch."""
    e, i = s.act_bytes, arch.intermediate
    per_token = e * (3 * i + 4 * arch.hidden + seq)
    if s.is_peft and adapter:  # the adapter branch's output beside the base's; in the adapters' dtype when it differs
        copy = lora_copy_bytes(s)
        per_token += (2 * copy * i + copy * arch.hidden) if copy else e * i
    b = tokens * per_token
    parts = [f"{tokens:,} tokens x one block's intermediates"] if tokens else []
    if s.quantization != "none":
        b += max(out * inp for _, out, inp in arch.linear_shapes()) * e
        parts.append("one dequantized weight")
    return Term(b, " + ".join(parts) or "none")


def gathered_weights(arch: Architecture, s: StepSettings, *, full_model: bool = False) -> Term:
    """ZeRO-3 / FSDP: full weights of the modules in use (two blocks + the LM head), or all of them."""
    if not s.shards_weights:
        return Term(0.0, "weights not sharded")
    full = weights(arch, s).bytes * s.num_processes
    if full_model:
        return Term(full - full / s.num_processes, "ZeRO-3 gathers the whole model to generate")
    b = (2 * arch.largest_layer_params + arch.vocab * arch.hidden) * s.weight_bytes
    return Term(b, "two gathered blocks (current + prefetch) + the gathered LM head")


def vllm_share(s: StepSettings, *, generating: bool = True) -> Term:
    """vLLM colocate reserves vllm_gpu_memory_utilization x the device's usable memory.

    Args:
        generating: the generation phase. Outside it, with ``vllm_enable_sleep_mode``, TRL 1.16 has put the engine
            to sleep at level 2: only its activations and CUDA graphs stay.
    """
    if not s.use_vllm or s.vllm_mode != "colocate":
        return Term(0.0, "no colocated vLLM")
    assert s.budget_gib is not None  # validated by StepSettings
    b = s.vllm_gpu_memory_utilization * s.budget_gib * GIB
    if s.vllm_enable_sleep_mode and not generating:
        kept = min(b, GPU.vllm_overhead_bytes)
        return Term(
            kept,
            "asleep (vllm_enable_sleep_mode, level 2): weights and KV cache freed, its activations and "
            "CUDA graphs kept",
        )
    return Term(b, f"{s.vllm_gpu_memory_utilization} x {s.budget_gib:.2f} GiB")


def vllm_needed(arch: Architecture, s: StepSettings) -> float:
    """Bytes vLLM needs inside its share: bf16 weights, the KV cache of the batch, its overhead."""
    seq = s.max_prompt_length + s.max_completion_length
    kv = 2 * arch.layers * arch.kv_dim * 2 * s.generation_batch_per_device * seq
    return arch.n_params * 2 + kv + GPU.vllm_overhead_bytes


def process_baseline(s: StepSettings) -> Term:
    """CPU: what the training process holds before any tensor: interpreter, torch, transformers, TRL, data."""
    return Term(GPU.process_baseline_bytes, "Python + torch + transformers + TRL + tokenizer and dataset (measured)")


def heap_slack(arch: Architecture, s: StepSettings, transient: float, *, untouched: float = 0.0) -> Term:
    """CPU: heap pages beyond the live tensors at the phase's peak (a share of its ``transient`` bytes), minus the
    ``untouched`` bytes of the LM head's tile buffer (a vocabulary narrower than its 32768 columns)."""
    b = GPU.heap_slack_share * transient - untouched
    detail = f"{GPU.heap_slack_share:.0%} of {_g(transient)} transient"
    if untouched:
        detail += f", minus {_g(untouched)} of the head buffer never touched (vocabulary < {VOCAB_TILE})"
    return Term(b, detail)
