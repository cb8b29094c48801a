"""The run folder: chosen, checked, locked and guarded before the run; its disk watched around it (docs/internals.md).
A leaf of training/: it imports nothing of the pipeline above it."""

from __future__ import annotations

import errno
import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from grpo_lite import errors, files
from grpo_lite.defaults import GIB, RUN
from grpo_lite.errors import ConfigError, GrpoLiteError, OutputDirError
from grpo_lite.files import write_json as write_json_atomic
from grpo_lite.recipe.departures import trl_defaults
from grpo_lite.training.run.lock import RunLock
from grpo_lite.training.run.ranks import process_state

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.models import ModelSpec
    from grpo_lite.planning.result import Plan
    from grpo_lite.recipe.recipe import Recipe

_FOLDER_OPTION = "(--output-dir DIR; Python: output_dir=...)"


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
    recipe: Recipe,
    method: str | None,
) -> RunFolder:
    """Choose, check, lock and guard the output folder (one for all ranks); find the checkpoint to resume from.

    The main process does the checks and takes the lock; its error, if any, is raised on every rank. A resume
    is checked (same model, preset and method; steps: ``recipe``'s) before anything in the folder is written.
    """
    from rich.console import Console  # loaded to draw: rich

    from grpo_lite.training.run import resilience  # heavy: it imports transformers
    from grpo_lite.training.run import resume as resuming

    state = process_state()
    console = Console(quiet=quiet or not state.is_main_process)
    asked: dict[str, Any] = {"max_steps": recipe.max_steps, "preset": recipe.preset, "method": method}
    out = Path(output_dir) if output_dir is not None else default_output_dir(spec.name)
    if output_dir is None and state.num_processes > 1:  # one timestamped folder for every rank
        from accelerate.utils import broadcast_object_list  # heavy: accelerate (imports torch)

        out = Path(broadcast_object_list([str(out)], from_process=0)[0])
    run = RunFolder(out, state, console, None, None)
    error: GrpoLiteError | None = None
    if state.is_main_process:  # one process checks (and, with overwrite, clears) the folder; the rest wait
        try:
            run.created = not out.exists()
            check_output_dir(out)
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


def check_output_dir(out: Path) -> None:
    """Create ``out`` if needed and check that files can be written there.

    Raises:
        OutputDirError: ``out`` (or a folder above it) is a file, or the folder cannot be created or written.
    """
    hint = f"pass a folder you can write to {_FOLDER_OPTION}"
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"output folder {out} is a file, not a folder; {hint}")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in out.parents if p.exists() and not p.is_dir()), out)
        raise OutputDirError(f"cannot create the output folder {out}: {blocker} is a file; {hint}") from None
    except OSError as exc:
        raise OutputDirError(f"cannot create the output folder {out}: {exc.strerror}; {hint}") from None
    probe = out / f".grpo-lite-write-test-{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
            probe.unlink(missing_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot write in the output folder {out}: {exc.strerror}; {hint}") from None


def format_bytes(n: float) -> str:
    """``3 * 2**30`` -> '3.00 GiB'; below 1 GiB in MiB.

    >>> format_bytes(3 * 2**30), format_bytes(5 * 2**20)
    ('3.00 GiB', '5.0 MiB')
    """
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 2**20:.1f} MiB"


def check_disk(run: RunFolder, the_plan: Plan) -> None:
    """Before the model loads: room on the disk holding the run for one checkpoint of ``the_plan``; a warning line
    when it may not hold the whole run (``save_total_limit`` checkpoints, the one being written, the final model).

    Raises:
        OutputDirError: less free space than one checkpoint needs; the message gives both sizes.
    """
    from grpo_lite.training.run.checkpoints import INCOMPLETE_DIR, checkpoint_bytes  # heavy: imports transformers

    if the_plan.settings.get("save_strategy", trl_defaults()["save_strategy"]) == "no":
        return
    keep = the_plan.settings.get("save_total_limit", RUN["save_total_limit"].value)
    out, need = run.out, checkpoint_bytes(the_plan)
    free = shutil.disk_usage(out).free
    if free < need:
        cut_off = sum(p.stat().st_size for p in (out / INCOMPLETE_DIR).rglob("*") if p.is_file())
        note = f"; {out / INCOMPLETE_DIR} holds {format_bytes(cut_off)} of cut-off checkpoints you can delete"
        raise OutputDirError(
            f"the disk holding {out} has {format_bytes(free)} free; one checkpoint of this run needs "
            f"about {format_bytes(need)}: free some space or pass another output folder "
            f"{_FOLDER_OPTION}{note if cut_off else ''}"
        )
    whole = need * ((keep or 1) + 1) + need  # the checkpoints kept, the one being written, the final model
    if free < whole:
        run.console.print(
            f"[yellow]disk: {format_bytes(free)} free in {out}; this run may write up to {format_bytes(whole)} "
            f"(checkpoints of about {format_bytes(need)} each and the final model)[/yellow]"
        )


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
