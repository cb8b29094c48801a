"""The progress line: one compact line per step instead of the trainer's raw log dict."""

from __future__ import annotations

import pytest
from tiny_run import TINY_RUN

from grpo_lite import train
from grpo_lite.rewards import correctness_reward, soft_format_reward
from grpo_lite.training.report.progress import _duration, format_line, reward_shares

LOGS = {"reward": 1.5, "completions/mean_length": 40.0, "completions/clipped_ratio": 0.5}


@pytest.mark.parametrize(
    "step, total, logs, shares, per_step, expected",
    [
        (1, 16, LOGS, {}, None, "step  1/16  reward 1.50  len 40 (cut 50%)"),
        (
            16,
            16,
            LOGS,
            {"format": 1.0},
            10.0,
            "step 16/16  reward 1.50  format 100%  len 40 (cut 50%)  10.0 s/step  0s left",
        ),
        (2, None, {"reward": 0.1}, {}, 3.0, "step 2  reward 0.10  3.0 s/step"),
        (1, 4, {"update/realized": 0.04}, {}, None, "step 1/4  realized 0.04"),
        (1, 2, {"reward": None}, {"correct": 0.125}, None, "step 1/2  correct 12%"),
    ],
)
def test_format_line(step, total, logs, shares, per_step, expected):
    assert format_line(step, total, logs, shares, per_step) == expected


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59.6, "1m 00s"), (75, "1m 15s"), (3700, "1h 01m")])
def test_duration(seconds, text):
    assert _duration(seconds) == text


def test_shares_need_the_reward_in_use():
    logs = {"rewards/correctness_reward/mean": 1.0, "rewards/soft_format_reward/mean": 0.5}
    assert reward_shares(logs, [correctness_reward]) == {"correct": 0.5}
    assert reward_shares(logs, [soft_format_reward, correctness_reward]) == {"format": 1.0, "correct": 0.5}
    assert reward_shares({}, [correctness_reward]) == {}


def test_train_prints_one_line_per_step_and_no_raw_dict(tiny_model_dir, tmp_path, capsys):
    run = {**TINY_RUN, "quiet": False}
    train(str(tiny_model_dir), method="lora", output_dir=tmp_path / "run", max_steps=2, save_strategy="no", **run)
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in lines] == ["1/2", "2/2"]
    assert "s/step" in lines[1] and "left" in lines[1]
    assert "{'loss'" not in out and "'reward':" not in out  # the raw log dict is not printed
