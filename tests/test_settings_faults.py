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
