"""benchmarks/time_to_target.py's rules, on made-up curves: the target, the time to it, the runs kept, the report.

- a run saves its trainable weights every K steps and at its last, with the training CPU seconds reached, the
  save's own CPU time off the clock; after the run each saved point is scored from the weights of its step;
- the target is three quarters of the way from the untrained accuracy to the reference runs' plateau;
- a run's time is its first saved point at or above the target; one that never gets there counts at the budget;
- with three runs or more the fastest and slowest are dropped;
- the report gives each arm's time, accuracy at the budget with its Wilson interval, groups with spread, ratios,
  steps and generated tokens per training CPU second, the points of its curves;
- the runs: the evaluation before training once per task, trl-defaults on its own seeds, the other arms on theirs.
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest


@pytest.fixture(scope="module")
def bench() -> Any:
    from conftest import load_benchmark

    return load_benchmark("time_to_target")


def _run(arm: str, seed: int, curve: list[tuple[float, int]], groups=(10, 4), n: int = 100) -> dict:
    points = [{"train_cpu_s": t, "correct": k, "n": n, "step": i} for i, (t, k) in enumerate(curve)]
    return {"arm": arm, "seed": seed, "curve": points, "groups": list(groups), "steps": len(curve), "tokens": 50 * len(curve),
            "train_cpu_s": curve[-1][0]}  # fmt: skip


def test_the_target_and_the_time_to_it(bench):
    before = {"correct": 20, "n": 100}
    assert bench.target_from(before, [_run("trl-lite-hp", 0, [(600, 40)]), _run("trl-lite-hp", 1, [(600, 60)])]) == (
        pytest.approx(0.2 + 0.75 * 0.3)
    )
    run = _run("grpo-lite", 0, [(60, 30), (120, 45), (180, 41), (600, 50)])
    assert bench.time_to(run, 0.425) == 120 and bench.time_to(run, 0.5) == 600 and bench.time_to(run, 0.6) is None
    assert bench.kept([300.0, 100.0, 600.0, 200.0, 250.0]) == [200.0, 250.0, 300.0]


def test_the_report_counts_a_run_that_never_reaches_the_target_at_the_budget(bench, monkeypatch):
    monkeypatch.setitem(bench.TARGETS, "one-step", 0.4)
    runs = [
        _run("trl-lite-hp", 0, [(100, 30), (600, 38)]),  # never: counts 600
        _run("trl-lite-hp", 1, [(100, 30), (300, 40)]),
        _run("grpo-lite", 0, [(100, 42), (600, 44)], groups=(10, 8)),
        _run("grpo-lite", 1, [(150, 41), (600, 45)], groups=(10, 6)),
    ]
    text = bench.report("one-step", {"correct": 10, "n": 100}, runs, 600.0)
    assert "target 40.0%" in text and "PROVISIONAL" not in text
    assert "| trl-lite-hp | 2 | 1 | 450 [300, 600] | 39.0% [" in text
    assert "| grpo-lite | 2 | 2 | 125 [100, 150] | 44.5% [" in text and "| 70.0% [" in text  # 14 of 20 groups
    assert "time_to_target: one-step grpo-lite/trl-lite-hp speedup=3.60" in text


def test_without_a_target_the_report_says_its_own_is_provisional(bench, monkeypatch):
    monkeypatch.setitem(bench.TARGETS, "mixed", None)
    runs = [_run("trl-lite-hp", 0, [(600, 60)])]
    assert "target 47.5% (PROVISIONAL" in bench.report("mixed", {"correct": 10, "n": 100}, runs, 600.0)


def test_the_runs_of_a_benchmark_and_of_a_reference(bench):
    args = argparse.Namespace(tasks=["one-step", "mixed"], seeds=[0, 1], defaults_seeds=[0], reference=False)
    runs = bench.jobs(args)
    assert runs[:4] == [
        ("before", "one-step", 0),
        ("before", "mixed", 0),
        ("trl-lite-hp", "one-step", 0),
        ("grpo-lite", "one-step", 0),
    ]
    assert runs[4:6] == [("trl-lite-hp", "mixed", 0), ("grpo-lite", "mixed", 0)]
    assert runs[-2:] == [("trl-defaults", "one-step", 0), ("trl-defaults", "mixed", 0)]  # seed-major, defaults last
    assert sum(arm == "grpo-lite" for arm, _, _ in runs) == 4 and len(runs) == 2 * (2 + 2 * 2)
    args.reference = True
    assert {arm for arm, _, _ in bench.jobs(args)} == {"before", "trl-lite-hp"}
    args.reference, args.seeds = False, []  # `--seeds` given empty: a benchmark's missing trl-defaults runs alone
    assert bench.jobs(args) == [("before", "one-step", 0), ("before", "mixed", 0)] + runs[-2:]


def test_a_run_that_never_reaches_the_target_is_never_counted_sooner_than_one_that_did(bench, monkeypatch):
    """Runs overrun a short budget (at least one step runs): a run that missed counts at the latest end, not 15 s."""
    monkeypatch.setitem(bench.TARGETS, "one-step", 0.2)
    runs = [_run("trl-lite-hp", 0, [(49, 25)]), _run("grpo-lite", 0, [(22, 12)])]
    text = bench.report("one-step", {"correct": 12, "n": 100}, runs, 15.0)
    assert "| grpo-lite | 1 | 0 | 49 [49, 49] |" in text and "counts at 49" in text


def test_a_run_that_missed_counts_at_its_own_end_not_at_another_arms_overrun(bench, monkeypatch):
    """TRL's defaults take minutes a step: their overrun must not make the other arms' misses count later."""
    monkeypatch.setitem(bench.TARGETS, "one-step", 0.2)
    runs = [
        _run("trl-defaults", 0, [(274, 12)]),
        _run("trl-lite-hp", 0, [(161, 15)]),
        _run("grpo-lite", 0, [(111, 25)]),
    ]
    text = bench.report("one-step", {"correct": 12, "n": 100}, runs, 200.0)
    assert "| trl-defaults | 1 | 0 | 274 [274, 274] |" in text and "| trl-lite-hp | 1 | 0 | 200 [200, 200] |" in text
    assert "| grpo-lite | 1 | 1 | 111 [111, 111] |" in text and "counts at 200, or at its own end" in text


def test_a_target_not_above_the_untrained_accuracy_gives_no_time(bench, monkeypatch):
    monkeypatch.setitem(bench.TARGETS, "mixed", None)
    runs = [_run("trl-lite-hp", 0, [(60, 0)]), _run("grpo-lite", 0, [(60, 0)])]
    text = bench.report("mixed", {"correct": 0, "n": 8}, runs, 15.0)
    assert "no time to target" in text and "speedup" not in text


def test_a_summary_reads_every_finished_run_whichever_invocation_ran_it(bench, tmp_path):
    """Several invocations may share one --out, each writing its own summary file: the runs' folders are the record."""
    for folder in ("one-step/before-seed0", "mixed/grpo-lite-seed4", "mixed/trl-defaults-seed0", "mixed/x-seed1"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "result.json").write_text("{}")
    (tmp_path / "mixed" / "trl-lite-hp-seed4").mkdir()  # started, not finished
    found = bench.finished(tmp_path)
    assert found == [("grpo-lite", "mixed", 4), ("trl-defaults", "mixed", 0), ("before", "one-step", 0)]


def test_the_groups_with_spread_are_counted_by_prompt(bench):
    """The table's "groups with spread": a prompt's completions in one call, the correctness reward passing some."""
    count = bench.SpreadCount(lambda prompts, completions, **kwargs: [1.0, 0.0, 1.0, 1.0, None, 0.0])
    prompts = [[{"role": "user", "content": q}] for q in "aabbcc"]  # conversational prompts, as TRL passes them
    assert count(prompts=prompts, completions=[""] * 6) == [1.0, 0.0, 1.0, 1.0, None, 0.0]  # the rewards unchanged
    assert count.groups == [3, 1] and count.__name__ == "<lambda>"


class _Clock:
    """The process's CPU seconds, moved by hand; a save costs ``save_s`` of them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, bench: Any, save_s: float) -> None:
        import torch

        self.now, real_save = 0.0, torch.save

        def slow_save(*args: Any, **kwargs: Any) -> None:
            self.now += save_s
            real_save(*args, **kwargs)

        monkeypatch.setattr(torch, "save", slow_save)
        monkeypatch.setattr(bench.time, "process_time", lambda: self.now)


def _train(bench: Any, snapshots: Any, limit: Any, clock: _Clock, model: Any, steps: int, step_s: float = 10.0):
    """``steps`` optimizer steps of ``step_s`` CPU seconds each, the weight set to the step's number, as the
    Trainer calls its callbacks (the time limit first)."""
    from transformers import TrainerControl, TrainerState

    state, control = TrainerState(), TrainerControl()
    for callback in (limit, snapshots):
        callback.on_train_begin(None, state, control, model=model)
    for step in range(1, steps + 1):
        clock.now += step_s
        model.weight.data.fill_(step)
        state.global_step = step
        for callback in (limit, snapshots):
            callback.on_step_end(None, state, control, model=model)
    for callback in (limit, snapshots):
        callback.on_train_end(None, state, control, model=model)


def _linear() -> Any:
    import torch

    model = torch.nn.Linear(1, 1)
    model.bias.requires_grad_(False)  # frozen, as the base model under a LoRA adapter
    return model


@pytest.mark.parametrize(("every", "saved"), [(1, [1, 2, 3, 4, 5]), (2, [2, 4, 5]), (0, [5])])
def test_the_weights_are_saved_every_k_steps_and_at_the_last_with_the_save_off_the_clock(
    bench, tmp_path, monkeypatch, every, saved
):
    clock, paused = _Clock(monkeypatch, bench, save_s=7.0), [0.0]
    limit = bench.vs_trl.TimeLimit(1000.0, "cpu", cpu_clock=lambda: clock.now - paused[0])
    snapshots = bench.Snapshots(tmp_path / "snapshots", every, limit, paused)
    _train(bench, snapshots, limit, clock, _linear(), steps=5)
    assert [p["step"] for p in snapshots.points] == saved
    # each point's time is the training CPU reached at its step: 10 s a step, none of the 7 s each save cost
    assert [p["train_cpu_s"] for p in snapshots.points] == [10.0 * step for step in saved]
    assert limit.cpu == 50.0 and paused == [7.0 * len(saved)] and limit.step_cpu == [10.0] * 5
    assert sorted(f.name for f in (tmp_path / "snapshots").iterdir()) == sorted(f"step-{s}.pt" for s in saved)


def test_each_point_is_scored_from_the_weights_of_its_step_after_the_run(bench, tmp_path, monkeypatch):
    import torch

    clock, paused = _Clock(monkeypatch, bench, save_s=0.0), [0.0]
    limit = bench.vs_trl.TimeLimit(1000.0, "cpu", cpu_clock=lambda: clock.now - paused[0])
    snapshots, model = bench.Snapshots(tmp_path / "snapshots", 2, limit, paused), _linear()
    _train(bench, snapshots, limit, clock, model, steps=5)
    assert set(torch.load(tmp_path / "snapshots" / "step-2.pt")) == {"weight"}  # the trainable weights only
    model.weight.data.fill_(99.0)  # the model as training left it (not the weights of any point)
    curve = bench.evaluate_snapshots(snapshots, lambda m: {"correct": int(m.weight.item()), "n": 10})
    assert curve == [
        {"step": 2, "train_cpu_s": 20.0, "correct": 2, "n": 10},
        {"step": 4, "train_cpu_s": 40.0, "correct": 4, "n": 10},
        {"step": 5, "train_cpu_s": 50.0, "correct": 5, "n": 10},
    ]
    assert not list((tmp_path / "snapshots").iterdir())  # each file deleted once scored


def test_a_snapshot_that_does_not_fit_the_trained_model_is_refused(bench, tmp_path):
    import torch

    snapshots = bench.Snapshots(tmp_path, 1, None, [0.0])
    snapshots.points, snapshots.model = [{"step": 1, "train_cpu_s": 1.0}], _linear()
    torch.save({"lora_A.weight": torch.zeros(1)}, tmp_path / "step-1.pt")
    with pytest.raises(RuntimeError, match="holds weights the trained model lacks"):
        bench.evaluate_snapshots(snapshots, lambda m: {})


def test_the_generated_tokens_are_counted_from_the_completions_trl_scores(bench):
    count = bench.SpreadCount(lambda prompts, completions, **kwargs: [1.0] * len(completions))
    count(prompts=["a", "a"], completions=["x", "y"], completion_ids=[[1, 2, 3], [4]])
    count(prompts=["b"], completions=["z"], completion_ids=[[5, 6]])
    assert count.tokens == 6
    count(prompts=["c"], completions=["w"])  # a caller without the ids: nothing counted, nothing fails
    assert count.tokens == 6


def test_the_report_says_where_the_time_went_beside_every_curve(bench, monkeypatch):
    monkeypatch.setitem(bench.TARGETS, "one-step", 0.4)
    runs = [
        _run("trl-lite-hp", 0, [(50, 30), (100, 35), (150, 38), (200, 41), (250, 42), (300, 43)]),
        _run("grpo-lite", 0, [(25, 30), (50, 41), (75, 44), (100, 45)]),
    ]
    runs[1]["tokens"] = 1000
    text = bench.report("one-step", {"correct": 10, "n": 100}, runs, 300.0)
    assert "| trl-lite-hp | 1 | 1 | 200 [200, 200] | 43.0% [" in text and "| 6.0 | 0.020 | 1.0 | 6 |" in text
    assert "| grpo-lite | 1 | 1 | 50 [50, 50] | 45.0% [" in text and "| 4.0 | 0.040 | 10.0 | 4 |" in text
    assert "speedup=4.00" in text
    assert "| grpo-lite | 0 | 4 | 0.040 | 10.0 | 25 s / 0 / 30, 50 s / 1 / 41, 75 s / 2 / 44, 100 s / 3 / 45 |" in text
    old = {k: v for k, v in runs[1].items() if k != "tokens"}  # a record from before the count
    assert bench.pace([old]) == "0.040 | -"
