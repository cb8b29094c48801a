"""Decode a batch of prompts with their common prefix forwarded once: the same greedy tokens as left padding, in
rows exactly as wide as the caller's (sampling in training, and evaluation; docs/internals.md).
"""

from __future__ import annotations

import inspect
from typing import Any

from grpo_lite.defaults import TRAINER


def common_prefix_length(lists: list[list[int]]) -> int:
    """Tokens all ``lists`` start with, leaving every list at least one token of its own.

    >>> common_prefix_length([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 3]])
    2
    """
    common = 0
    for column in zip(*lists):
        if any(t != column[0] for t in column):
            break
        common += 1
    return max(0, min(common, min(len(ids) for ids in lists) - 1))


def cache_keyword(model: Any) -> str:
    """transformers 5 renames ``past_key_values`` to ``cache`` (the old name goes in 5.40 / 6.0)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def prefix_cache_inputs(model: Any, lists: list[list[int]], pad_id: int, width: int | None = None) -> dict[str, Any]:
    """``generate`` inputs for the token ``lists``: the common prefix's cache plus the rows, or left padding when
    fewer than two rows share ``grpo_lite.defaults.TRAINER.min_shared_prefix`` tokens; rows ``width`` wide (the caller's padded prompts';
    Default: the longest list's). Call it under no_grad."""
    import torch  # heavy: torch

    longest = max(len(ids) for ids in lists)
    if width is None:
        width = longest
    if width < longest:
        raise ValueError(f"width {width} is narrower than the longest prompt ({longest} tokens)")
    common, device = common_prefix_length(lists), model.device
    if len(lists) < 2 or common < TRAINER.min_shared_prefix:
        rows = [[pad_id] * (width - len(ids)) + ids for ids in lists]
        mask = [[0] * (width - len(ids)) + [1] * len(ids) for ids in lists]
        return {"input_ids": torch.tensor(rows, device=device), "attention_mask": torch.tensor(mask, device=device)}
    from transformers import DynamicCache

    name, cache = cache_keyword(model), DynamicCache()
    model(input_ids=torch.tensor([lists[0][:common]], device=device), use_cache=True, **{name: cache})
    cache.batch_repeat_interleave(len(lists))
    rows = [ids[:common] + [pad_id] * (width - len(ids)) + ids[common:] for ids in lists]
    mask = [[1] * common + [0] * (width - len(ids)) + [1] * (len(ids) - common) for ids in lists]
    return {
        "input_ids": torch.tensor(rows, device=device),
        "attention_mask": torch.tensor(mask, device=device),
        name: cache,
    }
