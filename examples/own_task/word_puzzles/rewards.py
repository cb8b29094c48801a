"""This project's rewards, named in recipe.yaml as ``word_puzzles.rewards:solved``.

A reward has TRL's signature: the completions, and every other column of the dataset as a keyword argument
(here ``target``, the puzzle's answer), one float per completion out.
"""

from __future__ import annotations

import re

from grpo_lite.rewards import completion_text


def answers(text: str) -> set[str]:
    """What the completion gives as its answer: its last word and every quoted word, lower case.

    >>> sorted(answers("The word 'apple' backwards is 'elppa', I think"))
    ['apple', 'elppa', 'think']
    """
    words = re.findall(r"[A-Za-z]+", text)
    quoted = re.findall(r"['\"]([A-Za-z]+)['\"]", text)
    return {w.lower() for w in quoted + words[-1:]}


def solved(completions: list, target: list[str], **kwargs: object) -> list[float]:
    """1.0 when the completion gives the puzzle's answer (its last word, or a quoted word), 0.0 otherwise.

    >>> solved(["It is elppa", "The word 'apple' backwards is 'elppa'.", "apple"], target=["elppa"] * 3)
    [1.0, 1.0, 0.0]
    """
    return [1.0 if t.lower() in answers(completion_text(c)) else 0.0 for c, t in zip(completions, target)]
