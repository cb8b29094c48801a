"""Published config.json values of the known architectures beyond the Llama-style block.

Each entry is the part of a hub ``config.json`` that ``transformers.AutoConfig.for_model(model_type, **values)``
needs to rebuild the model on meta (traced block terms, the simulation, the parameter count); fields that change
neither memory nor shapes are left out. ``n_params``: that config's parameter count on meta, tied weights once
(checked against the published safetensors totals in tests/test_models.py). Pure data.
"""

from __future__ import annotations

from typing import Any


def _config(model_type: str, sizes: tuple[int, int, int, int, int, int], tied: bool, **more: Any) -> dict[str, Any]:
    """The config.json values every row writes, ``sizes`` as (hidden, layers, heads, kv heads, intermediate,
    vocabulary), and the family's own (``more``)."""
    hidden, layers, heads, kv, inter, vocab = sizes
    values = dict(model_type=model_type, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads)
    values.update(num_key_value_heads=kv, intermediate_size=inter, vocab_size=vocab, tie_word_embeddings=tied)
    return {**values, **more}


def _qwen3(hidden: int, layers: int, heads: int, inter: int, tied: bool) -> dict[str, Any]:
    qwen = {"head_dim": 128, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "attention_bias": False}
    sizes = (hidden, layers, heads, 8, inter, 151936)
    return _config("qwen3", sizes, tied, max_position_embeddings=40960, hidden_act="silu", **qwen)


_GEMMA = {"head_dim": 256, "query_pre_attn_scalar": 256, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6}


def _gemma2(hidden: int, layers: int, heads: int, kv: int, inter: int) -> dict[str, Any]:
    caps = {"attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0}
    sizes = (hidden, layers, heads, kv, inter, 256000)
    return _config("gemma2", sizes, True, max_position_embeddings=8192, sliding_window=4096, **caps, **_GEMMA)


def _gemma3(hidden: int, layers: int, heads: int, kv: int, inter: int, vocab: int, window: int) -> dict[str, Any]:
    positions = 131072 if layers > 26 else 32768
    window_kw = {"sliding_window": window, "sliding_window_pattern": 6}
    sizes = (hidden, layers, heads, kv, inter, vocab)
    return _config("gemma3_text", sizes, True, max_position_embeddings=positions, **window_kw, **_GEMMA)


def _mistral(vocab: int, window: int | None, rope: float) -> dict[str, Any]:
    more = {"sliding_window": window, "rope_theta": rope, "rms_norm_eps": 1e-5, "hidden_act": "silu"}
    sizes = (4096, 32, 32, 8, 14336, vocab)
    return _config("mistral", sizes, False, head_dim=128, max_position_embeddings=32768, **more)


def _granite(hidden: int, inter: int) -> dict[str, Any]:
    scales = {"attention_multiplier": 0.015625, "embedding_multiplier": 12.0, "residual_multiplier": 0.22}
    more = {"rope_theta": 5000000.0, "rms_norm_eps": 1e-5, "attention_bias": False, "mlp_bias": False}
    logits = 8.0 if hidden == 2048 else 16.0
    sizes = (hidden, 40, 32, 8, inter, 49155)
    return _config("granite", sizes, True, max_position_embeddings=131072, logits_scaling=logits, **scales, **more)


def _olmo2(hidden: int, layers: int, inter: int) -> dict[str, Any]:
    more = {"max_position_embeddings": 4096, "rope_theta": 500000.0, "rms_norm_eps": 1e-6, "attention_bias": False}
    return _config("olmo2", (hidden, layers, 32, 32, inter, 100352), False, **more)


def _phi(heads: int, kv: int, vocab: int, tied: bool, positions: int, **more: Any) -> dict[str, Any]:
    phi = {"rms_norm_eps": 1e-5, "hidden_act": "silu", "rope_theta": 10000.0, "max_position_embeddings": positions}
    return _config("phi3", (3072, 32, heads, kv, 8192, vocab), tied, **phi, **more)


_SMOLLM3 = {"no_rope_layer_interval": 4, "rope_theta": 5000000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu"}
_SMOLLM3.update(max_position_embeddings=65536, attention_bias=False)

# name -> (organisation, hub-id variants, config.json values, meta-device parameter count); a variant is a suffix of
# the name ("" or "-it") or, when it does not start with "-", a whole repository name ("Mistral-7B-Instruct-v0.3")
KNOWN_CONFIGS: dict[str, tuple[str, tuple[str, ...], dict[str, Any], int]] = {
    "Qwen3-0.6B": ("Qwen", ("-Base", ""), _qwen3(1024, 28, 16, 3072, True), 596049920),
    "Qwen3-1.7B": ("Qwen", ("-Base", ""), _qwen3(2048, 28, 16, 6144, True), 1720574976),
    "Qwen3-4B": ("Qwen", ("-Base", ""), _qwen3(2560, 36, 32, 9728, True), 4022468096),
    "Qwen3-8B": ("Qwen", ("-Base", ""), _qwen3(4096, 36, 32, 12288, False), 8190735360),
    "gemma-2-2b": ("google", ("", "-it"), _gemma2(2304, 26, 8, 4, 9216), 2614341888),
    "gemma-2-9b": ("google", ("", "-it"), _gemma2(3584, 42, 16, 8, 14336), 9241705984),
    "gemma-3-1b": ("google", ("-pt", "-it"), _gemma3(1152, 26, 4, 1, 6912, 262144, 512), 999885952),
    "gemma-3-4b": ("google", ("-pt", "-it"), _gemma3(2560, 34, 8, 4, 10240, 262208, 1024), 3880263168),
    "Mistral-7B-v0.3": ("mistralai", ("", "Mistral-7B-Instruct-v0.3"), _mistral(32768, None, 1000000.0), 7248023552),
    "Mistral-7B-v0.1": ("mistralai", ("", "Mistral-7B-Instruct-v0.1"), _mistral(32000, 4096, 10000.0), 7241732096),
    "Phi-3-mini-4k-instruct": ("microsoft", ("",), _phi(32, 32, 32064, False, 4096, sliding_window=2047), 3821079552),
    "Phi-4-mini-instruct": (
        "microsoft",
        ("",),
        _phi(24, 8, 200064, True, 131072, partial_rotary_factor=0.75),
        3836021760,
    ),
    "SmolLM3-3B": (
        "HuggingFaceTB",
        ("-Base", ""),
        _config("smollm3", (2048, 36, 16, 4, 11008, 128256), True, **_SMOLLM3),
        3075098624,
    ),
    "granite-3.1-2b": ("ibm-granite", ("-base", "-instruct"), _granite(2048, 8192), 2533531648),
    "granite-3.1-8b": ("ibm-granite", ("-base", "-instruct"), _granite(4096, 12800), 8170848256),
    "OLMo-2-0425-1B": ("allenai", ("", "-Instruct"), _olmo2(2048, 16, 8192), 1484916736),
    "OLMo-2-1124-7B": ("allenai", ("", "-Instruct"), _olmo2(4096, 32, 11008), 7298617344),
}
