"""Reward functions for GRPO on GSM8K-style problems.

Each has TRL's signature ``f(prompts, completions, **kwargs) -> list[float]``, is pure, and judges
``prefill[i] + completion`` (with a ``prefill`` column); each is a frozen dataclass (``CorrectnessReward(value=1.0)``
gives another value). The format rewards need real reasoning (anti reward hacking: docs/internals.md).

>>> done = "<reasoning>\\n6 * 3 = 18\\n</reasoning>\\n<answer>\\n18\\n</answer>"
>>> correctness_reward(None, [done], answer=["18"]), strict_format_reward(None, [done])
([2.0], [0.5])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_lite.data.answer_kinds import answer_is_correct
from grpo_lite.data.answers import extract_xml_answer, normalize_number
from grpo_lite.errors import ConfigError, DataError

__all__ = [
    "RewardFunc",
    "MIN_REASONING_CHARS",
    "CorrectnessReward",
    "IntegerReward",
    "StrictFormatReward",
    "SoftFormatReward",
    "XmlCountReward",
    "LengthReward",
    "correctness_reward",
    "integer_reward",
    "strict_format_reward",
    "soft_format_reward",
    "xml_count_reward",
    "length_reward",
    "completion_text",
    "has_real_reasoning",
]

RewardFunc = Callable[..., list]
"""TRL's reward signature: ``f(prompts, completions, **kwargs) -> list[float | None]``."""

MIN_REASONING_CHARS = 4
"""Letters or digits the reasoning needs before any format credit is given."""

_STRICT_RE = re.compile(r"^<reasoning>\n(.*?)\n</reasoning>\n<answer>\n.*?\n</answer>\n?\Z", re.DOTALL)
_SOFT_RE = re.compile(r"<reasoning>(.*?)</reasoning>\s*<answer>.*?</answer>", re.DOTALL)
_REASONING_RE = re.compile(r"<reasoning>(.*?)(?:</reasoning>|<answer>|\Z)", re.DOTALL)
_TAGS = ("<reasoning>", "</reasoning>", "<answer>", "</answer>")


def _message_text(message: Any) -> str:
    """The text of one chat message: ``content`` as a string or a list of text parts."""
    content = message.get("content") if isinstance(message, Mapping) else message
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, Sequence):
        return "".join(p.get("text") or "" if isinstance(p, Mapping) else str(p) for p in content)
    raise DataError(f"a completion must be text or chat messages, got {type(content).__name__} {content!r:.60}")


def completion_text(completion: Any) -> str:
    """The text of one completion, plain or conversational (its assistant messages joined).

    Raises:
        DataError: the completion is neither text nor chat messages.

    >>> completion_text("<answer>18</answer>")
    '<answer>18</answer>'
    >>> completion_text([{"role": "assistant", "content": "<answer>18</answer>"}])
    '<answer>18</answer>'
    """
    if isinstance(completion, Sequence) and not isinstance(completion, str):
        own = [m for m in completion if not isinstance(m, Mapping) or m.get("role", "assistant") == "assistant"]
        return "".join(_message_text(m) for m in own)
    return _message_text(completion)  # one message, or the text itself


def _column(kwargs: Mapping[str, Any], name: str, size: int, reward: str) -> Sequence[Any] | None:
    """A per-completion dataset column from the kwargs, checked to have one value per completion."""
    values = kwargs.get(name)
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, Sequence) or len(values) != size:
        raise DataError(
            f"{reward}: the {name!r} column must be a list with one value per completion ({size}), "
            f"got {type(values).__name__} {values!r:.60}"
        )
    return values


def _texts(completions: Sequence[Any], kwargs: Mapping[str, Any], reward: str) -> list[str]:
    """``prefill[i] + completion_text(completions[i])`` for every completion."""
    prefill = _column(kwargs, "prefill", len(completions), reward) or [""] * len(completions)
    return [(p if isinstance(p, str) else "") + completion_text(c) for p, c in zip(prefill, completions)]


def has_real_reasoning(text: str, min_chars: int = MIN_REASONING_CHARS) -> bool:
    """Whether the first ``<reasoning>`` block (to ``</reasoning>``, ``<answer>`` or the end) holds at least
    ``min_chars`` letters or digits.

    >>> has_real_reasoning("<reasoning>\\n...\\n</reasoning>")
    False
    >>> has_real_reasoning("<reasoning>6*3=18")
    True
    """
    match = _REASONING_RE.search(text)
    return match is not None and _is_real(match[1], min_chars)


def _is_real(reasoning: str, min_chars: int) -> bool:
    """Whether a reasoning text holds at least ``min_chars`` letters or digits."""
    return sum(ch.isalnum() for ch in reasoning) >= min_chars


@dataclass(frozen=True)
class _Reward:
    """Shared call logic: judge ``prefill + completion`` text by text with :meth:`score`."""

    value: float
    name: str

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise ConfigError(f"{type(self).__name__}.value must be a number, got {self.value!r}")
        for field_name, least in (("min_reasoning_chars", 0), ("max_chars", 1)):
            number = getattr(self, field_name, least)
            if not isinstance(number, int) or number < least:
                raise ConfigError(f"{type(self).__name__}.{field_name} must be an int >= {least}: got {number!r}")

    @property
    def __name__(self) -> str:  # TRL logs rewards by __name__
        return self.name

    def __call__(self, prompts: Any = None, completions: Sequence[Any] = (), **kwargs: Any) -> list[float]:
        return [self.score(text) for text in _texts(completions, kwargs, self.name)]

    def score(self, text: str) -> float:
        """The reward of one full assistant text."""
        raise NotImplementedError


@dataclass(frozen=True)
class CorrectnessReward(_Reward):
    """``value`` when the ``<answer>`` block's last number equals the ``answer`` column (the gold number) as a
    number; no ``<answer>`` block scores 0 (:func:`grpo_lite.data.answers.extract_answer`). Rows with an
    ``answer_kind`` column compare in that kind (:func:`grpo_lite.data.answer_kinds.answer_is_correct`).

    >>> correctness_reward(None, ["<answer>\\n$18.00\\n</answer>", "18"], answer=["18", "18"])
    [2.0, 0.0]
    >>> chat = [[{"role": "assistant", "content": "<answer>2,125</answer>"}]]
    >>> CorrectnessReward(value=1.0)(None, chat, answer=["2125"])
    [1.0]
    """

    value: float = 2.0
    name: str = "correctness_reward"

    def __call__(self, prompts: Any = None, completions: Sequence[Any] = (), **kwargs: Any) -> list[float]:
        gold = _column(kwargs, "answer", len(completions), self.name)
        if gold is None:
            raise DataError(f"{self.name} needs the dataset column 'answer' (the gold number of each problem)")
        texts = _texts(completions, kwargs, self.name)  # a None gold scores 0; an int gold is read as text
        kinds = _column(kwargs, "answer_kind", len(completions), self.name) or ["number"] * len(completions)
        return [
            self.value if g is not None and answer_is_correct(t, str(g), k) else 0.0
            for t, g, k in zip(texts, gold, kinds)
        ]


@dataclass(frozen=True)
class IntegerReward(_Reward):
    """``value`` when the ``<answer>`` content is one whole number (``2,125``, ``$18``, ``18.00``; not ``18.5``,
    ``1/2``, ``18 apples``); 0 on rows whose ``answer_kind`` is not ``number`` (a whole number is not their format).

    >>> integer_reward(None, ["<answer>\\n2,125\\n</answer>", "<answer>18.5</answer>", "<answer>18kg</answer>"])
    [0.5, 0.0, 0.0]
    >>> integer_reward(None, ["<answer>7</answer>"], answer_kind=["text"])
    [0.0]
    """

    value: float = 0.5
    name: str = "integer_reward"

    def __call__(self, prompts: Any = None, completions: Sequence[Any] = (), **kwargs: Any) -> list[float]:
        kinds = _column(kwargs, "answer_kind", len(completions), self.name) or ["number"] * len(completions)
        scores = super().__call__(prompts, completions, **kwargs)
        return [score if kind == "number" else 0.0 for score, kind in zip(scores, kinds)]

    def score(self, text: str) -> float:
        number = normalize_number(extract_xml_answer(text) or "")
        return self.value if number is not None and "." not in number and "/" not in number else 0.0


@dataclass(frozen=True)
class StrictFormatReward(_Reward):
    """``value`` for exactly ``<reasoning>\\n...\\n</reasoning>\\n<answer>\\n...\\n</answer>`` (+ one ``\\n``), nothing
    around it, with real reasoning.

    >>> ok = "<reasoning>\\n6 * 3 = 18\\n</reasoning>\\n<answer>\\n18\\n</answer>\\n"
    >>> hack = "<reasoning>\\n...\\n</reasoning>\\n<answer>\\n18\\n</answer>"
    >>> strict_format_reward(None, [ok, ok + "more", hack])
    [0.5, 0.0, 0.0]
    >>> strict_format_reward(None, [ok[len("<reasoning>\\n"):]], prefill=["<reasoning>\\n"])
    [0.5]
    """

    value: float = 0.5
    name: str = "strict_format_reward"
    min_reasoning_chars: int = MIN_REASONING_CHARS

    def score(self, text: str) -> float:
        match = _STRICT_RE.match(text)
        return self.value if match and _is_real(match[1], self.min_reasoning_chars) else 0.0


@dataclass(frozen=True)
class SoftFormatReward(_Reward):
    """``value`` for a ``<reasoning>...</reasoning>`` block (real reasoning), then an ``<answer>...</answer>`` block.

    >>> soft_format_reward(None, ["So <reasoning>6*3=18</reasoning> <answer>18</answer>!", "<answer>18</answer>"])
    [0.5, 0.0]
    """

    value: float = 0.5
    name: str = "soft_format_reward"
    min_reasoning_chars: int = MIN_REASONING_CHARS

    def score(self, text: str) -> float:
        match = _SOFT_RE.search(text) if "</answer>" in text else None  # skip a slow search that must fail
        return self.value if match and _is_real(match[1], self.min_reasoning_chars) else 0.0


@dataclass(frozen=True)
class XmlCountReward(_Reward):
    """``value / 4`` per tag present exactly once (with real reasoning), minus ``trailing_penalty`` per character after
    the last ``</answer>`` but one newline (so the result can be negative).

    >>> xml_count_reward(None, ["<reasoning>\\n6*3=18\\n</reasoning>\\n<answer>\\n18\\n</answer>\\n"])
    [0.5]
    >>> xml_count_reward(None, ["<reasoning>\\nsix times three</reasoning>"])
    [0.25]
    >>> trailing, hack = "<reasoning>6*3=18</reasoning><answer>18</answer>\\nabc", "<reasoning>..</reasoning>"
    >>> [round(r, 3) for r in xml_count_reward(None, [trailing, hack])]
    [0.497, 0.0]
    """

    value: float = 0.5
    name: str = "xml_count_reward"
    trailing_penalty: float = 0.001
    min_reasoning_chars: int = MIN_REASONING_CHARS

    def score(self, text: str) -> float:
        credit = 0.0
        if has_real_reasoning(text, self.min_reasoning_chars):
            credit = self.value / len(_TAGS) * sum(text.count(tag) == 1 for tag in _TAGS)
        close = text.rfind("</answer>")
        if close < 0:
            return credit
        tail = text[close + len("</answer>") :]
        return credit - self.trailing_penalty * len(tail[1:] if tail.startswith("\n") else tail)


@dataclass(frozen=True)
class LengthReward(_Reward):
    """``value * min(len(text), max_chars) / max_chars``: a dense reward a random model earns in varying amounts, for
    tests and demos of the training loop only.

    >>> length_reward(None, ["", "x" * 100, "x" * 500])
    [0.0, 0.5, 1.0]
    """

    value: float = 1.0
    name: str = "length_reward"
    max_chars: int = 200

    def score(self, text: str) -> float:
        return self.value * min(len(text), self.max_chars) / self.max_chars


correctness_reward = CorrectnessReward()
integer_reward = IntegerReward()
strict_format_reward = StrictFormatReward()
soft_format_reward = SoftFormatReward()
xml_count_reward = XmlCountReward()
length_reward = LengthReward()
