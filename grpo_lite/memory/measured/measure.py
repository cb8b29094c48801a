"""Measure the peak memory of each phase of real GRPO steps of TRL 1.16's ``GRPOTrainer`` (duck-typed): phase
boundaries marked by :class:`GRPOPhaseHooks` (docs/internals.md), read by the tensor tracker and/or the CUDA allocator.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import torch

from grpo_lite.memory.heap import current_rss_bytes, peak_rss_bytes
from grpo_lite.memory.measured.tracker import (
    MEASURED_PHASES,
    Backend,
    CudaAllocator,
    PhaseClock,
    SegmentPeak,
    TensorTracker,
)
from grpo_lite.memory.meta.private import measured_methods


@dataclass
class PhasePeak(SegmentPeak):
    """A phase's peak over the segments of one step (a phase can be entered more than once)."""

    segments: int = 1


@dataclass
class StepMemory:
    """Per-phase peaks of one optimizer step, for each backend (backend -> phase -> peak)."""

    step: int
    phases: dict[str, dict[str, PhasePeak]]

    def peaks(self, backend: str) -> dict[str, int]:
        """Phase -> peak bytes, in MEASURED_PHASES order."""
        got = self.phases[backend]
        return {p: got[p].peak_bytes for p in MEASURED_PHASES if p in got}


@dataclass
class MemoryReport:
    """Everything measured during ``trainer.train()``.

    Attributes:
        steps: per-step results (step 0: what ran before the first step, if anything).
        shapes: per step, the shapes of the loss inputs (``prompt_ids``, ``completion_ids``, masks).
        rss_start_bytes: resident set size when measuring started (model loaded, trainer built).
        peak_rss_bytes: the process's peak resident set size when measuring ended.
        wall_s: seconds ``trainer.train()`` took under measurement.
    """

    steps: list[StepMemory]
    shapes: dict[int, dict[str, tuple[int, ...]]]
    rss_start_bytes: int
    peak_rss_bytes: int
    wall_s: float
    backends: tuple[str, ...] = field(default=())

    def last(self) -> StepMemory:
        """The last real step: steady state (optimizer state exists)."""
        return [s for s in self.steps if s.step > 0][-1]

    def lengths(self) -> tuple[int, int]:
        """``(prompt tokens, completion tokens)`` of the last step's loss inputs (padded widths)."""
        shapes = self.shapes[self.last().step]
        return shapes["prompt_ids"][1], shapes["completion_ids"][1]


class GRPOPhaseHooks:
    """Marks the phases of TRL 1.16 GRPOTrainer steps on a :class:`PhaseClock`; a context manager whose wrappers
    (two of them on classes: every model of the process) are removed when the block ends, on an error too.

    Args:
        trainer: the GRPOTrainer.
        clock: the clock to drive.
        on_train_begin: called when training starts (the optimizer exists then).
        pad_one: end one completion of every generation a token early, so every micro-batch carries padding as
            real ones do (without, SDPA takes its cheaper unmasked path).
    """

    def __init__(
        self,
        trainer: Any,
        clock: PhaseClock,
        on_train_begin: Callable[[], None] | None = None,
        *,
        pad_one: bool = False,
    ) -> None:
        self.trainer = trainer
        self.clock = clock
        self.pad_one = pad_one
        self._on_train_begin = on_train_begin
        self._undo = ExitStack()

    def _callback(self) -> Any:
        from transformers import TrainerCallback  # heavy: transformers

        hooks = self

        class _PhaseCallback(TrainerCallback):  # type: ignore[misc]
            def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                if hooks._on_train_begin is not None:
                    hooks._on_train_begin()

            def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                hooks.clock.set_step(state.global_step + 1)

            def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                hooks.clock.push("optimizer_step")

            def on_optimizer_step(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                hooks.clock.pop()

            def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
                hooks.clock.set_step(0)

        return _PhaseCallback()

    def _wrap(
        self, obj: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]], *, static: bool = False
    ) -> None:
        """Replace ``obj.name`` by ``make(original)`` until :meth:`uninstall` (``static``: a class's staticmethod)."""
        wrapped = make(getattr(obj, name))  # a class's function, a staticmethod's function, or a bound method
        self._undo.enter_context(mock.patch.object(obj, name, staticmethod(wrapped) if static else wrapped))

    def _phase(self, name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def make(fn: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.clock.in_phase(name):
                    return fn(*args, **kwargs)

            return wrapper

        return make

    def _scoring(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        scoring = self._phase("scoring")(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:  # the no-grad log-prob forward only
            return (fn if torch.is_grad_enabled() else scoring)(*args, **kwargs)

        return wrapper

    def _loss(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock = self.clock

        @functools.wraps(fn)
        def wrapper(model: Any, inputs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            clock.shapes[clock.step] = {
                k: tuple(v.shape)
                for k, v in inputs.items()
                if isinstance(v, torch.Tensor) and k.endswith(("_ids", "_mask"))
            }
            with clock.in_phase("forward"):
                return fn(model, inputs, *args, **kwargs)

        return wrapper

    def _generate(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        eos = list(getattr(self.trainer, "eos_token_ids", None) or [])
        phase = self._phase("generation")(fn)

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            out = phase(*args, **kwargs)
            prompt = kwargs.get("input_ids")
            if (
                self.pad_one
                and eos
                and isinstance(out, torch.Tensor)
                and prompt is not None
                and out.size(1) - prompt.size(1) >= 2
            ):
                out = out.clone()
                out[0, -2] = eos[0]  # row 0 ends one token early: its last position becomes padding
            return out

        return wrapper

    def __enter__(self) -> GRPOPhaseHooks:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    def install(self) -> None:
        """Wrap the trainer's methods and add the phase callback; on an error, undo what was done and raise."""
        try:
            self._install()
        except BaseException:
            self.uninstall()
            raise

    def _install(self) -> None:
        from transformers.cache_utils import DynamicLayer  # heavy: transformers
        from trl.kernels.chunked_logprob import ChunkedLogProbFunction

        trainer, clock = self.trainer, self.clock
        self._wrap(trainer.model, "generate", self._generate)
        scoring, clip_grad = measured_methods(trainer)
        self._wrap(trainer, scoring, self._scoring)
        self._wrap(trainer, "compute_loss", self._loss)
        self._wrap(trainer.accelerator, "backward", self._phase("backward_head"))
        self._wrap(trainer, clip_grad, self._phase("optimizer_step"))
        self._wrap(ChunkedLogProbFunction, "forward", clock.tagging("lm_head"), static=True)
        self._wrap(ChunkedLogProbFunction, "backward", clock.tagging("lm_head", then="backward_layers"), static=True)
        self._wrap(DynamicLayer, "update", clock.tagging("kv_cache"))
        head = trainer.model.get_output_embeddings()
        if head is not None:  # generation's last-position logits (the fused head skips the module)
            pre = head.register_forward_pre_hook(lambda *_: clock.enter_region("lm_head"))
            post = head.register_forward_hook(lambda *_: clock.leave_region() and None)  # must return None
            self._undo.callback(pre.remove)
            self._undo.callback(post.remove)
        monitor = getattr(trainer, "update_monitor", None)
        if monitor is not None:  # its shadows, sums and snapshots: the model's update_monitor
            for name in ("setup", "begin_step", "capture_grads", "end_step"):
                self._wrap(monitor, name, clock.tagging("monitor"))
        callback = self._callback()
        trainer.add_callback(callback)
        self._undo.callback(trainer.remove_callback, callback)

    def uninstall(self) -> None:
        """Undo every wrapper, in reverse order."""
        self._undo.close()


def _aggregate(clock: PhaseClock, backends: Sequence[Backend]) -> list[StepMemory]:
    per_backend = {b.name: b.segments() for b in backends}
    steps: dict[int, StepMemory] = {}
    for i, (step, phase) in enumerate(clock.segments):
        record = steps.setdefault(step, StepMemory(step, {b.name: {} for b in backends}))
        for name, segs in per_backend.items():
            seg = segs[i]
            prev = record.phases[name].get(phase)
            if prev is None:
                record.phases[name][phase] = PhasePeak(
                    seg.peak_bytes, seg.start_bytes, seg.categories, dict(seg.category_max)
                )
                continue
            prev.segments += 1
            for cat, b in seg.category_max.items():
                prev.category_max[cat] = max(prev.category_max.get(cat, 0), b)
            if seg.peak_bytes > prev.peak_bytes:
                prev.peak_bytes, prev.categories = seg.peak_bytes, seg.categories
    return [steps[k] for k in sorted(steps)]


def measure_training(trainer: Any, backends: Sequence[str] = ("tensor",), *, pad_one: bool = False) -> MemoryReport:
    """Run ``trainer.train()`` and measure every phase of every step.

    Args:
        trainer: a TRL ``GRPOTrainer`` not yet trained; its ``max_steps`` decides how long this runs.
        backends: ``"tensor"`` (CPU or CUDA tensors, with categories) and/or ``"cuda"`` (the CUDA
            allocator's allocated and reserved peaks).
        pad_one: see :class:`GRPOPhaseHooks` (worst-case attention: padding in every micro-batch).

    Returns:
        A MemoryReport; ``report.last()`` is the last, steady-state step.

    Raises:
        ValueError: an unknown backend name.
    """
    clock = PhaseClock()
    made: list[Backend] = []
    tracker: TensorTracker | None = None
    for name in backends:
        if name == "tensor":
            tracker = TensorTracker(clock, device_type=trainer.accelerator.device.type)
            made.append(tracker)
        elif name == "cuda":
            made.append(CudaAllocator())
        else:
            raise ValueError(f"unknown memory backend {name!r}; choose tensor or cuda")

    def on_train_begin() -> None:
        if tracker is not None and trainer.optimizer is not None:
            tracker.track_optimizer(trainer.optimizer)

    # every wrapper, backend and hook is removed when the block ends, on an error too
    with GRPOPhaseHooks(trainer, clock, on_train_begin, pad_one=pad_one), ExitStack() as started:
        if tracker is not None:
            tracker.track_module(trainer.model)
            if getattr(trainer, "ref_model", None) is not None:
                tracker.track_module(trainer.ref_model, "reference")
        clock.backends = made
        rss_start = current_rss_bytes()
        t0 = time.perf_counter()
        for b in made:
            b.start()
            started.callback(b.stop)  # stopped in reverse order
        started.callback(clock.set_step, -1)  # first: close the last segment
        trainer.train()
    steps = [s for s in _aggregate(clock, made) if s.step != -1]
    return MemoryReport(
        steps=steps,
        shapes=clock.shapes,
        rss_start_bytes=rss_start,
        peak_rss_bytes=peak_rss_bytes(),
        wall_s=time.perf_counter() - t0,
        backends=tuple(backends),
    )
