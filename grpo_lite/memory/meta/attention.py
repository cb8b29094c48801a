"""The attention kernel a CUDA GPU runs for ``scaled_dot_product_attention`` (on meta it would take the math
kernel): :func:`choose_kernel` makes torch's choice, :func:`cuda_sdpa` calls that aten op (docs/internals.md).

>>> choose_kernel("sm86", torch.bfloat16, head_dim=64, masked=False, requires_grad=True)
'flash'
>>> choose_kernel("sm86", torch.bfloat16, head_dim=64, masked=True, requires_grad=True)
'efficient'
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from grpo_lite.memory.meta.gpus import GPU_ARCHES, GpuArch
from grpo_lite.memory.meta.private import sdpa_efficient, sdpa_flash, sdpa_math

Kernel = Literal["flash", "efficient", "math"]
_MASK_ALIGNMENT = 8  # the efficient kernel's bias columns (preprocess_mask in attention.cpp)


def choose_kernel(
    arch: GpuArch,
    dtype: torch.dtype,
    *,
    head_dim: int,
    masked: bool,
    requires_grad: bool,
    dropout_p: float = 0.0,
    square_causal: bool = True,
) -> Kernel:
    """The kernel torch's CUDA dispatcher picks (flash, then efficient, then math), for dense inputs."""
    if arch not in GPU_ARCHES:
        raise ValueError(f"unknown GPU architecture {arch!r}; choose one of {', '.join(GPU_ARCHES)}")
    low = dtype in (torch.float16, torch.bfloat16)
    sm8x = arch in ("sm86", "sm89")
    refused = sm8x and requires_grad and (192 < head_dim <= 224 or (head_dim > 224 and dropout_p > 0))
    if not masked and low and head_dim <= 256 and not refused and square_causal:
        return "flash"
    if head_dim % (8 if low else 4) == 0:
        return "efficient"
    return "math"


def _bias(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """A boolean mask as the additive bias the fused kernels take (torch's ``convert_boolean_attn_mask``)."""
    if mask.dtype != torch.bool:
        return mask
    return torch.where(
        mask,
        torch.zeros((), dtype=dtype, device=mask.device),
        torch.full((), float("-inf"), dtype=dtype, device=mask.device),
    )


def _aligned(bias: Tensor) -> Tensor:
    """torch's ``preprocess_mask``: pad the bias to a multiple of 8 columns when its strides are not aligned."""
    strides_ok = all(s % _MASK_ALIGNMENT == 0 for s in bias.stride()[:-1]) and bias.stride(-1) == 1
    if strides_ok:
        return bias
    cols = bias.size(-1)
    return F.pad(bias, (0, _MASK_ALIGNMENT - cols % _MASK_ALIGNMENT))[..., :cols]


def cuda_sdpa(arch: GpuArch, calls: Counter[str]):  # noqa: ANN201
    """A drop-in ``scaled_dot_product_attention`` that runs the kernel a GPU of ``arch`` would, counting each
    choice in ``calls``."""

    def sdpa(
        query: Tensor,
        key: Tensor,
        value: Tensor,
        attn_mask: Tensor | None = None,
        dropout_p: float = 0.0,
        is_causal: bool = False,
        scale: float | None = None,
        enable_gqa: bool = False,
    ) -> Tensor:
        grad = query.requires_grad or key.requires_grad or value.requires_grad
        square = not is_causal or query.size(-2) == key.size(-2)
        kernel = choose_kernel(
            arch,
            query.dtype,
            head_dim=query.size(-1),
            masked=attn_mask is not None,
            requires_grad=grad,
            dropout_p=dropout_p,
            square_causal=square,
        )
        calls[kernel if grad else f"{kernel} (no grad)"] += 1
        if kernel == "flash":
            return sdpa_flash(query, key, value, dropout_p, is_causal, False, scale=scale)[0]
        if enable_gqa and key.size(-3) != query.size(-3):  # not reached by transformers' calls (mask => repeat_kv)
            repeat = query.size(-3) // key.size(-3)
            key, value = key.repeat_interleave(repeat, -3), value.repeat_interleave(repeat, -3)
        bias = None if attn_mask is None else _bias(attn_mask, query.dtype)
        if kernel == "efficient":
            if bias is not None:
                bias = _aligned(bias).expand(query.size(0), query.size(1), query.size(2), key.size(2))
            return sdpa_efficient(query, key, value, bias, grad, dropout_p, is_causal, scale=scale)[0]
        return sdpa_math(query, key, value, bias, dropout_p, is_causal, None, scale=scale)[0]

    return sdpa
