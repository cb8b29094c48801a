"""A resume: what it takes over (checkpoint, record, every completed step, crashes) and whether it may go on at
all (same model, preset, method and training; steps left), checked before anything in the folder is written
(docs/internals.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite.data.loaders import data_fingerprint
from grpo_lite.errors import ConfigError
from grpo_lite.files import sampled_digest
from grpo_lite.planning.ladder import get_preset
from grpo_lite.run_record import CORRUPT, is_step_down, read_run_record, step_down_presets
from grpo_lite.training.run import checkpoints

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.recipe.recipe import Recipe


HISTORY_FILE = "history.jsonl"  # one logged step per line, appended as the run goes


@dataclass
class EarlierRun:
    """What a resumed run takes over from the run it continues (a field None: missing in an older record)."""

    preset: str | None  # the rung the checkpoint was trained on (after any step down)
    source: str | None  # the weights its attempt started from (a stepdown-N folder), None: the model itself
    done: int  # steps done before that attempt started
    checkpoint_step: int  # the checkpoint's own step count (from that attempt's start)
    max_steps: int | None
    history: list[dict[str, Any]] = field(default_factory=list)  # logged rows up to the checkpoint
    events: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the resume repaired, one line each
    status: str | None = None  # run.json's status
    run_id: str | None = None  # the run's id (run.json's, else the checkpoint's): a resumed run keeps it
    model: str | None = None  # the model_id the run trained
    fingerprint: dict[str, str] | None = None  # that model's model_fingerprint when the run started
    rewards: list[str] | None = None  # what the run optimized: reward names, seed, group size, dataset
    seed: int | None = None
    num_generations: int | None = None
    dataset: str | None = None  # as the recipe records it: a name, a path, or "<Dataset: N rows>"
    answer_kind: str | None = None  # how its golds compared (None: no gold read, or an older record)
    data_fingerprint: str | None = None  # its dataset's files (data.loaders.data_fingerprint) when it trained

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
    moved = checkpoints.set_aside(output_dir, found.incomplete) if move else [p for p, _ in found.incomplete]
    notes = [f"{p.name} is incomplete ({why}): skipped, moved to {to}" for (p, why), to in zip(found.incomplete, moved)]
    newest = checkpoints.checkpoint_step(found.newest)
    if newest is None:  # a stepdown-N: the run stopped before the next rung's first checkpoint
        notes.append(
            f"resuming from {found.newest.name}, the weights carried at the step down after step "
            f"{checkpoints.steps_held(found.newest)}"
        )
    elif any(checkpoints.checkpoint_step(p) > newest for p, _ in found.incomplete):
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


_RECORDED = (
    "preset", "source", "max_steps", "model", "fingerprint", "rewards", "seed", "num_generations", "dataset",
    "answer_kind", "data_fingerprint",
)  # fmt: skip


def _from_record(record: dict[str, Any]) -> dict[str, Any]:
    """preset, source, done, max_steps from a run.json (the last step down's target and weights); the rewards,
    seed, num_generations, dataset and answer kind it trained with (the data's fingerprint: in its checkpoints)."""
    downs = [e for e in record.get("events", []) if is_step_down(e)]
    recipe = record.get("recipe") if isinstance(record.get("recipe"), dict) else {}
    trl = recipe.get("trl") if isinstance(recipe.get("trl"), dict) else {}
    return {
        "rewards": recipe.get("rewards"),
        "seed": recipe.get("seed"),
        "num_generations": trl.get("num_generations"),
        "dataset": recipe.get("dataset"),
        "answer_kind": record.get("answer_kind"),
        "preset": record.get("plan", {}).get("preset"),
        "source": downs[-1]["weights"] if downs else None,
        "done": downs[-1]["step"] if downs else 0,
        "max_steps": record.get("max_steps"),
        "model": record.get("model"),
        "fingerprint": record.get("model_fingerprint"),
    }


def earlier_run(output_dir: Path, checkpoint: Path, *, main: bool) -> EarlierRun:
    """What the resumed run takes over (``main``: the main process moves an unreadable run.json aside)."""
    step = checkpoints.checkpoint_step(checkpoint) or 0  # 0: a stepdown-N, trained from, not resumed
    record, note = read_record(output_dir, move=main)
    snapshot = (checkpoints.read_marker(checkpoint) or {}).get("run") or {}
    _check_owner(output_dir, checkpoint, (record or {}).get("run_id"), snapshot.get("run_id"))
    base = {**dict.fromkeys(_RECORDED), "done": 0, **(_from_record(record) if record else {})}
    base.update({k: snapshot[k] for k in base if k in snapshot})  # the checkpoint's own record wins
    base["source"] = checkpoints.carried_path(output_dir, base["source"])
    events = list((record or {}).get("events") or snapshot.get("events") or [])
    on_disk = read_history(output_dir)
    last = base["done"] + step
    history = _merge(on_disk, (record or {}).get("history", []), _log_history(checkpoint, base["done"]), last=last)
    earlier = EarlierRun(
        **base, checkpoint_step=step, history=history, events=events, notes=[note] if note else [],
        status=(record or {}).get("status"), run_id=(record or {}).get("run_id") or snapshot.get("run_id"),
    )  # fmt: skip
    if record is not None and record.get("status") == "running":  # nobody holds the lock: it did not end
        reached = max([r["step"] for r in on_disk + record.get("history", [])], default=None)
        earlier.events.append({"event": "crashed", "after_step": reached})
        earlier.notes.append(
            f"the earlier run stopped without a word{'' if reached is None else f' after step {reached}'} "
            "(killed, or the machine went down): recorded as crashed"
        )
    return earlier


def _check_owner(output_dir: Path, checkpoint: Path, run_id: Any, saved_by: Any) -> None:
    """Refuse a checkpoint whose marker names another run than run.json's (a checkpoint or a record from before
    runs had an id, or one cut off before its marker, is not checked).

    Raises:
        ConfigError: one line naming the checkpoint and what to do.
    """
    if run_id is None or saved_by is None or saved_by == run_id:
        return
    raise ConfigError(
        f"{checkpoint.name} in {output_dir} was saved by another run (run id {saved_by}; this run's is {run_id}, "
        f"in its run.json): move {checkpoint.name} out of the folder and resume again, or pass --overwrite to "
        "start a new run there (Python: overwrite=True)"
    )


_MODEL_FILES = (".safetensors", ".bin", ".gguf", ".pt")


def model_fingerprint(model_id: str) -> dict[str, str] | None:
    """``{"config": ..., "weights": ...}``: hashes of ``config.json`` and of each weights file's name, size and 16
    samples of 4 KiB (two bases of the same shape differ); a ``.gguf`` file is both. None when the files are not
    here (a hub id not in the local cache)."""
    path = Path(model_id).expanduser()
    if not path.exists():
        from huggingface_hub import try_to_load_from_cache  # heavy: huggingface_hub

        cached = try_to_load_from_cache(model_id, "config.json")
        if not isinstance(cached, str):
            return None
        path = Path(cached).parent
    if path.is_file():
        return {"config": sampled_digest([path]), "weights": sampled_digest([path])}
    weights = sorted(p for p in path.iterdir() if p.suffix in _MODEL_FILES and p.is_file())
    return {"config": sampled_digest([path / "config.json"]), "weights": sampled_digest(weights)}


def check_same_run(
    output_dir: Path, earlier: EarlierRun, *, model_id: str, preset: str | None, method: str | None
) -> None:
    """Refuse a resume that names another model, or a preset or method the run did not train on.

    Raises:
        ConfigError: one line naming what differs and what to pass instead.
    """
    again = f"or --overwrite to start a new run in {output_dir} (Python: overwrite=True)"
    theirs = earlier.model
    if theirs is not None:
        mine = model_fingerprint(model_id)
        if earlier.fingerprint and mine:
            differs = [part for part in ("config", "weights") if earlier.fingerprint.get(part) != mine[part]]
            why = {("config",): "its config differs", ("weights",): "its weights differ"}.get(
                tuple(differs), "its config and weights differ"
            )
        else:  # a model whose files are not here (a hub id not downloaded): its name decides
            same = theirs == model_id or (Path(theirs).exists() and Path(theirs).resolve() == Path(model_id).resolve())
            differs, why = ([] if same else ["name"]), "another name"
        if differs:
            raise ConfigError(
                f"{output_dir} was trained from {theirs}; {model_id} is another model ({why}): pass "
                f"{theirs} to resume the run, {again}"
            )
    presets = earlier.presets()
    if not presets:
        return
    if preset is not None and preset not in presets:
        raise ConfigError(
            f"{output_dir} was trained with preset {presets[-1]!r}; --preset {preset} asks for another: "
            f"drop --preset (a resume keeps the run's preset; Python: preset=None), {again}"
        )
    methods = [get_preset(name).method for name in presets]
    if method is not None and method not in methods:
        raise ConfigError(
            f"{output_dir} was trained with method {methods[-1]!r} (preset {presets[-1]!r}); --method "
            f"{method} asks for another: drop --method (Python: method=None), {again}"
        )


def trained_with(recipe: Recipe, answer_kind: str | None) -> dict[str, Any]:
    """What a resume must not change: the recipe's reward names, seed, num_generations and dataset, the kind its
    golds compare in (``answer_kind``: the run's, as the data decided it) and its dataset files' fingerprint."""
    written = recipe.to_dict()
    return {
        "rewards": written["rewards"],
        "seed": recipe.seed,
        "num_generations": recipe.trl.get("num_generations"),
        "dataset": written["dataset"],
        "answer_kind": answer_kind,
        "data_fingerprint": data_fingerprint(written["dataset"]),
    }


def _same(key: str, theirs: Any, mine: Any) -> bool:
    """Whether a resume's value is the run's (a dataset file named by another path to it is the same)."""
    if key == "dataset" and isinstance(theirs, str) and isinstance(mine, str) and Path(theirs).is_file():
        return Path(theirs).resolve() == Path(mine).resolve()
    return theirs == mine


_CHANGED = {"data_fingerprint": "the dataset's files changed since the run trained on them (size or content)"}
_SAID = {
    "rewards": lambda v: f"{' '.join(f'--reward {r}' for r in v)} (Python: rewards={v!r})",
    "seed": lambda v: f"--seed {v} (Python: seed={v})",
    "num_generations": lambda v: f"--set num_generations={v} (Python: num_generations={v})",
    "dataset": lambda v: (
        f"--dataset {v} (Python: dataset={v!r})"
        if not v.startswith("<")
        else f"the run's own dataset ({v[1:-1]}; Python: dataset=...)"
    ),  # a datasets.Dataset passed in Python
    "answer_kind": lambda v: f"--answer-kind {v} (Python: answer_kind={v!r})",
    "data_fingerprint": lambda v: "the dataset as the run trained on it (its files restored)",
}


def check_same_training(output_dir: Path, earlier: EarlierRun, recipe: Recipe, answer_kind: str | None) -> None:
    """Refuse a resume that changes the run's rewards, seed, num_generations, dataset, answer kind or the dataset's
    files (each unchecked in an older record).

    Raises:
        ConfigError: one line naming each change and what to pass instead.
    """
    runs = {key: getattr(earlier, key) for key in _SAID}
    asked = trained_with(recipe, answer_kind)
    changed = [key for key, value in runs.items() if value is not None and not _same(key, value, asked[key])]
    if not changed:
        return
    what = "; ".join(_CHANGED.get(key, f"{key} {asked[key]!r} instead of the run's {runs[key]!r}") for key in changed)
    raise ConfigError(
        f"{output_dir} cannot be resumed with other settings than it trained with: {what}. Resume with "
        f"{', '.join(_SAID[key](runs[key]) for key in changed)}, or pass --overwrite to start a new run in "
        f"{output_dir} (Python: overwrite=True)"
    )


def check_steps(output_dir: Path, earlier: EarlierRun, max_steps: int | None) -> tuple[bool, str | None]:
    """Whether the run is finished (run.json says so, ``final/`` is there, ``max_steps`` asks for no more steps:
    nothing is trained or written), and a line that says what the resume does.

    Raises:
        ConfigError: ``max_steps`` is below the steps the checkpoint holds.
    """
    reached, wanted = earlier.reached, max_steps if max_steps is not None else earlier.max_steps
    if wanted is not None and wanted < reached:
        raise ConfigError(
            f"{output_dir} holds {reached} trained steps "
            f"({f'checkpoint-{earlier.checkpoint_step}' if earlier.checkpoint_step else 'carried at its step down'}) and "
            f"max_steps={wanted} asks for fewer: pass --max-steps {reached} or more to go on from them "
            f"(Python: max_steps=...), or --overwrite to train {wanted} steps from the start"
        )
    if earlier.status != "finished" or not (output_dir / "final").is_dir():
        return False, None
    if wanted is None or wanted == reached:
        return True, (
            f"finished: the run in {output_dir} already trained its {reached} steps (model in "
            f"{output_dir / 'final'}); nothing changed. To train on, pass --max-steps above {reached} with "
            "--resume (Python: max_steps=..., resume=True)"
        )
    return False, f"the run finished at step {reached}: training on to step {wanted}; final/ is replaced at the end"


def check_resume(
    output_dir: Path, model_id: str, *, max_steps: int | None, preset: str | None, method: str | None
) -> tuple[bool, str | None]:
    """:func:`check_same_run`, then :func:`check_steps`, on the folder as it is (nothing is moved or written).

    Raises:
        ConfigError: no checkpoint to resume, another model, preset or method, or fewer steps than done.
    """
    checkpoint, _ = resume_point(output_dir, move=False)
    earlier = earlier_run(output_dir, checkpoint, main=False)
    check_same_run(output_dir, earlier, model_id=model_id, preset=preset, method=method)
    return check_steps(output_dir, earlier, max_steps)
