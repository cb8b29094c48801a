"""benchmarks/vs_trl.py's arms build what they claim, on the tiny model, without training.

- trl-defaults is GRPOConfig at its defaults except the deviations the benchmark lists (and needs);
- trl-lite-hp hands plain TRL the GRPOConfig, LoRA and load dtype that train() builds for the same run;
- every arm gets the same problems, the same rendered prompt and the same reward functions;
- the time limit stops before a step that would end past the budget; the Wilson interval;
- the runs go in waves (a seed's pair side by side, the "before" once), no more threads than cores; the presets.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> Any:
    from conftest import load_benchmark

    return load_benchmark("vs_trl")


class _Captured(Exception):
    """Raised in place of grpo-lite's trainer: train() got as far as building it."""


@pytest.fixture(scope="module")
def lite_build(bench: Any, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What train() hands its trainer for the grpo-lite arm (the trainer itself is never built)."""
    import grpo_lite.training.build as build

    seen: dict[str, Any] = {}

    def capture(source, recipe, settings, dataset, tokenizer, reward_funcs, callbacks, **options):
        seen.update(recipe=recipe, settings=settings, dataset=dataset, reward_funcs=reward_funcs)
        raise _Captured

    original, build.build_trainer = build.build_trainer, capture
    try:
        with pytest.raises(_Captured):
            bench.lite_train(
                tiny_model_dir,
                bench.problems("train", 6, seed=3),
                3,
                tmp_path_factory.mktemp("lite") / "run",
                max_steps=4,
            )
    finally:
        build.build_trainer = original
    return seen


@pytest.fixture(scope="module")
def trl_arms(bench: Any, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    rows = bench.problems("train", 6, seed=3)
    return {
        arm: bench.trl_trainer(arm, tiny_model_dir, rows, 3, tmp_path_factory.mktemp(arm), max_steps=4)
        for arm in ("trl-defaults", "trl-lite-hp")
    }


def test_trl_defaults_arm_is_grpoconfig_defaults_except_the_listed_deviations(bench: Any, tmp_path: Path) -> None:
    from trl import GRPOConfig

    with pytest.raises(ValueError, match="use_cpu"):  # the deviation it lists as necessary on a CPU machine
        GRPOConfig(output_dir=str(tmp_path))
    arm = bench.trl_defaults_config(tmp_path, seed=3).to_dict()
    reference = GRPOConfig(output_dir=str(tmp_path), use_cpu=True).to_dict()  # the defaults, runnable here
    assert {k for k in arm if arm[k] != reference.get(k)} == {"seed"}
    assert set(bench.TRL_DEFAULT_DEVIATIONS) == {"use_cpu", "seed"}
    assert arm["seed"] == 3 and reference["seed"] == 42
    # what TRL's defaults mean for this run: full fine-tuning at 1e-6, temperature 1, 512 tokens, bf16 autocast
    assert (arm["learning_rate"], arm["temperature"], arm["max_completion_length"], arm["bf16"]) == (
        1e-6,
        1.0,
        512,
        True,
    )


def test_trl_defaults_arm_trains_every_weight(trl_arms: dict[str, Any]) -> None:
    trainer = trl_arms["trl-defaults"]
    assert not hasattr(trainer.model, "peft_config")
    assert all(p.requires_grad for p in trainer.model.parameters())


def test_trl_lite_hp_arm_gets_the_settings_train_builds(trl_arms: dict[str, Any], lite_build: dict[str, Any]) -> None:
    from grpo_lite.recipe.recipe import make_grpo_config

    mine = trl_arms["trl-lite-hp"].args.to_dict()
    lite = make_grpo_config(lite_build["settings"]).to_dict()
    differ = {k for k in mine if mine[k] != lite.get(k)}
    assert differ == {"output_dir"}, {k: (mine[k], lite.get(k)) for k in differ}
    # the demo's settings reached TRL (not TRL's defaults)
    assert (mine["learning_rate"], mine["temperature"], mine["max_completion_length"], mine["num_generations"]) == (
        2e-4,
        0.7,
        64,
        8,
    )
    lora = trl_arms["trl-lite-hp"].model.peft_config["default"]
    assert lora.r == lite_build["recipe"].lora["r"] == 16 and lora.lora_alpha == lite_build["recipe"].lora["lora_alpha"]
    assert sorted(lora.target_modules) == sorted(lite_build["recipe"].lora["target_modules"])
    assert str(next(trl_arms["trl-lite-hp"].model.parameters()).dtype) == f"torch.{lite_build['recipe'].dtype}"


def test_the_arms_share_problems_prompt_and_rewards(trl_arms: dict[str, Any], lite_build: dict[str, Any]) -> None:
    prompts = list(lite_build["dataset"]["prompt"])
    assert len(prompts) == 6 and all(p.endswith("<reasoning>\n") for p in prompts)  # rendered, with the prefill
    for trainer in trl_arms.values():
        assert list(trainer.train_dataset["prompt"]) == prompts
        assert list(trainer.train_dataset["answer"]) == list(lite_build["dataset"]["answer"])
        assert trainer.reward_func_names == [f.__name__ for f in lite_build["reward_funcs"]]
    assert len(lite_build["reward_funcs"]) == 5


def test_time_limit_starts_no_step_that_would_end_past_the_budget(bench: Any) -> None:
    from types import SimpleNamespace

    now = [0.0]
    limit = bench.TimeLimit(10.0, clock=lambda: now[0], cpu_clock=lambda: 2 * now[0])
    control = SimpleNamespace(should_training_stop=False)
    limit.on_train_begin(None, None, control)
    now[0] = 3.0
    limit.on_step_end(None, None, control)
    assert not control.should_training_stop  # 3 s done, one more at 3 s a step ends at 6
    now[0] = 6.0
    limit.on_step_end(None, None, control)
    assert not control.should_training_stop  # ends at 9
    now[0] = 9.5
    limit.on_step_end(None, None, control)
    assert control.should_training_stop  # would end at 12.75 (the steps after the first: 3 and 3.5 s)
    limit.on_train_end(None, None, control)
    assert (limit.steps, limit.wall, limit.cpu) == (3, 9.5, 19.0)
    assert limit.step_cpu == [6.0, 6.0, 7.0]  # each step's CPU seconds
    with pytest.raises(ValueError, match="budget_s must be > 0"):
        bench.TimeLimit(0)
    with pytest.raises(ValueError, match="budget_clock must be one of wall, cpu"):
        bench.TimeLimit(10.0, "cycles")


def test_time_limit_predicts_the_next_step_by_the_steps_after_the_first(bench: Any) -> None:
    from types import SimpleNamespace

    now = [0.0]
    limit = bench.TimeLimit(90.0, clock=lambda: now[0], cpu_clock=lambda: now[0])
    control = SimpleNamespace(should_training_stop=False)
    limit.on_train_begin(None, None, control)
    for end in (45.0, 65.0):  # a first step of 45 s (one-off costs), then one of 20 s
        now[0] = end
        limit.on_step_end(None, None, control)
    assert not control.should_training_stop  # the next ends at 85 (at the mean pace so far, 32.5 s, past 90)
    now[0] = 85.0
    limit.on_step_end(None, None, control)
    assert control.should_training_stop and limit.steps == 3  # the next would end at 105


def test_time_limit_on_the_cpu_clock_counts_cpu_seconds(bench: Any) -> None:
    from types import SimpleNamespace

    now = [0.0]  # two threads busy: two CPU seconds a second
    limit = bench.TimeLimit(10.0, "cpu", clock=lambda: now[0], cpu_clock=lambda: 2 * now[0])
    control = SimpleNamespace(should_training_stop=False)
    limit.on_train_begin(None, None, control)
    now[0] = 2.0
    limit.on_step_end(None, None, control)
    assert not control.should_training_stop  # 4 CPU s done, the next step ends at 8
    now[0] = 4.0
    limit.on_step_end(None, None, control)
    assert control.should_training_stop  # 8 CPU s done, the next ends at 12 (on the wall clock: 4 s, next at 6)


def test_wilson_interval(bench: Any) -> None:
    assert [round(x, 4) for x in bench.wilson(5, 10)] == [0.2366, 0.7634]
    assert [round(x, 4) for x in bench.wilson(20, 100)] == [0.1334, 0.2888]  # 0.13337, 0.28878
    assert [round(x, 4) for x in bench.wilson(10, 10)] == [0.7225, 1.0]
    with pytest.raises(ValueError, match="0 <= k <= n"):
        bench.wilson(3, 2)


def test_waves_put_each_seeds_pair_side_by_side_and_evaluate_before_once(bench: Any) -> None:
    waves = bench.schedule([0, 1, 2], [0])
    assert waves[0] == [("before", 0), ("trl-defaults", 0)]  # the untrained model, evaluated once, beside trl-defaults
    assert [sorted(w) for w in waves[1:]] == [[("grpo-lite", s), ("trl-lite-hp", s)] for s in (0, 1, 2)]
    assert [w[0][0] for w in waves[1:]] == ["trl-lite-hp", "grpo-lite", "trl-lite-hp"]  # the order rotates per seed
    one = bench.schedule([0, 1, 2], [0], parallel=1)  # one at a time: the same runs, in the same order
    assert all(len(w) == 1 for w in one) and [w[0] for w in one] == [job for w in waves for job in w]
    assert [len(w) for w in bench.schedule([0, 1], [0, 1], parallel=4)] == [3, 4]
    with pytest.raises(ValueError, match="parallel must be >= 1"):
        bench.schedule([0], [0], parallel=0)


def test_run_waves_runs_a_wave_at_once_and_the_next_after_it(bench: Any) -> None:
    import threading
    import time

    together = threading.Barrier(2, timeout=10)  # breaks (and fails the run) unless both jobs of a wave run at once
    log: list[tuple[str, Any]] = []

    def run(job: Any) -> dict[str, Any]:
        log.append(("start", job))
        together.wait()
        time.sleep(0.05 if job[0] == "before" else 0.2)  # wave 0's first job ends first: the next wave must wait
        log.append(("end", job))
        return {"arm": job[0], "seed": job[1]}

    waves = [[("before", 0), ("trl-defaults", 0)], [("trl-lite-hp", 0), ("grpo-lite", 0)]]
    records = bench.run_waves(waves, run)
    assert [(r["arm"], r["seed"]) for r in records] == [job for wave in waves for job in wave]
    starts_of_wave_1 = [i for i, (what, job) in enumerate(log) if what == "start" and job in waves[1]]
    ends_of_wave_0 = [i for i, (what, job) in enumerate(log) if what == "end" and job in waves[0]]
    assert min(starts_of_wave_1) > max(ends_of_wave_0)


def test_check_cores_refuses_more_threads_than_cores(bench: Any) -> None:
    bench.check_cores(2, 1, cores=2)
    with pytest.raises(SystemExit, match="need 4 cores, this machine gives 2: lower --parallel"):
        bench.check_cores(2, 2, cores=2)
    with pytest.raises(SystemExit, match="must be >= 1"):
        bench.check_cores(0, 1, cores=2)


def test_presets_set_the_budget_unless_given(bench: Any) -> None:
    from types import SimpleNamespace

    def resolved(**given: Any) -> Any:
        args = SimpleNamespace(
            **{
                "quick": False,
                "long": False,
                "budget": None,
                "seeds": [0, 1, 2],
                "defaults_seeds": [0],
                "eval_n": 200,
                "train_n": 64,
                **given,
            }
        )
        bench.resolve_preset(args)
        return args

    assert (resolved().budget, resolved().train_n, resolved().eval_n) == (90.0, 64, 200)
    long = resolved(long=True)
    assert (long.budget, long.train_n, long.seeds, long.eval_n) == (600.0, 256, [0, 1, 2], 200)
    assert resolved(long=True, budget=300.0).budget == 300.0
    quick = resolved(quick=True)
    assert (quick.budget, quick.seeds, quick.eval_n, quick.train_n) == (20.0, [0], 16, 8)
    with pytest.raises(SystemExit, match="choose one"):
        resolved(quick=True, long=True)


def test_timings_split_each_process_into_its_parts(bench: Any) -> None:
    before = {
        "arm": "before",
        "seed": 0,
        "setup_s": 2.0,
        "eval_wall_s": 150.0,
        "process_wall_s": 160.0,
        "startup_cpu_s": 7.0,
        "setup_cpu_s": 1.5,
        "eval_cpu_s": 149.0,
        "process_cpu_s": 157.5,
    }
    run = {
        "arm": "grpo-lite",
        "seed": 1,
        "setup_s": 12.0,
        "train_wall_s": 118.0,
        "eval_wall_s": 140.0,
        "process_wall_s": 279.0,
        "train_cpu_s": 117.0,
    }
    reused = {"arm": "trl-lite-hp", "seed": 1, "setup_s": 9.0, "train_wall_s": 121.0, "eval_wall_s": 139.0}
    lines = bench.timings(before, [run, reused]).splitlines()
    assert lines[2] == "| before | 0 | 8 / 7 | 2 / 2 | - / - | 150 / 149 | 160 / 158 |"
    assert (
        lines[3] == "| grpo-lite | 1 | 9 / - | 12 / - | 118 / 117 | 140 / - | 279 / - |"
    )  # start-up: 279 - 12 - 118 - 140
    assert lines[4] == "| trl-lite-hp | 1 | - / - | 9 / - | 121 / - | 139 / - | - / - |"  # reused: no process time


@pytest.mark.slow
def test_the_benchmark_runs_end_to_end_two_at_a_time(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The whole command on the tiny model: 2 waves of 2 processes, the time split, the report, the total last."""
    import json
    import os
    import re
    import subprocess

    out = tmp_path / "runs"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "vs_trl.py"),
            "--model",
            str(tiny_model_dir),
            "--seeds",
            "0",
            "--budget",
            "1",
            "--eval-n",
            "4",
            "--train-n",
            "4",
            "--eval-tokens",
            "8",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("vs_trl: 3 runs of 1 cpu s and the evaluation before training, 2 at a time (2 waves)")
    assert re.fullmatch(r"vs_trl: \d+ s of wall time in all", lines[-1])
    split = [
        line for line in lines if re.match(r"\| (before|trl-defaults|trl-lite-hp|grpo-lite) \| 0 \| \d+ / \d+ \|", line)
    ]
    assert [line.split(" | ")[0] for line in split] == ["| before", "| trl-defaults", "| trl-lite-hp", "| grpo-lite"]
    record = json.loads((out / "vs_trl.json").read_text())
    assert record["before"]["eval"]["n"] == 4 and record["args"]["clock"] == "cpu"
    assert sorted(r["arm"] for r in record["runs"]) == ["grpo-lite", "trl-defaults", "trl-lite-hp"]
    assert all(r["steps"] >= 1 and r["eval"]["n"] == 4 and r["setup_cpu_s"] > 0 for r in record["runs"])
