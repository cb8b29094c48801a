"""One GRPO step of TRL 1.16 on meta tensors, phase by phase, at a plan's worst-case shapes.

Every tensor is counted by :class:`~grpo_lite.memory.measured.tracker.TensorTracker` on the memory model's phase clock; the
loss and log-probs are the trainer's own methods (:mod:`~grpo_lite.simulation.trainer`) on a micro-batch laid out as
TRL lays it out, every completion at its maximum length. The step measured is the second, after a warm-up. What each
phase runs, accumulation and GaLore: docs/internals.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from grpo_lite.memory.measured.tracker import PhaseClock, TensorTracker
from grpo_lite.memory.meta import autocast as amp
from grpo_lite.memory.meta.private import trainer_logps
from grpo_lite.precision.rounding import inner_optimizers
from grpo_lite.simulation.data import META, BatchData
from grpo_lite.simulation.trainer import trainer_for

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.meta.cuda import GpuChoices
    from grpo_lite.memory.step_settings import StepSettings
    from grpo_lite.simulation.build import Built


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
        group: completions per prompt (``num_generations``): consecutive rows share a prompt, as TRL samples them.
    """

    generated: int
    prompt: int
    completion: int
    micro_batch: int
    micro_batches: int
    group: int


def shapes_of(s: StepSettings) -> Shapes:
    """The step's worst-case shapes from the plan's settings."""
    return Shapes(
        generated=s.generation_batch_per_device,
        prompt=s.max_prompt_length,
        completion=s.max_completion_length,
        micro_batch=s.per_device_train_batch_size,
        micro_batches=min(s.gradient_accumulation_steps, 2),
        group=s.num_generations,
    )


def synthetic_batch(rows: int, prompt: int, completion: int, group: int, generated: int) -> dict[str, Tensor]:
    """A micro-batch of ``rows`` as TRL's ``_generate_and_score_completions`` hands it to the loss (CPU tensors):
    rows ``i`` and ``j`` share a prompt when ``i // group == j // group``; every prompt is ``prompt`` tokens, every
    completion ``completion`` (the worst case), in a generation batch of ``generated`` sequences (TRL's
    ``num_items_in_batch``: its completion tokens); the advantages are zero (their values change no shape)."""
    owner = torch.arange(rows) // group
    prompt_ids = (owner[:, None] + 1).expand(rows, prompt).contiguous()  # one token sequence per prompt
    completion_ids = torch.arange(rows)[:, None].expand(rows, completion).contiguous() + 1
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": torch.ones(rows, prompt, dtype=torch.long),
        "completion_ids": completion_ids,
        "completion_mask": torch.ones(rows, completion, dtype=torch.long),
        "advantages": torch.zeros(rows),
        "num_items_in_batch": torch.tensor(generated * completion),
    }


def _ids(*shape: int) -> Tensor:
    return torch.zeros(shape, dtype=torch.long, device=META)


def _ones(*shape: int) -> Tensor:  # an attention mask without padding (padding is cuda_semantics' input)
    return torch.ones(shape, dtype=torch.long, device=META)


class _Step:
    """The phases of one step on a built model (see the module table)."""

    def __init__(
        self, built: Built, s: StepSettings, choices: GpuChoices, clock: PhaseClock, tracker: TensorTracker
    ) -> None:
        self.built, self.s, self.choices, self.clock, self.tracker = built, s, choices, clock, tracker
        self.peft = hasattr(built.model, "peft_config")
        self.layerwise = hasattr(built.optimizer, "optimizer_dict")
        self.data = BatchData()
        self.trainer = trainer_for(built, s, self._autocast)
        self.shapes = shapes_of(s)

    def batch(self, rows: int, prompt: int, completion: int) -> dict[str, Tensor]:
        """:func:`synthetic_batch` on meta, its tokens and masks carrying their values."""
        batch = synthetic_batch(rows, prompt, completion, self.shapes.group, self.shapes.generated)
        return {k: self.data.place(v) for k, v in batch.items()}

    # ---- the model as TRL calls it -------------------------------------------------------------------
    @contextlib.contextmanager
    def _autocast(self, on: bool = True) -> Iterator[None]:
        if on and self.s.bf16:
            with amp.CudaAutocast(torch.bfloat16):
                yield
        else:
            yield

    # ---- the phases ----------------------------------------------------------------------------------
    def generation(self, n: int, prompt: int, completion: int) -> None:
        """Prefill, then the last decoding step with the KV cache at its final length."""
        from transformers import DynamicCache  # heavy: transformers

        lm = self.built.lm
        # accelerate wraps the prepared model's forward in autocast and casts its outputs to fp32; a PEFT
        # model generates through its base model's own forward, outside that wrapper
        from trl.models.utils import disable_gradient_checkpointing

        wrapped = not self.peft and self.s.bf16
        with (
            self.clock.in_phase("generation"),
            torch.no_grad(),
            self._autocast(wrapped),
            disable_gradient_checkpointing(self.built.model, self.built.args.gradient_checkpointing_kwargs),
        ):
            cache = DynamicCache(config=lm.config)
            mask = _ones(n, prompt)
            inputs = lm.prepare_inputs_for_generation(
                _ids(n, prompt),
                cache=cache,
                attention_mask=mask,
                use_cache=True,
                is_first_iteration=True,
                logits_to_keep=1,
            )
            self._sample(lm(**inputs, return_dict=True), wrapped)
            _grow_cache(cache, completion - 1, self.tracker)
            ids = _ids(n, prompt + completion)  # generate's running ids and mask: the cache and the new token
            mask = _ones(n, prompt + completion)
            inputs = lm.prepare_inputs_for_generation(
                ids, next_sequence_length=1, cache=cache, attention_mask=mask, use_cache=True, logits_to_keep=1
            )
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

    def scoring(self, rows: int, prompt: int, completion: int) -> dict[str, Tensor]:
        """The old and reference log-probs, as ``_generate_and_score_completions`` computes them (chunks of ``rows``;
        the reference with the adapter off, TRL's ``use_adapter``); returns the ones TRL puts in the batch."""
        from trl.models.utils import disable_gradient_checkpointing  # heavy: TRL
        from trl.trainer.utils import use_adapter

        args, model = self.built.args, self.built.model
        batch = self.batch(rows, prompt, completion)
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        scored: dict[str, Tensor] = {}

        def logps() -> Tensor:
            return trainer_logps(self.trainer)(model, ids, mask, completion, batch_size=rows)[0]

        with (
            self.clock.in_phase("scoring"),
            torch.no_grad(),
            disable_gradient_checkpointing(model, args.gradient_checkpointing_kwargs),
        ):
            if args.gradient_accumulation_steps % (args.steps_per_generation * args.num_iterations) != 0:
                scored["old_per_token_logps"] = logps()
            if args.beta != 0.0:  # a reference copy is refused before (_check): a PEFT model without its adapter
                with use_adapter(model, adapter_name=None):
                    scored["ref_per_token_logps"] = logps()
        return scored

    def micro_batch(self, rows: int, prompt: int, completion: int, scored: dict[str, Tensor] | None = None) -> None:
        """``Trainer.training_step``: the trainer's ``compute_loss`` on one micro-batch, then ``backward``."""
        inputs = {**self.batch(rows, prompt, completion), **(scored or {})}
        with amp.checkpoint_autocast(self.built.model):
            with self.clock.in_phase("forward"):
                loss = self.trainer.compute_loss(self.built.model, inputs)
            self.clock.push("backward_head")
            try:
                loss.backward()
            finally:
                self.clock.pop()

    def optimizer_step(self) -> None:
        model, monitor = self.built.model, self.built.monitor
        with self.clock.in_phase("optimizer_step"):
            torch.nn.utils.clip_grad_norm_(
                [p for p in model.parameters() if p.grad is not None], self.built.args.max_grad_norm
            )
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
            w = WARMUP_TOKENS
            self.micro_batch(1, w, w, self.scoring(1, w, w) if self.s.needs_scoring else {})
            self.optimizer_step()
            return
        p, c, b = shapes.prompt, shapes.completion, shapes.micro_batch
        self.generation(shapes.generated, p, c)
        scored = self.scoring(b, p, c) if self.s.needs_scoring else {}
        for _ in range(shapes.micro_batches):
            self.micro_batch(b, p, c, scored)
        self.optimizer_step()


def _grow_cache(cache: Any, tokens: int, tracker: TensorTracker) -> None:
    """The cache as ``tokens`` more decoding steps leave it, grown by each layer's own ``update``: a sliding-window
    layer keeps its window and counts the tokens it dropped, so the masks transformers builds next fit it.

    The earlier steps peak below the last one (the cache only grows), so they run uncounted, in two updates:
    all but one token, then one, which leaves each layer's storage as a one-token decoding step leaves it (a
    sliding layer keeps a view of ``window`` tokens). The result is counted as ``kv_cache``.
    """
    from grpo_lite.memory.meta.private import disable_current_modes  # loads torch

    with disable_current_modes():
        for layer in cache.layers:
            if not layer.is_initialized:
                continue
            batch, heads, _, width = layer.keys.shape
            for step in (tokens - 1, 1) if tokens > 1 else (tokens,):
                if step > 0:
                    layer.update(
                        layer.keys.new_empty((batch, heads, step, width)),
                        layer.values.new_empty((batch, heads, step, layer.values.shape[-1])),
                    )
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
    from transformers.cache_utils import DynamicLayer  # heavy: transformers
    from trl.kernels.chunked_logprob import ChunkedLogProbFunction

    region = clock.tagging
    undo = [
        _wrap_static(ChunkedLogProbFunction, "forward", region("lm_head")),
        _wrap_static(ChunkedLogProbFunction, "backward", region("lm_head", then="backward_layers")),
    ]
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
    handles = [
        head.register_forward_pre_hook(lambda *_: clock.enter_region("lm_head")),
        head.register_forward_hook(lambda *_: clock.leave_region() and None),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
        while undo:
            undo.pop()()


def _bump_galore_projections(optimizer: Any) -> None:
    """Make the next step one where GaLore recomputes its projections (its step counter a multiple of the gap)."""
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
    """Warm up, then run the measured step under the tracker; the clock's segments of step 2 are the result.
    Values the step read from the model's outputs (TRL's metrics; none on meta) are counted in ``choices.notes``."""
    clock = PhaseClock()
    tracker = TensorTracker(clock, device_type="meta")
    clock.backends = [tracker]
    tracker.track_module(built.model)
    for constant in built.quant_states:
        tracker.register(constant, "param")
    driver = _Step(built, s, choices, clock, tracker)
    with _phase_hooks(clock, built.lm):
        tracker.start()
        driver.data.__enter__()
        try:
            clock.set_step(1)
            driver.step(shapes_of(s), measured=False)
            _bump_galore_projections(built.optimizer)
            choices.attention.clear()  # count the measured step's kernel calls only
            clock.set_step(2)
            driver.step(shapes_of(s), measured=True)
            clock.set_step(-1)
        finally:
            driver.data.__exit__(None, None, None)
            tracker.stop()
    if driver.data.guessed:
        choices.notes.append(
            f"{driver.data.guessed} values read from the model's outputs (TRL's loss metrics) have "
            "none on meta: read as NaN (float), False or 0"
        )
    return clock, tracker
