"""Trainer callbacks: per-step history of TRL's logs, measured CUDA memory, each rank's record (imports transformers at
the top)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from grpo_lite.defaults import GIB
from grpo_lite.files import write_json, write_text
from grpo_lite.training.run.ranks import RankRecord, records_dir


class HistoryCallback(TrainerCallback):
    """Keeps every training log row with its step; with ``path`` (the main process's), each row is also appended to
    that JSON-lines file and flushed at once, so a crash loses at most the step in flight."""

    def __init__(self, path: Path | None = None) -> None:
        self.rows: list[dict[str, Any]] = []
        self.step_offset = 0  # steps done by earlier attempts (after an out-of-memory step down)
        self.path = path
        self._t0 = time.perf_counter()

    def start_file(self, rows: list[dict[str, Any]]) -> None:
        """Begin the file with ``rows`` (a resumed run's history up to its checkpoint), replacing what was there."""
        self.rows = list(rows)
        if self.path is None:
            return
        write_text(self.path, "".join(json.dumps(row, default=str) + "\n" for row in rows))

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001 - transformers' signature
        if not logs or "train_runtime" in logs:  # the final summary row is not a step
            return
        row = {"step": self.step_offset + state.global_step, "elapsed_s": round(time.perf_counter() - self._t0, 2)}
        row.update({k: v for k, v in logs.items() if isinstance(v, (int, float)) or v is None})
        self.rows.append(row)
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(row, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())


class MemoryCallback(TrainerCallback):
    """Records each step's CUDA peak allocated and reserved memory (GiB); nothing on CPU."""

    def __init__(self) -> None:
        self.per_step: list[dict[str, float]] = []
        self.enabled = torch.cuda.is_available()
        if self.enabled:
            torch.cuda.reset_peak_memory_stats()

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
        if not self.enabled:
            return
        self.per_step.append(
            {
                "step": state.global_step,
                "max_allocated_gib": torch.cuda.max_memory_allocated() / GIB,
                "max_reserved_gib": torch.cuda.max_memory_reserved() / GIB,
            }
        )
        torch.cuda.reset_peak_memory_stats()

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
        if self.enabled and logs is not None and self.per_step:
            logs["memory/max_allocated_gib"] = round(self.per_step[-1]["max_allocated_gib"], 3)
            logs["memory/max_reserved_gib"] = round(self.per_step[-1]["max_reserved_gib"], 3)

    def peak(self) -> dict[str, float] | None:
        """The largest allocated and reserved GiB over all steps, or None on CPU / before a step."""
        if not self.per_step:
            return None
        return {
            "max_allocated_gib": max(s["max_allocated_gib"] for s in self.per_step),
            "max_reserved_gib": max(s["max_reserved_gib"] for s in self.per_step),
        }


class RankRecordCallback(TrainerCallback):
    """Writes ``<output_dir>/ranks/rank<R>.json`` (a :class:`RankRecord`) on EVERY rank at train end, or with the
    error that ends the rank (:meth:`record_failure`)."""

    def __init__(self, output_dir: str | os.PathLike[str]) -> None:
        self.output_dir = Path(output_dir)
        self.micro_batches = 0
        self._start = time.perf_counter()
        self._training: tuple[Any, Any] | None = None  # the trainer's args and state, once training began

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
        self.micro_batches, self._start = 0, time.perf_counter()
        self._training = (args, state)

    def on_substep_end(self, args, state, control, **kwargs):  # noqa: ANN001
        self.micro_batches += 1  # a micro-batch that did not end an optimizer step

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
        self.micro_batches += 1  # the micro-batch that ended one

    def on_train_end(self, args, state, control, model=None, **kwargs):  # noqa: ANN001
        total = None
        if model is not None:
            with torch.no_grad():
                local = [getattr(p, "to_local", lambda p=p: p)() for p in model.parameters() if p.requires_grad]
                total = float(sum(t.detach().double().sum().item() for t in local))
        per_device = args.per_device_train_batch_size
        self._write(args.process_index, args.world_size, state.global_step, per_device, param_sum=total)

    def record_failure(self, error: str, advice: str | None, *, rank: int, world_size: int) -> None:
        """Write this rank's record with the error that ends it (:func:`~grpo_lite.training.run.ranks.error_line`),
        what to change for it, and when it was caught: the main process, or the launching one, names the rank that
        failed first from these records (the other ranks' collectives fail after it)."""
        failed_at, steps, per_device = time.time(), 0, 0
        if self._training is not None:  # it failed while training, not while the trainer was built
            args, state = self._training
            steps, per_device = state.global_step, args.per_device_train_batch_size
        self._write(rank, world_size, steps, per_device, error=error, advice=advice, failed_at=failed_at)

    def _write(self, rank: int, world_size: int, steps: int, per_device: int, **more: Any) -> None:
        record = RankRecord(
            rank=rank,
            world_size=world_size,
            steps=steps,
            local_samples=self.micro_batches * per_device,
            backend=_backend(),
            micro_batches=self.micro_batches,
            pid=os.getpid(),
            wall_seconds=round(time.perf_counter() - self._start, 3),
            **more,
        )
        write_json(records_dir(self.output_dir) / f"rank{record.rank}.json", asdict(record))


def _backend() -> str | None:
    """The process group's backend; "cpu:gloo,cuda:nccl" configs (backend "undefined") give the one in use."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()):
        return None
    backend = str(dist.get_backend())
    if backend != "undefined":
        return backend
    per_device = dict(part.split(":", 1) for part in dist.get_backend_config().split(",") if ":" in part)
    return per_device.get("cuda" if torch.cuda.is_available() else "cpu", backend)
