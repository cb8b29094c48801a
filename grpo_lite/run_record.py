"""The one reader of a run's ``run.json`` (resume, export, crash note): :func:`read_run_record` checks its shape,
not only its syntax. Standard library only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypedDict, cast

RUN_RECORD = "run.json"
CORRUPT = "run.json.corrupt"  # where a resume keeps a run.json it cannot use


class RunRecord(TypedDict, total=False):
    """The keys of run.json that grpo-lite reads back, with their types (others are kept as written)."""

    status: str
    run_id: str | None
    model: str
    model_fingerprint: dict[str, str] | None
    plan: dict[str, Any]
    settings: dict[str, Any]
    prompt_style: dict[str, Any]
    stop_strings: list[str]
    steps: int
    max_steps: int | None
    wall_seconds: float | None
    peak_memory: dict[str, Any] | None
    events: list[dict[str, Any]]
    history: list[dict[str, Any]]


_NUMBER = (int, float)
# key -> (accepted types, what to call them); None is accepted where a run writes it
_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "status": ((str,), "a string"),
    "run_id": ((str, type(None)), "a string or null"),
    "model": ((str,), "a string"),
    "model_fingerprint": ((dict, type(None)), "an object or null"),
    "plan": ((dict,), "an object"),
    "settings": ((dict, type(None)), "an object"),
    "prompt_style": ((dict, type(None)), "an object"),
    "stop_strings": ((list,), "a list"),
    "steps": ((int, type(None)), "a whole number"),
    "max_steps": ((int, type(None)), "a whole number or null"),
    "wall_seconds": ((*_NUMBER, type(None)), "a number or null"),
    "peak_memory": ((dict, type(None)), "an object or null"),
    "events": ((list,), "a list"),
    "history": ((list,), "a list"),
}


def check_record(record: Any) -> RunRecord:
    """``record`` when it has the shape of a run.json; a :class:`ValueError` naming the first key that does not.

    >>> check_record({"status": "finished", "history": [{"step": 1, "reward": 0.5}]})["status"]
    'finished'
    >>> check_record({"history": [{"step": "3"}]})
    Traceback (most recent call last):
    ...
    ValueError: history[0].step is "3", not a whole number
    """
    if not isinstance(record, dict):
        raise ValueError(f"not a JSON object but {type(record).__name__}")
    for key, (types, what) in _KEYS.items():
        value = record.get(key)
        if key in record and (not isinstance(value, types) or isinstance(value, bool)):
            raise ValueError(f"{key} is {_short(value)}, not {what}")
    for i, event in enumerate(record.get("events") or []):
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            raise ValueError(f"events[{i}] is {_short(event)}, not an object with an event name")
        if is_step_down(event) and not (isinstance(event.get("weights"), str) and type(event.get("step")) is int):
            raise ValueError(f"events[{i}] is a step down without the weights it went on from and its step")
    for i, row in enumerate(record.get("history") or []):
        if not isinstance(row, dict):
            raise ValueError(f"history[{i}] is {_short(row)}, not an object")
        step = row.get("step")
        if "step" not in row:
            raise ValueError(f"history[{i}] has no step")
        if not isinstance(step, int) or isinstance(step, bool):
            raise ValueError(f"history[{i}].step is {_short(step)}, not a whole number")
    for i, stop in enumerate(record.get("stop_strings") or []):
        if not isinstance(stop, str):
            raise ValueError(f"stop_strings[{i}] is {_short(stop)}, not a string")
    style = record.get("prompt_style") or {}
    for key, value in style.items():
        ok = isinstance(value, list) if key == "examples" else isinstance(value, (str, bool))
        if key not in ("system_prompt", "one_shot", "prefill", "examples") or not ok:
            raise ValueError(f"prompt_style.{key} is not a prompt style's field")
    for i, example in enumerate(style.get("examples") or []):
        if not isinstance(example, dict) or set(example) - {"question", "reasoning", "answer"}:
            raise ValueError(f"prompt_style.examples[{i}] is not an example (question, reasoning, answer)")
    return cast(RunRecord, record)  # its shape checked above


def is_step_down(event: Any) -> bool:
    """An out-of-memory step down: a ``replanned`` event of that cause, or a 0.4 record's ``out_of_memory``."""
    return event.get("event") == "out_of_memory" or (
        event.get("event") == "replanned" and event.get("cause") == "out_of_memory"
    )


def step_down_presets(event: Any) -> tuple[str | None, str | None]:
    """The rungs a step down went from and to (either record's shape)."""
    if event.get("event") == "out_of_memory":
        return event.get("from_preset"), event.get("to_preset")
    return event.get("from", {}).get("preset"), event.get("to", {}).get("preset")


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def read_run_record(run_dir: str | os.PathLike, *, keep_corrupt: bool) -> tuple[RunRecord | None, str | None]:
    """``run_dir``'s run.json and why it cannot be used: ``(None, None)`` when there is none; ``(None, why)`` when
    it cannot be read or has the wrong shape (``keep_corrupt``: it is moved to ``run.json.corrupt``)."""
    path = Path(run_dir) / RUN_RECORD
    if not path.is_file():
        return None, None
    try:
        return check_record(json.loads(path.read_text(encoding="utf-8"))), None
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        why = str(exc).splitlines()[0][:160]
    if keep_corrupt:
        os.replace(path, path.with_name(CORRUPT))
    return None, why
