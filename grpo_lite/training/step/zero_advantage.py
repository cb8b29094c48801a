"""Rows whose advantage is exactly zero skip their training forward and backward, where that provably leaves the
gradient unchanged (why, for every ``loss_type``: docs/internals.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from grpo_lite.training.step.trl_seam import entropy_bonus_enabled

Divisor = Literal["rows", "tokens", "carried"]
# loss_type -> what TRL 1.16 divides its loss by (docs/internals.md's table)
DIVISORS: dict[str, Divisor] = {
    "grpo": "rows",
    "sapo": "rows",
    "luspo": "rows",
    "dr_grpo": "rows",
    "bnpo": "tokens",
    "dapo": "carried",
    "cispo": "carried",
    "vespo": "carried",
}
# inputs a micro-batch may hold for a skip: per-row tensors, per-row-and-completion-token tensors, and the scalar
ROW_KEYS = ("prompt_ids", "prompt_mask", "advantages")
COLUMN_KEYS = (
    "completion_ids",
    "completion_mask",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
    "tool_mask",
)
SCALAR_KEYS = ("num_items_in_batch",)


def config_reason(trainer: Any) -> str | None:
    """Why this trainer's loss cannot skip zero-advantage rows (None: it can)."""
    loss_type = getattr(trainer, "loss_type", None)
    if loss_type not in DIVISORS:
        return f"loss_type={loss_type!r} is not one of {', '.join(DIVISORS)}"
    if getattr(trainer, "beta", None) != 0.0:
        return f"beta={getattr(trainer, 'beta', None)}: the KL term's gradient counts every row"
    if entropy_bonus_enabled(trainer):
        return "an entropy bonus reads every row's entropy"
    if getattr(trainer, "top_entropy_quantile", 0.0) < 1.0:
        return "top_entropy_quantile < 1 ranks every row's entropy"
    if getattr(trainer, "aux_loss_enabled", True):
        return "the router auxiliary loss counts every row"
    return None


@dataclass
class SkipPlan:
    """One micro-batch's kept rows: their inputs, the factor on their loss, and what was not forwarded."""

    inputs: dict[str, Any]
    scale: Tensor | float
    rows: int
    kept_rows: int
    positions: int  # rows x (prompt + completion width): what the forward would have run
    kept_positions: int


def _mask(inputs: dict[str, Any]) -> Tensor:
    """The loss's token mask, as TRL builds it."""
    mask = inputs["completion_mask"]
    return mask if "tool_mask" not in inputs else mask * inputs["tool_mask"]


def split(inputs: dict[str, Any], divisor: Divisor, min_rows: int = 1) -> SkipPlan | None:
    """The micro-batch without its zero-advantage rows, or None when nothing is skipped (no such row, as many
    rows to keep as it has, or an input this split does not know how to cut).

    Args:
        min_rows: rows to keep at least; zero-advantage rows make up the count, the shortest first.
    """
    if not set(inputs) <= {*ROW_KEYS, *COLUMN_KEYS, *SCALAR_KEYS} or not all(k in inputs for k in ROW_KEYS[:2]):
        return None
    advantages = inputs["advantages"]
    zero = advantages == 0 if advantages.dim() == 1 else (advantages == 0).all(dim=-1)
    rows = zero.numel()
    if not bool(zero.any()):
        return None
    mask = _mask(inputs)
    lengths = inputs["completion_mask"].sum(-1)
    keep = ~zero
    # all zero: the shortest row runs, its loss times 0 (every process still steps)
    factor = 1.0 if bool(keep.any()) else 0.0
    missing = max(min_rows, 1) - int(keep.sum())
    if missing >= int(zero.sum()):  # every row runs: TRL's own call
        return None
    if missing > 0:  # the shortest zero rows make up the count (their loss is exactly zero)
        order = torch.sort(torch.where(zero, lengths, lengths.max() + 1), stable=True).indices
        keep[order[:missing]] = True
    index = keep.nonzero().squeeze(-1)
    used = inputs["completion_mask"][index]
    width = int(used.nonzero()[:, 1].max()) + 1 if bool(used.any()) else 1
    full_width = inputs["completion_ids"].size(1)
    out: dict[str, Any] = {}
    for key, value in inputs.items():
        if key in SCALAR_KEYS:
            out[key] = value
        elif (key in COLUMN_KEYS or key == "advantages") and value.dim() == 2 and value.size(1) == full_width:
            out[key] = value[index, :width]
        else:
            out[key] = value[index]
    kept = int(index.numel())
    if divisor == "rows":
        scale: Tensor | float = factor * kept / rows
    elif divisor == "tokens":
        scale = factor * mask[index].sum().clamp(min=1.0) / mask.sum().clamp(min=1.0)
    else:
        scale = factor
    prompt = inputs["prompt_ids"].size(1)
    return SkipPlan(out, scale, rows, kept, rows * (prompt + full_width), kept * (prompt + width))


class ZeroAdvantageSkip:
    """What a trainer's skip did over the run (run.json) and per micro-batch: ``skip/zero_advantage_rows`` (the
    share of rows skipped) and ``skip/saved_positions`` (the share of padded positions not forwarded)."""

    def __init__(self, enabled: bool, reason: str | None = None) -> None:
        self.record: dict[str, Any] = {
            "enabled": enabled,
            "rows": 0,
            "skipped_rows": 0,
            "positions": 0,
            "skipped_positions": 0,
            "saved_share": 0.0,
        }
        if reason is not None:
            self.record["off"] = reason

    @property
    def enabled(self) -> bool:
        return bool(self.record["enabled"])

    def count(self, plan: SkipPlan | None, inputs: dict[str, Any]) -> dict[str, float]:
        """Add one micro-batch to the record; its metrics."""
        if plan is None:
            rows = int(inputs["completion_ids"].size(0))
            positions = rows * (int(inputs["prompt_ids"].size(1)) + int(inputs["completion_ids"].size(1)))
            skipped_rows, skipped_positions = 0, 0
        else:
            rows, positions = plan.rows, plan.positions
            skipped_rows, skipped_positions = plan.rows - plan.kept_rows, plan.positions - plan.kept_positions
        r = self.record
        r["rows"] += rows
        r["skipped_rows"] += skipped_rows
        r["positions"] += positions
        r["skipped_positions"] += skipped_positions
        r["saved_share"] = round(r["skipped_positions"] / r["positions"], 4) if r["positions"] else 0.0
        return {
            "skip/zero_advantage_rows": skipped_rows / rows if rows else 0.0,
            "skip/saved_positions": skipped_positions / positions if positions else 0.0,
        }
