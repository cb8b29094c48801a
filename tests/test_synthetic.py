"""Tests for grpo_lite.data.synthetic: seeded, original, computed-answer word problems."""

from __future__ import annotations

import json
import os
import random
import re
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_lite.data.prompts import ONE_SHOT_QUESTION, PromptStyle, build_messages, format_solution
from grpo_lite.data.synthetic import (
    LEVELS,
    SHAPES,
    TEMPLATES,
    SyntheticProblem,
    _scene,
    _split_of,
    generate_problems,
    synthetic_problems,
)
from grpo_lite.errors import ConfigError

STEP = re.compile(r"((?:\d+ [-+x/] )+\d+) = (\d+)")
STRICT_FORMAT = re.compile(r"^<reasoning>\n.+?\n</reasoning>\n<answer>\n\d+\n</answer>$", re.DOTALL)


def solution_text(problem: SyntheticProblem) -> str:
    """The problem's worked solution in the XML answer format."""
    return format_solution("\n".join(problem.steps), str(problem.answer))


def check_arithmetic(step: str) -> int:
    """Check every 'a op b ... = c' in a step (left to right, exact division); return how many."""
    found = 0
    for expr, result in STEP.findall(step):
        tokens = expr.split()
        value = int(tokens[0])
        for op, operand in zip(tokens[1::2], tokens[2::2], strict=True):
            if op == "/":
                assert value % int(operand) == 0, f"inexact division in {step!r}"
                value //= int(operand)
            else:
                value = {"+": value + int(operand), "-": value - int(operand), "x": value * int(operand)}[op]
        assert value == int(result), step
        found += 1
    return found


def fields_of(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_registries_are_consistent() -> None:
    names = [t.name for t in TEMPLATES]
    assert len(names) == len(set(names))
    assert {t.shape for t in TEMPLATES} == set(SHAPES)  # every shape is told by some story
    for level in LEVELS:
        assert sum(t.level == level for t in TEMPLATES) >= 10


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_template_fields_exist_and_steps_match_level(template) -> None:
    rng = random.Random(template.name)
    available = set(_scene(rng)) | set(SHAPES[template.shape][1](rng))
    for text in (template.question, *template.steps):
        assert fields_of(text) <= available, text
    assert len(template.steps) == template.level
    assert fields_of(template.steps[-1]) >= {"ans"}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_shapes_give_integer_answers_of_at_least_two(shape: str) -> None:
    rng = random.Random(shape)
    for _ in range(300):
        values = SHAPES[shape][1](rng)
        assert isinstance(values["ans"], int) and values["ans"] >= 2  # "1 books" would read wrong
        assert all(isinstance(v, int) for v in values.values())


def test_generated_steps_are_correct_and_end_at_the_answer() -> None:
    for problem in generate_problems(600, seed=5) + generate_problems(300, seed=5, split="test"):
        assert sum(check_arithmetic(step) for step in problem.steps) == problem.level
        assert problem.steps[-1].split(" = ")[-1].split()[0].rstrip(".") == str(problem.answer)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10**9), n=st.integers(1, 40))
def test_any_seed_gives_n_distinct_valid_problems(seed: int, n: int) -> None:
    problems = generate_problems(n, seed=seed)
    assert len(problems) == n
    assert len({p.question for p in problems}) == n
    assert [p.level for p in problems] == [LEVELS[i % 3] for i in range(n)]
    assert all(p.answer >= 0 and _split_of(p.question) == "train" for p in problems)


def test_same_seed_same_set_other_seed_other_set() -> None:
    first, again, other = (generate_problems(100, seed=s) for s in (7, 7, 8))
    assert first == again
    assert len({p.question for p in first} & {p.question for p in other}) < 5


def test_train_and_test_never_share_a_question() -> None:
    train = {p.question for p in generate_problems(1500, seed=0)}
    test = {p.question for p in generate_problems(1500, seed=0, split="test")}
    assert len(train) == len(test) == 1500
    assert not train & test
    assert all(_split_of(q) == "test" for q in test)


@pytest.mark.parametrize("levels", [(1,), (2,), (3,), (1, 3), (3, 1)])
def test_levels_selection(levels: tuple[int, ...]) -> None:
    problems = generate_problems(12, seed=2, levels=levels)
    assert [p.level for p in problems] == [levels[i % len(levels)] for i in range(12)]
    assert all(len(p.steps) == p.level for p in problems)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 0}, "n must be a positive integer"),
        ({"n": -3}, "n must be a positive integer"),
        ({"n": True}, "n must be a positive integer"),
        ({"levels": ()}, r"levels must be a non-empty selection of \(1, 2, 3\)"),
        ({"levels": (1, 4)}, r"levels must be a non-empty selection of \(1, 2, 3\), got \(1, 4\)"),
        ({"levels": 2}, "levels must be a sequence"),
        ({"split": "dev"}, "unknown split 'dev'; valid splits: 'train', 'test'"),
    ],
)
def test_bad_arguments_raise_config_error(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        generate_problems(**kwargs)


def test_solution_text_is_in_the_strict_format() -> None:
    problem = generate_problems(3, seed=4)[2]
    text = solution_text(problem)
    assert STRICT_FORMAT.match(text)
    assert text.endswith(f"<answer>\n{problem.answer}\n</answer>")
    assert all(step in text for step in problem.steps)


def test_solution_text_of_a_hand_made_problem() -> None:
    problem = SyntheticProblem("q", 7, 2, ("3 + 5 = 8.", "8 - 1 = 7."), "bought_gave")
    assert solution_text(problem) == "<reasoning>\n3 + 5 = 8.\n8 - 1 = 7.\n</reasoning>\n<answer>\n7\n</answer>"


def test_dataset_columns_and_values() -> None:
    ds = synthetic_problems(9, seed=3)
    problems = generate_problems(9, seed=3)
    assert ds.column_names == ["prompt", "question", "answer", "level"]
    assert ds["question"] == [p.question for p in problems]
    assert ds["answer"] == [str(p.answer) for p in problems]
    assert ds["level"] == [1, 2, 3] * 3
    assert ds["prompt"][0] == build_messages(problems[0].question)


def test_dataset_uses_the_style_and_split() -> None:
    ds = synthetic_problems(2, seed=3, style=PromptStyle.plain(), split="test")
    assert [m["role"] for m in ds["prompt"][0]] == ["system", "user"]
    assert ds["question"] == [p.question for p in generate_problems(2, seed=3, split="test")]


def _gsm8k_dir() -> Path:
    env = os.environ.get("GRPO_LITE_GSM8K_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gsm8k"


@pytest.mark.gsm8k
def test_no_generated_question_is_a_gsm8k_question() -> None:
    folder = _gsm8k_dir()
    if not (folder / "train.jsonl").is_file() or not (folder / "test.jsonl").is_file():
        pytest.skip(f"GSM8K files not found in {folder} (set GRPO_LITE_GSM8K_DIR)")
    gsm8k = set()
    for name in ("train.jsonl", "test.jsonl"):
        with open(folder / name, encoding="utf-8") as f:
            gsm8k |= {json.loads(line)["question"].strip() for line in f if line.strip()}
    ours = {p.question for split in ("train", "test") for p in generate_problems(2000, seed=0, split=split)}
    assert not ours & gsm8k
    assert ONE_SHOT_QUESTION not in gsm8k
