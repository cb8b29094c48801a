"""Trainer callbacks: per-step history of TRL's logs and measured CUDA memory (imports transformers at the top)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from grpo_lite.defaults import GIB
from grpo_lite.files import write_text

__all__ = ["HistoryCallback", "MemoryCallback"]


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
