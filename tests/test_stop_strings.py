"""Stop strings end sampled completions early, closed by the EOS token."""

from __future__ import annotations

import json

import pytest
from tiny_run import TINY_RUN

from grpo_lite import train
from grpo_lite.training.grpo_trainer import end_at_stop


@pytest.mark.parametrize("ids, pad, eos, expected", [
    ([5, 6, 0, 0], 0, [2], [5, 6, 2]),  # stopped early: pads dropped, EOS closes the completion
    ([5, 6, 2], 2, [2], [5, 6, 2]),  # pad is EOS: TRL already cut there
    ([5, 6, 7], 0, [2], [5, 6, 7]),  # ran to the length limit: unchanged
    ([], 0, [2], []),
    ([5, 0], None, [2], [5, 0]),  # no pad token: nothing to strip
])
def test_end_at_stop(ids, pad, eos, expected):
    assert end_at_stop(ids, pad, eos) == expected


def _mean_length(out) -> float:
    history = json.loads((out / "run.json").read_text())["history"]
    return sum(row["completions/mean_length"] for row in history) / len(history)


def test_a_stop_string_shortens_the_completions(tiny_model_dir, tmp_path):
    # the tiny BPE writes digits often: stop at the first "1"
    common = dict(TINY_RUN, max_steps=1, save_strategy="no", method="lora", shared_prefix=False)
    train(str(tiny_model_dir), output_dir=tmp_path / "full", stop_strings=(), **common)
    train(str(tiny_model_dir), output_dir=tmp_path / "stop", stop_strings=("1",), **common)
    full, stopped = _mean_length(tmp_path / "full"), _mean_length(tmp_path / "stop")
    assert full == TINY_RUN["max_completion_length"]
    assert stopped < full
    assert json.loads((tmp_path / "stop" / "run.json").read_text())["stop_strings"] == ["1"]
