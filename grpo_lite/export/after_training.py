"""``train(..., export="gguf")``: the option checked before a run starts, and the export at its end.

:class:`ExportAfterTraining` is both, as the training pipeline takes them (``grpo_lite.train`` passes it); a failed
export keeps the trained model (docs/internals.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from grpo_lite.errors import ConfigError, ExportError, GrpoLiteError, ModelError
from grpo_lite.export.hparams import SUPPORTED, supported_text
from grpo_lite.export.runtimes import export_for_runtimes
from grpo_lite.export.source import lazily_mergeable
from grpo_lite.memory.models import resolve_model
from grpo_lite.settings import ExportFormat

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.export.tensors import Quantization
    from grpo_lite.memory.models import ModelSpec


EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)
TRAIN_QUANTIZATION: Quantization = "q8_0"  # what train(export="gguf") writes; export_gguf() writes the others


def check_export(export: str | None, model: str | os.PathLike) -> None:
    """Raise before training when ``export`` is not a known format or ``model`` cannot be exported.

    >>> check_export(None, "anything")
    >>> check_export("onnx", "Llama-3.2-1B-Instruct")
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: export='onnx' is not valid; choose 'gguf' (a q8_0 GGUF file next to the model) or None
    >>> check_export("gguf", "Qwen2.5-0.5B-Instruct")
    """
    if export is None:
        return
    _check_format(export)
    _check_architecture(resolve_model(model))


def _check_format(export: str) -> None:
    if export not in EXPORT_FORMATS:
        raise ConfigError(f"export={export!r} is not valid; choose 'gguf' (a q8_0 GGUF file next to the model) or None")


def _check_architecture(spec: ModelSpec) -> None:
    if spec.arch.family not in {a.model_type for a in SUPPORTED}:
        raise ModelError(
            f"train(export='gguf') cannot export {spec.name}: its architecture is not one the GGUF export writes "
            f"({supported_text()}); train without export=, then convert the saved model folder with llama.cpp's "
            "convert_hf_to_gguf.py"
        )


def export_after_training(
    out: Path, export: ExportFormat, console: Any, model: Any = None, num_processes: int = 1
) -> Any:
    """Export the finished run in ``out`` (its ``final/`` model) and print where the files are.

    Args:
        out: the run folder.
        export: the format.
        console: where to print.
        model: the trained model in memory. Its weights are read as they are (no second copy) when it runs
            in one process, is not quantized (QLoRA's 4-bit base is read again from disk, unquantized)
            and its adapter merges lazily; otherwise ``final/`` is loaded from disk.
        num_processes: processes of the run (a sharded model is read from disk).

    Returns:
        The :class:`~grpo_lite.export.runtimes.RuntimeFiles` written.
    """
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    quantized = getattr(base, "is_quantized", False) or getattr(base, "hf_quantizer", None) is not None
    loaded = model if model is not None and num_processes == 1 and not quantized and lazily_mergeable(model) else None
    try:
        files = export_for_runtimes(out, quantization=TRAIN_QUANTIZATION, loaded=loaded, lock=False)
    except GrpoLiteError as exc:
        kind = exc.__class__ if isinstance(exc, (ConfigError, ModelError, ExportError)) else ExportError
        raise kind(
            f"{exc} (the trained model is saved in {out / 'final'}; export it again with: "
            f"grpo-lite export {out} --{export})"
        ) from exc
    for line in [files.summary(), *(f"  {line}" for line in files.lines())]:
        console.print(line, highlight=False, soft_wrap=True)  # commands stay on one line, whatever the width
    return files


@dataclass(frozen=True)
class ExportAfterTraining:
    """``train(export=...)`` as the training pipeline runs it (:class:`~grpo_lite.training.pipeline.AfterTraining`):
    the format checked when made, the resolved model checked before the output folder is touched, the export once
    run.json says finished.

    Raises:
        ConfigError: ``export`` is not a format the export writes.
    """

    export: ExportFormat

    def __post_init__(self) -> None:
        _check_format(self.export)

    def check(self, spec: ModelSpec) -> None:
        """Raise when the export does not write ``spec``'s architecture (before anything is trained)."""
        _check_architecture(spec)

    def run(self, result: Any, run: Any) -> Any:
        """Export the finished run (:func:`export_after_training`)."""
        return export_after_training(run.out, self.export, run.console, result.model, run.state.num_processes)
