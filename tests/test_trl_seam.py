"""The seam to TRL's private code: checked when the trainer is built, TRL's own path where it differs,
and no patch of a measurement left installed."""

from __future__ import annotations

import dataclasses
import logging
import types
from pathlib import Path

import pytest
import torch
import trl
from trl import GRPOTrainer

from grpo_lite.training.step import trl_seam
from grpo_lite.training.step.trl_seam import TESTED_TRL, seam_problems

ORIGINAL_SCORING = GRPOTrainer._get_per_token_logps_and_entropies
ORIGINAL_SAMPLING = GRPOTrainer._generate_single_turn


def _build(path, out, cls=None, max_steps=1, **kwargs):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        bf16=False,
        seed=0,
        max_steps=max_steps,
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=8,
        temperature=0.9,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        logging_steps=1,
    )
    head = "a long system prompt that every question of this batch starts with " * 2
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": head + f"question {i}?"}]} for i in range(8)])
    return (cls or LiteGRPOTrainer)(
        model=model,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        reward_funcs=lambda completions, **_: [float(len(c[0]["content"])) for c in completions],
        **kwargs,
    )


def test_the_installed_trl_is_one_tested_and_its_seam_is_whole(tiny_model_dir, tmp_path):
    trainer = _build(tiny_model_dir, tmp_path)
    assert trl.__version__ in TESTED_TRL
    assert seam_problems(trainer) == {} and "trl_seam" not in trainer.shared_prefix_record
    assert trainer.shared_prefix and trainer.shared_sampling and trainer.update_monitor is not None


def test_the_dependency_bound_admits_the_next_releases_of_the_same_major():
    import re
    from pathlib import Path

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    bound = SpecifierSet(re.search(r'"trl(>=[^"]+)"', pyproject).group(1))
    newest = max(map(Version, TESTED_TRL))
    assert all(v in bound for v in TESTED_TRL)
    assert f"{newest.major}.{newest.minor + 1}.0" in bound  # installable beside it: its seam is checked at run time
    assert f"{newest.major + 1}.0.0" not in bound


# TRL's releases changed these signatures: 1.14 scored through `(self, model, *args, batch_size=None,
# compute_aux_loss=False, **kwargs)`; 1.13 and 1.14 sampled without `num_generations`. The fakes keep TRL's
# own callers working (they delegate to the real method) while their signatures differ.
def _scoring_1_14(self, model, *args, batch_size=None, compute_aux_loss=False, **kwargs):
    self.calls_of_the_fake += 1
    return ORIGINAL_SCORING(self, model, *args, batch_size=batch_size, compute_aux_loss=compute_aux_loss, **kwargs)


def _sampling_with_a_new_parameter(
    self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False, *, tool_budget=None
):
    self.calls_of_the_fake += 1
    return ORIGINAL_SAMPLING(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images)


@pytest.mark.parametrize(
    ("method", "fake", "off"),
    [
        ("_get_per_token_logps_and_entropies", _scoring_1_14, {"shared_scoring"}),
        ("_generate_single_turn", _sampling_with_a_new_parameter, {"shared_sampling", "stop_strings"}),
    ],
    ids=["scoring", "sampling"],
)
def test_a_changed_signature_falls_back_to_trls_own_method(
    tiny_model_dir, tmp_path, monkeypatch, caplog, method, fake, off
):
    monkeypatch.setattr(GRPOTrainer, method, fake)
    monkeypatch.setattr(GRPOTrainer, "calls_of_the_fake", 0, raising=False)
    with caplog.at_level(logging.WARNING):
        trainer = _build(tiny_model_dir, tmp_path, stop_strings=("1",))
    warnings = [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "grpo-lite" in r.getMessage()
    ]
    assert len(warnings) == 1, warnings
    assert f"TRL {trl.__version__}" in warnings[0] and method in warnings[0]
    for feature in off:
        assert {
            "shared_scoring": "shared-prefix scoring",
            "shared_sampling": "shared-prefix sampling",
            "stop_strings": "stop strings",
        }[feature] + " off" in warnings[0]
    record = trainer.shared_prefix_record
    assert set(record["trl_seam"]["off"]) == off and record["trl_seam"]["trl"] == trl.__version__
    assert getattr(trainer, method).__func__ is fake  # TRL's callers reach TRL's method, not the override
    trainer.train()
    assert trainer.calls_of_the_fake > 0
    if "shared_scoring" in off:
        assert not trainer.shared_prefix and record["calls"] == {"shared": 0, "trl": 0}
    else:  # stop strings and shared sampling are off; the shared scoring still runs, checked
        assert trainer.stop_strings == () and not trainer.shared_sampling and "sampling_check" not in record
        assert trainer.shared_prefix and record["calls"]["shared"] > 0 and record["self_check"]["ok"]


def _sampling_sliced_elsewhere(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
    """A release that pads and calls generate as 1.16 does, but slices the completions off another way
    (read by the seam check, never run)."""
    padded_ids = pad(prompt_ids, padding_value=0, padding_side="left")  # noqa: F821
    generate_inputs = {"input_ids": padded_ids}
    prompt_completion_ids = unwrapped_model.generate(**generate_inputs, generation_config=self.generation_config)  # noqa: F821
    completion_ids = prompt_completion_ids[:, self.max_prompt_length :]
    return torch.isin(completion_ids, torch.tensor(self.eos_token_ids, device="cpu"))


def test_a_changed_slice_turns_only_the_shared_sampling_off():
    fake_trainer = types.SimpleNamespace(
        model=torch.nn.Linear(1, 1),
        use_vllm=False,
        use_transformers_continuous_batching=False,
        _tokenizer=types.SimpleNamespace(pad_token_id=0),
        generation_config=object(),
        eos_token_ids=[2],
        _metrics={"train": {}},
    )
    next_trl = type("NextGRPOTrainer", (GRPOTrainer,), {"_generate_single_turn": _sampling_sliced_elsewhere})
    problems = seam_problems(fake_trainer, trl_class=next_trl)
    assert 'prompt_length = generate_inputs["input_ids"].size(1)' in problems["shared_sampling"]
    assert "stop_strings" not in problems and "update_monitor" not in problems


def test_missing_attributes_turn_their_feature_off():
    fake = types.SimpleNamespace(model=torch.nn.Linear(1, 1), use_vllm=False, use_transformers_continuous_batching=0)
    problems = seam_problems(fake)
    assert "_metrics" in problems["update_monitor"]
    assert "use_transformers_continuous_batching" in problems["shared_sampling"] == problems["stop_strings"]
    assert "fused LM head" in problems["shared_scoring"]  # a model TRL did not give its fused head

    fake.use_transformers_continuous_batching, fake._tokenizer, fake.eos_token_ids = False, None, ["2"]
    problems = seam_problems(fake)
    assert "_tokenizer" in problems["shared_sampling"]
    assert "eos_token_ids" in problems["stop_strings"] and "generation_config" in problems["stop_strings"]

    fake.use_vllm = True  # vLLM samples: TRL has no generation_config, and neither feature changes anything
    assert set(seam_problems(fake)) == {"shared_scoring", "update_monitor"}


# ---- the table: each row's fallback happens when its check finds a difference ---------------------------------
FELL_BACK = {  # feature -> whether the trainer runs TRL's code (or nothing) in its place
    "shared_scoring": lambda t: not t.shared_prefix and t.shared_prefix_record["off"].endswith("simulated change"),
    "shared_sampling": lambda t: t.shared_prefix and not t.shared_sampling and "sampling_off" in t.shared_prefix_record,
    "stop_strings": lambda t: t.stop_strings == (),
    "update_monitor": lambda t: t.update_monitor is None,
    "skip_zero_advantage": lambda t: not t.zero_advantage.enabled and t.zero_advantage.record["off"].endswith("change"),
}


@pytest.mark.parametrize("row", trl_seam.SEAM, ids=lambda row: row.feature)
def test_each_row_of_the_seam_falls_back_with_its_message(tiny_model_dir, tmp_path, monkeypatch, caplog, row):
    failing = dataclasses.replace(row, check=lambda trainer, trl_class: "simulated change")
    monkeypatch.setattr(trl_seam, "SEAM", tuple(failing if r is row else r for r in trl_seam.SEAM))
    with caplog.at_level(logging.WARNING):
        trainer = _build(tiny_model_dir, tmp_path, stop_strings=("1",))
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "grpo-lite" in r.getMessage()]
    assert len(warned) == 1 and f": {row.name} off (simulated change). TRL's own code runs" in warned[0], warned
    assert trainer.shared_prefix_record["trl_seam"]["off"] == {row.feature: "simulated change"}
    assert {feature for feature, fell_back in FELL_BACK.items() if fell_back(trainer)} == {row.feature}


def test_the_docs_show_the_seams_table():
    text = (Path(__file__).resolve().parents[1] / "docs" / "internals.md").read_text()
    after = text.split("### `grpo_lite/training/step/trl_seam.py`", 1)[1]
    table = after[after.index("| feature |") :].split("\n\n", 1)[0]
    rows = [line.strip("| ").split(" | ") for line in table.splitlines()[2:]]
    assert [(name, fallback) for name, _, fallback in rows] == [(row.name, row.fallback) for row in trl_seam.SEAM]
    for (_, relies_on, _), row in zip(rows, trl_seam.SEAM, strict=True):
        assert all(name in relies_on for name in row.relies_on), (row.feature, relies_on)


# ---- measurements patch only while they measure ------------------------------------------------------
def _installed(trainer) -> dict:
    from torch.optim.optimizer import _global_optimizer_post_hooks
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    from transformers.cache_utils import DynamicLayer
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    head = trainer.model.get_output_embeddings()
    return {
        "ChunkedLogProbFunction": [ChunkedLogProbFunction.__dict__[n] for n in ("forward", "backward")],
        "DynamicLayer.update": DynamicLayer.__dict__["update"],
        "trainer": {
            n: vars(trainer).get(n) for n in ("_get_per_token_logps_and_entropies", "compute_loss", "_clip_grad_norm")
        },
        "model.generate": vars(trainer.model).get("generate"),
        "accelerator.backward": vars(trainer.accelerator).get("backward"),
        "callbacks": [type(c).__name__ for c in trainer.callback_handler.callbacks],
        "optimizer hooks": dict(_global_optimizer_post_hooks),
        "dispatch mode": _get_current_dispatch_mode(),
        "head hooks": (dict(head._forward_pre_hooks), dict(head._forward_hooks)),
        "grad hooks": sum(
            len(getattr(p, "_post_accumulate_grad_hooks", None) or {}) for p in trainer.model.parameters()
        ),
    }


def test_no_patch_of_a_measurement_stays_installed(tiny_model_dir, tmp_path, monkeypatch):
    from grpo_lite.memory.measured import measure

    trainer = _build(tiny_model_dir, tmp_path, max_steps=1)
    before = _installed(trainer)
    report = measure.measure_training(trainer)
    assert report.last().peaks("tensor") and _installed(trainer) == before

    def crash():
        raise RuntimeError("out of memory, say")

    monkeypatch.setattr(trainer, "train", crash)
    with pytest.raises(RuntimeError, match="out of memory"):
        measure.measure_training(trainer)
    assert _installed(trainer) == before

    monkeypatch.setattr(measure.GRPOPhaseHooks, "_callback", lambda self: 1 / 0)  # install fails half-way
    with pytest.raises(ZeroDivisionError):
        measure.measure_training(trainer)
    assert _installed(trainer) == before


def test_the_installed_trl_trains_with_its_seam_whole_or_warned_off(tiny_model_dir, tmp_path, caplog):
    """Any TRL release, tested or not (.ci/run runs this on the newest): every feature whose TRL code differs
    is off and named in one warning, the rest are on, and a step trains."""
    with caplog.at_level(logging.WARNING):
        trainer = _build(tiny_model_dir, tmp_path, stop_strings=("1",))
    problems = seam_problems(trainer)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "grpo-lite" in r.getMessage()]
    if problems:
        assert len(warned) == 1 and f"TRL {trl.__version__}" in warned[0], warned
        assert set(trainer.shared_prefix_record["trl_seam"]["off"]) == set(problems)
    else:
        assert warned == [] and trainer.shared_prefix and trainer.shared_sampling and trainer.stop_strings == ("1",)
    trainer.train()
    assert trainer.state.global_step == 1
