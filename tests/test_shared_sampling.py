"""Shared-prefix sampling against TRL's own: same completion tokens, same log-probs, whatever the layout.

One LiteGRPOTrainer on the tiny random Llama (fp32) serves the whole module; its ``_generate_single_turn``
is called the way TRL's ``_generate`` calls it, and compared with TRL's own method from the same seed.
"""

from __future__ import annotations

import logging

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trl import GRPOTrainer

from grpo_lite.defaults import TRAINER
from grpo_lite.training.step.prefix_cache import common_prefix_length, prefix_cache_inputs
from grpo_lite.training.step.sampling_check import CHECK_ROWS, CHECK_TOKENS, checked_generate, compare_samples


@pytest.fixture(scope="module")
def trainer(tiny_model_dir, tmp_path_factory):
    """The trainer, on one thread: a tiny model gains nothing from threads and loses much on shared cores."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("sampling")),
        use_cpu=True,
        bf16=False,
        seed=0,
        max_steps=1,
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=8,
        temperature=0.9,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
    )
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "two apples?"}]}] * 4)
    built = LiteGRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
    )
    built.model.eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield built
    torch.set_num_threads(threads)


def _tokens(draw_ids: list[int], specials: set[int]) -> list[int]:
    return [10 + (t % 480) if t in specials else t for t in draw_ids]


@settings(max_examples=24, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    prefix=st.lists(st.integers(10, 500), min_size=TRAINER.min_shared_prefix, max_size=48),  # the system prompt's part
    groups=st.lists(
        st.tuples(st.lists(st.integers(10, 500), min_size=1, max_size=24), st.integers(2, 4)), min_size=1, max_size=3
    ),
    multiple=st.sampled_from([None, 8, 64]),
    side=st.sampled_from(["left", "right"]),
    seed=st.integers(0, 2**16),
)
def test_shared_sampling_is_trls(trainer, prefix, groups, multiple, side, seed):
    """Any prompt mix, ``pad_to_multiple_of`` and padding side: the completion tokens are TRL's, and the
    first-call check sees the same tokens with log-probs within 1e-5."""
    specials = set(trainer._tokenizer.all_special_ids)
    prompts = [_tokens(prefix + own, specials) for own, g in groups for _ in range(g)]
    trainer.pad_to_multiple_of, trainer._tokenizer.padding_side = multiple, side
    trainer.shared_prefix_record.pop("sampling_check", None)
    shared = len(prompts) > 1 and common_prefix_length(prompts) >= TRAINER.min_shared_prefix

    torch.manual_seed(seed)
    ref, _ = GRPOTrainer._generate_single_turn(trainer, prompts, None, {}, 4)
    torch.manual_seed(seed)
    trainer._verify_sampling_pending = False
    ours, _ = trainer._generate_single_turn(prompts, None, {}, 4)
    assert ours == ref

    torch.manual_seed(seed)
    trainer._verify_sampling_pending = True
    checked, _ = trainer._generate_single_turn(prompts, None, {}, 4)
    assert checked == ref  # the checked call hands TRL's own output on
    check = trainer.shared_prefix_record.get("sampling_check")
    assert (check is not None) == shared
    if check is not None:  # on a slice: every distinct prompt up to CHECK_ROWS rows, CHECK_TOKENS tokens each
        assert check["ok"] and check["rows_parted"] == 0 and check["shared_width"] == check["width"]
        assert check["rows"] == min(max(len({tuple(p) for p in prompts}), 2), CHECK_ROWS)
        assert 0 < check["n_tokens"] <= check["rows"] * CHECK_TOKENS and check["max_abs_diff"] <= 1e-5
    assert trainer.shared_sampling


def test_prompts_one_token_apart_that_agree_after_it_sample_as_trls(trainer, monkeypatch):
    """The common prefix ends at the first column where prompts differ, though they agree again after it (a system
    prompt, one word apart, the chat template's same ending): each row samples TRL's tokens, and the first call's
    check passes."""
    head, tail = list(range(20, 20 + TRAINER.min_shared_prefix + 4)), [90, 91, 92, 93]
    prompts = [head + [70] + tail] * 2 + [head + [80] + tail] * 2
    assert common_prefix_length(prompts) == len(head)
    assert common_prefix_length([[1, 2, 3, 4], [1, 9, 3, 4]]) == 1 and common_prefix_length([[1, 2, 3], [1, 2]]) == 1
    monkeypatch.setattr(trainer, "pad_to_multiple_of", None)
    monkeypatch.setattr(trainer._tokenizer, "padding_side", "left")
    monkeypatch.setitem(trainer.shared_prefix_record, "sampling_check", None)
    for verify in (False, True):  # a later call, then the first call (checked against TRL's on a slice)
        torch.manual_seed(11)
        ref, _ = GRPOTrainer._generate_single_turn(trainer, prompts, None, {}, 4)
        torch.manual_seed(11)
        monkeypatch.setattr(trainer, "_verify_sampling_pending", verify)
        ours, _ = trainer._generate_single_turn(prompts, None, {}, 4)
        assert ours == ref and trainer.shared_sampling
    assert trainer.shared_prefix_record["sampling_check"]["ok"]


def _inputs(trainer, prompts, width=None):
    """TRL's left-padded ``generate`` inputs and the shared layout's (``width``: prefix_cache_inputs')."""
    model, pad = trainer.model, trainer._tokenizer.pad_token_id
    longest = max(map(len, prompts))
    rows = [[pad] * (longest - len(p)) + p for p in prompts]
    mask = [[0] * (longest - len(p)) + [1] * len(p) for p in prompts]
    plain = {
        "input_ids": torch.tensor(rows),
        "attention_mask": torch.tensor(mask),
        "generation_config": trainer.generation_config,
    }
    with torch.no_grad():
        shared = {**plain, **prefix_cache_inputs(model, prompts, pad, width=width)}
    return plain, shared


def test_a_cut_layout_fails_the_check(trainer):
    """The layout that once lost the first completion tokens (rows as wide as the longest prompt while TRL
    slices at its padded width) is caught: TRL slices the shared output 8 columns too far."""
    head = list(range(20, 60))
    prompts = [head + [70, 71], head + [70, 71], head + [80], head + [80]]
    plain, _ = _inputs(trainer, prompts)
    plain = {
        k: torch.nn.functional.pad(v, (8, 0), value=0) if k != "generation_config" else v for k, v in plain.items()
    }  # TRL padded to a multiple: 8 more columns
    _, narrow = _inputs(trainer, prompts)  # the old layout: as wide as the longest prompt
    state = torch.get_rng_state()
    with torch.no_grad():
        check = checked_generate(
            trainer.model.generate, plain, narrow, trainer.eos_token_ids, exact=True, atol=1e-3, mean_atol=1e-4
        )
    assert not check.ok and "would be cut" in check.reason() and check.width == check.shared_width + 8
    assert torch.equal(torch.get_rng_state(), state)  # the batch is then sampled from the state the check found


def test_the_trainer_turns_shared_sampling_off_on_a_failed_check(trainer, monkeypatch, caplog):
    from grpo_lite.training.step import grpo_trainer

    monkeypatch.setattr(
        grpo_trainer,
        "prefix_cache_inputs",
        lambda model, lists, pad, width=None: prefix_cache_inputs(model, lists, pad),
    )  # the old cut
    monkeypatch.setattr(trainer, "shared_sampling", True)
    monkeypatch.setattr(trainer, "_verify_sampling_pending", True)
    monkeypatch.setattr(trainer, "pad_to_multiple_of", 64)
    monkeypatch.setitem(trainer.shared_prefix_record, "sampling_check", None)
    prompts = [list(range(20, 60)) + [70]] * 4
    torch.manual_seed(3)
    ref, _ = GRPOTrainer._generate_single_turn(trainer, prompts, None, {}, 4)
    torch.manual_seed(3)
    with caplog.at_level(logging.WARNING):
        ours, _ = trainer._generate_single_turn(prompts, None, {}, 4)
    assert ours == ref and not trainer.shared_sampling
    assert "would be cut" in trainer.shared_prefix_record.pop("sampling_off")
    assert caplog.text.count("shared-prefix sampling off") == 1


@pytest.mark.parametrize(("exact", "ok"), [(True, False), (False, True)])
def test_a_row_may_part_ways_only_in_low_precision(exact, ok):
    """Row 1 draws another token at position 2 with the same log-probs up to there: a float flip in bf16."""
    ref_ids = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 8]])
    ids = torch.tensor([[5, 6, 7, 8], [5, 6, 9, 3]])
    logps = torch.tensor([[-1.0, -2.0, -0.5, -0.1]] * 2)
    check = compare_samples(
        ref_ids,
        ids,
        logps,
        logps + 0.01,
        [2],
        width=4,
        shared_width=4,
        exact=exact,
        atol=0.05 if exact else 1.0,
        mean_atol=0.05 if exact else 0.1,
    )
    assert check.ok == ok and check.rows_parted == 1 and check.n_tokens == 4 + 2


def test_log_probs_that_differ_fail_the_check():
    ids = torch.tensor([[5, 6, 7, 8]])
    logps = torch.tensor([[-1.0, -2.0, -0.5, -0.1]])
    check = compare_samples(
        ids,
        ids,
        logps,
        logps + torch.tensor([[0.0, 0.3, 0.0, 0.0]]),
        [2],
        width=4,
        shared_width=4,
        exact=True,
        atol=1e-3,
        mean_atol=1e-4,
    )
    assert not check.ok and check.max_abs_diff == pytest.approx(0.3) and "differ" in check.reason()
