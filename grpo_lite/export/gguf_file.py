"""export_gguf(): a trained model -> one GGUF file, written under a temporary name and renamed at the end.

The steps, in order: find the model (:mod:`~grpo_lite.export.source`), check its architecture
(:mod:`~grpo_lite.export.hparams`; an unsupported one fails before anything is loaded), load it (a
LoRA adapter merged), gather the metadata (carried from the origin GGUF or built from the HF
tokenizer, :mod:`~grpo_lite.export.vocab`), quantize the tensors (:mod:`~grpo_lite.export.tensors`) and
write with the ``gguf`` package's ``GGUFWriter``, atomically (:func:`grpo_lite.files.atomic_write`): a
crash or a full disk never leaves a partial ``path``, and an older file at ``path`` stays whole until the
new one is complete. A run folder is exported under its run lock: a run still training there is refused.
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator, Literal

from grpo_lite.errors import ExportError, GrpoLiteError, ModelError
from grpo_lite.export.tensors import Quantization
from grpo_lite.files import RUN_GGUF, atomic_write, remove_stale_temporaries

__all__ = ["GGUF_DEPENDENCY", "default_gguf_path", "export_file", "export_gguf", "write_gguf"]

GGUF_DEPENDENCY = "pip install 'grpo-lite[gguf]'"

_WHY = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EROFS: "the folder is read-only",
    errno.EACCES: "the folder is not writable",
    errno.EPERM: "the folder is not writable",
}  # anything else: the system's own words


@contextmanager
def export_file(path: Path, mode: Literal["w", "wb"] = "w") -> Iterator[IO[Any]]:
    """:func:`grpo_lite.files.atomic_write`, with an error of the filesystem as one :class:`ExportError` line;
    the temporaries of ``path`` that an export killed outright left behind are removed first."""
    try:
        remove_stale_temporaries(path.parent, (path.name,))
        with atomic_write(path, mode) as handle:
            yield handle
    except OSError as exc:
        if isinstance(exc, GrpoLiteError):
            raise
        why = _WHY.get(exc.errno or 0, exc.strerror or str(exc))
        fix = "free some space, or pass" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "pass"
        raise ExportError(
            f"cannot write {path}: {why}; nothing was written there (an older file is kept whole); {fix} "
            "a path in another folder: grpo-lite export ... --output PATH"
        ) from exc


def default_gguf_path(model_dir: str | os.PathLike) -> Path:
    """Where an export goes unless told: ``<run>/final.gguf`` for a run folder (or its ``final/``), else
    ``<folder>.gguf`` next to a model folder.

    >>> default_gguf_path("runs/x/final").as_posix(), default_gguf_path("models/my-model").as_posix()
    ('runs/x/final.gguf', 'models/my-model.gguf')
    """
    path = Path(model_dir)
    if (path / "run.json").is_file():
        return path / RUN_GGUF
    return path.with_name(path.name.rstrip("/") + ".gguf")


def export_gguf(
    model_dir: str | os.PathLike, path: str | os.PathLike | None = None, quantization: Quantization = "q8_0"
) -> Path:
    """Write a trained model as one GGUF file that llama.cpp, Ollama and LM Studio load.

    Args:
        model_dir: a run folder of :func:`grpo_lite.train` (its ``final/`` model is exported), a
            ``final/`` folder, a transformers model folder, or a LoRA adapter folder (merged into its
            base first). Supported architectures: Llama (Llama 3.x, SmolLM2) and Qwen2 (Qwen2, Qwen2.5).
        path: the ``.gguf`` file to write. Default: ``<run>/final.gguf`` for a run, ``<folder>.gguf`` otherwise.
        quantization: ``"f16"``, ``"q8_0"`` (default: 8-bit, close to f16) or ``"q4_0"`` (smallest);
            docs/export.md has the sizes and what each costs.

    Returns:
        The path written.

    Raises:
        ModelError: a missing or unsupported model, or a run whose run.json is broken (nothing is written).
        ConfigError: an unknown ``quantization``.
        ExportError: the run is still training, or the file could not be written (a full disk, a read-only
            folder); no partial file is left.
    """
    from grpo_lite.export.source import holding_run

    with holding_run(model_dir):
        return write_gguf(model_dir, path, quantization)


def write_gguf(
    model_dir: str | os.PathLike, path: str | os.PathLike | None, quantization: Quantization, loaded: Any = None
) -> Path:
    """:func:`export_gguf` without taking the run's lock (the caller holds it), reading the weights from
    ``loaded`` when given: the model ``model_dir`` holds, already in memory (``train(export="gguf")`` passes
    its own; it is read, never changed)."""
    from grpo_lite.export.hparams import find_arch
    from grpo_lite.export.source import find_source
    from grpo_lite.export.tensors import check_quantization

    quant = check_quantization(quantization)
    source = find_source(model_dir)
    config = source.config()
    arch = find_arch(config, source.name)
    target = Path(path) if path is not None else default_gguf_path(source.run_dir or source.model_dir)
    if target.suffix != ".gguf":
        raise ModelError(f"the export path {str(target)!r} must end in .gguf")
    if not target.parent.is_dir():
        raise ExportError(
            f"cannot write {target}: the folder {target.parent} does not exist; create it or pass another path"
        )
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise ModelError(f"GGUF export needs the gguf package: {GGUF_DEPENDENCY}") from None
    model = loaded if loaded is not None else source.load_model()
    writer = _writer(model, arch, quant, source)
    with export_file(target, "wb") as handle:
        try:  # the writer opens the temporary itself; atomic_write syncs and renames it once it is closed
            writer.write_header_to_file(path=Path(handle.name))
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file(progress=False)
        finally:
            writer.close()
    return target


def _writer(model: Any, arch: Any, quant: Quantization, source: Any) -> Any:
    """A GGUFWriter with every key and every (quantized) tensor added, nothing written yet."""
    import gguf

    from grpo_lite.export.hparams import hyperparameters
    from grpo_lite.export.tensors import file_type, gguf_tensors
    from grpo_lite.export.vocab import add_hf_tokenizer, carried_fields, check_agrees

    writer = gguf.GGUFWriter(path=None, arch=arch.gguf_arch)
    keys = hyperparameters(model.config, arch)
    carried = carried_fields(source.origin_gguf) if source.origin_gguf is not None else {}
    if carried:
        check_agrees(keys, carried, source.origin_gguf)
    else:
        writer.add_type("model")
        writer.add_name(source.name)
    for key, value in keys.items():
        if key not in carried:
            kind = {str: gguf.GGUFValueType.STRING, float: gguf.GGUFValueType.FLOAT32}.get(
                type(value), gguf.GGUFValueType.UINT32
            )
            writer.add_key_value(key, value, kind)
    for key, (value, kind, item) in carried.items():
        writer.add_key_value(key, value, kind, sub_type=item)
    writer.add_file_type(file_type(quant))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    if not carried:
        add_hf_tokenizer(writer, source.model_dir, int(model.config.get_text_config().vocab_size), source.name)
    for name, data, kind in gguf_tensors(model, arch, quant):
        writer.add_tensor(name, data, raw_dtype=kind)
    return writer
