"""CUDA autocast on meta tensors: torch's CUDA op lists, applied at the torch-function level.

``torch.autocast`` has no meta backend: :class:`CudaAutocast` casts the inputs of ops as CUDA autocast does, so
autograd records them as on a GPU; :func:`suspended` is ``torch.autocast(enabled=False)``;
:func:`checkpoint_autocast` gives a recomputed block its forward's autocast. Why it matters: docs/internals.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from grpo_lite.memory.meta.private import gradient_checkpointing_func, set_gradient_checkpointing_func, tree_map

# autocast_mode.cpp, CUDA: "lower_precision_fp" (the matrix products)
LOWER_PRECISION_OPS = frozenset(
    "linear matmul __matmul__ __rmatmul__ mm mv bmm addmm addmv addr baddbmm addbmm einsum chain_matmul conv1d conv2d "
    "conv3d conv_transpose1d conv_transpose2d conv_transpose3d prelu".split()
)
# "fp32" (ops run in fp32 whatever their inputs)
FP32_OPS = frozenset(
    "acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow __pow__ softplus layer_norm "
    "group_norm norm cosine_similarity poisson_nll_loss cosine_embedding_loss nll_loss hinge_embedding_loss kl_div "
    "l1_loss smooth_l1_loss huber_loss mse_loss margin_ranking_loss multilabel_margin_loss soft_margin_loss "
    "triplet_margin_loss multi_margin_loss binary_cross_entropy_with_logits dist pdist cdist renorm logsumexp "
    "cross_entropy".split()
)
# "fp32_set_opt_dtype" (reductions with a dtype argument: run with dtype=float32 on 16-bit inputs)
FP32_DTYPE_OPS = frozenset({"softmax", "log_softmax", "cumsum", "cumprod", "prod", "sum"})
_LOW = (torch.float16, torch.bfloat16)
_STACK: list[CudaAutocast] = []


def active() -> CudaAutocast | None:
    """The innermost enabled emulated autocast, if any."""
    return _STACK[-1] if _STACK and _STACK[-1].enabled else None


class CudaAutocast(TorchFunctionMode):
    """Emulated ``torch.autocast("cuda", dtype)`` for meta tensors (see the module notes).

    Args:
        dtype: the lower-precision dtype (bf16 for ``bf16=True``).
    """

    def __init__(self, dtype: torch.dtype = torch.bfloat16) -> None:
        super().__init__()
        self.dtype = dtype
        self.enabled = True
        self._cache: dict[int, tuple[Tensor, Tensor]] = {}  # id(fp32 leaf) -> (leaf, its cast)

    def __enter__(self) -> CudaAutocast:
        _STACK.append(self)
        return super().__enter__()

    def __exit__(self, *exc: Any) -> None:
        _STACK.remove(self)
        self._cache.clear()  # torch clears its cast cache when the outermost autocast region ends
        super().__exit__(*exc)

    def _cast(self, value: Any, dtype: torch.dtype, *, cache: bool) -> Any:
        if not isinstance(value, Tensor) or not value.is_floating_point() or value.dtype == dtype:
            return value
        if cache and value.is_leaf and value.requires_grad:
            hit = self._cache.get(id(value))
            if hit is None or hit[0] is not value:
                hit = (value, value.to(dtype))
                self._cache[id(value)] = hit
            return hit[1]
        return value.to(dtype)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if self.enabled and name in LOWER_PRECISION_OPS:
            args, kwargs = tree_map(lambda v: self._cast(v, self.dtype, cache=True), (args, kwargs))
        elif self.enabled and name in FP32_OPS:
            args, kwargs = tree_map(
                lambda v: self._cast(v, torch.float32, cache=False) if isinstance(v, Tensor) and v.dtype in _LOW else v,
                (args, kwargs),
            )
        elif (
            self.enabled
            and name in FP32_DTYPE_OPS
            and "dtype" not in kwargs
            and args
            and isinstance(args[0], Tensor)
            and args[0].dtype in _LOW
        ):
            kwargs = {**kwargs, "dtype": torch.float32}
        return func(*args, **kwargs)


@contextlib.contextmanager
def suspended(enabled: bool = False, dtype: torch.dtype | None = None) -> Iterator[None]:
    """``torch.autocast(device_type, dtype, enabled)`` inside an emulated region: switch it off (or on, with
    ``dtype``) for the block."""
    mode = _STACK[-1] if _STACK else None
    if mode is None:
        yield
        return
    before = (mode.enabled, mode.dtype)
    mode.enabled = enabled
    if dtype is not None:
        mode.dtype = dtype
    try:
        yield
    finally:
        mode.enabled, mode.dtype = before


@contextlib.contextmanager
def checkpoint_autocast(model: Any) -> Iterator[None]:
    """Gradient checkpointing restores the forward's autocast when it recomputes a block; do the same for the
    emulated one (torch's checkpoint has no meta autocast to restore)."""
    touched = []
    for module in model.modules():
        fn = gradient_checkpointing_func(module)
        if fn is None or not getattr(module, "gradient_checkpointing", False):
            continue

        def checkpoint(function: Callable[..., Any], *args: Any, _fn: Any = fn, **kwargs: Any) -> Any:
            mode = active()
            if mode is None:
                return _fn(function, *args, **kwargs)

            def under_autocast(*a: Any, **k: Any) -> Any:
                if active() is mode:
                    return function(*a, **k)
                with CudaAutocast(mode.dtype):
                    return function(*a, **k)

            return _fn(under_autocast, *args, **kwargs)

        touched.append((module, fn))
        set_gradient_checkpointing_func(module, checkpoint)
    try:
        yield
    finally:
        for module, fn in touched:
            set_gradient_checkpointing_func(module, fn)
