"""Tests for grpo_lite.data.answers: number normalization, extraction and exact matching."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_lite.data.answers import (
    answers_match,
    extract_answer,
    extract_xml_answer,
    gsm8k_gold,
    last_number,
    normalize_number,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("18", "18"),
        ("$18", "18"),
        ("18.00", "18"),
        ("2,125", "2125"),
        ("18.", "18"),
        (" 18 ", "18"),
        ("1,000.50", "1000.5"),
        ("1,234,567", "1234567"),
        ("-3", "-3"),
        ("+4", "4"),
        ("\u22123", "-3"),
        ("-$18", "-18"),
        ("$-18", "-18"),
        ("3.50", "3.5"),
        ("0.50", "0.5"),
        (".5", "0.5"),
        ("007", "7"),
        ("-0", "0"),
        ("-0.00", "0"),
        ("50%", "50"),
        ("50 %", "50"),
        ("18 .", "18"),  # a sentence's period after a space
        ("18X", None),
        ("1/2", "0.5"),
        ("3/4", "0.75"),
        ("-1/8", "-0.125"),
        ("4/2", "2"),
        ("2/6", "1/3"),
        ("1.5/3", "0.5"),
        ("12345678901234567890123456789012.5", "12345678901234567890123456789012.5"),
        ("1/0", None),
        ("", None),
        ("   ", None),
        (".", None),
        ("$", None),
        ("eighteen", None),
        ("18 apples", None),
        ("1,2345", None),
        ("1e5", None),
        ("\u0661\u0668", None),  # Arabic-Indic digits are not read as 18
    ],
)
def test_normalize_number(text: str, expected: str | None) -> None:
    assert normalize_number(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 18.", "18"),
        ("I got 2,125 apples", "2125"),
        ("It costs $18.00.", "18"),
        ("a 50% discount", "50"),
        ("5-3", "3"),
        ("x = -3", "-3"),
        ("(-3)", "-3"),
        ("from 3 to 18, then", "18"),
        ("1,2,3", "3"),
        ("1,2345", "2345"),
        ("1.2.3", "3"),
        ("half is 1/2", "0.5"),
        ("3rd place", "3"),
        ("no number here", None),
        ("", None),
    ],
)
def test_last_number(text: str, expected: str | None) -> None:
    assert last_number(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>18</answer>", "18"),
        ("<answer>\n 18 \n</answer>\n", "18"),
        ("<answer>1</answer> then <answer>2</answer>", "2"),
        ("<reasoning>x</reasoning><answer>\n18", "18"),  # missing closing tag at the end
        ("<answer></answer>", ""),
        ("<answer>", ""),
        ("18", None),
        ("</answer>", None),
        ("<answer>\n1\n</answer>\n</answer>", "1"),  # up to the first closing tag after the opening one
    ],
)
def test_extract_xml_answer(text: str, expected: str | None) -> None:
    assert extract_xml_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<answer>\n18\n</answer>", "18"),
        ("<answer>\nThe total is $2,125.\n</answer>", "2125"),
        ("<answer>3 boxes of 6 = 18</answer>", "18"),
        ("reasoning 7 <answer>none</answer>", None),
        ("so the answer is 18.", None),
        ("9 <answer>18</answer> 27", "18"),
        ("nothing", None),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ("$18", "18", True),
        ("18.00", "18", True),
        ("18", "18", True),
        ("The answer is 18.", "18", True),
        ("2,125", "2125", True),
        ("2125", "2,125", True),
        ("0.5", "1/2", True),
        ("0.2", "1/5", True),  # a denominator with a factor 5 terminates too
        ("0.35", "7/20", True),
        ("-0", "0", True),
        ("180", "18", False),
        ("1.8", "18", False),
        ("-18", "18", False),
        ("18.01", "18", False),
        ("0.333", "1/3", False),
        (None, "18", False),
        ("", "18", False),
        ("18", "", False),
        ("", "", False),
        ("42", "so 42 apples", True),  # a gold with words: its last number
    ],
)
def test_answers_match(predicted: str | None, gold: str, expected: bool) -> None:
    assert answers_match(predicted, gold) is expected


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", "72"),
        ("...\n#### 2,125", "2125"),
        ("#### $18.00", "18"),
        ("#### -5", "-5"),
        ("a #### b #### 7", "7"),
        ("no marker 18", None),
        ("#### none", None),
        # other notations are no number, never their last digits (3, 400, 0)
        ("#### 2e3", None),
        ("#### 1e400", None),
        ("#### 1 000", None),
        ("#### 18 apples", None),
        ("#### 5\n#### none", None),  # the text after the last marker only
        ("####18", "18"),
    ],
)
def test_gsm8k_gold(field: str, expected: str | None) -> None:
    assert gsm8k_gold(field) == expected


@pytest.mark.parametrize("text", ["2e3", "1e400", "the total is 1E+400", "<answer>1e400</answer>", "x = 5e-2"])
def test_scientific_notation_is_no_number_not_its_exponent(text: str) -> None:
    assert last_number(text) is None
    assert extract_answer(f"<answer>{text}</answer>") is None
    assert not answers_match(text, "400") and not answers_match(text, "3") and not answers_match(text, "2")


# --- properties -------------------------------------------------------------------------------

_FUNCS = (normalize_number, last_number, extract_xml_answer, extract_answer, gsm8k_gold)
_NUMBERY = st.text(alphabet=st.sampled_from("0123456789.,$-+/%\u2212 <>answer\n"), max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=200), _NUMBERY))
def test_no_function_raises_on_any_text(text: str) -> None:
    for func in _FUNCS:
        result = func(text)
        assert result is None or isinstance(result, str)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=80), _NUMBERY), st.one_of(st.text(max_size=80), _NUMBERY))
def test_answers_match_never_raises_and_is_symmetric_on_numbers(predicted: str, gold: str) -> None:
    result = answers_match(predicted, gold)
    assert isinstance(result, bool)
    if normalize_number(predicted) is not None and normalize_number(gold) is not None:
        assert result == answers_match(gold, predicted)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_integer_forms_match(n: int) -> None:
    forms = [str(n), f"{n}.00", f"{n:,}", f"${n}" if n >= 0 else f"-${-n}", f"The answer is {n:,}."]
    for form in forms:
        assert answers_match(form, str(n)), form
    assert not answers_match(str(n + 1), str(n))
    assert not answers_match(f"{n}0", str(n)) or n == 0


@settings(max_examples=300, deadline=None)
@given(st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**9), max_value=10**9, places=4))
def test_canonical_form_equals_value(value: Decimal) -> None:
    canonical = normalize_number(format(value, "f"))
    assert canonical is not None
    assert Decimal(canonical) == value
    assert canonical == normalize_number(canonical)  # canonical forms are fixed points


@settings(max_examples=300, deadline=None)
@given(st.fractions(min_value=-1000, max_value=1000, max_denominator=1000))
def test_fractions_keep_their_value(value: Fraction) -> None:
    canonical = normalize_number(f"{value.numerator}/{value.denominator}")
    assert canonical is not None
    assert Fraction(canonical) == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1" * 5000, "1" * 5000),  # past int()'s digit limit: decimals are handled as strings
        ("1" * 5000 + "/3", None),  # a fraction that large is not an answer; no exception
        ("$" + "9" * 5000 + ".000", "9" * 5000),
    ],
)
def test_huge_numbers_do_not_raise(text: str, expected: str | None) -> None:
    assert normalize_number(text) == expected
