"""``problem_choice``, removed in 0.6.0 (docs/vs_trl.md measured no win): passing it is one error naming the
release and the measurement, wherever it enters; a recipe written by 0.5 with ``problem_choice: 'off'`` still loads.

| where it enters | what happens |
| --- | --- |
| ``train(problem_choice=...)``, ``plan()``'s and ``--set``'s overrides, ``train(config=..., problem_choice=...)`` | the error, before anything loads |
| ``grpo-lite train --problem-choice`` | the error as one line, exit code 2 |
| a recipe's ``problem_choice: 'off'`` (0.5 wrote it) or a bare ``off`` | loaded without it, with a note |
| a recipe's ``problem_choice: learnable`` | the error, naming the file |
"""

from __future__ import annotations

import pytest

from grpo_lite import ConfigError, train
from grpo_lite.recipe.recipe import Recipe

REMOVED = (
    r"problem_choice='learnable': problem_choice was removed in grpo-lite 0\.6\.0: it measured no win \(docs/vs_trl\.md"
)


def test_train_refuses_it_before_anything_loads(tmp_path):
    with pytest.raises(ConfigError, match=REMOVED):
        train("no-such-model", output_dir=tmp_path / "run", problem_choice="learnable")
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="problem_choice='off': problem_choice was removed in grpo-lite 0.6.0"):
        train("no-such-model", output_dir=tmp_path / "run", problem_choice="off")  # off too: the argument is gone


def test_train_with_a_recipe_refuses_it(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("model: m\npreset: lora\n")
    with pytest.raises(ConfigError, match=REMOVED):
        train(config=recipe, output_dir=tmp_path / "run", problem_choice="learnable")


def test_the_command_line_says_it_in_one_line(tmp_path, capsys):
    from grpo_lite.cli import main

    assert main(["train", "no-such-model", "--problem-choice", "learnable", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--problem-choice: problem_choice='learnable': problem_choice was removed in grpo-lite 0.6.0" in err
    assert "docs/vs_trl.md" in err and "Traceback" not in err
    assert main(["train", "no-such-model", "--set", "problem_choice=learnable", "--output-dir", str(tmp_path)]) == 2
    assert "problem_choice was removed in grpo-lite 0.6.0" in capsys.readouterr().err


def test_the_help_no_longer_offers_it(capsys):
    from grpo_lite.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "problem" not in capsys.readouterr().out


@pytest.mark.parametrize("written", ["'off'", "off"])  # 0.5 wrote 'off'; YAML reads a bare off as False
def test_a_recipe_of_0_5_with_the_choice_off_loads_with_a_note(written):
    text = f"model: m\npreset: lora\nseed: 3\nproblem_choice: {written}\n"
    with pytest.warns(UserWarning, match="old.yaml: problem_choice: off is read and dropped: .* removed in grpo-lite"):
        recipe = Recipe.from_yaml(text, source="old.yaml")
    assert recipe == Recipe("m", "lora", seed=3)
    assert "problem_choice" not in recipe.to_yaml()


def test_a_recipe_with_the_choice_on_is_the_error_naming_the_file():
    with pytest.raises(ConfigError, match="old.yaml: " + REMOVED):
        Recipe.from_yaml("model: m\npreset: lora\nproblem_choice: learnable\n", source="old.yaml")
