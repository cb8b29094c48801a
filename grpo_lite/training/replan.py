"""The one way a run changes its settings while it runs: :func:`replan` (an out-of-memory step down to
:func:`next_plan`'s rung, a TRL seam that differs, a failed shared-prefix self-check, ``on_stall="adapt"``); one
``replanned`` event in run.json (docs/internals.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from grpo_lite.errors import ConfigError, DoesNotFitError
from grpo_lite.planning import hardware
from grpo_lite.planning.choose import plan
from grpo_lite.planning.ladder import LADDER
from grpo_lite.training.checks import check_positions

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan


Cause = Literal["out_of_memory", "trl_seam", "shared_prefix_off", "stall"]
CAUSES: dict[Cause, str] = {  # the words of the line
    "out_of_memory": "out of GPU memory",
    "trl_seam": "TRL's code differs from grpo-lite's seam",
    "shared_prefix_off": "the shared prefix is off",
    "stall": "most completions were cut at the limit",
}

# what to change after an out-of-memory error the run cannot step down from (the bottom rung, after the window,
# several processes): the bottom rung's error and run.json's failed event say it
OOM_ADVICE = (
    "Use a larger GPU, or set a smaller num_generations, max_completion_length or per_device_train_batch_size "
    "(--set key=value; Python: key=value)"
)


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
    """Plan the run (``loop``: its Attempts) again with ``change``, check it as the first plan was checked, make it
    the run's, and record one ``replanned`` event.

    Args:
        cause: what asked for the change; ``why``: in detail (the error's first line, the check, the finding).
        change: the settings to change; ``preset`` names a rung.
        keep: ``"recipe"`` keeps every other setting of the run (a change in place); ``"fixed"`` keeps only what
            the user fixed and lets the planner choose the rest (another rung).
        note: what the line adds (where the weights went, what a resume needs); ``extra``: more event fields.

    Raises:
        DoesNotFitError: the change does not fit the run's budget. ConfigError: it does not fit the model's context,
            or the recipe cannot run as written on the new plan.
    """
    old, old_recipe = loop.plan, loop.recipe
    settings = {k: v for k, v in change.items() if k != "preset"}
    budget = {} if old.budget_gb is None else {"budget_gb": old.budget_gb}  # the card's, not the RAM left now
    if keep == "recipe":
        written = loop.recipe.with_overrides(**settings).plan_settings()
    else:
        written = {**{k: v for k, v in old.fixed.items() if k not in ("method", "preset")}, **settings}
    try:
        new = plan(old.model, preset=change.get("preset", old.preset.name), **{**loop.plan_kwargs, **budget}, **written)
    except DoesNotFitError as exc:
        message = f"{CAUSES[cause]} ({why}), and the run planned again does not fit: {exc}"
        raise DoesNotFitError(message, exc.smallest_budget_gb, exc.preset) from None
    # the first plan's checks: the budget (the planner, above), the model's context with the longest prompt
    inputs = loop.inputs
    check_positions(inputs.prompt_tokens, new.settings["max_completion_length"], inputs.context, inputs.spec.name)
    asked = loop.asked.with_overrides(**change)  # the user's settings, the change (a rung, a setting) made
    loop.plan, loop.asked, loop.recipe = new, asked, asked.filled(new)
    if loop.settings:  # built already: the GRPOConfig settings in run.json follow the recipe
        loop.settings = loop.grpo_settings()
    loop.watch.health.advisor.plan = new  # the remedies and on_stall="adapt" plan from the plan trained
    before, after = _shown(old, old_recipe), _shown(new, loop.recipe)
    changed = [k for k in after if k in before and before[k] != after[k] and k != "peak_gib"]
    shown = [*changed, "peak_gib"]
    event = {"event": "replanned", "cause": cause, "step": step, "why": why}
    event.update({"from": {k: before.get(k) for k in shown}, "to": {k: after[k] for k in shown}, **extra})
    what = ", ".join(f"{k} {before.get(k)} -> {after[k]}" for k in changed) or "the same settings"
    loop.say(
        f"replanned at step {step} ({CAUSES[cause]}: {why}): {what}; planned peak "
        f"{before['peak_gib']:.2f} -> {after['peak_gib']:.2f} GiB{f'; {note}' if note else ''}",
        event,
    )
    return new


def _shown(the_plan: Plan, recipe: Any) -> dict[str, Any]:
    """A plan's settings as a replanned event compares them: the ones the run trains with (its recipe's, the
    defaults filled in), so a setting the first plan left to the defaults is not shown as changed from None."""
    return {
        "preset": the_plan.preset.name,
        "shared_prefix": the_plan.estimate.settings.shared_prefix,
        **recipe.trl,
        **the_plan.settings,
        "peak_gib": round(the_plan.estimate.total_gib, 3),
    }


def next_plan(current: Plan, **plan_kwargs: Any) -> Plan:
    """The first rung below ``current.preset`` that fits, with the same user-fixed settings (``plan_kwargs``: what
    plan() was called with, without ``preset``/``method``).

    Raises:
        DoesNotFitError: ``current`` is the bottom rung, or nothing below it fits; the message says what budget
            would be needed.
    """
    extras = hardware.installed_extras()  # through the module: tests stand in for the probe
    names = [p.name for p in LADDER]
    below = [p for p in LADDER[names.index(current.preset.name) + 1 :] if all(getattr(extras, r) for r in p.requires)]
    fixed = {k: v for k, v in current.fixed.items() if k not in ("method", "preset")}
    last_error: DoesNotFitError | None = None
    for rung in below:
        try:
            return plan(current.model, preset=rung.name, **plan_kwargs, **fixed)
        except DoesNotFitError as exc:
            last_error = exc
        except ConfigError:  # a setting the user fixed rules this rung out (e.g. an optimizer): try the next
            continue
    need = f"; {train_advice(str(last_error), plan_kwargs.get('max_prompt_length', 0))}" if last_error else ""
    raise DoesNotFitError(
        f"out of GPU memory on preset {current.preset.name!r} and no cheaper rung is left to step down to{need}. "
        + OOM_ADVICE,
        smallest_budget_gb=getattr(last_error, "smallest_budget_gb", None),
        preset=getattr(last_error, "preset", None),
    )


def train_advice(message: str, prompt_tokens: int) -> str:
    """A planner message with advice train() can take: it measures prompts, so max_prompt_length is not a setting."""
    tail = (
        f"Or lower max_completion_length or num_generations (floor 4) (--set key=value; Python: key=value), "
        f"shorten the prompts (train() plans for the longest, {prompt_tokens} tokens: drop the longest rows "
        "from the dataset), or spread over more GPUs (--num-processes N with --sharding)."
    )
    cut = message.find(" Or shorten max_prompt_length")
    return (message[:cut] + " " + tail) if cut >= 0 else f"{message} ({tail[3:]})"
