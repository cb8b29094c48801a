"""Tests for grpo_lite.rewards: each reward, completion shapes, prefill, anti-hacking, the registry."""

from __future__ import annotations

import dataclasses
import pickle
import re
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_lite.errors import ConfigError, DataError
from grpo_lite.rewards import (
    DEFAULT_REWARDS,
    REWARDS,
    CorrectnessReward,
    LengthReward,
    RewardName,
    XmlCountReward,
    completion_text,
    correctness_reward,
    get_reward,
    has_real_reasoning,
    integer_reward,
    length_reward,
    resolve_rewards,
    soft_format_reward,
    strict_format_reward,
    xml_count_reward,
)

GOOD = "<reasoning>\n6 * 3 = 18 apples\n</reasoning>\n<answer>\n18\n</answer>"
PREFILL = "<reasoning>\n"
DOC = Path(__file__).resolve().parents[1] / "docs" / "rewards.md"


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _all_shapes(func: Any, text: str, **kwargs: Any) -> list[float]:
    """The reward of ``text`` given plain, conversational, and split into prefill + completion."""
    cut = len(PREFILL) if text.startswith(PREFILL) else 0
    return [
        func(None, [text], **kwargs)[0],
        func(None, [_chat(text)], **kwargs)[0],
        func(None, [text[cut:]], prefill=[text[:cut]], **kwargs)[0],
        func(None, [_chat(text[cut:])], prefill=[text[:cut]], **kwargs)[0],
    ]


# --- each reward, one case a line; every case checked plain, conversational and with prefill ----


@pytest.mark.parametrize(
    ("text", "gold", "expected"),
    [
        (GOOD, "18", 2.0),
        (GOOD, "18.00", 2.0),
        (GOOD.replace("\n18\n", "\n$18.00\n"), "18", 2.0),
        (GOOD.replace("\n18\n", "\nThe answer is 18.\n"), "18", 2.0),
        (GOOD.replace("\n18\n", "\n2,125\n"), "2125", 2.0),
        (GOOD.replace("\n18\n", "\n180\n"), "18", 0.0),
        (GOOD.replace("\n18\n", "\n1.8\n"), "18", 0.0),
        (GOOD.replace("\n18\n", "\n-18\n"), "18", 0.0),
        ("<reasoning>\nso 18\n</reasoning>", "18", 0.0),  # no <answer>: strict extraction
        ("<reasoning>\nx\n</reasoning>\n<answer>\n18", "18", 2.0),  # cut before </answer>
        (GOOD, "19", 0.0),
        (GOOD.replace("\n18\n", "\n1e400\n"), "400", 0.0),  # an exponent is no answer, nor infinity
        (GOOD.replace("\n18\n", "\n2e3\n"), "3", 0.0),
    ],
)
def test_correctness(text: str, gold: str, expected: float) -> None:
    assert _all_shapes(correctness_reward, text, answer=[gold]) == [expected] * 4


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("18", 0.5),
        ("2,125", 0.5),
        ("$18", 0.5),
        ("-3", 0.5),
        ("18.", 0.5),
        ("18.00", 0.5),
        ("18.5", 0.0),
        ("1/2", 0.0),
        ("1/3", 0.0),  # no decimal form: kept as a fraction, still not an integer
        ("18 apples", 0.0),
        ("", 0.0),
    ],
)
def test_integer(answer: str, expected: float) -> None:
    text = GOOD.replace("\n18\n", f"\n{answer}\n")
    assert _all_shapes(integer_reward, text) == [expected] * 4


def test_integer_needs_an_answer_block() -> None:
    assert integer_reward(None, ["18", "<reasoning>18</reasoning>"]) == [0.0, 0.0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD, 0.5),
        (GOOD + "\n", 0.5),
        (GOOD + "\n\n", 0.0),
        (GOOD + " extra", 0.0),
        ("Sure! " + GOOD, 0.0),
        (GOOD.replace("</reasoning>\n<answer>", "</reasoning>\n\n<answer>"), 0.0),
        (GOOD.replace("<reasoning>\n", "<reasoning>"), 0.0),
        ("<reasoning>\n...\n</reasoning>\n<answer>\n18\n</answer>", 0.0),  # the measured hack
        ("<reasoning>\n\u2026\n</reasoning>\n<answer>\n18\n</answer>", 0.0),
        ("<reasoning>\n \n</reasoning>\n<answer>\n18\n</answer>", 0.0),
        ("<reasoning>\nab.\n</reasoning>\n<answer>\n18\n</answer>", 0.0),  # under 4 letters/digits
        ("<reasoning>\n6*3=18\n</reasoning>\n<answer>\n18\n</answer>", 0.5),
    ],
)
def test_strict_format(text: str, expected: float) -> None:
    assert _all_shapes(strict_format_reward, text) == [expected] * 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD, 0.5),
        ("Sure! <reasoning>6*3=18</reasoning>   <answer>18</answer> bye", 0.5),
        ("<reasoning>6*3=18</reasoning>\n\n<answer>\n18\n</answer>", 0.5),
        ("<reasoning>6*3=18</reasoning> so <answer>18</answer>", 0.0),  # text between the blocks
        ("<answer>18</answer><reasoning>6*3=18</reasoning>", 0.0),
        ("<reasoning>6*3=18</reasoning>", 0.0),
        ("<reasoning>...</reasoning><answer>18</answer>", 0.0),
        ("<reasoning></reasoning><answer>18</answer>", 0.0),
    ],
)
def test_soft_format(text: str, expected: float) -> None:
    assert _all_shapes(soft_format_reward, text) == [expected] * 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD, 0.5),
        (GOOD + "\n", 0.5),  # one newline after </answer> is free
        (GOOD + "\nabc", 0.5 - 0.003),
        (GOOD + "abc", 0.5 - 0.003),
        ("<reasoning>\nsix times three", 0.125),
        ("<reasoning>\nsix times three\n</reasoning>", 0.25),
        ("<reasoning>\nsix times three\n</reasoning>\n<answer>\n18", 0.375),
        (GOOD + GOOD, 0.0),  # every tag twice
        ("<answer>\n18\n</answer>", 0.0),  # no reasoning: no tag credit
        ("<reasoning>\n...\n</reasoning>\n<answer>\n18\n</answer>", 0.0),
        ("<reasoning>\n...\n</reasoning>\n<answer>\n18\n</answer>\nxyz", -0.003),  # penalty stays
        ("</answer>\nxyz", -0.003),  # the closing tag first in the text: its tail is still penalised
        ("", 0.0),
    ],
)
def test_xml_count(text: str, expected: float) -> None:
    assert _all_shapes(xml_count_reward, text) == pytest.approx([expected] * 4)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0.0), ("x" * 50, 0.25), ("x" * 200, 1.0), ("x" * 1000, 1.0)],
)
def test_length(text: str, expected: float) -> None:
    assert length_reward(None, [text]) == [expected]
    assert length_reward(None, [_chat(text)]) == [expected]


def test_prefill_is_prepended() -> None:
    completion = GOOD[len(PREFILL) :]
    assert strict_format_reward(None, [completion]) == [0.0]
    assert strict_format_reward(None, [completion], prefill=[PREFILL]) == [0.5]
    assert strict_format_reward(None, [completion], prefill=None) == [0.0]  # missing = no prefill


def test_batch_of_several_completions_keeps_order() -> None:
    texts = [GOOD, "nothing", GOOD.replace("\n18\n", "\n7\n")]
    assert correctness_reward(None, texts, answer=["18", "18", "7"]) == [2.0, 0.0, 2.0]
    assert correctness_reward(None, texts, answer=[18, None, 7.0]) == [2.0, 0.0, 2.0]  # non-str golds


# --- completion shapes and column errors ----------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("plain", "plain"),
        (None, ""),
        ({"role": "assistant", "content": "one"}, "one"),
        (
            [
                {"role": "assistant", "content": "a"},
                {"role": "tool", "content": "T"},
                {"role": "assistant", "content": "b"},
            ],
            "ab",
        ),
        ([{"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}], "xy"),
        ([{"role": "assistant", "content": None}], ""),
        ([], ""),
    ],
)
def test_completion_text(completion: Any, expected: str) -> None:
    assert completion_text(completion) == expected


@pytest.mark.parametrize("completion", [3, [{"role": "assistant", "content": 3}]])
def test_completion_text_rejects_other_objects(completion: Any) -> None:
    with pytest.raises(DataError, match="text or chat messages"):
        completion_text(completion)


def test_correctness_needs_the_answer_column() -> None:
    with pytest.raises(DataError, match="needs the dataset column 'answer'"):
        correctness_reward(None, [GOOD])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"answer": ["18", "19"]},
            r"correctness_reward: the 'answer' column must be a list with one value per completion \(1\)",
        ),
        ({"answer": "18"}, r"'answer' column must be a list"),
        ({"answer": ["18"], "prefill": "<reasoning>\n"}, r"correctness_reward: the 'prefill' column must be a list"),
        ({"answer": ["18"], "prefill": []}, r"'prefill' column must be a list"),
    ],
)
def test_column_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(DataError, match=match):
        correctness_reward(None, [GOOD], **kwargs)


def test_column_and_message_edges() -> None:
    """What mutation testing found unpinned: a string of the right length is still not a column, a column error
    names its reward and the type it got, a None prefill adds nothing, a message may be a bare string."""
    with pytest.raises(DataError, match=r"^correctness_reward: the 'answer' column must be a list .* got str '7'"):
        correctness_reward(None, [GOOD], answer="7")
    with pytest.raises(DataError, match=r"^xml_count_reward: the 'prefill' column must be a list .* got list"):
        xml_count_reward(None, [GOOD], prefill=["a", "b"])
    assert strict_format_reward(None, [GOOD], prefill=[None]) == strict_format_reward(None, [GOOD]) == [0.5]
    assert completion_text([GOOD]) == GOOD
    assert completion_text([{"content": GOOD}]) == GOOD  # a message without a role is the model's own
    assert completion_text([{"role": "tool", "content": "7"}, {"role": "assistant", "content": GOOD}]) == GOOD
    assert (
        completion_text([{"role": "assistant", "content": ["a", {"type": "image"}, {"type": "text", "text": "b"}]}])
        == "ab"
    )


def test_trl_keywords_are_accepted() -> None:
    extra = {"completion_ids": [[1, 2]], "trainer_state": object(), "log_extra": print, "log_metric": print}
    assert correctness_reward(prompts=["q"], completions=[GOOD], answer=["18"], **extra) == [2.0]
    assert xml_count_reward(prompts=["q"], completions=[GOOD], **extra) == [0.5]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<reasoning>\n...\n</reasoning>", False),
        ("<reasoning>. . . \u2026</reasoning>", False),
        ("<reasoning>abc</reasoning>", False),
        ("<reasoning>abcd</reasoning>", True),
        ("<reasoning>6*3=18<answer>18</answer>", True),
        ("no tags 6*3=18", False),
    ],
)
def test_has_real_reasoning(text: str, expected: bool) -> None:
    assert has_real_reasoning(text) is expected


# --- configurable values ----------------------------------------------------------------------------


def test_values_are_configurable() -> None:
    assert CorrectnessReward(value=1.0)(None, [GOOD], answer=["18"]) == [1.0]
    assert dataclasses.replace(integer_reward, value=2.0)(None, [GOOD]) == [2.0]
    assert XmlCountReward(value=1.0)(None, [GOOD]) == [1.0]
    assert XmlCountReward(min_reasoning_chars=100)(None, [GOOD]) == [0.0]
    assert LengthReward(max_chars=10)(None, ["x" * 5]) == [0.5]
    assert CorrectnessReward(name="my_correctness").__name__ == "my_correctness"


@pytest.mark.parametrize(
    ("factory", "match"),
    [
        (lambda: LengthReward(max_chars=0), r"LengthReward.max_chars must be an int >= 1: got 0"),
        (lambda: XmlCountReward(min_reasoning_chars=-1), r"min_reasoning_chars must be an int >= 0: got -1"),
    ],
)
def test_bad_settings_raise(factory: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        factory()


# --- the registry ----------------------------------------------------------------------------------


def test_registry_names_and_functions() -> None:
    assert list(REWARDS) == list(typing.get_args(RewardName))
    assert DEFAULT_REWARDS == ("correctness", "integer", "strict_format", "soft_format", "xml_count")
    assert sum(REWARDS[n].max_value for n in DEFAULT_REWARDS) == 4.0
    for name, spec in REWARDS.items():
        assert spec.name == name
        assert spec.func.__name__ == f"{name}_reward"
        assert spec.max_value == spec.func.value
        assert pickle.loads(pickle.dumps(spec.func)) == spec.func


def test_get_reward_unknown_name_lists_valid_names() -> None:
    with pytest.raises(ConfigError) as info:
        get_reward("corectness")
    message = str(info.value)
    assert "'corectness'" in message
    for name in REWARDS:
        assert name in message


def test_resolve_rewards() -> None:
    def my_reward(prompts: Any, completions: list[Any], **kwargs: Any) -> list[float]:
        return [1.0] * len(completions)

    assert resolve_rewards(None) == [REWARDS[n].func for n in DEFAULT_REWARDS]
    assert resolve_rewards(["correctness", my_reward]) == [correctness_reward, my_reward]
    assert resolve_rewards("length") == [length_reward]


@pytest.mark.parametrize(
    ("items", "match"),
    [
        (["nope"], r"unknown reward 'nope'; tried grpo-lite's names \(correctness, integer, strict_format"),
        ([3], r"a reward is a name \(correctness, .*\) or a callable, got 3"),
        ([], r"give at least one reward"),
        (["correctness", correctness_reward], r"rewards given twice: correctness_reward"),
    ],
)
def test_resolve_rewards_errors(items: list[Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        resolve_rewards(items)


def test_doc_table_is_current() -> None:
    from tools.doc_tables import rewards_table_markdown

    doc = DOC.read_text(encoding="utf-8")
    found = re.search(r"<!-- rewards-table:start -->\n(.*?)\n<!-- rewards-table:end -->", doc, re.DOTALL)
    assert found, f"{DOC} lacks the rewards-table markers"
    assert found[1] == rewards_table_markdown(), (
        "docs/rewards.md is stale: paste tools.doc_tables.rewards_table_markdown()"
    )


# --- properties ------------------------------------------------------------------------------------

_TAGGY = st.lists(
    st.sampled_from(["<reasoning>", "</reasoning>", "<answer>", "</answer>", "\n", "...", " ", "18", "abcd", "$"]),
    max_size=20,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.one_of(st.text(max_size=200), _TAGGY), min_size=1, max_size=4),
    gold=st.text(max_size=30),
    prefill=st.text(max_size=20),
)
def test_no_text_makes_a_reward_raise(texts: list[str], gold: str, prefill: str) -> None:
    kwargs = {"answer": [gold] * len(texts), "prefill": [prefill] * len(texts)}
    for spec in REWARDS.values():
        for completions in (texts, [_chat(t) for t in texts]):
            rewards = spec.func(None, completions, **kwargs)
            assert len(rewards) == len(texts)
            assert all(isinstance(r, float) and r <= spec.max_value for r in rewards)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from(["{n}", "${n}", "{n}.00", "{n:,}"]))
def test_equivalent_number_forms_get_the_same_verdict(n: int, form: str) -> None:
    text = GOOD.replace("\n18\n", "\n" + form.format(n=n) + "\n")
    assert correctness_reward(None, [text], answer=[str(n)]) == [2.0]
    assert correctness_reward(None, [text], answer=[str(n + 1)]) == [0.0]
    assert integer_reward(None, [text]) == [0.5]


def test_value_must_be_a_number() -> None:
    with pytest.raises(ConfigError, match=r"CorrectnessReward.value must be a number, got '2'"):
        CorrectnessReward(value="2")  # type: ignore[arg-type]
