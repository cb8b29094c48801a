"""benchmarks/time_to_target.py's rules, on made-up curves: the target, the time to it, the runs kept, the report.

- the target is three quarters of the way from the untrained accuracy to the reference runs' plateau;
- a run's time is its first evaluation at or above the target; one that never gets there counts at the budget;
- with three runs or more the fastest and slowest are dropped;
- the report gives each arm's time, accuracy at the budget with its Wilson interval, groups with spread, ratios;
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
    return {"arm": arm, "seed": seed, "curve": points, "groups": list(groups), "steps": len(curve)}


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
