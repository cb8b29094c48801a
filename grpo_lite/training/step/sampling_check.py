"""The first shared-prefix sampling call of a run, checked against TRL's own on a slice from one RNG state: the
layout, the tokens and their log-probs (:attr:`SamplingCheck.ok`; the rule and why a slice suffices:
docs/internals.md).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor

CHECK_ROWS = 4  # rows of the batch the first call is checked on
CHECK_TOKENS = 8  # tokens sampled per row for the check: a layout error shows from the first


@dataclass(frozen=True)
class SamplingCheck:
    """The shared-prefix sampling against TRL's on one ``generate`` call."""

    width: int  # TRL's padded prompt width: where it slices the completions
    shared_width: int  # the shared layout's width
    rows: int
    rows_parted: int  # rows whose sampled tokens differ somewhere
    n_tokens: int  # completion tokens whose log-probs were compared
    max_abs_diff: float
    mean_abs_diff: float
    exact: bool  # fp32: every token must be the same
    atol: float
    mean_atol: float

    @property
    def ok(self) -> bool:
        return not self.reason()

    def reason(self) -> str:
        """What failed, in a few words ("" when ok)."""
        if self.shared_width != self.width:
            return f"rows {self.shared_width} wide where TRL slices at {self.width}: completions would be cut"
        if self.exact and self.rows_parted:
            return f"{self.rows_parted} of {self.rows} rows sampled other tokens in fp32"
        if not (self.max_abs_diff <= self.atol and self.mean_abs_diff <= self.mean_atol):
            return f"log-probs differ from TRL's by up to {self.max_abs_diff:.2g} (mean {self.mean_abs_diff:.2g})"
        return ""

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


class _SampledLogProbs:
    """A logits processor that keeps the log-prob of each token ``generate`` samples (one step of logits held)."""

    def __init__(self) -> None:
        self.logps: list[Tensor] = []
        self._pending: Tensor | None = None

    def _take(self, tokens: Tensor) -> None:
        if self._pending is not None:
            self.logps.append(self._pending.gather(1, tokens[:, None].to(self._pending.device))[:, 0])
            self._pending = None

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        if self._pending is not None:
            self._take(input_ids[:, -1])
        self._pending = torch.log_softmax(scores.float(), dim=-1)
        return scores

    def finish(self, completions: Tensor) -> Tensor:
        """[B, n] log-probs of the n tokens sampled (the last one read from the output)."""
        if completions.size(1):
            self._take(completions[:, -1])
        if not self.logps:
            return torch.zeros(completions.shape)
        return torch.stack(self.logps, dim=1)[:, : completions.size(1)].cpu()


def compare_samples(
    ref_ids: Tensor,
    ids: Tensor,
    ref_logps: Tensor,
    logps: Tensor,
    eos_token_ids: Sequence[int],
    *,
    width: int,
    shared_width: int,
    exact: bool,
    atol: float,
    mean_atol: float,
) -> SamplingCheck:
    """Compare TRL's completions (``ref_ids``, [B, n] after TRL's slice) and log-probs with the shared layout's, up
    to each row's first EOS (TRL cuts there).

    >>> ids, logps = torch.tensor([[5, 6, 2, 0]]), torch.tensor([[-1.0, -2.0, -0.5, -9.0]])
    >>> check = compare_samples(ids, ids, logps, logps + 1e-6, [2], width=8, shared_width=8, exact=True,
    ...                         atol=1e-3, mean_atol=1e-4)
    >>> check.ok, check.n_tokens, check.rows_parted
    (True, 3, 0)
    >>> compare_samples(ids, ids, logps, logps, [2], width=8, shared_width=6, exact=True, atol=1e-3,
    ...                 mean_atol=1e-4).reason()
    'rows 6 wide where TRL slices at 8: completions would be cut'
    """
    rows, n = ref_ids.size(0), min(ref_ids.size(1), ids.size(1))
    columns, none = torch.arange(n), torch.full((rows,), n)

    def first(hit: Tensor) -> Tensor:  # each row's first True column, n where none
        return torch.where(hit.any(1), hit.int().argmax(1), none) if n else none

    differ = ref_ids[:, :n] != ids[:, :n]
    parted = first(differ)
    parted_rows = int((differ.any(1) | (ref_ids.size(1) != ids.size(1))).sum())
    first_eos = first(torch.isin(ref_ids[:, :n], torch.tensor(list(eos_token_ids), dtype=ref_ids.dtype)))
    mask = (columns[None, :] < parted[:, None]) & (columns[None, :] <= first_eos[:, None])
    diff = (ref_logps[:, :n] - logps[:, :n]).abs()
    mask &= torch.isfinite(ref_logps[:, :n]) & torch.isfinite(logps[:, :n])
    compared = diff[mask]
    return SamplingCheck(
        width=width, shared_width=shared_width, rows=rows, rows_parted=parted_rows, n_tokens=int(mask.sum()),
        max_abs_diff=float(compared.max()) if compared.numel() else 0.0,
        mean_abs_diff=float(compared.mean()) if compared.numel() else 0.0,
        exact=exact, atol=atol, mean_atol=mean_atol,
    )  # fmt: skip


def check_rows(lists: Sequence[Sequence[int]], max_rows: int = CHECK_ROWS) -> list[int]:
    """The rows the first call is checked on: one per distinct prompt, the longest and the shortest first, then in
    batch order, up to ``max_rows``; at least two, so that the shared layout has a prefix to share.

    >>> check_rows([[1, 2], [1, 2, 3, 4], [1, 2], [1, 5, 6], [1, 7, 8]], max_rows=3)
    [1, 0, 3]
    >>> check_rows([[1, 2, 3]] * 8)
    [0, 1]
    """
    first: dict[tuple[int, ...], int] = {}
    for row, ids in enumerate(lists):
        first.setdefault(tuple(ids), row)
    distinct = list(first.values())
    kept = set(distinct)
    ends = [max(distinct, key=lambda r: len(lists[r])), min(distinct, key=lambda r: len(lists[r]))]
    ordered = list(dict.fromkeys([*ends, *distinct]))
    repeats = [row for row in range(len(lists)) if row not in kept]
    return (ordered + repeats[: max(0, 2 - len(ordered))])[: max(max_rows, 2)]


def checked_generate(
    generate: Callable[..., Any],
    plain: dict[str, Any],
    shared: dict[str, Any],
    eos_token_ids: Sequence[int],
    *,
    exact: bool,
    atol: float,
    mean_atol: float,
    max_new_tokens: int = CHECK_TOKENS,
) -> SamplingCheck:
    """``generate(**shared)`` then ``generate(**plain)`` (TRL's own keyword arguments) from one RNG state, each for
    at most ``max_new_tokens`` tokens, compared; the RNG state afterwards is the one before. Call it on a slice
    (:func:`check_rows`)."""
    from transformers import LogitsProcessorList  # heavy: transformers

    device = plain["input_ids"].device
    config = plain.get("generation_config")
    if config is None:
        cap: dict[str, Any] = {"max_new_tokens": max_new_tokens}
    else:  # a copy capped: transformers refuses a config and generation keywords together
        cap = {"generation_config": copy.deepcopy(config)}
        cap["generation_config"].max_new_tokens = min(config.max_new_tokens or max_new_tokens, max_new_tokens)
    ours, ref = _SampledLogProbs(), _SampledLogProbs()
    devices = [] if device.type == "cpu" else [device]
    fork = {"devices": devices, "device_type": "cuda" if device.type == "cpu" else device.type}
    with torch.random.fork_rng(**fork):
        shared_out = generate(**{**shared, **cap}, logits_processor=LogitsProcessorList([ours]))
    with torch.random.fork_rng(**fork):
        plain_out = generate(**{**plain, **cap}, logits_processor=LogitsProcessorList([ref]))
    width, shared_width = plain["input_ids"].size(1), shared["input_ids"].size(1)
    ref_ids = getattr(plain_out, "sequences", plain_out)[:, width:].cpu()
    ids = getattr(shared_out, "sequences", shared_out)[:, width:].cpu()  # TRL's slice, whatever the layout
    return compare_samples(
        ref_ids, ids, ref.finish(ref_ids), ours.finish(ids), eos_token_ids, width=width, shared_width=shared_width,
        exact=exact, atol=atol, mean_atol=mean_atol,
    )  # fmt: skip
