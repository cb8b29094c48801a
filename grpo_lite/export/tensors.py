"""Weights -> GGUF tensors: llama.cpp's names, its q/k layout, tied embeddings, and the quantization.

Each follows llama.cpp's converter (docs/internals.md); a tensor the name map does not know is an error, never
skipped.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal

from grpo_lite.errors import ModelError
from grpo_lite.export.hparams import GgufArch, rope_settings
from grpo_lite.export.source import named_weights
from grpo_lite.settings import check

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np


Quantization = Literal["f16", "q8_0", "q4_0"]
# name -> (GGML type of the matrices, llama.cpp file type, trade-off); ordered largest file first
QUANTIZATIONS: dict[str, tuple[str, str, str]] = {
    "f16": ("F16", "MOSTLY_F16", "16-bit floats: the trained weights to 3 decimal digits; 2 B per weight"),
    "q8_0": ("Q8_0", "MOSTLY_Q8_0", "8-bit blocks of 32 with one scale: close to f16 in quality; ~1.06 B per weight"),
    "q4_0": (
        "Q4_0",
        "MOSTLY_Q4_0",
        "4-bit blocks of 32 (output matrix Q8_0): smallest, loses the most; ~0.56 B per weight",
    ),
}
_OUTPUT_SIDE = ("output.weight", "token_embd.weight")


def check_quantization(quantization: str) -> Quantization:
    """Return ``quantization`` if it is one of :data:`QUANTIZATIONS`, else raise ConfigError.

    >>> check_quantization("q4_0")
    'q4_0'
    >>> check_quantization("Q4_K_M")
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: quantization='Q4_K_M' is not valid; choose one of f16, q8_0, q4_0
    """
    return check("quantization", quantization, QUANTIZATIONS)


def file_type(quantization: Quantization) -> int:
    """``general.file_type``: llama.cpp's number for the file's main type (``MOSTLY_Q8_0`` is 7)."""
    import gguf  # optional: gguf (the gguf extra)

    return int(gguf.LlamaFileType[QUANTIZATIONS[quantization][1]])


def tensor_type(name: str, shape: tuple[int, ...], quantization: Quantization, *, tied: bool) -> str:
    """The GGML type one tensor is written at (a ``gguf.GGMLQuantizationType`` name).

    >>> tensor_type("blk.0.attn_norm.weight", (576,), "q8_0", tied=True)
    'F32'
    >>> tensor_type("blk.0.attn_q.weight", (576, 576), "q8_0", tied=True)
    'Q8_0'
    >>> tensor_type("blk.0.attn_q.weight", (576, 576), "q4_0", tied=True)
    'Q4_0'
    >>> tensor_type("token_embd.weight", (49152, 576), "q4_0", tied=True)
    'Q8_0'
    >>> tensor_type("token_embd.weight", (49152, 576), "q4_0", tied=False)
    'Q4_0'
    >>> tensor_type("blk.0.ffn_down.weight", (64, 100), "q8_0", tied=True)  # 100 is not a multiple of 32
    'F16'
    """
    if len(shape) <= 1 or name.endswith("_norm.weight"):
        return "F32"
    kind = QUANTIZATIONS[quantization][0]
    if kind == "Q4_0" and (name == "output.weight" or (tied and name == "token_embd.weight")):
        kind = "Q8_0"
    if kind != "F16" and shape[-1] % 32:  # Q8_0 and Q4_0 quantize rows in blocks of 32
        kind = "F16"
    return kind


def permute_rows(weight: Any, n_head: int) -> Any:
    """Reorder the rows of a q or k projection (or bias) per head into llama.cpp's rotary layout.

    Each head's rows ``[x0 .. x(d/2-1), y0 .. y(d/2-1)]`` become ``[x0, y0, x1, y1, ...]``: the layout
    llama.cpp's Llama converter writes and its readers undo.

    >>> import torch
    >>> permute_rows(torch.arange(8.0), 2).tolist()
    [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]
    """
    rows = weight.shape[0]
    return weight.reshape(n_head, 2, rows // n_head // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def rope_freqs(config: Any) -> Any:
    """The ``rope_freqs`` tensor of Llama 3's RoPE scaling (``rope_type="llama3"``), or None.

    llama.cpp divides each rotary frequency by its factor; the factors are those of llama.cpp's Llama
    converter, which are the ratios of transformers' default frequencies to its llama3-scaled ones.
    """
    import torch  # heavy: torch

    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    base, rope_type, params = rope_settings(text)
    if rope_type != "llama3":
        return None
    dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor = params.get("factor", 8.0)
    low, high = params.get("low_freq_factor", 1.0), params.get("high_freq_factor", 4.0)
    old_context = params.get("original_max_position_embeddings", 8192)
    low_wavelen, high_wavelen = old_context / low, old_context / high
    out = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (old_context / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(out, dtype=torch.float32)


def gguf_tensors(model: Any, arch: GgufArch, quantization: Quantization) -> Iterator[tuple[str, Any, Any]]:
    """``(gguf name, data, GGML type)`` for every weight of ``model`` (a LoRA adapter's merged in,
    :func:`grpo_lite.export.source.named_weights`).

    The data are ``gguf.LazyNumpyTensor``: each weight is reordered, cast to float32 and quantized only
    when the writer writes it, so an export holds one converted tensor at a time next to the model.

    Raises:
        ModelError: a weight the ``gguf`` package's name map does not know for this architecture.
    """
    import gguf  # optional: gguf (the gguf extra)

    config = model.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(text.num_attention_heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    tied = bool(getattr(config, "tie_word_embeddings", False))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH[arch.gguf_arch.upper()], int(text.num_hidden_layers))
    extra = rope_freqs(config)
    if extra is not None:
        yield _lazy("rope_freqs.weight", tuple(extra.shape), lambda: extra, None, quantization, tied)
    for name, shape, read in named_weights(model):
        if tied and name == "lm_head.weight":
            continue  # the embedding is the output matrix
        new = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise ModelError(
                f"cannot export {name!r} to GGUF: the gguf package has no {arch.gguf_arch} name "
                f"for it; this export writes plain {arch.hf_class} weights only"
            )
        n_head = None
        if arch.permute_qk and name.endswith(("q_proj.weight", "q_proj.bias")):
            n_head = heads
        elif arch.permute_qk and name.endswith(("k_proj.weight", "k_proj.bias")):
            n_head = kv_heads
        yield _lazy(new, shape, read, n_head, quantization, tied)


def _lazy(
    name: str,
    shape: tuple[int, ...],
    read: Callable[[], Any],
    n_head: int | None,
    quantization: Quantization,
    tied: bool,
) -> tuple[str, Any, Any]:
    """One tensor as the writer takes it: its final dtype and shape now, its bytes (``read()``, reordered,
    quantized) when written."""
    import gguf  # optional: gguf (the gguf extra)
    import numpy as np

    kind = gguf.GGMLQuantizationType[tensor_type(name, shape, quantization, tied=tied)]

    def convert() -> np.ndarray:
        import torch  # heavy: torch

        data = read().detach().to("cpu", torch.float32)
        if n_head is not None:
            data = permute_rows(data, n_head)
        return gguf.quants.quantize(data.contiguous().numpy(), kind)

    dtype: type[np.generic]
    if kind == gguf.GGMLQuantizationType.F32:
        dtype, stored = np.float32, shape
    elif kind == gguf.GGMLQuantizationType.F16:
        dtype, stored = np.float16, shape
    else:
        dtype, stored = np.uint8, gguf.quant_shape_to_byte_shape(shape, kind)
    meta = gguf.LazyNumpyTensor.meta_with_dtype_and_shape(dtype, stored)
    return name, gguf.LazyNumpyTensor(meta=meta, func=convert), kind  # type: ignore[arg-type] # called as func(*args)
