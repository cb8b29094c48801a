"""The memory model: component arithmetic by hand, sums, phases, and the settings it rejects."""

from __future__ import annotations

import dataclasses
import math

import pytest

from grpo_lite.errors import ConfigError
from grpo_lite.memory.architectures import Architecture, find_architecture
from grpo_lite.memory.estimate import COMPONENTS, GIB, MemoryEstimate, estimate
from grpo_lite.memory.step_settings import StepSettings

TOY = Architecture(
    name="toy",
    hub_ids=("toy",),
    family="llama",
    layers=2,
    hidden=64,
    heads=4,
    kv_heads=2,
    head_dim=16,
    intermediate=128,
    vocab=1000,
    tied=True,
)
TOY_PARAMS = 2 * (64 * 64 * 2 + 2 * 32 * 64 + 3 * 128 * 64 + 2 * 64) + 1000 * 64 + 64
SMALL = dict(
    per_device_train_batch_size=2,
    gradient_accumulation_steps=2,
    num_generations=4,
    max_prompt_length=8,
    max_completion_length=16,
)


def phase(est: MemoryEstimate, name: str) -> dict[str, float]:
    return {c.name: c.bytes for c in next(p for p in est.phases if p.name == name).components}


def test_toy_param_count() -> None:
    assert TOY.n_params == TOY_PARAMS == 138_048


def test_every_component_by_hand_full_adamw() -> None:
    est = estimate(TOY, method="full", optim="adamw_torch", update_rounding="nearest", shared_prefix=False, **SMALL)
    head = phase(est, "backward_head")
    tokens = 2 * (8 + 16)  # every completion with its prompt again (shared_prefix=False)
    # per block and token: two norms (fp32 input, the linears' input, x * rsqrt for the trainable weight),
    # attention (q, repeated k and v, out; logsumexp; the mask's bias), MLP (gate, up, SiLU, product)
    per_layer = 2 * (4 * 64 + 2 * 64 + 2 * 64) + (2 * 64 * 4 + 4 * 4 + 2 * 24) + 4 * 2 * 128
    saved = 2 * per_layer * tokens + (4 * 64 + 2 * 64) * tokens
    scored = 2 * 16  # completion tokens on CUDA
    activations = saved + 2 * scored * 64  # + the LM head's saved input
    logits = scored * 32768 * 2 + 28 * scored + 4 * scored * 64 + 4 * 1000 * 64 + 2 * scored * 64 + 2 * 1000 * 64
    # the CUDA context: at least cuBLAS's default workspaces (8 x 4096 KiB + 8 x 16 KiB, PyTorch's CUDA notes), at
    # most what the Transformers docs page measured on a V100 (1343 MB; docs/memory_published.json)
    assert (8 * 4096 + 8 * 16) * 2**10 <= head["cuda_context"] <= 1343 * 2**20
    assert head["weights"] == TOY_PARAMS * 2
    assert head["gradients"] == TOY_PARAMS * 2  # accumulation: the first micro-batch's gradients exist
    monitor = 3 * 4096  # the update monitor's sampled elements
    assert head["optimizer_state"] == TOY_PARAMS * 4 + monitor * 8  # two bf16 moments + the shadows' fp32 moments
    assert head["update_monitor"] == monitor * 24  # shadow, sums, index, snapshot
    assert head["activations"] == activations
    assert head["logits"] == logits
    share = head["allocator_reserve"] / (activations + logits)  # a share of the transient bytes, the same share ...
    layers = phase(est, "backward_layers")  # the final norm's and the head's inputs are gone; the block under
    assert layers["activations"] == 2 * per_layer * tokens - 2 * 128 * tokens  # backward consumed its MLP product
    assert layers["logits"] == 1000 * 64 * 2  # the tied head's weight gradient waits for the embedding's
    assert layers["work_buffers"] == (3 * 2 * 128 + 4 * 64 + 4 * 64) * tokens
    step = phase(est, "optimizer_step")
    assert step["optimizer_step"] == TOY_PARAMS * 2  # foreach AdamW's sqrt(v) buffer
    gen = phase(est, "generation")  # the last decoding step is larger than the prefill here
    assert gen["kv_cache"] == 2 * 2 * 32 * 2 * 4 * 24 * (1 + 1 / 4)  # K,V x layers x kv_dim x bf16 x 4 x 24 (+ cat)
    assert gen["logits"] == 4 * 1000 * 2 and gen["work_buffers"] == 4 * 1000 * 28  # logits, sampling temporaries
    assert gen["gradients"] == 0 and gen.get("vllm", 0.0) == 0.0  # no vLLM: no share
    assert (
        0 < share == pytest.approx(gen["allocator_reserve"] / (2 * 2 * 32 * 2 * 4 * 24 * (1 + 1 / 4) + 4 * 1000 * 30))
    )  # ... here


@pytest.mark.parametrize(
    "method,optim,ckpt",
    [
        ("full", "adamw_torch_fused", False),
        ("full", "adamw_8bit", True),
        ("galore", "galore_adamw_8bit_layerwise", True),
        ("galore", "galore_adamw", False),
        ("lora", "adamw_torch_fused", True),
        ("qlora", "paged_adamw_8bit", True),
    ],
)
@pytest.mark.parametrize("model", ["Llama-3.2-1B", "Qwen2.5-7B", "SmolLM2-135M"])
def test_components_sum_to_total_and_peak_is_largest_phase(model: str, method: str, optim: str, ckpt: bool) -> None:
    batch = dict(per_device_train_batch_size=8, gradient_accumulation_steps=1) if "layerwise" in optim else {}
    est = estimate(model, method=method, optim=optim, gradient_checkpointing=ckpt, **batch)
    assert est.total_bytes == pytest.approx(math.fsum(c.bytes for c in est.components))
    assert est.total_bytes == pytest.approx(max(p.total_bytes for p in est.phases))
    assert [c.name for c in est.components] == [n for n in COMPONENTS if n in est.component_gib()]
    for p in est.phases:
        assert p.total_bytes == pytest.approx(math.fsum(c.bytes for c in p.components))


@pytest.mark.parametrize("dtype,factor", [("bfloat16", 2), ("float16", 2), ("float32", 4)])
def test_weights_by_load_dtype(dtype: str, factor: int) -> None:
    est = estimate(TOY, dtype=dtype, bf16=dtype == "bfloat16", **SMALL)
    assert phase(est, "generation")["weights"] == TOY_PARAMS * factor


@pytest.mark.parametrize("double_quant,per_weight", [(True, 0.5 + 1 / 64 + 4 / (64 * 256)), (False, 0.5 + 4 / 64)])
def test_nf4_weights_with_constants(double_quant: bool, per_weight: float) -> None:
    arch = find_architecture("Llama-3.1-8B")
    assert arch is not None
    est = estimate(arch, method="qlora", optim="paged_adamw_8bit", double_quant=double_quant, lora_r=8)
    lora = arch.layers * 8 * sum(out + inp for _, out, inp in arch.linear_shapes())
    expected = arch.linear_params * per_weight + (arch.n_params - arch.linear_params) * 2 + lora * 2
    assert phase(est, "generation")["weights"] == pytest.approx(expected)
    assert 5.0 < expected / GIB < 5.8  # 8B in NF4: 5.3-5.7 GiB with bf16 embeddings and lm_head


def test_double_quant_saves_about_037_bits_per_weight() -> None:
    arch = find_architecture("Llama-3.1-8B")
    on = estimate(arch, method="qlora", optim="paged_adamw_8bit", double_quant=True)  # type: ignore[arg-type]
    off = estimate(arch, method="qlora", optim="paged_adamw_8bit", double_quant=False)  # type: ignore[arg-type]
    saved_bits = (phase(off, "generation")["weights"] - phase(on, "generation")["weights"]) * 8 / arch.linear_params
    assert saved_bits == pytest.approx(0.373, abs=0.002)


# bitsandbytes 8-bit AdamW: 2 x 1 B + absmax per parameter, but 8 B for the embedding (transformers registers every
# nn.Embedding for 32-bit state): Llama-3.2-1B's tied 262,668,288-parameter embedding is a fifth of the model
EMBEDDING_1B = 128256 * 2048
BNB_1B = (2.03125 * (1_235_814_400 - EMBEDDING_1B) + 8 * EMBEDDING_1B) / 1_235_814_400


@pytest.mark.parametrize(
    "optim,rounding,bytes_per_param",
    [
        ("adamw_torch_fused", "nearest", 4.0),
        ("adamw_torch", "nearest", 4.0),
        ("adamw_torch_fused", "stochastic", 8.0),  # the step runs on an fp32 copy: states are created in fp32
        ("paged_adamw_32bit", "stochastic", 8.0),
        ("adamw_8bit", "stochastic", BNB_1B),
        ("adamw_8bit", "nearest", BNB_1B),
    ],
)
def test_optimizer_state_per_param(optim: str, rounding: str, bytes_per_param: float) -> None:
    arch = find_architecture("Llama-3.2-1B")
    est = estimate(arch, optim=optim, update_rounding=rounding, **SMALL)  # type: ignore[arg-type]
    assert phase(est, "generation")["optimizer_state"] / arch.n_params == pytest.approx(bytes_per_param, rel=0.01)


def test_bitsandbytes_keeps_32_bit_state_for_the_small_tensors_and_the_embedding() -> None:
    from grpo_lite.memory.terms import monitor_state, optimizer_state

    arch = dataclasses.replace(TOY, kv_heads=4, n_params=0)  # every linear at least 4096 elements: 8-bit states
    linears, norms, embedding = 2 * (4 * 64 * 64 + 3 * 128 * 64), 2 * 2 * 64 + 64, 1000 * 64
    assert arch.n_params == linears + norms + embedding
    s = StepSettings.resolve(method="full", optim="adamw_8bit", update_rounding="nearest")
    # 8-bit: two 1-byte moments and an fp32 absmax per 256 values of each; under 4096 elements (bitsandbytes'
    # min_8bit_size) two fp32 moments; the embedding too (transformers registers nn.Embedding for 32-bit state)
    expected = linears * (2 + 2 * 4 / 256) + norms * 8 + embedding * 8
    assert optimizer_state(arch, s).bytes - monitor_state(arch, s) == expected


@pytest.mark.parametrize(
    "method, optim",
    [("full", "adamw_torch"), ("full", "adamw_8bit"), ("lora", "paged_adamw_8bit"), ("galore", "galore_adamw_8bit")],
)
def test_the_update_monitors_shadow_state_is_fp32_whatever_the_runs(method: str, optim: str) -> None:
    from grpo_lite.memory.terms import monitor_state

    # the shadow replays each step from the live state, 8-bit moments dequantized into 32-bit ones
    s = estimate(TOY, method=method, optim=optim, update_rounding="nearest", **SMALL).settings  # type: ignore[arg-type]
    r = 32  # GaLore: the smallest linear (k_proj, 32 x 64) whole, rank min(128, 32, 64)
    assert monitor_state(TOY, s) == (3 * (2 * 4 * r * 64 + r * 32 * 4) if method == "galore" else 3 * 4096 * 2 * 4)


def test_stochastic_rounding_steps_one_fp32_slice_at_a_time() -> None:
    arch = find_architecture("Llama-3.2-1B")
    nearest = estimate(arch, optim="adamw_8bit", update_rounding="nearest", **SMALL)  # type: ignore[arg-type]
    sr = estimate(arch, optim="adamw_8bit", update_rounding="stochastic", **SMALL)  # type: ignore[arg-type]
    extra = phase(sr, "optimizer_step")["optimizer_step"] - phase(nearest, "optimizer_step")["optimizer_step"]
    # fp32 copies of one 4M-element slice and its gradient, then the noise and result of one chunk: not the
    # 262,668,288-element embedding whole (2 GiB)
    assert extra == 8 * (1 << 22) + 6 * (1 << 22)
    assert sr.settings.update_rounding == "stochastic" and sr.settings.rounds_stochastically
    fp32 = estimate(arch, optim="adamw_8bit", dtype="float32", **SMALL)  # type: ignore[arg-type]
    assert fp32.settings.update_rounding == "nearest"  # fp32 weights take small steps as they are


@pytest.mark.parametrize(
    "targets, params",
    [
        (["q_proj", "v_proj"], 2 * 16 * ((64 + 64) + (32 + 64))),  # layers x r x (out + in) of each wrapped linear
        ("all-linear", 2 * 16 * (2 * (64 + 64) + 2 * (32 + 64) + 3 * (128 + 64))),
        (["query_key_value"], 2 * 16 * (2 * (64 + 64) + 2 * (32 + 64) + 3 * (128 + 64))),  # another family's names
    ],
)
def test_lora_counts_only_the_linears_it_wraps(targets, params) -> None:
    from grpo_lite.memory.terms import lora_params

    s = estimate(TOY, method="lora", lora_r=16, lora_target_modules=targets, **SMALL).settings
    assert lora_params(TOY, s) == params


GATE = 128 * 64  # the toy's largest matrix (gate_proj, 128 x 64): the one GaLore's SVD is largest on
SVD = 4 * (128 * 64 + 64 * 64)  # torch.linalg.svd(full_matrices=False) of it: fp32 U [128, 64] and Vh [64, 64]


@pytest.mark.parametrize(
    "method, optim, rounding, vocab, device, expected",
    [
        # the SVD of an fp32 copy of the gradient, then the update projected back in the weights' dtype (bf16)
        ("galore", "galore_adamw", "nearest", 1000, "cuda", 4 * GATE + SVD + 2 * GATE),
        # stochastic rounding steps a projected matrix whole on fp32 copies of it and its gradient, then the
        # projected-back update (4 B) beside the kept Vh, or both factors during the SVD: equal at full rank
        ("galore", "galore_adamw", "stochastic", 10, "cuda", 8 * GATE + 4 * GATE + 4 * 64 * 64),
        ("galore", "galore_adamw_8bit", "stochastic", 10, "cuda", 8 * GATE + SVD),
        # ... unless the embedding (not projected: stepped element-wise, one fp32 slice) is larger; GaLore's AdamW
        # then needs two fp32 temporaries (sqrt(v) + eps, the update), the 8-bit one none beyond the noise (6 B)
        ("galore", "galore_adamw", "stochastic", 1000, "cuda", 8 * 64000 + 2 * 4 * 64000),
        ("galore", "galore_adamw_8bit", "stochastic", 1000, "cuda", 8 * 64000 + 6 * 64000),
        ("full", "adamw_torch", "stochastic", 1000, "cuda", 8 * 64000 + 6 * 64000),  # foreach's sqrt(v): 4 B < 6 B
        # on the CPU (fp32 weights, no rounding) torch's AdamW runs tensor by tensor: sqrt(v) and the update of
        # the largest tensor, the embedding
        ("full", "adamw_torch", "nearest", 1000, "cpu", 2 * 64000 * 4),
        ("full", "adamw_torch", "nearest", 10, "cpu", 2 * GATE * 4),  # a small vocabulary: the MLP's matrix
        ("lora", "adamw_torch", "nearest", 1000, "cpu", 2 * 16 * 128 * 4),  # the largest adapter: r x 128, fp32
    ],
)
def test_the_optimizer_steps_temporaries_by_hand(method, optim, rounding, vocab, device, expected) -> None:
    arch = dataclasses.replace(TOY, vocab=vocab)
    est = estimate(arch, method=method, optim=optim, update_rounding=rounding, device=device, **SMALL)
    assert phase(est, "optimizer_step")["optimizer_step"] == expected


def test_bf16_on_the_cpu_rounds_each_slice_with_torchs_single_tensor_step() -> None:
    est = estimate(TOY, device="cpu", dtype="bfloat16", optim="adamw_torch", update_rounding="stochastic", **SMALL)
    # fp32 copies of the embedding (one slice) and its gradient, then sqrt(v) and the update in fp32 (8 B > noise's 6)
    assert phase(est, "optimizer_step")["optimizer_step"] == 8 * 64000 + 2 * 4 * 64000


def test_the_prefills_working_set_by_hand() -> None:
    """Long prompts and one completion token: the prefill (a no-grad forward of every prompt) is generation's peak."""
    long = {**SMALL, "max_prompt_length": 64, "max_completion_length": 1}
    tokens = 4 * 64  # 4 sequences x 64 prompt tokens, bf16 activations
    # one block at a time, per token: the MLP's gate, up and their product (3 x 128), the residual, the normed
    # input, attention's and o_proj's outputs (4 x 64), one row of attention scores (64)
    block = 2 * (3 * 128 + 4 * 64 + 64)
    full = phase(estimate(TOY, method="full", update_rounding="nearest", **long), "generation")
    assert full["work_buffers"] == tokens * block
    assert full["kv_cache"] == 2 * 2 * 32 * 2 * tokens  # K and V x 2 layers x kv_dim 32 x bf16: the prompts only
    # LoRA (fp32 adapters under bf16 autocast): lora_A's bf16 copy of the input, twice for the MLP's wider outputs
    lora = phase(estimate(TOY, method="lora", **long), "generation")
    assert lora["work_buffers"] == tokens * (block + 2 * 2 * 128 + 2 * 64)
    # QLoRA: bf16 adapters read the input as it is (their output beside the base's), and one dequantized weight
    qlora = phase(estimate(TOY, method="qlora", **long), "generation")
    assert qlora["work_buffers"] == tokens * (block + 2 * 128) + 128 * 64 * 2


def test_sharded_gradients_shard_foreachs_buffer() -> None:
    est = estimate(TOY, optim="adamw_torch", update_rounding="nearest", sharding="fsdp", num_processes=2, **SMALL)
    assert phase(est, "optimizer_step")["optimizer_step"] == TOY_PARAMS * 2 / 2  # sqrt(v) of this process's half
    ddp = estimate(TOY, optim="adamw_torch", update_rounding="nearest", sharding="ddp", num_processes=2, **SMALL)
    assert phase(ddp, "optimizer_step")["optimizer_step"] == TOY_PARAMS * 2  # DDP: every process holds every gradient


def test_the_head_buffers_untouched_pages_come_off_the_heap_slack() -> None:
    from grpo_lite.memory.terms import heap_slack

    s = StepSettings.resolve(device="cpu")
    assert heap_slack(TOY, s, 1e9).bytes == 1e7  # 1% of the transient bytes
    assert heap_slack(TOY, s, 1e9, untouched=4e6).bytes == 6e6


@pytest.mark.parametrize(
    "settings",
    [
        dict(dtype="float32", bf16=False),  # fp32 everywhere: lora_A reads the input itself
        dict(dtype="bfloat16", bf16=False),  # bf16 weights, fp32 adapters: PEFT casts the input up
        dict(dtype="bfloat16", bf16=True),  # under autocast lora_A saves autocast's bf16 copy
        dict(dtype="float32", bf16=True),
    ],
)
def test_the_copy_lora_a_saves_is_the_one_peft_and_autocast_make(settings) -> None:
    """The bytes per element of the input copy ``lora_A`` saves for its backward, measured on PEFT's own layer."""
    import torch
    from peft import LoraConfig, get_peft_model

    from grpo_lite.memory.terms import lora_copy_bytes

    s = StepSettings.resolve(method="lora", device="cpu", lora_dropout=0.0, **settings)
    dtype = getattr(torch, s.dtype)
    model = get_peft_model(
        torch.nn.Sequential(torch.nn.Linear(16, 8)).to(dtype), LoraConfig(r=4, target_modules=["0"], lora_dropout=0.0)
    )
    x = torch.randn(2, 3, 16, dtype=dtype, requires_grad=True)
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), torch.autocast("cpu", enabled=bool(s.bf16)):
        model(x)
    ours = x.untyped_storage().data_ptr()  # a view of the input (the linear's 2-D reshape) is not a copy
    copies = [t for t in saved if t.numel() == x.numel() and t.untyped_storage().data_ptr() != ours]
    assert len(copies) <= 1
    assert lora_copy_bytes(s) == (copies[0].element_size() if copies else 0)
    assert lora_copy_bytes(dataclasses.replace(s, method="full")) == 0  # no adapter, no copy


LINEAR = 2 * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64)  # the toy's decoder linears: 73,728 weights


@pytest.mark.parametrize(
    "settings, expected",
    [
        # int8 (LLM.int8): 1 B a linear weight + an fp32 scale per output row; the rest in bf16; LoRA in bf16
        (
            {"method": "qlora", "quantization": "int8"},
            LINEAR + 4 * 2 * (64 + 32 + 32 + 64 + 128 + 128 + 64) + 2 * (TOY_PARAMS - LINEAR) + 2 * 32768,
        ),
        # TRL's cast_lm_head_to_fp32: the tied head's 1000 x 64 weights held in fp32, 2 B more each
        ({"method": "full", "update_rounding": "nearest", "cast_lm_head_to_fp32": True}, 2 * TOY_PARAMS + 2 * 64000),
    ],
)
def test_weights_quantized_to_int8_or_with_an_fp32_head(settings, expected) -> None:
    assert phase(estimate(TOY, **settings, **SMALL), "generation")["weights"] == expected


MONITOR = 3 * 4096 * 8  # the update monitor's shadow state: two fp32 moments of 3 x 4096 sampled elements


def _galore_states(rank: int) -> int:
    """GaLore's optimizer state on the toy by hand: per decoder matrix (out, in), rank r = min(rank, out, in) moments
    of r x max(out, in) in bf16 (2 moments x 2 B) and a bf16 projector of r x min(out, in); full bf16 states for the
    embedding (64,000) and the 5 norms (64 each)."""
    per_layer = 0
    for out, inp in [(64, 64), (32, 64), (32, 64), (64, 64), (128, 64), (128, 64), (64, 128)]:
        r = min(rank, out, inp)
        per_layer += 4 * r * max(out, inp) + 2 * r * min(out, inp)
    return 2 * per_layer + 4 * 64000 + 5 * 4 * 64


@pytest.mark.parametrize(
    "settings, expected",
    [
        ({"method": "lora"}, 32768 * 8 + MONITOR),  # the adapters' two fp32 moments
        # GaLore: the monitor shadows k_proj (32 x 64) whole: rank-r fp32 moments (8 B) and an fp32 projector
        ({"method": "galore", "optim": "galore_adamw"}, _galore_states(128) + 3 * (8 * 32 * 64 + 32 * 32 * 4)),
        ({"method": "galore", "optim": "galore_adamw", "optim_args": "rank=16"},
         _galore_states(16) + 3 * (8 * 16 * 64 + 16 * 32 * 4)),
        # ZeRO-3: fp32 moments (8 B) and fp32 master weights (4 B) for every parameter, over 2 processes
        ({"method": "full", "optim": "adamw_torch", "sharding": "zero3", "num_processes": 2},
         (8 + 4) * TOY_PARAMS / 2 + MONITOR),
    ],
)  # fmt: skip
def test_optimizer_state_by_hand(settings, expected) -> None:
    est = estimate(TOY, update_rounding="nearest", **settings, **SMALL)
    assert phase(est, "generation")["optimizer_state"] == expected


def test_gradients_one_tensor_at_a_time_or_in_ddps_buckets() -> None:
    from grpo_lite.memory.terms import gradients

    batch = {**SMALL, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1}
    layerwise = estimate(TOY, method="galore", optim="galore_adamw_layerwise", update_rounding="nearest", **batch)
    assert gradients(TOY, layerwise.settings).bytes == 64000 * 2  # the largest tensor's, the embedding's, in bf16
    ddp = estimate(TOY, optim="adamw_torch", update_rounding="nearest", sharding="ddp", num_processes=2, **SMALL)
    assert phase(ddp, "backward_layers")["grad_buckets"] == TOY_PARAMS * 2  # a second copy of the bf16 gradients
    assert phase(estimate(TOY, update_rounding="nearest", **SMALL), "backward_layers")["grad_buckets"] == 0  # one GPU


def test_galore_monitors_the_smallest_matrix_by_its_size_not_its_shape() -> None:
    from grpo_lite.memory.terms import monitor_state

    wide = dataclasses.replace(TOY, intermediate=1024)  # down_proj 64 x 1024: the narrowest, not the smallest
    s = estimate(wide, method="galore", optim="galore_adamw_8bit", update_rounding="nearest", **SMALL).settings
    assert monitor_state(wide, s) == 3 * (2 * 4 * 32 * 64 + 32 * 32 * 4)  # k_proj (32 x 64) whole, rank 32


def test_galore_state_is_far_below_adamw() -> None:
    batch = dict(per_device_train_batch_size=8, gradient_accumulation_steps=1)
    adam = estimate("Qwen2.5-7B", method="full", optim="adamw_8bit", **batch)
    galore = estimate("Qwen2.5-7B", method="galore", optim="galore_adamw_8bit_layerwise", **batch)
    ratio = phase(galore, "generation")["optimizer_state"] / phase(adam, "generation")["optimizer_state"]
    assert 0.1 < ratio < 0.25  # embeddings/lm_head keep full states; projected matrices keep rank 128
    # layer-wise: one tensor's gradient at a time, the largest matrix's (stepped whole) or the LM head's (in slices)
    assert phase(galore, "backward_layers")["gradients"] in (18944 * 3584 * 2, 152064 * 3584 * 2)


@pytest.mark.parametrize(
    "method,beta,has_reference",
    [("full", 0.0, False), ("full", 0.04, True), ("lora", 0.04, False), ("qlora", 0.04, False)],
)
def test_reference_model_only_with_beta_and_no_peft(method: str, beta: float, has_reference: bool) -> None:
    optim = "paged_adamw_8bit" if method == "qlora" else "adamw_torch_fused"
    est = estimate(TOY, method=method, optim=optim, beta=beta, **SMALL)
    ref = phase(est, "generation").get("reference_model", 0.0)
    assert (ref > 0) == has_reference
    if has_reference:
        assert ref == phase(est, "generation")["weights"]
        assert any(p.name == "scoring" for p in est.phases)  # reference log-probs are computed after sampling


def test_checkpointing_and_liger_cut_activations() -> None:
    plain = estimate("Llama-3.2-1B", **SMALL)
    ckpt = estimate("Llama-3.2-1B", gradient_checkpointing=True, **SMALL)
    liger = estimate("Llama-3.2-1B", use_liger_kernel=True, **SMALL)
    acts = [phase(e, "backward_head")["activations"] for e in (plain, ckpt, liger)]
    assert acts[1] < acts[2] < acts[0]


def test_lora_has_no_lm_head_gradient_in_logits() -> None:
    full = phase(estimate("Llama-3.2-1B", **SMALL), "backward_head")["logits"]
    lora = phase(estimate("Llama-3.2-1B", method="lora", **SMALL), "backward_head")["logits"]
    assert full - lora == pytest.approx(6 * 128256 * 2048, rel=0.01)  # fp32 grad of lm_head + its bf16 cast


def test_sharding_divides_state() -> None:
    base = dict(per_device_train_batch_size=2, gradient_accumulation_steps=1, num_generations=8)
    ddp = phase(estimate("Llama-3.2-1B", num_processes=4, sharding="ddp", **base), "optimizer_step")
    zero2 = phase(estimate("Llama-3.2-1B", num_processes=4, sharding="zero2", **base), "optimizer_step")
    fsdp = phase(estimate("Llama-3.2-1B", num_processes=4, sharding="fsdp", **base), "backward_head")
    assert ddp["grad_buckets"] == ddp["gradients"]
    assert zero2["gradients"] == ddp["gradients"] / 4 and zero2["weights"] == ddp["weights"]
    assert zero2["optimizer_state"] == pytest.approx(1235814400 * 12 / 4 + MONITOR)  # fp32 master + fp32 moments
    assert fsdp["weights"] == ddp["weights"] / 4
    # Llama-3.2-1B's block: q, o 2048 x 2048; k, v 512 x 2048; gate, up, down 8192 x 2048; two norms
    block = 2 * 2048 * 2048 + 2 * 512 * 2048 + 3 * 8192 * 2048 + 2 * 2048
    assert fsdp["gathered_weights"] == (2 * block + 128256 * 2048) * 2  # two blocks (current, prefetch), the head
    assert fsdp["optimizer_state"] - MONITOR == pytest.approx((ddp["optimizer_state"] - MONITOR) / 4)


def test_zero3_gathers_the_whole_model_to_generate() -> None:
    base = dict(per_device_train_batch_size=2, gradient_accumulation_steps=1, num_generations=8, num_processes=4)
    on = phase(estimate("Llama-3.2-1B", sharding="zero3", **base), "generation")
    off = phase(estimate("Llama-3.2-1B", sharding="zero3", ds3_gather_for_generation=False, **base), "generation")
    assert on["gathered_weights"] + on["weights"] == pytest.approx(1235814400 * 2)
    assert off["gathered_weights"] < on["gathered_weights"]


def test_vllm_share_replaces_the_kv_cache() -> None:
    est = estimate("Llama-3.2-1B", use_vllm=True, vllm_gpu_memory_utilization=0.25, budget_gib=40.0, **SMALL)
    gen = phase(est, "generation")
    assert gen["vllm"] == 0.25 * 40 * GIB
    # the cache, the logits and sampling's buffers live inside vLLM's share: none of them beside it
    assert "kv_cache" not in {c.name for c in est.components}
    assert gen.get("logits", 0.0) == gen.get("work_buffers", 0.0) == gen.get("kv_cache", 0.0) == 0.0
    assert any(p.name == "scoring" for p in est.phases)  # vLLM importance sampling needs old log-probs


def test_vllm_needs_bf16_weights_the_batchs_kv_cache_and_its_overhead() -> None:
    from grpo_lite.memory.terms import vllm_needed

    s = estimate(TOY, **SMALL).settings  # 4 sequences of 8 + 16 tokens generated at once
    kv = 2 * 2 * 32 * 2 * 4 * 24  # K and V x 2 layers x kv_dim 32 x bf16 x 4 sequences x 24 tokens
    assert vllm_needed(TOY, s) == TOY_PARAMS * 2 + kv + 1.0 * GIB  # vLLM's own activations and CUDA graphs: 1 GiB


def test_cpu_has_no_context_or_reserve_and_fp32() -> None:
    est = estimate(TOY, device="cpu", optim="adamw_torch", **SMALL)
    names = est.component_gib()
    assert "cuda_context" not in names and "allocator_reserve" not in names
    assert phase(est, "generation")["weights"] == TOY_PARAMS * 4
    assert phase(est, "generation")["process_baseline"] >= 0.5 * GIB  # the process, not only its tensors


@pytest.mark.parametrize(
    "settings,match",
    [
        ({"per_device_batch_size": 4}, "unknown memory setting"),
        ({"method": "dora"}, "method='dora' is not valid; choose one of full, galore, lora, qlora"),
        ({"sharding": "zero9"}, "choose one of none, ddp, zero2, zero3, fsdp"),
        ({"optim": "sgd"}, "not modelled"),
        (
            {"per_device_train_batch_size": 3, "gradient_accumulation_steps": 1, "num_generations": 8},
            r"per_device_train_batch_size \(3\) x num_processes \(1\) x steps_per_generation \(1\) = 3",
        ),
        ({"num_generations": 1}, r"num_generations=1 must be >= 2 \(GRPO compares a group\)"),
        ({"method": "galore", "optim": "galore_adamw_layerwise", "gradient_accumulation_steps": 2}, "accumulation"),
        ({"method": "galore", "optim": "adamw_torch"}, "does not match method"),
        ({"device": "cpu", "method": "galore", "optim": "galore_adamw_8bit"}, "GPU-only"),
        ({"method": "full", "quantization": "nf4"}, "cannot be quantized"),
        ({"num_processes": 2, "sharding": "none"}, "one process"),
        ({"use_vllm": True}, "budget_gib"),
        ({"steps_per_generation": 2, "generation_batch_size": 8}, "not both"),
    ],
)
def test_invalid_settings_raise_config_error(settings: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        StepSettings.resolve(**settings)


def test_defaults_resolve_by_device() -> None:
    gpu = StepSettings.resolve()
    cpu = StepSettings.resolve(device="cpu", optim="adamw_torch")
    assert (gpu.dtype, gpu.bf16, gpu.act_bytes, gpu.sharding) == ("bfloat16", True, 2, "none")
    assert (cpu.dtype, cpu.bf16, cpu.act_bytes) == ("float32", False, 4)
    assert StepSettings.resolve(num_processes=2).sharding == "ddp"


def test_generation_batch_follows_trl_rules() -> None:
    s = StepSettings.resolve(per_device_train_batch_size=2, gradient_accumulation_steps=4, num_generations=8)
    assert (s.spg, s.generation_batch_per_device, s.needs_scoring) == (4, 8, False)
    s = StepSettings.resolve(
        per_device_train_batch_size=2, gradient_accumulation_steps=2, steps_per_generation=4, num_generations=4
    )
    assert (s.spg, s.generation_batch_per_device, s.needs_scoring) == (4, 8, True)  # misaligned: old log-probs
    s = StepSettings.resolve(per_device_train_batch_size=2, generation_batch_size=16, num_generations=8)
    assert s.spg == 8


def test_estimate_accepts_a_model_name() -> None:
    assert estimate("Llama-3.2-1B-Instruct", **SMALL).arch.name == "Llama-3.2-1B"


@pytest.mark.parametrize("accum,spg,alive", [(4, None, False), (4, 2, True), (2, 4, False), (4, 4, False)])
def test_gradients_alive_while_sampling_mid_accumulation(accum: int, spg: int | None, alive: bool) -> None:
    """TRL generates every spg micro-steps; gradients are None after every optimizer step (every accum
    micro-steps): a generation sees gradients only when spg is not a multiple of accum."""
    est = estimate(
        TOY,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=accum,
        steps_per_generation=spg,
        num_generations=4,
        max_prompt_length=8,
        max_completion_length=16,
    )
    assert (phase(est, "generation").get("gradients", 0.0) > 0) == alive


@pytest.mark.parametrize("accum,alive", [(1, False), (2, True)])
def test_gradients_at_the_head_only_after_the_first_micro_batch(accum: int, alive: bool) -> None:
    """Measured: with one micro-batch per step no gradient exists when backward starts (set to None)."""
    est = estimate(
        TOY,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=accum,
        num_generations=4,
        max_prompt_length=8,
        max_completion_length=16,
    )
    assert (phase(est, "backward_head")["gradients"] > 0) == alive
    assert phase(est, "optimizer_step")["gradients"] == TOY_PARAMS * 2


def test_shared_prefix_counts_packed_rows_and_completion_tokens_only() -> None:
    base = dict(
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        num_generations=4,
        max_prompt_length=100,
        max_completion_length=50,
        device="cpu",
        optim="adamw_torch",
    )
    plain = estimate(TOY, shared_prefix=False, **base)
    shared = estimate(TOY, shared_prefix=True, **base)
    from grpo_lite.memory import tokens as K

    pack = K.packing(shared.settings)
    assert (pack.groups, pack.seq, pack.tokens) == (2, 100 + 4 * 50, 600)  # 2 prompts once + 8 completions
    assert K.head_tokens(shared.settings) == 8 * 50 and K.head_tokens(plain.settings) == 8 * 149
    per_layer, _ = K.per_layer_token_bytes(TOY, shared.settings, 300)
    final = 4 * 64 + 4 * 64
    expected = 600 * (2 * per_layer + final) + 2 * 300**2 + 4 * 400 * 64  # blocks, bool mask, the head's input
    assert phase(shared, "backward_head")["activations"] == expected
    assert phase(shared, "backward_head")["logits"] < phase(plain, "backward_head")["logits"]
    assert phase(shared, "generation")["kv_cache"] == phase(plain, "generation")["kv_cache"]


def test_shared_prefix_worst_case_when_groups_are_split() -> None:
    from grpo_lite.memory import tokens as K

    s = StepSettings.resolve(
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        num_generations=4,
        max_prompt_length=10,
        max_completion_length=5,
        shared_prefix=True,
    )
    assert K.packing(s) == K.Packing(rows=4, groups=2, seq=10 + 3 * 5)  # shuffled: 2 prompts, up to 3 rows each


def test_batch_shapes_prefer_whole_groups_with_a_shared_prefix() -> None:
    from grpo_lite.planning.candidates import batch_shapes

    fixed = {"generation_batch_size": 16}
    plain = [
        s["per_device_train_batch_size"] for s in batch_shapes(8, num_processes=1, fixed=fixed, shared_prefix=False)
    ]
    shared = [
        s["per_device_train_batch_size"] for s in batch_shapes(8, num_processes=1, fixed=fixed, shared_prefix=True)
    ]
    assert plain == [8, 4, 2, 1] and shared[:2] == [16, 8]


def test_plan_takes_shared_prefix_but_does_not_pass_it_to_grpoconfig() -> None:
    from grpo_lite import plan

    p = plan("SmolLM2-135M-Instruct", device="cpu", shared_prefix=True)
    assert p.estimate.settings.shared_prefix is True and "shared_prefix" not in p.settings
    assert p.fixed == {"shared_prefix": True}
    off = plan("SmolLM2-135M-Instruct", device="cpu", shared_prefix=False)
    assert p.estimate.total_bytes < off.estimate.total_bytes
    default = plan(
        "SmolLM2-135M-Instruct", device="cpu"
    )  # on by default, as train() runs: the plan shown is the one trained
    assert default.fixed == {} and default.estimate.total_bytes == p.estimate.total_bytes


def test_cpu_budget_picks_settings_that_fit_in_ram() -> None:
    from grpo_lite import plan
    from grpo_lite.errors import DoesNotFitError

    roomy = plan("SmolLM2-135M-Instruct", budget_gb=32, device="cpu")
    tight = plan("SmolLM2-135M-Instruct", budget_gb=4, device="cpu")
    assert roomy.device == tight.device == "cpu" and tight.fits
    assert tight.estimate.total_gib + tight.required_headroom_gib <= 4
    assert tight.estimate.total_gib < roomy.estimate.total_gib
    assert any("GB of RAM" in r for r in tight.reasons)
    with pytest.raises(DoesNotFitError, match=r"does not fit 0.5 GB of RAM .* The smallest budget that fits is \d+ GB"):
        plan("SmolLM2-135M-Instruct", budget_gb=0.5, device="cpu")


def test_vllm_sleep_mode_frees_the_share_outside_generation() -> None:
    """TRL 1.16 sleeps a colocated engine at level 2 after each generation: weights and KV cache freed."""
    common = dict(
        device="cuda",
        budget_gib=23.67,
        method="lora",
        use_vllm=True,
        vllm_gpu_memory_utilization=0.3,
        per_device_train_batch_size=8,
        num_generations=8,
    )
    awake = estimate("Llama-3.2-1B", **common)
    asleep = estimate("Llama-3.2-1B", vllm_enable_sleep_mode=True, **common)
    share = 0.3 * 23.67 * GIB

    def vllm(est, phase):  # noqa: ANN001, ANN202
        return next(c.bytes for p in est.phases if p.name == phase for c in p.components if c.name == "vllm")

    assert vllm(awake, "generation") == vllm(asleep, "generation") == pytest.approx(share)
    assert vllm(awake, "backward_layers") == pytest.approx(share)
    assert vllm(asleep, "backward_layers") == pytest.approx(1.0 * GIB)  # its activations and CUDA graphs stay
    assert asleep.phase_gib()["backward_head"] < awake.phase_gib()["backward_head"] - 5


@pytest.mark.parametrize(
    "name, windows", [("gemma-3-1b", ((512, 22),)), ("Mistral-7B-v0.1", ((4096, 32),)), ("Qwen3-0.6B", ())]
)
def test_sliding_window_layers_cache_only_their_window(name: str, windows: tuple) -> None:
    """The KV cache at the last decoding step is what transformers' own DynamicCache holds for the config."""
    import torch
    from transformers import DynamicCache

    from grpo_lite.memory import terms
    from grpo_lite.memory.models import kv_windows, transformers_config

    arch = find_architecture(name)
    assert arch is not None and kv_windows(arch) == windows
    prompt = 4600  # past every window: a sliding layer keeps its last window only
    s = StepSettings.resolve(
        device="cuda",
        method="lora",
        num_generations=2,
        per_device_train_batch_size=2,
        max_prompt_length=prompt,
        max_completion_length=1,
    )
    config = transformers_config(arch)
    cache = DynamicCache(config=config)
    batch, meta = s.generation_batch_per_device, torch.device("meta")
    for layer in range(arch.layers):  # the prefill, then one decoding step
        for length in (prompt, 1):
            kv = torch.empty(batch, arch.kv_heads, length, arch.head_dim, dtype=torch.bfloat16, device=meta)
            cache.update(kv, kv.clone(), layer)
    held = sum(t.untyped_storage().nbytes() for layer in cache.layers for t in (layer.keys, layer.values))
    planned = terms.kv_cache(arch, s).bytes
    one_key = arch.kv_dim * 2 * batch * (prompt + 1)  # a full layer's keys, held twice during the cat
    assert held <= planned <= held + one_key
    if windows:
        assert planned < 2 * arch.layers * arch.kv_dim * 2 * batch * (prompt + 1)  # below every layer at full length


@pytest.mark.parametrize("name", ["gemma-3-1b", "Mistral-7B-v0.1", "Qwen3-0.6B"])
def test_after_the_prefill_every_layer_holds_the_whole_prompt(name: str) -> None:
    """transformers' sliding layer keeps a view of its last window: the storage behind it is the whole prompt's
    keys until the first decoding step copies the window out, so the prefill's cache is every layer at full length."""
    import torch
    from transformers import DynamicCache

    from grpo_lite.memory import terms
    from grpo_lite.memory.models import kv_windows, transformers_config

    arch = find_architecture(name)
    assert arch is not None
    prompt = 4600  # past every window
    s = StepSettings.resolve(device="cuda", method="lora", num_generations=2, max_prompt_length=prompt)
    cache = DynamicCache(config=transformers_config(arch))
    batch, meta = s.generation_batch_per_device, torch.device("meta")
    for layer in range(arch.layers):
        kv = torch.empty(batch, arch.kv_heads, prompt, arch.head_dim, dtype=torch.bfloat16, device=meta)
        cache.update(kv, kv.clone(), layer)
    seen = [layer.keys.size(-2) for layer in cache.layers]
    assert (min(seen) < prompt) == bool(kv_windows(arch))  # a sliding layer shows only its window ...
    held = sum(t.untyped_storage().nbytes() for layer in cache.layers for t in (layer.keys, layer.values))
    assert terms.kv_cache(arch, s, tokens=prompt).bytes == held  # ... of a storage the whole prompt long


def test_estimate_assumes_the_lora_rank_the_ladder_plans_and_the_trainer_builds() -> None:
    """A LoRA default kept in two places (estimate()'s settings, the ladder's rung) drifts unnoticed when each is
    only read where it is used: estimate() without a rank must give the plan's bytes, and the recipe the trainer
    builds its LoraConfig from must carry the rank that was planned."""
    import dataclasses

    from grpo_lite.planning.choose import plan
    from grpo_lite.recipe.recipe import Recipe

    the_plan = plan("Llama-3.2-1B-Instruct", budget_gb=16, preset="lora")
    s = the_plan.estimate.settings
    others = {f.name: getattr(s, f.name) for f in dataclasses.fields(StepSettings) if f.name != "lora_r"}
    alone = estimate(the_plan.estimate.arch, **others).total_bytes
    assert alone == the_plan.estimate.total_bytes, f"estimate() without lora_r: {alone:,.0f} B, planned {s.lora_r=}"
    assert Recipe.from_plan(the_plan).lora["r"] == s.lora_r
