"""Answers of every common kind: how a gold is read and how the model's ``<answer>`` block is compared with it.

``number`` is :mod:`grpo_lite.data.answers` unchanged (the GSM8K rule); ``math`` compares LaTeX and expressions
symbolically through ``math-verify`` (in a worker process, with a deadline: :mod:`grpo_lite.data.math_worker`), as
TRL's ``accuracy_reward`` does; ``choice`` compares one option letter; ``text`` compares the trimmed text with case,
inner whitespace, Unicode forms and zero-width characters folded (docs/datasets.md, "Answer kinds").

>>> [answers_match_kind(p, "B", "choice") for p in ["(B)", "b", "B) 42", "C", "Because"]]
[True, True, True, False, False]
>>> answers_match_kind("  New   york ", "new York", "text"), answers_match_kind("York", "new York", "text")
(True, False)
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Literal, get_args

from grpo_lite.data import math_worker
from grpo_lite.data.answers import answers_match, extract_answer, extract_xml_answer, gsm8k_gold, normalize_number
from grpo_lite.errors import ConfigError, DataError
from grpo_lite.settings import AnswerKind

ANSWER_KINDS: tuple[AnswerKind, ...] = get_args(AnswerKind)

_CHOICE_RE = re.compile(  # one option: "(B)", "B)", "b", "B.", "The answer is B", "Answer: (B)"; text only after a mark
    r"(?:(?:the\s+)?(?:correct\s+|final\s+)?(?:answer|option|choice)(?:\s+is)?\s*:?\s*)?"
    r"(?:\((?P<paren>[a-z])\)[.:]?|(?P<letter>[a-z])(?P<mark>[.):])?)(?P<text>\s.*)?",
    re.DOTALL | re.IGNORECASE,
)
_OTHER_OPTION_RE = re.compile(r"\b(?i:answer|option|choice)\b|\([A-Za-z]\)|\b(?i:and|or|not)\s+\(?[A-Z]\b")
_WORDS_RE = re.compile(r"\s*(?=.*[^\W\d_]{2})[^\W\d_]+(?:[\s'.,-]+[^\W\d_]+)*\.?\s*")  # "Paris", "New York"
_ZERO_WIDTH = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))  # soft hyphen, zero-width (no-)joiners
_LATEX_RE = re.compile(r"[\\^{}$]")  # a backslash command, a power, a group or math mode: LaTeX
_DELIMITED_RE = re.compile(r"(?<!\\)\$|\\boxed|\\\(|\\\[")  # math mode already marked ("\$5" is a dollar sign)


def check_answer_kind(kind: Any) -> AnswerKind | None:
    """``kind`` when it is an answer kind or None (chosen from the data).

    Raises:
        ConfigError: another value, naming the valid ones.
    """
    if kind is None or kind in ANSWER_KINDS:
        return kind  # type: ignore[no-any-return]
    raise ConfigError(f"unknown answer_kind {kind!r}; valid kinds: {', '.join(ANSWER_KINDS)} (or leave it unset)")


def _fold_text(text: str) -> str:
    """Text as compared: NFKC (composed accents, compatibility forms), zero-width characters out, inner whitespace
    one space, case folded."""
    return " ".join(unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH).split()).casefold()


def _cell(value: Any) -> str | None:
    """A dataset cell as text (a float as JSON wrote it, exactly: ``1e-07`` is ``0.0000001``); None when not text or
    a number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    return format(Decimal(repr(value)), "f") if isinstance(value, float) and math.isfinite(value) else str(value)


def _choice(text: str) -> str | None:
    """The one option a text names; None when it names none, several (``A and B``) or one as wrong (``C is wrong,
    the answer is D``): the option's own text may follow only a mark (``B. 12 apples``, ``(B) 12``)."""
    match = _CHOICE_RE.fullmatch(text.replace("*", "").strip())  # "**B**": markdown emphasis
    if match is None or (match["text"] and not (match["paren"] or match["mark"])):
        return None
    if match["text"] and _OTHER_OPTION_RE.search(match["text"]):
        return None
    return (match["paren"] or match["letter"]).upper()


def _as_math(text: str) -> str:
    """A bare expression read as LaTeX math (``$...$``), as math-verify reads a marked one."""
    return text if _DELIMITED_RE.search(text) else f"${text}$"


def read_gold(value: Any, kind: AnswerKind) -> str | None:
    """The gold answer of a dataset cell in ``kind``, as the rewards compare it, or None when it cannot be read so
    (``number``: the canonical number, also after ``####``; ``choice``: the upper-case letter; else the trimmed text).

    >>> read_gold("$1,000", "number"), read_gold("(b)", "choice"), read_gold(" Paris ", "text")
    ('1000', 'B', 'Paris')
    >>> read_gold("\\\\frac{3}{4}", "math"), read_gold("", "math") is None, read_gold("42", "choice") is None
    ('\\\\frac{3}{4}', True, True)
    """
    text = _cell(value)
    if text is None:
        return None
    text = text.strip()
    if kind == "number":  # a number, or a worked solution ending in "#### <number>"
        return gsm8k_gold(text) if "####" in text else normalize_number(text)
    if kind == "choice":
        return _choice(text)
    if not text:
        return None
    if kind == "math":  # math-verify keeps the bare string of what sympy could not read: not a gold
        return text if math_worker.judge(_as_math(text), None) else None
    return text


def answers_match_kind(predicted: str | None, gold: str, kind: AnswerKind) -> bool:
    """Whether the model's answer (the ``<answer>`` block's content) equals the gold in ``kind``.

    ``number``: :func:`grpo_lite.data.answers.answers_match`; ``math``: math-verify's ``verify(gold, answer)``
    (``\\dfrac{1}{2}`` = ``0.5`` = ``\\frac{2}{4}``); ``choice``: the same option letter (``(B)``, ``B)``, ``b``);
    ``text``: equal after trimming, with case and inner whitespace folded. None never matches.
    """
    if predicted is None:
        return False
    if kind == "number":
        return answers_match(predicted, gold)
    if kind == "choice":
        letter = _choice(predicted)
        return letter is not None and letter == _choice(gold)
    if kind == "text" or _WORDS_RE.fullmatch(gold):  # words are not a product of symbols: "sirap" is not "Paris"
        return _fold_text(predicted) == _fold_text(gold) != ""
    return bool(predicted.strip()) and math_worker.judge(_as_math(gold), _as_math(predicted))


def predicted_answer(text: str, kind: AnswerKind) -> str | None:
    """The model's answer in a completion: for ``number`` the last number of the ``<answer>`` block
    (:func:`grpo_lite.data.answers.extract_answer`), for the other kinds the block's content; None without a block.

    >>> predicted_answer("<answer>It is 18.</answer>", "number"), predicted_answer("<answer> (C) </answer>", "choice")
    ('18', '(C)')
    """
    return extract_answer(text) if check_answer_kind(kind) == "number" else extract_xml_answer(text)


def answer_is_correct(text: str, gold: str, kind: AnswerKind) -> bool:
    """Whether a completion's ``<answer>`` equals the gold in ``kind``: the correctness reward's and evaluate()'s rule.

    >>> answer_is_correct("<answer>\\dfrac{1}{2}</answer>", "0.5", "math")
    True
    """
    return answers_match_kind(predicted_answer(text, kind), gold, kind)


def _kind_of(value: Any) -> Literal["number", "math", "text"] | None:
    """What one gold looks like: a number, LaTeX, other text; None when empty or not text."""
    text = _cell(value)
    if text is None or not text.strip():
        return None
    if normalize_number(text) is not None or "####" in text:
        return "number"
    return "math" if _LATEX_RE.search(text) else "text"


def choose_answer_kind(golds: Sequence[tuple[str, Any]], source: str) -> AnswerKind:
    """The kind of a dataset's golds (``(where, value)`` pairs), read from them all: LaTeX in at least as many golds as
    plain text: ``math`` (one ``$5`` among words is not); else every gold a number: ``number``; else ``text``.

    Raises:
        DataError: some golds are numbers and others plain text (mixed kinds), naming one of each.

    >>> choose_answer_kind([("row 1", "18"), ("row 2", 7)], "data"), choose_answer_kind([("r", "\\\\frac12")], "d")
    ('number', 'math')
    """
    first: dict[str, tuple[str, Any]] = {}
    counts: Counter[str] = Counter()
    for where, value in golds:
        kind = _kind_of(value)
        if kind is not None:
            first.setdefault(kind, (where, value))
            counts[kind] += 1
    if counts["math"] and counts["math"] >= counts["text"]:
        return "math"
    if "number" in first and "text" in first:
        (num_where, num), (text_where, text) = first["number"], first["text"]
        raise DataError(
            f"{source}: the golds mix kinds: {num_where.removeprefix(source + ', ')} is a number ({num!r:.40}), "
            f"{text_where.removeprefix(source + ', ')} is text "
            f"({text!r:.40}); pass answer_kind='text' (--answer-kind text) to compare them all as text, or "
            "'number' to require numbers"
        )
    return "text" if "text" in first else "number"


def column_kind(values: Sequence[tuple[str, Any]], asked: AnswerKind | None) -> AnswerKind | None:
    """The kind a dataset's ``answer_kind`` column names (``(where, value)`` pairs of its filled cells: a dataset
    grpo-lite loaded and saved), checked to be one kind on every row and ``asked``'s when one is asked; None without.

    Raises:
        DataError: a cell that is not a kind, or another kind than the rows before it (or ``asked``), naming the row.
    """
    chosen = asked
    for where, value in values:
        if value not in ANSWER_KINDS or value != (chosen or value):
            raise DataError(
                f"{where}: 'answer_kind' is {value!r}, but a dataset's answers compare one way: one of "
                f"{', '.join(ANSWER_KINDS)} on every row{f' (here {chosen!r})' if chosen else ''}, or drop the column and "
                "pass answer_kind (--answer-kind)"
            )
        chosen = value
    return chosen


def gold_error(kind: AnswerKind, column: str, value: Any) -> str:
    """What is wrong with a gold that :func:`read_gold` could not read in ``kind`` (the loaders name the row)."""
    if kind == "number":
        return f"no usable number in {column!r}: {value!r:.120}"
    if kind == "math":
        return f"math-verify cannot parse {column!r} as math: {value!r:.120}"
    if kind == "choice":
        return f"{column!r} is not one option letter (A, (B), c): {value!r:.120}"
    return f"{column!r} is missing, empty or not text: {value!r:.120}"
