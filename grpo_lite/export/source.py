"""What an export reads: a run, model or LoRA adapter folder -> the model, its config, its origin.

Checked before anything heavy loads; a plain LoRA adapter is merged one weight at a time (:func:`named_weights`).
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from grpo_lite.errors import ExportError, ModelError, OutputDirError
from grpo_lite.run_record import read_run_record
from grpo_lite.training.run.lock import LOCK_NAME, RunHeld, RunLock


@dataclass(frozen=True)
class ExportSource:
    """Where the pieces of one export come from.

    Attributes:
        model_dir: the folder with the weights (``config.json``) or the LoRA adapter (``adapter_config.json``).
        run_dir: the run folder (with ``run.json``), or None for a model folder outside any run.
        origin_gguf: the GGUF file the run started from, whose metadata is carried over; or None.
        adapter_base: the base model of a LoRA adapter (a folder or hub id), or None for full weights.
        run_record: the run's ``run.json`` contents ({} without a run).
    """

    model_dir: Path
    run_dir: Path | None
    origin_gguf: Path | None
    adapter_base: str | None
    run_record: dict[str, Any]

    @property
    def name(self) -> str:
        """The run or model folder's name (messages, the file's ``general.name``)."""
        return (self.run_dir or self.model_dir).resolve().name

    def config(self) -> Any:
        """The transformers config of the model (of the adapter's base for a LoRA run)."""
        from transformers import AutoConfig  # heavy: transformers

        where = self.adapter_base or str(self.model_dir)
        if self.origin_gguf is not None and self.adapter_base and not Path(self.adapter_base).is_dir():
            return AutoConfig.from_pretrained(str(self.origin_gguf.parent), gguf_file=self.origin_gguf.name)
        try:
            return AutoConfig.from_pretrained(where)
        except OSError as exc:
            raise ModelError(f"cannot read the config of {where} to export {self.name}: {exc}") from exc

    def load_model(self) -> Any:
        """The model in its saved dtype, in eval mode (:func:`grpo_lite.training.loading.load_saved_model`); a LoRA
        adapter is merged by PEFT unless :func:`lazily_mergeable`. A cut-off weights file is a ModelError."""
        from grpo_lite.training.loading import load_saved_model  # heavy: torch, transformers

        gone = self.adapter_base and not Path(self.adapter_base).is_dir() and self.origin_gguf is not None
        base = self.origin_gguf if gone else None  # the converted copy of the origin GGUF is gone: convert it again
        model = load_saved_model(self.model_dir, base=base)
        return model if lazily_mergeable(model) else model.merge_and_unload().eval()


def lazily_mergeable(model: Any) -> bool:
    """True for a model without adapters, or a PEFT model with one plain LoRA adapter (no DoRA, no LoRA
    bias, no saved modules), whose merged weights :func:`named_weights` computes without changing it."""
    if not hasattr(model, "peft_config"):
        return True
    from peft.tuners.lora import LoraLayer  # heavy: peft (imports torch)

    if len(model.peft_config) != 1 or str(next(iter(model.peft_config.values())).peft_type) != "PeftType.LORA":
        return False
    layers = [m for m in model.modules() if isinstance(m, LoraLayer)]
    plain = all(not any(m.use_dora.values()) and not any(getattr(m, "lora_bias", {}).values()) for m in layers)
    saved = any("modules_to_save" in name or "original_module" in name for name, _ in model.named_modules())
    return plain and not saved and all(hasattr(m, "get_delta_weight") for m in layers)


def named_weights(model: Any) -> Iterator[tuple[str, tuple[int, ...], Callable[[], Any]]]:
    """``(transformers name, shape, read)`` for every weight of a :func:`lazily_mergeable` model; ``read()`` returns
    the tensor, a LoRA adapter's merged when read (``W + get_delta_weight()``, PEFT's sum) without changing it."""
    if not hasattr(model, "peft_config"):
        for name, tensor in model.state_dict().items():
            yield name, tuple(tensor.shape), _reader(tensor)
        return
    base, adapter = model.get_base_model(), model.active_adapter
    for key, tensor in base.state_dict().items():
        if ".lora_" in key:
            continue
        if ".base_layer." not in key:
            yield key, tuple(tensor.shape), _reader(tensor)
            continue
        owner_name, _, leaf = key.partition(".base_layer.")
        owner = base.get_submodule(owner_name)
        if leaf == "weight":
            yield f"{owner_name}.{leaf}", tuple(tensor.shape), _reader(tensor, owner, adapter)
        else:
            yield f"{owner_name}.{leaf}", tuple(tensor.shape), _reader(tensor)


def _reader(tensor: Any, owner: Any = None, adapter: str | None = None) -> Callable[[], Any]:
    """``read()`` for :func:`named_weights`: the tensor, plus ``owner``'s LoRA delta when an owner is given."""
    return (lambda: tensor) if owner is None else (lambda: tensor + owner.get_delta_weight(adapter))


def find_source(path: str | os.PathLike) -> ExportSource:
    """Check ``path`` and say where the model, the run record and the origin GGUF are (nothing is loaded).

    Raises:
        ModelError: the path does not exist, is a run without a final model, or holds no model.
    """
    given = Path(path).expanduser()
    if not given.exists():
        raise ModelError(
            f"cannot export {str(path)!r}: no such folder; pass a run folder of grpo-lite train "
            "(it holds run.json and final/) or a model folder with config.json"
        )
    if given.is_file():
        raise ModelError(f"cannot export {str(path)!r}: it is a file; pass a run folder or a model folder")
    run_dir: Path | None
    if (given / "run.json").is_file():
        run_dir, model_dir = given, given / "final"
        if not model_dir.is_dir():
            raise ModelError(
                f"cannot export the run {str(path)!r}: it has no final model (final/); it was "
                "interrupted or is still training: resume it to the end, then export"
            )
    else:
        model_dir = given
        run_dir = given.parent if (given.parent / "run.json").is_file() else None
    adapter = model_dir / "adapter_config.json"
    if not adapter.is_file() and not (model_dir / "config.json").is_file():
        raise ModelError(
            f"cannot export {str(path)!r}: {model_dir} has neither config.json (a model) nor "
            "adapter_config.json (a LoRA adapter)"
        )
    record = _run_record(run_dir) if run_dir else {}
    origin = Path(str(record.get("model", ""))) if str(record.get("model", "")).endswith(".gguf") else None
    base = json.loads(adapter.read_text(encoding="utf-8"))["base_model_name_or_path"] if adapter.is_file() else None
    if (
        base is not None
        and not Path(base).is_dir()
        and (origin is None or not origin.is_file())
        and (base.startswith(("/", ".", "~")) or base.endswith(".gguf"))
    ):
        raise ModelError(
            f"cannot export the adapter in {model_dir}: its base model {base} is missing; "
            "restore it (or its cache folder) at that path"
        )
    return ExportSource(
        model_dir=model_dir,
        run_dir=run_dir,
        origin_gguf=origin if origin and origin.is_file() else None,
        adapter_base=base,
        run_record=record,
    )


def _run_record(run_dir: Path) -> dict[str, Any]:
    """The run's ``run.json``; a :class:`ModelError` when it is cut off or not of a run record's shape."""
    path = run_dir / "run.json"
    record, why = read_run_record(run_dir, keep_corrupt=False)
    if record is None:
        raise ModelError(
            f"cannot export the run {run_dir}: its run.json is broken ({why or 'it is gone'}); restore it, or move "
            f"it aside and export the model alone (its Modelfile then has the default prompt style): mv {path} "
            f"{path}.corrupt && grpo-lite export {run_dir / 'final'} --gguf"
        )
    return dict(record)


@contextmanager
def holding_run(path: str | os.PathLike) -> Iterator[None]:
    """Hold the lock of the run ``path`` belongs to while it is exported: a run still training there is refused,
    none starts until the export is done. A model folder outside a run is not locked, a read-only run folder
    only checked.

    Raises:
        ExportError: a live run holds the folder (named by PID), or its lock cannot be taken (a link at its path).
    """
    run_dir = find_source(path).run_dir
    lock = None
    try:
        if run_dir is not None:
            try:
                lock = RunLock.acquire(run_dir)
            except OutputDirError:
                raise
            except OSError:  # the lock file cannot be created: a read-only folder
                RunLock.check(run_dir)
    except RunHeld as exc:
        raise ExportError(
            f"cannot export {run_dir} now: {str(exc).split('; ')[0]}; wait for the run to finish (or "
            "stop it), then export again"
        ) from None
    except OutputDirError as exc:  # a link at the lock path, a filesystem without locks: what to change is its own
        link = run_dir is not None and (run_dir / LOCK_NAME).is_symlink()
        fix = "remove the link (a run makes its lock itself), then export again" if link else ""
        raise ExportError(f"cannot export {run_dir}: {str(exc).split('; ')[0] + '; ' + fix if fix else exc}") from None
    try:
        yield
    finally:
        if lock is not None:
            lock.release()
