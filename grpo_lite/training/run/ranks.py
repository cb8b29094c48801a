"""What each rank ran: ``<output_dir>/ranks/rank<R>.json`` records (written by
:class:`~grpo_lite.training.report.callbacks.RankRecordCallback`), the check that all ranks trained together, and,
when they failed, which rank failed first and with what error. Cheap to import: the standard library and, inside
functions, accelerate.

>>> RankRecord(rank=0, world_size=2, steps=3, local_samples=12, backend="gloo").micro_batches
0
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_lite.errors import GrpoLiteError
from grpo_lite.scale.distributed import launched_world_size


@dataclass(frozen=True)
class RankRecord:
    """What one process did, written to ``<output_dir>/ranks/rank<R>.json`` when training ends."""

    rank: int
    world_size: int  # processes in the job (1: it trained alone)
    steps: int
    local_samples: int  # completions this rank trained on
    backend: str | None  # the torch.distributed backend, None when not initialised
    micro_batches: int = 0
    param_sum: float | None = None  # this rank's trainable parameters summed after training (equal across DDP ranks)
    pid: int = 0
    wall_seconds: float = 0.0
    error: str | None = None  # the error that ended this rank, "<type>: <first line>" (error_line)
    advice: str | None = None  # what to change for that error (an out-of-memory error's), None when it has none
    failed_at: float | None = None  # when the error was caught (time.time()): the first is what stopped the others


def error_line(exc: BaseException) -> str:
    """An error as run.json and a rank record say it: its type and the first line of its message.

    >>> error_line(ValueError("bad value\\nmore"))
    'ValueError: bad value'
    """
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


def process_state() -> Any:
    """accelerate's view of this process: rank, world size, main process (on CPU asked with ``cpu=True``, else
    accelerate ignores a torchrun launch and each rank thinks it is alone)."""
    import torch  # heavy: torch
    from accelerate import PartialState

    launched_world_size()  # the launcher's variables, checked before accelerate reads them
    return PartialState(cpu=not torch.cuda.is_available())


def records_dir(output_dir: str | os.PathLike[str]) -> Path:
    """Where the ranks' records are."""
    return Path(output_dir) / "ranks"


def _clear_records(output_dir: str | os.PathLike[str], rank: int | None = None) -> None:
    """Remove the records of an earlier run: every rank's, or ``rank``'s own (a rank started by hand)."""
    for old in records_dir(output_dir).glob("rank*.json" if rank is None else f"rank{rank}.json"):
        old.unlink()


def read_rank_records(output_dir: str | os.PathLike[str]) -> list[RankRecord]:
    """Every ``ranks/rank<R>.json`` under ``output_dir``, by rank."""
    records = [
        RankRecord(**json.loads(p.read_text(encoding="utf-8"))) for p in records_dir(output_dir).glob("rank*.json")
    ]
    return sorted(records, key=lambda r: r.rank)


def check_ranks(output_dir: str | os.PathLike[str], num_processes: int) -> list[RankRecord]:
    """Read the rank records and check that all ``num_processes`` ranks trained together.

    Raises:
        GrpoLiteError: a rank is missing, or a rank saw a different world size (it trained alone).
    """
    records = read_rank_records(output_dir)
    ranks = [r.rank for r in records]
    if ranks != list(range(num_processes)):
        raise GrpoLiteError(
            f"expected records of ranks 0..{num_processes - 1} in {records_dir(output_dir)}, "
            f"found {ranks}: some processes did not finish training"
        )
    alone = [r.rank for r in records if r.world_size != num_processes]
    if alone:
        raise GrpoLiteError(
            f"ranks {alone} ran with world size {records[alone[0]].world_size}, not {num_processes}: "
            "they trained alone (on CPU, launch with torchrun and use_cpu=True)"
        )
    return records


def first_failure(records: list[RankRecord]) -> RankRecord | None:
    """The record of the rank whose error was caught first, None when no rank recorded one: in a run of several
    processes, one rank's error (an out-of-memory error, say) makes the others' collectives fail after it."""
    failed = [r for r in records if r.error is not None and r.failed_at is not None]
    return min(failed, key=lambda r: r.failed_at or 0.0) if failed else None


def failure_fields(records: list[RankRecord], main_error: str, main_advice: str | None = None) -> dict[str, str]:
    """What the failed event in run.json says, from the ranks' records and the main process's (rank 0's) own error.

    ``error`` is the error of the rank that failed first: ``"OutOfMemoryError on rank 1: CUDA out of memory ..."``,
    with rank 0's own error (a collective that failed after it) kept in ``rank0_error``; ``main_error`` when rank 0
    failed first or no rank recorded an error. ``advice``, when that error has one, says what to change.

    >>> oom = RankRecord(1, 2, 1, 4, "gloo", error="OutOfMemoryError: CUDA out of memory", failed_at=1.0)
    >>> failure_fields([oom], "DistBackendError: Connection closed by peer")["error"]
    'OutOfMemoryError on rank 1: CUDA out of memory'
    """
    first = first_failure(records)
    if first is None or first.rank == 0:
        fields = {"error": main_error}
    else:
        kind, _, line = str(first.error).partition(": ")
        fields = {"error": f"{kind} on rank {first.rank}: {line}", "rank0_error": main_error}
    advice = main_advice if first is None else first.advice
    return {**fields, "advice": advice} if advice else fields
