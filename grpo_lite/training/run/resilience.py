"""Nothing a user did must cost them finished work: output-dir guard, Ctrl-C, OOM step-down, failures.

The guard, the stop-signal callbacks, the save at the end, the next rung down after an out-of-memory error and
a full disk said as such (docs/internals.md). Imported only inside functions: it imports transformers at the top.
"""

from __future__ import annotations

import errno
import inspect
import os
import shutil
import signal
import sys
import warnings
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from transformers import TrainerCallback

from grpo_lite import files
from grpo_lite.errors import ConfigError, DoesNotFitError, OutputDirError
from grpo_lite.files import remove
from grpo_lite.planning import hardware
from grpo_lite.planning.choose import plan
from grpo_lite.planning.ladder import LADDER
from grpo_lite.training.checks import format_bytes
from grpo_lite.training.run.checkpoints import scan

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan

__all__ = [
    "Aborted",
    "InterruptCallback",
    "NothingLeft",
    "SaveAtEndCallback",
    "StopWhenDone",
    "continue_schedule",
    "disk_full_error",
    "drop_checkpoints",
    "finish_first",
    "guard_output_dir",
    "next_plan",
    "sigterm_raises",
    "stop_signals_save",
    "train_advice",
]

_RUN_MARKERS = ("run.json", "final", "history.jsonl")


def drop_checkpoints(output_dir: Path) -> None:
    """Remove the ``checkpoint-N`` folders of an attempt that stepped down (another rung cannot resume them)."""
    for child in output_dir.glob("checkpoint-*"):
        remove(child)  # a link is unlinked, its target kept


def guard_output_dir(output_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """Check ``output_dir`` before a run (the resume point is :func:`grpo_lite.training.run.resume.resume_point`).

    With ``overwrite`` the old run's entries (:data:`grpo_lite.files.RUN_ENTRIES`, its exports included) are removed;
    a link among them is unlinked, never followed. Otherwise a link where the run writes is refused.

    Raises:
        ConfigError: the folder holds another run and neither resume nor overwrite was asked, or both were asked.
        OutputDirError: a symbolic link where the run writes (not with overwrite, which removes it).
    """
    if resume and overwrite:
        raise ConfigError("resume=True and overwrite=True contradict each other: choose one")
    if not output_dir.is_dir():
        return
    holds_run = any(os.path.lexists(output_dir / m) for m in _RUN_MARKERS) or any(
        p.is_dir() for p in output_dir.glob("checkpoint-*")
    )
    if holds_run and not resume and not overwrite:
        way = (
            "pass resume=True (--resume) to continue it, "
            if scan(output_dir).newest is not None
            else "it has no complete checkpoint to resume: pass "
        )
        raise ConfigError(
            f"{output_dir} already holds a run (run.json or checkpoints); {way}overwrite=True "
            "(--overwrite) to replace it, or another output_dir"
        )
    if overwrite:  # the old run's final.gguf would pass for this run's: its exports go too
        for entry in files.run_entries(output_dir):
            if holds_run or entry.is_symlink():  # in a folder without a run, only the links where the run writes
                files.remove(entry)
    files.refuse_links(output_dir)


_DISK_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))


def disk_full_error(exc: BaseException, out: Path, need_bytes: float, checkpoint: Path | None) -> OutputDirError | None:
    """The error to show when ``exc`` came from a full disk, else None.

    A full disk shows up as ``OSError(ENOSPC)`` from Python's own writes, but torch's zip writer
    reports it as a ``RuntimeError`` without an errno: then the free space left decides (less than
    one checkpoint needs).
    """
    chain, seen = [], exc
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    by_errno = any(isinstance(e, OSError) and e.errno in _DISK_FULL for e in chain)
    by_text = any("No space left on device" in str(e) or "Disk quota exceeded" in str(e) for e in chain)
    try:
        free = shutil.disk_usage(out).free
    except OSError:
        free = None
    if not (by_errno or by_text or (free is not None and free < need_bytes and not isinstance(exc, KeyboardInterrupt))):
        return None
    have = "" if free is None else f" ({format_bytes(free)} free now)"
    why = f"the disk holding {out} ran out of space{have}: {str(exc).splitlines()[0][:160] or type(exc).__name__}. "
    if checkpoint is None:  # --resume refuses a run without a complete checkpoint: only a new start is left
        return OutputDirError(
            f"{why}no checkpoint is complete yet, so there is nothing to resume; free at least "
            f"{format_bytes(need_bytes)} and start again with the same command plus --overwrite (Python: overwrite=True)"
        )
    return OutputDirError(
        f"{why}{checkpoint.name} is complete; free at least {format_bytes(need_bytes)} and resume with the same command "
        f"plus --resume (Python: resume=True); a cut-off checkpoint is then moved to {out / 'incomplete'}"
    )


def train_advice(message: str, prompt_tokens: int) -> str:
    """A planner message with advice train() can take: it measures prompts, so max_prompt_length is not a setting."""
    tail = (
        f"Or lower max_completion_length or num_generations (floor 4) (--set key=value; Python: key=value), "
        f"shorten the prompts (train() plans for the longest, {prompt_tokens} tokens: drop the longest rows "
        "from the dataset), or spread over more GPUs (--num-processes N with --sharding)."
    )
    cut = message.find(" Or shorten max_prompt_length")
    return (message[:cut] + " " + tail) if cut >= 0 else f"{message} ({tail[3:]})"


class SaveAtEndCallback(TrainerCallback):
    """Save a checkpoint after the last step, whatever ``save_steps`` is, so the run can be resumed."""

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
        if state.max_steps > 0 and state.global_step >= state.max_steps and args.save_strategy != "no":
            control.should_save = True


class NothingLeft(Exception):
    """Raised by :class:`StopWhenDone`: the resumed checkpoint (now loaded) holds every step of the run."""


class StopWhenDone(TrainerCallback):
    """End ``train()`` before its first step when the resumed checkpoint already holds every step.

    transformers loads the checkpoint (weights, optimizer, state) before ``on_train_begin``; its loop
    checks for the end only after a step, so it would train one step past ``max_steps``.
    """

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
        if state.max_steps > 0 and state.global_step >= state.max_steps:
            raise NothingLeft


class Aborted(KeyboardInterrupt):
    """A stop signal the run cannot finish a step for: it stops at once, without saving (``signum``: the signal;
    ``output_dir``: the run folder, when the handler knew it)."""

    def __init__(self, signum: int, output_dir: Path | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.output_dir = output_dir


class InterruptCallback(TrainerCallback):
    """Turns a requested stop (Ctrl-C, SIGTERM) into: finish this step, save a checkpoint, stop training."""

    def __init__(self) -> None:
        self.requested = False
        self.signal: str | None = None  # "SIGINT", "SIGTERM" or "SIGHUP": the signal that asked
        self.stopped_at: int | None = None

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
        if self.requested:
            control.should_save = True
            control.should_training_stop = True
            self.stopped_at = state.global_step


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


def sigterm_raises(output_dir: Path | None = None) -> Callable[[], None]:
    """From now on SIGTERM (and SIGHUP: a closed terminal) raises :class:`Aborted`, as Ctrl-C raises
    KeyboardInterrupt (outside the training loop there is no step to finish): the run records how it ended and
    gives its folder back.

    Args:
        output_dir: the run folder, carried by the :class:`Aborted` raised (what to say next depends on what it holds).

    Returns:
        The function that puts the previous handlers back (nothing to do outside the main thread).
    """

    def handler(signum: int, frame: Any) -> None:
        raise Aborted(signum, output_dir)

    try:
        previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, *_HUP)}
    except ValueError:  # pragma: no cover - not the main thread: leave signals alone
        return lambda: None

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, old)

    return restore


@contextmanager
def _first_stop_then_abort(first: Callable[[int], None]) -> Iterator[None]:
    """While active, the first SIGINT, SIGTERM or SIGHUP calls ``first(signum)``; a second one puts the previous
    handlers back and raises :class:`Aborted` (a KeyboardInterrupt). Outside the main thread signals are left alone."""
    try:
        previous = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    except ValueError:  # pragma: no cover - not the main thread: leave signals alone
        yield
        return
    asked: list[int] = []

    def restore() -> None:
        for signum, old in previous.items():
            signal.signal(signum, old)

    def handler(signum: int, frame: Any) -> None:
        if asked:
            restore()
            raise Aborted(signum)
        asked.append(signum)
        first(signum)

    try:
        for signum in _STOP_SIGNALS:
            signal.signal(signum, handler)
    except ValueError:  # pragma: no cover - not the main thread (the first call fails: nothing was set)
        yield
        return
    try:
        yield
    finally:
        restore()


def stop_signals_save(callback: InterruptCallback) -> AbstractContextManager[None]:
    """While active, the first SIGINT, SIGTERM or SIGHUP asks ``callback`` to save and stop; a second one raises
    :class:`Aborted` (a KeyboardInterrupt). Outside the main thread signals are left alone."""

    def first(signum: int) -> None:
        callback.requested, callback.signal = True, signal.Signals(signum).name
        name, again = _SAID[signum]
        _say(f"\n{name}: finishing the current step and saving a checkpoint ({again} to abort without saving)")

    return _first_stop_then_abort(first)


def finish_first(what: str) -> AbstractContextManager[None]:
    """While active, the first SIGINT, SIGTERM or SIGHUP is said and ``what`` (the final save: every step is trained)
    goes on to its end, so the run ends finished; a second one raises :class:`Aborted`. Outside the main thread
    signals are left alone."""

    def first(signum: int) -> None:
        name, again = _SAID[signum]
        _say(f"\n{name}: every step is trained; finishing {what} first, then the run ends ({again} to abort)")

    return _first_stop_then_abort(first)


def next_plan(current: Plan, **plan_kwargs: Any) -> Plan:
    """The first rung below ``current.preset`` that fits, with the same user-fixed settings.

    Args:
        current: the plan that ran out of memory.
        **plan_kwargs: what plan() was called with (budget_gb, device, max_prompt_length, ...),
            without ``preset``/``method``.

    Raises:
        DoesNotFitError: ``current`` is the bottom rung, or nothing below it fits; the message says
            what budget would be needed.
    """
    extras = hardware.installed_extras()  # through the module: tests stand in for the probe
    names = [p.name for p in LADDER]
    below = [p for p in LADDER[names.index(current.preset.name) + 1 :] if all(getattr(extras, r) for r in p.requires)]
    fixed = dict(current.fixed)
    for key in ("method", "preset"):
        fixed.pop(key, None)
    last_error: DoesNotFitError | None = None
    for rung in below:
        try:
            return plan(current.model, preset=rung.name, **plan_kwargs, **fixed)
        except DoesNotFitError as exc:
            last_error = exc
        except ConfigError:  # a setting the user fixed rules this rung out (e.g. an optimizer): try the next
            continue
    need = f"; {train_advice(str(last_error), plan_kwargs.get('max_prompt_length', 0))}" if last_error else ""
    raise DoesNotFitError(
        f"out of GPU memory on preset {current.preset.name!r} and no cheaper rung is left to step down to{need}. "
        "Use a larger GPU, or set a smaller num_generations, max_completion_length or per_device_train_batch_size "
        "(--set key=value; Python: key=value)",
        smallest_budget_gb=getattr(last_error, "smallest_budget_gb", None),
        preset=getattr(last_error, "preset", None),
    )


def continue_schedule(trainer: Any, *, offset: int, total_steps: int) -> str:
    """Make ``trainer``'s learning-rate schedule the whole run's, started at step ``offset``.

    After a step down the next rung's trainer counts its steps from 0; left alone it would warm up
    and decay again over the steps left. Instead its scheduler is the run's own (warmup and decay
    over ``total_steps``) read ``offset`` steps ahead. A resumed attempt loads the scheduler's step
    from its checkpoint on top of that. Transformers documents ``create_scheduler`` as the method to
    override; the override is this trainer's only (an instance attribute).

    Returns:
        What the run record says about the schedule (``"continues at step 2 of 6"``, or why it restarts).
    """
    from torch.optim.lr_scheduler import LambdaLR  # heavy: torch
    from transformers import Trainer
    from transformers.optimization import get_scheduler

    args = trainer.args
    if list(inspect.signature(Trainer.create_scheduler).parameters)[:3] != ["self", "num_training_steps", "optimizer"]:
        note = "restarts: transformers' Trainer.create_scheduler is not the one grpo-lite knows"
        warnings.warn(f"the learning-rate schedule {note}", stacklevel=2)
        return note
    kind = str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type))
    if kind == "reduce_lr_on_plateau" or "layerwise" in str(getattr(args.optim, "value", args.optim)):
        return f"restarts: a {kind} schedule (or a layer-wise optimizer's) cannot start at a later step"

    def create_scheduler(num_training_steps: int, optimizer: Any = None) -> Any:
        if trainer.lr_scheduler is None:
            optimizer = optimizer if optimizer is not None else trainer.optimizer
            whole = get_scheduler(
                args.lr_scheduler_type,
                optimizer=optimizer,
                num_warmup_steps=args.get_warmup_steps(total_steps),
                num_training_steps=total_steps,
                scheduler_specific_kwargs=args.lr_scheduler_kwargs,
            )
            if type(whole) is LambdaLR:
                trainer.lr_scheduler = LambdaLR(optimizer, [_shifted(f, offset) for f in whole.lr_lambdas])
            else:  # pragma: no cover - a transformers release whose schedulers are not LambdaLR
                warnings.warn(
                    f"the {kind} learning-rate schedule is not a LambdaLR: it starts at step 0 of the whole "
                    f"run's schedule instead of step {offset}",
                    stacklevel=2,
                )
                trainer.lr_scheduler = whole
        return trainer.lr_scheduler

    trainer.create_scheduler = create_scheduler
    return f"continues at step {offset} of {total_steps}"


def _shifted(schedule: Callable[[int], float], offset: int) -> Callable[[int], float]:
    """``schedule`` read ``offset`` steps ahead (a plain function: LambdaLR does not save it in its state)."""

    def shifted(step: int) -> float:
        return schedule(step + offset)

    return shifted
