"""Answers of every kind (grpo_lite.data.answer_kinds): the comparisons on real golds, the kind chosen from the data,
the correctness reward and evaluate() by kind, the built-in ``math`` dataset.

The GSM8K and MATH-500 golds are read from their local folders ($GRPO_LITE_GSM8K_DIR, $GRPO_LITE_MATH_DIR, else
../shared/data/gsm8k and ../shared/data/math500 beside the repository); the tests that need them skip without.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from grpo_lite.data.answer_kinds import (
    answer_is_correct,
    answers_match_kind,
    check_answer_kind,
    choose_answer_kind,
    read_gold,
)
from grpo_lite.data.loaders import GSM8K_DIR_ENV, MATH_DIR_ENV, load_dataset, load_math
from grpo_lite.data.prompts import PromptStyle
from grpo_lite.errors import ConfigError, DataError
from grpo_lite.rewards.functions import correctness_reward, integer_reward

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _folder(env: str, name: str) -> Path:
    return Path(os.environ[env]) if os.environ.get(env) else SHARED / name


def _golds(env: str, name: str) -> list[dict]:
    path = _folder(env, name) / "test.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found (set {env} to a folder holding test.jsonl)")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# (row of GSM8K test.jsonl, the model's <answer> content, equal?): the gold is the number after "####"
GSM8K_CASES = [
    (0, "18", True),
    (0, "$18.00", True),
    (0, "The total is 18 dollars.", True),
    (0, "18.5", False),
    (0, "180", False),
    (0, "-18", False),
    (2, "70,000", True),
    (2, "7000", False),
    (146, "2125", True),
    (146, "$2,125.00", True),
    (146, "2,12", False),
]

# (row of MATH-500 test.jsonl, the model's <answer> content, equal?): the gold is its LaTeX "answer"
MATH_CASES = [
    (0, r"\left( 3, \frac{\pi}{2} \right)", True),
    (0, r"(3, \pi/2)", True),
    (0, r"(3, \frac{\pi}{2})", True),
    (0, r"(\frac{\pi}{2}, 3)", False),
    (0, "3", False),
    (1, "p - q", True),
    (1, "-q + p", True),
    (1, "q - p", False),
    (2, r"\dfrac{14}{3}", True),
    (2, r"\frac{28}{6}", True),
    (2, "14/3", True),
    (2, r"4\frac{2}{3}", True),  # math-verify reads a mixed number
    (2, "4.67", False),
    (4, "Evelyn", True),
    (4, r"\text{evelyn}", True),
    (4, "Bob", False),
    (8, r"3\sqrt{13}", True),
    (8, r"\sqrt{117}", True),
    (8, r"\sqrt{13}", False),
    (15, "6-5i", True),
    (15, "6+5i", False),
    (23, "x = 5", True),
    (23, "5", True),
    (23, "x = 6", False),
    (36, "7, 5, 3", True),
    (36, "3, 5", False),
    (103, "(3, 4]", True),
    (103, "(3, 4)", False),
    (103, "[3, 4]", False),
    (242, "32348", True),
    (242, r"\$32,348", True),
    (242, "32347", False),
    (454, "y=2x+3", True),
    (454, "y = 3x + 2", False),
    (454, "", False),
]

# (gold, the model's <answer> content, equal?)
CHOICE_CASES = [
    ("B", "B", True),
    ("B", "(B)", True),
    ("B", "B)", True),
    ("B", "b", True),
    ("B", "B. 12 apples", True),
    ("(c)", "C", True),
    ("B", "C", False),
    ("B", "(C)", False),
    ("B", "Because", False),
    ("B", "AB", False),
    ("B", "", False),
    # one option, however it is written: accepted
    ("A", "A.", True),
    ("A", "The answer is A", True),
    ("A", "The answer is (A).", True),
    ("A", "the correct answer is a", True),
    ("A", "Answer: A", True),
    ("A", "**A**", True),
    ("A", "(A) 12 apples", True),
    ("A", "A) It is not a prime", True),  # the option's own text may say "not"
    # several options, or one named as wrong: not that option
    ("A", "A and B", False),
    ("C", "C is wrong, the answer is D", False),
    ("C", "C. is wrong, the answer is D", False),
    ("A", "A or B", False),
    ("A", "(A) and (B)", False),
    ("A", "A, B", False),
    ("A", "A/B", False),
    ("A", "A. not B", False),
    ("A", "The answer is A and B", False),
    ("A", "A 12 apples", False),  # the option's text after a mark only: "A 12" reads as the start of a sentence
]
TEXT_CASES = [
    ("elppa", "elppa", True),
    ("elppa", "  ELPPA \n", True),
    ("New York", "new   york", True),
    ("New York", "New\nYork", True),
    ("elppa", "apple", False),
    ("New York", "NewYork", False),
    ("New York", "New York.", False),
    ("cat", "cats", False),
    ("cat", "", False),
    ("caf\u00e9", "cafe\u0301", True),  # NFC and NFD: the same letters
    ("caf\u00e9", "ca\u200bf\u00e9", True),  # a zero-width space
    ("\ufeffParis", "Par\u200dis", True),  # a byte-order mark, a zero-width joiner
    ("Paris", "\uff30aris", True),  # a full-width P (NFKC)
    ("caf\u00e9", "cafe", False),  # an accent is still a letter
    ("Paris", "Pa ris", False),  # a space is not a zero-width character
]


@pytest.mark.parametrize(("row", "answer", "equal"), GSM8K_CASES)
def test_number_kind_on_gsm8k_golds(row: int, answer: str, equal: bool) -> None:
    gold = read_gold(_golds(GSM8K_DIR_ENV, "gsm8k")[row]["answer"], "number")
    assert gold is not None
    assert answers_match_kind(answer, gold, "number") is equal
    assert answer_is_correct(f"<reasoning>\nso\n</reasoning>\n<answer>\n{answer}\n</answer>", gold, "number") is equal


@pytest.mark.parametrize(("row", "answer", "equal"), MATH_CASES)
def test_math_kind_on_math500_golds(row: int, answer: str, equal: bool) -> None:
    gold = read_gold(_golds(MATH_DIR_ENV, "math500")[row]["answer"], "math")
    assert gold is not None
    assert answers_match_kind(answer, gold, "math") is equal


@pytest.mark.parametrize(("a", "b", "equal"), [(r"\dfrac{1}{2}", "0.5", True), (r"\frac{2}{4}", "0.5", True),
                                               (r"\frac{1}{2}", r"\frac{1}{3}", False)])  # fmt: skip
def test_math_kind_the_issue_examples(a: str, b: str, equal: bool) -> None:
    assert answers_match_kind(a, b, "math") is equal
    assert answers_match_kind(b, a, "math") is equal


@pytest.mark.parametrize(
    ("gold", "answer", "equal"),
    [("Paris", "sirap", False), ("Paris", "Spira", False), ("Paris", "P*a*r*i*s", False), ("Paris", " paris ", True),
     ("New York", "new  york", True), (r"\text{Evelyn}", "Evelyn", True), ("p - q", "-q + p", True), ("xy", "yx", False)],
)  # fmt: skip
def test_math_never_equals_two_different_words(gold: str, answer: str, equal: bool) -> None:
    """math-verify reads a bare word as a product of symbols (``sirap`` = ``Paris``): a gold of words compares as text."""
    assert answers_match_kind(answer, gold, "math") is equal


@pytest.mark.parametrize(("gold", "answer", "equal"), CHOICE_CASES)
def test_choice_kind(gold: str, answer: str, equal: bool) -> None:
    assert answers_match_kind(answer, read_gold(gold, "choice") or "", "choice") is equal


@pytest.mark.parametrize(("gold", "answer", "equal"), TEXT_CASES)
def test_text_kind(gold: str, answer: str, equal: bool) -> None:
    assert answers_match_kind(answer, read_gold(gold, "text") or "", "text") is equal


def test_no_answer_block_never_matches() -> None:
    for kind, gold in (("math", "5"), ("choice", "B"), ("text", "B"), ("number", "5")):
        assert not answer_is_correct("the answer is 5, B", gold, kind)


def _in_a_thread(gold: str, answer: str, bound_s: float) -> list[bool]:
    """``answers_match_kind(answer, gold, "math")`` in a worker thread, which must be done within ``bound_s``."""
    found: list[bool] = []
    worker = threading.Thread(target=lambda: found.append(answers_match_kind(answer, gold, "math")), daemon=True)
    worker.start()
    worker.join(bound_s)
    assert not worker.is_alive(), f"scoring {answer[:40]!r} ran past {bound_s} s"
    return found


@pytest.mark.parametrize(
    ("gold", "answer"), [("0.5", r"\frac{1}{2}"), (r"\sqrt{2}", r"\sqrt{2}"), ("0.5", r"\frac{2}{4}")]
)
def test_math_compares_off_the_main_thread(gold: str, answer: str) -> None:
    assert _in_a_thread(gold, answer, 60) == [True]  # 60 s: a first call starts the worker (imports sympy)
    assert _in_a_thread(gold, "3", 60) == [False]


HOSTILE = [r"10^{10^{10}}", r"9^{9^{9^{9}}}", "{" * 1000 + "1" + "}" * 1000, r"\sqrt{" * 2000, r"\boxed{1}" * 100_000]


@pytest.mark.parametrize("answer", HOSTILE, ids=["tower", "tower4", "braces", "sqrt", "boxed"])
def test_a_hostile_math_answer_scores_0_within_its_deadline_on_any_thread(
    answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """math-verify's own limit is signal.alarm, which a worker thread lacks: these froze the process (H2)."""
    from grpo_lite.data import math_worker

    assert _in_a_thread("5", "1", 60) == [False]  # the worker is up: the bound below is the deadline's
    monkeypatch.setattr(math_worker, "MATH_ANSWER_TIMEOUT_S", 1.0)
    with pytest.warns(UserWarning, match=r"within 1 s, scored 0 \(\d+ so far\): ") as caught:
        assert _in_a_thread("5", answer, 10) == [False]
    assert len(caught) == 1 and len(str(caught[0].message)) < 200  # one line, the expression cut
    assert _in_a_thread("0.5", r"\frac{1}{2}", 60) == [True]  # a fresh worker scores the next answer


def test_the_default_deadline_lets_ordinary_answers_through() -> None:
    """Ordinary answers take milliseconds: far inside the default deadline, which still bounds a tower of powers."""
    from grpo_lite.defaults import MATH_ANSWER_TIMEOUT_S

    assert answers_match_kind("1", "1", "math")  # the worker is up
    start = time.perf_counter()
    assert all(answers_match_kind(a, g, "math") for g, a in [("0.5", r"\frac{1}{2}"), (r"\sqrt{2}", "2^{1/2}")] * 10)
    assert (time.perf_counter() - start) / 20 < MATH_ANSWER_TIMEOUT_S / 10


# ----------------------------------------------------------------------------- the kind of a dataset
def test_every_math500_gold_reads_as_math_and_the_kind_is_chosen() -> None:
    rows = _golds(MATH_DIR_ENV, "math500")
    assert choose_answer_kind([(f"row {i}", r["answer"]) for i, r in enumerate(rows)], "MATH-500") == "math"
    ds = load_math("test", source=_folder(MATH_DIR_ENV, "math500"))
    assert ds.num_rows == 500 and set(ds["answer_kind"]) == {"math"}
    assert ds["answer"][2] == rows[2]["answer"] and ds["question"][2] == rows[2]["problem"]


def test_every_gsm8k_gold_is_chosen_as_number() -> None:
    rows = _golds(GSM8K_DIR_ENV, "gsm8k")
    assert choose_answer_kind([(f"row {i}", r["answer"]) for i, r in enumerate(rows)], "GSM8K") == "number"


def test_the_named_math_dataset_reads_the_folder_in_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _folder(MATH_DIR_ENV, "math500")
    if not (folder / "test.jsonl").is_file():
        pytest.skip(f"MATH-500 not found in {folder}")
    monkeypatch.setenv(MATH_DIR_ENV, str(folder))
    ds = load_dataset("math", split="test", limit=5)
    assert ds.num_rows == 5 and ds["answer_kind"] == ["math"] * 5
    with pytest.warns(UserWarning, match="has only a test split"):
        assert load_dataset("math", split="train", limit=2).num_rows == 2


@pytest.mark.parametrize(
    ("golds", "kind", "column"),
    [
        (["18", "2,125", "$7.00", "#### 5"], "number", ["18", "2125", "7", "5"]),
        (["elppa", "dlrow"], "text", ["elppa", "dlrow"]),
        ([r"\frac{3}{4}", "12", "p - q"], "math", [r"\frac{3}{4}", "12", "p - q"]),
    ],
)
def test_the_kind_is_chosen_from_the_golds(golds: list, kind: str, column: list[str]) -> None:
    from datasets import Dataset

    ds = load_dataset(Dataset.from_list([{"question": f"q{i}", "answer": g} for i, g in enumerate(golds)]))
    assert list(ds["answer"]) == column
    assert ds["answer_kind"] == [kind] * len(golds) if kind != "number" else "answer_kind" not in ds.column_names


@pytest.mark.parametrize(
    ("golds", "kind"),
    [
        (["Paris", "a $5 bill", "Rome", "Oslo"], "text"),  # one LaTeX-looking gold among words does not decide
        (["Paris", "x^2"], "math"),  # as many LaTeX golds as words: math
        ([r"\frac{1}{2}", r"\sqrt{3}", "p - q", "7"], "math"),  # MATH-500's shape: LaTeX, expressions, numbers
    ],
)
def test_the_kind_is_read_from_the_golds_as_a_whole(golds: list[str], kind: str) -> None:
    assert choose_answer_kind([(f"row {i}", g) for i, g in enumerate(golds)], "data") == kind


def test_a_word_dataset_with_one_latex_looking_gold_compares_words_as_text() -> None:
    from datasets import Dataset

    rows = [{"question": f"q{i}", "answer": g} for i, g in enumerate(["Paris", "a $5 bill", "Rome", "Oslo"])]
    ds = load_dataset(Dataset.from_list(rows))
    assert ds["answer_kind"] == ["text"] * 4
    assert correctness_reward(None, ["<answer>sirap</answer>", "<answer>paris</answer>"], answer=["Paris"] * 2,
                              answer_kind=ds["answer_kind"][:2]) == [0.0, 2.0]  # fmt: skip


def test_json_float_golds_are_numbers_exactly(tmp_path: Path) -> None:
    """JSON gives 1e+20 and 1e-07 as floats: read as the numbers JSON wrote, without float noise."""
    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(f'{{"question": "q{i}", "answer": {g}}}\n' for i, g in enumerate(["1e+20", "1e-07", "0.1", "18.0"]))
    )
    ds = load_dataset(path)
    assert list(ds["answer"]) == ["100000000000000000000", "0.0000001", "0.1", "18"]
    assert "answer_kind" not in ds.column_names  # numbers
    assert read_gold("1e+20", "number") is None  # a string in scientific notation is still not a number


def test_gsm8k_rows_are_what_they_were() -> None:
    """A number dataset gets no answer_kind column: the rows the rewards and TRL see are unchanged."""
    from grpo_lite.data.synthetic import synthetic_problems

    assert load_dataset("synthetic", limit=3).column_names == synthetic_problems(3).column_names
    assert "answer_kind" not in load_dataset("synthetic", limit=3).column_names


def test_choice_is_never_guessed_but_can_be_named() -> None:
    from datasets import Dataset

    rows = Dataset.from_list([{"question": "q", "answer": "(b)"}, {"question": "r", "answer": "C"}])
    assert load_dataset(rows)["answer_kind"] == ["text", "text"]
    named = load_dataset(rows, answer_kind="choice")
    assert list(named["answer"]) == ["B", "C"] and named["answer_kind"] == ["choice", "choice"]


def test_a_gold_that_cannot_be_read_in_its_kind_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "quiz.jsonl"
    path.write_text('{"question": "q1", "answer": "A"}\n{"question": "q2", "answer": "42"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"quiz\.jsonl, line 2: 'answer' is not one option letter .*: '42'; fix or"):
        load_dataset(path, answer_kind="choice")
    with pytest.warns(UserWarning, match="skipped 1 row"):
        assert load_dataset(path, answer_kind="choice", skip_invalid=True).num_rows == 1


def test_a_math_gold_math_verify_cannot_parse_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"question": "q1", "answer": "\\\\frac{1}{2}"}\n{"question": "q2", "answer": "\\\\frac{"}\n')
    with pytest.raises(DataError, match=r"m\.jsonl, line 2: math-verify cannot parse 'answer' as math: '\\\\frac\{'"):
        load_dataset(path)


@pytest.mark.parametrize(
    ("kinds", "asked", "problem"),
    [
        (["bogus"], None, r"dataset row 1: 'answer_kind' is 'bogus', but a dataset's answers compare one way: one of "
                          r"number, math, choice, text on every row, or drop the column"),
        (["choice", "text"], None, r"dataset row 2: 'answer_kind' is 'text', .* on every row \(here 'choice'\)"),
        (["choice", "choice"], "text", r"dataset row 1: 'answer_kind' is 'choice', .* \(here 'text'\)"),
    ],
)  # fmt: skip
def test_an_answer_kind_column_is_checked_where_the_data_loads(kinds: list, asked: str | None, problem: str) -> None:
    """The column decided the kind row by row: 'bogus' failed at the first step, after the model loaded."""
    from datasets import Dataset

    rows = Dataset.from_list([{"question": f"q{i}", "answer": "B", "answer_kind": k} for i, k in enumerate(kinds)])
    with pytest.raises(DataError, match=problem):
        load_dataset(rows, answer_kind=asked)


def test_an_answer_kind_column_of_one_kind_names_the_kind() -> None:
    """A dataset loaded and saved carries its column: loaded again, it compares the same way ("choice" is never
    guessed from the golds); a number column goes, as number datasets have none."""
    from datasets import Dataset

    saved = load_dataset(Dataset.from_list([{"question": "q", "answer": "(b)"}]), answer_kind="choice")
    again = load_dataset(Dataset.from_list(saved.to_list()))
    assert list(again["answer"]) == ["B"] and again["answer_kind"] == ["choice"]
    numbers = load_dataset(Dataset.from_list([{"question": "q", "answer": "5", "answer_kind": "number"}]))
    assert "answer_kind" not in numbers.column_names and list(numbers["answer"]) == ["5"]


def test_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown answer_kind 'letter'; valid kinds: number, math, choice, text"):
        check_answer_kind("letter")
    with pytest.raises(ConfigError, match="unknown answer_kind 'letter'"):
        load_dataset("synthetic", answer_kind="letter")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="gsm8k's answers are of kind 'number': leave answer_kind unset"):
        load_dataset("gsm8k", answer_kind="text")


# ----------------------------------------------------------------------------- rewards by kind
def test_correctness_reward_reads_the_kind_column() -> None:
    done = ["<answer>\n(B)\n</answer>", "<answer>\nC\n</answer>", "<answer>\n\\dfrac{1}{2}\n</answer>", "x"]
    scores = correctness_reward(
        None, done, answer=["B", "B", "0.5", "0.5"], answer_kind=["choice", "choice", "math", "math"]
    )
    assert scores == [2.0, 0.0, 2.0, 0.0]
    assert correctness_reward(None, ["<answer>elppa</answer>"], answer=["elppa"], answer_kind=["text"]) == [2.0]


def test_integer_reward_gives_nothing_where_answers_are_not_numbers() -> None:
    seven = ["<answer>7</answer>"] * 3
    assert integer_reward(None, seven, answer_kind=["number", "text", "math"]) == [0.5, 0.0, 0.0]
    assert integer_reward(None, seven) == [0.5, 0.5, 0.5]


# ----------------------------------------------------------------------------- the plan from the task's data
@pytest.mark.parametrize(
    ("dataset", "budget_gb", "length"),
    [("math", 80, 1024), ("gsm8k", 80, 512), (None, 80, 512), ("math", 2.2, 512)],  # 2.2 GB: 1024 fits no rung
)
def test_math_plans_its_own_completion_length_first(dataset: str | None, budget_gb: float, length: int) -> None:
    from grpo_lite.training.fit import _plan_for_task

    plan = _plan_for_task(dataset, "Llama-3.2-1B-Instruct", budget_gb=budget_gb, device="cuda", max_prompt_length=300)
    assert plan.settings["max_completion_length"] == length


def test_math_prompts_are_measured_longer_than_gsm8k_style_ones(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan measures the task's own prompts: MATH-500's longest is far longer than the synthetic set's."""
    from rich.console import Console

    from grpo_lite.memory.models import resolve_model
    from grpo_lite.recipe.recipe import Recipe
    from grpo_lite.training.prepare import load_inputs

    folder = _folder(MATH_DIR_ENV, "math500")
    if not (folder / "test.jsonl").is_file():
        pytest.skip(f"MATH-500 not found in {folder}")
    spec = resolve_model(str(tiny_model_dir))

    def measured(dataset: object) -> tuple[int, str | None]:
        inputs = load_inputs(spec, Recipe(str(tiny_model_dir), None, dataset=dataset), [], False, Console(quiet=True))
        return inputs.prompt_tokens, inputs.answer_kind

    monkeypatch.setenv(MATH_DIR_ENV, str(folder))
    with pytest.warns(UserWarning, match="has only a test split"):
        math_tokens, kind = measured("math")
    synthetic_tokens, number = measured("synthetic")
    assert (kind, number) == ("math", "number")
    assert math_tokens > synthetic_tokens + 500  # the longest MATH-500 problem alone is ~900 SmolLM2 tokens


# ----------------------------------------------------------------------------- train and evaluate a text task
@pytest.mark.slow
def test_a_text_task_trains_and_evaluates_on_the_tiny_model(tiny_model_dir: Path, tmp_path: Path) -> None:
    from datasets import Dataset
    from tiny_run import TINY_RUN

    from grpo_lite import evaluate, train

    rows = Dataset.from_list([{"question": f"Reverse the word: {w}", "answer": w[::-1]} for w in ("apple", "stone")])
    settings = {**TINY_RUN, "dataset": rows, "rewards": ["correctness", "length"], "max_steps": 1}
    result = train(str(tiny_model_dir), output_dir=tmp_path / "run", save_strategy="no", **settings)
    assert result.steps == 1
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["answer_kind"] == "text" and record["recipe"]["answer_kind"] is None
    scores = evaluate(result.model, rows, tokenizer=result.tokenizer, max_new_tokens=4)
    assert scores.n == 2 and [s["gold"] for s in scores.samples] == ["elppa", "enots"]


def test_evaluate_decodes_the_tasks_own_length(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MATH's worked answers need more than GSM8K's 256 tokens: evaluate() decodes math's 1024 unless told."""
    from datasets import Dataset

    import grpo_lite.evaluation as evaluation

    folder = _folder(MATH_DIR_ENV, "math500")
    if not (folder / "test.jsonl").is_file():
        pytest.skip(f"MATH-500 not found in {folder}")
    monkeypatch.setenv(MATH_DIR_ENV, str(folder))
    budgets: list[int] = []

    def greedy(model, tokenizer, prompts, max_new_tokens, stops):  # noqa: ANN001, ANN202
        budgets.append(max_new_tokens)
        return ["<answer>\\frac{1}{2}</answer>"] * len(prompts)

    monkeypatch.setattr(evaluation, "_greedy_batch", greedy)
    monkeypatch.setattr(evaluation, "model_context", lambda *_: 4096)  # a model with room for MATH's 1024 (tiny: 1024)
    model, tokenizer = evaluation.load_for_eval(str(tiny_model_dir))
    evaluation.evaluate(model, "math", limit=2, tokenizer=tokenizer)
    evaluation.evaluate(model, "math", limit=2, tokenizer=tokenizer, max_new_tokens=64)
    evaluation.evaluate(model, Dataset.from_list([{"question": "q", "answer": "5"}]), tokenizer=tokenizer)
    assert budgets == [1024, 64, 256]


def test_the_default_system_prompt_asks_for_the_answers_kind() -> None:
    """A text, math or choice task is not told to answer "a number only"; GSM8K's prompt keeps that line."""
    from datasets import Dataset

    rows = {
        "text": [{"question": "Reverse the word: apple", "answer": "elppa"}],
        "math": [{"question": "Half of one?", "answer": "\\frac{1}{2}"}],
        "number": [{"question": "2 + 3?", "answer": "5"}],
    }
    system = {kind: load_dataset(Dataset.from_list(r))[0]["prompt"][0]["content"] for kind, r in rows.items()}
    assert "a number only" not in system["text"] and "the final answer only" in system["text"]
    assert "in LaTeX" in system["math"] and "a number only" in system["number"]
    own = load_dataset(Dataset.from_list(rows["text"]), style=PromptStyle(system_prompt="Say it."))
    assert own[0]["prompt"][0]["content"] == "Say it."  # a system prompt of the user's is left alone


def test_the_math_worker_ends_when_its_caller_dies_mid_answer(tmp_path):
    """A caller killed while the worker runs a tower of powers leaves no process behind: the worker's own alarm
    (4x the deadline) ends it, where before it would compute forever."""
    import subprocess
    import sys

    from grpo_lite.defaults import MATH_ANSWER_TIMEOUT_S

    script = (
        "import os\nfrom grpo_lite.data import math_worker\nmath_worker.judge('2', '2')\n"
        "w = math_worker._state['worker']\nw.process.stdin.write('[\"1\", \"$10^{10^{10}}$\"]\\n')\n"
        "w.process.stdin.flush()\nprint(w.process.pid, flush=True)\nos._exit(0)\n"
    )
    pid = int(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout)
    deadline = time.monotonic() + 4 * MATH_ANSWER_TIMEOUT_S + 30
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.5)
    alive = Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    assert not alive, "the worker outlived its caller"
