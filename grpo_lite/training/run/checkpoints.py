"""Checkpoints a crash cannot corrupt: a ``checkpoint-N`` counts only when its marker, written last, says it is
complete (docs/internals.md). Imported only inside functions: it imports transformers at the top.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from transformers import TrainerCallback

from grpo_lite.files import inside, remove
from grpo_lite.files import write_json as write_json_atomic
from grpo_lite.memory import terms

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan


MARKER = "grpo_lite_checkpoint.json"  # written last: the checkpoint is complete
INCOMPLETE_DIR = "incomplete"  # where cut-off checkpoints are moved on resume
_NAME = re.compile(r"^checkpoint-(\d+)$")  # transformers' own pattern (trainer_utils._re_checkpoint)
_CARRIED = re.compile(r"^stepdown-(\d+)$")  # the weights a step down carried to the next rung
_EXTRA_BYTES = 16 * 2**20  # tokenizer, trainer state, RNG and scheduler state, config: under this


def checkpoint_step(path: Path) -> int | None:
    """``checkpoint-12`` -> 12; None for other names.

    >>> checkpoint_step(Path("out/checkpoint-12")), checkpoint_step(Path("out/final"))
    (12, None)
    """
    match = _NAME.match(Path(path).name)
    return int(match.group(1)) if match else None


def _files(folder: Path) -> dict[str, int]:
    return {
        str(p.relative_to(folder)): p.stat().st_size
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MARKER
    }


def read_marker(folder: Path) -> dict[str, Any] | None:
    """The marker's record, or None when there is none or it cannot be read."""
    try:
        record = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("files"), dict) else None


def why_incomplete(folder: Path) -> str | None:
    """Why ``folder`` is not a complete checkpoint, or None when it is one."""
    if (folder / MARKER).exists():
        record = read_marker(folder)
        if record is None:
            return f"its completion marker {MARKER} cannot be read"
        for name, size in record["files"].items():
            path = folder / name
            if not path.is_file():
                return f"{name} is missing"
            if path.stat().st_size != size:
                return f"{name} has {path.stat().st_size} bytes, {size} when it was saved"
        return None
    state = folder / "trainer_state.json"  # transformers writes it last
    if not state.is_file():
        return "trainer_state.json is missing: the save was cut off"
    try:
        json.loads(state.read_text())
    except (OSError, ValueError):
        return "trainer_state.json is cut off"
    return None


@dataclass
class Scan:
    """A run folder's resume point and the incomplete checkpoints (newest first), with why. The resume point is the
    newest complete checkpoint, or the weights a later step down carried (a marked ``stepdown-N``): a run killed
    before the next rung's first checkpoint goes on from them."""

    newest: Path | None
    incomplete: list[tuple[Path, str]] = field(default_factory=list)


def steps_held(folder: Path) -> int:
    """The run's steps ``folder`` holds: the steps done before its attempt (its marker's record) and its own (a
    ``checkpoint-N``'s N; none for a ``stepdown-N``)."""
    done = ((read_marker(folder) or {}).get("run") or {}).get("done")
    return (done if isinstance(done, int) else 0) + (checkpoint_step(folder) or 0)


def _carried(output_dir: Path) -> Path | None:
    """The marked ``stepdown-N`` folder that holds the most steps (a later one on a tie); None without one."""
    found = [
        (steps_held(p), int(match.group(1)), p)
        for p in Path(output_dir).glob("stepdown-*")
        if (match := _CARRIED.match(p.name)) and p.is_dir() and read_marker(p) is not None and why_incomplete(p) is None
    ]
    return max(found)[2] if found else None


def scan(output_dir: Path) -> Scan:
    """What ``output_dir``'s ``checkpoint-N`` and ``stepdown-N`` folders hold."""
    found = [(checkpoint_step(p), p) for p in Path(output_dir).glob("checkpoint-*") if p.is_dir()]
    result = Scan(None)
    for _, path in sorted(((s, p) for s, p in found if s is not None), reverse=True):
        why = why_incomplete(path)
        if why is not None:
            result.incomplete.append((path, why))
        elif result.newest is None:
            result.newest = path
    carried = _carried(output_dir)  # at least the newest checkpoint's steps: that checkpoint is an earlier rung's
    if carried is not None and (result.newest is None or steps_held(carried) >= steps_held(result.newest)):
        result.newest = carried
    return result


def set_aside(output_dir: Path, incomplete: list[tuple[Path, str]]) -> list[Path]:
    """Move incomplete checkpoints to ``<output_dir>/incomplete/`` (an older copy of the same name is replaced).

    Raises:
        OutputDirError: ``incomplete`` (or a copy in it) is a symbolic link: nothing is moved through it.
    """
    moved = []
    for path, _ in incomplete:
        target = inside(output_dir, INCOMPLETE_DIR, path.name)  # refuses a link: nothing moved or deleted outside
        target.parent.mkdir(exist_ok=True)
        remove(target)
        os.replace(path, target)
        moved.append(target)
    return moved


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - a filesystem without fsync on folders
        pass
    finally:
        os.close(fd)


def mark_complete(folder: Path, run: dict[str, Any]) -> Path:
    """Flush every file of ``folder`` to disk, then write :data:`MARKER` atomically (last)."""
    files = _files(folder)
    for name in files:
        _fsync(folder / name)
    step = checkpoint_step(folder)
    marker = write_json_atomic(folder / MARKER, {"step": step, "files": files, "run": run})
    _fsync(folder)
    return marker


class CompletionCallback(TrainerCallback):
    """After each save: wait for every rank, then the main process marks the checkpoint complete, with ``record()``
    (the run's record at this step) in the marker, and calls ``saved(step)``."""

    def __init__(self, record: Callable[[], dict[str, Any]], saved: Callable[[int], None] | None = None) -> None:
        self.record = record
        self.saved = saved

    def on_save(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
        from accelerate import PartialState  # heavy: accelerate (imports torch)

        PartialState().wait_for_everyone()  # every rank's files (RNG states, shards) are written
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if folder.is_dir():
                mark_complete(folder, self.record())
            if self.saved is not None:
                self.saved(state.global_step)


def carried_path(output_dir: Path, recorded: str | None) -> str | None:
    """Where the weights a step down recorded are now. A record names them relative to the run folder
    (``stepdown-1``); an older one's path (absolute, or from where the run started) is read as the run folder's own
    ``stepdown-N`` when that is there, so a run moved or copied loads its own weights, not the original's.

    >>> carried_path(Path("runs/b"), "stepdown-1"), carried_path(Path("runs/b"), None)
    ('runs/b/stepdown-1', None)
    """
    if recorded is None:
        return None
    path, own = Path(recorded), Path(output_dir) / Path(recorded).name
    if not path.is_absolute() and len(path.parts) == 1 or _CARRIED.match(path.name) and own.is_dir():
        return str(own)
    return recorded


def checkpoint_bytes(plan: Plan) -> float:
    """Bytes one checkpoint of ``plan`` takes on disk: trainable weights (the adapter for LoRA/QLoRA,
    every weight otherwise) and optimizer state over all processes, plus tokenizer and trainer state."""
    arch, s = plan.estimate.arch, plan.estimate.settings
    n, _, per = terms.trainable(arch, s)
    weights = n * per if s.is_peft else arch.n_params * s.weight_bytes
    state = terms.optimizer_state(arch, s).bytes - terms.monitor_state(arch, s)
    if s.shards_grads:
        state *= s.num_processes
    return weights + state + _EXTRA_BYTES


def drop_checkpoints(output_dir: Path) -> None:
    """Remove the ``checkpoint-N`` folders of an attempt that stepped down (another rung cannot resume them), once
    the weights it carried are marked complete: the run is resumable at every instant of a step down."""
    for child in output_dir.glob("checkpoint-*"):
        remove(child)  # a link is unlinked, its target kept
