"""Load a model and its tokenizer for training or evaluation: hub ids, local folders, GGUF files.

A GGUF file is converted once into a safetensors folder under the user cache (docs/internals.md). This module
imports torch and transformers at the top: it is only imported inside functions.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from grpo_lite.cache import cache_root
from grpo_lite.errors import ModelError
from grpo_lite.memory.keywords import from_pretrained_kwargs  # the one builder (a recipe hands it to plain TRL)
from grpo_lite.training.report.quiet import quiet_gguf_conversion, quiet_libraries


def gguf_cache_dir(gguf_file: Path) -> Path:
    """Where the converted copy of ``gguf_file`` lives (not necessarily existing yet)."""
    stat = gguf_file.stat()
    key = hashlib.sha256(f"{gguf_file.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache_root() / "gguf" / f"{gguf_file.stem}-{key}"


def _convert_gguf(gguf_file: Path) -> Path:
    """Dequantize a GGUF file once into a safetensors folder in the cache and return that folder."""
    target = gguf_cache_dir(gguf_file)
    if (target / "config.json").is_file():
        return target
    folder, name = str(gguf_file.parent), gguf_file.name
    try:
        with quiet_gguf_conversion():
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
            loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    except ImportError as exc:  # the gguf package is an extra
        raise ModelError(
            f"loading {gguf_file.name} needs the gguf package: pip install 'grpo-lite[gguf]' ({exc})"
        ) from exc
    # A GGUF-loaded model refuses save_pretrained: rebuilt without its quantization record, its weights copied over
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    with torch.device("meta"):
        clean = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    clean.load_state_dict(loaded.state_dict(), assign=True)
    clean.tie_weights()
    clean.generation_config = loaded.generation_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        clean.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        os.replace(tmp, target)  # atomic: a crash never leaves a half-written cache entry
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (target / "config.json").is_file():
            raise
    return target


def _local_source(model_id: str | os.PathLike) -> str:
    path = Path(model_id)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise ModelError(f"GGUF file {path} does not exist: check the path")
        return str(_convert_gguf(path))
    return str(model_id)


_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # a transformers tokenizer's (a fast one's)


@quiet_libraries()
def load_tokenizer(model_id: str | os.PathLike, **init: Any) -> PreTrainedTokenizerBase:
    """Load the tokenizer, left-padded for batched generation, with a pad token set (``init``: ``revision`` and
    ``trust_remote_code``, as TRL loads the model's processing class)."""
    source = _local_source(model_id)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, padding_side="left", **init)
    except (OSError, ValueError) as exc:  # ValueError: a folder without tokenizer files
        folder = Path(source)
        if folder.is_dir() and not any((folder / name).is_file() for name in _TOKENIZER_FILES):
            raise ModelError(
                f"{model_id} has no tokenizer files ({', '.join(_TOKENIZER_FILES)}): copy them into it from the "
                "model it was made from (or save its tokenizer there with tokenizer.save_pretrained)"
            ) from None
        raise ModelError(f"cannot load a tokenizer from {model_id!r}: {' '.join(str(exc).split())}") from exc
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if tokenizer.chat_template is None:
        raise ModelError(
            f"the tokenizer of {model_id!r} has no chat template; use an instruct/chat model "
            "or set tokenizer.chat_template before training"
        )
    return tokenizer


@contextlib.contextmanager
def readable_weights(where: str | os.PathLike) -> Iterator[None]:
    """A safetensors file cut off or damaged, read inside the block, is a :class:`ModelError` naming ``where``
    (safetensors raises its own exception, not an OSError)."""
    from safetensors import SafetensorError

    try:
        yield
    except SafetensorError as exc:
        raise ModelError(
            f"cannot read the weights in {where}: {exc} (a safetensors file is cut off or damaged): copy, download "
            "or save the model again"
        ) from exc


@quiet_libraries()
def load_model(
    model_id: str | os.PathLike,
    *,
    dtype: str = "float32",
    quantization: dict[str, Any] | None = None,
    device_map: Any = None,
    init_kwargs: dict[str, Any] | None = None,
) -> PreTrainedModel:
    """Load a causal LM from a hub id, a local folder or a ``.gguf`` file.

    Args:
        model_id: hub id, folder, or GGUF file path.
        dtype: "float32", "bfloat16" or "float16". Default: "float32".
        quantization: ``BitsAndBytesConfig`` keyword arguments (QLoRA, 8-bit), or None.
        device_map: passed to ``from_pretrained`` (quantized models need one on CUDA).
        init_kwargs: GRPOConfig's ``model_init_kwargs`` and ``trust_remote_code`` (``attn_implementation``,
            ``revision``...), passed on as TRL passes them; the plan's dtype and quantization win.
    """
    kwargs = {**(init_kwargs or {}), **from_pretrained_kwargs(dtype, quantization, device_map=device_map)}
    source = _local_source(model_id)
    try:
        with readable_weights(model_id):
            return AutoModelForCausalLM.from_pretrained(source, **kwargs)
    except OSError as exc:
        raise ModelError(f"cannot load model {model_id!r}: {exc}") from exc


@quiet_libraries()
def load_saved_model(
    path: str | os.PathLike, *, dtype: str | None = None, device_map: Any = None, base: str | os.PathLike | None = None
) -> Any:
    """What a run saved, in eval mode: a model folder, or a LoRA adapter folder on its base (evaluation and export).

    Args:
        path: the model or adapter folder.
        dtype: a dtype name. Default: the saved dtype.
        device_map: passed to ``from_pretrained``.
        base: an adapter's base model (a folder, hub id or ``.gguf`` file). Default: the adapter's
            ``base_model_name_or_path``.
    """
    folder = Path(path)
    adapter = folder / "adapter_config.json"
    kwargs = {"dtype": "auto"} if dtype is None else from_pretrained_kwargs(dtype)
    try:
        with readable_weights(folder):
            if not adapter.is_file():
                return AutoModelForCausalLM.from_pretrained(str(folder), device_map=device_map, **kwargs).eval()
            from peft import PeftModel  # heavy: peft

            base = base or json.loads(adapter.read_text(encoding="utf-8"))["base_model_name_or_path"]
            base_model = AutoModelForCausalLM.from_pretrained(_local_source(base), device_map=device_map, **kwargs)
            return PeftModel.from_pretrained(base_model, str(folder)).eval()
    except OSError as exc:
        raise ModelError(f"cannot load the model in {folder}: {exc}") from exc
