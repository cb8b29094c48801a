"""The numbers in the health monitor's remedies, asked of the planner with one setting changed, and the
``on_stall="adapt"`` change through the run's re-plan (docs/internals.md, docs/health.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from grpo_lite.defaults import RESILIENCE
from grpo_lite.errors import ConfigError, DoesNotFitError
from grpo_lite.planning.candidates import BATCH_KEYS
from grpo_lite.planning.choose import plan


def _flags(values: Mapping[str, Any]) -> str:
    """``--set a=1 --set b=2 (Python: a=1, b=2)``."""
    cli = " ".join(f"--set {k}={v}" for k, v in values.items())
    return f"{cli} (Python: {', '.join(f'{k}={v!r}' for k, v in values.items())})"


class Advisor:
    """Plans with one setting changed, for the remedies and for ``on_stall="adapt"``.

    Args:
        plan: the run's plan in force; ``plan_kwargs``: what train() called plan() with.
        context: the model's context in tokens (None: unknown): with the longest prompt it bounds the lengths tried.
        replan: the run's re-plan, called as ``replan("stall", step=..., why=..., change=..., note=...)``.
        on_decline: receives ``(step, event)`` when the length stays.
    """

    def __init__(
        self,
        plan: Any,
        plan_kwargs: Mapping[str, Any],
        *,
        context: int | None = None,
        replan: Callable[..., Any] | None = None,
        on_decline: Callable[[int, dict[str, Any]], None] | None = None,
    ) -> None:
        self.plan, self.plan_kwargs, self.context = plan, dict(plan_kwargs), context
        self.replan, self.on_decline = replan, on_decline
        self.trainer: Any = None  # the trainer to adapt (set when it is built)

    # ---- the planner, with one thing changed --------------------------------------------------------
    def _fits(self, change: Mapping[str, Any], *, keep_all: bool = False, drop: tuple[str, ...] = ()) -> Any:
        """The plan with ``change`` on this rung, or None when it does not fit. ``keep_all``: every current setting
        fixed too; ``drop``: fixed keys left to the planner."""
        fixed = {k: v for k, v in self.plan.fixed.items() if k not in ("method", "preset", *drop)}
        if keep_all:
            fixed = {**self.plan.settings, **fixed}
        try:
            return plan(self.plan.model, preset=self.plan.preset.name, **self.plan_kwargs, **{**fixed, **change})
        except (DoesNotFitError, ConfigError):
            return None

    def room(self) -> int | None:
        """The longest completion the model's context leaves after the longest prompt (None: no known limit)."""
        prompt = self.plan_kwargs.get("max_prompt_length")
        return None if self.context is None or prompt is None else self.context - int(prompt)

    def longest_completion(self, *, keep_all: bool = False) -> tuple[int, Any] | None:
        """The longest ``max_completion_length`` above the current one that fits the budget and the model's context,
        and its plan (None: none does); in steps of :data:`RESILIENCE.length_step` up to :data:`RESILIENCE.max_length_factor` times it."""
        current = int(self.plan.settings["max_completion_length"])
        keep = {} if keep_all else {"num_generations": self.plan.settings["num_generations"]}
        room = self.room()
        top = (
            current * RESILIENCE.max_length_factor
            if room is None
            else min(current * RESILIENCE.max_length_factor, room)
        )
        if top <= current:
            return None
        best = None
        low, high = 1, -(-(top - current) // RESILIENCE.length_step)
        while low <= high:  # memory grows with the length: the fitting lengths are a prefix of the range
            mid = (low + high) // 2
            length = min(current + mid * RESILIENCE.length_step, top)
            found = self._fits({**keep, "max_completion_length": length}, keep_all=keep_all)
            if found is not None:
                best, low = (length, found), mid + 1
            else:
                high = mid - 1
        return best

    def most_generations(self) -> tuple[int, Any, dict[str, Any]] | None:
        """The largest ``num_generations`` above the current one (doubling) that fits, its plan and its flags."""
        current = int(self.plan.settings["num_generations"])
        length = self.plan.settings["max_completion_length"]
        best = None
        g = current * 2
        while g <= RESILIENCE.max_generations:
            change = {"num_generations": g, "max_completion_length": length}
            found = self._fits(change)
            drop: tuple[str, ...] = ()
            if found is None and any(k in self.plan.fixed for k in BATCH_KEYS):  # a fixed batch g must divide
                drop = BATCH_KEYS
                found = self._fits(change, drop=drop)
            if found is None:
                break
            flags = {**change, **{k: found.settings[k] for k in drop if k in self.plan.fixed}}
            best, g = (g, found, flags), g * 2
        return best

    # ---- remedies ------------------------------------------------------------------------------------
    def length_remedy(self) -> str:
        current = self.plan.settings["max_completion_length"]
        found = self.longest_completion()
        card = f"preset {self.plan.preset.name}" + (f", {self.plan.budget_gb:g} GB" if self.plan.budget_gb else "")
        room = self.room()
        if found is None and room is not None and room <= current * RESILIENCE.max_length_factor:
            return (
                f"max_completion_length={current} is the longest this card and the model's context of {self.context} "
                f"tokens leave after the longest prompt ({self.plan_kwargs['max_prompt_length']} tokens) fit; ask for "
                "shorter answers (a prompt with a shorter worked example, stop_strings) or shorten the prompts"
            )
        if found is None:
            return (
                f"max_completion_length={current} is already the longest the plan fits ({card}); ask for "
                "shorter answers (a prompt with a shorter worked example, stop_strings) or use a larger card"
            )
        length, _ = found
        flags = {"max_completion_length": length, "num_generations": self.plan.settings["num_generations"]}
        return f"the plan fits max_completion_length={length} on this card ({card}): {_flags(flags)}"

    def generations_remedy(self, *, format_only: bool = False) -> str:
        current = self.plan.settings["num_generations"]
        found = self.most_generations()
        easier = "train on problems the model solves some of the time (docs/datasets.md)"
        lead = (
            "let the correctness reward vary within a group: "
            if format_only
            else "more completions per prompt make one that scores differently likelier: "
        )
        if found is None:
            return f"{lead}num_generations={current} is already the most the plan fits on this card; {easier}"
        g, _, flags = found
        return f"{lead}the plan fits num_generations={g} on this card: {_flags(flags)}; or {easier}"

    # ---- on_stall="adapt" ----------------------------------------------------------------------------
    def adapt_blocker(self) -> str | None:
        """Why this run cannot raise its completion length in place (None: it can)."""
        trainer = self.trainer
        if trainer is None:
            return "no trainer"
        if getattr(trainer, "use_vllm", False) or getattr(trainer, "use_transformers_continuous_batching", False):
            return "the sampling engine was built for the current length"
        if trainer.accelerator.num_processes > 1:
            return "several processes would have to change at the same step"
        strategy = getattr(trainer.args, "save_strategy", "no")
        if getattr(strategy, "value", strategy) == "no":  # transformers' SaveStrategy, or its string
            return "the run saves no checkpoint, so it has no boundary to change at"
        return None

    def decline(self, step: int, why: str) -> None:
        """Say that the completion length stays as it is, and why."""
        length = self.plan.settings["max_completion_length"]
        event = {"event": "adapt_skipped", "step": step, "max_completion_length": length, "why": why}
        if self.on_decline is not None:
            self.on_decline(step, event)

    def adapt(self, step: int) -> None:
        """At a checkpoint: re-plan with the longest length that fits with the rest unchanged; sample up to it."""
        blocker = self.adapt_blocker() or (None if self.replan is not None else "no re-plan for this run")
        found = None if blocker else self.longest_completion(keep_all=True)
        current = self.plan.settings["max_completion_length"]
        if found is None:
            self.decline(step, blocker or "no longer completion fits the run's other settings and the model's context")
            return
        length, _ = found
        assert self.replan is not None
        why = f"max_completion_length={current} cut most completions"
        try:
            self.plan = self.replan(
                "stall",
                step=step,
                why=why,
                change={"max_completion_length": length},
                note=f"a resume needs --set max_completion_length={length}",
            )
        except (ConfigError, DoesNotFitError) as exc:  # the re-plan's own checks: the length stays
            self.decline(step, str(exc))
            return
        trainer = self.trainer
        trainer.max_completion_length = length  # what TRL's sampling and dr_grpo's divisor read
        trainer.args.max_completion_length = length
        if getattr(trainer, "generation_config", None) is not None:
            trainer.generation_config.max_new_tokens = length
