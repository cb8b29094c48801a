"""Make optimizer updates land on bf16 weights: stochastic rounding around any optimizer.

A bf16 weight ``w`` keeps 8 significant bits: its spacing is ``|w| * 2**-7`` or less. An AdamW step at
lr 1e-6 moves each element by about the learning rate, far below half that spacing for typical
weights (``|w| ~ 0.02``: spacing ~1.2e-4), so round-to-nearest returns the old value and the update is
lost. Measured with ``benchmarks/precision.py``: plain bf16 AdamW realizes ~2-3% of an fp32 copy's
displacement at lr 1e-6.

Stochastic rounding (SR) rounds up with probability equal to the remainder, so ``E[w_new] = w + u``
exactly and the update lands in expectation, with no extra memory per parameter.
:func:`install_update_rounding` adds it to *any* optimizer without touching its code (torch AdamW,
bitsandbytes 8-bit, GaLore, layer-wise optimizers): for each bf16 parameter it runs the optimizer's own
``step`` on a transient fp32 copy of that one parameter (and its gradient), then writes the result
back into the bf16 storage with SR, in chunks. The optimizer's maths is unchanged.

Costs, counted by the memory model (:mod:`grpo_lite.memory.terms`):

- state the optimizer sizes from the parameter's dtype is created in fp32 (torch AdamW, GaLore AdamW:
  8 bytes per parameter instead of 4); 8-bit and fp32 states are unchanged;
- transient: an fp32 copy of the parameter and of its gradient, one parameter at a time (8 bytes per
  element of the largest trainable tensor), plus the rounding noise of one chunk.

Why not torchao's low-bit AdamW with ``bf16_stochastic_round=True``, or torch-optimi's Kahan
summation: docs/presets.md (they cover one optimizer each and torchao needs ``torch.compile``; this
wrapper covers every optimizer on the ladder, GaLore included).

>>> x = torch.full((100_000,), 1.0 + 2**-10)  # 1/8 of a bf16 step above 1.0
>>> round(fp32_to_bf16_sr(x).float().mean().item(), 3), x.bfloat16().float().mean().item()
(1.001, 1.0)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from grpo_lite.memory.optimizers import (
    SR_CHUNK,  # elements rounded at once (the memory model counts them)
)

__all__ = [
    "SR_CHUNK",
    "fp32_to_bf16_sr",
    "inner_optimizers",
    "install_update_rounding",
    "state_nbytes",
    "unwrap",
]

_UPPER16 = -65536  # 0xFFFF0000 as int32


def fp32_to_bf16_sr(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Round fp32 to bf16 stochastically: away from zero with probability (dropped 16 bits) / 2**16.

    Adding uniform 16-bit noise to the bit pattern and truncating carries into the kept bits with exactly that
    probability, for either sign (the pattern is sign-magnitude). ±inf and the canonical NaN pass through; a carry
    out of the largest finite value gives inf, as it should.

    >>> x = torch.full((100_000,), 1.0 + 2**-10)
    >>> round(fp32_to_bf16_sr(-x).float().mean().item(), 3)
    -1.001
    """
    bits = x.float().contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, bits.shape, dtype=torch.int32, device=x.device, generator=generator)
    return noise.add_(bits).bitwise_and_(_UPPER16).view(torch.float32).to(torch.bfloat16)


def unwrap(optimizer: Any) -> Any:
    """Through accelerate's ``AcceleratedOptimizer`` down to the optimizer, or to transformers'
    ``LayerWiseDummyOptimizer`` (layer-wise GaLore/APOLLO keep one optimizer per parameter in ``optimizer_dict``)."""
    while not hasattr(optimizer, "optimizer_dict") and hasattr(optimizer, "optimizer"):
        optimizer = optimizer.optimizer
    return optimizer


def inner_optimizers(optimizer: Any) -> list[torch.optim.Optimizer]:
    """The optimizers that actually step (:func:`unwrap`, then each per-parameter one when layer-wise)."""
    optimizer = unwrap(optimizer)
    optimizer_dict = getattr(optimizer, "optimizer_dict", None)
    if optimizer_dict is not None:
        return list(dict.fromkeys(optimizer_dict.values()))
    return [optimizer]


def _bf16_params_with_grad(optimizer: torch.optim.Optimizer) -> Iterator[Tensor]:
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None and p.dtype == torch.bfloat16:
                yield p


def _write_back(exact: Tensor, bf16: Tensor) -> None:
    """Store the fp32 result of the step into ``bf16`` (the parameter's own storage), stochastically rounded."""
    flat_out, flat_in = bf16.view(-1), exact.reshape(-1)
    for start in range(0, flat_in.numel(), SR_CHUNK):  # chunks: the int32 noise stays small
        flat_out[start:start + SR_CHUNK].copy_(fp32_to_bf16_sr(flat_in[start:start + SR_CHUNK]))


def _step_one_in_fp32(p: Tensor, step: Callable[..., Any]) -> Any:
    """Run ``step`` with only ``p`` visible (as fp32 data and fp32 grad), then round back into p's storage."""
    bf16, grad = p.data, p.grad
    _swap(p, bf16.float(), grad.float())
    try:
        result = step()
        _write_back(p.data, bf16)
    finally:
        working = p.data
        _swap(p, bf16, grad)
        _drop_references(p, working, bf16)
    return result


def _drop_references(p: Tensor, working: Tensor, bf16: Tensor) -> None:
    """GaLoreAdamW8bit parks the data on the parameter (``p.saved_data``); don't let it pin the fp32 copy."""
    for key, value in list(vars(p).items()):
        if isinstance(value, Tensor) and value.data_ptr() == working.data_ptr():
            setattr(p, key, bf16)


def _swap(p: Tensor, data: Tensor, grad: Tensor | None) -> None:
    """Replace data and grad together (autograd refuses a grad whose dtype differs from the data's)."""
    p.grad = None
    p.data = data
    p.grad = grad


def _rounding_step(optimizer: torch.optim.Optimizer) -> Callable[..., Any]:
    step = optimizer.step  # bound (possibly already patched, e.g. by an LR scheduler)

    def wrapped(closure: Callable[[], Any] | None = None) -> Any:
        if closure is not None:
            with torch.enable_grad():
                closure()
        targets = list(_bf16_params_with_grad(optimizer))
        if not targets:
            return step()
        hidden = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        grads = {p: p.grad for p in hidden}
        for p in hidden:  # one parameter at a time: transient fp32 memory is one tensor, not the model
            p.grad = None
        try:
            result = None
            others = [p for p in hidden if p.dtype != torch.bfloat16]
            if others:
                for p in others:
                    p.grad = grads[p]
                result = step()
                for p in others:
                    p.grad = None
            for p in targets:
                p.grad = grads[p]
                result = _step_one_in_fp32(p, step)
                p.grad = None
        finally:
            for p, g in grads.items():
                p.grad = g
        return result

    wrapped.__wrapped_rounding__ = True  # type: ignore[attr-defined]
    return wrapped


def install_update_rounding(optimizer: Any) -> list[torch.optim.Optimizer]:
    """Patch ``step`` of every inner optimizer so bf16 parameters receive their update (stochastic rounding).

    Call it on the optimizer the Trainer built (e.g. in an overridden ``create_optimizer``, before the LR scheduler
    and accelerate wrap it). Layer-wise optimizers are patched in ``optimizer_dict``, which transformers' backward
    hooks call. Idempotent.

    Returns:
        the patched optimizers.
    """
    patched = []
    for inner in inner_optimizers(optimizer):
        if not getattr(inner.step, "__wrapped_rounding__", False):
            inner.step = _rounding_step(inner)  # type: ignore[method-assign]
            patched.append(inner)
    return patched


def _tensor_nbytes(t: Tensor) -> int:
    if hasattr(t, "__tensor_flatten__") and type(t) is not torch.Tensor:  # torchao subclasses: codes + scales
        names, _ = t.__tensor_flatten__()
        return sum(_tensor_nbytes(getattr(t, n)) for n in names)
    return t.numel() * t.element_size()


def _nbytes(value: Any, seen: set[int]) -> int:
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, Tensor):
        return _tensor_nbytes(value) if value.numel() > 1 else 0  # skip step counters / scalars
    if isinstance(value, dict):
        return sum(_nbytes(v, seen) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v, seen) for v in value)
    if hasattr(value, "__dict__") and not isinstance(value, type):  # e.g. GaLore projector.ortho_matrix
        return sum(_nbytes(v, seen) for v in vars(value).values() if isinstance(v, (Tensor, list, tuple)))
    return 0


def state_nbytes(optimizer: Any) -> int:
    """Bytes held in optimizer state (moments, quantization scales, Kahan buffers, GaLore projectors)."""
    seen: set[int] = set()
    return sum(_nbytes(dict(inner.state), seen) for inner in inner_optimizers(optimizer))
