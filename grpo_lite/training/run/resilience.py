"""Nothing a user did must cost them finished work: Ctrl-C, SIGTERM and SIGHUP save a checkpoint (a second one
aborts), the last step always saves, the final save finishes (docs/internals.md). Imports transformers at the top.
"""

from __future__ import annotations

import signal
import sys
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from transformers import TrainerCallback


class SaveAtEndCallback(TrainerCallback):
    """Save a checkpoint after the last step, whatever ``save_steps`` is, so the run can be resumed."""

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
        if state.max_steps > 0 and state.global_step >= state.max_steps and args.save_strategy != "no":
            control.should_save = True


class NothingLeft(Exception):
    """Raised by :class:`StopWhenDone`: the resumed checkpoint (now loaded) holds every step of the run."""


class StopWhenDone(TrainerCallback):
    """End ``train()`` before its first step when the resumed checkpoint already holds every step (transformers'
    loop looks for the end only after a step)."""

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
        if state.max_steps > 0 and state.global_step >= state.max_steps:
            raise NothingLeft


class Aborted(KeyboardInterrupt):
    """A stop signal the run cannot finish a step for: it stops at once, without saving (``signum``: the signal;
    ``output_dir``: the run folder, when the handler knew it; ``again``: a second signal, the first having asked for
    a step or a save to finish: run.json says ``aborted``, not ``interrupted``)."""

    def __init__(self, signum: int, output_dir: Path | None = None, *, again: bool = False) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.output_dir = output_dir
        self.again = again


class InterruptCallback(TrainerCallback):
    """Turns a requested stop (Ctrl-C, SIGTERM) into: finish this step, save a checkpoint, stop training."""

    def __init__(self) -> None:
        self.requested = False
        self.signal: str | None = None  # "SIGINT", "SIGTERM" or "SIGHUP": the signal that asked

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
        if self.requested:
            control.should_save = True
            control.should_training_stop = True


# what a user, a scheduler or a closed terminal sends to stop a run; POSIX has SIGHUP, Windows not
_HUP = (signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ()
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, *_HUP)
_SAID = {
    signal.SIGINT: ("Ctrl-C", "Ctrl-C again"),
    signal.SIGTERM: ("SIGTERM", "a second SIGTERM"),
    **{hup: ("SIGHUP (the terminal closed)", "a second SIGHUP") for hup in _HUP},
}


def _say(text: str) -> None:
    """One line on stderr; a terminal that closed (SIGHUP) cannot take it, and the run goes on without it."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _handle(signums: tuple[int, ...], handler: Callable[[int, Any], None]) -> Callable[[], None]:
    """Install ``handler`` for ``signums``; returns what puts the previous handlers back (outside the main thread
    nothing is installed)."""
    previous: dict[int, Any] = {}
    try:
        for signum in signums:
            previous[signum] = signal.signal(signum, handler)
    except ValueError:  # pragma: no cover - not the main thread: leave signals alone (the first call fails)
        pass

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, old)

    return restore


def sigterm_raises(output_dir: Path | None = None) -> Callable[[], None]:
    """From now on SIGTERM and SIGHUP raise :class:`Aborted` (carrying ``output_dir``), as Ctrl-C raises
    KeyboardInterrupt: outside the training loop there is no step to finish. Returns the function that puts the
    previous handlers back."""

    def handler(signum: int, frame: Any) -> None:
        raise Aborted(signum, output_dir)

    return _handle((signal.SIGTERM, *_HUP), handler)


@contextmanager
def _first_stop_then_abort(first: Callable[[int], None]) -> Iterator[None]:
    """While active, the first SIGINT, SIGTERM or SIGHUP calls ``first(signum)``; a second one puts the previous
    handlers back and raises :class:`Aborted`. Outside the main thread signals are left alone."""
    asked: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        if asked:
            restore()
            raise Aborted(signum, again=True)
        asked.append(signum)
        first(signum)

    restore = _handle(_STOP_SIGNALS, handler)
    try:
        yield
    finally:
        restore()


def stop_signals_save(callback: InterruptCallback) -> AbstractContextManager[None]:
    """While active, the first stop signal asks ``callback`` to save and stop; a second one raises :class:`Aborted`."""

    def first(signum: int) -> None:
        callback.requested, callback.signal = True, signal.Signals(signum).name
        name, again = _SAID[signum]
        _say(f"\n{name}: finishing the current step and saving a checkpoint ({again} to abort without saving)")

    return _first_stop_then_abort(first)


def finish_first(what: str) -> AbstractContextManager[None]:
    """While active, the first stop signal is said and ``what`` (the final save) goes on to its end, so the run
    ends finished; a second one raises :class:`Aborted`."""

    def first(signum: int) -> None:
        name, again = _SAID[signum]
        _say(f"\n{name}: every step is trained; finishing {what} first, then the run ends ({again} to abort)")

    return _first_stop_then_abort(first)
