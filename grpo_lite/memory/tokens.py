"""The byte formulas that grow with the tokens of a micro-batch: saved activations and TRL's fused LM head.

Notation and calibration: docs/memory.md; the packed rows and the LM head's tiles: docs/internals.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grpo_lite.memory.terms import PAGE, TOKEN_TILE, VOCAB_TILE, Term, lora_copy_bytes, lora_targets

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.architectures import Architecture
    from grpo_lite.memory.blocks import BlockTerms
    from grpo_lite.memory.step_settings import StepSettings


HEAD_FWD_TILES = 3  # fp32 tiles alive at the torch fold's forward high point (z, exp(z - max), e * z)
HEAD_BWD_TILES = 7  # fp32 tiles alive in its backward (y, z, log_p, p, grad, is_target.float(), difference)
HEAD_VECTORS = 7 * 4  # fp32 per-token vectors of the fold (running max, sums, target logit, ...)


@dataclass(frozen=True)
class Packing:
    """How a micro-batch reaches the model.

    Attributes:
        rows: sequences in the micro-batch (per_device_train_batch_size).
        groups: rows of the forward: ``rows``, or the packed prompt groups with ``shared_prefix``.
        seq: tokens per forward row: ``P + C``, or ``P + g x C`` for the largest packed group.
    """

    rows: int
    groups: int
    seq: int

    @property
    def tokens(self) -> int:
        """Tokens through the model (packed rows are padded to the longest)."""
        return self.groups * self.seq


def packing(s: StepSettings) -> Packing:
    """The forward rows of one micro-batch: with ``shared_prefix``, whole groups pack ``B / G`` rows of
    ``P + G x C`` tokens; otherwise (TRL shuffles the generation batch) the worst case packs ``min(B, prompts)``
    groups, each padded to the largest, ``P + (B - groups + 1) x C``.

    >>> from grpo_lite.memory.step_settings import StepSettings
    >>> s = StepSettings.resolve(per_device_train_batch_size=8, num_generations=4, max_prompt_length=100,
    ...                          max_completion_length=50, shared_prefix=True)
    >>> packing(s)
    Packing(rows=8, groups=2, seq=300)
    """
    b, p, c = s.per_device_train_batch_size, s.max_prompt_length, s.max_completion_length
    if not s.shared_prefix:
        return Packing(b, b, p + c)
    g = s.num_generations
    if s.spg == 1 and b % g == 0:
        return Packing(b, b // g, p + g * c)
    n = s.generation_batch_per_device
    prompts = math.ceil(n / g) + (1 if n % g else 0)  # a group cut at each end of the device's share
    groups = max(1, min(b, prompts))
    return Packing(b, groups, p + min(g, b - groups + 1) * c)


def head_tokens(s: StepSettings) -> int:
    """Positions the fused LM head scores: every position on CPU, completion tokens on CUDA or when packed."""
    b, c = s.per_device_train_batch_size, s.max_completion_length
    if s.device == "cuda" or s.shared_prefix:
        return b * c
    return b * (s.max_prompt_length + c - 1)


def per_layer_token_bytes(arch: Architecture, s: StepSettings, seq: int) -> tuple[float, str]:
    """Bytes one decoder block saves for backward, per token (padded worst case: see docs/memory.md).

    A linear's input is saved by whoever needs it for a weight gradient: the linear in full fine-tuning, ``lora_A``
    under LoRA; when ``lora_A`` gets its own copy (a dtype cast, dropout), the shared one is not kept.
    """
    e, h, qd, i = s.act_bytes, arch.hidden, arch.q_dim, arch.intermediate
    shared_in = 0 if _lora_own_copy(s) else e  # the norm output / MLP product kept for the next linear
    norm = _final_norm(arch, s) + (0 if s.use_liger_kernel else shared_in * h)
    if arch.gated_mlp:
        mlp = (3 if s.use_liger_kernel else 3 * e + shared_in) * i  # gate, up, SiLU (, the product)
    else:
        mlp = (e + shared_in) * i
    attn = e * qd * 4 + 4 * arch.heads + e * seq  # q, k, v (repeated to all heads), out, logsumexp, mask bias
    lora = 0.0
    if s.is_peft:
        copy, drop = lora_copy_bytes(s), s.lora_dropout > 0
        per_in = ((copy or e) if drop else copy) + (1 if drop else 0)
        out = s.act_bytes if (s.bf16 or s.fp16) else s.adapter_bytes  # lora_A's output, saved by lora_B
        lora = sum(per_in * inp + out * s.lora_r for _, _, inp in lora_targets(arch, s))
    total = 2 * norm + attn + mlp + lora
    return total, f"{total:,.0f} B/token/layer"


def consumed_first(arch: Architecture, s: StepSettings) -> float:
    """Bytes per token of the MLP product a block keeps for ``down_proj`` (or its ``lora_A``'s copy): the first
    saved tensor a block's backward frees."""
    if not _lora_own_copy(s):
        return float(s.act_bytes * arch.intermediate)
    down = [inp for name, _, inp in lora_targets(arch, s) if name == "down_proj"]
    copy = lora_copy_bytes(s) or s.act_bytes
    return float(copy * down[0]) if down else 0.0


def _lora_own_copy(s: StepSettings) -> bool:
    """Whether ``lora_A`` keeps its own copy of a linear's input (a dtype cast or dropout)."""
    return s.is_peft and (lora_copy_bytes(s) > 0 or s.lora_dropout > 0)


def _final_norm(arch: Architecture, s: StepSettings) -> float:
    """Per token, what an RMSNorm keeps: its input's fp32 copy (+ ``x * rsqrt`` when its weight trains)."""
    e, h = s.act_bytes, arch.hidden
    if s.use_liger_kernel:
        return 2 * e * h
    return 4 * h + (0 if s.is_peft else e * h)


def _head_bytes(s: StepSettings) -> int:
    """Bytes per element of the LM head's output tiles."""
    return 4 if s.cast_lm_head_to_fp32 else s.act_bytes


@dataclass(frozen=True)
class SavedActivations:
    """The activation bytes of one micro-batch, by role (worst-case lengths).

    Attributes:
        saved: what the blocks keep for backward (checkpoints only, when checkpointing).
        final_norm: what the final norm keeps (freed by its backward, before the blocks').
        recomputed: one block's saved tensors, recomputed in backward (checkpointing), else 0.
        consumed: the block's MLP product, freed first in the block's backward (:func:`consumed_first`).
        working: the backward working set of one block.
        head_input: the LM head's saved input, ``e x N x h``.
        detail: how ``saved`` was computed.
    """

    saved: float
    final_norm: float
    recomputed: float
    consumed: float
    working: float
    head_input: float
    detail: str


def saved_activations(arch: Architecture, s: StepSettings, block: BlockTerms | None = None) -> SavedActivations:
    """The activations of one micro-batch, by role.

    Args:
        block: one block's traced bytes per token; None: the Llama formulas. Traced, the block in backward keeps
            its own share in ``working`` (``consumed`` takes it out of ``saved``).
    """
    pack = packing(s)
    tokens, e, h = pack.tokens, s.act_bytes, arch.hidden
    where = f"{pack.groups} packed rows x {pack.seq} = {tokens:,} tokens" if s.shared_prefix else f"{tokens:,} tokens"
    n = head_tokens(s)
    if block is not None:
        per, high = block.saved_at(pack.seq, tokens=tokens), block.backward_at(pack.seq, tokens=tokens)
        what = "checkpoints" if s.gradient_checkpointing else "saved"
        detail = f"{where} x {arch.layers} layers x {per:,.0f} B/token/layer ({what}, traced)"
        return SavedActivations(
            arch.layers * per * tokens,
            _final_norm(arch, s) * tokens,
            0.0,
            per * tokens,
            high * tokens,
            e * n * h,
            detail,
        )
    per_layer, per_detail = per_layer_token_bytes(arch, s, pack.seq)
    saved = 0.0
    recomputed = 0.0
    if s.gradient_checkpointing:
        saved += arch.layers * e * h * tokens
        recomputed = per_layer * tokens
        detail = f"{where} x {arch.layers} layers x {e * h} B (checkpoints)"
    else:
        saved += arch.layers * per_layer * tokens
        detail = f"{where} x {arch.layers} layers x {per_detail}"
    if s.shared_prefix:
        saved += pack.groups * pack.seq**2  # the 4-D bool block mask
        detail += f" + {pack.groups} x {pack.seq}^2 block mask"
    # one block's backward: three I-sized gradients, the residual's gradient in fp32 (+ its 16-bit twin)
    working = (3 * e * arch.intermediate + 4 * h + (4 * h if e != 4 else 0)) * tokens
    return SavedActivations(
        saved, _final_norm(arch, s) * tokens, recomputed, consumed_first(arch, s) * tokens, working, e * n * h, detail
    )


def activations(arch: Architecture, s: StepSettings, *, recompute: bool, block: BlockTerms | None = None) -> Term:
    """Saved activations of one micro-batch (worst-case lengths).

    Args:
        recompute: at a block's backward (True: the head's input and the final norm's are gone, the block is
            recomputed when checkpointing, its MLP product consumed first) or at the LM head (False).
    """
    a = saved_activations(arch, s, block)
    if not recompute:
        return Term(
            a.saved + a.final_norm + a.head_input,
            a.detail + f" + the final norm + the head's input ({head_tokens(s):,} x {arch.hidden})",
        )
    if block is not None:
        return Term(a.saved - a.consumed, a.detail + ", less the block in backward (its own share is in work_buffers)")
    again = " + one recomputed layer" if a.recomputed else ""
    return Term(
        a.saved + a.recomputed - a.consumed,
        a.detail + again + ", less the block's MLP product (consumed first by its backward)",
    )


def backward_working_set(arch: Architecture, s: StepSettings, block: BlockTerms | None = None) -> Term:
    """Gradients of one block's intermediates during its backward; traced: the block's whole high point."""
    a = saved_activations(arch, s, block)
    if block is not None:
        return Term(
            a.working,
            f"{packing(s).tokens:,} tokens x {a.working / packing(s).tokens:,.0f} B: one block's "
            f"backward at its high point ({block.how})",
        )
    return Term(
        a.working,
        f"{packing(s).tokens:,} tokens x (3 e I + 4 h{' + 4 h' if s.act_bytes != 4 else ''}): one block's backward",
    )


def _tile_elems(arch: Architecture, s: StepSettings) -> int:
    return min(head_tokens(s), TOKEN_TILE) * min(arch.vocab, VOCAB_TILE)


def head_weight_grad(arch: Architecture, s: StepSettings) -> float:
    """The LM head's weight gradient in the load dtype (full fine-tuning; tied: pending until the embedding's)."""
    return 0.0 if s.is_peft else float(s.weight_bytes * arch.vocab * arch.hidden)


def logits(arch: Architecture, s: StepSettings) -> Term:
    """TRL's chunked log-prob head at its backward: the tile buffer, fp32 gradients, the torch fold's tiles."""
    n, h = head_tokens(s), arch.hidden
    ec = _head_bytes(s)
    buf = min(n, TOKEN_TILE) * VOCAB_TILE * ec
    b = buf + HEAD_VECTORS * n + 4 * n * h
    casts = (ec if ec != 4 else 0) * n * h  # grad_hidden.to(hidden.dtype) at the end
    detail = f"{n:,} scored tokens: {min(n, TOKEN_TILE)}x{VOCAB_TILE} buffer, fp32 grad of hidden"
    if not s.is_peft:
        b += 4 * arch.vocab * h
        w = s.weight_bytes  # TRL returns grad_weight.to(weight.dtype), layer-wise optimizers or not
        casts += (w if w != 4 else 0) * arch.vocab * h
        detail += f" + fp32 grad of lm_head ({arch.vocab:,}x{h})"
    if s.device == "cuda":
        return Term(b + casts, detail + " (Triton fold in place)")
    t = _tile_elems(arch, s)
    tiles = HEAD_BWD_TILES * 4 * t + t
    detail += f" + torch fold: {HEAD_BWD_TILES} fp32 + 1 bool tile of {t:,}"
    return Term(b + max(tiles, casts), detail)


def scoring_head(arch: Architecture, s: StepSettings) -> Term:
    """Forward-only chunked head (old / reference log-probs): final hidden states, the head's copy, buffer, tiles."""
    n, pack = head_tokens(s), packing(s)
    ec = _head_bytes(s)
    b = s.act_bytes * (pack.tokens + n) * arch.hidden + min(n, TOKEN_TILE) * VOCAB_TILE * ec + HEAD_VECTORS * n
    detail = f"{n:,} scored tokens, one {min(n, TOKEN_TILE)}x{VOCAB_TILE} buffer"
    if s.device != "cuda":
        t = _tile_elems(arch, s)
        b += HEAD_FWD_TILES * 4 * t
        detail += f" + {HEAD_FWD_TILES} fp32 tiles of {t:,}"
    return Term(b, detail)


def untouched_buffer(arch: Architecture, s: StepSettings) -> float:
    """CPU: bytes of the head's ``[min(N, 4096), 32768]`` buffer never written (pages mapped on first touch) when
    the vocabulary is narrower than its columns."""
    if s.device == "cuda" or arch.vocab >= VOCAB_TILE:
        return 0.0
    ec = _head_bytes(s)
    row = VOCAB_TILE * ec
    touched = min(row, math.ceil(arch.vocab * ec / PAGE) * PAGE)
    return float(min(head_tokens(s), TOKEN_TILE) * (row - touched))


def kernel_scratch(arch: Architecture, s: StepSettings) -> Term:
    """CUDA: the attention backward's fp32 accumulator of the queries' gradient inside its kernel, one layer at a
    time (FlashAttention-2's ``dq_accum``, the memory-efficient kernel's gradQ): no tensor-level trace sees it."""
    if s.device != "cuda":
        return Term(0.0, "CPU: no fused attention kernel")
    tokens = packing(s).tokens
    return Term(
        4.0 * tokens * arch.q_dim,
        f"attention backward's fp32 query-gradient accumulator: {tokens:,} tokens "
        f"x {arch.q_dim} x 4 B, one layer at a time (FlashAttention-2 dq_accum)",
    )
