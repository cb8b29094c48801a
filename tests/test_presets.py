"""The ladder and plan(): outcomes, fixed keys, errors, GPU-only savers, CPU plans, docs freshness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_lite.errors import ConfigError, DoesNotFitError
from grpo_lite.planning import hardware
from grpo_lite.planning.choose import plan
from grpo_lite.planning.hardware import Extras
from grpo_lite.planning.ladder import LADDER, get_preset

DOCS = Path(__file__).resolve().parents[1] / "docs" / "presets.md"
NO_EXTRAS = Extras(liger_kernel=False, vllm=False, galore_torch=True, bitsandbytes=True, deepspeed=False)
CONTRACT_KEYS = {
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "num_generations",
    "max_completion_length",
    "gradient_checkpointing",
    "optim",
    "optim_target_modules",
    "optim_args",
    "bf16",
    "use_cpu",
    "beta",
    "learning_rate",
    "use_liger_kernel",
    "use_vllm",
}


@pytest.fixture(autouse=True)
def _plain_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan as on a machine without liger/vLLM/deepspeed and without CUDA, whatever runs the tests."""
    monkeypatch.setattr(hardware, "installed_extras", lambda: NO_EXTRAS)
    monkeypatch.setattr(hardware, "detect_vram", lambda: (None, "no CUDA device (torch.cuda.is_available() is False)"))


def test_ladder_order() -> None:
    assert [p.name for p in LADDER] == ["full", "full-8bit", "full-8bit-ckpt", "galore", "lora", "qlora"]
    assert [p.method for p in LADDER] == ["full", "full", "full", "galore", "lora", "qlora"]


def test_get_preset_lists_names() -> None:
    with pytest.raises(ConfigError, match="full, full-8bit, full-8bit-ckpt, galore, lora, qlora"):
        get_preset("huge")


@pytest.mark.parametrize(
    "model,budget,method,preset",
    [
        ("meta-llama/Llama-3.2-1B-Instruct", 16, None, "full-8bit"),  # full: fp32 states for stochastic rounding
        ("meta-llama/Llama-3.2-1B-Instruct", 24, None, "full"),
        ("meta-llama/Llama-3.1-8B-Instruct", 16, None, "qlora"),
        ("Qwen/Qwen2.5-7B-Instruct", 32, "galore", "galore"),
    ],
)
def test_done_when_outcomes_fit(model: str, budget: float, method: str | None, preset: str) -> None:
    p = plan(model, budget, method=method)
    assert p.fits and p.preset.name == preset and p.device == "cuda"
    assert p.budget_gib == pytest.approx(hardware.nominal_to_usable_gib(budget))
    assert p.estimate.total_gib + p.required_headroom_gib <= p.budget_gib
    assert p.headroom_gib == pytest.approx(p.budget_gib - p.estimate.total_gib)
    assert p.settings["num_generations"] >= 4 and p.settings["max_completion_length"] >= 256


def test_galore_plan_is_full_parameter_and_runnable() -> None:
    p = plan("Qwen/Qwen2.5-7B-Instruct", 32, method="galore")
    assert p.precision == {"weights": "bfloat16", "update": "stochastic rounding"}
    assert p.lora is None and p.model_kwargs == {"dtype": "bfloat16"}
    assert p.settings["optim"] == "galore_adamw_8bit_layerwise"
    assert p.settings["gradient_accumulation_steps"] == 1  # layerwise GaLore refuses accumulation
    assert p.settings["optim_target_modules"] == [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    ]
    assert p.settings["optim_args"] == "rank=128,update_proj_gap=200,scale=0.25,proj_type=std"


def test_8b_at_4gb_names_the_smallest_budget() -> None:
    with pytest.raises(DoesNotFitError) as info:
        plan("meta-llama/Llama-3.1-8B-Instruct", 4)
    err = info.value
    assert err.preset == "qlora" and err.smallest_budget_gb is not None
    assert f"The smallest budget that fits is {err.smallest_budget_gb:.0f} GB (preset qlora)" in str(err)
    assert "4 GB card (3.82 GiB usable)" in str(err)
    fitted = plan("meta-llama/Llama-3.1-8B-Instruct", err.smallest_budget_gb)  # the named budget really fits
    assert fitted.preset.name == "qlora"
    with pytest.raises(DoesNotFitError):
        plan("meta-llama/Llama-3.1-8B-Instruct", err.smallest_budget_gb - 1)


def test_qlora_plan_settings_for_the_trainer() -> None:
    p = plan("meta-llama/Llama-3.1-8B-Instruct", 16)
    assert p.model_kwargs == {
        "dtype": "bfloat16",
        "quantization": {
            "load_in_4bit": True,
            "bnb_4bit_quant_type": "nf4",
            "bnb_4bit_compute_dtype": "bfloat16",
            "bnb_4bit_use_double_quant": True,
        },
    }
    assert p.lora == {
        "r": 16,
        "lora_alpha": 32,
        "lora_dropout": 0.0,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        "task_type": "CAUSAL_LM",
    }
    assert p.settings["optim"] == "paged_adamw_8bit" and p.settings["gradient_checkpointing"] is True
    assert CONTRACT_KEYS <= set(p.settings)
    assert any("full: does not fit, needs at least" in r for r in p.reasons)


def test_fixed_keys_are_kept_verbatim() -> None:
    fixed = dict(
        num_generations=16,
        learning_rate=3e-6,
        logging_steps=5,
        temperature=0.7,
        lora_r=32,
        lora_alpha=8,
        lora_target_modules=["q_proj", "v_proj"],
    )
    p = plan("Llama-3.2-1B", 16, **fixed)
    assert p.fixed == fixed
    for key in ("num_generations", "learning_rate", "logging_steps", "temperature"):
        assert p.settings[key] == fixed[key]
    assert not any(key.startswith("lora_") for key in p.settings)
    assert p.preset.method in ("lora", "qlora")  # fixing LoRA keys restricts the ladder to LoRA rungs
    assert p.lora is not None and (p.lora["r"], p.lora["lora_alpha"], p.lora["target_modules"]) == (
        32,
        8,
        ["q_proj", "v_proj"],
    )
    assert any("kept as you set" in r for r in p.reasons)


def test_fixed_optimizer_overrides_the_rung() -> None:
    p = plan("Llama-3.2-1B", 16, optim="adamw_8bit", method="full")
    assert p.settings["optim"] == "adamw_8bit" and p.estimate.settings.optim == "adamw_8bit"


@pytest.mark.parametrize(
    "fixed,match",
    [
        (
            dict(per_device_train_batch_size=1, gradient_accumulation_steps=1, num_generations=8),
            r"per_device_train_batch_size \(1\) x num_processes \(1\) x steps_per_generation \(1\) = 1 must be divisible "
            r"by num_generations \(8\)",
        ),
        (dict(optim="lion"), "optim='lion' is not modelled"),
        (dict(lora_r=8, method="full"), "only apply to method lora or qlora"),
        (dict(method="dora"), "method='dora' is not valid"),
        (dict(preset="galore", method="lora"), "preset 'galore' is method 'galore', not 'lora'"),
        (dict(sharding="zero4"), "sharding='zero4' is not valid"),
        (dict(num_processes=0), "num_processes=0 must be a positive integer"),
    ],
)
def test_config_errors(fixed: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        plan("Llama-3.2-1B", 16, **fixed)


def test_trades_stay_above_floors_and_say_so() -> None:
    p = plan("Llama-3.2-3B", 8)
    assert p.settings["num_generations"] >= 4 and p.settings["max_completion_length"] >= 256
    assert any(r.startswith("traded to fit") for r in p.reasons)


def test_user_fixed_values_below_floors_are_kept() -> None:
    p = plan("Llama-3.2-3B", 8, num_generations=2, max_completion_length=64)
    assert (p.settings["num_generations"], p.settings["max_completion_length"]) == (2, 64)


def test_no_cuda_gives_a_cpu_plan() -> None:
    p = plan("SmolLM2-135M-Instruct")
    assert p.device == "cpu" and p.budget_gib is None and p.preset.method == "lora"
    assert "no CUDA device: CPU plan, memory estimate shown for reference" in p.reasons
    assert p.settings["use_cpu"] is True and p.settings["bf16"] is False
    assert p.settings["gradient_checkpointing"] is False and p.model_kwargs == {"dtype": "float32"}
    assert p.settings["use_liger_kernel"] is False and p.settings["use_vllm"] is False
    assert p.to_dict()["headroom_gib"] is None


def test_cpu_plan_that_fits_the_ram_says_so() -> None:
    p = plan("SmolLM2-135M-Instruct")
    assert p.budget_gib is None and p.preset.method == "lora"
    assert p.reasons[-1] == (
        f"64.0 GiB of RAM available now (pinned by the tests): the plan's peak of {p.estimate.total_gib:.2f} GiB fits"
    )


def test_cpu_plan_is_planned_again_for_the_ram_available(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = plan("SmolLM2-135M-Instruct", device="cpu")
    monkeypatch.setattr(hardware, "detect_ram", lambda: (3.0, "3.0 GiB of RAM available now (test)"))
    p = plan("SmolLM2-135M-Instruct", device="cpu")
    assert defaults.estimate.total_gib > 3.0  # the CPU defaults would not fit...
    assert p.device == "cpu" and p.budget_gib == 3.0 and p.fits  # ...so the ladder is walked for 3 GiB of RAM
    assert p.estimate.total_gib + p.required_headroom_gib <= 3.0
    assert any(r.startswith("3.0 GiB of RAM available now (test): the CPU defaults would peak at") for r in p.reasons)


def test_cpu_plan_with_several_processes_is_not_planned_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rank reads the RAM at its own moment; settings that differ by rank would hang the job."""
    defaults = plan("SmolLM2-135M-Instruct", device="cpu", num_processes=2)
    monkeypatch.setattr(hardware, "detect_ram", lambda: (3.0, "3.0 GiB of RAM available now (test)"))
    p = plan("SmolLM2-135M-Instruct", device="cpu", num_processes=2)
    assert p.settings == defaults.settings and p.budget_gib is None
    assert "plan all processes for the same RAM" in p.reasons[-1]


def test_cpu_plan_for_too_little_ram_names_what_is_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware, "detect_ram", lambda: (1.0, "1.0 GiB of RAM available now (test)"))
    with pytest.raises(
        DoesNotFitError,
        match=r"smallest budget that fits is \d+ GB.*Planned for the RAM available "
        r"now \(1\.0 GiB of RAM available now \(test\)\); pass budget_gb with device='cpu'",
    ) as info:
        plan("SmolLM2-135M-Instruct", device="cpu")
    assert info.value.smallest_budget_gb is not None and info.value.smallest_budget_gb > 1


def test_cpu_plan_when_ram_cannot_be_read(monkeypatch: pytest.MonkeyPatch) -> None:
    why = "free RAM could not be read: pass budget_gb with device='cpu' to plan for your RAM"
    monkeypatch.setattr(hardware, "detect_ram", lambda: (None, why))
    p = plan("SmolLM2-135M-Instruct", device="cpu")
    assert p.budget_gib is None and p.reasons[-1] == why


def test_detected_cuda_is_used_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware, "detect_vram", lambda: (23.65, "detected CUDA device 0: RTX 4090, 23.65 GiB total"))
    p = plan("Llama-3.2-1B-Instruct")
    assert p.device == "cuda" and p.budget_gib == 23.65 and p.budget_gb == 24.0
    assert p.reasons[0].startswith("detected CUDA device 0")


def test_cpu_device_with_budget_gives_cpu_runnable_settings() -> None:
    p = plan("Qwen2.5-0.5B", 24, device="cpu", method="galore")
    assert p.settings["optim"] == "galore_adamw_layerwise"  # 8-bit GaLore needs CUDA
    assert p.settings["use_cpu"] is True and p.model_kwargs["dtype"] == "float32"


def test_gpu_only_savers_enter_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    extras = Extras(liger_kernel=True, vllm=True, galore_torch=True, bitsandbytes=True, deepspeed=False)
    monkeypatch.setattr(hardware, "installed_extras", lambda: extras)
    p = plan("Llama-3.2-1B-Instruct", 80)
    assert p.settings["use_liger_kernel"] is True and p.settings["use_vllm"] is True
    util = p.settings["vllm_gpu_memory_utilization"]
    assert p.settings["vllm_mode"] == "colocate" and 0 < util <= 0.9
    assert p.estimate.component_gib()["vllm"] == pytest.approx(util * p.budget_gib)
    cpu = plan("Llama-3.2-1B-Instruct", 80, device="cpu")
    assert cpu.settings["use_liger_kernel"] is False and cpu.settings["use_vllm"] is False


def test_galore_fits_a_7b_model_in_24_gb_with_updates_that_land() -> None:
    # the GaLore paper's headline: Qwen2.5-7B full-parameter in 24 GB. Stochastic rounding steps the untied
    # 152k x 3584 embedding in 4M-element fp32 slices, never whole (8 B x 545M = 4.1 GiB did not fit)
    p = plan("Qwen/Qwen2.5-7B-Instruct", 24, method="galore")
    assert p.fits and p.precision == {"weights": "bfloat16", "update": "stochastic rounding"}
    assert p.estimate.total_gib + p.required_headroom_gib <= p.budget_gib  # type: ignore[operator]
    nearest = plan("Qwen/Qwen2.5-7B-Instruct", 24, method="galore", update_rounding="nearest")
    assert nearest.fits and nearest.precision == {"weights": "bfloat16", "update": "round to nearest"}


def test_missing_extra_skips_a_rung(monkeypatch: pytest.MonkeyPatch) -> None:
    extras = Extras(liger_kernel=False, vllm=False, galore_torch=False, bitsandbytes=True, deepspeed=False)
    monkeypatch.setattr(hardware, "installed_extras", lambda: extras)
    p = plan("Qwen2.5-7B", 24)
    assert p.preset.name == "lora"
    assert any(r.startswith("galore: skipped, needs galore_torch") for r in p.reasons)


def test_sharding_only_when_one_device_cannot_hold_it() -> None:
    replicated = plan("Llama-3.1-8B", 16, num_processes=4)
    assert (replicated.sharding, replicated.preset.name) == ("ddp", "qlora")
    sharded = plan("Llama-3.1-8B", 24, num_processes=8, method="full")
    assert sharded.sharding == "fsdp" and sharded.num_processes == 8
    s = sharded.settings
    assert s["per_device_train_batch_size"] * 8 * s["gradient_accumulation_steps"] % s["num_generations"] == 0


def test_to_dict_is_json_and_has_the_keys() -> None:
    d = plan("Llama-3.2-1B", 16).to_dict()
    json.dumps(d)
    assert {"preset", "fits", "estimate_gib", "budget_gib", "components", "settings"} <= set(d)
    assert sum(d["components"].values()) == pytest.approx(d["estimate_gib"], abs=0.01)


def test_presets_doc_is_fresh() -> None:
    from tools.doc_tables import update_presets_doc

    assert update_presets_doc(DOCS, check=True), "docs/presets.md is stale: run update_presets_doc('docs/presets.md')"


def test_fixed_fp16_switches_precision_everywhere() -> None:
    p = plan("Llama-3.2-1B", 16, fp16=True)
    assert (p.settings["fp16"], p.settings["bf16"], p.model_kwargs["dtype"]) == (True, False, "float16")
    assert p.estimate.settings.dtype == "float16"
