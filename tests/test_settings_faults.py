"""Settings flow one way: each fault of a recipe, a flag or an argument is one error line before anything loads,
and an argument written wins over the recipe by the same rule in Python and on the command line."""

from __future__ import annotations

import pytest

from grpo_lite import ConfigError, train
from grpo_lite.cli import main
from grpo_lite.recipe.recipe import Recipe

BASE = "model: some-model\npreset: lora\ndevice: cpu\n"


class Resolved(Exception):
    """Raised where train() has its recipe, before anything loads."""


@pytest.fixture
def resolved_recipe(monkeypatch):
    """train() stops once it has the recipe it would run, and hands it over."""
    from grpo_lite.training import trainer

    def stop(recipe):
        raise Resolved(recipe)

    monkeypatch.setattr(trainer, "_check_recipe_launch", stop)

    def run(**kwargs):
        with pytest.raises(Resolved) as caught:
            train(**kwargs)
        return caught.value.args[0]

    return run


def _cli_error(argv, capsys) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_an_argument_written_at_its_default_wins_over_the_recipe(tmp_path, resolved_recipe):
    path = tmp_path / "r.yaml"
    path.write_text(BASE + "seed: 7\nshared_prefix: false\n")
    recipe = resolved_recipe(config=path, shared_prefix=True, seed=0)
    assert (recipe.seed, recipe.shared_prefix) == (0, True)
    left_out = resolved_recipe(config=path)
    assert (left_out.seed, left_out.shared_prefix) == (7, False)
    as_object = resolved_recipe(config=Recipe.read(path), seed=0, learning_rate=2e-6)
    assert (as_object.seed, as_object.trl["learning_rate"]) == (0, 2e-6)


@pytest.mark.parametrize(("text", "fragment"), [
    ("max_steps: [unclosed\n", "line 4 (max_steps)"),
    ("presets: lora\n", "'presets' (did you mean 'preset'?)"),
    ("dataset: !!python/object/apply:os.system ['touch pwned']\n", "line 4 (dataset)"),
])
def test_a_bad_recipe_file_is_one_line_from_the_cli(text, fragment, tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_text(BASE + text)
    error = _cli_error(["train", "--config", str(path), "--output-dir", str(tmp_path / "run")], capsys)
    assert str(path) in error and fragment in error, error
    assert not (tmp_path / "run").exists() and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(("text", "fragment"), [
    ("stop_strings: </answer>\n", "stop_strings: </answer>: stop_strings takes a list of text; e.g. "
                                  "stop_strings=['</answer>']"),
    ("seed: null\n", "seed: null: seed takes a whole number; e.g. seed=42"),
    ("rewards: 5\n", "rewards must be a list of reward names"),
    ("budget_gb: lots\n", "budget_gb: lots: budget_gb takes a number or None"),
    ("trl:\n  learning_rat: 1.0e-5\n", "did you mean 'learning_rate'?"),
    ("trl:\n  num_generations: 2.5\n", "trl.num_generations: 2.5: num_generations takes a whole number"),
    ("dtype: bf16\n", "dtype: bf16 is not valid; choose one of bfloat16, float16, float32"),
    ("lora:\n  r: eight\n", "lora.r: eight: lora_r takes a whole number"),
])
def test_a_wrong_value_in_a_recipe_names_the_file_and_key_before_any_folder_is_made(text, fragment, tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_text(BASE.replace("model: some-model\n", "") + "model: some-model\n" + text)
    error = _cli_error(["train", "--config", str(path), "--output-dir", str(tmp_path / "run")], capsys)
    assert f"{path}: " in error and fragment in error, error
    assert not (tmp_path / "run").exists()


def test_model_of_the_wrong_type_is_named(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model: 5\npreset: lora\n")
    with pytest.raises(ConfigError, match=r"r\.yaml: model: 5: model takes text"):
        Recipe.read(path)


def test_a_byte_that_is_not_utf8_names_the_line_and_key(tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_bytes(BASE.encode() + "seed: 3  # caf\xe9\n".encode("latin-1"))
    error = _cli_error(["train", "--config", str(path), "--output-dir", str(tmp_path / "run")], capsys)
    assert f"{path}, line 4 (seed): byte 0xe9 is not UTF-8" in error, error


def test_numbers_pyyaml_reads_as_text_are_numbers(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(BASE + "budget_gb: 16\ntrl:\n  learning_rate: 1e-5\n  beta: 4e-2\n")
    recipe = Recipe.read(path)
    assert recipe.trl["learning_rate"] == 1e-5 and recipe.trl["beta"] == 0.04 and recipe.budget_gb == 16
    assert isinstance(recipe.trl["learning_rate"], float)


def test_a_wrong_argument_from_python_is_named_as_written(tmp_path, resolved_recipe):
    path = tmp_path / "r.yaml"
    path.write_text(BASE)
    with pytest.raises(ConfigError, match=r"^seed=None: seed takes a whole number"):
        resolved_recipe(config=path, seed=None)
    with pytest.raises(ConfigError, match=r"stop_strings='</answer>': stop_strings takes a list of text"):
        resolved_recipe(config=path, stop_strings="</answer>")
    assert resolved_recipe(config=path, learning_rate="1e-5").trl["learning_rate"] == 1e-5
