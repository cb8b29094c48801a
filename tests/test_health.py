"""The learning-health monitor: each finding provoked (a metrics stream, and the tiny model through train()),
its line and run.json event, remedies that plan as written, and no finding for a run that learns."""

from __future__ import annotations

import json
import random
import types
from dataclasses import replace

import pytest
from tiny_run import TINY_RUN

from grpo_lite.training.report import health
from grpo_lite.training.report.health import HealthMonitor, LearningStalledWarning


def _reward(name: str, value: float):
    """A reward with the name and full value the progress shares read (``format`` and ``correct``)."""
    return types.SimpleNamespace(name=name, value=value)


REWARDS = [_reward("soft_format_reward", 0.5), _reward("correctness_reward", 2.0)]


def _row(
    step: int, *, fmt: float, correct: float, clipped: float = 0.05, zero: float = 0.25, reward: float | None = None
) -> dict:
    return {
        "completions/clipped_ratio": clipped,
        "frac_reward_zero_std": zero,
        "rewards/soft_format_reward/mean": 0.5 * fmt,
        "rewards/correctness_reward/mean": 2.0 * correct,
        "reward": 0.5 * fmt + 2.0 * correct if reward is None else reward,
    }


def _stream(rows) -> list:
    found = []
    monitor = HealthMonitor(REWARDS, report=found.append)
    for step, row in enumerate(rows, 1):
        monitor.observe(row, step, {"max_completion_length": 64, "num_generations": 8, "learning_rate": 2e-4})
    return found


def test_a_run_that_learns_raises_no_finding():
    noise = random.Random(0)
    rows = [
        _row(
            s,
            fmt=min(1.0, 0.5 + 0.012 * s + noise.uniform(-0.05, 0.05)),
            correct=max(0.0, 0.1 + 0.008 * s + noise.uniform(-0.05, 0.05)),
            clipped=noise.uniform(0.0, 0.3),
            zero=noise.uniform(0.1, 0.6),
        )
        for s in range(60)
    ]
    assert _stream(rows) == []


@pytest.mark.parametrize(
    ("kind", "rows", "words"),
    [
        (
            "length_cut",
            [_row(s, fmt=0.5, correct=0.2, clipped=0.97) for s in range(8)],
            "97% of completions were cut at max_completion_length=64",
        ),
        ("zero_spread", [_row(s, fmt=0.0, correct=0.0, zero=1.0, reward=0.0) for s in range(8)], "too hard"),
        (
            "format_only",
            [_row(s, fmt=0.3 + 0.03 * s, correct=0.02) for s in range(20)],
            "learns the format, not the answers",
        ),
        ("correctness_falling", [_row(s, fmt=0.9, correct=0.4 - 0.02 * s) for s in range(20)], "correct share fell"),
        (
            "reward_flat",
            [_row(s, fmt=0.5, correct=0.0, reward=0.25) for s in range(20)],
            "has been 0.25 for the last 20",
        ),
    ],
)
def test_each_finding_is_seen_once_with_its_cause(kind, rows, words):
    found = _stream(rows + rows[-1:] * 3)  # more of the same reports nothing new
    assert [f.kind for f in found if f.kind == kind] == [kind]
    finding = next(f for f in found if f.kind == kind)
    assert words in finding.cause and finding.line().startswith("health: ") and finding.remedy
    assert finding.event()["event"] == "health" and finding.event()["finding"] == kind
    if kind == "correctness_falling":
        assert "--set learning_rate=0.0001" in finding.remedy


def test_without_a_report_a_finding_is_a_warning():
    monitor = HealthMonitor(REWARDS)
    with pytest.warns(LearningStalledWarning, match="were cut at max_completion_length"):
        for step in range(8):
            monitor.observe(_row(step, fmt=0.5, correct=0.1, clipped=1.0), step)


def test_on_stall_is_checked():
    with pytest.raises(ValueError, match="on_stall='fix' is not valid; choose one of warn, adapt"):
        HealthMonitor(REWARDS, on_stall="fix")


# ---- remedies: the planner's numbers, as flags that plan as written ----------------------------------------
def test_the_length_remedy_is_the_longest_that_fits_and_plans_as_written():
    from grpo_lite import plan
    from grpo_lite.cli.options import parse_set
    from grpo_lite.defaults import RESILIENCE
    from grpo_lite.errors import DoesNotFitError
    from grpo_lite.training.report.advice import Advisor

    kwargs = {"budget_gb": 8, "max_prompt_length": 256}
    current = plan("Qwen2.5-1.5B-Instruct", **kwargs)
    remedy = Advisor(current, kwargs).length_remedy()
    flags = remedy.split(": ", 1)[1].split(" (Python")[0].split()
    fixed = parse_set([f for f in flags if f != "--set"])
    assert fixed["max_completion_length"] > current.settings["max_completion_length"], remedy
    assert (
        plan("Qwen2.5-1.5B-Instruct", **kwargs, **fixed).settings["max_completion_length"]
        == fixed["max_completion_length"]
    )
    longer = {**fixed, "max_completion_length": fixed["max_completion_length"] + RESILIENCE.length_step}
    with pytest.raises(DoesNotFitError):  # the longest: one step more does not fit this rung
        plan("Qwen2.5-1.5B-Instruct", **kwargs, **longer, preset=current.preset.name)


def test_the_generations_remedy_refits_a_fixed_batch():
    from grpo_lite import plan
    from grpo_lite.cli.options import parse_set
    from grpo_lite.training.report.advice import Advisor

    kwargs = {"budget_gb": 24, "max_prompt_length": 128}
    current = plan("Qwen2.5-0.5B-Instruct", **kwargs, num_generations=4, per_device_train_batch_size=4)
    remedy = Advisor(current, kwargs).generations_remedy()
    fixed = parse_set([f for f in remedy.split(": ", 2)[2].split(" (Python")[0].split() if f != "--set"])
    assert fixed["num_generations"] > 4, remedy
    assert plan("Qwen2.5-0.5B-Instruct", **kwargs, **fixed).settings["num_generations"] == fixed["num_generations"]


# ---- through train() on the tiny model -----------------------------------------------------------------
@pytest.fixture
def short_windows(monkeypatch):
    monkeypatch.setattr(health, "HEALTH", replace(health.HEALTH, window_steps=3, trend_steps=6, flat_steps=4))


class _RisingFormat:
    """A format reward whose earned share rises with every call (0 -> all), within a group as across steps."""

    name, value, __name__ = "soft_format_reward", 0.5, "soft_format_reward"

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, completions, **_):
        self.calls += 1
        earned = min(len(completions), self.calls - 1)
        return [self.value if i < earned else 0.0 for i in range(len(completions))]


def _never_right(completions, **_):
    return [0.0] * len(completions)


_never_right.name = _never_right.__name__ = "correctness_reward"  # TRL logs rewards/<__name__>/mean
_never_right.value = 2.0


def _constant(completions, **_):
    return [1.0] * len(completions)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kinds", "settings"),
    [
        (
            ("length_cut", "zero_spread"),
            {"max_completion_length": 4, "stop_strings": (), "rewards": [_constant], "max_steps": 3},
        ),
        (("format_only",), {"rewards": "rising", "max_steps": 6}),
    ],
    ids=["cut-and-spread", "format-only"],
)
def test_train_says_each_finding_in_a_line_and_in_run_json(
    tiny_model_dir, tmp_path, capsys, short_windows, kinds, settings
):
    from grpo_lite import train

    settings = dict(settings)
    if settings.get("rewards") == "rising":
        settings["rewards"] = [_RisingFormat(), _never_right]
    result = train(
        str(tiny_model_dir),
        output_dir=tmp_path / "run",
        **{**TINY_RUN, "quiet": False, "save_strategy": "no", **settings},
    )
    out = " ".join(capsys.readouterr().out.split())
    events = [e for e in json.loads((tmp_path / "run" / "run.json").read_text())["events"] if e["event"] == "health"]
    for kind in kinds:
        assert kind in [e["finding"] for e in events], events
        event = next(e for e in events if e["finding"] == kind)
        assert f"health: {event['cause']}" in out and event["step"] <= result.steps
    if "length_cut" in kinds:  # the remedy is the planner's: a longer length, as a flag
        event = next(e for e in events if e["finding"] == "length_cut")
        assert "--set max_completion_length=" in event["remedy"]
        assert int(event["remedy"].split("--set max_completion_length=")[1].split()[0]) > 4


@pytest.mark.slow
def test_a_tiny_run_whose_completions_end_raises_no_finding(tiny_model_dir, tmp_path):
    """Ten steps with the real windows (cut and spread judged from step 8): EOS grows likelier after 3 tokens,
    so completions end before the limit and the length reward varies within each group."""
    from grpo_lite import train

    result = train(
        str(tiny_model_dir),
        output_dir=tmp_path / "run",
        **{
            **TINY_RUN,
            "max_steps": health.HEALTH.window_steps + 2,
            "save_strategy": "no",
            "stop_strings": (),
            "generation_kwargs": {"exponential_decay_length_penalty": (3, 1.6)},
        },
    )
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [e for e in record["events"] if e["event"] == "health"] == [] and record["health"]["findings"] == []
    cut = [r["completions/clipped_ratio"] for r in result.history]
    assert sum(cut) / len(cut) < health.HEALTH.cut_share / 2  # most completions end: a step may still cut half of them


@pytest.mark.slow
def test_adapt_raises_the_completion_length_at_a_checkpoint(tiny_model_dir, tmp_path, capsys, monkeypatch):
    """Every completion is cut at 4 tokens (the tiny model writes no EOS): the finding at step 2, the checkpoint
    at step 2, and from step 3 the run samples up to the longer length the plan fits."""
    from grpo_lite import train

    monkeypatch.setattr(health, "HEALTH", replace(health.HEALTH, window_steps=2))
    result = train(
        str(tiny_model_dir),
        output_dir=tmp_path / "run",
        on_stall="adapt",
        **{**TINY_RUN, "quiet": False, "max_completion_length": 4, "stop_strings": (), "max_steps": 4, "save_steps": 2},
    )
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    adapted = [e for e in record["events"] if e["event"] == "replanned"]
    assert len(adapted) == 1 and adapted[0]["step"] == 2 and adapted[0]["cause"] == "stall", record["events"]
    old, new = adapted[0]["from"]["max_completion_length"], adapted[0]["to"]["max_completion_length"]
    assert old == 4 and new > 4 and record["plan"]["settings"]["max_completion_length"] == new
    # issue 44 M8: only what changed (before: num_train_epochs None -> 1 and ~10 more, nulls in from)
    assert set(adapted[0]["from"]) == {"max_completion_length", "peak_gib"}, adapted[0]
    assert None not in adapted[0]["from"].values()
    lengths = [row["completions/mean_length"] for row in result.history]
    assert max(lengths[:2]) <= 4 < min(lengths[2:])
    assert f"max_completion_length 4 -> {new}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_adapt_and_its_remedy_stay_within_the_models_context(tiny_model_dir, tmp_path, monkeypatch):
    """Prompts that leave fewer than RESILIENCE.length_step positions of the tiny model's 1024: the remedy and the adaptation
    stop at what the context leaves (before: 4 -> 36, past the context in silence); run.json's settings, recipe
    and plan say the same length; the remedy's flags train as written."""
    import re

    from datasets import Dataset

    from grpo_lite import train
    from grpo_lite.defaults import RESILIENCE

    monkeypatch.setattr(health, "HEALTH", replace(health.HEALTH, window_steps=2))
    rows = Dataset.from_list([{"question": "What is " + "1 + " * 385 + "1?", "answer": "386"}] * 4)
    run = {**TINY_RUN, "dataset": rows, "max_completion_length": 4, "stop_strings": ()}
    result = train(str(tiny_model_dir), output_dir=tmp_path / "run", on_stall="adapt",
                   **{**run, "max_steps": 4, "save_steps": 2})  # fmt: skip
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    room = 1024 - record["measured_prompt_tokens"]
    assert 4 < room < 4 + RESILIENCE.length_step, room  # the premise: one step of the search is past the context
    lengths = {
        "plan": record["plan"]["settings"]["max_completion_length"],
        "recipe": record["recipe"]["trl"]["max_completion_length"],
        "settings": record["settings"]["max_completion_length"],
        "result": result.plan.settings["max_completion_length"],
    }
    assert lengths == dict.fromkeys(lengths, room), (room, lengths)  # one length, the context's room
    assert max(row["completions/max_length"] for row in result.history) <= room
    [replanned] = [e for e in record["events"] if e["event"] == "replanned"]
    assert replanned["cause"] == "stall" and replanned["step"] == 2
    assert replanned["from"]["max_completion_length"] == 4 and replanned["to"]["max_completion_length"] == room
    remedy = next(e["remedy"] for e in record["events"] if e.get("finding") == "length_cut")
    flags = {key: int(value) for key, value in re.findall(r"--set (\w+)=(\d+)", remedy)}
    assert flags["max_completion_length"] == room, remedy
    again = train(str(tiny_model_dir), output_dir=tmp_path / "again", **{**run, **flags, "max_steps": 1})
    assert again.steps == 1 and again.plan.settings["max_completion_length"] == room


def test_adapt_is_declined_where_it_cannot_happen():
    from grpo_lite import plan
    from grpo_lite.training.report.advice import Advisor

    said = []
    advisor = Advisor(
        plan("Qwen2.5-0.5B-Instruct", budget_gb=8),
        {"budget_gb": 8},
        on_decline=lambda step, event: said.append(event),
    )
    advisor.trainer = types.SimpleNamespace(
        use_vllm=False,
        use_transformers_continuous_batching=False,
        accelerator=types.SimpleNamespace(num_processes=1),
        args=types.SimpleNamespace(save_strategy="no"),
    )
    monitor = HealthMonitor(REWARDS, report=lambda f: None, advisor=advisor, on_stall="adapt")
    for step in range(health.HEALTH.window_steps):
        monitor.observe(_row(step, fmt=0.5, correct=0.1, clipped=1.0), step)
    assert not monitor.adapt_pending
    assert said[0]["event"] == "adapt_skipped" and "no checkpoint" in said[0]["why"]


def test_the_cli_flag_reaches_train(monkeypatch):
    import argparse

    from grpo_lite.cli import train as train_cli

    seen = {}

    def fake_train(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - records what the command passed
        seen.update(kwargs)
        return types.SimpleNamespace(
            interrupted=False, already_finished=False, steps=1, wall_seconds=1.0, model_dir="m"
        )

    monkeypatch.setattr("grpo_lite.api.train", fake_train)
    parser = argparse.ArgumentParser()
    train_cli.add_parser(parser.add_subparsers(dest="command"))
    assert train_cli.run(parser.parse_args(["train", "tiny", "--on-stall", "adapt"])) == 0
    assert seen["on_stall"] == "adapt"
    with pytest.raises(SystemExit):
        parser.parse_args(["train", "tiny", "--on-stall", "fix"])


def test_train_refuses_an_unknown_on_stall_before_loading(tmp_path):
    from grpo_lite import train
    from grpo_lite.errors import ConfigError

    with pytest.raises(ConfigError, match="on_stall='fix' is not valid; choose one of warn, adapt"):
        train("Llama-3.2-1B-Instruct", output_dir=tmp_path / "run", on_stall="fix")
    assert not (tmp_path / "run").exists()
