"""export_gguf(): a trained model -> one GGUF file, written under a temporary name and renamed at the end.

The steps in order, atomically, under the run's lock (docs/internals.md, docs/export.md).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Literal, Sequence

from grpo_lite.errors import ExportError, GrpoLiteError, ModelError
from grpo_lite.export.hparams import find_arch, hyperparameters
from grpo_lite.export.source import find_source, holding_run
from grpo_lite.export.tensors import Quantization, check_quantization, file_type, gguf_tensors
from grpo_lite.export.vocab import add_hf_tokenizer, carried_fields, check_agrees
from grpo_lite.files import RUN_GGUF, Together, atomic_write, remove_stale_temporaries

GGUF_DEPENDENCY = "pip install 'grpo-lite[gguf]'"

_WHY = {
    errno.EROFS: "the folder is read-only",
    errno.EACCES: "the folder is not writable",
    errno.EPERM: "the folder is not writable",
}  # a full disk says so with what to free; anything else: the system's own words
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")  # numpy's tofile on a full disk: an OSError without errno


def _disk_full(exc: OSError) -> bool:
    """A write refused for want of room: ENOSPC or a quota, or a short write (numpy says it without an errno)."""
    return exc.errno in _FULL or bool(_SHORT_WRITE.search(str(exc))) or "No space left on device" in str(exc)


def _full_disk(path: Path, files: Sequence[int], held: Sequence[int]) -> str:
    """``the disk holding FOLDER is full (F free, the export needs S): free at least N or export elsewhere with -o
    PATH (...)``, in whole blocks of that disk (a file of 1 byte takes one).

    Args:
        files: the sizes of the files the export writes there.
        held: the sizes of the export's temporaries, free again once the error removes them.
    """
    try:
        block = os.statvfs(path.parent).f_frsize if hasattr(os, "statvfs") else 1
        free = shutil.disk_usage(path.parent).free
    except OSError:  # pragma: no cover - the folder went away
        block, free = 1, 0

    def on_disk(sizes: Iterable[int]) -> int:  # in whole blocks
        return sum(-(-n // block) * block for n in sizes)

    free += on_disk(held)
    need = on_disk(max(n, 1) for n in files)  # a file written takes a block, however short
    more = max(need - free, 0)
    return (
        f"the disk holding {path.parent} is full ({_size(free)} free, the export needs {_size(need, up=True)}): free "
        f"{'at least ' + _size(more, up=True) if more else 'some space'} or export elsewhere with -o PATH (grpo-lite export ... "
        "--output PATH)"
    )


def _size(n: float, up: bool = False) -> str:
    """``127 KB``, ``4.4 MB``, ``1340 MB``; ``up``: rounded up (a size needed or to free, never shown short).

    >>> _size(127_392), _size(4_352_000), _size(1.34e9), _size(0), _size(416, up=True), _size(4_310_000, up=True)
    ('127 KB', '4.4 MB', '1340 MB', '0 KB', '1 KB', '4.4 MB')
    """
    unit, digits = ("KB", 0) if n < 1e6 else ("MB", 1 if n < 1e7 else 0)
    step = (1e3 if unit == "KB" else 1e6) / 10**digits
    count = -(-n // step) if up else round(n / step)  # in steps of the last digit shown
    return f"{count / 10**digits:.{digits}f} {unit}"


@contextmanager
def export_file(
    path: Path, mode: Literal["w", "wb"] = "w", group: Together | None = None, files: Sequence[int] = ()
) -> Iterator[IO[Any]]:
    """``path`` written atomically (:func:`grpo_lite.files.atomic_write`), or as one of ``group``'s files (renamed
    with the others), with an error of the filesystem as one :class:`ExportError` line; the temporaries of ``path``
    that an export killed outright left behind are removed first.

    Args:
        files: the sizes of the files the whole export writes (for a full disk's message).
    """
    try:
        remove_stale_temporaries(path.parent, (path.name,))
        with atomic_write(path, mode) if group is None else group.write(path, mode) as handle:
            yield handle
    except OSError as exc:
        if isinstance(exc, GrpoLiteError):
            raise
        kept = "nothing was written there (an older file is kept whole)"
        if _disk_full(exc):
            held = group.staged_sizes() if group is not None else []  # atomic_write's temporary is gone already
            raise ExportError(f"cannot write {path}: {_full_disk(path, files, held)}; {kept}") from exc
        why = _WHY.get(exc.errno or 0, exc.strerror or str(exc))
        raise ExportError(
            f"cannot write {path}: {why}; {kept}; pass a path in another folder: grpo-lite export ... --output PATH"
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
    with holding_run(model_dir):
        return write_gguf(model_dir, path, quantization)


def write_gguf(
    model_dir: str | os.PathLike,
    path: str | os.PathLike | None,
    quantization: Quantization,
    loaded: Any = None,
    group: Together | None = None,
) -> Path:
    """:func:`export_gguf` without taking the run's lock (the caller holds it), reading the weights from
    ``loaded`` when given: the model ``model_dir`` holds, already in memory (``train(export="gguf")`` passes
    its own; it is read, never changed). With ``group`` the file is renamed into place with the group's others.

    The file counts as written only when it is whole: its size reaches the end of its last tensor and
    ``gguf.GGUFReader`` reads it back with every tensor (a short write on a full disk is not always an error)."""
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
    tensors = sum(len(shard) for shard in writer.tensors)
    need = _file_bytes(writer)
    files = (need, 1, 1) if group is not None else (need,)  # the Modelfile and system prompt to come: a block each
    with export_file(target, "wb", group, files) as handle:
        try:  # the writer opens the temporary itself; atomic_write syncs and renames it once it is closed
            writer.write_header_to_file(path=Path(handle.name))
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file(progress=False)
        finally:
            writer.close()
        _check_whole(Path(handle.name), target, tensors, need)
    return target


def _check_whole(written: Path, target: Path, tensors: int, need: int) -> None:
    """Raise unless ``written`` (the temporary of ``target``) reads back as a GGUF with ``tensors`` tensors, each
    within the file: a short write on a full disk can leave the file cut off without an error."""
    import gguf  # optional: gguf (the gguf extra)

    size = written.stat().st_size
    try:
        reader = gguf.GGUFReader(written)
        end = max((int(t.data_offset) + int(t.n_bytes) for t in reader.tensors), default=0)
        found = len(reader.tensors)
    except Exception as exc:  # noqa: BLE001 - any failure to read it back means the file is not whole
        end, found, why = size + 1, -1, f"gguf.GGUFReader cannot read it back ({str(exc).splitlines()[0][:120]})"
    else:
        why = f"it holds {found} of {tensors} tensors" if found != tensors else f"{size} bytes, {end} needed"
    if found == tensors and size >= end:
        return
    if shutil.disk_usage(written.parent).free < max(need, 1):  # the write found the disk full without saying so
        raise OSError(errno.ENOSPC, f"the file was cut off at {size} bytes ({why})")
    raise ExportError(f"cannot write {target}: the file written is not whole ({why}); nothing was kept; export again")


def _file_bytes(writer: Any) -> int:
    """The bytes ``writer`` will write: the header, the keys, the tensors' descriptions, then each tensor at its
    alignment (GGUF's layout, ggml's docs/gguf.md). What a full disk's message asks for; tests compare it with the
    files gguf writes."""
    import gguf  # optional: gguf (the gguf extra)

    kinds = gguf.GGUFValueType
    fixed = {kinds.UINT8: 1, kinds.INT8: 1, kinds.BOOL: 1, kinds.UINT16: 2, kinds.INT16: 2, kinds.UINT32: 4}
    fixed |= {kinds.INT32: 4, kinds.FLOAT32: 4, kinds.UINT64: 8, kinds.INT64: 8, kinds.FLOAT64: 8}

    def value(v: Any, kind: Any, item: Any = None) -> int:
        if kind == kinds.STRING:
            return 8 + len(v.encode() if isinstance(v, str) else v)
        if kind == kinds.ARRAY:  # the items' type, their count, the items
            item = item or (kinds.UINT8 if isinstance(v, bytes) else kinds.get_type(v[0]))
            return 12 + (fixed[item] * len(v) if item in fixed else sum(value(x, item) for x in v))
        return fixed[kind]

    keys = sum(value(k, kinds.STRING) + 4 + value(v.value, v.type, v.sub_type) for k, v in writer.kv_data[0].items())
    tensors = writer.tensors[0]
    described = sum(value(name, kinds.STRING) + 4 + 8 * len(t.shape) + 4 + 8 for name, t in tensors.items())
    return sum(
        gguf.GGUFWriter.ggml_pad(n, writer.data_alignment)
        for n in (24 + keys + described, *(t.nbytes for t in tensors.values()))
    )


def _writer(model: Any, arch: Any, quant: Quantization, source: Any) -> Any:
    """A GGUFWriter with every key and every (quantized) tensor added, nothing written yet."""
    import gguf  # optional: gguf (the gguf extra)

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
