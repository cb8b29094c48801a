"""Nothing a user did must cost them finished work: output-dir guard, resume, Ctrl-C, OOM step-down.

- :func:`guard_output_dir` refuses a folder that holds another run unless resume or overwrite is asked.
- :class:`InterruptCallback` with :func:`sigint_saves`: the first Ctrl-C finishes the current step,
  saves a loadable checkpoint and stops; a second Ctrl-C aborts at once.
- :class:`SaveAtEndCallback`: the last step always leaves a checkpoint, so every run can be resumed.
- :func:`next_plan`: the next cheaper rung of the ladder that fits, for stepping down after a CUDA
  out-of-memory error (``train(on_oom="step_down")``).

Imported only inside train(): it imports transformers at the top.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from transformers import TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

from grpo_lite.errors import ConfigError, DoesNotFitError

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan

__all__ = [
    "EarlierRun",
    "InterruptCallback",
    "SaveAtEndCallback",
    "drop_checkpoints",
    "earlier_run",
    "guard_output_dir",
    "latest_checkpoint",
    "next_plan",
    "sigint_saves",
]

_RUN_MARKERS = ("run.json", "final")


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest ``checkpoint-N`` folder in ``output_dir``, or None."""
    path = Path(output_dir)
    if not path.is_dir():
        return None
    found = get_last_checkpoint(str(path))
    return Path(found) if found else None


@dataclass
class EarlierRun:
    """What a resumed run takes over from the run.json of the run it continues.

    Attributes:
        preset: the rung the checkpoint was trained on (after any out-of-memory step down).
        source: the weights that attempt started from (a ``stepdown-N`` folder), or None for the model itself.
        done: steps completed before that attempt started (by attempts before a step down).
        checkpoint_step: the checkpoint's own step count (counted from that attempt's start).
        max_steps: the run's total steps, or None.
        history: logged rows up to the checkpoint.
        events: earlier events (step downs, interrupts, resumes).
    """

    preset: str | None
    source: str | None
    done: int
    checkpoint_step: int
    max_steps: int | None
    history: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


def earlier_run(output_dir: Path, checkpoint: Path) -> EarlierRun:
    """Read the run.json beside ``checkpoint`` so a resume goes on where that run's last attempt was."""
    step = int(checkpoint.name.rsplit("-", 1)[-1])
    path = output_dir / "run.json"
    if not path.is_file():  # a checkpoint without our record (e.g. written by plain TRL): take it as it is
        return EarlierRun(preset=None, source=None, done=0, checkpoint_step=step, max_steps=None)
    record = json.loads(path.read_text())
    events = list(record.get("events", []))
    step_downs = [e for e in events if e.get("event") == "out_of_memory"]
    done = step_downs[-1]["step"] if step_downs else 0
    return EarlierRun(
        preset=record.get("plan", {}).get("preset"),
        source=step_downs[-1]["weights"] if step_downs else None,
        done=done,
        checkpoint_step=step,
        max_steps=record.get("max_steps"),
        history=[row for row in record.get("history", []) if row.get("step", 0) <= done + step],
        events=events,
    )


def drop_checkpoints(output_dir: Path) -> None:
    """Remove the ``checkpoint-N`` folders of an attempt that stepped down (another rung cannot resume them)."""
    for child in output_dir.glob("checkpoint-*"):
        if child.is_dir():
            shutil.rmtree(child)


def guard_output_dir(output_dir: Path, *, resume: bool, overwrite: bool) -> Path | None:
    """Check ``output_dir`` before a run; return the checkpoint to resume from (or None).

    Raises:
        ConfigError: the folder holds another run and neither resume nor overwrite was asked,
            or both were asked, or resume was asked but there is no checkpoint.
    """
    if resume and overwrite:
        raise ConfigError("resume=True and overwrite=True contradict each other: choose one")
    holds_run = output_dir.is_dir() and (
        any((output_dir / m).exists() for m in _RUN_MARKERS) or latest_checkpoint(output_dir) is not None
    )
    if resume:
        ckpt = latest_checkpoint(output_dir)
        if ckpt is None:
            raise ConfigError(
                f"resume asked but {output_dir} holds no checkpoint-N folder; "
                "drop resume to start a new run, or point output_dir at the run to continue"
            )
        return ckpt
    if holds_run:
        if not overwrite:
            raise ConfigError(
                f"{output_dir} already holds a run (run.json or checkpoints); pass resume=True "
                "(--resume) to continue it, overwrite=True (--overwrite) to replace it, or another output_dir"
            )
        for child in output_dir.iterdir():
            if child.name.startswith("checkpoint-") or child.name in _RUN_MARKERS or child.name == "reward_curve.png":
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    return None


class SaveAtEndCallback(TrainerCallback):
    """Save a checkpoint after the last step, whatever ``save_steps`` is, so the run can be resumed."""

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
        if state.max_steps > 0 and state.global_step >= state.max_steps and args.save_strategy != "no":
            control.should_save = True


class InterruptCallback(TrainerCallback):
    """Turns a requested stop (Ctrl-C) into: finish this step, save a checkpoint, stop training."""

    def __init__(self) -> None:
        self.requested = False
        self.stopped_at: int | None = None

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
        if self.requested:
            control.should_save = True
            control.should_training_stop = True
            self.stopped_at = state.global_step


@contextmanager
def sigint_saves(callback: InterruptCallback) -> Iterator[None]:
    """While active, the first SIGINT asks ``callback`` to save and stop; the second aborts."""
    try:
        previous = signal.getsignal(signal.SIGINT)
    except ValueError:  # pragma: no cover - not the main thread: leave signals alone
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if callback.requested:
            signal.signal(signal.SIGINT, previous)
            raise KeyboardInterrupt
        callback.requested = True
        print(
            "\nCtrl-C: finishing the current step and saving a checkpoint (Ctrl-C again to abort without saving)",
            file=sys.stderr,
            flush=True,
        )

    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # pragma: no cover - not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


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
    from grpo_lite.planning.hardware import installed_extras
    from grpo_lite.planning.choose import plan
    from grpo_lite.planning.ladder import LADDER

    extras = installed_extras()
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
    need = f"; {last_error}" if last_error else ""
    raise DoesNotFitError(
        f"out of GPU memory on preset {current.preset.name!r} and no cheaper rung is left to step down to{need}. "
        "Use a larger GPU, fix a smaller num_generations / max_completion_length / per_device_train_batch_size, "
        "or shorten the prompts",
        smallest_budget_gb=getattr(last_error, "smallest_budget_gb", None),
        preset=getattr(last_error, "preset", None),
    )
