"""The run folder: chosen, checked, locked and guarded before the run; its disk watched around it (docs/internals.md)."""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from grpo_lite import errors, files
from grpo_lite.defaults import RUN
from grpo_lite.errors import ConfigError, GrpoLiteError, OutputDirError
from grpo_lite.files import write_json as write_json_atomic
from grpo_lite.recipe.departures import trl_defaults
from grpo_lite.training import checks
from grpo_lite.training.checks import check_free_space, format_bytes
from grpo_lite.training.run.lock import RunLock
from grpo_lite.training.run.ranks import process_state

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.models import ModelSpec
    from grpo_lite.planning.result import Plan
    from grpo_lite.training.arguments import Request


@dataclass
class RunFolder:
    """Where the run writes, who is the main process, and what an earlier run left to resume."""

    out: Path
    state: Any  # accelerate.PartialState
    console: Any  # rich.console.Console
    checkpoint: Path | None
    earlier: Any  # resume.EarlierRun | None
    lock: Any = None  # RunLock on the main process, held for the run's life
    created: bool = False  # the run made the folder: an early failure leaves no empty folder behind
    finished: bool = False  # resume found the run finished with no steps left: nothing is trained or written
    restore_sigterm: Callable[[], Any] | None = None  # puts back the SIGTERM handler train() found

    def release(self) -> None:
        """Give the folder back (the main process removes its lock, and the folder if it made it and it is empty)."""
        if self.restore_sigterm is not None:
            self.restore_sigterm()
            self.restore_sigterm = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None
            if self.created:
                try:
                    self.out.rmdir()  # only when empty
                except OSError:
                    pass


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
    request: Request,
) -> RunFolder:
    """Choose, check, lock and guard the output folder (one for all ranks); find the checkpoint to resume from.

    The main process does the checks and takes the lock; its error, if any, is raised on every rank. A resume
    is checked (same model, preset and method; steps: ``request``'s) before anything in the folder is written.
    """
    from rich.console import Console  # loaded to draw: rich

    from grpo_lite.training.run import resilience  # heavy: it imports transformers
    from grpo_lite.training.run import resume as resuming

    state = process_state()
    console = Console(quiet=quiet or not state.is_main_process)
    recipe = request.recipe
    asked: dict[str, Any] = {"max_steps": recipe.max_steps, "preset": recipe.preset, "method": request.method}
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
            guard_output_dir(out, resume=resume, overwrite=overwrite)
            if resume:  # before anything is written: same model, preset, method; steps left
                run.finished, line = resuming.check_resume(out, spec.model_id, **asked)
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
        run.finished, _ = resuming.check_resume(out, spec.model_id, **asked)
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
    if the_plan.settings.get("save_strategy", trl_defaults()["save_strategy"]) == "no":
        return
    keep = the_plan.settings.get("save_total_limit", RUN["save_total_limit"].value)
    note = check_free_space(run.out, the_plan, keep=keep)
    if note:
        run.console.print(f"[yellow]{note}[/yellow]")


_RUN_MARKERS = ("run.json", "run.json.corrupt", "history.jsonl")  # a final/ alone may be a project's folder


def guard_output_dir(output_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """Check ``output_dir`` before a run. With ``overwrite`` the old run's entries (:data:`grpo_lite.files.RUN_ENTRIES`,
    its exports included) are removed, a link unlinked, never followed; otherwise a link where the run writes is
    refused.

    Raises:
        ConfigError: the folder holds another run and neither resume nor overwrite was asked, or both were asked.
        OutputDirError: a symbolic link where the run writes (not with overwrite, which removes it); a folder
            without a run holds a file or folder of the name a run writes (a user's README.md).
    """
    from grpo_lite.training.run import checkpoints  # heavy: imports transformers

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
            if checkpoints.scan(output_dir).newest is not None
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
    if not holds_run:  # a folder without a run: what it holds where a run writes is the user's (a README.md)
        _refuse_foreign(output_dir)


def _refuse_foreign(output_dir: Path) -> None:
    """Refuse a folder without a run that holds entries a run would write over (``--output-dir .`` in a project).

    Raises:
        OutputDirError: naming them.
    """
    foreign = [entry.name for entry in files.run_entries(output_dir)]
    if foreign:
        raise OutputDirError(
            f"{output_dir} holds {', '.join(foreign)}, which grpo-lite did not write and a run would replace; "
            "nothing was changed: move them away, or pass another output folder (--output-dir DIR; Python: "
            "output_dir=...), a new or empty one"
        )


def disk_full(exc: BaseException, run: RunFolder, the_plan: Plan) -> Exception | None:
    """A failure caused by a full disk, as an OutputDirError that says so (None for any other failure, and for
    grpo-lite's own errors, which say what they are)."""
    from grpo_lite.training.run import checkpoints  # heavy: imports transformers

    if isinstance(exc, GrpoLiteError):
        return None
    return disk_full_error(exc, run.out, checkpoints.checkpoint_bytes(the_plan), checkpoints.scan(run.out).newest)


_DISK_FULL = (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))  # Windows has no EDQUOT


def disk_full_error(exc: BaseException, out: Path, need_bytes: float, checkpoint: Path | None) -> OutputDirError | None:
    """The error to show when ``exc`` came from a full disk, else None: an ``OSError(ENOSPC)``, or (torch's zip
    writer raises a RuntimeError without an errno) less free space left than one checkpoint needs."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
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
