"""Synthetic grade-school word problems: offline, seeded, original (never GSM8K text).

Levels 1 to 3 (one to three steps); ``split="test"`` problems never share question text with ``split="train"`` ones
(docs/internals.md). The shapes and templates live in :mod:`grpo_lite.data.templates`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from grpo_lite.data.prompts import PromptStyle, build_messages
from grpo_lite.data.templates import LEVELS, SHAPES, TEMPLATES, Level, _scene
from grpo_lite.errors import ConfigError, DataError

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset


Split = Literal["train", "test"]
_TEST_PERCENT = 20  # share of the question space that belongs to the "test" split


# ----------------------------------------------------------------------------- generation
@dataclass(frozen=True)
class SyntheticProblem:
    """One generated problem: its question, answer, level (its arithmetic steps), worked steps (one sentence
    each) and the name of its :class:`Template`."""

    question: str
    answer: int
    level: int
    steps: tuple[str, ...]
    template: str


def _split_of(question: str) -> Split:
    """The split a question text belongs to: a stable hash, the same on every machine."""
    bucket = int.from_bytes(hashlib.sha256(question.encode()).digest()[:8], "big") % 100
    return "test" if bucket < _TEST_PERCENT else "train"


def _check_args(n: int, levels: Sequence[int], split: str) -> tuple[Level, ...]:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"n must be a positive integer (the number of problems), got {n!r}")
    if split not in ("train", "test"):
        raise ConfigError(f"unknown split {split!r}; valid splits: 'train', 'test'")
    if isinstance(levels, (int, str)):
        raise ConfigError(f"levels must be a sequence such as (1, 2, 3), got {levels!r}")
    chosen = tuple(dict.fromkeys(levels))
    if not chosen or any(level not in LEVELS for level in chosen):
        raise ConfigError(f"levels must be a non-empty selection of {LEVELS}, got {tuple(levels)!r}")
    return chosen  # type: ignore[return-value]


def generate_problems(
    n: int = 200, seed: int = 0, levels: Sequence[int] = LEVELS, split: Split = "train"
) -> list[SyntheticProblem]:
    """Generate ``n`` distinct problems; problem ``i`` has level ``levels[i % len(levels)]``.

    Args:
        n: how many problems.
        seed: the same seed gives the same problems, another seed other problems.
        levels: a selection of ``(1, 2, 3)``.
        split: ``"train"`` or ``"test"``; the two never share a question text.

    Returns:
        The problems, without duplicate questions.

    Raises:
        ConfigError: ``n`` below 1, an unknown level or split.

    >>> problems = generate_problems(3, seed=1)
    >>> [p.level for p in problems], all(p.answer >= 0 for p in problems)
    ([1, 2, 3], True)
    """
    chosen = _check_args(n, levels, split)
    by_level = {level: [t for t in TEMPLATES if t.level == level] for level in chosen}
    rng = random.Random(f"grpo-lite/synthetic/{split}/{seed}")
    seen: set[str] = set()
    problems: list[SyntheticProblem] = []
    for _ in range(100 * n + 1000):
        if len(problems) == n:
            return problems
        level = chosen[len(problems) % len(chosen)]
        template = rng.choice(by_level[level])
        values = SHAPES[template.shape][1](rng)
        fields = {**_scene(rng), **values}
        question = template.question.format(**fields)
        if question in seen or _split_of(question) != split:
            continue
        seen.add(question)
        steps = tuple(step.format(**fields) for step in template.steps)
        problems.append(SyntheticProblem(question, values["ans"], level, steps, template.name))
    if len(problems) == n:
        return problems
    raise DataError(f"could not draw {n} distinct synthetic problems at levels {chosen}; ask for fewer or add levels")


def synthetic_problems(
    n: int = 200,
    seed: int = 0,
    levels: Sequence[int] = LEVELS,
    style: PromptStyle | None = None,
    split: Split = "train",
) -> Dataset:
    """A dataset of synthetic problems with the same columns as :func:`grpo_lite.data.loaders.load_gsm8k`.

    Args:
        n: how many problems.
        seed: the same seed gives the same set; another seed another set.
        levels: a selection of ``(1, 2, 3)``; problems cycle through them.
        style: the prompt style of the ``prompt`` column. Default: ``PromptStyle()``.
        split: ``"train"`` or ``"test"``; ``"test"`` problems never share text with ``"train"``.

    Returns:
        Columns ``prompt`` (conversational messages), ``question``, ``answer`` (the number as text), ``level``.

    Raises:
        ConfigError: ``n`` below 1, an unknown level or split.

    >>> ds = synthetic_problems(4, seed=0, levels=(2,))
    >>> ds.column_names, list(ds["level"])
    (['prompt', 'question', 'answer', 'level'], [2, 2, 2, 2])
    """
    from datasets import Dataset  # heavy: datasets

    problems = generate_problems(n, seed, levels, split)
    return Dataset.from_dict(
        {
            "prompt": [build_messages(p.question, style) for p in problems],
            "question": [p.question for p in problems],
            "answer": [str(p.answer) for p in problems],
            "level": [p.level for p in problems],
        }
    )
