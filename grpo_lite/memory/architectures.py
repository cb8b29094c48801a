"""The known-architecture table: decoder shapes that let the planner work offline.

One row per architecture (base and instruct checkpoints share a row); every row names its source.
Pure data and arithmetic: nothing heavy is imported here.

>>> arch = find_architecture("llama-3.2-1b-instruct")
>>> arch.layers, arch.hidden, arch.tied
(16, 2048, True)
>>> f"{arch.n_params:,}"
'1,235,814,400'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from grpo_lite.memory.known_configs import KNOWN_CONFIGS

Family = Literal["llama", "qwen2", "other"]

# The decoder's linear layers, in forward order, for Llama-style blocks (Llama, Qwen2, SmolLM2).
LLAMA_LINEARS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
# Phi-3's fused projections: q, k, v in one matrix, gate and up in another
FUSED_LINEARS: tuple[str, ...] = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


@dataclass(frozen=True)
class Architecture:
    """Shapes of a decoder-only transformer with a Llama-style block.

    Attributes:
        name: display name, e.g. ``"Llama-3.2-1B"``.
        hub_ids: hub ids that share these shapes (base and instruct), first is canonical.
        family: ``"llama"``, ``"qwen2"`` (q/k/v biases) or ``"other"`` (read from a config).
        layers, hidden, heads, kv_heads, head_dim, intermediate, vocab: the decoder's sizes.
        tied: whether lm_head shares the embedding matrix.
        attention_bias: whether q/k/v projections carry a bias.
        gated_mlp: SwiGLU-style MLP (gate, up, down) rather than two matrices.
        source: where the numbers come from.
        n_params: parameter count, tied weights once. Default: from the shapes; rows built from a config pass the
            meta-device count.
        linear_names: leaf names of the decoder linear layers (LoRA / GaLore targets).
        model_type: transformers' ``model_type``; empty for the Llama / Qwen2 rows.
        config_json: the config values that rebuild the model (``AutoConfig.for_model``), as JSON; empty for the
            Llama / Qwen2 rows (their shapes are the whole config).
    """

    name: str
    hub_ids: tuple[str, ...]
    family: Family
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied: bool
    attention_bias: bool = False
    gated_mlp: bool = True
    source: str = ""
    n_params: int = 0
    linear_names: tuple[str, ...] = field(default=LLAMA_LINEARS)
    model_type: str = ""
    config_json: str = ""

    def __post_init__(self) -> None:
        if self.n_params == 0:
            object.__setattr__(self, "n_params", self.formula_params())

    @property
    def q_dim(self) -> int:
        """heads x head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    def linear_shapes(self) -> tuple[tuple[str, int, int], ...]:
        """The ``(name, out_features, in_features)`` of each linear layer in one decoder block.

        >>> find_architecture("SmolLM2-135M").linear_shapes()[1]
        ('k_proj', 192, 576)
        """
        h, i = self.hidden, self.intermediate
        if set(self.linear_names) == set(FUSED_LINEARS):
            return (
                ("qkv_proj", self.q_dim + 2 * self.kv_dim, h),
                ("o_proj", h, self.q_dim),
                ("gate_up_proj", 2 * i, h),
                ("down_proj", h, i),
            )
        attn = (
            ("q_proj", self.q_dim, h),
            ("k_proj", self.kv_dim, h),
            ("v_proj", self.kv_dim, h),
            ("o_proj", h, self.q_dim),
        )
        if self.gated_mlp:
            return attn + (("gate_proj", i, h), ("up_proj", i, h), ("down_proj", h, i))
        return attn + (("up_proj", i, h), ("down_proj", h, i))

    @property
    def linear_params_per_layer(self) -> int:
        """Weights of the decoder linears of one block (no biases)."""
        return sum(out * inp for _, out, inp in self.linear_shapes())

    @property
    def embedding_params(self) -> int:
        """The input embedding V x h."""
        return self.vocab * self.hidden

    @property
    def lm_head_params(self) -> int:
        """The output projection V x h; 0 when tied to the embedding."""
        return 0 if self.tied else self.vocab * self.hidden

    @property
    def linear_params(self) -> int:
        """All decoder linear weights (the part that 4-bit / 8-bit loading quantizes)."""
        return self.layers * self.linear_params_per_layer

    @property
    def other_params(self) -> int:
        """Everything that stays in 16-bit under quantized loading: embeddings, lm_head, norms, biases."""
        return self.n_params - self.linear_params

    def formula_params(self) -> int:
        """Parameter count from the shapes alone (tied weights once, RMSNorm weights, q/k/v biases).

        >>> find_architecture("Qwen2.5-0.5B").formula_params()
        494032768
        """
        bias = (self.q_dim + 2 * self.kv_dim) if self.attention_bias else 0
        per_layer = self.linear_params_per_layer + bias + 2 * self.hidden
        return self.layers * per_layer + self.embedding_params + self.lm_head_params + self.hidden

    @property
    def largest_layer_params(self) -> int:
        """Parameters of one decoder block (what ZeRO-3 / FSDP gathers at a time)."""
        return self.linear_params_per_layer + 2 * self.hidden

    @property
    def config_values(self) -> dict[str, Any]:
        """The config values the row was built from (``model_type`` included); empty for Llama / Qwen2 rows."""
        return json.loads(self.config_json) if self.config_json else {}

    @property
    def short_names(self) -> tuple[str, ...]:
        """Hub ids without their organisation, e.g. ``Llama-3.2-1B-Instruct``."""
        return tuple(h.split("/")[-1] for h in self.hub_ids)


def _llama(name: str, org: str, sizes: tuple[int, ...], tied: bool, family: Family = "llama") -> Architecture:
    """A Llama-style row from its published shapes: (layers, hidden, heads, kv heads, intermediate, vocabulary)."""
    layers, hidden, heads, kv, inter, vocab = sizes
    ids = (f"{org}/{name}", f"{org}/{name}-Instruct")
    shapes: dict[str, Any] = dict(
        layers=layers, hidden=hidden, heads=heads, kv_heads=kv, head_dim=hidden // heads, intermediate=inter
    )
    source = f"config.json of {ids[0]} on the Hugging Face hub (public)"
    return Architecture(
        name, ids, family, **shapes, vocab=vocab, tied=tied, attention_bias=family == "qwen2", source=source
    )


def _from_config(name: str) -> Architecture:
    """A row from its published config.json values (:data:`~grpo_lite.memory.known_configs.KNOWN_CONFIGS`)."""
    org, variants, c, n_params = KNOWN_CONFIGS[name]
    ids = tuple(f"{org}/{v}" if v and not v.startswith("-") else f"{org}/{name}{v}" for v in variants)
    heads = c["num_attention_heads"]
    fused = c["model_type"] == "phi3"
    return Architecture(
        name=name,
        hub_ids=ids,
        family="other",
        layers=c["num_hidden_layers"],
        hidden=c["hidden_size"],
        heads=heads,
        kv_heads=c["num_key_value_heads"],
        head_dim=c.get("head_dim") or c["hidden_size"] // heads,
        intermediate=c["intermediate_size"],
        vocab=c["vocab_size"],
        tied=c["tie_word_embeddings"],
        attention_bias=c.get("attention_bias", False),
        source=f"config.json of {ids[0]} on the Hugging Face hub (public); {n_params:,} parameters on the meta device",
        n_params=n_params,
        linear_names=FUSED_LINEARS if fused else LLAMA_LINEARS,
        model_type=c["model_type"],
        config_json=json.dumps(c, sort_keys=True),
    )


# Ordered smallest family member first; ONE registry (docs and CLI render from it).
KNOWN_ARCHITECTURES: tuple[Architecture, ...] = (
    _llama("Llama-3.2-1B", "meta-llama", (16, 2048, 32, 8, 8192, 128256), True),
    _llama("Llama-3.2-3B", "meta-llama", (28, 3072, 24, 8, 8192, 128256), True),
    _llama("Llama-3.1-8B", "meta-llama", (32, 4096, 32, 8, 14336, 128256), False),
    _llama("Qwen2.5-0.5B", "Qwen", (24, 896, 14, 2, 4864, 151936), True, "qwen2"),
    _llama("Qwen2.5-1.5B", "Qwen", (28, 1536, 12, 2, 8960, 151936), True, "qwen2"),
    _llama("Qwen2.5-3B", "Qwen", (36, 2048, 16, 2, 11008, 151936), True, "qwen2"),
    _llama("Qwen2.5-7B", "Qwen", (28, 3584, 28, 4, 18944, 152064), False, "qwen2"),
    _llama("Qwen2.5-14B", "Qwen", (48, 5120, 40, 8, 13824, 152064), False, "qwen2"),
    _llama("SmolLM2-135M", "HuggingFaceTB", (30, 576, 9, 3, 1536, 49152), True),
    _llama("SmolLM2-360M", "HuggingFaceTB", (32, 960, 15, 5, 2560, 49152), True),
    _llama("SmolLM2-1.7B", "HuggingFaceTB", (24, 2048, 32, 32, 8192, 49152), True),
    *(_from_config(name) for name in KNOWN_CONFIGS),
)


def find_architecture(name: str) -> Architecture | None:
    """Look a hub id, a short name (the id without its org) or a row name up, case-insensitively.

    Returns:
        The row, or None when the name is not in the table.

    >>> find_architecture("qwen/qwen2.5-7b-instruct").name
    'Qwen2.5-7B'
    >>> find_architecture("gpt2") is None
    True
    """
    key = name.strip().lower()
    for arch in KNOWN_ARCHITECTURES:
        candidates = {arch.name.lower(), *(h.lower() for h in arch.hub_ids), *(s.lower() for s in arch.short_names)}
        if key in candidates:
            return arch
    return None
