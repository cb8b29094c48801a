"""The architectures a GGUF export supports, and the hyperparameter keys llama.cpp reads for them.

One row per architecture; any other gets a :class:`~grpo_lite.errors.ModelError` naming the supported ones before
anything loads. Plain Python (docs/internals.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_lite.errors import ModelError


@dataclass(frozen=True)
class GgufArch:
    """One architecture the export writes.

    Attributes:
        hf_class: the transformers class in config.json's ``architectures``.
        model_type: config.json's ``model_type``.
        gguf_arch: llama.cpp's name for it (``general.architecture``, the prefix of its keys).
        permute_qk: reorder the rows of q and k per head into llama.cpp's rotary layout (its Llama
            converter does; its Qwen2 converter does not).
        llama_keys: also write ``vocab_size`` and ``rope.dimension_count`` (llama.cpp's Llama converter does).
        examples: model families of this class, for messages and docs.
    """

    hf_class: str
    model_type: str
    gguf_arch: str
    permute_qk: bool
    llama_keys: bool
    examples: str


SUPPORTED: tuple[GgufArch, ...] = (
    GgufArch("LlamaForCausalLM", "llama", "llama", permute_qk=True, llama_keys=True, examples="Llama 3.x, SmolLM2"),
    GgufArch("Qwen2ForCausalLM", "qwen2", "qwen2", permute_qk=False, llama_keys=False, examples="Qwen2, Qwen2.5"),
)


def supported_text() -> str:
    """The supported architectures in one line, for messages and docs.

    >>> supported_text()
    'LlamaForCausalLM (Llama 3.x, SmolLM2), Qwen2ForCausalLM (Qwen2, Qwen2.5)'
    """
    return ", ".join(f"{a.hf_class} ({a.examples})" for a in SUPPORTED)


def find_arch(config: Any, what: str) -> GgufArch:
    """The row for a transformers config, or a ModelError that names the supported architectures.

    Args:
        config: a transformers config (``architectures`` and ``model_type`` are read).
        what: the model, as the message should name it.

    >>> from types import SimpleNamespace as C
    >>> find_arch(C(architectures=["Qwen2ForCausalLM"], model_type="qwen2"), "m").gguf_arch
    'qwen2'
    >>> find_arch(C(architectures=["GPT2LMHeadModel"], model_type="gpt2"), "gpt2")
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ModelError: cannot export gpt2 to GGUF: its architecture GPT2LMHeadModel is not supported; ...
    """
    classes = list(getattr(config, "architectures", None) or [])
    model_type = getattr(config, "model_type", None)
    for arch in SUPPORTED:
        if arch.hf_class in classes or (not classes and model_type == arch.model_type):
            return arch
    named = classes[0] if classes else f"model_type {model_type!r}"
    raise ModelError(
        f"cannot export {what} to GGUF: its architecture {named} is not supported; this export writes "
        f"{supported_text()}. For other architectures, save the model folder and convert it with "
        "llama.cpp's convert_hf_to_gguf.py"
    )


def rope_settings(config: Any) -> tuple[float, str, dict[str, Any]]:
    """``(rope_theta, rope_type, parameters)`` from a config (transformers 5 ``rope_parameters``, or the older
    ``rope_theta`` / ``rope_scaling`` fields).

    >>> from types import SimpleNamespace as C
    >>> rope_settings(C(rope_parameters={"rope_theta": 1e5, "rope_type": "default"}))[:2]
    (100000.0, 'default')
    >>> rope_settings(C(rope_theta=5e5, rope_scaling={"type": "linear", "factor": 2.0}))[:2]
    (500000.0, 'linear')
    """
    params = dict(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {})
    theta = float(params.get("rope_theta", getattr(config, "rope_theta", 10000.0)))
    return theta, str(params.get("rope_type", params.get("type", "default"))), params


# RoPE types the export writes: "default" and "linear" as keys, "llama3" as the rope_freqs tensor (tensors.py)
_ROPE_TYPES = ("default", "linear", "llama3")


def hyperparameters(config: Any, arch: GgufArch) -> dict[str, int | float | str]:
    """The architecture keys of the GGUF file, as llama.cpp's converter writes them for ``arch``.

    >>> from types import SimpleNamespace as C
    >>> cfg = C(num_hidden_layers=2, max_position_embeddings=1024, hidden_size=64, intermediate_size=128,
    ...         num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-6, head_dim=16, vocab_size=512,
    ...         rope_parameters={"rope_theta": 10000.0, "rope_type": "default"})
    >>> keys = hyperparameters(cfg, SUPPORTED[0])
    >>> keys["llama.block_count"], keys["llama.attention.head_count_kv"], keys["llama.rope.dimension_count"]
    (2, 2, 16)
    """
    a = arch.gguf_arch
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    heads = int(text.num_attention_heads)
    theta, rope_type, params = rope_settings(text)
    if rope_type not in _ROPE_TYPES:
        raise ModelError(
            f"cannot export a model with RoPE type {rope_type!r} to GGUF: this export writes "
            f"{', '.join(_ROPE_TYPES)}; convert the saved model folder with llama.cpp's convert_hf_to_gguf.py"
        )
    keys: dict[str, int | float | str] = {
        f"{a}.block_count": int(text.num_hidden_layers),
        f"{a}.context_length": int(text.max_position_embeddings),
        f"{a}.embedding_length": int(text.hidden_size),
        f"{a}.feed_forward_length": int(text.intermediate_size),
        f"{a}.attention.head_count": heads,
        f"{a}.attention.head_count_kv": int(getattr(text, "num_key_value_heads", None) or heads),
        f"{a}.rope.freq_base": theta,
        f"{a}.attention.layer_norm_rms_epsilon": float(text.rms_norm_eps),
    }
    if rope_type == "linear":
        keys[f"{a}.rope.scaling.type"] = "linear"
        keys[f"{a}.rope.scaling.factor"] = float(params["factor"])
    head_dim = getattr(text, "head_dim", None)
    if head_dim is not None:
        keys[f"{a}.attention.key_length"] = keys[f"{a}.attention.value_length"] = int(head_dim)
    if arch.llama_keys:
        keys[f"{a}.vocab_size"] = int(text.vocab_size)
        keys[f"{a}.rope.dimension_count"] = int(head_dim or text.hidden_size // heads)
    return keys
