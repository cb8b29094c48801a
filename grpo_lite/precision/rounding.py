"""Make optimizer updates land on bf16 weights: stochastic rounding around any optimizer.

:func:`install_update_rounding` runs the optimizer's own step on a transient fp32 copy of each bf16 parameter (in
:data:`SR_CHUNK`-element slices where the update is element-wise) and rounds the result back stochastically. Why,
what it costs, and why not torchao or Kahan summation: docs/internals.md.

>>> x = torch.full((100_000,), 1.0 + 2**-10)  # 1/8 of a bf16 step above 1.0
>>> round(fp32_to_bf16_sr(x).float().mean().item(), 3), x.bfloat16().float().mean().item()
(1.001, 1.0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from grpo_lite.memory.optimizers import (
    BNB_BLOCK,  # bitsandbytes' blockwise optimizer state: one fp32 scale per 256 elements
    SR_CHUNK,  # elements rounded at once, and the slice of a large element-wise tensor (the memory model counts them)
)

_UPPER16 = -65536  # 0xFFFF0000 as int32
_MIXING_MARKERS = ("rank",)  # param-group keys of GaLore / APOLLO: their update is not element-wise
_MIXING_CLASSES = ("Adafactor", "Muon", "Shampoo", "SOAP")
# per tensor, not per element: the step counter, bitsandbytes' quantization maps and update norm
_SHARED_STATE = ("step", "qmap1", "qmap2", "unorm_vec")


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


def _write_back(exact: Tensor, bf16: Tensor) -> None:
    """Store the fp32 result of the step into ``bf16`` (the parameter's storage or a flat slice), rounded."""
    flat_out, flat_in = bf16.view(-1), exact.reshape(-1)
    for start in range(0, flat_in.numel(), SR_CHUNK):  # chunks: the int32 noise stays small
        flat_out[start : start + SR_CHUNK].copy_(fp32_to_bf16_sr(flat_in[start : start + SR_CHUNK]))


def is_elementwise(inner: torch.optim.Optimizer, group: dict[str, Any]) -> bool:
    """Whether each element's update depends on that element only (not GaLore/APOLLO projections, not
    factored or orthogonalizing optimizers)."""
    name = type(inner).__name__
    return not any(k in group for k in _MIXING_MARKERS) and not any(m in name for m in _MIXING_CLASSES)


def _norm_clipped(inner: Any, p: Tensor) -> bool:
    """Whether bitsandbytes' ``max_unorm`` scales ``p``'s update by whole-tensor norms (32-bit state only; its
    blockwise 8-bit update ignores it)."""
    args = getattr(inner, "args", None)
    if args is None or not getattr(args, "max_unorm", 0.0):
        return False
    state = inner.state.get(p, {})
    if "state1" in state:
        return state["state1"].dtype != torch.uint8
    return args.optim_bits == 32 or p.numel() < args.min_8bit_size


def _step_one_in_fp32(inner: Any, p: Tensor, step: Callable[..., Any]) -> Any:
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
        _compact_state(inner.state.get(p, {}))
    return result


def _blocks(n: int) -> int:
    return -(-n // BNB_BLOCK)


def sliceable(inner: torch.optim.Optimizer, group: dict[str, Any], p: Tensor) -> bool:
    """Whether ``p`` is stepped in slices: larger than a chunk, contiguous, an element-wise update, and every
    state tensor either per element, per block of :data:`BNB_BLOCK`, or shared (the step, a quantization map)."""
    n = p.numel()
    if (
        n <= SR_CHUNK
        or SR_CHUNK % BNB_BLOCK
        or not p.is_contiguous()
        or not is_elementwise(inner, group)
        or _norm_clipped(inner, p)
    ):
        return False
    for key, value in inner.state.get(p, {}).items():
        if (
            isinstance(value, Tensor)
            and key not in _SHARED_STATE
            and (value.numel() not in (n, _blocks(n)) or not value.is_contiguous())
        ):
            return False
    return True


def _role(key: str, value: Any, n: int) -> str:
    """How a state entry of a flat tensor of ``n`` elements divides: ``element``, ``block`` or ``shared``."""
    if not isinstance(value, Tensor) or key in _SHARED_STATE:
        return "shared"
    return "element" if value.numel() == n else "block" if value.numel() == _blocks(n) else "shared"


def _slice_state(state: dict[str, Any], n: int, start: int, stop: int, step: Any) -> dict[str, Any]:
    """The state of elements ``[start, stop)`` of a flat tensor of ``n``: views of the per-element and per-block
    tensors, the shared ones as they are, and a fresh copy of the step counter (each slice steps it once)."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        role = _role(key, value, n)
        if key == "step":
            out[key] = step.clone() if isinstance(step, Tensor) else step
        elif role == "element":
            out[key] = value.view(-1)[start:stop]
        elif role == "block":
            out[key] = value[start // BNB_BLOCK : _blocks(stop)]
        else:
            out[key] = value
    return out


def _grow_state(inner: Any, like: Tensor, first: dict[str, Any], n_first: int) -> dict[str, Any]:
    """Full-size state from the state the optimizer created for the first slice: the other slices start at
    zero (torch's and bitsandbytes' own initial state), allocated as the optimizer allocates its buffers."""
    full = {}
    for key, value in first.items():
        role = _role(key, value, n_first)
        if role == "element":
            make = getattr(inner, "get_state_buffer", None)  # bitsandbytes: paged when the optimizer pages
            grown = (
                make(like, dtype=value.dtype)
                if make is not None
                else torch.zeros(like.shape, dtype=value.dtype, device=value.device)
            )
            grown.view(-1)[:n_first].copy_(value.view(-1))
        elif role == "block":
            grown = torch.zeros(_blocks(like.numel()), dtype=value.dtype, device=value.device)
            grown[: value.numel()].copy_(value)
        else:
            grown = value
        full[key] = grown
    return full


def _step_in_slices(inner: Any, p: Tensor, step: Callable[..., Any]) -> Any:
    """:func:`_step_one_in_fp32` for one :data:`SR_CHUNK`-element slice of ``p`` at a time, the optimizer's state
    swapped for a view of each slice's share (on the first step, the first slice's new state grown to full size)."""
    bf16, grad = p.data, p.grad
    flat, flat_grad, n = bf16.view(-1), grad.reshape(-1), bf16.numel()
    state = inner.state[p]
    fresh = len(state) == 0
    before = state.get("step")
    after, result = before, None
    try:
        for start in range(0, n, SR_CHUNK):
            stop = min(start + SR_CHUNK, n)
            share = {} if fresh and start == 0 else _slice_state(state, n, start, stop, before)
            inner.state[p] = share
            _swap(p, flat[start:stop].float(), flat_grad[start:stop].float())
            try:
                result = step()
                _write_back(p.data, flat[start:stop])
            finally:
                _swap(p, bf16, grad)
            after = share.get("step", after)
            if fresh and start == 0:  # the other slices start where the first did: its counter before this step
                state = _grow_state(inner, bf16, share, stop - start)
                before = None if after is None else after - 1
    finally:
        if "step" in state:
            state["step"] = after
        inner.state[p] = state
    return result


def _compact_state(state: dict[str, Any]) -> None:
    """Keep no view of a larger buffer in the state (GaLore's projector keeps ``Vh[:rank]``, a view of the whole SVD
    factor: 5 GiB for a 3B model's projectors instead of 0.2)."""
    for value in state.values():
        holder = vars(value) if hasattr(value, "__dict__") and not isinstance(value, (type, Tensor)) else None
        for key, t in (holder or {}).items():
            if isinstance(t, Tensor) and t.untyped_storage().nbytes() > t.numel() * t.element_size():
                holder[key] = t.clone()


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
        targets = [
            p for g in optimizer.param_groups for p in g["params"] if p.grad is not None and p.dtype == torch.bfloat16
        ]
        if not targets:
            return step()
        hidden = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        grads = {p: p.grad for p in hidden}
        for p in hidden:  # one parameter at a time: transient fp32 memory is one tensor, not the model
            p.grad = None
        try:
            result = None
            others = [p for p in hidden if p.dtype != torch.bfloat16]
            if others:  # the fp32 parameters step together, as the optimizer would
                for p in others:
                    p.grad = grads[p]
                result = step()
                for p in others:
                    p.grad = None
            group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
            for p in targets:
                p.grad = grads[p]
                one_step = _step_in_slices if sliceable(optimizer, group_of[id(p)], p) else _step_one_in_fp32
                result = one_step(optimizer, p, step)
                p.grad = None
        finally:
            for p, g in grads.items():
                p.grad = g
        return result

    wrapped.__wrapped_rounding__ = True  # type: ignore[attr-defined]
    return wrapped


def install_update_rounding(optimizer: Any) -> list[torch.optim.Optimizer]:
    """Patch ``step`` of every inner optimizer so bf16 parameters receive their update (stochastic rounding).

    Call it on the optimizer the Trainer built, before the LR scheduler and accelerate wrap it (layer-wise
    optimizers are patched in ``optimizer_dict``). Idempotent.

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
