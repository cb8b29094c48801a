"""One GRPO step of TRL 1.16 on meta tensors, phase by phase, at a plan's worst-case shapes.

Every tensor is counted by :class:`~grpo_lite.memory.tracker.TensorTracker` (live storage bytes, as on
CPU where it equals the allocator's own count), on the phase clock the memory model's phases use:

| phase | what runs (as TRL's ``GRPOTrainer`` runs it) |
| --- | --- |
| ``generation`` | the prefill of ``n`` prompts, then the last decoding step: the KV cache at ``P + C - 1`` tokens, one more token, the logits copied to fp32, softmax, multinomial (``generate``'s loop calls ``.item()`` and cannot run on meta; its peak is that last step) |
| ``scoring`` | a no-grad forward of one micro-batch through TRL's chunked head (old / reference log-probs), when the plan has one |
| ``forward`` | a micro-batch through the model and TRL's fused head (or the shared-prefix packing), the loss |
| ``backward_head`` | ``loss.backward()`` until the head's backward returns |
| ``backward_layers`` | the rest of the backward (layer-wise optimizers step here) |
| ``optimizer_step`` | gradient clipping, the update monitor's capture, ``optimizer.step()`` |

The step is the second one: a short warm-up step first creates the optimizer state and the monitor's
shadows. With gradient accumulation two micro-batches run (the second holds the first's gradients, like
every later one). Under GaLore the measured step recomputes its projections (an SVD per matrix, every
``update_proj_gap`` steps), its worst step.

TRL always passes a 2-D attention mask; whether transformers turns it into a 4-D one (the batch is
padded) is the simulation's input (:func:`~grpo_lite.simulation.cuda.cuda_semantics`).
What TRL computes data-dependently is taken at the worst case: every completion token is scored
(``hidden[mask]`` becomes the completion positions), every prompt group packs to the plan's worst-case
length (:func:`grpo_lite.memory.tokens.packing`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from grpo_lite.memory.tracker import PhaseClock, TensorTracker
from grpo_lite.simulation import autocast as amp

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.settings import StepSettings
    from grpo_lite.simulation.build import Built
    from grpo_lite.simulation.cuda import GpuChoices

__all__ = ["Shapes", "run_step", "shapes_of"]

META = torch.device("meta")
CHUNK = 32768  # TRL's vocabulary tile (_CHUNKED_LOGPROB_CHUNK_SIZE)
WARMUP_TOKENS = 8  # prompt and completion tokens of the warm-up step (it only creates the optimizer state)


@dataclass(frozen=True)
class Shapes:
    """The worst-case shapes of one step.

    Attributes:
        generated: sequences sampled at once (``per_device_train_batch_size x steps_per_generation``).
        prompt: prompt tokens ``P`` (every prompt padded to it).
        completion: completion tokens ``C`` (every completion at its maximum).
        micro_batch: sequences per micro-batch ``b``.
        micro_batches: micro-batches simulated (two when accumulating: the second is every later one).
        shared_prefix: one packed row per prompt group.
        groups: packed rows per micro-batch (shared prefix).
        packed: tokens per packed row (shared prefix).
    """

    generated: int
    prompt: int
    completion: int
    micro_batch: int
    micro_batches: int
    shared_prefix: bool
    groups: int
    packed: int


def shapes_of(s: StepSettings) -> Shapes:
    """The shapes the memory model plans for (the same packing rule)."""
    from grpo_lite.memory.tokens import packing

    pack = packing(s)
    return Shapes(generated=s.generation_batch_per_device, prompt=s.max_prompt_length,
                  completion=s.max_completion_length, micro_batch=s.per_device_train_batch_size,
                  micro_batches=min(s.gradient_accumulation_steps, 2), shared_prefix=s.shared_prefix,
                  groups=pack.groups, packed=pack.seq)


def _ids(*shape: int) -> Tensor:
    return torch.zeros(shape, dtype=torch.long, device=META)


class _Step:
    """The phases of one step on a built model (see the module table)."""

    def __init__(self, built: Built, s: StepSettings, choices: GpuChoices, clock: PhaseClock,
                 tracker: TensorTracker) -> None:
        self.built, self.s, self.choices, self.clock, self.tracker = built, s, choices, clock, tracker
        self.peft = hasattr(built.model, "peft_config")
        self.layerwise = hasattr(built.optimizer, "optimizer_dict")

    # ---- the model as TRL calls it -------------------------------------------------------------------
    @contextlib.contextmanager
    def _autocast(self, on: bool = True) -> Iterator[None]:
        if on and self.s.bf16:
            with amp.CudaAutocast(torch.bfloat16):
                yield
        else:
            yield

    def _head(self, hidden: Tensor, rows: int, width: int) -> Tensor:
        """TRL's fused forward after the backbone (compact path): the scored hidden states through the chunked
        head; log-probs and entropies scattered back to ``[rows, width]``; returns the log-probs."""
        from trl.kernels.chunked_logprob import ChunkedLogProbFunction

        lm = self.built.lm
        head = lm.get_output_embeddings()
        targets = _ids(hidden.size(0))
        if self.s.cast_lm_head_to_fp32:
            hidden = hidden.float()
        with amp.suspended() if self.s.cast_lm_head_to_fp32 else contextlib.nullcontext():
            logps, entropy, *_ = ChunkedLogProbFunction.apply(hidden, head.weight, head.bias, targets, 1.0, CHUNK,
                                                              None, 1.0, ("log_probs", "entropy"))
        mask = torch.ones(rows, width, dtype=torch.bool, device=META)
        logps = logps.new_zeros(mask.shape).masked_scatter(mask, logps)
        entropy.new_zeros(mask.shape).masked_scatter(mask, entropy)
        return logps

    def _logps(self, rows: int, prompt: int, completion: int) -> Tensor:
        """``_get_per_token_logps_and_entropies`` for ``rows`` sequences: ``[rows, completion]`` log-probs."""
        if self.s.shared_prefix:
            return self._shared_logps(rows, prompt, completion)
        lm, width = self.built.lm, prompt + completion
        mask = _ids(rows, width)
        with self._autocast():
            out = lm.base_model(input_ids=_ids(rows, width), attention_mask=mask, use_cache=False)
            hidden = out.last_hidden_state[:, :-1]
            scored = hidden[:, prompt - 1:].contiguous().view(-1, hidden.size(-1))  # hidden_states[labels != -100]
            logps = self._head(scored, rows, width - 1)
        return torch.cat([logps[:, -completion:]], dim=0)

    def _shared_logps(self, rows: int, prompt: int, completion: int) -> Tensor:
        """:func:`grpo_lite.training.shared_prefix.shared_prefix_logps_and_entropies` at the worst-case packing."""
        lm, shapes = self.built.lm, self.shapes(prompt, completion)
        groups, width, scored = shapes.groups, shapes.packed, rows * completion
        allowed = torch.ones(groups, 1, width, width, dtype=torch.bool, device=META)
        with self._autocast():
            out = lm.base_model(input_ids=_ids(groups, width), attention_mask=allowed,
                                position_ids=_ids(groups, width), use_cache=False)
            hidden = out.last_hidden_state
            kept = hidden.reshape(-1, hidden.size(-1))[_ids(scored)].unsqueeze(0)  # _keep_hidden
            logps = self._head(kept.reshape(scored, -1).clone(), 1, scored)  # hidden_states[mask] of shift_labels
        values = logps[0].float()  # PackedGroups.to_grid, then the rows of the chunk into TRL's [B, C] layout
        grid = values.new_zeros(rows, completion).index_put((_ids(scored), _ids(scored)), values)
        return torch.zeros(rows, completion, device=META).index_put((_ids(rows),), grid)

    def shapes(self, prompt: int, completion: int) -> Shapes:
        from dataclasses import replace

        from grpo_lite.memory.tokens import packing

        pack = packing(replace(self.s, max_prompt_length=prompt, max_completion_length=completion))
        return replace(shapes_of(self.s), groups=pack.groups, packed=pack.seq)

    @staticmethod
    def _loss(logps: Tensor) -> Tensor:
        """TRL's GRPO loss on ``[rows, C]`` log-probs (a few small tensors)."""
        old = logps.detach()
        ratio = torch.exp(logps - old)
        advantages = torch.zeros(logps.size(0), 1, device=META)
        per_token = -torch.min(ratio * advantages, torch.clamp(ratio, 0.8, 1.2) * advantages)
        mask = torch.ones_like(logps)
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)

    # ---- the phases ----------------------------------------------------------------------------------
    def generation(self, n: int, prompt: int, completion: int) -> None:
        """Prefill, then the last decoding step with the KV cache at its final length."""
        from transformers import DynamicCache

        lm = self.built.lm
        # accelerate wraps the prepared model's forward in autocast and casts its outputs to fp32; a PEFT
        # model generates through its base model's own forward, outside that wrapper
        from trl.models.utils import disable_gradient_checkpointing

        wrapped = not self.peft and self.s.bf16
        with self.clock.in_phase("generation"), torch.no_grad(), self._autocast(wrapped), \
                disable_gradient_checkpointing(self.built.model, self.built.args.gradient_checkpointing_kwargs):
            cache = DynamicCache(config=lm.config)
            mask = _ids(n, prompt)
            inputs = lm.prepare_inputs_for_generation(_ids(n, prompt), cache=cache, attention_mask=mask,
                                                      use_cache=True, is_first_iteration=True, logits_to_keep=1)
            self._sample(lm(**inputs, return_dict=True), wrapped)
            _grow_cache(cache, completion - 1, self.tracker)
            ids = _ids(n, prompt + completion)  # generate's running ids and mask: the cache and the new token
            mask = _ids(n, prompt + completion)
            inputs = lm.prepare_inputs_for_generation(ids, next_sequence_length=1, cache=cache, attention_mask=mask,
                                                      use_cache=True, logits_to_keep=1)
            self._sample(lm(**inputs, return_dict=True), wrapped)
            del cache, inputs

    def _sample(self, out: Any, wrapped: bool) -> None:
        """``generate``'s token selection after a forward: fp32 copy of the last logits, softmax, multinomial."""
        logits = out.logits.float() if wrapped else out.logits  # accelerate's convert_outputs_to_fp32
        del out
        scores = logits[:, -1].to(copy=True, dtype=torch.float32)
        del logits
        probs = torch.nn.functional.softmax(scores, dim=-1)
        torch.multinomial(probs, num_samples=1).squeeze(1)

    def scoring(self, rows: int, prompt: int, completion: int) -> None:
        with self.clock.in_phase("scoring"), torch.no_grad():
            self._logps(rows, prompt, completion)

    def micro_batch(self, rows: int, prompt: int, completion: int, accumulation: int) -> None:
        with _checkpoint_autocast(self.built.model):
            with self.clock.in_phase("forward"):
                loss = self._loss(self._logps(rows, prompt, completion)) / accumulation
            self.clock.push("backward_head")
            try:
                loss.backward()
            finally:
                self.clock.pop()

    def optimizer_step(self) -> None:
        model, monitor = self.built.model, self.built.monitor
        with self.clock.in_phase("optimizer_step"):
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.grad is not None],
                                           self.built.args.max_grad_norm)
            if not self.layerwise:
                with self._region("monitor"):
                    monitor.capture_grads()
            self.built.optimizer.step()
        model.zero_grad(set_to_none=True)
        with self._region("monitor"):
            monitor.end_step()

    @contextlib.contextmanager
    def _region(self, name: str) -> Iterator[None]:
        self.clock.enter_region(name)
        try:
            yield
        finally:
            self.clock.leave_region()

    def step(self, shapes: Shapes, *, measured: bool) -> None:
        """One optimizer step: the full worst case when ``measured``, else the warm-up (tiny shapes)."""
        with self._region("monitor"):
            self.built.monitor.begin_step()
        if not measured:
            self.micro_batch(1, WARMUP_TOKENS, WARMUP_TOKENS, 1)
            self.optimizer_step()
            return
        p, c, b = shapes.prompt, shapes.completion, shapes.micro_batch
        self.generation(shapes.generated, p, c)
        if self.s.needs_scoring:
            self.scoring(b, p, c)
        for _ in range(shapes.micro_batches):
            self.micro_batch(b, p, c, self.s.gradient_accumulation_steps)
        self.optimizer_step()


def _grow_cache(cache: Any, tokens: int, tracker: TensorTracker) -> None:
    """The cache as ``tokens`` more decoding steps leave it, grown by each layer's own ``update``: a sliding-window
    layer keeps its window and counts the tokens it dropped, so the masks transformers builds next fit it.

    The earlier steps peak below the last one (the cache only grows), so they run uncounted, in two updates:
    all but one token, then one, which leaves each layer's storage as a one-token decoding step leaves it (a
    sliding layer keeps a view of ``window`` tokens). The result is counted as ``kv_cache``.
    """
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        for layer in cache.layers:
            if not layer.is_initialized:
                continue
            batch, heads, _, width = layer.keys.shape
            for step in (tokens - 1, 1) if tokens > 1 else (tokens,):
                if step > 0:
                    layer.update(layer.keys.new_empty((batch, heads, step, width)),
                                 layer.values.new_empty((batch, heads, step, layer.values.shape[-1])))
    for layer in cache.layers:
        if layer.is_initialized:
            tracker.register(layer.keys, "kv_cache")
            tracker.register(layer.values, "kv_cache")


def _wrap_static(cls: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Callable[[], None]:
    original = cls.__dict__[name]
    setattr(cls, name, staticmethod(make(getattr(cls, name))))
    return lambda: setattr(cls, name, original)


@contextlib.contextmanager
def _phase_hooks(clock: PhaseClock, lm: Any) -> Iterator[None]:
    """Tag the KV cache, the LM head and the monitor; switch to ``backward_layers`` when the head's backward returns."""
    from transformers.cache_utils import DynamicLayer
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    region = clock.tagging
    undo = [_wrap_static(ChunkedLogProbFunction, "forward", region("lm_head")),
            _wrap_static(ChunkedLogProbFunction, "backward", region("lm_head", then="backward_layers"))]
    layers, kinds = [DynamicLayer], []
    while layers:  # the sliding-window layers transformers builds for a config have their own update
        kind = layers.pop()
        layers += kind.__subclasses__()
        if "update" in vars(kind):
            kinds.append((kind, vars(kind)["update"]))
    for kind, original in kinds:
        kind.update = region("kv_cache")(original)
        undo.append(lambda kind=kind, original=original: setattr(kind, "update", original))
    head = lm.get_output_embeddings()
    handles = [head.register_forward_pre_hook(lambda *_: clock.enter_region("lm_head")),
               head.register_forward_hook(lambda *_: clock.leave_region() and None)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        while undo:
            undo.pop()()


def _bump_galore_projections(optimizer: Any) -> None:
    """Make the next step one where GaLore recomputes its projections (its step counter a multiple of the gap)."""
    from grpo_lite.precision.rounding import inner_optimizers

    for inner in inner_optimizers(optimizer):
        for group in inner.param_groups:
            gap = group.get("update_proj_gap")
            if gap is None:
                continue
            for p in group["params"]:
                state = inner.state.get(p, {})
                if "projector" in state and isinstance(state.get("step"), int):
                    state["step"] = gap * max(1, -(-state["step"] // gap))


def run_step(built: Built, s: StepSettings, choices: GpuChoices) -> tuple[PhaseClock, TensorTracker]:
    """Warm up, then run the measured step under the tracker; the clock's segments of step 2 are the result."""
    clock = PhaseClock()
    tracker = TensorTracker(clock, device_type="meta")
    clock.backends = [tracker]
    tracker.track_module(built.model)
    for constant in built.quant_states:
        tracker.register(constant, "param")
    driver = _Step(built, s, choices, clock, tracker)
    with _phase_hooks(clock, built.lm):
        tracker.start()
        try:
            clock.set_step(1)
            driver.step(shapes_of(s), measured=False)
            _bump_galore_projections(built.optimizer)
            choices.attention.clear()  # count the measured step's kernel calls only
            clock.set_step(2)
            driver.step(shapes_of(s), measured=True)
            clock.set_step(-1)
        finally:
            tracker.stop()
    return clock, tracker


@contextlib.contextmanager
def _checkpoint_autocast(model: Any) -> Iterator[None]:
    """Gradient checkpointing restores the forward's autocast when it recomputes a block; do the same for the
    emulated one (torch's checkpoint has no meta autocast to restore)."""
    touched = []
    for module in model.modules():
        fn = getattr(module, "_gradient_checkpointing_func", None)
        if fn is None or not getattr(module, "gradient_checkpointing", False):
            continue

        def checkpoint(function: Callable[..., Any], *args: Any, _fn: Any = fn, **kwargs: Any) -> Any:
            mode = amp.active()
            if mode is None:
                return _fn(function, *args, **kwargs)

            def under_autocast(*a: Any, **k: Any) -> Any:
                if amp.active() is mode:
                    return function(*a, **k)
                with amp.CudaAutocast(mode.dtype):
                    return function(*a, **k)

            return _fn(under_autocast, *args, **kwargs)

        touched.append((module, fn))
        module._gradient_checkpointing_func = checkpoint
    try:
        yield
    finally:
        for module, fn in touched:
            module._gradient_checkpointing_func = fn
