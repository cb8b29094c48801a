"""The examples run end to end on the tiny random Llama, as CI runs them (a few steps, offline)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SHARED_GSM8K = Path(__file__).resolve().parents[2] / "shared" / "data" / "gsm8k"


def _run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # One thread: a tiny model gains nothing from more, and threads fighting another job for the
    # cores made a 0.3 s step take 15 s.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def _load(script: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(script.removesuffix(".py"), EXAMPLES / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.mark.parametrize(
    ("script", "low", "high"),
    [
        ("gsm8k_grpo.py", 80, 120),
        ("custom_reward.py", 30, 55),
    ],
)
def test_example_length_is_what_a_newcomer_reads(script, low, high):
    lines = (EXAMPLES / script).read_text().splitlines()
    assert low <= len(lines) <= high


def test_gsm8k_example_two_steps_on_the_tiny_model(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    proc = _run(
        "gsm8k_grpo.py",
        "--model",
        str(tiny_model_dir),
        "--steps",
        "2",
        "--eval-n",
        "4",
        "--reward",
        "length",
        "--dataset",
        "synthetic",
        "--num-generations",
        "4",
        "--max-completion-length",
        "16",
        "--output-dir",
        str(out),
        cwd=tmp_path,
    )
    text = proc.stdout
    assert "no CUDA device" in text  # the detection line
    assert "preset lora on CPU" in text  # the plan's table
    assert "before: accuracy" in text and "(n=4)" in text
    assert "after:  accuracy" in text
    assert "trained 2 steps" in text and "on preset lora" in text

    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "finished" and record["steps"] == 2
    assert record["rewards"] == ["length_reward"]
    assert record["settings"]["num_generations"] == 4
    assert record["settings"]["max_completion_length"] == 16
    assert len(record["history"]) == 2 and all(row["reward"] > 0 for row in record["history"])
    if importlib.util.find_spec("matplotlib"):
        assert (out / "reward_curve.png").stat().st_size > 1000

    from safetensors.torch import load_file

    adapter = load_file(str(out / "final" / "adapter_model.safetensors"))
    lora_b = [t for name, t in adapter.items() if "lora_B" in name]
    assert lora_b and any(float(t.abs().sum()) > 0 for t in lora_b), "LoRA B starts at 0: training must move it"


def test_custom_reward_example_passes_its_reward_to_train(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    proc = _run(
        "custom_reward.py", "--model", str(tiny_model_dir), "--steps", "1", "--output-dir", str(out), cwd=tmp_path
    )
    assert "close_answer:" in proc.stdout and "(last step)" in proc.stdout
    record = json.loads((out / "run.json").read_text())
    assert record["rewards"] == ["soft_format_reward", "close_answer"]
    assert record["steps"] == 1
    assert "rewards/close_answer/mean" in record["history"][0]
    assert record["measured_prompt_tokens"] > 0


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        ("so it travels 120 km", "120", 1.0),
        ("about 60", "120", 0.5),
        ("<answer>\n-120\n</answer>", "120", 0.0),
        ("no number at all", "120", 0.0),
        ([{"role": "assistant", "content": "150"}], "120", 0.75),
    ],
)
def test_custom_reward_scores(completion, gold, expected):
    reward = _load("custom_reward.py").close_answer
    assert reward(prompts=["q"], completions=[completion], answer=[gold]) == [pytest.approx(expected)]


def test_custom_reward_rows_load_as_a_dataset():
    from datasets import Dataset

    from grpo_lite import load_dataset

    rows = load_dataset(Dataset.from_list(_load("custom_reward.py").ROWS))
    assert rows.num_rows == 20
    assert {"prompt", "question", "answer", "unit"} <= set(rows.column_names)
    assert rows[0]["answer"] == "80"


def test_gsm8k_example_picks_gsm8k_when_it_is_readable(monkeypatch):
    if not (SHARED_GSM8K / "test.jsonl").is_file():
        pytest.skip(f"no GSM8K rows at {SHARED_GSM8K}")
    monkeypatch.setenv("GRPO_LITE_GSM8K_DIR", str(SHARED_GSM8K))
    assert _load("gsm8k_grpo.py").pick_dataset("auto") == "gsm8k"


def test_gsm8k_example_falls_back_to_synthetic_offline(monkeypatch, capsys):
    monkeypatch.delenv("GRPO_LITE_GSM8K_DIR", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    module = _load("gsm8k_grpo.py")
    assert module.pick_dataset("auto") == "synthetic"
    assert "GSM8K is not available" in capsys.readouterr().out
    assert module.pick_dataset("gsm8k") == "gsm8k"  # an explicit choice is never second-guessed
