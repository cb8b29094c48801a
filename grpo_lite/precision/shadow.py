"""Optimizer plumbing for the update monitor's shadow replay: who owns a parameter, whether its
update is element-wise, a clone of its optimizer over an fp32 shadow, and which elements to sample.

Kept apart from :mod:`grpo_lite.precision.monitor` so that the monitor reads as its pipeline
(snapshot, capture, replay, window).
"""

from __future__ import annotations

import copy
from collections import OrderedDict, defaultdict
from typing import Any

import torch
from torch import Tensor

from grpo_lite.precision.rounding import inner_optimizers, is_elementwise

__all__ = [
    "KAHAN_KEYS",
    "clone_optimizer",
    "compensation",
    "hyperparameters",
    "is_elementwise",
    "owner",
    "sample",
]

KAHAN_KEYS = ("kahan_comp",)  # torch-optimi's Kahan summation buffer


def owner(optimizer: Any, p: Tensor) -> tuple[torch.optim.Optimizer, dict[str, Any]]:
    """The optimizer that steps ``p`` (the per-parameter one when layer-wise) and its param group."""
    for inner in inner_optimizers(optimizer):
        for group in inner.param_groups:
            if any(q is p for q in group["params"]):
                return inner, group
    raise LookupError("parameter not found in the optimizer")


def hyperparameters(group: dict[str, Any]) -> dict[str, Any]:
    """The group minus its params, tensors cloned (torchao keeps lr as a tensor the scheduler fills in place)."""
    return {k: (v.clone() if isinstance(v, Tensor) else v) for k, v in group.items() if k != "params"}


def compensation(inner: torch.optim.Optimizer, p: Tensor) -> Tensor | None:
    """The Kahan compensation buffer the optimizer keeps for ``p``, if any."""
    state = inner.state.get(p, {})
    for key in KAHAN_KEYS:
        comp = state.get(key)
        if isinstance(comp, Tensor) and comp.shape == p.shape:
            return comp
    return None


def sample(numel: int, n: int, gen: torch.Generator) -> Tensor:
    """Exactly ``n`` flat indices (so the monitor's memory is known in advance): every element, repeated
    when the tensor is smaller; distinct ones up to 2**24 elements; uniform draws above (no numel-sized
    permutation)."""
    if numel <= n:
        return torch.arange(n) % numel
    if numel <= 1 << 24:
        return torch.randperm(numel, generator=gen)[:n].sort().values
    return torch.randint(0, numel, (n,), generator=gen).sort().values


def clone_optimizer(inner: torch.optim.Optimizer, p: Tensor, shadow: Tensor) -> torch.optim.Optimizer:
    """Same class and attributes as ``inner``, over ``shadow`` only, with fresh state.

    ``__init__`` is bypassed (constructor signatures differ); instance-level ``step`` patches (LR-scheduler counters,
    rounding wrappers) and step hooks stay with the real optimizer. Python scalars in the live state (APOLLO's
    projection seed) are copied so random projections match; tensors are not (the shadow starts from zero moments).
    """
    _, group = owner(inner, p)
    clone = object.__new__(type(inner))
    clone.__dict__.update(inner.__dict__)
    clone.__dict__.pop("step", None)
    for key, value in inner.__dict__.items():
        if key.startswith("_optimizer_") and isinstance(value, OrderedDict):
            setattr(clone, key, OrderedDict())
    clone.state = defaultdict(dict)
    clone.param_groups = [{**hyperparameters(group), "params": [shadow]}]
    scalars = {k: v for k, v in inner.state.get(p, {}).items() if k != "step" and isinstance(v, (int, float, str))}
    if scalars:
        clone.state[shadow].update(scalars)
    if hasattr(clone, "mng"):  # bitsandbytes: a private override manager (the global one is keyed by index)
        from bitsandbytes.optim import GlobalOptimManager

        manager = object.__new__(GlobalOptimManager)
        manager.initialize()
        clone.mng, clone.initialized = manager, False
        args = getattr(inner, "args", None)
        if args is not None and p.numel() < getattr(args, "min_8bit_size", 0):  # the live tensor keeps 32-bit
            clone.args = copy.copy(args)  # state: so does its shadow, whatever its sampled size
            clone.args.min_8bit_size = shadow.numel() + 1
    return clone
