"""Whether a resume may go on, checked before anything in the run folder is written.

:func:`check_resume` (same model, preset, method; steps left), :func:`check_same_training` and
:func:`model_fingerprint` (docs/internals.md).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite.errors import ConfigError
from grpo_lite.planning.ladder import get_preset
from grpo_lite.training.run.resume import EarlierRun, earlier_run, resume_point

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.recipe.recipe import Recipe

__all__ = ["check_resume", "check_same_run", "check_same_training", "check_steps", "model_fingerprint", "trained_with"]

_SAMPLES, _SAMPLE_BYTES = 16, 4096
_MODEL_FILES = (".safetensors", ".bin", ".gguf", ".pt")


def model_fingerprint(model_id: str) -> dict[str, str] | None:
    """A cheap fingerprint of a model: ``{"config": ..., "weights": ...}``, or None when its files are not here.

    ``config`` hashes ``config.json``; ``weights`` hashes each weights file's name, size and 16 samples
    of 4 KiB spread over it (the first holds a safetensors header): two bases of the same shape differ.
    A ``.gguf`` file is both. A hub id is read from the local cache (None when not downloaded yet).
    """
    path = Path(model_id).expanduser()
    if not path.exists():
        from huggingface_hub import try_to_load_from_cache  # heavy: huggingface_hub

        cached = try_to_load_from_cache(model_id, "config.json")
        if not isinstance(cached, str):
            return None
        path = Path(cached).parent
    if path.is_file():
        weights = [path]
        config = [path]
    else:
        weights = sorted(p for p in path.iterdir() if p.suffix in _MODEL_FILES and p.is_file())
        config = [path / "config.json"]
    return {"config": _sampled(config), "weights": _sampled(weights)}


def _sampled(files: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in files:
        size = path.stat().st_size
        digest.update(f"{path.name}:{size}".encode())
        with open(path, "rb") as f:
            for i in range(_SAMPLES):
                f.seek(size * i // _SAMPLES)
                digest.update(f.read(_SAMPLE_BYTES))
    return digest.hexdigest()[:16]


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


def trained_with(recipe: Recipe) -> dict[str, Any]:
    """What a resume must not change: the recipe's reward names, seed and num_generations."""
    rewards = recipe.to_dict()["rewards"]
    return {"rewards": rewards, "seed": recipe.seed, "num_generations": recipe.trl.get("num_generations")}


def check_same_training(output_dir: Path, earlier: EarlierRun, recipe: Recipe) -> None:
    """Refuse a resume that changes what the run optimizes: its rewards, seed or num_generations (the run's
    record and its checkpoint would describe another run). A record older than these fields is not checked.

    Raises:
        ConfigError: one line naming each change and what to pass instead.
    """
    runs = {"rewards": earlier.rewards, "seed": earlier.seed, "num_generations": earlier.num_generations}
    asked = trained_with(recipe)
    changed = [key for key, value in runs.items() if value is not None and value != asked[key]]
    if not changed:
        return
    said = {
        "rewards": lambda v: f"--rewards {' '.join(v)} (Python: rewards={v!r})",
        "seed": lambda v: f"--seed {v} (Python: seed={v})",
        "num_generations": lambda v: f"--set num_generations={v} (Python: num_generations={v})",
    }
    what = "; ".join(f"{key} {asked[key]!r} instead of the run's {runs[key]!r}" for key in changed)
    raise ConfigError(
        f"{output_dir} cannot be resumed with other settings than it trained with: {what}. Resume with "
        f"{', '.join(said[key](runs[key]) for key in changed)}, or pass --overwrite to start a new run in "
        f"{output_dir} (Python: overwrite=True)"
    )


def check_steps(output_dir: Path, earlier: EarlierRun, max_steps: int | None) -> tuple[bool, str | None]:
    """Whether the run is already finished with nothing left to train, and a line that says what the resume does.

    Finished means run.json says ``finished``, ``final/`` is there and ``max_steps`` (default: the run's)
    asks for no more steps: then nothing is trained or written.

    Raises:
        ConfigError: ``max_steps`` is below the steps the checkpoint holds.
    """
    reached, wanted = earlier.reached, max_steps if max_steps is not None else earlier.max_steps
    if wanted is not None and wanted < reached:
        raise ConfigError(
            f"{output_dir} holds {reached} trained steps (checkpoint-{earlier.checkpoint_step}) and "
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

    Args:
        model_id: the resolved model's id (:attr:`~grpo_lite.memory.models.ModelSpec.model_id`).

    Returns:
        Whether the run is already finished with nothing left to train, and a line to print, or None.

    Raises:
        ConfigError: no checkpoint to resume, another model, preset or method, or fewer steps than done.
    """
    checkpoint, _ = resume_point(output_dir, move=False)
    earlier = earlier_run(output_dir, checkpoint, main=False)
    check_same_run(output_dir, earlier, model_id=model_id, preset=preset, method=method)
    return check_steps(output_dir, earlier, max_steps)
