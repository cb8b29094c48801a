"""This project's rewards, named in recipe.yaml as ``word_puzzles.rewards:solved``.

A reward has TRL's signature: the completions, and every other column of the dataset as a keyword argument
(here ``target``, the puzzle's answer), one float per completion out.
"""

from __future__ import annotations

import re

from grpo_lite.rewards import completion_text


def last_word(text: str) -> str:
    """The completion's answer: its last word, lower case, without punctuation.

    >>> last_word("The word reversed is: Elppa.")
    'elppa'
    """
    words = re.findall(r"[A-Za-z]+", text)
    return words[-1].lower() if words else ""


def solved(completions: list, target: list[str], **kwargs: object) -> list[float]:
    """1.0 when the completion's last word is the puzzle's answer, 0.0 otherwise.

    >>> solved(["It is elppa", "apple"], target=["elppa", "elppa"])
    [1.0, 0.0]
    """
    return [1.0 if last_word(completion_text(c)) == t.lower() else 0.0 for c, t in zip(completions, target)]
