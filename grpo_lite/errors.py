"""Errors a user can fix. The CLI prints them as one line and exits with code 2.

A message says what to change in grpo-lite's own spelling (``--set key=value``, ``--budget-gb``, ``key=value`` in
Python). A command started in another form sets :data:`SPELLING` for its run (``grpo-lite train`` in ``trl grpo``'s
form: ``grpo_lite.cli.trl_form.trl_spelling``): every error made meanwhile, and every line the run prints
(:func:`spelled`), then names the flags as that command takes them.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Any, Callable, Iterator

SPELLING: ContextVar[Callable[[str], str] | None] = ContextVar("grpo_lite_spelling", default=None)


def spelled(text: str) -> str:
    """``text`` in the spelling of the command that runs (:data:`SPELLING`), else as written."""
    respell = SPELLING.get()
    return text if respell is None else respell(text)


@contextlib.contextmanager
def spelling(respell: Callable[[str], str]) -> Iterator[None]:
    """Messages made inside the block are spelled by ``respell`` (the form the user's command was written in)."""
    token = SPELLING.set(respell)
    try:
        yield
    finally:
        SPELLING.reset(token)


class GrpoLiteError(Exception):
    """Base class: the message says what was wrong and what to change."""

    def __init__(self, message: str = "", *args: Any) -> None:
        super().__init__(spelled(message), *args)


class ConfigError(GrpoLiteError, ValueError):
    """A setting is invalid (unknown name, bad value, batch sizes that do not divide...)."""


class DataError(GrpoLiteError, ValueError):
    """A dataset is missing, unreadable, empty, or has rows without a usable answer."""


class ModelError(GrpoLiteError, LookupError):
    """A model name, path or config cannot be resolved."""


class DoesNotFitError(GrpoLiteError):
    """No preset fits the memory budget."""

    def __init__(self, message: str, smallest_budget_gb: float | None = None, preset: str | None = None):
        super().__init__(message)
        self.smallest_budget_gb = smallest_budget_gb  # the smallest nominal budget (GB) at which some preset fits
        self.preset = preset  # the name of the preset that would fit at that budget


class OutputDirError(GrpoLiteError, OSError):
    """The output folder cannot take the run: a file in the way, read-only, full, or held by another run."""


class RewardError(GrpoLiteError, ValueError):
    """A reward function returned something that is not one number (or None) per completion."""


class ExportError(GrpoLiteError, OSError):
    """Writing an exported file failed (a full disk, a folder that cannot be written); nothing is left half-written."""


class SimulationError(GrpoLiteError, RuntimeError):
    """The full-size simulation of a plan (``grpo-lite plan --simulate``) could not run the step; the plan stands."""
