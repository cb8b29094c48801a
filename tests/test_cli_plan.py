"""`grpo-lite plan` and `grpo-lite presets`, driven through their own add_parser/run."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_lite.cli import plan as plan_cli
from grpo_lite.cli import presets as presets_cli
from grpo_lite.errors import ConfigError, DoesNotFitError
from grpo_lite.planning import hardware
from grpo_lite.planning.hardware import Extras
from grpo_lite.planning.ladder import LADDER


@pytest.fixture(autouse=True)
def _plain_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    extras = Extras(liger_kernel=False, vllm=False, galore_torch=True, bitsandbytes=True, deepspeed=False)
    monkeypatch.setattr(hardware, "installed_extras", lambda: extras)
    monkeypatch.setattr(hardware, "detect_vram", lambda: (None, "no CUDA device (torch.cuda.is_available() is False)"))


def _run(module, argv: list[str]) -> int:  # noqa: ANN001
    parser = argparse.ArgumentParser(prog="grpo-lite")
    sub = parser.add_subparsers(dest="command", required=True)
    module.add_parser(sub)
    args = parser.parse_args(argv)
    return module.run(args)


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict:
    assert _run(plan_cli, ["plan", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "model,budget,extra,preset",
    [
        ("meta-llama/Llama-3.2-1B-Instruct", "16", [], "full-8bit"),
        ("meta-llama/Llama-3.1-8B-Instruct", "16", [], "qlora"),
        ("Qwen/Qwen2.5-7B-Instruct", "32", ["--method", "galore"], "galore"),
    ],
)
def test_done_when_fits(
    capsys: pytest.CaptureFixture[str], model: str, budget: str, extra: list[str], preset: str
) -> None:
    data = _json(capsys, [model, "--budget-gb", budget, *extra])
    assert data["preset"] == preset and data["fits"] is True
    assert {"preset", "fits", "estimate_gib", "budget_gib", "components", "settings"} <= set(data)
    assert sum(data["components"].values()) == pytest.approx(data["estimate_gib"], abs=0.01)
    assert data["estimate_gib"] < data["budget_gib"]


def test_8b_at_4gb_is_a_clear_error() -> None:
    with pytest.raises(DoesNotFitError, match=r"The smallest budget that fits is \d+ GB \(preset qlora\)"):
        _run(plan_cli, ["plan", "meta-llama/Llama-3.1-8B-Instruct", "--budget-gb", "4"])


def test_8b_at_4gb_through_the_console_script() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "grpo_lite", "plan", "meta-llama/Llama-3.1-8B-Instruct", "--budget-gb", "4"],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 2
    assert out.stderr.startswith("error: meta-llama/Llama-3.1-8B-Instruct does not fit a 4 GB card")
    assert len(out.stderr.strip().splitlines()) == 1


def test_table_output_names_components_and_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(plan_cli, ["plan", "Llama-3.2-1B-Instruct", "--budget-gb", "16"]) == 0
    out = capsys.readouterr().out
    for text in (
        "preset full-8bit fits",
        "weights",
        "optimizer_state",
        "total",
        "headroom",
        "per_device_train_batch_size",
        "chose full-8bit",
        "bfloat16 weights, updates: stochastic rounding",
    ):
        assert text in out


def test_set_values_are_typed_and_kept(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(
        capsys,
        [
            "Llama-3.2-1B",
            "--budget-gb",
            "16",
            "--set",
            "num_generations=4",
            "--set",
            "learning_rate=2e-6",
            "--set",
            "logging_steps=3",
        ],
    )
    assert data["settings"]["num_generations"] == 4 and data["settings"]["learning_rate"] == 2e-6
    assert data["settings"]["logging_steps"] == 3
    assert data["fixed"] == {"num_generations": 4, "learning_rate": 2e-6, "logging_steps": 3}


def test_broken_batch_rule_names_the_fields() -> None:
    with pytest.raises(ConfigError, match="per_device_train_batch_size .* num_generations"):
        _run(
            plan_cli,
            [
                "plan",
                "Llama-3.2-1B",
                "--budget-gb",
                "16",
                "--set",
                "per_device_train_batch_size=3",
                "--set",
                "gradient_accumulation_steps=1",
            ],
        )


def test_several_models_need_compare() -> None:
    with pytest.raises(ConfigError, match="--compare"):
        _run(plan_cli, ["plan", "Llama-3.2-1B", "Qwen2.5-1.5B", "--budget-gb", "16"])


def test_compare_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    models = ["Llama-3.2-1B", "Qwen2.5-1.5B", "Llama-3.1-8B"]
    data = _json(capsys, [*models, "--compare", "--budget-gb", "16"])
    assert data["models"] == models
    assert [row["preset"] for row in data["rows"]] == [p.name for p in LADDER]
    for row in data["rows"]:
        assert set(row["gib"]) == set(models) == set(row["fits"])
    by_preset = {row["preset"]: row for row in data["rows"]}
    assert by_preset["qlora"]["gib"]["Llama-3.1-8B"] < by_preset["full"]["gib"]["Llama-3.1-8B"]
    assert by_preset["qlora"]["fits"]["Llama-3.1-8B"] is True and by_preset["full"]["fits"]["Llama-3.1-8B"] is False


def test_compare_table_has_models_as_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(plan_cli, ["plan", "Llama-3.2-1B", "Qwen2.5-0.5B", "--compare"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "Llama-3.2-1B" in line)
    assert "Qwen2.5-0.5B" in header and "preset" in header
    assert all(p.name in out for p in LADDER)


def test_num_processes_plan_is_per_device(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, ["Llama-3.1-8B", "--budget-gb", "24", "--num-processes", "8", "--method", "full"])
    assert data["num_processes"] == 8 and data["sharding"] == "fsdp" and data["fits"] is True


def test_no_cuda_prints_the_cpu_note(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, ["SmolLM2-135M-Instruct"])
    assert data["device"] == "cpu" and data["budget_gib"] is None
    assert "no CUDA device: CPU plan, memory estimate shown for reference" in data["reasons"]


def test_plan_path_imports_no_heavy_library() -> None:
    code = (
        "import argparse, sys\n"
        "from grpo_lite.cli import plan\n"
        "p = argparse.ArgumentParser(); s = p.add_subparsers(dest='c'); plan.add_parser(s)\n"
        "plan.run(p.parse_args(['plan', 'Llama-3.1-8B-Instruct', '--budget-gb', '16', '--json']))\n"
        "heavy = [m for m in ('torch', 'trl', 'peft', 'bitsandbytes', 'datasets', 'transformers') "
        "if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert "HEAVY []" in out.stderr


def test_presets_lists_the_ladder(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(presets_cli, ["presets"]) == 0
    out = capsys.readouterr().out
    positions = [out.index(p.name + " ") for p in LADDER]
    assert positions == sorted(positions)


def test_presets_fit_80_columns_with_every_value_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert _run(presets_cli, ["presets"]) == 0
    out = capsys.readouterr().out
    assert "\u2026" not in out and max(len(line.rstrip()) for line in out.splitlines()) <= 80
    for p in LADDER:  # the learning rate whole, on the preset's own row
        row = next(line for line in out.splitlines() if line.split() and line.split()[0] == p.name)
        assert row.split()[-1] == f"{p.learning_rate:g}", row


def test_presets_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(presets_cli, ["presets", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in data] == [p.name for p in LADDER]


def test_cpu_budget_plans_the_process_in_ram(capsys: pytest.CaptureFixture[str]) -> None:
    data = _json(capsys, ["SmolLM2-135M-Instruct", "--device", "cpu", "--budget-gb", "4"])
    assert data["device"] == "cpu" and data["fits"] is True and data["budget_gib"] == 4.0
    assert "process_baseline" in data["components"]
    assert data["estimate_gib"] + data["required_headroom_gib"] <= 4.0
    with pytest.raises(DoesNotFitError, match="GB of RAM"):
        _run(plan_cli, ["plan", "SmolLM2-135M-Instruct", "--device", "cpu", "--budget-gb", "0.5"])


def test_measure_runs_two_steps_and_compares_each_phase(tiny_model_dir: Path) -> None:
    # A fresh process, as `grpo-lite plan --measure` always runs: peak RSS is the process's lifetime
    # peak, so inside pytest it would carry the peaks of every test before this one.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpo_lite",
            "plan",
            str(tiny_model_dir),
            "--device",
            "cpu",
            "--method",
            "lora",
            "--max-prompt-length",
            "16",
            "--set",
            "num_generations=2",
            "--set",
            "max_completion_length=8",
            "--measure",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    measured = json.loads(out.stdout)["measured"]
    assert measured["lengths"] == [16, 8]
    assert {"generation", "backward_head", "backward_layers", "optimizer_step"} <= set(measured["phases"])
    for phase in measured["phases"].values():
        assert 0.85 <= phase["ratio"] <= 1.15 and phase["components"]["weights"][1] > 0
    # the process's RSS also holds the libraries' pages, which the tensors' plan does not see (docs/memory.md): on
    # this tiny model the process is 97% baseline, so its band is the baseline's spread in bytes, not a ratio
    process = measured["process"]
    assert abs(process["measured"] - process["planned"]) <= 0.25 * 2**30, process


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("lerning_rate=1e-5", "'lerning_rate' (did you mean 'learning_rate'?)"),
        ("learning_rate=-1", "learning_rate=-1 must be > 0"),
        ("temperature=0", "temperature=0 must be > 0"),
    ],
)
def test_plan_write_refuses_what_train_config_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, message: str
) -> None:
    from grpo_lite.cli import main

    out = tmp_path / "r.yaml"
    argv = ["plan", "Llama-3.2-1B-Instruct", "--budget-gb", "16", "--set", setting, "--write", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and list(tmp_path.iterdir()) == []
