"""A reward's name, from Python, the CLI or a recipe, runs no code beyond importing its module (docs/tasks.md,
docs/recipes.md): a call with arguments runs only for TRL's reward factories and the functions a module lists in
``REWARD_FACTORIES``; resolving leaves ``sys.path`` and stdout as they were; each bad name is one line."""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

import pytest

from grpo_lite import ConfigError, Recipe
from grpo_lite.cli import main
from grpo_lite.rewards import resolve_rewards

PLAIN = "def plain(completions, **kwargs):\n    return [0.0] * len(completions)\n"
FACTORY = (
    "def make(bonus=1.0):\n"
    "    def bonus_reward(completions, **kwargs):\n"
    "        return [bonus] * len(completions)\n"
    "    return bonus_reward\n"
)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A folder holding the user's reward modules, as the working folder; the modules forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    tops: set[str] = set()

    def forget() -> None:
        for module in [m for m in sys.modules if m.split(".")[0] in tops]:
            sys.modules.pop(module)

    def write(name: str, code: str) -> Path:
        path = tmp_path / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code, encoding="utf-8")
        tops.add(name.split(".")[0])
        forget()  # a module of that name imported before goes
        return path

    yield write
    forget()


def _names(items: list) -> list[str]:
    return [f.__name__ for f in resolve_rewards(items)]


# ---- H1: a name in data calls nothing but a marked factory ----------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "fix"),
    [
        ("os:system(command='touch PWNED')", "(os:system)"),
        ("os.system(command='touch PWNED')", "(os:system)"),
        ("subprocess:run(args=['touch', 'PWNED'])", "(subprocess:run)"),
        ("shutil:rmtree(path='victim')", "(shutil:rmtree)"),
        ("my_rewards:plain(x=1)", "(my_rewards:plain)"),
        ("my_rewards:plain()", "(my_rewards:plain)"),  # empty parentheses are a call too
        ("pkg.sub.mod:plain(x=1)", "(pkg.sub.mod:plain)"),
    ],
)
def test_a_call_in_a_reward_name_runs_nothing_unless_its_module_marks_the_factory(name, fix, user_module, tmp_path):
    user_module("my_rewards", PLAIN)
    user_module("pkg.sub.mod", PLAIN)
    (tmp_path / "victim").mkdir()
    with pytest.raises(ConfigError, match=r"is not marked as a reward factory, and only a factory is called") as error:
        resolve_rewards([name])
    assert fix in str(error.value) and 'REWARD_FACTORIES = ["' in str(error.value)
    assert not (tmp_path / "PWNED").exists() and (tmp_path / "victim").is_dir()


def test_a_recipes_call_is_refused_by_grpo_lite_train_before_it_runs(user_module, tmp_path, capsys):
    (tmp_path / "evil.yaml").write_text("model: m\npreset: lora\nrewards: [\"os:system(command='touch PWNED')\"]\n")
    assert main(["train", "--config", "evil.yaml"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(err) == 1 and "os.system is not marked as a reward factory" in err[0]
    assert not (tmp_path / "PWNED").exists()


def test_the_fix_the_refusal_gives_works_as_written(user_module):
    path = user_module("my_rewards", FACTORY)
    with pytest.raises(ConfigError) as error:
        resolve_rewards(["my_rewards:make(bonus=2.0)"])
    mark = re.search(r'REWARD_FACTORIES = \["make"\]', str(error.value))
    assert mark is not None
    path.write_text(FACTORY + mark.group(0) + "\n", encoding="utf-8")
    sys.modules.pop("my_rewards")
    (made,) = resolve_rewards(["my_rewards:make(bonus=2.0)"])
    assert made(prompts=None, completions=["a", "b"]) == [2.0, 2.0]


def test_a_marked_factory_is_made_with_the_arguments_written_or_none(user_module):
    user_module("my_rewards", 'REWARD_FACTORIES = ["make"]\n' + FACTORY + PLAIN)
    with_arguments, alone = resolve_rewards(["my_rewards:make(bonus=3)", "my_rewards.plain"])
    assert with_arguments(completions=["a"]) == [3] and alone.__name__ == "plain"  # an unmarked name: looked up only
    (default,) = resolve_rewards(["my_rewards.make"])  # a factory named alone is made as TRL's are: its defaults
    assert default(completions=["a"]) == [1.0]


@pytest.mark.parametrize(
    ("marks", "accepted"),
    [('("make",)', True), ('["make"]', True), ('"make"', False), ('["mak"]', False), ('["make", 1]', False)],
)
def test_only_a_list_of_names_marks_a_factory(marks, accepted, user_module):
    user_module("my_rewards", FACTORY + f"REWARD_FACTORIES = {marks}\n")
    if accepted:
        assert _names(["my_rewards:make(bonus=2.0)"]) == ["bonus_reward"]
    else:
        with pytest.raises(ConfigError, match=r"must be a list of function names|is not marked as a reward factory"):
            resolve_rewards(["my_rewards:make(bonus=2.0)"])


def test_a_factory_that_raises_is_one_line_naming_it(user_module):
    user_module("my_rewards", 'REWARD_FACTORIES = ["make"]\ndef make(**kw):\n    raise SystemExit(3)\n')
    with pytest.raises(ConfigError, match=r"making the reward my_rewards\.make\(\.\.\.\) raised SystemExit: 3; fix"):
        resolve_rewards(["my_rewards:make(bonus=1)"])


@pytest.mark.parametrize(
    "name",
    ["my_rewards:plain(1)", "my_rewards:plain(x=1)(y=2)", "my_rewards:plain(**{'x': 1})", "my_rewards:plain(x=len)"],
)
def test_call_forms_beyond_key_equals_literal_are_refused(name, user_module):
    user_module("my_rewards", 'REWARD_FACTORIES = ["plain"]\n' + PLAIN)
    with pytest.raises(ConfigError, match=r"cannot read its arguments"):
        resolve_rewards([name])


# ---- the forms still accepted -----------------------------------------------------------------------------------
def test_every_form_that_runs_no_code_but_an_import_still_resolves(user_module):
    user_module("my_rewards", PLAIN)
    user_module("a.b.c", PLAIN.replace("plain", "f"))
    assert _names(["correctness", "think_format_reward", "get_soft_overlong_punishment"]) == [
        "correctness_reward",
        "think_format_reward",
        "soft_overlong_punishment_reward",
    ]
    (overlong,) = resolve_rewards(["get_soft_overlong_punishment(max_completion_len=8, soft_punish_cache=4)"])
    assert overlong(prompts=None, completions=["x"], completion_ids=[[1] * 8]) == [-1.0]  # made with the arguments
    assert _names(["my_rewards:plain"]) == _names(["my_rewards.plain"]) == _names([" my_rewards:plain "]) == ["plain"]
    assert _names(["a.b.c:f"]) == _names(["a.b.c.f"]) == ["f"]  # a dotted path of several dots, either form


# ---- what resolving leaves behind ---------------------------------------------------------------------------------
def test_resolving_leaves_sys_path_as_it_was(user_module, tmp_path):
    user_module("my_rewards", PLAIN)
    before = list(sys.path)
    assert str(tmp_path) not in before
    resolve_rewards(["my_rewards:plain"])
    with pytest.raises(ConfigError):
        resolve_rewards(["my_rewardz:plain"])
    assert sys.path == before


def test_output_at_file_descriptor_1_is_kept_off_stdout_and_said_once(user_module, capfd):
    user_module(
        "loud",
        "import os\nos.write(1, b'fd at import\\n')\nREWARD_FACTORIES = ['make']\n"
        + FACTORY.replace("    def bonus", "    os.write(1, b'fd in factory\\n')\n    def bonus"),
    )
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        resolve_rewards(["loud:make(bonus=2.0)"])
    messages = [str(w.message) for w in said]
    assert capfd.readouterr().out == ""
    assert any("importing 'loud' for reward" in m and "(first: 'fd at import')" in m for m in messages)
    assert any("making the reward loud.make(...)" in m and "(first: 'fd in factory')" in m for m in messages)
    os.write(1, b"after\n")  # file descriptor 1 is back
    assert capfd.readouterr().out == "after\n"


def test_an_import_that_exits_is_one_line_and_ctrl_c_stays_ctrl_c(user_module):
    user_module("quitter", "raise SystemExit(0)\n")
    with pytest.raises(ConfigError, match=r"reward 'quitter:f': importing 'quitter' raised SystemExit: 0; fix the mod"):
        resolve_rewards(["quitter:f"])
    user_module("stopped", "raise KeyboardInterrupt\n")
    with pytest.raises(KeyboardInterrupt):
        resolve_rewards(["stopped:f"])


def test_an_import_that_exits_stops_grpo_lite_train_with_one_line(tiny_model_dir, user_module, tmp_path, capsys):
    user_module("quitter", "raise SystemExit(0)\n")
    code = main(["train", str(tiny_model_dir), "--reward", "quitter:f", "--output-dir", str(tmp_path / "run")])
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert code == 2 and err == [
        "error: reward 'quitter:f': importing 'quitter' raised SystemExit: 0; fix the module so that importing it "
        "runs nothing that can fail"
    ]


# ---- names that are not import paths, long names, names YAML split --------------------------------------------------
@pytest.mark.parametrize("name", ["../x:f", "rewards/x.py:f", "x.py:f", ".x:f", "my-rewards:f", r"C:\x\y:f"])
def test_a_files_path_is_told_an_import_path_is_a_dotted_module_name(name, user_module):
    user_module("x", PLAIN.replace("plain", "f"))
    with pytest.raises(ConfigError, match=r"is not an import path: write package\.module:function, dotted names"):
        resolve_rewards([name])
    assert _names(["x:f"]) == ["f"]  # the module, named as a module, resolves


def test_a_long_name_is_cut_in_the_message():
    name = "x" * 1_000_000 + ":f"
    with pytest.raises(ConfigError, match=r"^reward 'x{80}'\.\.\. \(1,000,002 characters\): no module") as error:
        resolve_rewards([name])
    assert len(str(error.value)) < 1000
    with pytest.raises(ConfigError, match=r"^reward 'x{60}:f': no module 'x{60}'"):  # a short one is whole
        resolve_rewards(["x" * 60 + ":f"])


def test_a_name_yaml_split_at_its_comma_says_to_quote_it():
    flow = "model: m\npreset: lora\nrewards: [correctness, get_soft_overlong_punishment(max_completion_len=8, soft_punish_cache=4)]\n"
    recipe = Recipe.from_yaml(flow)
    with pytest.raises(ConfigError, match=r"its parentheses do not close; in a YAML list .* quote a name with argum"):
        resolve_rewards(recipe.rewards)
    with pytest.raises(ConfigError, match=r"reward 'y=2\)': its parentheses do not close"):
        resolve_rewards(["y=2)"])
    quoted = flow.replace("[correctness, get", '[correctness, "get').replace("=4)]", '=4)"]')
    assert _names(Recipe.from_yaml(quoted).rewards) == ["correctness_reward", "soft_overlong_punishment_reward"]
