"""Problems chosen by what the model can still learn from (``problem_choice="learnable"``).

| what | how it is shown |
| --- | --- |
| all-alike problems are skipped, ones with spread are not | the rule on fake stats; a tiny-model run whose reward passes, fails or splits each group by problem |
| the skip grows with the all-alike streak, capped so a problem comes back | the rule's probabilities; a problem that turns learnable is chosen again |
| no stall when everything fails | a run whose reward fails every completion trains every step, each batch full |
| the same choice on every rank | two choosers with the same seed and the same gathered rates choose alike (a 2-process run: slow) |
| a resumed run chooses what an uninterrupted one does | the chooser's checkpoint; a tiny run stopped at step 3 and resumed |
| the setting typed, in the recipe and the CLI | a bad value is one error naming the choices; the recipe file and --problem-choice carry it |
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_run import TINY_RUN, signal_during_step

from grpo_lite import ConfigError, train
from grpo_lite.training.step.problem_choice import (
    CHOICE_DEFAULTS,
    COLUMN,
    ChoiceRule,
    ChoiceSampler,
    ProblemChooser,
    lag_batches,
)

N = 12  # problems of the tiny runs: 4 a batch, so each comes back within a few steps
KINDS = ("right", "wrong", "spread")  # problem i is KINDS[i % 3]


def kind(problem: int) -> str:
    return KINDS[problem % 3]


def fake_rates(problems: list[int]) -> dict[int, float]:
    return {p: {"right": 1.0, "wrong": 0.0, "spread": 0.5}[kind(p)] for p in problems}


def run_rule(chooser: ProblemChooser, batches: int, rates=fake_rates) -> list[list[int]]:
    """Choose ``batches`` batches, each reporting its rates after the loader's lag (as a run does)."""
    chosen = []
    for _ in range(batches):
        chosen.append(chooser.choose())
        chooser.report(rates(chosen[-1]))
    return chosen


# ---- the rule on fake stats ----------------------------------------------------------------------------
def test_the_skip_grows_with_the_all_alike_streak_and_stops_at_the_floor():
    chooser = ProblemChooser(10, 2, seed=0)
    chooser.history = {1: [1.0], 2: [0.0, 0.0], 3: [0.5, 1.0, 1.0, 1.0], 4: [0.0, 1.0, 0.25], 5: [0.0] * 4}
    skip = {p: chooser.skip_probability(p) for p in range(6)}
    assert skip == {0: 0.0, 1: 0.5, 2: 0.75, 3: 0.875, 4: 0.0, 5: 0.9}  # 1 - 0.5**k, at most 1 - return_floor
    weights = {p: chooser.weight(p) for p in (0, 1, 4)}
    assert weights[0] == 1.0 and weights[1] == CHOICE_DEFAULTS.weight_floor  # no history: as learnable as can be
    assert weights[1] < weights[4] < 1.0  # a mean pass rate of 0.42 is preferred to 1.0


def test_all_alike_problems_are_skipped_and_ones_with_spread_are_not():
    chooser = ProblemChooser(30, 4, seed=3)
    chosen = run_rule(chooser, 60)
    late = [p for batch in chosen[20:] for p in batch]
    share = {k: sum(kind(p) == k for p in late) / len(late) for k in KINDS}
    assert share["spread"] > 0.6, share  # a third of the problems, most of what is sampled
    assert 0 < share["right"] < 0.2 and 0 < share["wrong"] < 0.2, share  # they still come back now and then
    assert chooser.skipped > 0 and chooser.late == 0 and chooser.filled == 0
    assert all(len(set(batch)) == 4 for batch in chosen)


def test_plain_order_without_the_choice_samples_every_kind_alike():
    """The comparison the test above rests on: without the rule each kind is a third of the batches."""
    chooser = ProblemChooser(30, 4, seed=3, rule=ChoiceRule(skip_base=0.999999, return_floor=1.0))
    chosen = run_rule(chooser, 60)
    late = [p for batch in chosen[20:] for p in batch]
    assert abs(sum(kind(p) == "spread" for p in late) / len(late) - 1 / 3) < 0.1


def test_a_problem_that_becomes_learnable_is_found_again():
    turned = {0: False}  # problem 0 fails every completion until the model learns it, at batch 30

    def rates(problems):
        return {p: (0.5 if turned[0] else 0.0) if p == 0 else 1.0 for p in problems}

    chooser = ProblemChooser(20, 2, seed=1)
    early = run_rule(chooser, 30, rates)
    assert chooser.skip_probability(0) >= 0.75  # all wrong at least twice in a row
    turned[0] = True
    later = run_rule(chooser, 40, rates)
    before, after = sum(0 in b for b in early[10:]), sum(0 in b for b in later[20:])  # 20 batches each
    assert after >= max(5, 2 * before), (before, after)  # it came back, and is now chosen more than before
    assert chooser.skip_probability(0) == 0.0


def test_everything_all_wrong_never_stalls_and_falls_back_to_random_order():
    chooser = ProblemChooser(8, 4, seed=0)
    chosen = run_rule(chooser, 50, lambda problems: dict.fromkeys(problems, 0.0))
    assert all(len(set(batch)) == 4 for batch in chosen)
    assert chooser.filled > 0  # too few were left after the skips: the skipped ones filled the batch
    counts = [sum(p in b for b in chosen) for p in range(8)]
    assert min(counts) > 10, counts  # every problem keeps coming: nothing is starved


def test_two_ranks_with_the_same_seed_and_the_same_gathered_rates_choose_alike():
    a, b = ProblemChooser(40, 4, seed=7), ProblemChooser(40, 4, seed=7)
    assert run_rule(a, 30) == run_rule(b, 30)
    other = ProblemChooser(40, 4, seed=8)
    assert run_rule(other, 30) != run_rule(ProblemChooser(40, 4, seed=7), 30)  # the seed matters


def test_a_chooser_restored_from_its_checkpoint_chooses_what_the_uninterrupted_one_does():
    straight = ProblemChooser(30, 4, seed=5, lag=2)
    expected = run_rule(straight, 40)
    stopped = ProblemChooser(30, 4, seed=5, lag=2)
    first = []
    for _ in range(17):  # the loader has chosen two batches ahead of the 16 sampled when the checkpoint is saved
        first.append(stopped.choose())
        if len(first) <= 16:
            stopped.report(fake_rates(first[-1]))
    saved = json.loads(json.dumps(stopped.checkpoint()))  # through the file's JSON
    assert saved["reported"] == 16 and saved["state"]["chosen"] == 16
    resumed = ProblemChooser(30, 4, seed=999, lag=2)  # the state carries the RNG, not the seed
    resumed.restore(saved)
    assert first[:16] + run_rule(resumed, 24) == expected


def test_choices_use_only_results_at_least_lag_batches_old():
    """What arrived early is not used: a run where results come sooner chooses the same batches."""
    slow, fast = ProblemChooser(30, 4, seed=2, lag=2), ProblemChooser(30, 4, seed=2, lag=2)
    pending: list[list[int]] = []
    slow_chosen = []
    for _ in range(30):
        slow_chosen.append(slow.choose())
        pending.append(slow_chosen[-1])
        if len(pending) > 1:  # the results of a batch come one batch later
            slow.report(fake_rates(pending.pop(0)))
    assert slow.late == 0 and run_rule(fast, 30) == slow_chosen


def test_a_loader_further_ahead_than_counted_is_recorded_late():
    chooser = ProblemChooser(30, 4, seed=2, lag=1)
    chooser.choose()
    chooser.choose()  # batch 1 needs batch 0's results: none came
    assert chooser.late == 1


def test_the_lag_follows_accumulation_generation_and_prefetch():
    assert lag_batches(1, 1) == 2  # one step a generation batch, the loader one ahead: chosen two batches back
    assert lag_batches(1, 1, ahead=3) == 4
    assert lag_batches(2, 4) == 1  # a generation batch spans two optimizer steps: the last one's results are in


def test_the_sampler_keeps_trl_s_layout():
    chooser = ProblemChooser(7, 3, seed=0)
    sampler = ChoiceSampler(chooser, mini_repeat_count=2, repeat_count=2)
    out = list(sampler)
    assert len(out) == len(sampler) == 2 * 3 * 2 * 2  # 7 // 3 batches, as RepeatSampler drops the remainder
    first = out[:12]
    assert first[:6] == first[6:] and first[0] == first[1] and len(set(first)) == 3


def test_a_rule_out_of_range_is_refused():
    with pytest.raises(ValueError, match="skip_base=1.5"):
        ChoiceRule(skip_base=1.5)


# ---- the setting ---------------------------------------------------------------------------------------
def test_the_setting_is_typed_in_the_recipe_and_on_the_command_line(tmp_path):
    from grpo_lite.cli.train import add_parser
    from grpo_lite.recipe.recipe import Recipe

    recipe = Recipe("m", "lora").with_overrides(problem_choice="learnable")
    assert Recipe.from_yaml(recipe.to_yaml()).problem_choice == "learnable"
    assert "problem_choice: learnable" in recipe.to_yaml()
    with pytest.raises(ConfigError, match="choose one of off, learnable"):
        Recipe("m", "lora").with_overrides(problem_choice="on")
    with pytest.raises(ConfigError, match="problem_choice"):
        Recipe.from_yaml("model: m\npreset: lora\nproblem_choice: sometimes\n")
    import argparse

    sub = argparse.ArgumentParser().add_subparsers()
    parser = add_parser(sub)
    assert parser.parse_args(["m", "--problem-choice", "learnable"]).problem_choice == "learnable"
    assert parser.parse_args(["m"]).problem_choice is None  # the recipe's or train()'s default
    with pytest.raises(SystemExit):
        parser.parse_args(["m", "--problem-choice", "sometimes"])


def test_a_bad_value_to_train_is_refused_before_anything_loads(tmp_path):
    with pytest.raises(ConfigError, match="problem_choice"):
        train("no-such-model", output_dir=tmp_path / "run", problem_choice="sometimes")


# ---- tiny-model runs -----------------------------------------------------------------------------------
class ByProblem:
    """A reward that passes every completion of the ``right`` problems, none of the ``wrong`` ones, and half of
    each group of the ``spread`` ones; it records the problems each training batch sampled."""

    __name__ = "by_problem"

    def __init__(self, everything_wrong: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.everything_wrong = everything_wrong
        self.index = {q: i for i, q in enumerate(_problems()["question"])}  # with the choice off: no index column

    def __call__(self, prompts, completions, **kwargs):
        ids = kwargs[COLUMN] if COLUMN in kwargs else [self.index[q] for q in kwargs["question"]]
        self.batches.append(sorted(set(ids)))
        if self.everything_wrong:
            return [0.0] * len(ids)
        seen: dict[int, int] = {}
        out = []
        for p in ids:
            seen[p] = seen.get(p, 0) + 1
            out.append({"right": 1.0, "wrong": 0.0, "spread": float(seen[p] % 2)}[kind(p)])
        return out


CHOICE_RUN = dict(
    {k: v for k, v in TINY_RUN.items() if k not in ("dataset", "rewards")},
    method="lora",
    num_generations=2,
    per_device_train_batch_size=8,  # 4 problems a batch
    max_completion_length=4,
    problem_choice="learnable",
)


def _problems():
    from grpo_lite.data.loaders import load_dataset

    return load_dataset("synthetic", split="train", limit=N, seed=0)


@pytest.fixture(scope="module")
def problems():
    return _problems()


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # tiny runs go faster on one thread (conftest restores the count)


def _train(tiny_model_dir, out, reward, problems, **extra):
    return train(str(tiny_model_dir), output_dir=out, dataset=problems, rewards=[reward], **{**CHOICE_RUN, **extra})


def test_a_run_samples_the_problems_with_spread_and_skips_the_others(tiny_model_dir, tmp_path, problems):
    reward = ByProblem()
    _train(tiny_model_dir, tmp_path / "run", reward, problems, max_steps=12, save_steps=100)
    assert len(reward.batches) == 12 and all(len(b) == 4 for b in reward.batches)
    late = [p for b in reward.batches[6:] for p in b]
    share = {k: sum(kind(p) == k for p in late) / len(late) for k in KINDS}
    assert share["spread"] >= 0.6, (share, reward.batches)  # a third of the problems, in plain order a third
    record = json.loads((tmp_path / "run" / "run.json").read_text())["problem_choice"]
    assert record["setting"] == "learnable" and record["skipped"] > 0 and record["late"] == 0
    assert record["groups"] == 48 and 0 < record["groups_with_spread"] < 48
    history = json.loads((tmp_path / "run" / "run.json").read_text())["history"]
    assert "problem_choice/spread" in history[-1] and "problem_choice/skipped" in history[-1]

    plain = ByProblem()
    _train(tiny_model_dir, tmp_path / "off", plain, problems, max_steps=12, save_steps=100, problem_choice="off")
    assert all(len(b) == 4 for b in plain.batches)
    off = json.loads((tmp_path / "off" / "run.json").read_text())["problem_choice"]
    assert off["setting"] == "off" and "skipped" not in off and off["groups"] == 48
    assert off["groups_with_spread"] < record["groups_with_spread"]  # plain order: a third of the groups


def test_a_run_whose_reward_fails_everything_trains_every_step(tiny_model_dir, tmp_path, problems):
    reward = ByProblem(everything_wrong=True)
    result = _train(tiny_model_dir, tmp_path / "run", reward, problems, max_steps=8, save_steps=100)
    assert result.steps == 8 and len(reward.batches) == 8 and all(len(b) == 4 for b in reward.batches)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["problem_choice"]["groups_with_spread"] == 0


def test_a_resumed_run_chooses_what_an_uninterrupted_one_does(tiny_model_dir, tmp_path, problems):
    straight = ByProblem()
    _train(tiny_model_dir, tmp_path / "straight", straight, problems, max_steps=7, save_steps=1)
    stopped, resumed = ByProblem(), ByProblem()
    out = tmp_path / "stopped"
    first = _train(tiny_model_dir, out, stopped, problems, max_steps=7, save_steps=1, callbacks=[signal_during_step(4)])
    assert first.interrupted and first.steps == 4 and (out / "checkpoint-4" / "problem_choice.json").is_file()
    _train(tiny_model_dir, out, resumed, problems, max_steps=7, save_steps=1, resume=True)
    assert stopped.batches + resumed.batches == straight.batches
    marker = json.loads((out / "checkpoint-7" / "grpo_lite_checkpoint.json").read_text())
    assert "problem_choice.json" in marker["files"]  # written before the checkpoint was marked complete


def test_a_trl_whose_sampler_differs_runs_its_own(tiny_model_dir):
    from grpo_lite.training.step.trl_seam import seam_problems

    class Trainer:
        num_generations, num_iterations, reward_funcs, _metrics = 2, 1, [], {"train": {}}
        use_vllm = use_transformers_continuous_batching = False

    from trl import GRPOTrainer

    class Changed(GRPOTrainer):
        def _get_train_sampler(self, dataset=None):
            return None

    problems = seam_problems(Trainer(), Changed)
    assert "no longer has RepeatSampler(" in problems["problem_choice"]


@pytest.mark.slow  # two gloo processes train the tiny model (about a minute on 2 cores)
def test_two_processes_choose_alike(tiny_model_dir, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "ranks.py"
    script.write_text(
        "import json, os, sys\n"
        "sys.path.insert(0, %r)\n"
        "import torch; torch.set_num_threads(1)\n"
        "from test_problem_choice import ByProblem, CHOICE_RUN, N\n"
        "from grpo_lite import train\n"
        "from grpo_lite.data.loaders import load_dataset\n"
        "from grpo_lite.training.step import problem_choice as pc\n"
        "chosen, choose = [], pc.ProblemChooser.choose\n"
        "pc.ProblemChooser.choose = lambda self: chosen.append(choose(self)) or chosen[-1]\n"
        "reward = ByProblem()\n"
        "train(%r, output_dir=%r, dataset=load_dataset('synthetic', split='train', limit=N, seed=0),\n"
        "      rewards=[reward], **{**CHOICE_RUN, 'per_device_train_batch_size': 4, 'max_steps': 6, 'beta': 0.01})\n"
        "from accelerate import PartialState\n"
        "open(%r + f'/rank{PartialState().process_index}.json', 'w').write(json.dumps([reward.batches, chosen]))\n"
        % (str(Path(__file__).parent), str(tiny_model_dir), str(tmp_path / "run"), str(tmp_path))
    )
    env = {"HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    import os

    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script)]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (rows0, chosen0), (rows1, chosen1) = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert chosen0 == chosen1 and len(chosen0) >= 6  # each rank's own chooser, fed the gathered rates: one choice
    record = json.loads((tmp_path / "run" / "run.json").read_text())["problem_choice"]
    assert record["skipped"] > 0 and record["groups"] == 24  # each rank saw all 4 groups of a batch, gathered
    # each rank's rows are half of each batch: together they are the batch both chose
    assert all(set(a) | set(b) == set(c) for a, b, c in zip(rows0, rows1, chosen0)), (rows0, rows1, chosen0)


@pytest.mark.parametrize("setting", ["off", "learnable"])
def test_the_zero_spread_finding_names_the_setting_when_it_is_off(setting):
    from grpo_lite.training.report.health import WINDOW_STEPS, HealthMonitor

    found = []
    monitor = HealthMonitor([], report=found.append)
    monitor.problem_choice = setting
    for step in range(1, WINDOW_STEPS + 1):
        monitor.observe({"frac_reward_zero_std": 1.0, "reward": 0.0}, step)
    assert [f.kind for f in found] == ["zero_spread"]
    assert ("--problem-choice learnable" in found[0].remedy) == (setting == "off")
