"""The plan and recipe stages: what the run trains with, and the checks it passes before the model loads.

:func:`make_plan` plans for the budget (or estimates the recipe as written); :func:`make_recipe` fills the user's
recipe with the plan, for ``train(config=...)`` and ``train(model, budget_gb=...)`` alike (docs/internals.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from grpo_lite.data.prompts import stop_strings_for
from grpo_lite.defaults import TASKS
from grpo_lite.errors import ConfigError, DoesNotFitError, spelled
from grpo_lite.planning.choose import plan
from grpo_lite.planning.tables import plan_summary, plan_table
from grpo_lite.recipe.departures import departures, departures_line
from grpo_lite.recipe.recipe import Recipe
from grpo_lite.scale.distributed import detect_sharding
from grpo_lite.training.checks import check_positions
from grpo_lite.training.replan import train_advice
from grpo_lite.training.run.folder import check_disk
from grpo_lite.training.run.ranks import process_state

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan
    from grpo_lite.training.arguments import Request
    from grpo_lite.training.prepare import RunInputs
    from grpo_lite.training.run.folder import RunFolder


def plan_kwargs(budget_gb: float | None, prompt_tokens: int, reward_funcs: Sequence[Any] = ()) -> dict[str, Any]:
    """What train() decides for plan(): the device, the prompt length, the launcher's processes and sharding, the
    reward models' weights."""
    import torch  # a heavy dependency: imported when a run plans

    kwargs: dict[str, Any] = dict(
        device="cuda" if torch.cuda.is_available() else "cpu",
        max_prompt_length=prompt_tokens,
        num_processes=process_state().num_processes,
        sharding=detect_sharding(),  # what the launcher set up (zero2/zero3/fsdp), else None/ddp
    )
    if budget_gb is not None:
        kwargs["budget_gb"] = budget_gb
    models = [f for f in reward_funcs if isinstance(f, torch.nn.Module)]
    if models:  # each process holds them whole, beside the policy (TRL moves them to its device)
        kwargs["reward_model_bytes"] = sum(t.nbytes for m in models for t in (*m.parameters(), *m.buffers()))
    return kwargs


def make_plan(
    inputs: RunInputs, request: Request, run: RunFolder, *, quiet: bool, show_plan: bool = False
) -> tuple[Plan, dict[str, Any]]:
    """plan() for this run, printed on the main process (its summary, or the whole table with ``show_plan``), and
    what it was called with (a re-plan calls it the same way).

    With a recipe: the estimate of its settings on its preset, refused in one line naming the recipe's keys to
    change when it does not fit its budget. Without: the plan for the budget, on the rung a resumed checkpoint was
    trained on (after any step down).
    """
    asked = request.recipe
    kwargs = plan_kwargs(asked.budget_gb, inputs.prompt_tokens, inputs.reward_funcs)
    preset, method, settings = asked.preset, request.method, asked.plan_settings()
    if not request.written and run.earlier is not None and run.earlier.preset is not None:  # checked in open_run
        preset, method = run.earlier.preset, None
    if "max_completion_length" in settings:  # the model's context before the budget: 10**9 tokens names the context
        check_positions(inputs.prompt_tokens, settings["max_completion_length"], inputs.context, inputs.spec.name)
    try:
        the_plan = _plan_for_task(asked.dataset, inputs.spec, method=method, preset=preset, **kwargs, **settings)
    except DoesNotFitError as exc:  # the planner's advice names max_prompt_length, which train() measures itself
        advice = (
            train_advice(str(exc), inputs.prompt_tokens)
            if not request.written
            else recipe_advice(str(exc), inputs.prompt_tokens, exc.smallest_budget_gb, asked)
        )
        if method is not None and preset is None:  # the method fixed: name the planner's rung that fits, if one does
            advice = _other_method(method, inputs.spec, asked.dataset, {**kwargs, **settings}) + advice
        raise DoesNotFitError(advice, exc.smallest_budget_gb, exc.preset) from None
    if not quiet and run.state.is_main_process:
        if show_plan:
            run.console.print(plan_table(the_plan))
        else:
            run.console.print(spelled(plan_summary(the_plan)), highlight=False, markup=False, soft_wrap=True)
        if inputs.answer_kind not in (None, "number"):  # GSM8K's numbers: the output it always had
            run.console.print(f"answers compared as {inputs.answer_kind} (answer_kind)", highlight=False, markup=False)
        if stops := stop_strings_for(asked.stop_strings, inputs.shape):
            stops_said = ", ".join(map(repr, stops))
            run.console.print(f"sampling stops at {stops_said} (stop_strings; [] samples to the length limit)",
                              highlight=False, markup=False)  # fmt: skip
    return the_plan, kwargs


def _other_method(method: str, model: Any, dataset: Any, asked: dict[str, Any]) -> str:
    """``method=full does not fit; the planner's lora rung fits, peak 9.20 GiB: pass --method lora (Python:
    method='lora'). ``, or nothing when no rung of another method fits either."""
    try:
        other = _plan_for_task(dataset, model, **asked)
    except DoesNotFitError:
        return ""
    rung = other.preset
    return (
        f"method={method} does not fit; the planner's {rung.name} rung fits, peak {other.estimate.total_gib:.2f} GiB: "
        f"pass --method {rung.method} (Python: method={rung.method!r}). "
    )


def _plan_for_task(dataset: Any, model: Any, **asked: Any) -> Plan:
    """plan(); for a built-in task with a completion length of its own (``grpo_lite.defaults.TASKS``) on a GPU,
    with that length first, and with the planner's own lengths when it does not fit."""
    length = TASKS.max_completion_length.get(dataset) if isinstance(dataset, str) else None
    if length is not None and asked.get("device") == "cuda" and "max_completion_length" not in asked:
        try:
            return plan(model, **asked, max_completion_length=length)
        except DoesNotFitError:
            pass
    return plan(model, **asked)


def recipe_advice(message: str, prompt_tokens: int, smallest_gb: float | None, recipe: Recipe) -> str:
    """The planner's refusal of a recipe, with the recipe keys that make it fit (one line)."""
    cut = message.find(" Or shorten")
    budget = "" if smallest_gb is None else f"budget_gb: {smallest_gb:g} or more (on a machine that has it), "
    card = (f" --device {recipe.device}" if recipe.device is not None else "") + (
        f" --budget-gb {recipe.budget_gb:g}" if recipe.budget_gb is not None else ""
    )
    return (
        f"the recipe does not fit as written: {message[:cut] if cut >= 0 else message} Change in the recipe: "
        f"{budget}a lower trl.max_completion_length or trl.num_generations (floor 4), or a cheaper preset; or "
        f"shorten the prompts (the longest is {prompt_tokens} tokens); or write a recipe that fits: "
        f"grpo-lite plan {recipe.model}{card} --write FILE"
    )


def asked_recipe(request: Request, the_plan: Plan, inputs: RunInputs) -> Recipe:
    """The user's recipe as this run asks for it: the prompt style and stop strings its data takes, on the rung and
    the processes :func:`make_plan` planned for (the recipe's rung, the planner's, or the one a resumed run trained
    on last; the launcher's processes, a recipe's checked against them before)."""
    stops = list(stop_strings_for(request.recipe.stop_strings, inputs.shape))
    rung, launch = the_plan.preset.name, the_plan.num_processes
    return dataclasses.replace(
        request.recipe, preset=rung, num_processes=launch, prompt_style=inputs.style, stop_strings=stops
    )


def make_recipe(asked: Recipe, the_plan: Plan, inputs: RunInputs, run: RunFolder) -> Recipe:
    """The Recipe the run trains: ``asked`` (:func:`asked_recipe`) filled by the plan, checked before the model
    loads: a resume's rewards, seed, generations and optimizer values; the model's context; the disk."""
    from grpo_lite.training.run.resume import check_same_training  # heavy: imports transformers

    recipe = asked.filled(the_plan)
    if run.earlier is not None:
        check_same_training(run.out, run.earlier, recipe, inputs.answer_kind)
        check_optimizer_kept(run.out, asked.trl)
    completion = the_plan.settings["max_completion_length"]
    check_positions(inputs.prompt_tokens, completion, inputs.context, inputs.spec.name)
    check_disk(run, the_plan)
    if line := departures_line(departures(recipe.trl, written=the_plan.fixed, plan=the_plan)):
        run.console.print(line, highlight=False, markup=False, soft_wrap=True)
    return recipe


# what a checkpoint's optimizer state brings back on resume: the values a resume asks for would be silently dropped
KEPT_ON_RESUME = ("learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon")


def check_optimizer_kept(out: Path, overrides: dict[str, Any]) -> None:
    """Refuse a resume that sets an optimizer value other than the run's (run.json's settings): the checkpoint's
    optimizer state would keep the run's, the asked one never applies.

    Raises:
        ConfigError: naming each such setting, the run's value and what a resume may change.
    """
    from grpo_lite.training.run.resume import read_record  # heavy: imports transformers

    record, _ = read_record(out, move=False)
    trained = (record or {}).get("settings") or {}
    changed = [key for key in KEPT_ON_RESUME if key in overrides and key in trained and overrides[key] != trained[key]]
    if changed:
        what = ", ".join(f"{key}={overrides[key]!r} (the run's: {trained[key]!r})" for key in changed)
        raise ConfigError(
            f"{out} cannot be resumed with {what}: the checkpoint's optimizer state keeps the run's value, the new one "
            "would never apply. A resume may change the steps (--max-steps), lengths, sampling, logging and saving; "
            "drop the setting to resume, or pass --overwrite to start a new run with it (Python: overwrite=True)"
        )
