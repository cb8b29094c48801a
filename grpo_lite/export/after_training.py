"""``train(..., export="gguf")``: the option checked before a run starts, and the export at its end.

The check runs before the output folder is touched, so a wrong value or an architecture the export does
not write fails in seconds, not after training. The export runs after the final model and ``run.json``
are saved: if it fails, the trained model is kept and the message says how to export it again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from grpo_lite.errors import ConfigError, ExportError, GrpoLiteError, ModelError

__all__ = ["EXPORT_FORMATS", "ExportFormat", "check_export", "export_after_training"]

ExportFormat = Literal["gguf"]
EXPORT_FORMATS: tuple[str, ...] = ("gguf",)
TRAIN_QUANTIZATION = "q8_0"  # what train(export="gguf") writes; export_gguf() writes the others


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
    if export not in EXPORT_FORMATS:
        raise ConfigError(f"export={export!r} is not valid; choose 'gguf' (a q8_0 GGUF file next to the model) or None")
    from grpo_lite.export.hparams import SUPPORTED, supported_text
    from grpo_lite.memory.models import resolve_model

    spec = resolve_model(model)
    if spec.arch.family not in {a.model_type for a in SUPPORTED}:
        raise ModelError(
            f"train(export='gguf') cannot export {spec.name}: its architecture is not one the GGUF export writes "
            f"({supported_text()}); train without export=, then convert the saved model folder with llama.cpp's "
            "convert_hf_to_gguf.py"
        )


def export_after_training(out: Path, export: ExportFormat, console: Any) -> Any:
    """Export the finished run in ``out`` (its ``final/`` model) and print where the files are.

    Returns:
        The :class:`~grpo_lite.export.runtimes.RuntimeFiles` written.
    """
    from grpo_lite.export.runtimes import export_for_runtimes

    try:
        files = export_for_runtimes(out, quantization=TRAIN_QUANTIZATION)
    except GrpoLiteError as exc:
        kind = exc.__class__ if isinstance(exc, (ConfigError, ModelError, ExportError)) else ExportError
        raise kind(f"{exc} (the trained model is saved in {out / 'final'}; export it again with: "
                   f"grpo-lite export {out} --{export})") from exc
    console.print(files.summary())
    for line in files.lines():
        console.print(f"  {line}", highlight=False)
    return files
