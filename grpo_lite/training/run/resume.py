"""What a resumed run takes over: the checkpoint, the run's record, its history, and what happened.

:func:`resume_point`, :func:`earlier_run` and :func:`read_record` (docs/internals.md); whether a resume may go on
at all is :mod:`grpo_lite.training.run.resume_checks`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_lite.errors import ConfigError
from grpo_lite.run_record import CORRUPT, read_run_record
from grpo_lite.training.report.summary import is_step_down, step_down_presets
from grpo_lite.training.run import checkpoints

__all__ = ["HISTORY_FILE", "EarlierRun", "earlier_run", "read_history", "read_record", "resume_point"]

HISTORY_FILE = "history.jsonl"  # one logged step per line, appended as the run goes


@dataclass
class EarlierRun:
    """What a resumed run takes over from the run it continues.

    Attributes:
        preset: the rung the checkpoint was trained on (after any out-of-memory step down).
        source: the weights that attempt started from (a ``stepdown-N`` folder), or None for the model itself.
        done: steps completed before that attempt started (by attempts before a step down).
        checkpoint_step: the checkpoint's own step count (counted from that attempt's start).
        max_steps: the run's total steps, or None.
        history: logged rows up to the checkpoint.
        events: earlier events (step downs, interrupts, resumes, crashes).
        notes: what the resume had to repair, one line each (printed and kept in the resume event).
        status: run.json's status (None when it is missing or unreadable).
        model: the model the run trained (its ``model_id``), or None in a record older than this field.
        fingerprint: that model's :func:`model_fingerprint` when the run started, or None.
        rewards, seed, num_generations: what the run optimized (its reward names, seed and group size), or None
            in a record older than these fields.
    """

    preset: str | None
    source: str | None
    done: int
    checkpoint_step: int
    max_steps: int | None
    history: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    status: str | None = None
    model: str | None = None
    fingerprint: dict[str, str] | None = None
    rewards: list[str] | None = None
    seed: int | None = None
    num_generations: int | None = None

    @property
    def reached(self) -> int:
        """Steps the checkpoint holds, over the whole run."""
        return self.done + self.checkpoint_step

    def presets(self) -> list[str]:
        """The presets the run trained on: the first rung, then each step down's."""
        downs = [step_down_presets(e) for e in self.events if is_step_down(e)]
        names = [downs[0][0]] + [to for _, to in downs] if downs else [self.preset]
        return [n for n in names if n]


def resume_point(output_dir: Path, *, move: bool) -> tuple[Path, list[str]]:
    """The newest complete checkpoint of ``output_dir`` and one line per incomplete one.

    Args:
        move: move the incomplete checkpoints to ``<output_dir>/incomplete/`` (the main process does).

    Raises:
        ConfigError: no complete checkpoint; the message says why each one is incomplete.
    """
    found = checkpoints.scan(output_dir)
    if found.newest is None:
        if not found.incomplete and not (output_dir / "run.json").exists() and not (output_dir / HISTORY_FILE).exists():
            raise ConfigError(
                f"resume asked but {output_dir} holds no checkpoint-N folder; drop resume to start a "
                "new run, or point output_dir at the run to continue"
            )
        if not found.incomplete:
            raise ConfigError(
                f"resume asked but the run in {output_dir} stopped before its first checkpoint: nothing "
                "to resume; start it again with --overwrite (Python: overwrite=True) instead of --resume"
            )
        whys = "; ".join(f"{p.name}: {why}" for p, why in found.incomplete)
        raise ConfigError(
            f"resume asked but {output_dir} holds no complete checkpoint ({whys}); start the run again "
            "with overwrite=True (--overwrite), or restore the missing files"
        )
    newer = [
        (p, why)
        for p, why in found.incomplete
        if checkpoints.checkpoint_step(p) > checkpoints.checkpoint_step(found.newest)
    ]
    moved = checkpoints.set_aside(output_dir, found.incomplete) if move else [p for p, _ in found.incomplete]
    notes = [
        f"{p.name} is incomplete ({why}): skipped, moved to {target}"
        for (p, why), target in zip(found.incomplete, moved)
    ]
    if newer:
        notes.append(f"resuming from {found.newest.name}, the newest complete checkpoint")
    return found.newest, notes


def read_record(output_dir: Path, *, move: bool) -> tuple[dict[str, Any] | None, str | None]:
    """``run.json`` and a note: None when it is missing; one that cannot be read or has the wrong shape is moved
    to ``run.json.corrupt`` (``move``) and the note says so (:func:`grpo_lite.run_record.read_run_record`)."""
    record, why = read_run_record(output_dir, keep_corrupt=move)
    if why is None:
        return (None if record is None else dict(record)), None
    return None, (
        f"run.json could not be read ({why}): kept as {CORRUPT}; the run's record is rebuilt from the checkpoint "
        "and history.jsonl"
    )


def read_history(output_dir: Path) -> list[dict[str, Any]]:
    """The rows of ``history.jsonl`` (a line cut off by a crash is skipped)."""
    path = output_dir / HISTORY_FILE
    rows = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                rows.append(row)
    return rows


def _log_history(checkpoint: Path, offset: int) -> list[dict[str, Any]]:
    try:
        state = json.loads((checkpoint / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return []
    rows = []
    for entry in state.get("log_history", []):
        if "train_runtime" in entry or not isinstance(entry.get("step"), int):
            continue
        rows.append({**{k: v for k, v in entry.items() if k != "step"}, "step": offset + entry["step"]})
    return rows


def _merge(*sources: list[dict[str, Any]], last: int) -> list[dict[str, Any]]:
    """One row per step up to ``last``, the first source that has a step winning."""
    by_step: dict[int, dict[str, Any]] = {}
    for rows in sources:
        for row in rows:
            by_step.setdefault(row["step"], row)
    return [by_step[s] for s in sorted(by_step) if s <= last]


def _from_record(record: dict[str, Any]) -> dict[str, Any]:
    """preset, source, done, max_steps from a run.json (the last step down's target and weights); the rewards,
    seed and num_generations it trained with."""
    downs = [e for e in record.get("events", []) if is_step_down(e)]
    recipe = record.get("recipe") if isinstance(record.get("recipe"), dict) else {}
    trl = recipe.get("trl") if isinstance(recipe.get("trl"), dict) else {}
    return {
        "rewards": recipe.get("rewards"),
        "seed": recipe.get("seed"),
        "num_generations": trl.get("num_generations"),
        "preset": record.get("plan", {}).get("preset"),
        "source": downs[-1]["weights"] if downs else None,
        "done": downs[-1]["step"] if downs else 0,
        "max_steps": record.get("max_steps"),
        "model": record.get("model"),
        "fingerprint": record.get("model_fingerprint"),
    }


def earlier_run(output_dir: Path, checkpoint: Path, *, main: bool) -> EarlierRun:
    """What the resumed run takes over (see the module docstring).

    Args:
        main: this is the main process: it moves an unreadable run.json aside.
    """
    step = checkpoints.checkpoint_step(checkpoint) or 0
    record, note = read_record(output_dir, move=main)
    snapshot = (checkpoints.read_marker(checkpoint) or {}).get("run") or {}
    base = {"preset": None, "source": None, "done": 0, "max_steps": None, "model": None, "fingerprint": None}
    base.update(rewards=None, seed=None, num_generations=None)
    base.update(_from_record(record) if record else {})
    base.update({k: snapshot[k] for k in base if k in snapshot})  # the checkpoint's own record wins
    events = list((record or {}).get("events") or snapshot.get("events") or [])
    on_disk = read_history(output_dir)
    last = base["done"] + step
    history = _merge(on_disk, (record or {}).get("history", []), _log_history(checkpoint, base["done"]), last=last)
    earlier = EarlierRun(
        preset=base["preset"],
        source=base["source"],
        done=base["done"],
        checkpoint_step=step,
        max_steps=base["max_steps"],
        history=history,
        events=events,
        notes=[note] if note else [],
        status=(record or {}).get("status"),
        model=base["model"],
        fingerprint=base["fingerprint"],
        rewards=base["rewards"],
        seed=base["seed"],
        num_generations=base["num_generations"],
    )
    if record is not None and record.get("status") == "running":  # nobody holds the lock: it did not end
        reached = max([r["step"] for r in on_disk + record.get("history", [])], default=None)
        earlier.events.append({"event": "crashed", "after_step": reached})
        earlier.notes.append(
            f"the earlier run stopped without a word{'' if reached is None else f' after step {reached}'} "
            "(killed, or the machine went down): recorded as crashed"
        )
    return earlier
