"""A run prints grpo-lite's own lines: the libraries' noise is filtered at its source, only around our calls,
and the plan is a two-line summary (the whole table behind --show-plan)."""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
import warnings

import pytest
import yaml

from grpo_lite.training.report.quiet import quiet_libraries

NOISE = (
    "Loading weights",
    "Writing model shards",
    "Converting and de-quantizing",
    "it/s]",
    "gemm_4bit_forward",
    "FutureWarning",
    "is_gradient_checkpointing",
    "memory not checked",
)
FAST = ["--dataset", "synthetic", "--reward", "length", "--max-steps", "1", "--set", "max_completion_length=8"]
BNB = "bitsandbytes.backends.cpu.ops"


def test_the_known_noise_is_dropped_and_the_rest_shows(caplog):
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_libraries():
            assert not hf_logging.is_progress_bar_enabled()
            logging.getLogger(BNB).warning("Failed to load CPU gemm_4bit_forward from kernels-community: %s", "x")
            logging.getLogger(BNB).warning("another bitsandbytes warning")
            warnings.warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)
            warnings.warn("a warning a user should see", FutureWarning)
        logging.getLogger(BNB).warning("Failed to load CPU gemm_4bit_forward from kernels-community: after")
    assert [str(w.message) for w in seen] == ["a warning a user should see"]
    assert [r.getMessage() for r in caplog.records] == [
        "another bitsandbytes warning",
        "Failed to load CPU gemm_4bit_forward from kernels-community: after",
    ]
    assert hf_logging.is_progress_bar_enabled() == bars and not logging.getLogger(BNB).filters


def test_train_prints_only_its_own_lines(tiny_model_dir, tmp_path, capfd):
    from grpo_lite.cli import main

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["train", str(tiny_model_dir), *FAST, "--output-dir", str(tmp_path / "run")]) == 0
    out, err = capfd.readouterr()
    printed = out + err
    assert not [n for n in NOISE if n in printed], printed
    assert not [w for w in seen if "is_gradient_checkpointing" in str(w.message)]
    plan_lines = [line for line in out.splitlines() if line.startswith("plan: ")]
    assert (
        len(plan_lines) == 1 and "peak" in plan_lines[0] and "fits the 64.0 GiB of RAM available now" in plan_lines[0]
    )
    assert "--show-plan" in out and "┏" not in out.split("step 1/1")[0]  # no table before the first step
    assert out.splitlines()[-1].startswith("trained 1 steps")


def test_the_cpu_plan_says_what_its_memory_was_checked_against(monkeypatch):
    from grpo_lite.planning import hardware
    from grpo_lite.planning.choose import plan
    from grpo_lite.planning.tables import plan_headline, plan_summary

    checked = plan("SmolLM2-135M-Instruct", device="cpu")
    assert plan_headline(checked).endswith("fits the 64.0 GiB of RAM available now")
    assert plan_summary(checked).count("\n") == 1
    monkeypatch.setattr(hardware, "detect_ram", lambda: (None, "free RAM could not be read"))
    unknown = plan("SmolLM2-135M-Instruct", device="cpu")
    assert "not checked (no budget given, and the RAM available could not be read)" in plan_headline(unknown)
    budget = plan("Llama-3.2-1B-Instruct", 16)
    assert plan_summary(budget).startswith(f"plan: Llama-3.2-1B-Instruct: preset {budget.preset.name} fits 16 GB")
    assert f"peak {budget.estimate.total_gib:.2f} of {budget.budget_gib:.2f} GiB usable" in plan_summary(budget)


@pytest.mark.parametrize(
    ("command", "target"),
    [
        (["train", "some-model", "--show-plan"], "grpo_lite.api.train"),
        (["demo", "--show-plan"], "grpo_lite.demo.run_demo"),
    ],
)
def test_show_plan_reaches_train(command, target, monkeypatch):
    from grpo_lite.cli import main

    seen = {}

    def stop(*args, **kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(target, stop)
    assert main(command) == 130
    assert seen["show_plan"] is True


def test_a_recipe_error_on_the_cpu_is_the_only_line(tmp_path):
    """The first import of TRL imports bitsandbytes, whose CPU backend logs a line about an optional kernel package:
    a command's recipe error is printed alone (the line came before it, the check's import being outside the filter)."""
    assert importlib.util.find_spec("bitsandbytes") is not None  # the import that logs the line
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"model": "m", "preset": "lora", "device": "cpu", "trl": {"lerning_rate": 0.1}}))
    done = subprocess.run(
        [sys.executable, "-m", "grpo_lite", "train", "--config", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 2 and "gemm_4bit_forward" not in done.stdout + done.stderr, done.stderr
    assert done.stderr.startswith(f"error: {path}: trl: unknown training setting(s): 'lerning_rate'"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
