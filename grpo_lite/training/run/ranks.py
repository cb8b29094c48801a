"""What each rank ran: ``<output_dir>/ranks/rank<R>.json`` records (written by
:class:`~grpo_lite.training.report.callbacks.RankRecordCallback`) and the check that all ranks trained together.
Cheap to import: the standard library and, inside functions, accelerate.

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

__all__ = ["RankRecord", "check_ranks", "process_state", "read_rank_records", "records_dir"]


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


def process_state() -> Any:
    """accelerate's view of this process: rank, world size, main process (on CPU asked with ``cpu=True``, else
    accelerate ignores a torchrun launch and each rank thinks it is alone)."""
    import torch  # heavy: torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def records_dir(output_dir: str | os.PathLike[str]) -> Path:
    """Where the ranks' records are."""
    return Path(output_dir) / "ranks"


def _clear_records(output_dir: str | os.PathLike[str]) -> None:
    for old in records_dir(output_dir).glob("rank*.json"):
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
