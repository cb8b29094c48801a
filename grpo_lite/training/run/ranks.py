"""What each rank ran: ``<output_dir>/ranks/rank<R>.json`` records and the check that all ranks trained together.
Cheap to import: ``RankRecordCallback`` (a transformers ``TrainerCallback``) is built on first access.

>>> RankRecord(rank=0, world_size=2, steps=3, local_samples=12, backend="gloo").micro_batches
0
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grpo_lite.errors import GrpoLiteError
from grpo_lite.training.report.summary import write_json_atomic

__all__ = ["RankRecord", "RankRecordCallback", "check_ranks", "process_state", "read_rank_records"]


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


def _records_dir(output_dir: str | os.PathLike[str]) -> Path:
    return Path(output_dir) / "ranks"


def _clear_records(output_dir: str | os.PathLike[str]) -> None:
    for old in _records_dir(output_dir).glob("rank*.json"):
        old.unlink()


def read_rank_records(output_dir: str | os.PathLike[str]) -> list[RankRecord]:
    """Every ``ranks/rank<R>.json`` under ``output_dir``, by rank."""
    records = [
        RankRecord(**json.loads(p.read_text(encoding="utf-8"))) for p in _records_dir(output_dir).glob("rank*.json")
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
            f"expected records of ranks 0..{num_processes - 1} in {_records_dir(output_dir)}, "
            f"found {ranks}: some processes did not finish training"
        )
    alone = [r.rank for r in records if r.world_size != num_processes]
    if alone:
        raise GrpoLiteError(
            f"ranks {alone} ran with world size {records[alone[0]].world_size}, not {num_processes}: "
            "they trained alone (on CPU, launch with torchrun and use_cpu=True)"
        )
    return records


def _backend(torch: Any) -> str | None:
    """The process group's backend; "cpu:gloo,cuda:nccl" configs (backend "undefined") give the one in use."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return None
    backend = str(dist.get_backend())
    if backend != "undefined":
        return backend
    per_device = dict(part.split(":", 1) for part in dist.get_backend_config().split(",") if ":" in part)
    return per_device.get("cuda" if torch.cuda.is_available() else "cpu", backend)


def _build_rank_record_callback() -> type:
    import torch  # heavy: torch
    from transformers import TrainerCallback

    class RankRecordCallback(TrainerCallback):
        """Writes ``<output_dir>/ranks/rank<R>.json`` (a :class:`RankRecord`) on EVERY rank at train end."""

        def __init__(self, output_dir: str | os.PathLike[str]) -> None:
            self.output_dir = Path(output_dir)
            self.micro_batches = 0
            self._start = time.perf_counter()

        def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
            self.micro_batches, self._start = 0, time.perf_counter()

        def on_substep_end(self, args, state, control, **kwargs):  # noqa: ANN001
            self.micro_batches += 1  # a micro-batch that did not end an optimizer step

        def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
            self.micro_batches += 1  # the micro-batch that ended one

        def on_train_end(self, args, state, control, model=None, **kwargs):  # noqa: ANN001
            backend = _backend(torch)
            total = None
            if model is not None:
                with torch.no_grad():
                    local = [getattr(p, "to_local", lambda p=p: p)() for p in model.parameters() if p.requires_grad]
                    total = float(sum(t.detach().double().sum().item() for t in local))
            record = RankRecord(
                rank=args.process_index,
                world_size=args.world_size,
                steps=state.global_step,
                local_samples=self.micro_batches * args.per_device_train_batch_size,
                backend=backend,
                micro_batches=self.micro_batches,
                param_sum=total,
                pid=os.getpid(),
                wall_seconds=round(time.perf_counter() - self._start, 3),
            )
            write_json_atomic(_records_dir(self.output_dir) / f"rank{record.rank}.json", asdict(record))

    RankRecordCallback.__module__ = __name__
    return RankRecordCallback


def __getattr__(name: str) -> Any:
    if name == "RankRecordCallback":
        cls = _build_rank_record_callback()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
