"""Run the code a CUDA GPU would run, on meta tensors, where libraries would silently take another path:
:func:`cuda_semantics` puts the GPU's paths back, :class:`GpuChoices` records what ran (docs/internals.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import sys
import types
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import torch

from grpo_lite.memory.meta import autocast as amp
from grpo_lite.memory.meta.attention import cuda_sdpa
from grpo_lite.memory.meta.gpus import DEFAULT_GPU, GPU_ARCHES, GpuArch
from grpo_lite.memory.meta.private import (
    TRL_HEAD_NAMES,
    optimizer_device_lists,
    sdpa_mask_decision,
    trl_head,
    trl_optional,
)

# sha256 (first 16 hex digits) of the TRL 1.16 code the Triton-path patch relies on: ChunkedLogProbFunction,
# _addmm_fp32, _use_triton (trl/kernels/chunked_logprob.py)
TRL_HEAD_SOURCE = "5458eeedfdcdb1a7"


@dataclass
class GpuChoices:
    """What a GPU would choose and the simulation did in its place.

    Attributes:
        arch: the GPU's compute capability (``sm86``: RTX 30xx...).
        padded: whether the batches carry padding (a mask is passed to attention).
        attention: kernel -> calls in the measured step (``"flash"``, ``"efficient (no grad)"``...).
        optimizer, lm_head, autocast: the optimizer step's implementation, the LM head's path, the forward's
            mixed precision.
        notes: everything else the simulation decided (or could not see).
    """

    arch: GpuArch
    padded: bool
    attention: Counter[str] = field(default_factory=Counter)
    optimizer: str = ""
    lm_head: str = ""
    autocast: str = ""
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "gpu": GPU_ARCHES[self.arch],
            "padded": self.padded,
            "attention": dict(self.attention),
            "optimizer": self.optimizer,
            "lm_head": self.lm_head,
            "autocast": self.autocast,
            "notes": list(self.notes),
        }


class _Patches(contextlib.ExitStack):
    """Attribute replacements (or additions), undone in reverse order when closed."""

    def set(self, obj: Any, name: str, value: Any) -> None:
        self.enter_context(mock.patch.object(obj, name, value, create=True))


def trl_head_source_hash() -> str:
    """The hash :data:`TRL_HEAD_SOURCE` is checked against."""
    chunked, (use_triton, _, _, addmm_fp32) = trl_head()
    parts = (chunked.ChunkedLogProbFunction, addmm_fp32, use_triton)
    if any(part is None for part in parts):  # a private part gone: not the code the simulation was written for
        return ""
    return hashlib.sha256("".join(inspect.getsource(o) for o in parts).encode()).hexdigest()[:16]


class _InPlaceKernel:
    """``kernel[grid](...)`` that allocates nothing, as TRL's Triton kernels (they write in place)."""

    def __getitem__(self, grid: Any) -> Any:
        return lambda *args, **kwargs: None


def _addmm_fp32(acc: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
    """TRL's CUDA branch: ``acc += a @ b`` accumulated in fp32 without an fp32 copy of the 16-bit inputs."""
    torch.addmm(acc, a, b, out_dtype=torch.float32, out=acc)


def _patch_trl_head(patches: _Patches, choices: GpuChoices) -> None:
    import trl.kernels.chunked_logprob as chunked  # heavy: TRL

    if trl_head_source_hash() != TRL_HEAD_SOURCE:
        message = (
            "trl's chunked log-prob head is not the code the simulation was written against: simulating "
            "TRL's own torch fold (its CPU path, with extra fp32 tiles) instead of the CUDA kernel"
        )
        warnings.warn(message, stacklevel=3)
        choices.lm_head = "TRL's torch fold (CPU path): " + message
        return
    trl_utils, use_triton, tile = trl_optional()
    on_cuda = (lambda device: True, _InPlaceKernel(), _InPlaceKernel(), _addmm_fp32)  # TRL_HEAD_NAMES' order
    for name, value in zip(TRL_HEAD_NAMES, on_cuda):
        patches.set(chunked, name, value)
    if use_triton is not None:  # the fused head's compact path (scores masked tokens only)
        patches.set(trl_utils, TRL_HEAD_NAMES[0], on_cuda[0])
    if not hasattr(chunked, "triton"):  # the backward sizes its Triton grid with triton.cdiv
        patches.set(chunked, "triton", types.SimpleNamespace(cdiv=lambda a, b: -(-a // b)))
    vocab_tile = "?" if tile is None else tile
    choices.lm_head = (
        f"TRL's chunked log-prob, Triton path: [min(N, {chunked.TOKEN_CHUNK_SIZE}) x {vocab_tile}] tile "
        "buffer folded in place, fp32 gradients by addmm(out_dtype=float32)"
    )


def _patch_padding(patches: _Patches, padded: bool) -> None:
    """transformers decides from the mask's values whether to build a 4-D mask; on meta, from ``padded``."""
    masking, name = sdpa_mask_decision()
    original = getattr(masking, name)

    def ignore_causal_mask(padding_mask: Any, *args: Any, **kwargs: Any) -> bool:
        if padding_mask is not None and padding_mask.device.type == "meta":
            return False if padded else original(None, *args, **kwargs)
        return original(padding_mask, *args, **kwargs)

    patches.set(masking, name, ignore_causal_mask)


def _patch_autocast(patches: _Patches) -> None:
    """``torch.is_autocast_enabled("meta")`` and transformers' ``maybe_autocast`` answer for the emulation."""
    is_enabled, get_dtype = torch.is_autocast_enabled, torch.get_autocast_dtype

    def _meta(device_type: Any) -> bool:
        return device_type == "meta" or getattr(device_type, "type", None) == "meta"

    def is_autocast_enabled(*args: Any) -> bool:
        if args and _meta(args[0]):
            return amp.active() is not None
        return is_enabled(*args)

    def get_autocast_dtype(device_type: Any) -> torch.dtype:
        mode = amp.active()
        return mode.dtype if _meta(device_type) and mode is not None else get_dtype(device_type)

    patches.set(torch, "is_autocast_enabled", is_autocast_enabled)
    patches.set(torch, "get_autocast_dtype", get_autocast_dtype)
    autocast_class = torch.autocast

    def on_meta(enabled: bool, dtype: torch.dtype | None) -> Any:
        return amp.suspended(enabled, dtype) if amp.active() is not None or enabled else contextlib.nullcontext()

    def autocast(device_type: str, dtype: torch.dtype | None = None, enabled: bool = True, **kwargs: Any) -> Any:
        if device_type == "meta":  # TRL's fused head turns autocast off for cast_lm_head_to_fp32
            return on_meta(enabled, dtype)
        return autocast_class(device_type, dtype=dtype, enabled=enabled, **kwargs)

    patches.set(torch, "autocast", autocast)
    from transformers.utils import generic  # heavy: transformers

    original = generic.maybe_autocast

    def maybe_autocast(
        device_type: str, dtype: torch.dtype | None = None, enabled: bool = True, cache_enabled: bool | None = None
    ) -> Any:
        if device_type == "meta":
            return on_meta(enabled, dtype)
        return original(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    for module in list(sys.modules.values()):  # the modeling files import it by name
        if (
            getattr(module, "__name__", "").startswith("transformers")
            and getattr(module, "maybe_autocast", None) is original
        ):
            patches.set(module, "maybe_autocast", maybe_autocast)


def _patch_optimizer_defaults(patches: _Patches) -> None:
    """torch chooses foreach / fused by the parameters' device: meta counts as CUDA."""

    def plus_meta(original: Any) -> Any:
        return lambda: [*original(), "meta"]

    for module, name in optimizer_device_lists():
        patches.set(module, name, plus_meta(getattr(module, name)))
    patches.set(torch.cuda, "synchronize", lambda device=None: None)
    try:
        from bitsandbytes.optim.optimizer import Optimizer8bit
    except ImportError:  # pragma: no cover - bitsandbytes is a dependency
        return
    original = Optimizer8bit.get_state_buffer

    def get_state_buffer(self: Any, p: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        if p.device.type == "meta":  # paged buffers are CUDA managed memory; the bytes are the same
            return torch.zeros_like(p, dtype=dtype)
        return original(self, p, dtype=dtype)

    patches.set(Optimizer8bit, "get_state_buffer", get_state_buffer)
    patches.set(
        torch.ops.bitsandbytes,
        "optimizer_update_32bit",
        _WithoutMetaNorm(torch.ops.bitsandbytes.optimizer_update_32bit),
    )


class _WithoutMetaNorm:
    """bitsandbytes' 32-bit update op, its 0-d meta ``param_norm`` passed as a value (meta has none to read)."""

    def __init__(self, packet: Any) -> None:
        self._packet = packet

    def __getattr__(self, name: str) -> Any:
        return getattr(self._packet, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = tuple(
            0.0 if isinstance(a, torch.Tensor) and a.device.type == "meta" and a.dim() == 0 else a for a in args
        )
        return self._packet(*args, **kwargs)


@contextlib.contextmanager
def cuda_semantics(arch: GpuArch = DEFAULT_GPU, *, padded: bool = True) -> Iterator[GpuChoices]:
    """Patch the libraries so meta tensors take the paths of a GPU of ``arch`` (whose batches are ``padded`` or
    not); yield the record of choices."""
    if arch not in GPU_ARCHES:
        raise ValueError(f"unknown GPU architecture {arch!r}; choose one of {', '.join(GPU_ARCHES)}")
    choices = GpuChoices(arch=arch, padded=padded)
    with _Patches() as patches:
        import torch.nn.functional as F  # heavy: torch

        patches.set(F, "scaled_dot_product_attention", cuda_sdpa(arch, choices.attention))
        _patch_padding(patches, padded)
        _patch_autocast(patches)
        _patch_optimizer_defaults(patches)
        _patch_trl_head(patches, choices)
        yield choices
