"""Trace one decoder block of a model's own class on the meta device: the planner's bytes per token and layer.

:func:`traced_block_terms` runs three decoder layers built as training builds them forward and backward under the
GPU's semantics, fits :class:`BlockTerms` over row lengths and caches them in memory and under ``blocks/`` in the
cache (docs/internals.md).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite.cache import cache_root
from grpo_lite.files import write_text
from grpo_lite.memory.keywords import lora_kwargs, model_kwargs
from grpo_lite.memory.models import transformers_config

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.architectures import Architecture
    from grpo_lite.memory.step_settings import StepSettings


@dataclass(frozen=True)
class BlockTerms:
    """Bytes of one decoder block: ``a + b x S`` per token for rows of ``S`` tokens, plus ``c`` per block whatever
    the tokens (casts of the weights, small buffers).

    Attributes:
        saved: ``(a, b, c)`` of what one block keeps for backward (its checkpoint only, when checkpointing).
        backward: one ``(a, b, c)`` per moment of one block's backward that can be its high point, beyond the
            blocks below it; which one leads depends on the row length and the tokens.
        how: where the numbers come from, for the plan's table.
    """

    saved: tuple[float, float, float]
    backward: tuple[tuple[float, float, float], ...]
    how: str

    def saved_at(self, seq: int, *, tokens: int) -> float:
        """Bytes per token one block keeps, for ``tokens`` tokens in rows of ``seq``."""
        a, b, c = self.saved
        return a + b * seq + c / tokens

    def backward_at(self, seq: int, *, tokens: int) -> float:
        """Bytes per token of one block's backward high point, for ``tokens`` tokens in rows of ``seq``."""
        return max(a + b * seq + c / tokens for a, b, c in self.backward)


TRACE_LENGTHS = (256, 1024, 4096)  # row lengths traced; bytes per token fitted as a + b S + c / S
_LAYERS = 3  # the middle one is measured: a real layer above it sends its gradient, one below keeps its own
_PER_LAYER_LISTS = ("layer_types", "no_rope_layers")  # config lists that make layers differ
_VERSION = 5  # bump when what is traced changes: the disk cache keys on it
_MEMORY: dict[str, BlockTerms | None] = {}
Triple = tuple[float, float, float]  # (a, b, c): a + b S + c / tokens bytes per token


def _why_not(arch: Architecture, s: StepSettings) -> str | None:
    if s.device != "cuda":
        return "CPU plans keep the formulas calibrated by measurement"
    if s.quantization == "int8":
        return "int8 loading is not built on meta"
    if s.use_liger_kernel:
        return "liger-kernel's fused kernels are not traced"
    if not arch.config_json and arch.family not in ("llama", "qwen2"):
        return "no config to build the model from"
    return None


def _key(arch: Architecture, s: StepSettings) -> str:
    """The cache key: the model's config (or shapes), the settings that shape a block, the library versions (read
    without importing them: a cached plan stays fast)."""
    model = arch.config_json or json.dumps(
        {k: v for k, v in asdict(arch).items() if k not in ("source", "hub_ids")}, sort_keys=True
    )
    shaping = {
        "model": model,
        "dtype": s.dtype,
        "bf16": s.bf16,
        "fp16": s.fp16,
        "method": s.method,
        "lora_r": s.lora_r,
        "lora_dropout": s.lora_dropout,
        "targets": list(_targets(arch, s)) if s.is_peft else None,
        "quantization": s.quantization,
        "double_quant": s.double_quant,
        "checkpointing": s.gradient_checkpointing,
        "shared_prefix": s.shared_prefix,
        "lengths": TRACE_LENGTHS,
        "versions": [version(p) for p in ("torch", "transformers", "peft", "bitsandbytes")] + [_VERSION],
    }
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:24]


def _cache_file(key: str) -> Path:
    return cache_root() / "blocks" / f"{key}.json"


def _read(key: str) -> BlockTerms | None:
    path = _cache_file(key)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        backward = tuple((float(a), float(b), float(c)) for a, b, c in data["backward"])
        return BlockTerms(tuple(data["saved"]), backward, data["how"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(key: str, terms: BlockTerms) -> None:
    try:
        write_text(_cache_file(key), json.dumps({"saved": terms.saved, "backward": terms.backward, "how": terms.how}))
    except OSError:  # a read-only home: the in-memory cache still serves this process
        pass


def _targets(arch: Architecture, s: StepSettings) -> tuple[str, ...]:
    return tuple(s.lora_target_modules or arch.linear_names)


def traced_block_terms(arch: Architecture, s: StepSettings) -> BlockTerms | None:
    """One block's bytes per token for ``arch`` under ``s``, traced from the model's own layer class.

    Returns:
        The terms, or None where the block is not traced (a failing trace warns once and keeps the formulas).
    """
    if _why_not(arch, s) is not None:
        return None
    key = _key(arch, s)
    if key in _MEMORY:
        return _MEMORY[key]
    terms = _read(key)
    if terms is None:
        try:
            terms = _trace_all(arch, s, transformers_config(arch))
        except Exception as exc:  # noqa: BLE001 - any failure of a model's code on meta: keep the formulas
            warnings.warn(
                f"could not trace a block of {arch.name} on the meta device ({type(exc).__name__}: "
                f"{exc}); planning it with the Llama formulas",
                stacklevel=2,
            )
            _MEMORY[key] = None
            return None
        _write(key, terms)
    _MEMORY[key] = terms
    return terms


def _kinds(config: Any) -> Counter[tuple[tuple[str, Any], ...]]:
    """How many layers of each kind: the values of the per-layer config lists at each layer."""
    layers = config.num_hidden_layers
    lists = [
        name
        for name in _PER_LAYER_LISTS
        if isinstance(getattr(config, name, None), list) and len(getattr(config, name)) == layers
    ]
    return Counter(tuple((name, getattr(config, name)[i]) for name in lists) for i in range(layers))


def _fit(values: list[float]) -> tuple[float, float, float]:
    """``(a, b, c)`` with ``a + b S + c / S`` through the bytes per token traced at :data:`TRACE_LENGTHS`."""
    import numpy as np  # loaded with torch: not at plan time

    rows = [[1.0, float(seq), 1.0 / seq] for seq in TRACE_LENGTHS]
    a, b, c = np.linalg.solve(np.array(rows), np.array(values))
    return float(a), float(b), float(c)


def _trace_all(arch: Architecture, s: StepSettings, config: Any) -> BlockTerms:
    """Trace each kind of layer; the saved bytes are the layers' average, the backward the worst kind's at each
    plan's length and tokens (the upper envelope of every kind's backward timeline)."""
    kinds = _kinds(config)
    layers = sum(kinds.values())
    saved = [0.0, 0.0, 0.0]
    extras: list[Triple] = []
    for kind, count in kinds.items():
        points = [_trace(arch, s, config, dict(kind), seq) for seq in TRACE_LENGTHS]
        own = _fit([p[0] for p in points])
        saved = [total + x * count / layers for total, x in zip(saved, own)]
        extras += [_minus(back, own) for back in _timeline_fits([p[1] for p in points])]
    kinds_note = f", {len(kinds)} layer kinds" if len(kinds) > 1 else ""
    how = f"traced: {_layer_class(config)} on meta{kinds_note}"
    base = (saved[0], saved[1], saved[2])
    return BlockTerms(base, _envelope([_plus(base, extra) for extra in extras]), how)


def _minus(x: Triple, y: Triple) -> Triple:
    return x[0] - y[0], x[1] - y[1], x[2] - y[2]


def _plus(x: Triple, y: Triple) -> Triple:
    return x[0] + y[0], x[1] + y[1], x[2] + y[2]


def _timeline_fits(timelines: list[list[float]]) -> list[Triple]:
    """``(a, b, c)`` of each moment of the backward, fitted through the same moment at each traced length (one fit
    through the high points would mix moments); the high points where the op sequences differ in length."""
    if len({len(line) for line in timelines}) != 1:
        return [_fit([max(line) for line in timelines])]
    return [_fit([line[k] for line in timelines]) for k in range(len(timelines[0]))]


def _envelope(triples: list[Triple]) -> tuple[Triple, ...]:
    """The triples not dominated by another (at least as large in each term): the only ones a maximum can pick."""
    import numpy as np  # loaded with torch: not at plan time

    unique = np.unique(np.array(triples, dtype=float), axis=0)
    above: np.ndarray = np.all(unique[:, None, :] >= unique[None, :, :], axis=2)  # i dominates (or equals) j
    np.fill_diagonal(above, False)
    kept = unique[~above.any(axis=0)]
    return tuple((float(a), float(b), float(c)) for a, b, c in kept)


def _layer_class(config: Any) -> str:
    from grpo_lite.memory.meta.private import causal_lm_class  # loads torch: when a block is traced

    name = causal_lm_class(config).__name__  # e.g. Qwen3ForCausalLM
    return name.replace("ForCausalLM", "DecoderLayer")


def _trace(
    arch: Architecture, s: StepSettings, config: Any, kind: dict[str, Any], seq: int, rows: int = 1
) -> tuple[float, list[float]]:
    """``(saved, backward)`` bytes per token of the middle of three layers of ``kind``, ``rows`` rows of ``seq``
    tokens; ``backward``: the live transient bytes above its forward's start, after each op of its backward."""
    import torch  # heavy dependency, as the modules below

    from grpo_lite.memory.measured.tracker import PhaseClock

    # each imports torch at the top (a heavy dependency): loaded when a block is traced, not when a plan starts
    from grpo_lite.memory.meta import autocast as amp
    from grpo_lite.memory.meta.cuda import cuda_semantics

    clock = PhaseClock()
    probe = _probe(clock)
    # bitsandbytes' CPU backend warns at import about an optional kernel package
    with _only_errors("bitsandbytes"), cuda_semantics(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm, model = _small_model(arch, s, config, kind, probe)
        handles = probe.attach(middle=lm.model.layers[1], last=lm.model.layers[2])
        ids, inputs = _inputs(s, rows, seq)
        autocast = amp.CudaAutocast(torch.bfloat16) if s.bf16 else contextlib.nullcontext()
        probe.start()
        try:
            with amp.checkpoint_autocast(model):
                with autocast:
                    out = lm.model(input_ids=ids, use_cache=False, **inputs).last_hidden_state
                grad = torch.empty_like(out)
                outside = out.untyped_storage().nbytes() + grad.untyped_storage().nbytes()
                torch.autograd.backward(out, grad)
        finally:
            probe.stop()
            for handle in handles:
                handle.remove()
    tokens, marks = rows * seq, probe.marks
    return (marks["middle"] - marks["first"]) / tokens, [
        (live - outside - marks["first"]) / tokens for live in probe.timeline
    ]


@contextlib.contextmanager
def _only_errors(logger: str) -> Iterator[None]:
    quiet = logging.getLogger(logger)
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        yield
    finally:
        quiet.setLevel(level)


def _small_model(
    arch: Architecture, s: StepSettings, config: Any, kind: dict[str, Any], tracker: Any
) -> tuple[Any, Any]:
    """``(causal LM, trained model)``: three layers of ``kind`` built as training builds them, their parameters and
    constants tracked by ``tracker``."""
    from grpo_lite.memory.meta.model import build_model  # imports torch at the top

    small = copy.deepcopy(config)
    small.num_hidden_layers = _LAYERS
    for name, value in kind.items():
        setattr(small, name, [value] * _LAYERS)
    lm, model, constants = build_model(
        small,
        s.dtype,
        lora=lora_kwargs(s, arch.linear_names),
        quantization=model_kwargs(s).get("quantization"),
        checkpointing={} if s.gradient_checkpointing else None,
    )
    tracker.track_module(model)
    for constant in constants:
        tracker.register(constant, "param")
    return lm, model


def _inputs(s: StepSettings, rows: int, seq: int) -> tuple[Any, dict[str, Any]]:
    """``(input_ids, the forward's other inputs)`` on meta: ``rows`` rows of ``seq`` tokens."""
    import torch

    meta = torch.device("meta")
    ids = torch.zeros(rows, seq, dtype=torch.long, device=meta)
    if s.shared_prefix:  # the packed forward: a 4-D block mask and explicit positions
        return ids, {
            "attention_mask": torch.ones(rows, 1, seq, seq, dtype=torch.bool, device=meta),
            "position_ids": ids,
        }
    return ids, {"attention_mask": ids}


def _probe(clock: Any) -> Any:
    """A tensor tracker on meta that also marks the transient bytes (above the persistent ones): ``marks["first"]``
    when the middle layer's forward starts (the first layer's tensors and its output alive), ``marks["middle"]`` when
    the last one's starts (one more layer's), and ``timeline``: after each op of the middle layer's backward."""
    from grpo_lite.memory.measured.tracker import PERSISTENT, TensorTracker  # imports torch at the top

    class Probe(TensorTracker):
        def __init__(self) -> None:
            super().__init__(clock, device_type="meta")
            self.marks: dict[str, int] = {}
            self.timeline: list[int] = []

        def transient(self) -> int:
            return self.live - sum(self.by_category[c] for c in PERSISTENT)

        def _check_peak(self) -> None:
            super()._check_peak()
            if clock.phase == "block":
                self.timeline.append(self.transient())

        def attach(self, middle: Any, last: Any) -> list[Any]:
            """Hook the middle and the last layer's forward; the handles to remove."""
            return [
                middle.register_forward_pre_hook(self._before_middle, with_kwargs=True),
                last.register_forward_pre_hook(self._before_last, with_kwargs=True),
            ]

        def _before_middle(self, _m: Any, args: Any, kwargs: Any) -> None:
            hidden = args[0] if args else kwargs["hidden_states"]
            if "first" not in self.marks and hidden.requires_grad:
                self.marks["first"] = self.transient()
                hidden.register_hook(lambda _g: clock.pop())

        def _start_block(self, _grad: Any) -> None:  # the middle layer's backward starts: its timeline opens
            clock.push("block")
            self.timeline.append(self.transient())

        def _before_last(self, _m: Any, args: Any, kwargs: Any) -> None:
            hidden = args[0] if args else kwargs["hidden_states"]
            if "middle" not in self.marks:
                self.marks["middle"] = self.transient()
                hidden.register_hook(self._start_block)

    probe = Probe()
    clock.backends = [probe]
    return probe
