"""The one way a run changes its settings while it runs: :func:`replan`.

An out-of-memory step down, a TRL seam that no longer matches, a failed shared-prefix self-check and
``on_stall="adapt"`` all call it; it writes one ``replanned`` event to run.json (docs/internals.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from grpo_lite.errors import DoesNotFitError
from grpo_lite.planning.choose import plan
from grpo_lite.training.checks import check_context

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan

__all__ = ["CAUSES", "Cause", "replan"]

Cause = Literal["out_of_memory", "trl_seam", "shared_prefix_off", "stall"]
CAUSES: dict[Cause, str] = {  # the words of the line
    "out_of_memory": "out of GPU memory",
    "trl_seam": "TRL's code differs from grpo-lite's seam",
    "shared_prefix_off": "the shared prefix is off",
    "stall": "most completions were cut at the limit",
}


def replan(
    loop: Any,  # the run's Attempts (attempts.py imports this module: no import back)
    cause: Cause,
    *,
    step: int,
    why: str,
    change: Mapping[str, Any],
    keep: Literal["recipe", "fixed"] = "recipe",
    note: str = "",
    **extra: Any,
) -> Plan:
    """Plan the run again with ``change``, check it as the first plan was checked, and make it the run's.

    Args:
        loop: the run's :class:`~grpo_lite.training.run.attempts.Attempts` (its plan, recipe, inputs, events).
        cause: what asked for the change (:data:`CAUSES`).
        step: the run's step it happens at.
        why: the cause in detail (the error's first line, the self-check's result, the finding).
        change: the settings to change; ``preset`` names a rung.
        keep: ``"recipe"`` keeps every other setting of the run (a change in place); ``"fixed"`` keeps only what
            the user fixed and lets the planner choose the rest (another rung).
        note: what the line adds after the change (where the weights went, what a resume needs).
        **extra: more fields for the event.

    Raises:
        DoesNotFitError: the change does not fit the run's budget. ConfigError: it does not fit the model's context,
            or the recipe cannot run as written on the new plan.
    """
    old = loop.plan
    assert loop.recipe is not None
    settings = {k: v for k, v in change.items() if k != "preset"}
    budget = {} if old.budget_gb is None else {"budget_gb": old.budget_gb}  # the card's, not the RAM left now
    if keep == "recipe":
        recipe = loop.recipe.with_overrides(**settings)
        written = recipe.plan_settings()
    else:
        recipe = loop.recipe
        written = {**{k: v for k, v in old.fixed.items() if k not in ("method", "preset")}, **settings}
    try:
        new = plan(old.model, preset=change.get("preset", old.preset.name), **{**loop.plan_kwargs, **budget}, **written)
    except DoesNotFitError as exc:
        raise DoesNotFitError(
            f"{CAUSES[cause]} ({why}), and the run planned again does not fit: {exc}",
            exc.smallest_budget_gb,
            exc.preset,
        ) from None
    # the first plan's checks: the budget (the planner, above), the model's context with the longest prompt
    check_context(new, loop.inputs.prompt_tokens, loop.inputs.context, loop.inputs.spec.name)
    loop.plan, loop.recipe = new, recipe.filled(new) if keep == "recipe" else recipe.replanned(new)
    if loop.settings:  # built already: the GRPOConfig settings in run.json follow the recipe
        loop.settings = loop.grpo_settings()
    if loop.health is not None:
        loop.health.advisor.plan = new  # the remedies and on_stall="adapt" plan from the plan trained
    before, after = _shown(old), _shown(new)
    changed = [k for k in after if before.get(k) != after[k] and k != "peak_gib"]
    event = {
        "event": "replanned",
        "cause": cause,
        "step": step,
        "why": why,
        "from": {k: before.get(k) for k in [*changed, "peak_gib"]},
        "to": {k: after[k] for k in [*changed, "peak_gib"]},
        **extra,
    }
    loop.events.append(event)
    what = ", ".join(f"{k} {before.get(k)} -> {after[k]}" for k in changed) or "the same settings"
    loop.run.console.print(
        f"replanned at step {step} ({CAUSES[cause]}: {why}): {what}; planned peak "
        f"{before['peak_gib']:.2f} -> {after['peak_gib']:.2f} GiB{f'; {note}' if note else ''}",
        style="yellow",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    loop.write_record(status="running")
    return new


def _shown(the_plan: Plan) -> dict[str, Any]:
    """A plan's settings as a replanned event compares them."""
    return {
        "preset": the_plan.preset.name,
        "shared_prefix": the_plan.estimate.settings.shared_prefix,
        **the_plan.settings,
        "peak_gib": round(the_plan.estimate.total_gib, 3),
    }
