"""Any task: a dataset in TRL's shape with the user's rewards trains and is graded; rewards named from TRL or the
user's code; each bad input is one line that says what to change (docs/tasks.md)."""

from __future__ import annotations

import json
import math
import re
import sys
import warnings
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from grpo_lite import ConfigError, DataError, RewardError, evaluate, load_dataset, train
from grpo_lite.cli import main
from grpo_lite.rewards import check_rewards, completion_text, resolve_rewards
from grpo_lite.training.report.health import HealthMonitor
from grpo_lite.training.report.progress import own_reward_means

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "own_task"
WORDS = ["apple", "house", "green", "table"]
SMALL = dict(max_steps=1, num_generations=2, per_device_train_batch_size=2, max_completion_length=8, quiet=True,
             save_strategy="no")  # fmt: skip


def _rows() -> list[dict]:
    return [{"prompt": [{"role": "user", "content": f"Reverse: {w}"}], "target": w[::-1], "code": "007"} for w in WORDS]


@pytest.fixture
def one_thread():
    torch.set_num_threads(1)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """A folder holding the user's reward modules, as the working folder (restored afterwards)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))

    def write(name: str, code: str) -> None:
        (tmp_path / f"{name}.py").write_text(code, encoding="utf-8")
        sys.modules.pop(name, None)  # a module of that name imported by an earlier test (the docs' snippets) goes

    return write


# ---- 1. a task is data and rewards ------------------------------------------------------------------------------
def test_a_prompt_column_task_loads_as_written():
    ds = load_dataset(Dataset.from_list(_rows()))
    assert ds.column_names == ["prompt", "target", "code"]  # no question/answer asked for or added
    assert ds[0] == _rows()[0]  # nothing normalized: "007" stays text, the messages stay messages


def test_a_prompt_column_task_trains_with_the_users_reward_and_prompts_as_written(tiny_model_dir, tmp_path, one_thread):
    seen: dict = {}

    def reversed_word(prompts, completions, target, code, **kwargs):
        seen.update(prompts=prompts, target=target, code=code)
        return [float(t in completion_text(c)) for c, t in zip(completions, target)]

    result = train(str(tiny_model_dir), dataset=Dataset.from_list(_rows()), rewards=[reversed_word],
                   output_dir=tmp_path / "run", **SMALL)  # fmt: skip
    assert result.steps == 1 and "rewards/reversed_word/mean" in result.history[0]
    assert seen["prompts"][0] in [r["prompt"] for r in _rows()]  # the messages as written: no system prompt, prefill
    assert set(seen["target"]) <= {w[::-1] for w in WORDS} and set(seen["code"]) == {"007"}
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["prompt_style"]["prefill"] == "" and record["prompt_style"]["system_prompt"] == ""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    templated = [
        tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, return_dict=True) for r in _rows()
    ]
    longest = max(len(t["input_ids"]) for t in templated)
    assert record["measured_prompt_tokens"] == longest == record["plan"]["max_prompt_length"]  # the plan: its prompts


def test_the_question_answer_form_still_builds_prompts_with_the_style():
    ds = load_dataset(Dataset.from_list([{"question": "What is 2 + 3?", "answer": "5"}]))
    assert ds.column_names[:3] == ["prompt", "question", "answer"] and ds[0]["prompt"][0]["role"] == "system"


# ---- 3. rewards named from anywhere -----------------------------------------------------------------------------
def test_trl_reward_names_resolve_and_take_text_completions_and_arguments():
    think, overlong = resolve_rewards(
        ["think_format_reward", "get_soft_overlong_punishment(max_completion_len=10, soft_punish_cache=4)"]
    )
    assert [f.__name__ for f in (think, overlong)] == ["think_format_reward", "soft_overlong_punishment_reward"]
    assert think(prompts=["q", "q"], completions=["<think>a</think> b", "b"]) == [1.0, 0.0]
    assert think(prompts=["q"], completions=["a</think> b"], prefill=["<think>"]) == [1.0]  # judged after the prefill
    assert overlong(prompts=None, completions=["x"] * 3, completion_ids=[[1] * 5, [1] * 8, [1] * 11]) == [
        0.0,
        -0.5,
        -1.0,
    ]


def test_trls_accuracy_reward_reads_the_gold_answer_without_a_solution_column():
    pytest.importorskip("math_verify")
    (accuracy,) = resolve_rewards(["accuracy_reward"])
    assert accuracy(prompts=None, completions=[r"\boxed{\frac{1}{2}}", r"\boxed{3}"], answer=["0.5", "0.5"]) == [
        1.0,
        0.0,
    ]


def test_a_user_reward_by_import_path_trains_from_the_cli(tiny_model_dir, tmp_path, user_module, capsys, one_thread):
    user_module(
        "my_rewards", "def long_enough(completions, **kwargs):\n    return [min(len(c), 8) / 8 for c in completions]\n"
    )
    (tmp_path / "task.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    for name in ("my_rewards:long_enough", "my_rewards.long_enough"):
        out = tmp_path / name.replace(":", "_")
        code = main(["train", str(tiny_model_dir), "--dataset", "task.jsonl", "--reward", name, "--max-steps", "1",
                     "--set", "num_generations=2", "--set", "per_device_train_batch_size=2",
                     "--set", "max_completion_length=8", "--output-dir", str(out)])  # fmt: skip
        assert code == 0, capsys.readouterr().err
        record = json.loads((out / "run.json").read_text())
        assert "rewards/long_enough/mean" in record["history"][0]
    assert "long_enough " in capsys.readouterr().out  # the progress line speaks of the task's own reward


def test_the_own_task_example_trains_its_recipe_on_the_tiny_model(tiny_model_dir, tmp_path, monkeypatch, one_thread):
    monkeypatch.chdir(EXAMPLE)
    monkeypatch.setattr(sys, "path", list(sys.path))
    out = tmp_path / "own"
    assert main(["train", "--config", "recipe.yaml", str(tiny_model_dir), "--max-steps", "1", "--set",
                 "num_generations=2", "--set", "per_device_train_batch_size=2", "--output-dir", str(out)]) == 0  # fmt: skip
    record = json.loads((out / "run.json").read_text())
    assert "rewards/solved/mean" in record["history"][0] and record["recipe"]["dataset"] == "puzzles.jsonl"


# ---- 4. grading any task ----------------------------------------------------------------------------------------
def test_evaluate_a_task_without_a_gold_reports_each_rewards_mean_and_interval(tiny_model_dir, one_thread):
    def says_something(completions, **kwargs):
        return [1.0 if completion_text(c).strip() else 0.0 for c in completions]

    def half(completions, **kwargs):
        return [0.5] * len(completions)

    result = evaluate(str(tiny_model_dir), Dataset.from_list(_rows()), rewards=[says_something, half],
                      max_new_tokens=4, batch_size=2)  # fmt: skip
    assert result.n == 4 and not result.graded and math.isnan(result.accuracy)
    assert result.reward_means["half"] == 0.5 and result.reward_intervals["half"] == (0.5, 0.5)
    low, high = result.reward_intervals["says_something"]
    assert 0.0 <= low <= result.reward_means["says_something"] <= high <= 1.0
    assert result.summary().startswith("says_something ") and result.summary().endswith("(n=4)")


def _some(completions, **kwargs):
    return [None] + [1.0] * (len(completions) - 1)


def _nothing(completions, **kwargs):
    return [None] * len(completions)


@pytest.mark.parametrize(
    ("rewards", "said"),
    [
        (
            [_some, _nothing],
            "_some 1.000 [0.439, 1.000] (1 unscored), _nothing unscored, reward 1.000 (n=4, 1 unscored)",
        ),
        ([_nothing], "_nothing unscored, no reward (n=4, all unscored)"),
    ],
    ids=["some", "none"],
)
def test_evaluate_says_what_its_rewards_scored(rewards, said, tiny_model_dir, one_thread):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "weights do not change": an evaluation changes none
        result = evaluate(str(tiny_model_dir), Dataset.from_list(_rows()), rewards=rewards, max_new_tokens=1)
    assert result.summary() == said and result.n_unscored == (1 if len(rewards) == 2 else 4)


def test_evaluate_refuses_a_reward_past_float32(tiny_model_dir, one_thread):
    def huge(completions, **kwargs):
        return [1e308] * len(completions)

    with pytest.raises(RewardError, match=r"reward function 'huge' returned 1e\+308 at index 0, past float32's range"):
        evaluate(str(tiny_model_dir), "synthetic", limit=2, rewards=[huge], max_new_tokens=1)


def test_eval_cli_scores_a_task_by_its_reward(tiny_model_dir, tmp_path, user_module, capsys, one_thread):
    user_module("my_rewards", "def one(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    (tmp_path / "task.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    code = main(["eval", str(tiny_model_dir), "--dataset", "task.jsonl", "--reward", "my_rewards:one",
                 "--max-new-tokens", "2", "--json"])  # fmt: skip
    assert code == 0
    found = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert found["reward_means"] == {"one": 1.0} and found["n"] == 4 and "accuracy" not in found
    assert found["n_unscored"] == 0 and found["reward_unscored"] == {"one": 0}


def test_eval_cli_json_of_a_task_no_reward_scored_is_json(tiny_model_dir, tmp_path, user_module, capsys, one_thread):
    user_module("my_rewards", "def none(completions, **kwargs):\n    return [None] * len(completions)\n")
    (tmp_path / "task.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    code = main(["eval", str(tiny_model_dir), "--dataset", "task.jsonl", "--reward", "my_rewards:none",
                 "--max-new-tokens", "1", "--json"])  # fmt: skip
    found = json.loads(capsys.readouterr().out.strip().splitlines()[-1], parse_constant=lambda c: pytest.fail(c))
    assert code == 0 and found["mean_reward"] is None and found["n_unscored"] == 4 and found["reward_means"] == {}


def test_the_progress_line_and_the_health_monitor_speak_of_the_tasks_rewards():
    def reversed_word(completions, **kwargs): ...

    logs = {"reward": 0.0, "rewards/reversed_word/mean": 0.0, "frac_reward_zero_std": 1.0}
    assert own_reward_means(logs, [reversed_word]) == {"reversed_word": 0.0}
    found = []
    monitor = HealthMonitor([reversed_word], report=found.append)
    for step in range(1, 40):
        monitor.observe(logs, step)
    spread = [f for f in found if f.kind == "zero_spread"]
    assert spread and "(mean of reversed_word 0)" in spread[0].cause and "correct" not in spread[0].cause
    gsm8k = resolve_rewards(None)  # grpo-lite's own rewards: the line keeps its format and correct shares only
    assert own_reward_means({f"rewards/{f.__name__}/mean": 0.5 for f in gsm8k}, gsm8k) == {}


# ---- bad input: one line each -----------------------------------------------------------------------------------
def test_a_reward_that_raises_names_itself_the_completion_and_the_exception():
    def per_letter(prompts, completions, target, **kwargs):
        return [1.0 / len(t) for t in target]

    checked = check_rewards([per_letter])[0]
    with pytest.raises(RewardError) as error:
        checked(prompts=["Reverse: apple", "Reverse: nothing"], completions=["a", "b"], target=["elppa", ""])
    assert re.fullmatch(  # the line of the reward that raised: the reward is not called again row by row
        r"reward function 'per_letter' raised ZeroDivisionError: float division by zero at test_tasks\.py:\d+ on a "
        r"batch of 2 completions; fix the reward, or return None for a completion it does not apply to",
        str(error.value),
    )


def test_a_reward_that_raises_in_training_is_one_line_from_the_cli(tiny_model_dir, tmp_path, user_module, capsys,
                                                                    one_thread):  # fmt: skip
    user_module("my_rewards", "def broken(completions, target, **kwargs):\n    raise KeyError('score')\n")
    (tmp_path / "task.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    code = main(["train", str(tiny_model_dir), "--dataset", "task.jsonl", "--reward", "my_rewards:broken",
                 "--max-steps", "1", "--set", "num_generations=2", "--set", "per_device_train_batch_size=2",
                 "--set", "max_completion_length=4", "--output-dir", str(tmp_path / "run")])  # fmt: skip
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert code == 2 and len(err) == 1
    assert "reward function 'broken' raised KeyError: 'score' at my_rewards.py:2 on a batch of 2 completions" in err[0]


@pytest.mark.parametrize(
    ("files", "name", "message"),
    [
        (
            {},
            "my_rewardz:solved",
            r"reward 'my_rewardz:solved': no module 'my_rewardz' \(tried grpo-lite's reward "
            r"names, TRL's, and the import path 'my_rewardz'\); check the spelling",
        ),
        (
            {"my_rewards": "def solved(completions, **kw): ...\n"},
            "my_rewards:solvd",
            r"reward 'my_rewards:solvd': module 'my_rewards' has no 'solvd'; check the function's name",
        ),
        (
            {"my_rewards": "raise RuntimeError('no GPU here')\n"},
            "my_rewards:solved",
            r"reward 'my_rewards:solved': importing 'my_rewards' raised RuntimeError: no GPU here; fix the module",
        ),
        ({"my_rewards": "solved = 3\n"}, "my_rewards.solved", r"my_rewards\.solved is a int, not a function"),
        (
            {},
            "corectness",
            r"unknown reward 'corectness'; tried grpo-lite's names \(correctness, .*TRL's "
            r"\(accuracy_reward, .*and an import path \(package\.module:function",
        ),
        ({}, "think_format_reward(strict=True)", r"reward 'think_format_reward' takes no arguments"),
        ({}, "get_soft_overlong_punishment(1024)", r"cannot read its arguments \(only key=value arguments\)"),
    ],
)
def test_a_reward_name_that_does_not_resolve_is_one_line(files, name, message, user_module):
    for module, code in files.items():
        user_module(module, code)
    with pytest.raises(ConfigError, match=message):
        resolve_rewards([name])


def test_a_reward_module_that_prints_on_import_is_said_once_off_stdout(user_module, capsys, tmp_path):
    user_module(
        "chatty", "print('loading rewards...')\ndef solved(completions, **kw):\n    return [0.0] * len(completions)\n"
    )
    with pytest.warns(
        UserWarning,
        match=r"importing 'chatty' for reward 'chatty:solved' printed 1 line\(s\) "
        r"\(first: 'loading rewards\.\.\.'\); a reward module should print nothing",
    ):
        assert resolve_rewards(["chatty:solved"])[0].__name__ == "solved"
    assert capsys.readouterr().out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chatty.py"]  # nothing written beside it (no __pycache__)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [{"problem": "Reverse: apple", "target": "elppa"}],
            r"no 'question' column \(columns: problem, target\); .*or give a 'prompt' column and rewards that read",
        ),
        ([{"prompt": "", "target": "elppa"}], r"dataset row 1: 'prompt' must be text or a list of"),
    ],
)
def test_a_dataset_without_a_usable_prompt_or_question_is_one_line(rows, message):
    with pytest.raises(DataError, match=message):
        load_dataset(Dataset.from_list(rows))


def test_evaluating_a_task_without_a_gold_needs_its_rewards(tiny_model_dir):
    with pytest.raises(
        ConfigError, match=r"the dataset is a task with a 'prompt' column, scored by its own rewards: pass them"
    ):
        evaluate(str(tiny_model_dir), Dataset.from_list(_rows()), max_new_tokens=2)


def test_training_a_task_without_a_gold_on_the_correctness_reward_is_refused_before_the_model_loads(
    tiny_model_dir, tmp_path
):
    with pytest.raises(ConfigError, match=r"the dataset has no gold answer .*correctness_reward compares with one"):
        train(str(tiny_model_dir), dataset=Dataset.from_list(_rows()), output_dir=tmp_path / "run", **SMALL)


def test_a_recipes_rewards_take_trl_names_with_arguments_and_import_paths(user_module):
    from grpo_lite import Recipe

    user_module("puzzle_rewards", "def solved(completions, **kwargs):\n    return [0.0] * len(completions)\n")
    recipe = Recipe.from_yaml(
        "model: m\npreset: lora\nrewards:\n  - puzzle_rewards:solved\n  - think_format_reward\n"
        '  - "get_soft_overlong_punishment(max_completion_len=8, soft_punish_cache=4)"\n'
    )
    names = [f.__name__ for f in resolve_rewards(recipe.rewards)]
    assert names == ["solved", "think_format_reward", "soft_overlong_punishment_reward"]


# ---- data as given: TRL's shape with an answer column, and the XML format's stop string only where it is in use --
@pytest.mark.parametrize("conversational", [True, False], ids=["messages", "text"])
def test_a_prompt_column_with_an_answer_trains_as_trl_writes_it(tiny_model_dir, tmp_path, capsys, one_thread,
                                                                 conversational):  # fmt: skip
    rows = [
        {"prompt": [{"role": "user", "content": f"What is {i} + {i}?"}] if conversational else f"What is {i} + {i}?",
         "answer": f"{2 * i:,}"}
        for i in (1, 2, 600, 700)
    ]  # fmt: skip
    seen: dict = {}

    def said_the_answer(prompts, completions, answer, **kwargs):  # as TRL's docs write a reward
        seen.update(prompts=prompts, answer=answer)
        text = [c[0]["content"] for c in completions] if conversational else completions
        return [float(a in t) for t, a in zip(text, answer)]

    result = train(str(tiny_model_dir), dataset=Dataset.from_list(rows), rewards=[said_the_answer],
                   output_dir=tmp_path / "run", **{**SMALL, "quiet": False})  # fmt: skip
    assert result.steps == 1
    assert all(p in [r["prompt"] for r in rows] for p in seen["prompts"])  # as written: no style, no prefill
    assert set(seen["answer"]) <= {r["answer"] for r in rows}  # "1,200" as written, not read as a number
    assert json.loads((tmp_path / "run" / "run.json").read_text())["stop_strings"] == []
    assert "sampling stops at" not in capsys.readouterr().out


def test_the_question_answer_shape_stops_at_the_xml_end_and_says_so_once(tiny_model_dir, tmp_path, capsys, one_thread):
    rows = Dataset.from_list([{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(4)])
    train(str(tiny_model_dir), dataset=rows, rewards=["correctness"], output_dir=tmp_path / "run",
          **{**SMALL, "quiet": False})  # fmt: skip
    assert json.loads((tmp_path / "run" / "run.json").read_text())["stop_strings"] == ["</answer>"]
    assert capsys.readouterr().out.count("sampling stops at '</answer>'") == 1
