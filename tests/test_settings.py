"""Every setting declared once (grpo_lite.settings.LiteArguments, and OTHER_RANGES for GRPOConfig's), one range check: every entry point gives the same words
for the same bad value, and a row added to the table reaches train(), the CLI and a recipe with no other edit."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from grpo_lite import settings as settings_module
from grpo_lite.errors import ConfigError
from grpo_lite.settings import PLANNER, Range, Setting, check, settings

PROCESSES = "num_processes=0 must be a positive integer; e.g. num_processes=1"


def _plan(n: int) -> None:
    from grpo_lite.planning.choose import plan

    plan("Llama-3.2-1B", 16, num_processes=n)


def _estimate(n: int) -> None:
    from grpo_lite.memory.estimate import estimate

    estimate("Llama-3.2-1B", num_processes=n)


def _launch(n: int) -> None:
    from grpo_lite.scale.distributed import launch_command

    launch_command(["train", "m"], n, "zero3", cuda=True, python="python")


@pytest.mark.parametrize("entry", [_plan, _estimate, _launch], ids=lambda f: f.__name__.strip("_"))
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

    with pytest.raises(
        ConfigError, match=r"^max_steps=0 must be a whole number from 1 to 100_000_000; e\.g\. max_steps=1$"
    ):
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
    assert check("eval_steps", -5) == -5  # no range: passes
    assert check("num_processes", None) is None  # not set: passes


def test_every_setting_names_one_that_exists() -> None:
    """A typo in the table would check nothing: each name is a GRPOConfig field, a Recipe field, a peft.LoraConfig
    field (by its peft name), or an argument of train(), plan() or evaluate()."""
    from peft import LoraConfig
    from trl import GRPOConfig

    from grpo_lite.api import train
    from grpo_lite.evaluation import evaluate
    from grpo_lite.planning.choose import plan
    from grpo_lite.recipe.recipe import Recipe

    names = {f.name for cls in (GRPOConfig, Recipe) for f in dataclasses.fields(cls)}
    names |= {name for f in (evaluate, plan, train) for name in inspect.signature(f).parameters}  # the public train
    lora = {f.name for f in dataclasses.fields(LoraConfig)}
    unknown = [s.name for s in settings().values() if s.name not in names and (s.peft or s.name) not in lora]
    assert unknown == []
    assert [s.name for s in settings().values() if s.goes == "lora" and (s.peft or s.name) not in lora] == []


def test_train_shows_the_declared_defaults() -> None:
    """train()'s signature is the table's: each of its arguments that is a setting defaults to the row's default
    (None where the planner decides), and its docstring says what each does."""
    from grpo_lite.training.pipeline import train

    parameters = inspect.signature(train).parameters
    declared = {name: setting for name, setting in settings().items() if name in parameters}
    assert len(declared) >= 20
    for name, setting in declared.items():
        expected = None if setting.default is PLANNER else setting.default
        assert parameters[name].default == expected, name
        assert f"    {name}:" in (train.__doc__ or ""), name


def _asked(config=None, model=None, budget_gb=None, **passed):
    """train()'s arguments as train() hands them to the arguments stage, with ``passed`` over its defaults."""
    from grpo_lite.training import arguments, pipeline

    defaults = {
        k: p.default for k, p in inspect.signature(pipeline.train).parameters.items() if k not in ("callbacks",)
    }
    defaults = {k: v for k, v in defaults.items() if k not in ("model", "budget_gb", "config", "after", "overrides")}
    overrides = {k: passed.pop(k) for k in list(passed) if k not in defaults}
    return arguments.request(config, model, budget_gb, **{**defaults, **passed, "overrides": overrides})


def test_a_model_and_its_arguments_make_the_recipe_a_file_would_hold() -> None:
    """train(model, ...) and train(config=...) hand the pipeline the same object, a Recipe: the model's arguments
    land in the fields a recipe file holds (LoRA's in lora, GRPOConfig's in trl), its preset None (the planner's),
    and ``Request`` declares none of a Recipe's fields again."""
    from grpo_lite.recipe.recipe import Recipe
    from grpo_lite.training.arguments import Request

    asked = _asked(model="m", budget_gb=16, seed=3, max_steps=5, lora_r=8, learning_rate=2e-6, dtype="float32")
    written = Recipe("m", None, budget_gb=16, seed=3, max_steps=5, dtype="float32", lora={"r": 8})
    assert asked.recipe == dataclasses.replace(written, trl={"learning_rate": 2e-6})
    assert not asked.written and asked.method is None and len(asked.reward_funcs) == 5
    from_file = _asked(config=asked.recipe, method="lora")
    assert from_file.written and from_file.recipe is asked.recipe and from_file.method == "lora"
    assert asked.recipe.plan_settings() == {
        "learning_rate": 2e-6,
        "shared_prefix": True,
        "dtype": "float32",
        "lora_r": 8,
    }
    recipe_fields = {f.name for f in dataclasses.fields(Recipe)}
    assert {f.name for f in dataclasses.fields(Request)} & recipe_fields == set()


def test_a_recipe_that_leaves_its_preset_to_the_planner_plans_as_the_model_does(tmp_path, monkeypatch) -> None:
    """train(config=Recipe(model, None, ...)) runs the planner's preset, the plan train(model, ...) makes."""
    from grpo_lite.recipe.recipe import Recipe
    from grpo_lite.training import fit, pipeline, prepare
    from grpo_lite.training.prepare import RunInputs

    class Planned(Exception):
        pass

    def planned(**arguments):
        with pytest.raises(Planned) as caught:
            pipeline.train(output_dir=tmp_path / str(len(list(tmp_path.iterdir()))), quiet=True, **arguments)
        return caught.value.args[0]

    monkeypatch.setattr(
        prepare, "load_inputs", lambda spec, asked, funcs, *_: RunInputs(spec, None, [], funcs, asked.style(), 64)
    )
    monkeypatch.setattr(fit, "make_recipe", lambda request, the_plan, *a: (_ for _ in ()).throw(Planned(the_plan)))
    by_model = planned(model="Qwen3-0.6B", budget_gb=4, learning_rate=2e-6)
    by_recipe = planned(config=Recipe("Qwen3-0.6B", None, budget_gb=4, trl={"learning_rate": 2e-6}))
    assert by_recipe.preset.name == by_model.preset.name
    assert dict(by_recipe.settings) == dict(by_model.settings) and by_model.settings["learning_rate"] == 2e-6


def _steps_per_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GRPOConfig field the table does not bound, added as a new range would be: one row, nothing else."""
    assert "steps_per_generation" not in settings()
    row = Setting(
        "steps_per_generation",
        "steps each generation batch serves (fewer generation rounds)",
        range=Range(lambda x: x >= 1, "a positive integer", 1, whole=True),
        flag="--steps-per-generation",
    )
    monkeypatch.setattr(settings_module, "OTHER_RANGES", (*settings_module.OTHER_RANGES, row))


def test_a_setting_added_to_the_table_reaches_the_cli_train_and_a_recipe(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from grpo_lite import plan, train
    from grpo_lite.cli import build_parser
    from grpo_lite.cli import train as cli_train
    from grpo_lite.recipe.recipe import Recipe

    _steps_per_generation(monkeypatch)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    assert "--steps-per-generation STEPS_PER_GENERATION" in capsys.readouterr().out
    # train() and the CLI: the range check's words
    message = "steps_per_generation=0 must be a positive integer; e.g. steps_per_generation=1"
    with pytest.raises(ConfigError, match=message):
        train(str(tiny_model_dir), output_dir=tmp_path / "run", steps_per_generation=0)
    assert not (tmp_path / "run").exists()
    # a recipe: the flag over a file written by plan, as grpo-lite train --config reads it
    recipe = tmp_path / "recipe.yaml"
    Recipe.from_plan(plan(str(tiny_model_dir), device="cpu")).write(recipe)
    args = build_parser().parse_args(["train", "--config", str(recipe), "--steps-per-generation", "4"])
    assert args.steps_per_generation == 4
    written = cli_train._recipe(args, {})
    assert written.trl["steps_per_generation"] == 4
    assert "steps_per_generation: 4" in written.to_yaml()
    assert Recipe.from_yaml(written.to_yaml()).trl["steps_per_generation"] == 4


_PACKAGE = Path(__file__).resolve().parents[1] / "grpo_lite"


@pytest.mark.parametrize(
    ("passed", "message"),
    [  # issue 44's hostile values: each was used for its truthiness or reached numpy, TRL or the disk
        ({"overwrite": "no"}, "overwrite='no' is not valid; choose True or False"),
        ({"resume": 1}, "resume=1 is not valid; choose True or False"),
        ({"seed": -1}, "seed=-1 must be a whole number from 0 to 2**32 - 1 (numpy's seeds); e.g. seed=0"),
        ({"seed": 2**32}, "seed=4294967296 must be a whole number from 0 to 2**32 - 1"),
        ({"oom_window_steps": "x"}, "oom_window_steps='x' must be a whole number >= 0 (0 never steps down)"),
        ({"oom_window_steps": -5}, "oom_window_steps=-5 must be a whole number >= 0"),
        ({"oom_window_steps": float("nan")}, "oom_window_steps=nan must be a finite number"),
        ({"max_steps": 10**30}, f"max_steps={10**30} must be a whole number from 1 to 100_000_000; e.g. max_steps=1"),
        ({"max_completion_length": None}, "max_completion_length=None: max_completion_length must be a number; leave"),
        ({"output_dir": ""}, "output_dir='' names no folder; pass a folder path such as output_dir='runs/my-run'"),
        ({"output_dir": "/"}, "output_dir '/' is the filesystem root, not a folder a run may fill"),
        ({"output_dir": _PACKAGE / "runs"}, f"output_dir '{_PACKAGE / 'runs'}' is inside grpo-lite's package"),
        ({"output_dir": "a" * 300}, "the name aaaaaaaaaaaaaaaaaaaaaaaa... in --output-dir is 300 bytes"),
        ({"model": ["a", "b"]}, "model=['a', 'b']: model takes text"),
    ],
    ids=lambda v: str(v)[:40] if isinstance(v, dict) else "",
)
def test_train_types_every_argument_where_it_enters(passed, message, tmp_path, monkeypatch) -> None:
    """Refused before anything loads or is written, in the table's words (before: a numpy or OS traceback, a run
    in the current folder or the filesystem root, or ``overwrite="no"`` replacing a finished run)."""
    from grpo_lite import GrpoLiteError, train

    monkeypatch.chdir(tmp_path)
    passed = dict(passed)
    model = passed.pop("model", "no-model-is-loaded")
    with pytest.raises(GrpoLiteError) as caught:
        train(model, **{"output_dir": "run", **passed})
    assert str(caught.value).startswith(message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("seed: -1", "r.yaml: seed: -1 must be a whole number from 0 to 2**32 - 1 (numpy's seeds); e.g. seed: 0"),
        ("max_steps: 1.5", "r.yaml: max_steps: 1.5: max_steps takes a whole number or None; e.g. max_steps=1"),
        ("model: [a, b]", "r.yaml: model: [a, b]: model takes text"),
    ],
)
def test_a_recipe_key_is_typed_as_the_argument(tmp_path: Path, line: str, message: str) -> None:
    """The recipe's keys go through the same table (before: max_steps: 1.5 suggested max_steps=-1, itself refused;
    a list as the model was a TypeError)."""
    from grpo_lite.recipe.recipe import Recipe

    path = tmp_path / "r.yaml"
    model = "" if line.startswith("model:") else "model: Llama-3.2-1B\n"  # a key written twice is refused
    path.write_text(f"{model}preset: lora\n{line}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        Recipe.read(path)
    assert str(caught.value).endswith(message)


def test_plan_checks_its_settings_with_trains_ranges() -> None:
    from grpo_lite.planning.choose import plan

    with pytest.raises(ConfigError, match=r"^num_generations=0 must be >= 2 \(GRPO compares a group\)"):
        plan("Llama-3.2-1B", 16, num_generations=0)


# A new own setting, added as a contributor adds one: a field of LiteArguments (here on a subclass put in the
# module's place before anything else reads it, as an edit of grpo_lite/settings.py would be), nothing else.
_ADD_A_FIELD = """
import contextlib, io, json, sys
from dataclasses import dataclass
from typing import Optional

from grpo_lite import settings


@dataclass
class WithLayers(settings.LiteArguments):
    lora_layers: Optional[int] = settings.own(
        settings.PLANNER, "adapt only this layer's linears", range=settings.Range(lambda x: x >= 0, ">= 0", 0,
        whole=True), flag="--lora-layers", goes="lora", peft="layers_to_transform")


settings.LiteArguments = WithLayers
from pathlib import Path

from grpo_lite import ConfigError, plan, train
from grpo_lite.cli import build_parser
from grpo_lite.cli import train as cli_train
from grpo_lite.recipe.recipe import Recipe

model, folder = sys.argv[1], Path(sys.argv[2])
seen = {}
help_text = io.StringIO()
with contextlib.redirect_stdout(help_text), contextlib.suppress(SystemExit):
    build_parser().parse_args(["train", "--help"])
seen["help"] = "--lora-layers LORA_LAYERS" in help_text.getvalue()
recipe = Recipe.from_plan(plan(model, device="cpu", method="lora"))
recipe.write(folder / "recipe.yaml")
args = build_parser().parse_args(["train", "--config", str(folder / "recipe.yaml"), "--lora-layers", "1"])
seen["recipe"] = Recipe.from_yaml(cli_train._recipe(args, {}).to_yaml()).lora["layers_to_transform"]
(folder / "bad.yaml").write_text(recipe.to_yaml().replace("lora:\\n", "lora:\\n  layers_to_transform: -1\\n"))
errors = []
for call in (lambda: Recipe.read(folder / "bad.yaml"), lambda: train(model, lora_layers=-1)):
    try:
        call()
    except ConfigError as exc:
        errors.append(str(exc))
seen["errors"] = errors
run = dict(dataset="synthetic", rewards=["length"], num_generations=4, per_device_train_batch_size=4,
           max_completion_length=8, save_strategy="no", quiet=True)
train(model, method="lora", output_dir=folder / "run", max_steps=1, **{"lora_layers": 1}, **run)
seen["adapter"] = json.loads((folder / "run" / "final" / "adapter_config.json").read_text())["layers_to_transform"]
print(json.dumps(seen))
"""


def test_an_own_setting_added_as_one_field_reaches_the_cli_a_recipe_train_and_the_range_check(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """One field of LiteArguments (a LoRA setting, peft's ``layers_to_transform``) and no other edit: it is a
    ``grpo-lite train`` flag in --help, a recipe key under ``lora:`` (the flag over a recipe file, through YAML and
    back), a train() argument that reaches peft's adapter config, and its range is checked with its name in a recipe
    file and in train() alike."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", _ADD_A_FIELD, str(tiny_model_dir), str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["help"] is True
    assert seen["recipe"] == 1
    assert seen["errors"] == [
        f"{tmp_path / 'bad.yaml'}: lora.layers_to_transform: -1 must be >= 0; e.g. layers_to_transform: 0",
        "lora_layers=-1 must be >= 0; e.g. lora_layers=0",
    ]
    assert seen["adapter"] in (1, [1])
