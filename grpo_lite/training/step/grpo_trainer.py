"""TRL's GRPOTrainer with four additions, each through one of TRL's own methods (no fork): the shared prefix in
scoring and sampling (each checked once against TRL's path), stop strings, updates that land on bf16 weights and
the zero-advantage skip. Where TRL's code differs from what an addition relies on
(:mod:`grpo_lite.training.step.trl_seam`), that addition is off and TRL's own method runs (docs/internals.md).
"""

from __future__ import annotations

import logging
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn
from trl import GRPOTrainer

from grpo_lite.defaults import STEP
from grpo_lite.memory.step_settings import default_update_rounding
from grpo_lite.precision.monitor import UpdateMonitor
from grpo_lite.precision.rounding import install_update_rounding
from grpo_lite.settings import UpdateRounding
from grpo_lite.training.step.prefix_cache import prefix_cache_inputs
from grpo_lite.training.step.sampling_check import check_rows, checked_generate
from grpo_lite.training.step.shared_prefix import (
    default_tolerances,
    self_check,
    shared_prefix_logps_and_entropies,
    unsupported_reason,
)
from grpo_lite.training.step.trl_seam import seam_problems, seam_warning, train_metrics, trainer_tokenizer
from grpo_lite.training.step.zero_advantage import DIVISORS, ZeroAdvantageSkip, config_reason, split

logger = logging.getLogger(__name__)


class SharedPrefixOff(Exception):
    """The first self-check failed in a trainer told to stop then (``stop_when_shared_off``): the attempt ends, and
    grpo-lite's attempt loop plans the run again without the shared prefix before the next one starts."""


class LiteGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with grpo-lite's additions (``*args, **kwargs``: ``GRPOTrainer``'s own).

    Args:
        shared_prefix: forward each group's prompt once, in scoring and in sampling (off under FSDP and ZeRO-3).
        verify_shared_prefix: check the first shared scoring micro-batch and sampling call against TRL's path.
        shared_prefix_atol: those checks' tolerance on the largest log-prob difference (Default: 1e-3 in fp32,
            1.0 in bf16/fp16).
        stop_strings: end a sampled completion at the first of these strings.
        update_rounding: ``"stochastic"`` steps each bf16 parameter on an fp32 copy, rounded back stochastically;
            ``"nearest"`` leaves the optimizer as built. Default: stochastic when a trainable parameter is bf16.
        update_monitor: log ``update/realized``, the share of the intended update the weights received.
        skip_zero_advantage: rows whose advantage is exactly zero skip their forward and backward where the
            gradient stays the same.
    """

    def __init__(
        self,
        *args: Any,
        shared_prefix: bool = STEP.shared_prefix,
        verify_shared_prefix: bool = True,
        shared_prefix_atol: float | None = None,
        stop_strings: Sequence[str] = (),
        update_rounding: UpdateRounding | None = None,
        update_monitor: bool = True,
        skip_zero_advantage: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if update_rounding is None:
            trains_bf16 = any(p.requires_grad and p.dtype == torch.bfloat16 for p in self.model.parameters())
            update_rounding = default_update_rounding(trains_bf16)
        import trl

        self.shared_prefix_record: dict[str, Any] = {"requested": shared_prefix, "calls": {"shared": 0, "trl": 0}}
        seam = seam_problems(self)
        off = {feature: f"TRL {trl.__version__}: {why}" for feature, why in seam.items()}  # why each feature is off
        if seam:
            logger.warning(seam_warning(seam, trl.__version__))
            self.shared_prefix_record["trl_seam"] = {"trl": trl.__version__, "off": dict(seam)}
        self.update_rounding: UpdateRounding = update_rounding
        self.update_monitor: UpdateMonitor | None = None
        if update_monitor and "update_monitor" not in seam:
            self.update_monitor = UpdateMonitor(sink=self._log_update_metrics, seed=self.args.seed)
            self.add_callback(self.update_monitor)
        why_not = config_reason(self) or off.get("skip_zero_advantage")
        self.zero_advantage = ZeroAdvantageSkip(
            skip_zero_advantage and not why_not, why_not if skip_zero_advantage else None
        )
        zero3 = self.is_deepspeed_enabled and self.accelerator.state.deepspeed_plugin.zero_stage == 3
        if shared_prefix and (self.is_fsdp_enabled or zero3):
            self._shared_off("not supported with FSDP or DeepSpeed ZeRO-3")
            shared_prefix = False
        for feature, key in (("shared_scoring", "off"), ("shared_sampling", "sampling_off")):
            if shared_prefix and feature in off:
                self.shared_prefix_record[key] = off[feature]
        self.shared_prefix = shared_prefix and "shared_scoring" not in seam
        self.shared_sampling = shared_prefix and "shared_sampling" not in seam
        self._verify_pending = verify_shared_prefix
        # True: a failed first self-check raises SharedPrefixOff (the run re-plans between attempts); False: the
        # trainer goes on with TRL's forward
        self.stop_when_shared_off = False
        self._verify_sampling_pending = verify_shared_prefix
        self.shared_prefix_atol = shared_prefix_atol
        self.stop_strings = () if "stop_strings" in seam else tuple(stop_strings)
        if self.stop_strings and not (self.use_vllm or self.use_transformers_continuous_batching):
            self.generation_config.stop_strings = list(self.stop_strings)
        # Where the seam differs, TRL's own method serves TRL's calls, whatever its signature now.
        if "shared_scoring" in seam:
            self._get_per_token_logps_and_entropies = types.MethodType(
                GRPOTrainer._get_per_token_logps_and_entropies, self
            )
        if not (self.shared_sampling or self.stop_strings):
            self._generate_single_turn = types.MethodType(GRPOTrainer._generate_single_turn, self)

    # ---- updates that land on bf16 weights -----------------------------------------------------
    def create_optimizer(self, model: nn.Module | None = None) -> Any:
        """transformers' optimizer; with ``update_rounding="stochastic"`` each bf16 parameter is stepped on
        an fp32 copy and rounded back stochastically (:mod:`grpo_lite.precision.rounding`)."""
        optimizer = super().create_optimizer(model) if model is not None else super().create_optimizer()
        if self.update_rounding == "stochastic":
            install_update_rounding(optimizer)
        return optimizer

    def _log_update_metrics(self, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            if value == value:  # NaN: nothing sampled stepped in this window
                train_metrics(self)[key].append(value)

    def _shared_off(self, reason: str) -> None:
        logger.warning("grpo-lite: shared-prefix forward off (%s); using TRL's forward", reason)
        self.shared_prefix_record["off"] = reason

    # ---- zero-advantage rows skip their forward ---------------------------------------------------
    def _compute_loss(self, model: nn.Module, inputs: dict[str, Any]) -> Tensor:
        """TRL's loss over the rows whose advantage is not zero, rescaled to TRL's divisor for the whole
        micro-batch (:mod:`grpo_lite.training.step.zero_advantage`); TRL's own call when nothing is skipped."""
        if not (self.zero_advantage.enabled and self.model.training):
            return super()._compute_loss(model, inputs)
        plan = split(inputs, DIVISORS[self.loss_type])
        if self.accelerator.num_processes > 1:
            # TRL's loss gathers one clip ratio per row from every rank, which needs equal sizes: every rank keeps
            # as many rows as the rank that keeps most
            kept = int(inputs["completion_ids"].size(0)) if plan is None else plan.kept_rows
            most = int(self.accelerator.gather(torch.tensor([kept], device=self.accelerator.device)).max())
            if plan is not None and most > plan.kept_rows:
                plan = split(inputs, DIVISORS[self.loss_type], min_rows=most)
        for key, value in self.zero_advantage.count(plan, inputs).items():
            train_metrics(self)[key].append(value)
        if plan is None:
            return super()._compute_loss(model, inputs)
        return super()._compute_loss(model, plan.inputs) * plan.scale

    # ---- shared prefix -------------------------------------------------------------------------
    def _get_per_token_logps_and_entropies(
        self,
        model: nn.Module,
        input_ids: Tensor,
        attention_mask: Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **extra: Any,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        args = (model, input_ids, attention_mask, logits_to_keep)
        reason = "disabled" if not self.shared_prefix else unsupported_reason(*args, compute_aux_loss, extra)

        def shared(entropy: bool) -> tuple[Tensor, Tensor | None]:
            return shared_prefix_logps_and_entropies(
                *args, batch_size=batch_size, compute_entropy=entropy, autocast=self.accelerator.autocast
            )

        calls = self.shared_prefix_record["calls"]
        if reason is None and self._verify_pending:  # this call's shared forward serves it once checked
            self._verify_pending = False
            reference, own = super()._get_per_token_logps_and_entropies, lambda e: shared(e or compute_entropy)
            check, (logps, entropies) = self_check(self, reference, own, *args, atol=self.shared_prefix_atol)
            self.shared_prefix_record["self_check"] = {
                "max_abs_diff": check.max_abs_diff, "mean_abs_diff": check.mean_abs_diff,
                "max_entropy_diff": check.max_entropy_diff, "atol": check.atol, "tokens": check.n_tokens,
                "rows": check.n_rows, "ok": check.ok}  # fmt: skip
            if check.ok:
                calls["shared"] += 1
                return logps, entropies if compute_entropy else None, None
            del logps, entropies  # the shared graph goes before TRL's forward builds its own
            self._shared_off(f"self-check: log-probs differ from TRL's by up to {check.max_abs_diff:.2g}")
            self.shared_prefix, reason = False, "self-check failed"
            if self.stop_when_shared_off:
                raise SharedPrefixOff(self.shared_prefix_record["off"])
        if reason is not None:
            calls["trl"] += 1
            return super()._get_per_token_logps_and_entropies(
                *args, batch_size, compute_entropy, compute_aux_loss, **extra
            )
        calls["shared"] += 1
        logps, entropies = shared(compute_entropy)
        return logps, entropies, None

    # ---- sampling: stop strings and the shared prefix -------------------------------------------
    def _generate_single_turn(
        self, prompt_ids: Any, images: Any, multimodal_fields: Any, num_generations: int, has_tool_images: bool = False
    ) -> tuple[list[list[int]], Any]:
        stops = bool(getattr(getattr(self, "generation_config", None), "stop_strings", None))
        share = (
            self.shared_sampling
            and not (self.use_vllm or self.use_transformers_continuous_batching)
            and images is None
            and not multimodal_fields
        )
        turn = (prompt_ids, images, multimodal_fields, num_generations, has_tool_images)
        if not (stops or share):  # vLLM: neither
            return super()._generate_single_turn(*turn)
        check = self._checked_generate if share and self._verify_sampling_pending else None
        model, tokenizer = self.accelerator.unwrap_model(self.model), trainer_tokenizer(self)
        pad = tokenizer.pad_token_id
        with _patched_generate(model, self.processing_class, stops=stops, share=share, pad_token_id=pad, check=check):
            completion_ids, logprobs = super()._generate_single_turn(*turn)
        if not stops:
            return completion_ids, logprobs
        limit, stops = self.max_completion_length, list(self.generation_config.stop_strings)
        stopped = [stopped_at_stop(ids, tokenizer, stops, limit) for ids in completion_ids]
        return [
            end_at_stop(ids, pad, self.eos_token_ids, stopped=s) for ids, s in zip(completion_ids, stopped)
        ], logprobs

    def _checked_generate(self, generate: Any, plain: dict[str, Any], shared: dict[str, Any]) -> bool:
        """A slice of the first shared sampling call, run both ways for a few tokens, recorded; a mismatch turns
        shared sampling off. Whether the batch may be sampled on the shared layout."""
        self._verify_sampling_pending = False
        low, atol, mean_atol = default_tolerances(self, self.accelerator.unwrap_model(self.model))
        check = checked_generate(
            generate,
            plain,
            shared,
            self.eos_token_ids,
            exact=not low,
            atol=atol if self.shared_prefix_atol is None else self.shared_prefix_atol,
            mean_atol=mean_atol,
        )
        self.shared_prefix_record["sampling_check"] = check.to_dict()
        if not check.ok:
            logger.warning("grpo-lite: shared-prefix sampling off (%s); using TRL's sampling", check.reason())
            self.shared_prefix_record["sampling_off"] = f"sampling check: {check.reason()}"
            self.shared_sampling = False
        return check.ok


@contextmanager
def _patched_generate(
    model: nn.Module, tokenizer: Any, *, stops: bool, share: bool, pad_token_id: int, check: Any = None
) -> Iterator[None]:
    """TRL's call to ``generate``, with the tokenizer that stop strings need (TRL does not pass it) and, with
    ``share``, the batch's common prompt prefix forwarded once. ``check(generate, plain_kwargs, shared_kwargs)``,
    when given, is called on a slice of the first call that shares a prefix; the batch is sampled on the shared
    layout when it returns True, else by TRL's own call.
    """
    bound = model.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        nonlocal check
        if stops:
            kwargs["tokenizer"] = getattr(tokenizer, "tokenizer", tokenizer)
        if share and not args and set(kwargs) <= {"input_ids", "attention_mask", "generation_config", "tokenizer"}:
            ids, mask = kwargs["input_ids"], kwargs["attention_mask"].bool()
            lists = [row[m].tolist() for row, m in zip(ids, mask)]  # TRL slices the output at ids' own width
            shared: dict[str, Any] | None = {
                **kwargs,
                **prefix_cache_inputs(model, lists, pad_token_id, width=ids.size(1)),
            }
            if check is not None and len(shared) > len(kwargs):  # a prefix cache is in: check a slice against TRL's
                run, check, rows = check, None, check_rows(lists)
                plain = {**kwargs, "input_ids": ids[rows], "attention_mask": kwargs["attention_mask"][rows]}
                part = prefix_cache_inputs(model, [lists[r] for r in rows], pad_token_id, width=ids.size(1))
                if not run(bound, plain, {**plain, **part}):
                    shared = None  # TRL's own call samples the batch; the shared layout's cache goes first
            if shared is not None:
                kwargs = shared
        return bound(*args, **kwargs)

    own = vars(model).get("generate")  # a wrapper already there (a memory measurement's) comes back after
    model.generate = generate
    try:
        yield
    finally:
        if own is None:
            del model.generate
        else:
            model.generate = own


def end_at_stop(
    ids: list[int], pad_token_id: int | None, eos_token_ids: Sequence[int], *, stopped: bool = False
) -> list[int]:
    """A completion stopped by a stop string, as if the model had ended its turn there: trailing pads dropped and
    one EOS closing it (TRL counts a completion ending in neither EOS nor pad as cut at the length limit); one
    without pads that a stop string ended (``stopped``: the batch's longest) is closed too.

    >>> end_at_stop([5, 6, 0, 0], 0, [2]), end_at_stop([5, 6, 2], 2, [2]), end_at_stop([5, 6, 7], 0, [2])
    ([5, 6, 2], [5, 6, 2], [5, 6, 7])
    >>> end_at_stop([5, 6, 7], 0, [2], stopped=True)
    [5, 6, 7, 2]
    """
    if not ids or ids[-1] in eos_token_ids:
        return ids
    end = len(ids)
    if pad_token_id is not None and pad_token_id not in eos_token_ids:
        while end and ids[end - 1] == pad_token_id:
            end -= 1
    if end == len(ids) and not stopped:  # ran to the length limit
        return ids
    return [*ids[:end], eos_token_ids[0]]


def stopped_at_stop(ids: list[int], tokenizer: Any, stop_strings: Sequence[str], max_length: int) -> bool:
    """Whether sampling ended ``ids`` (as ``generate`` returned it) before the length limit or on a stop string:
    shorter than ``max_length``, every row of the batch ended; at the limit, a stop string overlapping the last
    token (as transformers' ``StopStringCriteria`` matches) ended it, else it was cut."""
    if len(ids) < max_length:
        return True
    if not ids or not stop_strings:
        return False
    text, head = tokenizer.decode(ids), tokenizer.decode(ids[:-1])
    return any(stop and stop in text[max(0, len(head) - len(stop) + 1) :] for stop in stop_strings)
