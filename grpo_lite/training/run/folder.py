"""The run folder: chosen, checked, locked and guarded before the run; its disk watched around it.

:func:`open_run` (one folder for every rank), :func:`default_output_dir`, :func:`check_disk` and
:func:`disk_full` (docs/internals.md).
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite import errors
from grpo_lite.errors import GrpoLiteError
from grpo_lite.training import checks
from grpo_lite.training.build import RUN_DEFAULTS
from grpo_lite.training.checks import check_free_space
from grpo_lite.training.report.summary import write_json_atomic
from grpo_lite.training.run.attempts import RunFolder
from grpo_lite.training.run.lock import RunLock
from grpo_lite.training.run.ranks import process_state

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.models import ModelSpec
    from grpo_lite.planning.result import Plan
    from grpo_lite.training.arguments import Request

__all__ = ["check_disk", "default_output_dir", "disk_full", "open_run"]


def default_output_dir(model: str) -> Path:
    """``runs/<model>-<time>``: the run folder when none is named."""
    slug = Path(str(model)).name.removesuffix(".gguf").replace("/", "-") or "model"
    return Path("runs") / f"{slug}-{datetime.now():%Y%m%d-%H%M%S}"


def open_run(
    spec: ModelSpec,
    output_dir: str | os.PathLike | None,
    *,
    resume: bool,
    overwrite: bool,
    quiet: bool,
    request: Request | None = None,
) -> RunFolder:
    """Choose, check, lock and guard the output folder (one for all ranks); find the checkpoint to resume from.

    The main process does the checks and takes the lock; its error, if any, is raised on every rank. A resume
    is checked (same model, preset and method; steps: ``request``'s) before anything in the folder is written.
    """
    from rich.console import Console  # loaded to draw: rich

    from grpo_lite.training.run import resilience, resume_checks  # heavy: they import transformers
    from grpo_lite.training.run import resume as resuming

    state = process_state()
    console = Console(quiet=quiet or not state.is_main_process)
    asked: dict[str, Any] = {"max_steps": None, "preset": None, "method": None}
    if request is not None:
        asked = {"max_steps": request.max_steps, "preset": request.preset, "method": request.method}
    out = Path(output_dir) if output_dir is not None else default_output_dir(spec.name)
    if output_dir is None and state.num_processes > 1:  # one timestamped folder for every rank
        from accelerate.utils import broadcast_object_list  # heavy: accelerate (imports torch)

        out = Path(broadcast_object_list([str(out)], from_process=0)[0])
    run = RunFolder(out, state, console, None, None)
    error: GrpoLiteError | None = None
    if state.is_main_process:  # one process checks (and, with overwrite, clears) the folder; the rest wait
        try:
            run.created = not out.exists()
            checks.check_output_dir(out)
            run.lock = RunLock.acquire(out)
            stale = run.lock.stale_note()
            if stale and not resume:
                console.print(f"[yellow]{stale}[/yellow]")
            resilience.guard_output_dir(out, resume=resume, overwrite=overwrite)
            if resume:  # before anything is written: same model, preset, method; steps left
                run.finished, line = resume_checks.check_resume(out, spec.model_id, **asked)
                if line is not None:
                    console.print(line if run.finished else f"[yellow]{line}[/yellow]", highlight=False, soft_wrap=True)
                if run.finished:  # "nothing changed" is the run's last line: reading its inputs again says nothing
                    console.quiet = True
            if resume and not run.finished:
                run.checkpoint, notes = resuming.resume_point(out, move=True)
                run.earlier = resuming.earlier_run(out, run.checkpoint, main=True)
                run.earlier.notes[:0] = ([stale] if stale else []) + notes
                for note in run.earlier.notes:
                    console.print(f"[yellow]{note}[/yellow]")
                _record_crash(out, run.earlier)
        except GrpoLiteError as exc:
            run.release()
            error = exc
        except BaseException:  # anything else (a bug, Ctrl-C): the lock is not left behind either
            run.release()
            raise
    error = _shared_error(state, error)
    if error is not None:
        raise error
    if resume and not state.is_main_process:
        run.finished, _ = resume_checks.check_resume(out, spec.model_id, **asked)
    if resume and (run.finished or not state.is_main_process):
        run.checkpoint, _ = resuming.resume_point(out, move=False)
        run.earlier = resuming.earlier_run(out, run.checkpoint, main=False)
    run.restore_sigterm = resilience.sigterm_raises(out)  # until run.release(): SIGTERM stops the run as Ctrl-C does
    return run


def _shared_error(state: Any, error: GrpoLiteError | None) -> GrpoLiteError | None:
    """The main process's error on every rank (the others would otherwise wait for it forever)."""
    if state.num_processes > 1:
        from accelerate.utils import broadcast_object_list  # heavy: accelerate (imports torch)

        kind, text = broadcast_object_list(
            [type(error).__name__ if error else None, str(error) if error else None], from_process=0
        )
        if error is None and kind is not None:
            error = getattr(errors, kind, errors.GrpoLiteError)(text)
    state.wait_for_everyone()
    return error


def _record_crash(out: Path, earlier: Any) -> None:
    """A run whose record said ``running`` when nobody held its lock crashed: say so in run.json now."""
    from grpo_lite.training.run.resume import read_record  # heavy: imports transformers

    if not any(e.get("event") == "crashed" for e in earlier.events[-1:]):
        return
    record, _ = read_record(out, move=False)
    if record is not None:
        write_json_atomic(out / "run.json", {**record, "status": "crashed", "events": earlier.events})


def check_disk(run: RunFolder, the_plan: Plan) -> None:
    """Before the model loads: room on the disk for one checkpoint (a warning when the whole run may not fit)."""
    if the_plan.settings.get("save_strategy", RUN_DEFAULTS["save_strategy"]) == "no":
        return
    keep = the_plan.settings.get("save_total_limit", RUN_DEFAULTS["save_total_limit"])
    note = check_free_space(run.out, the_plan, keep=keep)
    if note:
        run.console.print(f"[yellow]{note}[/yellow]")


def disk_full(exc: BaseException, run: RunFolder, the_plan: Plan) -> Exception | None:
    """A failure caused by a full disk, as an OutputDirError that says so (None for any other failure, and for
    grpo-lite's own errors, which say what they are)."""
    from grpo_lite.training.run import checkpoints  # heavy: imports transformers
    from grpo_lite.training.run.resilience import disk_full_error

    if isinstance(exc, GrpoLiteError):
        return None
    return disk_full_error(exc, run.out, checkpoints.checkpoint_bytes(the_plan), checkpoints.scan(run.out).newest)
