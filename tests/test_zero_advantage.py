"""Zero-advantage rows skip their forward and backward: the step is TRL's own, for every supported loss_type."""

from __future__ import annotations

import logging

import pytest
import torch
from trl import GRPOTrainer

from grpo_lite.training.step.zero_advantage import DIVISORS, ZeroAdvantageSkip, split

B, P, T = 8, 6, 10  # rows (two groups of 4), prompt width, completion width


def _trainer(path, out, **config):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    torch.manual_seed(0)
    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        bf16=False,
        seed=0,
        max_steps=1,
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=T,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        logging_steps=1,
        **config,
    )
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": f"question {i}?"}]} for i in range(8)])
    trainer = LiteGRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(path),
        args=args,
        train_dataset=data,
        processing_class=AutoTokenizer.from_pretrained(path),
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
    )
    trainer.current_gradient_accumulation_steps = 2  # set by the training loop; 2 so the accumulation divisor counts
    return trainer


def _batch(advantages):
    """A micro-batch as TRL hands it to the loss: left-padded prompts, right-padded completions. The zero rows
    are the longest, so skipping them also cuts completion columns."""
    g = torch.Generator().manual_seed(1)
    prompt_ids = torch.randint(3, 500, (B, P), generator=g)
    prompt_mask = torch.ones(B, P, dtype=torch.long)
    prompt_mask[::3, :2] = 0  # some prompts are shorter (left padding)
    completion_ids = torch.randint(3, 500, (B, T), generator=g)
    advantages = torch.tensor(advantages)
    lengths = torch.where(advantages == 0, T, torch.arange(B) % 4 + 3)
    completion_mask = (torch.arange(T)[None] < lengths[:, None]).long()
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "advantages": advantages,
        "num_items_in_batch": completion_mask.sum().float(),
    }


def _sgd_step(trainer, loss_fn, inputs, lr=1e-1):
    """The parameters after one SGD step on ``loss_fn``'s loss (from the same start), and the loss."""
    model = trainer.model
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.train()
    model.zero_grad()
    loss = loss_fn(model, inputs)
    loss.backward()
    after = {
        n: (p.detach() - lr * p.grad if p.grad is not None else p.detach()).clone() for n, p in model.named_parameters()
    }
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(start[n])
    model.zero_grad()
    return after, float(loss.detach())


def _assert_trls_step(trainer, inputs):
    """Our step on ``inputs`` is TRL's own ``_compute_loss`` step: the loss and every parameter after it."""
    theirs, their_loss = _sgd_step(trainer, lambda m, x: GRPOTrainer._compute_loss(trainer, m, x), inputs)
    ours, our_loss = _sgd_step(trainer, trainer._compute_loss, inputs)
    assert our_loss == pytest.approx(their_loss, rel=1e-5, abs=1e-7)
    for name in theirs:
        torch.testing.assert_close(ours[name], theirs[name], rtol=1e-5, atol=1e-6, msg=name)


MIXED = [0.5, -1.0, 0.25, 0.25, 0.0, 0.0, 0.0, 0.0]  # the second group has no spread: advantage exactly 0


@pytest.mark.parametrize("loss_type", list(DIVISORS))
def test_a_step_that_skips_zero_rows_is_trls_step(tiny_model_dir, tmp_path, loss_type):
    trainer = _trainer(tiny_model_dir, tmp_path, loss_type=loss_type)
    assert trainer.zero_advantage.enabled, trainer.zero_advantage.record
    inputs = _batch(MIXED)
    theirs, their_loss = _sgd_step(trainer, lambda m, x: GRPOTrainer._compute_loss(trainer, m, x), inputs)
    ours, our_loss = _sgd_step(trainer, trainer._compute_loss, inputs)
    assert our_loss == pytest.approx(their_loss, rel=1e-5, abs=1e-7)
    moved = [n for n in theirs if not torch.equal(theirs[n], dict(trainer.model.named_parameters())[n].detach())]
    assert moved  # the step changes parameters, so equal parameters mean something
    for name in theirs:
        torch.testing.assert_close(ours[name], theirs[name], rtol=1e-5, atol=1e-6, msg=name)
    record = trainer.zero_advantage.record
    assert record["skipped_rows"] == 4 and record["rows"] == 8
    # the kept rows are at most 6 completion tokens wide: half the rows and 4 of 10 columns were not forwarded
    assert record["skipped_positions"] == B * (P + T) - 4 * (P + 6)
    assert trainer._metrics["train"]["skip/zero_advantage_rows"][-1] == 0.5


def test_tool_tokens_are_left_out_as_trl_leaves_them_out(tiny_model_dir, tmp_path):
    # tokens a tool wrote (tool_mask 0) count neither in the loss nor in bnpo's token divisor: TRL's own step
    trainer = _trainer(tiny_model_dir, tmp_path, loss_type="bnpo")
    inputs = _batch(MIXED)
    inputs["tool_mask"] = torch.ones_like(inputs["completion_mask"])
    inputs["tool_mask"][1::2, 1:3] = 0  # a tool's reply inside every second completion, kept rows included
    _assert_trls_step(trainer, inputs)


def test_a_batch_left_whole_is_counted_by_its_rows():
    counter = ZeroAdvantageSkip(enabled=True)
    metrics = counter.count(None, _batch([1.0, -1.0] * 4))  # 8 rows of 6 prompt and 10 completion positions
    assert metrics == {"skip/zero_advantage_rows": 0.0, "skip/saved_positions": 0.0}
    assert (counter.record["rows"], counter.record["positions"]) == (8, 8 * 16)


def test_every_input_it_knows_is_cut_and_an_input_it_does_not_know_leaves_the_batch_whole():
    inputs = _batch(MIXED)
    for key in ("old_per_token_logps", "ref_per_token_logps", "sampling_per_token_logps", "tool_mask"):
        inputs[key] = torch.rand(B, T)
    inputs["importance_sampling_ratio"] = torch.rand(B, T)
    plan = split(inputs, "rows")  # every key TRL 1.16 may hand the loss: 4 rows kept, 6 columns wide
    assert {k: tuple(v.shape) for k, v in plan.inputs.items() if k != "num_items_in_batch"} == {
        "prompt_ids": (4, P),
        "prompt_mask": (4, P),
        "advantages": (4,),
        **dict.fromkeys(("completion_ids", "completion_mask", "old_per_token_logps", "ref_per_token_logps"), (4, 6)),
        **dict.fromkeys(("sampling_per_token_logps", "tool_mask", "importance_sampling_ratio"), (4, 6)),
    }
    assert split({**_batch(MIXED), "pixel_values": torch.zeros(B, 3)}, "rows") is None  # TRL's own path


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo"])
def test_per_token_advantages_skip_only_rows_zero_at_every_token(tiny_model_dir, tmp_path, loss_type):
    # TRL's loss takes (B, T) advantages too (a subclass's per-token credit); a row is skipped only when every one
    # of its tokens has advantage 0, and the kept rows' advantages are cut to the kept width like the completions
    trainer = _trainer(tiny_model_dir, tmp_path, loss_type=loss_type)
    inputs = _batch(MIXED)
    per_token = torch.tensor(MIXED)[:, None] * torch.linspace(0.5, 1.5, T)[None]
    per_token[1, 0] = 0.0  # a kept row with one token of advantage 0
    inputs["advantages"] = per_token
    plan = split(inputs, DIVISORS[loss_type])
    assert plan.kept_rows == 4 and tuple(plan.inputs["advantages"].shape) == (4, 6)
    _assert_trls_step(trainer, inputs)


def test_rows_kept_to_make_up_a_count_are_the_shortest_zero_rows():
    inputs = _batch(MIXED)
    inputs["completion_mask"][4:] = (torch.arange(T)[None] < torch.tensor([[9], [2], [7], [2]])).long()
    plan = split(inputs, "rows", min_rows=6)  # 4 rows with spread + the 2 shortest zero rows (5 and 7, 2 tokens)
    assert plan.kept_rows == 6 and plan.inputs["advantages"].tolist() == MIXED[:4] + [0.0, 0.0]
    assert plan.inputs["completion_mask"][4:].sum(-1).tolist() == [2, 2]


def test_a_kept_row_without_tokens_is_one_column_wide():
    inputs = _batch([0.0] * B)
    inputs["completion_mask"][3] = 0  # an empty completion: the shortest, so the one row kept
    plan = split(inputs, "rows")
    assert plan.kept_rows == 1 and tuple(plan.inputs["completion_ids"].shape) == (1, 1) and plan.scale == 0.0


def test_the_record_sums_the_micro_batches():
    counter = ZeroAdvantageSkip(enabled=True)
    assert counter.record == dict.fromkeys(("rows", "skipped_rows", "positions", "skipped_positions"), 0) | {
        "enabled": True,
        "saved_share": 0.0,
    }  # a run that stops before its first step records nothing saved
    assert ZeroAdvantageSkip(enabled=False, reason="beta=0.04").record["off"] == "beta=0.04"
    inputs = _batch(MIXED)
    metrics = counter.count(split(inputs, "rows"), inputs)  # 4 rows kept, 6 of 10 completion columns wide
    assert metrics == {"skip/zero_advantage_rows": 0.5, "skip/saved_positions": (128 - 4 * 12) / 128}
    counter.count(None, _batch([1.0, -1.0] * 4))  # then a batch left whole: the sums go on
    assert counter.record == {
        "enabled": True,
        "rows": 16,
        "skipped_rows": 4,
        "positions": 256,
        "skipped_positions": 80,
        "saved_share": 0.3125,
    }


def test_an_all_zero_batch_runs_one_row_and_moves_nothing(tiny_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir, tmp_path)
    inputs = _batch([0.0] * B)
    plan = split(inputs, "rows")
    assert plan.kept_rows == 1 and plan.scale == 0.0
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    after, loss = _sgd_step(trainer, trainer._compute_loss, inputs)
    assert loss == 0.0 and all(torch.equal(after[n], before[n]) for n in before)


def _loss_and_grads(trainer, loss_fn, inputs):
    """The loss and every parameter's gradient (no step: a tiny gradient would vanish in the parameters)."""
    model = trainer.model
    model.train()
    model.zero_grad()
    loss = loss_fn(model, inputs)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    return float(loss.detach()), grads


@pytest.mark.parametrize("near", [1e-12, 1e-7, 5e-5])  # below 1e-6, float32's epsilon, TRL's std epsilon 1e-4
@pytest.mark.parametrize("loss_type", ["grpo", "bnpo"])
def test_an_advantage_near_zero_but_not_zero_is_trained_on_as_trl_does(tiny_model_dir, tmp_path, near, loss_type):
    # the only rows with an advantage are near zero: skipping them as zero would leave no gradient at all; the
    # exact zeros (-0.0 among them) are still skipped; compared with TRL's loss and gradients relative to their size
    trainer = _trainer(tiny_model_dir, tmp_path, loss_type=loss_type)
    inputs = _batch([near, -near, 2 * near, -0.5 * near, 0.0, -0.0, 0.0, 0.0])
    their_loss, theirs = _loss_and_grads(trainer, lambda m, x: GRPOTrainer._compute_loss(trainer, m, x), inputs)
    our_loss, ours = _loss_and_grads(trainer, trainer._compute_loss, inputs)
    assert (trainer.zero_advantage.record["rows"], trainer.zero_advantage.record["skipped_rows"]) == (8, 4)
    assert their_loss != 0.0 and our_loss == pytest.approx(their_loss, rel=1e-4, abs=0.0)
    scale = max(float(g.abs().max()) for g in theirs.values())
    assert scale > 0.0 and ours.keys() == theirs.keys()
    for name in theirs:
        torch.testing.assert_close(ours[name] / scale, theirs[name] / scale, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("near", [1e-45, 1e-30, 1e-10, 1e-3])  # 1e-45: float32's smallest, a subnormal
def test_only_rows_exactly_zero_are_skipped(near):
    plan = split(_batch([near, -near, 1.0, -1.0, 0.0, -0.0, 0.0, 0.0]), "rows")
    assert torch.tensor([near]).item() != 0.0 and plan.kept_rows == 4
    assert plan.inputs["advantages"].tolist() == torch.tensor([near, -near, 1.0, -1.0]).tolist()
    per_token = _batch([0.0] * B)  # every completion T tokens long
    per_token["advantages"] = torch.zeros(B, T)
    per_token["advantages"][2, T - 1] = near  # per-token advantages: one near zero, at a row's last token
    plan = split(per_token, "rows")
    assert plan.kept_rows == 1 and plan.inputs["advantages"][0, T - 1].item() == torch.tensor([near]).item()


def test_a_batch_without_zero_rows_is_left_whole():
    assert split(_batch([1.0, -1.0] * 4), "rows") is None


def test_terms_that_read_every_row_keep_trls_path(tiny_model_dir, tmp_path):
    trainer = _trainer(tiny_model_dir, tmp_path, beta=0.04)
    assert not trainer.zero_advantage.enabled and "beta=0.04" in trainer.zero_advantage.record["off"]
    trainer = _trainer(tiny_model_dir, tmp_path, entropy_coef=0.01)
    assert "entropy" in trainer.zero_advantage.record["off"]


@pytest.mark.parametrize(
    "attributes, reason",
    [
        ({}, "loss_type=None is not one of grpo, sapo, luspo, dr_grpo, bnpo, dapo, cispo, vespo"),
        ({"loss_type": "grpo"}, "beta=None: the KL term's gradient counts every row"),
        ({"loss_type": "grpo", "beta": 0.0}, "an entropy bonus reads every row's entropy"),
        ({"loss_type": "grpo", "beta": 0.0, "_entropy_bonus_enabled": False}, "top_entropy_quantile < 1 ranks every"),
        (
            {"loss_type": "grpo", "beta": 0.0, "_entropy_bonus_enabled": False, "top_entropy_quantile": 1.0},
            "the router auxiliary loss counts every row",
        ),
    ],
)
def test_a_trainer_missing_what_the_skip_needs_keeps_trls_path_and_says_why(attributes, reason):
    # what run.json's zero_advantage.off says; a trainer of another TRL without one of these attributes is refused,
    # and one with all of them set for the skip is taken
    from types import SimpleNamespace

    from grpo_lite.training.step.zero_advantage import config_reason

    assert config_reason(SimpleNamespace(**attributes)).startswith(reason)
    ready = {"loss_type": "dapo", "beta": 0.0, "_entropy_bonus_enabled": False, "top_entropy_quantile": 1.0}
    assert config_reason(SimpleNamespace(**ready, aux_loss_enabled=False)) is None


def test_another_trl_loss_falls_back_with_one_warning(tiny_model_dir, tmp_path, monkeypatch, caplog):
    original = GRPOTrainer._compute_loss

    def next_release_loss(self, model, inputs):  # a release whose loss reads more than the code read here
        return original(self, model, inputs) + 0.0

    monkeypatch.setattr(GRPOTrainer, "_compute_loss", next_release_loss)
    with caplog.at_level(logging.WARNING):
        trainer = _trainer(tiny_model_dir, tmp_path)
    assert (
        not trainer.zero_advantage.enabled
        and "_compute_loss is not the code read" in trainer.zero_advantage.record["off"]
    )
    assert any("zero-advantage skip off" in r.getMessage() for r in caplog.records)


# ---- a whole run: the skip on (beta 0) against TRL's trainer on the same batches ----------------------
STEPS = 3
TOLERANCE = dict(rtol=1e-4, atol=1e-5)  # fp32 on CPU: the kept rows' matmuls reduce in another order


def _flat_or_length(completions: list, flat: list[bool], **_: object) -> list[float]:
    """A flat prompt's group earns one reward (advantage exactly 0); the others earn their completion's length."""
    return [1.0 if f else len(c[0]["content"]) / 10 for c, f in zip(completions, flat, strict=True)]


def _train(cls: type, path, out, loss_type: str, **options: object):
    """``STEPS`` steps of ``cls`` on the tiny model from the same seed: generation batches of 8 (two groups of 4,
    shuffled into micro-batches of 4), half the prompts flat; the trainer after its run."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig

    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        bf16=False,
        seed=3,
        max_steps=STEPS,
        learning_rate=1e-2,
        beta=0.0,
        loss_type=loss_type,
        num_generations=4,
        per_device_train_batch_size=4,
        steps_per_generation=2,
        max_completion_length=T,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        logging_steps=1,
    )
    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"question {i}?"}], "flat": i % 2 == 0} for i in range(16)]
    )
    trainer = cls(
        model=AutoModelForCausalLM.from_pretrained(path),
        args=args,
        train_dataset=data,
        processing_class=AutoTokenizer.from_pretrained(path),
        reward_funcs=_flat_or_length,
        **options,
    )
    trainer.train()
    return trainer


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "bnpo"])  # the three divisors: carried, rows, tokens
def test_a_whole_run_with_the_skip_is_trls_run(tiny_model_dir, tmp_path, loss_type):
    """Parameters after 3 steps within rtol 1e-4, atol 1e-5 of TRL's, while a quarter to all of each micro-batch's
    rows were skipped; a run that moved the weights less than 100x that tolerance would prove nothing."""
    from transformers import AutoModelForCausalLM

    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        theirs = _train(GRPOTrainer, tiny_model_dir, tmp_path / "trl", loss_type)
        ours = _train(LiteGRPOTrainer, tiny_model_dir, tmp_path / "lite", loss_type, shared_prefix=False)
    finally:
        torch.set_num_threads(threads)
    record = ours.zero_advantage.record
    assert ours.zero_advantage.enabled and record["rows"] == 4 * STEPS and record["skipped_rows"] >= STEPS, record
    base = dict(AutoModelForCausalLM.from_pretrained(tiny_model_dir).named_parameters())
    mine = dict(ours.model.named_parameters())
    moved = max(float((p.detach() - base[n].detach()).abs().max()) for n, p in theirs.model.named_parameters())
    assert moved > 100 * TOLERANCE["atol"], moved
    for name, p in theirs.model.named_parameters():
        torch.testing.assert_close(mine[name].detach(), p.detach(), **TOLERANCE, msg=name)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo"])  # one loss_type per divisor
def test_zero_rows_kept_to_match_another_ranks_count_leave_trls_step(tiny_model_dir, tmp_path, loss_type):
    trainer = _trainer(tiny_model_dir, tmp_path, loss_type=loss_type)
    inputs = _batch(MIXED)
    plan = split(inputs, DIVISORS[loss_type], min_rows=6)  # another rank keeps 6 rows: 2 zero rows make up the count
    assert plan.kept_rows == 6 and plan.inputs["advantages"].tolist() == [*MIXED[:4], 0.0, 0.0]
    theirs, their_loss = _sgd_step(trainer, lambda m, x: GRPOTrainer._compute_loss(trainer, m, x), inputs)
    ours, our_loss = _sgd_step(
        trainer, lambda m, x: GRPOTrainer._compute_loss(trainer, m, plan.inputs) * plan.scale, inputs
    )
    assert our_loss == pytest.approx(their_loss, rel=1e-5, abs=1e-7)
    for name in theirs:
        torch.testing.assert_close(ours[name], theirs[name], rtol=1e-5, atol=1e-6, msg=name)
    every = split(_batch([0.0] * B), "rows", min_rows=3)  # all zero: the 3 shortest rows run, their loss times 0
    assert every.kept_rows == 3 and every.scale == 0.0
    assert split(inputs, "rows", min_rows=B) is None  # every row runs: TRL's own call


def alike_on_rank_0(prompts, completions, **kwargs):
    """Rank 0's groups all alike (advantage 0); rank 1's first group with spread, its second alike."""
    import os

    if os.environ.get("RANK", "0") == "0":
        return [1.0] * len(completions)
    return [float(i == 1) for i in range(len(completions))]  # rows 0 and 1 are the first group


@pytest.mark.slow  # two gloo processes train the tiny model (about a minute on 2 cores)
def test_two_ranks_that_keep_different_rows_train_to_the_end(tiny_model_dir, tmp_path):
    """TRL's loss gathers one clip ratio per row from every rank: the ranks keep the same number of rows."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "ranks.py"
    script.write_text(
        "import sys\n"
        "sys.path.insert(0, %r)\n"
        "import torch; torch.set_num_threads(1)\n"
        "from test_zero_advantage import alike_on_rank_0\n"
        "from grpo_lite import train\n"
        "train(%r, output_dir=%r, dataset='synthetic', rewards=[alike_on_rank_0], method='lora', num_generations=2,\n"
        "      per_device_train_batch_size=4, max_completion_length=4, max_steps=2, beta=0.0, quiet=True)\n"
        % (str(Path(__file__).parent), str(tiny_model_dir), str(tmp_path / "run"))
    )
    env = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script)]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads((tmp_path / "run" / "run.json").read_text())["zero_advantage"]
    # each rank: 2 steps of 4 rows; rank 1 keeps 2 (its first group), so rank 0 (all zero) runs 2 of its 4 too
    assert record["enabled"] and (record["rows"], record["skipped_rows"]) == (8, 4), record
