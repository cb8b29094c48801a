"""train() on the tiny random Llama: parameters change, the plan is really applied, run.json is written."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from tiny_run import TINY_RUN, faults_reusing_a_block

from grpo_lite import ConfigError, train

FAST = {**TINY_RUN, "max_steps": 2, "save_strategy": "no"}  # a few steps, no checkpoints


class _Capture:
    """A TrainerCallback that keeps the optimizer and model the trainer really used."""

    def __init__(self) -> None:
        from transformers import TrainerCallback

        outer = self

        class Cb(TrainerCallback):
            def on_train_begin(self, args, state, control, model=None, optimizer=None, **kw):
                outer.model = model

            def on_step_end(self, args, state, control, optimizer=None, **kw):
                outer.optimizer = optimizer

        self.callback = Cb()
        self.model = self.optimizer = None


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().float() for k, v in model.state_dict().items()}


def test_full_training_changes_parameters_and_writes_run_json(tiny_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    before = _weights(AutoModelForCausalLM.from_pretrained(tiny_model_dir))
    result = train(str(tiny_model_dir), method="full", output_dir=tmp_path / "run", **FAST)
    assert result.steps == 2
    after = _weights(result.model)
    changed = [k for k in before if not torch.allclose(before[k], after[k])]
    assert len(changed) >= len(before) // 2, f"only {len(changed)} of {len(before)} tensors changed"
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["steps"] == 2
    assert record["plan"]["preset"] == result.plan.preset.name
    assert record["settings"]["num_generations"] == 4
    assert len(record["history"]) == 2 and "reward" in record["history"][0]
    assert (result.model_dir / "config.json").is_file()


def test_lora_trains_only_the_adapter(tiny_model_dir, tmp_path):
    cap = _Capture()
    result = train(str(tiny_model_dir), method="lora", output_dir=tmp_path / "run", callbacks=[cap.callback], **FAST)
    from peft import PeftModel

    assert isinstance(result.model, PeftModel)
    trainable = [n for n, p in result.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert (result.model_dir / "adapter_config.json").is_file()
    lora_b = [p for n, p in result.model.named_parameters() if "lora_B" in n]
    assert any(p.abs().sum() > 0 for p in lora_b), "LoRA B starts at zero and must move after training"


def test_fixed_optimizer_and_checkpointing_are_applied(tiny_model_dir, tmp_path):
    import bitsandbytes as bnb

    cap = _Capture()
    train(
        str(tiny_model_dir), method="full", output_dir=tmp_path / "run", callbacks=[cap.callback],
        optim="adamw_8bit", gradient_checkpointing=True, **FAST,
    )  # fmt: skip
    inner = getattr(cap.optimizer, "optimizer", cap.optimizer)
    assert isinstance(inner, bnb.optim.AdamW) and inner.args.optim_bits == 8  # transformers' adamw_8bit
    assert cap.model.is_gradient_checkpointing


def test_qlora_is_a_peft_model_over_a_4bit_base(tiny_model_dir, tmp_path):
    import bitsandbytes as bnb

    result = train(str(tiny_model_dir), method="qlora", output_dir=tmp_path / "run", **FAST)
    from peft import PeftModel

    assert isinstance(result.model, PeftModel)
    assert any(isinstance(m, bnb.nn.Linear4bit) for m in result.model.modules())
    assert result.plan.preset.method == "qlora"


def test_unknown_setting_is_a_clear_error(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError, match=r"learning_rat.*did you mean 'learning_rate'"):
        train(str(tiny_model_dir), output_dir=tmp_path / "run", **{**FAST, "learning_rat": 1e-5})


def test_bad_max_steps_is_rejected_before_any_work(tiny_model_dir, tmp_path):
    with pytest.raises(
        ConfigError, match=r"max_steps=0 must be a whole number from 1 to 100_000_000; e\.g\. max_steps=1"
    ):
        train(str(tiny_model_dir), output_dir=tmp_path / "run", **{**FAST, "max_steps": 0})
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("preset", "optimizer_class", "bits"),
    [
        ("full-8bit", "AdamW", 8),  # bitsandbytes' AdamW with 8-bit states
        ("lora", "AdamW", None),  # torch's AdamW over the adapter only
    ],
)
def test_the_planned_optimizer_is_the_one_that_runs(preset, optimizer_class, bits, tiny_model_dir, tmp_path):
    cap = _Capture()
    result = train(str(tiny_model_dir), preset=preset, output_dir=tmp_path / "run", callbacks=[cap.callback],
                   **{**FAST, "max_steps": 1})  # fmt: skip
    inner = getattr(cap.optimizer, "optimizer", cap.optimizer)
    assert result.plan.preset.name == preset
    assert type(inner).__name__ == optimizer_class
    assert getattr(getattr(inner, "args", None), "optim_bits", None) == bits
    assert type(inner).__module__.startswith("bitsandbytes" if bits else "torch")


def test_galore_preset_runs_galore_per_layer(tiny_model_dir, tmp_path):
    cap = _Capture()
    before = _weights(__import__("transformers").AutoModelForCausalLM.from_pretrained(tiny_model_dir))
    result = train(str(tiny_model_dir), preset="galore", output_dir=tmp_path / "run", callbacks=[cap.callback],
                   **{**FAST, "max_steps": 2})  # fmt: skip
    inner = getattr(cap.optimizer, "optimizer", cap.optimizer)
    per_param = list(inner.optimizer_dict.values())  # transformers' layer-wise wrapper: one optimizer per parameter
    assert {type(o).__module__ for o in per_param} == {"galore_torch.adamw"}
    after = _weights(result.model)
    assert any(not torch.allclose(before[k], after[k]) for k in before if "proj" in k)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or torch.cuda.is_available(), reason="glibc's mmap threshold, set on CPU"
)
def test_a_cpu_run_lifts_the_mmap_threshold_it_trained_under(tiny_model_dir, tmp_path):
    """Left fixed, the threshold maps and faults in afresh every block that decoding the returned model allocates
    (the demo model's evaluation took 1.5 times the CPU time of the same model loaded fresh)."""
    from transformers import TrainerCallback

    from grpo_lite.memory import heap
    from grpo_lite.memory.heap import MMAP_THRESHOLD_BYTES

    seen = []

    class Seen(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            seen.append(heap._applied)

    train(
        str(tiny_model_dir), method="lora", output_dir=tmp_path / "run", callbacks=[Seen()], **{**FAST, "max_steps": 1}
    )
    assert seen == [MMAP_THRESHOLD_BYTES]
    assert heap._applied is None
    faults_reusing_a_block(times=2)  # the heap grows once
    faults, pages = faults_reusing_a_block(times=8)
    assert faults < 2 * pages  # the freed block is reused (once in a while faulted in again), not mapped each time
