"""Shared-prefix log-prob forward for GRPO: each prompt forwarded once for its group's completions, in one packed
sequence with a block mask and TRL's own positions; checked once against TRL's forward (:func:`self_check`), with
fallbacks where :func:`unsupported_reason` says (docs/internals.md, docs/shared_prefix.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from accelerate.utils import extract_model_from_parallel, is_peft_model
from torch import Tensor, nn

from grpo_lite.memory.packing import sliding_window_reason
from grpo_lite.training.step.trl_seam import attn_implementation, patched_lm

# Attention implementations that take a custom 4-D mask as given (bool for sdpa, additive for eager).
SUPPORTED_ATTENTION = ("sdpa", "eager")
_PROMPT, _PAD = -1, -2  # segment ids of prompt and padding tokens; completions are 0, 1, ...


@dataclass(frozen=True)
class PackedGroups:
    """One packed row per distinct prompt, and where each scored completion token comes from."""

    input_ids: Tensor  # [n_groups, L]
    position_ids: Tensor  # [n_groups, L]
    allowed: Tensor  # [n_groups, 1, L, L] bool: query (dim 2) may attend key (dim 3)
    hidden_index: Tensor  # [K] index into the flattened [n_groups * L] hidden states
    target_ids: Tensor  # [K] the completion token each of those hidden states predicts
    rows: Tensor  # [K] completion row (0..B-1) of each scored token
    cols: Tensor  # [K] completion column (0..C-1) of each scored token

    def attention_mask(self, attn_implementation: str, dtype: torch.dtype) -> Tensor:
        """The 4-D mask as the attention implementation takes it: bool for sdpa, additive otherwise."""
        if attn_implementation == "sdpa":
            return self.allowed
        zero = torch.zeros((), dtype=dtype, device=self.allowed.device)
        return torch.where(self.allowed, zero, torch.finfo(dtype).min)

    def to_grid(self, values: Tensor, rows: int, cols: int) -> Tensor:
        """Scatter per-token ``values`` [K] into TRL's [B, C] layout, zero at unscored positions."""
        return values.new_zeros(rows, cols).index_put((self.rows, self.cols), values)


def group_prompts(prompt_ids: Tensor, prompt_mask: Tensor) -> Tensor:
    """Group id [B] of each row: rows whose unpadded prompts are identical share an id."""
    key = prompt_ids.masked_fill(prompt_mask == 0, -1)
    return torch.unique(key, dim=0, return_inverse=True)[1]


def is_packable(prompt_mask: Tensor, completion_mask: Tensor) -> bool:
    """Whether the layout is TRL's: prompts left-padded and non-empty, completions right-padded."""
    prompt_ok = bool(prompt_mask[:, -1].all()) and bool((prompt_mask[:, 1:] >= prompt_mask[:, :-1]).all())
    return prompt_ok and bool((completion_mask[:, 1:] <= completion_mask[:, :-1]).all())


def pack_groups(
    prompt_ids: Tensor, prompt_mask: Tensor, completion_ids: Tensor, completion_mask: Tensor, pad_token_id: int = 0
) -> PackedGroups:
    """Pack each distinct prompt once, followed by the unpadded completions of all rows that share it (rows need
    not be adjacent nor form whole groups)."""
    if not is_packable(prompt_mask, completion_mask):
        raise ValueError("expected left-padded, non-empty prompts and right-padded completions")
    device, width = prompt_ids.device, prompt_ids.size(1)
    groups = group_prompts(prompt_ids, prompt_mask)
    lengths = completion_mask.sum(1).tolist()
    sequences: list[tuple[Tensor, Tensor, Tensor]] = []  # ids, positions, segments
    scored: list[tuple[int, Tensor, Tensor, int]] = []  # group, local predecessor index, targets, row
    for g in range(int(groups.max()) + 1):
        members = (groups == g).nonzero().flatten().tolist()
        prompt_cols = prompt_mask[members[0]].nonzero().flatten()
        ids, positions = [prompt_ids[members[0], prompt_cols]], [prompt_cols]
        segments = [torch.full_like(prompt_cols, _PROMPT)]
        offset = len(prompt_cols)
        for k, row in enumerate(members):
            m = int(lengths[row])
            if m == 0:
                continue
            ids.append(completion_ids[row, :m])
            positions.append(torch.arange(width, width + m, device=device))
            segments.append(torch.full((m,), k, device=device, dtype=torch.long))
            predecessor = torch.arange(offset - 1, offset + m - 1, device=device)
            predecessor[0] = len(prompt_cols) - 1  # the last prompt token predicts token 0
            scored.append((g, predecessor, completion_ids[row, :m], row))
            offset += m
        sequences.append((torch.cat(ids), torch.cat(positions), torch.cat(segments)))

    length = max(len(s[0]) for s in sequences)

    def padded(i: int, value: int) -> Tensor:
        return torch.stack([nn.functional.pad(s[i], (0, length - len(s[i])), value=value) for s in sequences])

    input_ids, position_ids, segment = padded(0, pad_token_id), padded(1, 0), padded(2, _PAD)
    index = torch.arange(length, device=device)
    causal = index[None, :] <= index[:, None]  # [L(query), L(key)]
    query, key = segment[:, :, None], segment[:, None, :]
    allowed = causal & (query != _PAD) & (key != _PAD) & ((key == _PROMPT) | (key == query))
    allowed |= torch.eye(length, dtype=torch.bool, device=device)  # pads see themselves: no empty row, no NaN
    empty = torch.zeros(0, dtype=torch.long, device=device)
    return PackedGroups(
        input_ids=input_ids,
        position_ids=position_ids,
        allowed=allowed.unsqueeze(1),
        hidden_index=torch.cat([g * length + p for g, p, _, _ in scored] or [empty]),
        target_ids=torch.cat([t for _, _, t, _ in scored] or [empty]),
        rows=torch.cat([torch.full_like(t, r) for _, _, t, r in scored] or [empty]),
        cols=torch.cat([torch.arange(len(t), device=device) for _, _, t, _ in scored] or [empty]),
    )


def _chunks(groups: Tensor, prompt_mask: Tensor, completion_mask: Tensor, max_tokens: int | None) -> list[Tensor]:
    """Row indices per forward: whole groups, greedily, up to ``max_tokens`` packed tokens (at least one group)."""
    if max_tokens is None:
        return [torch.arange(groups.numel(), device=groups.device)]
    chunks: list[list[Tensor]] = [[]]
    used = 0
    for g in range(int(groups.max()) + 1):
        rows = (groups == g).nonzero().flatten()
        size = int(prompt_mask[rows[0]].sum() + completion_mask[rows].sum())
        if chunks[-1] and used + size > max_tokens:
            chunks.append([])
            used = 0
        chunks[-1].append(rows)
        used += size
    return [torch.cat(rows) for rows in chunks]


@contextmanager
def _keep_hidden(backbone: nn.Module, index: Tensor) -> Iterator[None]:
    """Make ``backbone`` return only the flattened hidden states at ``index``, as one [1, K, H] row."""

    def hook(module: nn.Module, args: Any, output: Any) -> Any:
        hidden = output.last_hidden_state
        output.last_hidden_state = hidden.reshape(-1, hidden.size(-1))[index].unsqueeze(0)
        return output

    handle = backbone.register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


def shared_prefix_logps_and_entropies(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Tensor,
    logits_to_keep: int,
    *,
    batch_size: int | None = None,
    compute_entropy: bool = False,
    autocast: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> tuple[Tensor, Tensor | None]:
    """Shared-prefix equivalent of TRL's ``_get_per_token_logps_and_entropies`` (text-only, no aux loss; ``model``
    carries TRL's fused LM head): per-token log-probs and entropies [B, logits_to_keep], zero where
    ``attention_mask`` is 0; ``batch_size`` bounds each forward to about that many unshared rows' tokens."""
    lm = patched_lm(model)
    attn, dtype = attn_implementation(lm.config), lm.get_input_embeddings().weight.dtype
    prompt_ids, completion_ids = input_ids[:, :-logits_to_keep], input_ids[:, -logits_to_keep:]
    prompt_mask, completion_mask = attention_mask[:, :-logits_to_keep], attention_mask[:, -logits_to_keep:]
    groups = group_prompts(prompt_ids, prompt_mask)
    max_tokens = None if batch_size is None else batch_size * input_ids.size(1)
    logps = torch.zeros(completion_ids.shape, device=input_ids.device)
    entropies = torch.zeros_like(logps) if compute_entropy else None
    for rows in _chunks(groups, prompt_mask, completion_mask, max_tokens):
        packed = pack_groups(prompt_ids[rows], prompt_mask[rows], completion_ids[rows], completion_mask[rows])
        if packed.target_ids.numel() == 0:
            continue
        with _keep_hidden(lm.base_model, packed.hidden_index), autocast():
            out = model(
                input_ids=packed.input_ids,
                attention_mask=packed.attention_mask(attn, dtype),
                position_ids=packed.position_ids,
                shift_labels=packed.target_ids.unsqueeze(0),
                fused_lm_head=True,
            )
        grid = (len(rows), logits_to_keep)
        logps = logps.index_put((rows,), packed.to_grid(out.log_probs[0].float(), *grid))
        if entropies is not None:
            entropies = entropies.index_put((rows,), packed.to_grid(out.entropy[0].float(), *grid))
    return logps, entropies


def unsupported_reason(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor, logits_to_keep: int,
    compute_aux_loss: bool = False, extra: dict[str, Any] | None = None,
) -> str | None:  # fmt: skip
    """Why the shared-prefix path shouldn't serve this call of ``_get_per_token_logps_and_entropies``, or None."""
    if compute_aux_loss:
        return "MoE aux loss"
    if any(value is not None for value in (extra or {}).values()):
        return "multimodal inputs"
    peft_model = extract_model_from_parallel(model)
    if is_peft_model(peft_model) and peft_model.active_peft_config.is_prompt_learning:
        return "PEFT prompt learning"
    config = patched_lm(model).config
    if config.is_encoder_decoder or config.get_text_config() is not config:
        return "not a text-only decoder"
    if attn_implementation(config) not in SUPPORTED_ATTENTION:
        return f"attention {attn_implementation(config)!r} does not take a custom 4-D mask"
    window_reason = sliding_window_reason(config, attention_mask.size(1))  # the planner's rule too
    if window_reason is not None:
        return window_reason
    prompt_mask, completion_mask = attention_mask[:, :-logits_to_keep], attention_mask[:, -logits_to_keep:]
    if not is_packable(prompt_mask, completion_mask) or not completion_mask.any():
        return "not TRL's padding layout, or no completion token"
    groups = group_prompts(input_ids[:, :-logits_to_keep], prompt_mask)
    return "no repeated prompt" if int(groups.max()) + 1 == groups.numel() else None


@dataclass(frozen=True)
class SelfCheck:
    """|TRL - shared| per-token log-probs (and entropies) over the checked rows' completion tokens. SmolLM2-135M:
    fp32 max 3e-5 / mean 4e-6; bf16 max 0.2 / mean 0.05. A mask bug costs tenths of a nat on the mean."""

    max_abs_diff: float
    mean_abs_diff: float
    max_entropy_diff: float
    atol: float  # on the max differences; default 1e-3 in fp32, 1.0 in bf16/fp16
    mean_atol: float  # on the mean log-prob difference; default 1e-4 in fp32, 0.1 in bf16/fp16
    n_tokens: int
    n_rows: int = 0  # rows of the micro-batch compared

    @property
    def ok(self) -> bool:
        return max(self.max_abs_diff, self.max_entropy_diff) <= self.atol and self.mean_abs_diff <= self.mean_atol


CHECK_GROUPS = 2  # prompt groups of the first micro-batch whose last row the self-check compares


def check_rows(
    input_ids: Tensor, attention_mask: Tensor, logits_to_keep: int, max_groups: int = CHECK_GROUPS
) -> Tensor:
    """The rows :func:`self_check` compares: of the groups with the longest and the shortest prompt (up to
    ``max_groups``), the last row with a completion token (packed last: what a leaking mask, a shifted position or
    a wrong hidden-state index moves).

    >>> mask = torch.tensor([[0, 1, 1, 1, 0], [1, 1, 1, 1, 1], [0, 1, 1, 1, 1], [1, 1, 1, 1, 0], [0, 1, 1, 0, 0]])
    >>> ids = torch.tensor([[0, 5, 6, 7, 0], [4, 5, 6, 7, 8], [0, 5, 6, 7, 9], [4, 5, 6, 7, 0], [0, 5, 6, 0, 0]])
    >>> check_rows(ids, mask, 2).tolist()  # rows 0, 2, 4 share prompt [5, 6]; 1, 3 share [4, 5, 6]
    [3, 2]
    """
    prompt_mask, completion_mask = attention_mask[:, :-logits_to_keep], attention_mask[:, -logits_to_keep:]
    groups = group_prompts(input_ids[:, :-logits_to_keep], prompt_mask)
    scored = completion_mask.any(1)
    lasts = []
    for g in range(int(groups.max()) + 1):
        members = ((groups == g) & scored).nonzero().flatten()
        if members.numel():
            lasts.append(int(members.max()))
    lasts.sort(key=lambda row: -int(prompt_mask[row].sum()))
    ends = lasts[:1] + lasts[-1:] + lasts[1:-1]
    return torch.tensor(list(dict.fromkeys(ends))[: max(max_groups, 1)], dtype=torch.long, device=input_ids.device)


def default_tolerances(trainer: Any, lm: nn.Module) -> tuple[bool, float, float]:
    """``(low precision, atol, mean_atol)`` of the checks against TRL's path: bf16/fp16 training or weights
    get 1.0 / 0.1, fp32 1e-3 / 1e-4 (see :class:`SelfCheck`)."""
    low = bool(trainer.args.bf16 or trainer.args.fp16) or patched_lm(lm).dtype != torch.float32
    return (True, 1.0, 0.1) if low else (False, 1e-3, 1e-4)


def self_check(
    trainer: Any, reference: Callable[..., tuple[Tensor, Tensor | None, Any]],
    shared: Callable[[bool], tuple[Tensor, Tensor | None]], model: nn.Module, input_ids: Tensor,
    attention_mask: Tensor, logits_to_keep: int, atol: float | None = None, mean_atol: float | None = None,
) -> tuple[SelfCheck, tuple[Tensor, Tensor | None]]:  # fmt: skip
    """TRL's path (``reference``) without gradient on a few rows (:func:`check_rows`), on the model unwrapped from
    DDP (no collective) and first (its memory is gone before the shared forward keeps its graph); then
    ``shared(compute_entropy)`` on the whole micro-batch; compared on those rows. Returns the check and the shared
    output, which serves the call when the check passes."""
    unwrapped = extract_model_from_parallel(model)
    lm = patched_lm(unwrapped)
    entropy = lm is patched_lm(trainer.model)  # TRL's fused head computes entropies for the policy only
    rows = check_rows(input_ids, attention_mask, logits_to_keep)
    with torch.no_grad():
        ref, ref_entropy, _ = reference(
            unwrapped, input_ids[rows], attention_mask[rows], logits_to_keep, compute_entropy=entropy
        )
    logps, entropies = shared(entropy)
    mask = attention_mask[rows, -logits_to_keep:].bool()
    diff = (ref - logps[rows].detach())[mask].abs()
    _, default_atol, default_mean_atol = default_tolerances(trainer, lm)
    check = SelfCheck(
        max_abs_diff=float(diff.max()),
        mean_abs_diff=float(diff.mean()),
        max_entropy_diff=0.0
        if ref_entropy is None or entropies is None
        else float((ref_entropy - entropies[rows].detach())[mask].abs().max()),
        atol=default_atol if atol is None else atol,
        mean_atol=default_mean_atol if mean_atol is None else mean_atol,
        n_tokens=int(mask.sum()),
        n_rows=len(rows),
    )
    return check, (logps, entropies)
