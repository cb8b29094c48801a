"""Parsing and comparing numeric answers, shared by the reward functions and evaluation.

Numbers are compared exactly through one canonical string per value, never through floats; the grammar of what
counts as a number is in docs/internals.md. No function here raises for any ``str`` input; standard library only.
"""

from __future__ import annotations

import re
from fractions import Fraction

# One number in free text. Groups: sign / sign2 (before / after a "$"), int, frac, frac_only, den.
_NUMBER_RE = re.compile(
    r"(?:(?<![\w)\]])(?P<sign>[-+\u2212]))?"  # a sign not glued to a word: "5-3" is not minus 3
    r"(?:\$(?P<sign2>[-+\u2212])?)?"  # "$18", "-$18", "$-18"
    r"(?:(?<![0-9])(?P<int>[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])|[0-9]+)(?:\.(?P<frac>[0-9]+))?"
    r"|(?<![0-9.])\.(?P<frac_only>[0-9]+))"  # ".5"
    r"(?:(?<=[0-9.])(?P<exp>[eE][-+\u2212]?[0-9]+))?"  # "2e3": read whole, then refused (never as "3")
    r"(?:/(?P<den>[0-9]+))?"  # "1/2"
)
_MINUS = ("-", "\u2212")
_ANSWER_OPEN = "<answer>"
_ANSWER_CLOSE = "</answer>"


def _fraction_to_canonical(value: Fraction) -> str:
    """Canonical string of a rational: a decimal when it terminates, else ``p/q`` reduced."""
    num, den = value.numerator, value.denominator
    if den == 1:
        return str(num)
    rest, twos, fives = den, 0, 0
    while rest % 2 == 0:
        rest, twos = rest // 2, twos + 1
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    if rest != 1:
        return f"{num}/{den}"
    places = max(twos, fives)
    digits = str(abs(num) * (10**places // den)).rjust(places + 1, "0")
    text = f"{digits[:-places]}.{digits[-places:].rstrip('0')}"
    return f"-{text}" if num < 0 else text


def _canonical(match: re.Match[str]) -> str | None:
    """Canonical string of one regex match, or None when it is not a valid number (``1/0``, ``2e3``)."""
    if match["exp"] is not None:  # scientific notation is not in the grammar: no number, rather than its exponent
        return None
    negative = match["sign"] in _MINUS or match["sign2"] in _MINUS
    int_part = (match["int"] or "").replace(",", "").lstrip("0") or "0"
    frac = (match["frac"] or match["frac_only"] or "").rstrip("0")
    if match["den"] is None:
        text = f"{int_part}.{frac}" if frac else int_part
        return f"-{text}" if negative and text != "0" else text
    try:  # int() refuses strings over ~4300 digits: such a "number" is not an answer
        den = int(match["den"])
        if den == 0:
            return None
        value = Fraction(int(int_part + frac), 10 ** len(frac) * den)
        return _fraction_to_canonical(-value if negative else value)
    except ValueError:
        return None


def normalize_number(text: str) -> str | None:
    """The canonical form of a text that is one number, or None when it is not: whitespace, trailing periods and a
    trailing ``%`` are ignored, words or units around it are not (:func:`last_number` reads free text).

    Args:
        text: a number as a person or model writes it.

    Returns:
        A plain decimal string without ``$``, commas, leading or trailing zeros (``"-0"`` is
        ``"0"``), a reduced ``p/q`` for a fraction whose decimal does not end, or None.

    >>> [normalize_number(t) for t in ["$18", "18.00", "2,125", "18.", " 18 ", "1,000.50"]]
    ['18', '18', '2125', '18', '18', '1000.5']
    >>> [normalize_number(t) for t in ["-3", "+4", "3.50", "1/2", "2/6", "50%", "-$1.5"]]
    ['-3', '4', '3.5', '0.5', '1/3', '50', '-1.5']
    >>> normalize_number("eighteen") is None, normalize_number("18 apples") is None
    (True, True)
    """
    if not isinstance(text, str):
        return None
    stripped = text.strip().rstrip(".").rstrip()
    if stripped.endswith("%"):
        stripped = stripped[:-1].rstrip()
    match = _NUMBER_RE.fullmatch(stripped)
    return _canonical(match) if match else None


def last_number(text: str) -> str | None:
    """The canonical form of the last number in free text, or None when it has none.

    Args:
        text: any text.

    Returns:
        The canonical string (see :func:`normalize_number`) of the last number, or None.

    >>> last_number("The answer is 18.")
    '18'
    >>> last_number("I got 2,125 apples, that is $2,125.00 at 100%")
    '100'
    >>> last_number("5-3 leaves 2, then -4 more"), last_number("no digits") is None
    ('-4', True)
    """
    if not isinstance(text, str):
        return None
    for match in reversed(list(_NUMBER_RE.finditer(text))):
        canonical = _canonical(match)
        if canonical is not None:
            return canonical
    return None


def extract_xml_answer(text: str) -> str | None:
    """The stripped content of the last ``<answer>`` block, or None when there is no ``<answer>``; without
    ``</answer>`` the block runs to the end (a completion cut by the length limit still has an answer).

    Args:
        text: a completion.

    Returns:
        The block's content, stripped (possibly ``""``), or None.

    >>> extract_xml_answer("<reasoning>\\n6*3\\n</reasoning>\\n<answer>\\n18\\n</answer>\\n")
    '18'
    >>> extract_xml_answer("<answer>1</answer> no, <answer> 2"), extract_xml_answer("18") is None
    ('2', True)
    """
    if not isinstance(text, str):
        return None
    start = text.rfind(_ANSWER_OPEN)
    if start < 0:
        return None
    rest = text[start + len(_ANSWER_OPEN) :]
    end = rest.find(_ANSWER_CLOSE)
    return (rest if end < 0 else rest[:end]).strip()


def extract_answer(text: str) -> str | None:
    """The model's final numeric answer, canonical: the last number inside the last ``<answer>`` block (the
    correctness reward's rule); no block, or one without a number, gives None.

    >>> extract_answer("<answer>\\nThe total is $2,125.\\n</answer>")
    '2125'
    >>> extract_answer("so the answer is 18.") is None
    True
    """
    block = extract_xml_answer(text)
    return None if block is None else last_number(block)


def answers_match(predicted: str | None, gold: str) -> bool:
    """Whether a predicted answer equals the gold answer as a number (exactly, no rounding): each side read as one
    number (:func:`normalize_number`), else as its text's last number; None or no number never matches.

    Args:
        predicted: the model's answer (raw or already extracted), or None.
        gold: the reference answer.

    Returns:
        True when both sides hold a number and the numbers are equal.

    >>> [answers_match(p, "18") for p in ["$18", "18.00", "18", "The answer is 18."]]
    [True, True, True, True]
    >>> [answers_match(p, "18") for p in ["180", "1.8", "-18", None, ""]]
    [False, False, False, False, False]
    >>> answers_match("2,125", "2125"), answers_match("0.5", "1/2")
    (True, True)
    """
    if predicted is None:
        return False
    pred = normalize_number(predicted) or last_number(predicted)
    ref = normalize_number(gold) or last_number(gold)
    return pred is not None and pred == ref


def gsm8k_gold(answer_field: str) -> str | None:
    """The gold number of a GSM8K ``answer`` field: the text after the last ``####``, canonical.

    Args:
        answer_field: the worked solution ending in ``#### <number>``.

    Returns:
        The canonical number, or None without ``####`` or when the text after it is not one number
        (``#### 1 000``, ``#### 2e3``: None, never ``0`` or ``3``; the loaders refuse such a row, naming it).

    >>> gsm8k_gold("She sells 2,125 ... <<2125>>\\n#### 2,125")
    '2125'
    >>> gsm8k_gold("#### $18.00"), gsm8k_gold("no marker 18") is None, gsm8k_gold("#### 1 000") is None
    ('18', True, True)
    """
    if not isinstance(answer_field, str):
        return None
    marker = answer_field.rfind("####")
    if marker < 0:
        return None
    return normalize_number(answer_field[marker + 4 :])
