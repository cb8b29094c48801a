"""The memory model: component arithmetic by hand, sums, phases, and the settings it rejects."""

from __future__ import annotations

import math

import pytest

from grpo_lite.memory.architectures import Architecture, find_architecture
from grpo_lite.errors import ConfigError
from grpo_lite.memory.estimate import COMPONENTS, GIB, MemoryEstimate, estimate
from grpo_lite.memory.settings import StepSettings

TOY = Architecture(name="toy", hub_ids=("toy",), family="llama", layers=2, hidden=64, heads=4, kv_heads=2,
                   head_dim=16, intermediate=128, vocab=1000, tied=True)
TOY_PARAMS = 2 * (64 * 64 * 2 + 2 * 32 * 64 + 3 * 128 * 64 + 2 * 64) + 1000 * 64 + 64
SMALL = dict(per_device_train_batch_size=2, gradient_accumulation_steps=2, num_generations=4,
             max_prompt_length=8, max_completion_length=16)


def phase(est: MemoryEstimate, name: str) -> dict[str, float]:
    return {c.name: c.bytes for c in next(p for p in est.phases if p.name == name).components}


def test_toy_param_count() -> None:
    assert TOY.n_params == TOY_PARAMS == 138_048


def test_every_component_by_hand_full_adamw() -> None:
    est = estimate(TOY, method="full", optim="adamw_torch", **SMALL)
    head = phase(est, "backward_head")
    tokens = 2 * (8 + 16)
    per_layer = 2 * (4 * 64 + 2 * 64) + (2 * 64 * 4 + 4 * 4 + 2 * 24) + 4 * 2 * 128
    activations = 2 * per_layer * tokens + (4 * 64 + 2 * 64) * tokens
    scored = 2 * 16
    logits = 2 * scored * 64 + 28 * scored + scored * 32768 * 2 + 6 * scored * 64 + 6 * 1000 * 64
    assert head["cuda_context"] == 0.5 * GIB
    assert head["weights"] == TOY_PARAMS * 2
    assert head["gradients"] == TOY_PARAMS * 2
    assert head["optimizer_state"] == TOY_PARAMS * 4  # two bf16 moments
    assert head["activations"] == activations
    assert head["logits"] == logits
    assert head["allocator_reserve"] == pytest.approx(0.15 * (activations + logits))
    layers = phase(est, "backward_layers")
    assert layers["activations"] == activations + 2 * (2 * 64 + 3 * 128) * tokens
    step = phase(est, "optimizer_step")
    assert step["optimizer_step"] == TOY_PARAMS * 2  # foreach AdamW's sqrt(v) buffer
    gen = phase(est, "generation")
    assert gen["kv_cache"] == 2 * 2 * 32 * 2 * 4 * 24  # K,V x layers x kv_dim x bf16 x 4 sequences x 24 tokens
    assert gen["logits"] == 4 * 1000 * 14
    assert gen["work_buffers"] == 4 * 8 * 2 * (3 * 128 + 4 * 64 + 8)
    assert "gradients" not in gen


@pytest.mark.parametrize("method,optim,ckpt", [
    ("full", "adamw_torch_fused", False),
    ("full", "adamw_8bit", True),
    ("galore", "galore_adamw_8bit_layerwise", True),
    ("galore", "galore_adamw", False),
    ("lora", "adamw_torch_fused", True),
    ("qlora", "paged_adamw_8bit", True),
])
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


@pytest.mark.parametrize("optim,bytes_per_param", [
    ("adamw_torch_fused", 4.0), ("adamw_torch", 4.0), ("paged_adamw_32bit", 8.0), ("adamw_8bit", 2.03)])
def test_optimizer_state_per_param(optim: str, bytes_per_param: float) -> None:
    arch = find_architecture("Llama-3.2-1B")
    est = estimate(arch, optim=optim, **SMALL)  # type: ignore[arg-type]
    assert phase(est, "generation")["optimizer_state"] / arch.n_params == pytest.approx(bytes_per_param, rel=0.01)


def test_galore_state_is_far_below_adamw() -> None:
    batch = dict(per_device_train_batch_size=8, gradient_accumulation_steps=1)
    adam = estimate("Qwen2.5-7B", method="full", optim="adamw_8bit", **batch)
    galore = estimate("Qwen2.5-7B", method="galore", optim="galore_adamw_8bit_layerwise", **batch)
    ratio = phase(galore, "generation")["optimizer_state"] / phase(adam, "generation")["optimizer_state"]
    assert 0.1 < ratio < 0.25  # embeddings/lm_head keep full states; projected matrices keep rank 128
    assert phase(galore, "backward_layers")["gradients"] == 152064 * 3584 * 2  # layerwise: one tensor at a time


@pytest.mark.parametrize("method,beta,has_reference", [
    ("full", 0.0, False), ("full", 0.04, True), ("lora", 0.04, False), ("qlora", 0.04, False)])
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
    ddp = phase(estimate("Llama-3.2-1B", num_processes=4, sharding="ddp", **base), "backward_head")
    zero2 = phase(estimate("Llama-3.2-1B", num_processes=4, sharding="zero2", **base), "backward_head")
    fsdp = phase(estimate("Llama-3.2-1B", num_processes=4, sharding="fsdp", **base), "backward_head")
    assert ddp["grad_buckets"] == ddp["gradients"]
    assert zero2["gradients"] == ddp["gradients"] / 4 and zero2["weights"] == ddp["weights"]
    assert zero2["optimizer_state"] == pytest.approx(1235814400 * 12 / 4)  # DeepSpeed: fp32 master + fp32 moments
    assert fsdp["weights"] == ddp["weights"] / 4 and fsdp["gathered_weights"] > 0
    assert fsdp["optimizer_state"] == pytest.approx(ddp["optimizer_state"] / 4)


def test_zero3_gathers_the_whole_model_to_generate() -> None:
    base = dict(per_device_train_batch_size=2, gradient_accumulation_steps=1, num_generations=8, num_processes=4)
    on = phase(estimate("Llama-3.2-1B", sharding="zero3", **base), "generation")
    off = phase(estimate("Llama-3.2-1B", sharding="zero3", ds3_gather_for_generation=False, **base), "generation")
    assert on["gathered_weights"] + on["weights"] == pytest.approx(1235814400 * 2)
    assert off["gathered_weights"] < on["gathered_weights"]


def test_vllm_share_replaces_the_kv_cache() -> None:
    est = estimate("Llama-3.2-1B", use_vllm=True, vllm_gpu_memory_utilization=0.25, budget_gib=40.0, **SMALL)
    gen = phase(est, "generation")
    assert gen["vllm"] == 0.25 * 40 * GIB and "kv_cache" not in {c.name for c in est.components}
    assert any(p.name == "scoring" for p in est.phases)  # vLLM importance sampling needs old log-probs


def test_cpu_has_no_context_or_reserve_and_fp32() -> None:
    est = estimate(TOY, device="cpu", optim="adamw_torch", **SMALL)
    names = est.component_gib()
    assert "cuda_context" not in names and "allocator_reserve" not in names
    assert phase(est, "generation")["weights"] == TOY_PARAMS * 4


@pytest.mark.parametrize("settings,match", [
    ({"per_device_batch_size": 4}, "unknown memory setting"),
    ({"method": "dora"}, "method='dora' is not valid; choose one of full, galore, lora, qlora"),
    ({"sharding": "zero9"}, "choose one of none, ddp, zero2, zero3, fsdp"),
    ({"optim": "sgd"}, "not modelled"),
    ({"per_device_train_batch_size": 3, "gradient_accumulation_steps": 1, "num_generations": 8},
     r"per_device_train_batch_size \(3\) x num_processes \(1\) x steps_per_generation \(1\) = 3"),
    ({"num_generations": 1}, "at least 2"),
    ({"method": "galore", "optim": "galore_adamw_layerwise", "gradient_accumulation_steps": 2}, "accumulation"),
    ({"method": "galore", "optim": "adamw_torch"}, "does not match method"),
    ({"device": "cpu", "method": "galore", "optim": "galore_adamw_8bit"}, "GPU-only"),
    ({"method": "full", "quantization": "nf4"}, "cannot be quantized"),
    ({"num_processes": 2, "sharding": "none"}, "one process"),
    ({"use_vllm": True}, "budget_gib"),
    ({"steps_per_generation": 2, "generation_batch_size": 8}, "not both"),
])
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
    s = StepSettings.resolve(per_device_train_batch_size=2, gradient_accumulation_steps=2, steps_per_generation=4,
                             num_generations=4)
    assert (s.spg, s.generation_batch_per_device, s.needs_scoring) == (4, 8, True)  # misaligned: old log-probs
    s = StepSettings.resolve(per_device_train_batch_size=2, generation_batch_size=16, num_generations=8)
    assert s.spg == 8


def test_estimate_accepts_a_model_name() -> None:
    assert estimate("Llama-3.2-1B-Instruct", **SMALL).arch.name == "Llama-3.2-1B"


@pytest.mark.parametrize("accum,spg,alive", [(4, None, False), (4, 2, True), (2, 4, True), (4, 4, False)])
def test_gradients_alive_while_sampling_mid_accumulation(accum: int, spg: int | None, alive: bool) -> None:
    est = estimate(TOY, per_device_train_batch_size=4, gradient_accumulation_steps=accum, steps_per_generation=spg,
                   num_generations=4, max_prompt_length=8, max_completion_length=16)
    assert ("gradients" in phase(est, "generation")) == alive
