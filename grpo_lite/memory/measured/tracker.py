"""Live tensor bytes per phase of a step: :class:`PhaseClock` knows the phase now running; each backend reports the
peak of every segment, :class:`TensorTracker` by tensor category, :class:`CudaAllocator` from the CUDA allocator
(docs/internals.md). Imports torch at the top: never on the ``grpo-lite plan`` path.
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch.utils.weak import WeakIdKeyDictionary

from grpo_lite.memory.meta.private import TorchDispatchMode, tree_leaves

MEASURED_PHASES = ("generation", "scoring", "forward", "backward_head", "backward_layers", "optimizer_step", "other")
PERSISTENT: tuple[str, ...] = ("param", "reference", "buffer", "gradient", "optimizer_state", "monitor")
CATEGORIES: tuple[str, ...] = PERSISTENT + ("activation", "kv_cache", "lm_head", "optimizer_temp", "temporary")
_TRANSIENT = frozenset(CATEGORIES) - frozenset(PERSISTENT)


@dataclass
class SegmentPeak:
    """The high point of one segment (between two phase boundaries): ``categories`` are the bytes by category at
    the peak (CudaAllocator: the reserved peak), ``category_max`` each category's own high point."""

    peak_bytes: int
    start_bytes: int
    categories: dict[str, int] = field(default_factory=dict)
    category_max: dict[str, int] = field(default_factory=dict)


class Backend(Protocol):
    """What a memory backend provides to :class:`PhaseClock`."""

    name: str

    def start(self) -> None: ...

    def close_segment(self) -> None: ...

    def stop(self) -> None: ...

    def segments(self) -> list[SegmentPeak]: ...


class PhaseClock:
    """The current step, phase (a stack: the innermost wins) and allocation region; every change of step or phase
    closes a segment in ``segments`` and in every backend, so their i-th segments line up."""

    def __init__(self) -> None:
        self.step = 0
        self._phases: list[str] = []
        self._regions: list[str] = []
        self.segments: list[tuple[int, str]] = []
        self.backends: list[Backend] = []
        self.shapes: dict[int, dict[str, tuple[int, ...]]] = {}  # step -> loss input name -> shape

    @property
    def phase(self) -> str:
        """The phase now running (``"other"`` outside every marked one)."""
        return self._phases[-1] if self._phases else "other"

    @property
    def region(self) -> str | None:
        """The category newly allocated storages get (None: decided by the phase)."""
        return self._regions[-1] if self._regions else None

    def _close(self) -> None:
        self.segments.append((self.step, self.phase))
        for backend in self.backends:
            backend.close_segment()

    def push(self, phase: str) -> None:
        self._close()
        self._phases.append(phase)

    def pop(self) -> None:
        self._close()
        self._phases.pop()

    def replace(self, phase: str) -> None:
        """Swap the innermost phase for ``phase`` (head backward -> layers backward)."""
        self._close()
        self._phases[-1] = phase

    def set_step(self, step: int) -> None:
        self._close()
        self.step = step

    @contextlib.contextmanager
    def in_phase(self, phase: str) -> Iterator[None]:
        self.push(phase)
        try:
            yield
        finally:
            self.pop()

    def enter_region(self, category: str) -> None:
        """Tag storages allocated from now on with ``category`` (no segment boundary)."""
        self._regions.append(category)

    def leave_region(self) -> None:
        self._regions.pop()

    def tagging(self, category: str, *, then: str | None = None) -> Any:
        """A decorator: the wrapped call's allocations are tagged ``category``; with ``then``, a call that
        returns during ``backward_head`` switches the phase to ``then`` (the LM head's backward has ended)."""

        def make(fn: Any) -> Any:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                self.enter_region(category)
                try:
                    out = fn(*args, **kwargs)
                finally:
                    self.leave_region()
                if then is not None and self.phase == "backward_head":
                    self.replace(then)
                return out

            return wrapper

        return make


@dataclass
class _Entry:
    nbytes: int
    category: str


class TensorTracker(TorchDispatchMode):
    """Live tensor bytes on one device type: each op's new output storages, recorded by a ``TorchDispatchMode`` and
    dropped by a weakref finalizer, plus the tensors :meth:`track_module` / :meth:`track_optimizer` register; what
    autograd saves is retagged ``activation``, gradients when accumulated, optimizer state after each step."""

    name = "tensor"

    def __init__(self, clock: PhaseClock, device_type: str = "cpu") -> None:
        super().__init__()
        self.clock = clock
        self.device_type = device_type
        self.live = 0
        self.by_category: dict[str, int] = dict.fromkeys(CATEGORIES, 0)
        self._entries: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._refs: dict[int, weakref.ref[Any]] = {}
        self._seg_start = self._seg_peak = 0
        self._seg_cats: dict[str, int] = {}
        self._seg_cat_max: dict[str, int] = dict(self.by_category)
        self._done: list[SegmentPeak] = []
        self._hooks: list[Any] = []
        self._saved_hooks: contextlib.AbstractContextManager[Any] | None = None

    def _add(self, st: torch.UntypedStorage, category: str) -> None:
        entry = _Entry(st.nbytes(), category)
        self._refs[id(entry)] = weakref.ref(st, functools.partial(self._on_free, entry))
        self._entries[st] = entry
        self.live += entry.nbytes
        self._grow(category, entry.nbytes)

    def _grow(self, category: str, nbytes: int) -> None:
        now = self.by_category[category] + nbytes
        self.by_category[category] = now
        self._seg_cat_max[category] = max(self._seg_cat_max[category], now)

    def _on_free(self, entry: _Entry, _ref: weakref.ref[Any]) -> None:
        self.live -= entry.nbytes
        self.by_category[entry.category] -= entry.nbytes
        self._refs.pop(id(entry), None)

    def _retag_entry(self, entry: _Entry, category: str) -> None:
        if entry.category != category:
            self.by_category[entry.category] -= entry.nbytes
            self._grow(category, entry.nbytes)
            entry.category = category

    def _storage(self, t: torch.Tensor) -> torch.UntypedStorage | None:
        if t.device.type != self.device_type or t.is_sparse or t.is_nested:
            return None
        try:
            return t.untyped_storage()
        except (NotImplementedError, RuntimeError):  # tensors without a storage (e.g. mkldnn)
            return None

    def register(self, t: torch.Tensor, category: str) -> None:
        """Count a tensor made outside the mode, or move a known one to ``category``."""
        st = self._storage(t)
        if st is None or st.nbytes() == 0:
            return
        entry = self._entries.get(st)
        if entry is None:
            self._add(st, category)
        else:
            self._retag_entry(entry, category)
        self._check_peak()

    def retag(self, t: torch.Tensor, category: str) -> None:
        """Move a known storage to ``category`` if it is in a transient category."""
        st = self._storage(t)
        entry = self._entries.get(st) if st is not None else None
        if entry is not None and entry.category in _TRANSIENT:
            self._retag_entry(entry, category)

    def track_module(self, module: torch.nn.Module, category: str = "param") -> None:
        """Register parameters, buffers and existing grads; retag gradients as they accumulate."""
        for p in module.parameters():
            self.register(p, category)
            if p.grad is not None:
                self.register(p.grad, "gradient")
            if p.requires_grad and category == "param":
                self._hooks.append(p.register_post_accumulate_grad_hook(self._on_grad))
        for b in module.buffers():
            self.register(b, "buffer")

    def _on_grad(self, p: torch.Tensor) -> None:
        if p.grad is not None:
            self.register(p.grad, "gradient")

    def track_optimizer(self, optimizer: Any, *, stepped_only: bool = False) -> None:
        """Register (or retag) every optimizer state tensor, and those of state objects (GaLore's projector);
        ``stepped_only``: of the parameters that have a gradient now (the ones a step just updated)."""
        if stepped_only:
            states = [
                optimizer.state[p]
                for g in optimizer.param_groups
                for p in g["params"]
                if p.grad is not None and p in optimizer.state
            ]
        else:
            states = list(optimizer.state.values())
        for state in states:
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    self.register(value, "optimizer_state")
                elif hasattr(value, "__dict__") and not isinstance(value, type):
                    for inner in vars(value).values():
                        for t in inner if isinstance(inner, (list, tuple)) else (inner,):
                            if isinstance(t, torch.Tensor):
                                self.register(t, "optimizer_state")

    def _check_peak(self) -> None:
        if self.live > self._seg_peak:
            self._seg_peak = self.live
            self._seg_cats = dict(self.by_category)

    def close_segment(self) -> None:
        self._done.append(SegmentPeak(self._seg_peak, self._seg_start, self._seg_cats, self._seg_cat_max))
        self._open_segment()

    def _open_segment(self) -> None:
        self._seg_start = self._seg_peak = self.live
        self._seg_cats = dict(self.by_category)
        self._seg_cat_max = dict(self.by_category)

    def segments(self) -> list[SegmentPeak]:
        return self._done

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        self.retag(t, "activation")
        return t

    def start(self) -> None:
        self.__enter__()
        self._saved_hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._saved_hooks.__enter__()
        from torch.optim.optimizer import register_optimizer_step_post_hook  # heavy: torch

        self._hooks.append(
            register_optimizer_step_post_hook(lambda opt, _a, _k: self.track_optimizer(opt, stepped_only=True))
        )
        self._open_segment()

    def stop(self) -> None:
        if self._saved_hooks is not None:
            self._saved_hooks.__exit__(None, None, None)
            self._saved_hooks = None
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()
        self.__exit__(None, None, None)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in (out,) if isinstance(out, torch.Tensor) else tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            st = self._storage(t)
            if st is None:
                continue
            entry = self._entries.get(st)
            if entry is None:
                if st.nbytes():
                    phase = self.clock.phase
                    self._add(st, self.clock.region or ("optimizer_temp" if phase == "optimizer_step" else "temporary"))
            elif entry.nbytes != st.nbytes():  # an out= argument resized by the op
                delta = st.nbytes() - entry.nbytes
                entry.nbytes += delta
                self.live += delta
                self._grow(entry.category, delta)
        self._check_peak()
        return out


class CudaAllocator:
    """``torch.cuda.max_memory_allocated`` per segment; the reserved peak rides in ``categories``."""

    name = "cuda"

    def __init__(self, device: int | None = None) -> None:
        self.device = device
        self._done: list[SegmentPeak] = []
        self._start = 0

    def start(self) -> None:
        torch.cuda.synchronize(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        self._start = torch.cuda.memory_allocated(self.device)

    def close_segment(self) -> None:
        torch.cuda.synchronize(self.device)
        peak = torch.cuda.max_memory_allocated(self.device)
        reserved = torch.cuda.max_memory_reserved(self.device)
        self._done.append(SegmentPeak(peak, self._start, {"reserved": reserved}))
        torch.cuda.reset_peak_memory_stats(self.device)
        self._start = torch.cuda.memory_allocated(self.device)

    def stop(self) -> None:
        pass  # nothing to release

    def segments(self) -> list[SegmentPeak]:
        return self._done
