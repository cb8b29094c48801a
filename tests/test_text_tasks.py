"""benchmarks/text_tasks.py's generated tasks, without a model: train and held-out problems are disjoint, every gold
is right, and the options are shuffled with the answer letter naming the right word."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest


@pytest.fixture(scope="module")
def bench() -> Any:
    from conftest import load_benchmark

    return load_benchmark("text_tasks")


def _category(bench: Any, word: str) -> str:
    return next(name for name, words in bench.CATEGORIES.items() if word in words)


@pytest.mark.parametrize("task", ["word-order", "category", "category-word", "capitals"])
def test_train_and_held_out_problems_are_disjoint_whatever_the_seed(bench: Any, task: str) -> None:
    problems = bench.TASKS[task].problems
    held_out = {row["question"] for seed in (0, 1) for row in problems("test", seed)}
    trained = {row["question"] for seed in (0, 1) for row in problems("train", seed)}
    assert not held_out & trained
    assert 0.15 < len(held_out) / (len(held_out) + len(trained)) < 0.35  # 1 in 4 held out


def test_a_category_question_has_four_options_from_four_categories_and_its_letter_names_the_asked_one(
    bench: Any,
) -> None:
    rows = bench.category_problems("test", 0)
    for row in rows:
        name = re.match(r"Which of these is (.+?)\? ", row["question"]).group(1)
        options = dict(re.findall(r"([A-D])\) (\w+)", row["question"]))
        assert list(options) == ["A", "B", "C", "D"]
        assert options[row["answer"]] == row["word"] and _category(bench, row["word"]) == name
        assert len({_category(bench, word) for word in options.values()}) == 4
    letters = Counter(row["answer"] for row in rows)
    assert set(letters) == {"A", "B", "C", "D"} and min(letters.values()) > len(rows) / 8  # shuffled, not one place


def test_a_category_word_question_is_answered_by_the_word_of_the_asked_category(bench: Any) -> None:
    for row in bench.category_problems("train", 3, letters=False)[:300]:
        name, listed = re.match(r"Which of these words is (.+?): (.+)\?$", row["question"]).groups()
        words = listed.split(", ")
        assert row["answer"] in words and _category(bench, row["answer"]) == name
        assert [_category(bench, word) == name for word in words].count(True) == 1


def test_a_word_order_answer_is_the_word_first_in_the_alphabet(bench: Any) -> None:
    for row in bench.word_order_problems("test", 0):
        a, b = re.search(r": (\w+) or (\w+)\?", row["question"]).groups()
        assert row["answer"] == min(a, b) and a[0] != b[0]


def test_every_category_word_is_in_one_category_only(bench: Any) -> None:
    words = [word.casefold() for group in bench.CATEGORIES.values() for word in group]
    assert len(words) == len(set(words))


def test_a_capitals_question_lists_four_words_one_in_capitals_and_that_one_is_the_answer(bench: Any) -> None:
    rows, places = bench.capitals_problems("test", 0), Counter[int]()
    for row in rows:
        words = re.match(r"Which of these words is written in capital letters: (.+)\?$", row["question"]).group(1)
        listed = words.split(", ")
        assert len(set(listed)) == 4 and [w for w in listed if w.isupper()] == [row["answer"]]
        places[listed.index(row["answer"])] += 1
    assert set(places) == {0, 1, 2, 3} and min(places.values()) > len(rows) / 8  # shuffled, not one place
