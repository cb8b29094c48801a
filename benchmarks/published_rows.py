"""The published GPU figures benchmarks/gpu_published.py simulates: each row's source, figure and configuration.

Pure data (no torch): every row cites where it was published (a GitHub reference), quotes the figure as
published, says what it counts (``max_allocated``: ``torch.cuda.max_memory_allocated``; ``nvidia_smi``: the
process's device memory) and states every configuration field its kind needs (:data:`REQUIRED`); fields the
source leaves out are in ``assumed``, each with where its value comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ARCHS", "MB", "MIB", "REQUIRED", "ROWS", "ROWS_BY_LABEL", "Kind", "Measures", "Published"]

MIB, MB = 1024**2, 1000**2
Kind = Literal["logprob", "lm_head_loss", "grpo_step"]
Measures = Literal["max_allocated", "nvidia_smi"]

# the configuration fields every row of a kind must state (published, or marked assumed with the reason)
REQUIRED: dict[str, tuple[str, ...]] = {
    "logprob": ("function", "batch", "seq_len", "vocab", "dtype", "backward"),
    "lm_head_loss": ("source", "batch", "seq_len", "hidden", "vocab", "dtype", "backward", "beta", "held"),
    "grpo_step": ("model", "method", "per_device_train_batch_size", "num_generations", "max_prompt_length",
                  "max_completion_length", "gradient_checkpointing", "dtype", "bf16", "beta", "optimizer",
                  "attention"),
}

# the architectures the rows name, from their config.json (no download)
ARCHS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-0.6B": dict(model_type="qwen3", hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                            num_key_value_heads=8, head_dim=128, intermediate_size=3072, vocab_size=151936,
                            tie_word_embeddings=True, rms_norm_eps=1e-6, max_position_embeddings=40960),
    "Qwen/Qwen3-1.7B": dict(model_type="qwen3", hidden_size=2048, num_hidden_layers=28, num_attention_heads=16,
                            num_key_value_heads=8, head_dim=128, intermediate_size=6144, vocab_size=151936,
                            tie_word_embeddings=True, rms_norm_eps=1e-6, max_position_embeddings=40960),
}


@dataclass(frozen=True)
class Published:
    """One published figure and what it was measured at.

    Attributes:
        label: the row's name.
        cite: where it was published, as a GitHub reference (``owner/repo#number``, or ``owner/repo@commit:path``).
        quote: the figure as published, verbatim.
        measured_bytes: the figure in bytes.
        measures: what the figure is: ``max_allocated`` (``torch.cuda.max_memory_allocated``, tensors only)
            or ``nvidia_smi`` (the process's device memory: the CUDA context + the allocator's reserved pool).
        gpu: the card.
        kind: which code path is simulated.
        trl: the TRL version whose code runs (None: no TRL code involved).
        config: the configuration (see :data:`REQUIRED`).
        assumed: configuration fields the source does not state, each with where the value comes from.
    """

    label: str
    cite: str
    quote: str
    measured_bytes: int
    measures: Measures
    gpu: str
    kind: Kind
    trl: str | None
    config: dict[str, Any]
    assumed: dict[str, str] = field(default_factory=dict)

    def missing(self) -> list[str]:
        """Required configuration fields the row lacks."""
        return [k for k in REQUIRED[self.kind] if k not in self.config]


_TRL017_DEFAULTS = "TRL 0.17 default (GRPOConfig / TrainingArguments field default, not set in the issue)"
_T3456 = dict(method="full", per_device_train_batch_size=4, max_prompt_length=2048, max_completion_length=1024,
              num_generations=4, gradient_checkpointing=False, dtype="float32", bf16=False, beta=0.04,
              optimizer="adamw_torch", attention="sdpa")
_T3456_ASSUMED = {
    "num_generations": "not stated; 4 (a divisor of the per-device batch of 4 on one GPU; it does not change "
                       "the per-device memory, which follows the batch of 4 sequences)",
    "gradient_checkpointing": _TRL017_DEFAULTS, "dtype": "TRL 0.17 loads with torch_dtype=None: float32",
    "bf16": _TRL017_DEFAULTS, "beta": _TRL017_DEFAULTS + ": a full reference copy", "optimizer": _TRL017_DEFAULTS,
    "attention": "transformers' default (sdpa)",
    "lengths": "the issue's data reach the prompt limit (\"max length of prompt is 2500\"); completions are "
               "taken at their maximum",
}


_LIGER_CSV = "linkedin/Liger-Kernel@78125679ab211ce4e2174987189bc0e1675a2200:benchmark/data/all_benchmark_data.csv"
_LIGER_ASSUMED = {
    "source": "the CSV's rows were measured with Liger 0.6.1 plus the GSPO change (its commit); the GSPO change "
              "adds a sequence-level branch and leaves the token-level path this row runs as in 0.6.1's test",
    "measures": "benchmark/scripts/utils.py _test_memory: torch.cuda.max_memory_allocated() / 2**20 after "
                "reset_peak_memory_stats, per iteration of fwd + bwd; the 50% quantile of 10 iterations",
}


def _liger_row(batch: int, mib: float) -> Published:
    return Published(
        label=f"Liger GRPO loss benchmark, torch provider, B={batch} x T=1024, H=4096, V=128256",
        cite=_LIGER_CSV,
        quote=f"fused_linear_grpo_loss_token,torch,full,memory,MB,B,B,{batch},{mib},...,NVIDIA A100-SXM4-80GB",
        measured_bytes=round(mib * MIB), measures="max_allocated", gpu="A100-SXM4-80GB", kind="lm_head_loss",
        trl=None,
        config=dict(source="liger_kernel-0.6.1/test/chunked_loss/test_grpo_loss.py:TorchLMHeadGRPO", batch=batch,
                    seq_len=1024, hidden=4096, vocab=128256, dtype="bfloat16", backward=True, beta=0.1,
                    held="both providers' modules (lin + ref_lin each), x, ref_input, ids, mask, advantages; "
                         "lin.weight and x gradients from the previous iteration"),
        assumed=_LIGER_ASSUMED,
    )

ROWS: tuple[Published, ...] = (
    Published(
        label="log_softmax + gather, fp32 logits 16 x 1024 x 32768",
        cite="OpenRLHF/OpenRLHF#718",
        quote="vram usage is reduced from 4295MB to 2282MB (2147MB of which is required to store the logits "
              "in the first place)",
        measured_bytes=4295 * MB, measures="max_allocated", gpu="not stated (CUDA)", kind="logprob", trl=None,
        config=dict(function="naive", batch=16, seq_len=1024, vocab=32768, dtype="float32", backward=False),
        assumed={"measures": "the PR's benchmark reads torch.cuda.max_memory_allocated; MB = 10^6 bytes "
                             "(2147 MB is exactly 16 x 1024 x 32768 x 4 bytes)"},
    ),
    Published(
        label="TRL selective_log_softmax, fp32 logits 16 x 1024 x 32768",
        cite="OpenRLHF/OpenRLHF#718",
        quote="vram usage is reduced from 4295MB to 2282MB",
        measured_bytes=2282 * MB, measures="max_allocated", gpu="not stated (CUDA)", kind="logprob",
        trl="0.15.2",
        config=dict(function="trl.selective_log_softmax", batch=16, seq_len=1024, vocab=32768, dtype="float32",
                    backward=False),
        assumed={"function": "the PR's gather + per-row logsumexp, merged into TRL the next day as "
                             "selective_log_softmax (huggingface/trl#2799, same author); TRL 0.15.2's copy runs"},
    ),
    Published(
        label="TRL #3456: Qwen3-0.6B full GRPO, 4 x (2048 + 1024), A100 80 GB",
        cite="huggingface/trl#3456",
        quote="Qwen3 0.6B: 49273MiB /  81920MiB", measured_bytes=49273 * MIB, measures="nvidia_smi",
        gpu="A100 80 GB", kind="grpo_step", trl="0.17.0", config=dict(model="Qwen/Qwen3-0.6B", **_T3456),
        assumed=_T3456_ASSUMED,
    ),
    Published(
        label="TRL #3456: Qwen3-1.7B full GRPO, 4 x (2048 + 1024), A100 80 GB",
        cite="huggingface/trl#3456",
        quote="Qwen3 1.7B: 78147MiB /  81920MiB", measured_bytes=78147 * MIB, measures="nvidia_smi",
        gpu="A100 80 GB", kind="grpo_step", trl="0.17.0", config=dict(model="Qwen/Qwen3-1.7B", **_T3456),
        assumed=_T3456_ASSUMED,
    ),
    _liger_row(2, 9083.28125),
    _liger_row(4, 13138.3125),
    _liger_row(8, 21250.375),
    _liger_row(16, 37474.5),
)

ROWS_BY_LABEL = {r.label: r for r in ROWS}
