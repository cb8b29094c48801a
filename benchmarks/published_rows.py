"""The published GPU figures benchmarks/gpu_published.py simulates: each row's source, figure and configuration.

Pure data (no torch): every row cites where it was published (a GitHub reference), quotes the figure as
published, says what it counts (``max_allocated``: ``torch.cuda.max_memory_allocated``; ``nvidia_smi``: the
process's device memory; ``allocated_delta``: the allocator's peak minus what was allocated when the
measured call began) and states every configuration field its kind needs (:data:`REQUIRED`); fields the
source leaves out are in ``assumed``, each with where its value comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ARCHS", "MB", "MIB", "REQUIRED", "ROWS", "ROWS_BY_LABEL", "Kind", "Measures", "Published"]

MIB, MB = 1024**2, 1000**2
Kind = Literal[
    "logprob", "lm_head_loss", "grpo_step", "cce_baseline", "lora_head_ce", "softmax_backward", "hf_trainer_step"
]
Measures = Literal["max_allocated", "allocated_delta", "nvidia_smi"]

# the configuration fields every row of a kind must state (published, or marked assumed with the reason)
REQUIRED: dict[str, tuple[str, ...]] = {
    "logprob": ("function", "batch", "seq_len", "vocab", "dtype", "backward"),
    "lm_head_loss": ("source", "batch", "seq_len", "hidden", "vocab", "dtype", "backward", "beta", "held"),
    "grpo_step": (
        "model",
        "method",
        "per_device_train_batch_size",
        "num_generations",
        "max_prompt_length",
        "max_completion_length",
        "gradient_checkpointing",
        "dtype",
        "bf16",
        "beta",
        "optimizer",
        "attention",
    ),
    "cce_baseline": ("source", "harness", "tokens", "hidden", "vocab", "dtype", "softcap", "phase"),
    "lora_head_ce": (
        "source",
        "function",
        "batch",
        "seq_len",
        "hidden",
        "vocab",
        "rank",
        "scale",
        "dtype",
        "chunk_size",
        "held",
    ),
    "softmax_backward": ("shape", "dtype", "dim", "loss", "held"),
    "hf_trainer_step": (
        "model",
        "head",
        "num_labels",
        "batch",
        "seq_len",
        "gradient_accumulation_steps",
        "gradient_checkpointing",
        "dtype",
        "attention",
        "optimizer",
        "weight_decay",
        "max_grad_norm",
        "zero_grad",
        "cuda_context_mib",
    ),
}

# the architectures the rows name, from their config.json (no download)
ARCHS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen3-0.6B": dict(
        model_type="qwen3",
        hidden_size=1024,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=3072,
        vocab_size=151936,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        max_position_embeddings=40960,
    ),
    "Qwen/Qwen3-1.7B": dict(
        model_type="qwen3",
        hidden_size=2048,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        intermediate_size=6144,
        vocab_size=151936,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        max_position_embeddings=40960,
    ),
    "google-bert/bert-large-uncased": dict(
        model_type="bert",
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
        vocab_size=30522,
        max_position_embeddings=512,
        type_vocab_size=2,
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
    ),
}


@dataclass(frozen=True)
class Published:
    """One published figure and what it was measured at.

    Attributes:
        label: the row's name.
        cite: where it was published, as a GitHub reference (``owner/repo#number``, or ``owner/repo@commit:path``).
        quote: the figure as published, verbatim.
        measured_bytes: the figure in bytes.
        measures: what the figure is: ``max_allocated`` (``torch.cuda.max_memory_allocated``, tensors only),
            ``allocated_delta`` (that peak minus the bytes allocated when the measured call began) or
            ``nvidia_smi`` (the process's device memory: the CUDA context + the allocator's reserved pool).
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
_T3456 = dict(
    method="full",
    per_device_train_batch_size=4,
    max_prompt_length=2048,
    max_completion_length=1024,
    num_generations=4,
    gradient_checkpointing=False,
    dtype="float32",
    bf16=False,
    beta=0.04,
    optimizer="adamw_torch",
    attention="sdpa",
)
_T3456_ASSUMED = {
    "num_generations": "not stated; 4 (a divisor of the per-device batch of 4 on one GPU; it does not change "
    "the per-device memory, which follows the batch of 4 sequences)",
    "gradient_checkpointing": _TRL017_DEFAULTS,
    "dtype": "TRL 0.17 loads with torch_dtype=None: float32",
    "bf16": _TRL017_DEFAULTS,
    "beta": _TRL017_DEFAULTS + ": a full reference copy",
    "optimizer": _TRL017_DEFAULTS,
    "attention": "transformers' default (sdpa)",
    "lengths": 'the issue\'s data reach the prompt limit ("max length of prompt is 2500"); completions are '
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
        measured_bytes=round(mib * MIB),
        measures="max_allocated",
        gpu="A100-SXM4-80GB",
        kind="lm_head_loss",
        trl=None,
        config=dict(
            source="liger_kernel-0.6.1/test/chunked_loss/test_grpo_loss.py:TorchLMHeadGRPO",
            batch=batch,
            seq_len=1024,
            hidden=4096,
            vocab=128256,
            dtype="bfloat16",
            backward=True,
            beta=0.1,
            held="both providers' modules (lin + ref_lin each), x, ref_input, ids, mask, advantages; "
            "lin.weight and x gradients from the previous iteration",
        ),
        assumed=_LIGER_ASSUMED,
    )


_CCE = "apple/ml-cross-entropy@af5f96a78c0352b5c9ece87a4daae9bfb9e97a22:README.md"
_CCE_ASSUMED = {
    "tokens": "benchmark/data/models.py: generate_test_data_otf keeps the first M = 8 * 1024 valid (non-ignored) "
    "tokens of alpaca-cleaned batches: exactly 8,192 rows",
    "hidden": "google/gemma-2-2b-it config.json: hidden_size 2304, vocab_size 256000, final_logit_softcapping 30.0 "
    "(the benchmark passes the config's softcapping to baseline())",
    "measures": "benchmark/memory.py Stats.measure: allocated_bytes.all.peak after the measured call minus the same "
    "counter after reset_peak_memory_stats before it, / 2**20 (MiB, printed as op_mem_mb)",
}


def _cce_row(phase: str, mib: float, line: str) -> Published:
    return Published(
        label=f"Cut Cross-Entropy benchmark, baseline {phase}, 8192 tokens x 256000 (Gemma 2 2B head)",
        cite=_CCE,
        quote=line,
        measured_bytes=round(mib * MIB),
        measures="allocated_delta",
        gpu="A100 SXM4",
        kind="cce_baseline",
        trl=None,
        config=dict(
            source="ml-cross-entropy-af5f96a/benchmark/__main__.py:baseline",
            harness="ml-cross-entropy-af5f96a/benchmark/memory.py:Stats.measure",
            tokens=8192,
            hidden=2304,
            vocab=256000,
            dtype="bfloat16",
            softcap=30.0,
            phase=phase,
        ),
        assumed=_CCE_ASSUMED,
    )


_CLL = "malaysia-ai/Chunk-loss-LoRA@e4cacc8134a20307a82e8baa6a86b7450a150d44:benchmark/ce.py"
_CLL_HELD = (
    "the frozen head weight [V, D], the LoRA weights A [R, D] and B [V, R] and their gradients, x [B, T, D] "
    "and its gradient (left by the warm-up calls), the int64 labels, and triton.testing.do_bench's L2-flush "
    "buffer (256 MiB of int32, allocated after reset_peak_memory_stats)"
)
_CLL_ASSUMED = {
    "held": "the script does not name its Triton version; its date (March 2025) means Triton 3.x, whose do_bench "
    "takes the buffer from driver.get_empty_cache_for_benchmark(): 256 * 1024 * 1024 bytes",
    "measures": "the script prints torch.cuda.max_memory_allocated() / 1e9 after reset_peak_memory_stats and "
    "do_bench(f): GB = 10^9 bytes",
}


def _cll_row(name: str, function: str, gb: float, chunk_size: int | None) -> Published:
    return Published(
        label=f"Chunk-loss-LoRA benchmark, {name}, LoRA head CE 4 x 1024, D=768, V=128256",
        cite=_CLL,
        quote=f"{name}: ... Peak mem:  {gb}",
        measured_bytes=round(gb * 1e9),
        measures="max_allocated",
        gpu="not stated (CUDA, Triton)",
        kind="lora_head_ce",
        trl=None,
        config=dict(
            source=f"Chunk-loss-LoRA-e4cacc8/benchmark/ce.py:{function}",
            function=function,
            batch=4,
            seq_len=1024,
            hidden=768,
            vocab=128256,
            rank=64,
            scale=2.0,
            dtype="bfloat16",
            chunk_size=chunk_size,
            held=_CLL_HELD,
        ),
        assumed=_CLL_ASSUMED,
    )


_HF_ANATOMY = "huggingface/transformers@7d5e65fe8a39e4a2c272f194d753dcfca5782b22:docs/source/en/model_memory_anatomy.md"
# the same experiments, continued on the same V100 (the English page no longer shows the figures; its
# translations at this commit still do)
_HF_GPU_ONE = "huggingface/transformers@c0c397c2ef8d96efb688d01cf2bf3cec10bedc7d:docs/source/zh/perf_train_gpu_one.md"
_HF_ASSUMED = {
    "attention": "transformers of early 2022 had only BERT's eager attention; the simulation runs transformers "
    "5.24's eager BERT (same saved tensors: softmax output, dropout mask, dropout output)",
    "optimizer": "Trainer.get_optimizer_cls_and_kwargs of transformers 4.16 (the first with optim=, which the "
    "Adafactor run uses): its own AdamW (adamw_hf, the default) or Adafactor(scale_parameter=False, "
    "relative_step=False), run from that wheel's source; lr, eps, weight_decay and max_grad_norm are "
    "TrainingArguments defaults",
    "zero_grad": "Trainer 4.16 calls model.zero_grad(), which in PyTorch 1.10 zeroes the gradients in place "
    "(set_to_none=False): they stay allocated between steps",
    "gradient_checkpointing": "4.16's BERT wraps each layer in torch.utils.checkpoint.checkpoint, reentrant in "
    "PyTorch 1.10; the simulation asks transformers 5.24 for the reentrant one",
    "cuda_context_mib": "the first page's own measurement of the CUDA context on that machine: 'GPU memory "
    "occupied: 1343 MB' after torch.ones((1, 1)).to('cuda')",
    "measures": "pynvml nvmlDeviceGetMemoryInfo(handle).used // 1024**2 after trainer.train(): the whole card's "
    "used memory (context + the caching allocator's reserve), MiB",
}
_BERT = dict(
    model="google-bert/bert-large-uncased",
    head="sequence_classification",
    num_labels=2,
    seq_len=512,
    dtype="float32",
    attention="eager",
    weight_decay=0.0,
    max_grad_norm=1.0,
    zero_grad="in_place",
    cuda_context_mib=1343,
)


def _bert_row(
    what: str, cite: str, mib: int, batch: int, accumulation: int, checkpointing: bool, optimizer: str
) -> Published:
    return Published(
        label=f"Transformers docs: BERT-large classifier fp32 training, {what}, V100 16 GB",
        cite=cite,
        quote=f"GPU memory occupied: {mib} MB.",
        measured_bytes=mib * MIB,
        measures="nvidia_smi",
        gpu="V100-SXM2 16 GB",
        kind="hf_trainer_step",
        trl=None,
        config=dict(
            _BERT,
            batch=batch,
            gradient_accumulation_steps=accumulation,
            gradient_checkpointing=checkpointing,
            optimizer=f"transformers-4.16.0/transformers/optimization.py:{optimizer}",
        ),
        assumed=_HF_ASSUMED,
    )


ROWS: tuple[Published, ...] = (
    Published(
        label="log_softmax + gather, fp32 logits 16 x 1024 x 32768",
        cite="OpenRLHF/OpenRLHF#718",
        quote="vram usage is reduced from 4295MB to 2282MB (2147MB of which is required to store the logits "
        "in the first place)",
        measured_bytes=4295 * MB,
        measures="max_allocated",
        gpu="not stated (CUDA)",
        kind="logprob",
        trl=None,
        config=dict(function="naive", batch=16, seq_len=1024, vocab=32768, dtype="float32", backward=False),
        assumed={
            "measures": "the PR's benchmark reads torch.cuda.max_memory_allocated; MB = 10^6 bytes "
            "(2147 MB is exactly 16 x 1024 x 32768 x 4 bytes)"
        },
    ),
    Published(
        label="TRL selective_log_softmax, fp32 logits 16 x 1024 x 32768",
        cite="OpenRLHF/OpenRLHF#718",
        quote="vram usage is reduced from 4295MB to 2282MB",
        measured_bytes=2282 * MB,
        measures="max_allocated",
        gpu="not stated (CUDA)",
        kind="logprob",
        trl="0.15.2",
        config=dict(
            function="trl.selective_log_softmax", batch=16, seq_len=1024, vocab=32768, dtype="float32", backward=False
        ),
        assumed={
            "function": "the PR's gather + per-row logsumexp, merged into TRL the next day as "
            "selective_log_softmax (huggingface/trl#2799, same author); TRL 0.15.2's copy runs"
        },
    ),
    Published(
        label="TRL #3456: Qwen3-0.6B full GRPO, 4 x (2048 + 1024), A100 80 GB",
        cite="huggingface/trl#3456",
        quote="Qwen3 0.6B: 49273MiB /  81920MiB",
        measured_bytes=49273 * MIB,
        measures="nvidia_smi",
        gpu="A100 80 GB",
        kind="grpo_step",
        trl="0.17.0",
        config=dict(model="Qwen/Qwen3-0.6B", **_T3456),
        assumed=_T3456_ASSUMED,
    ),
    Published(
        label="TRL #3456: Qwen3-1.7B full GRPO, 4 x (2048 + 1024), A100 80 GB",
        cite="huggingface/trl#3456",
        quote="Qwen3 1.7B: 78147MiB /  81920MiB",
        measured_bytes=78147 * MIB,
        measures="nvidia_smi",
        gpu="A100 80 GB",
        kind="grpo_step",
        trl="0.17.0",
        config=dict(model="Qwen/Qwen3-1.7B", **_T3456),
        assumed=_T3456_ASSUMED,
    ),
    _liger_row(2, 9083.28125),
    _liger_row(4, 13138.3125),
    _liger_row(8, 21250.375),
    _liger_row(16, 37474.5),
    _cce_row("loss-fw", 24000.0, "2       baseline     loss-fw        81.9    24000.0    gemma2"),
    _cce_row("loss-bw", 16000.0, "5       baseline     loss-bw       122.4    16000.0    gemma2"),
    _cce_row("loss-fw-bw", 28000.0, "8       baseline  loss-fw-bw       208.8    28000.0    gemma2"),
    _cll_row("eager (non-chunked)", "f", 4.71505408, None),
    _cll_row("eager (chunked)", "chunked_f", 0.600466944, 32),
    Published(
        label="softmax forward + backward of a bf16 [5120, 2, 384, 384] leaf, mean loss",
        cite="pytorch/pytorch#72450",
        quote="Max memory allocated: 15099495424",
        measured_bytes=15099495424,
        measures="max_allocated",
        gpu="not stated (CUDA, PyTorch nightly of March 2022)",
        kind="softmax_backward",
        trl=None,
        config=dict(
            shape=[5120, 2, 384, 384],
            dtype="bfloat16",
            dim=-1,
            loss="mean",
            held="the leaf (kept by the graph the loss still references) and the softmax output",
        ),
        assumed={
            "measures": "the issue prints torch.cuda.max_memory_allocated() in bytes; the leaf itself "
            "(3,019,898,880 bytes, printed after allocation) is counted"
        },
    ),
    _bert_row("batch 4 x 512", _HF_ANATOMY, 14949, 4, 1, False, "AdamW"),
    _bert_row("batch 1 x 512, 4 accumulated", _HF_GPU_ONE, 8681, 1, 4, False, "AdamW"),
    _bert_row("batch 1 x 512, 4 accumulated, checkpointing", _HF_GPU_ONE, 6775, 1, 4, True, "AdamW"),
    _bert_row("batch 4 x 512, Adafactor", _HF_GPU_ONE, 12295, 4, 1, False, "Adafactor"),
)

ROWS_BY_LABEL = {r.label: r for r in ROWS}
