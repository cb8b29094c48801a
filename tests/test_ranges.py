"""One range table, one check: every entry point gives the same words for the same bad value."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from grpo_lite.errors import ConfigError
from grpo_lite.ranges import RANGES, check

PROCESSES = "num_processes=0 must be a positive integer; e.g. num_processes=1"


def _plan(n: int) -> None:
    from grpo_lite.planning.choose import plan

    plan("Llama-3.2-1B", 16, num_processes=n)


def _estimate(n: int) -> None:
    from grpo_lite.memory.estimate import estimate

    estimate("Llama-3.2-1B", num_processes=n)


def _accelerate(n: int) -> None:
    from grpo_lite.scale.distributed import accelerate_config

    accelerate_config("zero3", n)


def _launch(n: int) -> None:
    from grpo_lite.scale.distributed import launch_command

    launch_command(["train", "m"], n, "zero3", cuda=True, python="python")


@pytest.mark.parametrize("entry", [_plan, _estimate, _accelerate, _launch], ids=lambda f: f.__name__.strip("_"))
def test_num_processes_says_the_same_everywhere(entry) -> None:
    with pytest.raises(ConfigError) as caught:
        entry(0)
    assert str(caught.value) == PROCESSES


def test_a_recipe_file_says_it_as_the_file_writes_it(tmp_path: Path) -> None:
    from grpo_lite.recipe.recipe import Recipe

    path = tmp_path / "r.yaml"
    path.write_text("model: Llama-3.2-1B\npreset: lora\nnum_processes: 0\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"r\.yaml: num_processes: 0 must be a positive integer; e\.g\. num_processes: 1$"
    ):
        Recipe.read(path)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"beta": -0.1}, "beta=-0.1 must be >= 0; e.g. beta=0.0"),
        ({"lora_dropout": 1.0}, "lora_dropout=1.0 must be in [0, 1); e.g. lora_dropout=0.05"),
        ({"vllm_gpu_memory_utilization": 1.5}, "vllm_gpu_memory_utilization=1.5 must be in (0, 1]"),
        ({"num_generations": 1}, "num_generations=1 must be >= 2 (GRPO compares a group); e.g. num_generations=8"),
        ({"max_completion_length": 0}, "max_completion_length=0 must be a positive integer"),
        ({"device": "tpu"}, "device='tpu' is not valid; choose one of cuda, cpu"),
    ],
)
def test_estimate_checks_each_value_with_the_table(settings: dict, message: str) -> None:
    from grpo_lite.memory.estimate import estimate

    with pytest.raises(ConfigError) as caught:
        estimate("Llama-3.2-1B", **settings)
    assert str(caught.value).startswith(message)


def test_train_and_evaluate_arguments() -> None:
    from grpo_lite.evaluation import evaluate
    from grpo_lite.training.arguments import check_arguments

    with pytest.raises(ConfigError, match=r"^max_steps=0 must be a positive integer; e\.g\. max_steps=1$"):
        check_arguments(0, "step_down", None, {})
    with pytest.raises(ConfigError, match=r"^batch_size=0 must be a positive integer; e\.g\. batch_size=16$"):
        evaluate("no-model-is-loaded", batch_size=0)
    with pytest.raises(ConfigError, match=r"^max_new_tokens=-1 must be a positive integer"):
        evaluate("no-model-is-loaded", max_new_tokens=-1)


@pytest.mark.parametrize("value", [0, -1, True, 1.5, "2"])
def test_a_whole_number_is_an_int_not_a_bool_nor_a_float(value) -> None:
    with pytest.raises(ConfigError, match="must be a positive integer"):
        check("num_processes", value)


def test_not_finite_and_unbounded() -> None:
    with pytest.raises(ConfigError, match=r"^learning_rate=nan must be a finite number; e\.g\. learning_rate=1e-05$"):
        check("learning_rate", float("nan"))
    assert check("seed", -5) == -5  # no range: passes
    assert check("num_processes", None) is None  # not set: passes


def test_every_range_names_a_setting_that_exists() -> None:
    """A typo in the table would check nothing: each name is a GRPOConfig field, a recipe key of grpo-lite's own,
    or an argument of train(), plan(), estimate() or evaluate()."""
    from trl import GRPOConfig

    from grpo_lite.evaluation import evaluate
    from grpo_lite.memory.settings import StepSettings
    from grpo_lite.recipe.values import OwnSettings

    names = {f.name for cls in (GRPOConfig, OwnSettings, StepSettings) for f in dataclasses.fields(cls)}
    names |= set(inspect.signature(evaluate).parameters)
    assert sorted(set(RANGES) - names) == []
