"""Before the model loads: what the run trains on, the plan it trains with, and whether that fits the model.

- :func:`load_inputs`: the model resolved, its tokenizer, the dataset in the prompt style, every prompt measured.
- :func:`plan_kwargs`: what train() decides for plan(): the device, the longest prompt, the launcher's processes
  and sharding.
- :func:`make_plan`: the plan for the budget (plan -> Recipe); with a recipe, the estimate of the recipe as
  written, refused in one line naming the recipe's keys to change when it does not fit its budget
  (:func:`recipe_advice`). Printed on the main process.
- :func:`check_context`: the longest prompt and the planned completions fit the model's context.
- :func:`check_inputs`: before ``--num-processes N`` starts its ranks: the dataset loads and its prompts fit the
  context (the tokenizer and the dataset only, no weights), so a bad input is one error, not one per rank.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from grpo_lite.errors import ConfigError
from grpo_lite.training.run.attempts import RunFolder, RunInputs

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.planning.ladder import Method
    from grpo_lite.planning.result import Plan
    from grpo_lite.recipe.recipe import Recipe

__all__ = ["check_context", "check_inputs", "load_inputs", "make_plan", "plan_kwargs", "recipe_advice"]


def load_inputs(
    model: str | os.PathLike,
    dataset: Any,
    reward_funcs: list[Any],
    prompt_style: PromptStyle | None,
    seed: int,
    skip_invalid: bool,
    console: Any,
) -> RunInputs:
    """Resolve the model, load its tokenizer and the dataset, and measure every prompt."""
    from grpo_lite.data import prompts
    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.memory.models import resolve_model
    from grpo_lite.training.build import measure_prompt_tokens
    from grpo_lite.training.loading import load_tokenizer

    spec = resolve_model(model)
    if spec.note:
        console.print(f"[dim]{spec.note}[/dim]")
    style = prompt_style or prompts.PromptStyle()
    tokenizer = load_tokenizer(spec.model_id)
    rows = load_dataset(dataset, split="train", style=style, seed=seed, skip_invalid=skip_invalid)
    train_set = prompts.apply_prompt_style(rows, tokenizer, style)
    prompt_tokens = measure_prompt_tokens(train_set, tokenizer)  # every row: TRL does not truncate
    return RunInputs(spec, tokenizer, train_set, reward_funcs, style, prompt_tokens)


def plan_kwargs(budget_gb: float | None, prompt_tokens: int) -> dict[str, Any]:
    """What train() decides for plan(): the device, the prompt length, the launcher's processes and sharding."""
    import torch

    from grpo_lite.scale.distributed import detect_sharding
    from grpo_lite.training.run.ranks import process_state

    kwargs: dict[str, Any] = dict(
        device="cuda" if torch.cuda.is_available() else "cpu",
        max_prompt_length=prompt_tokens,
        num_processes=process_state().num_processes,
        sharding=detect_sharding(),  # what the launcher set up (zero2/zero3/fsdp), else None/ddp
    )
    if budget_gb is not None:
        kwargs["budget_gb"] = budget_gb
    return kwargs


def make_plan(
    inputs: RunInputs,
    plan_kwargs: dict[str, Any],
    method: Method | None,
    preset: str | None,
    overrides: dict[str, Any],
    run: RunFolder,
    quiet: bool,
    show_plan: bool = False,
    recipe: Recipe | None = None,
) -> Plan:
    """plan() for this run, printed on the main process: its summary, or the whole table with ``show_plan``.

    With ``recipe``, ``overrides`` are its settings and ``preset`` its preset: the estimate of the recipe as
    written, refused in one line naming the recipe's keys to change when it does not fit its budget.
    """
    from grpo_lite.errors import DoesNotFitError
    from grpo_lite.planning.choose import plan
    from grpo_lite.training.run.resilience import train_advice

    try:
        the_plan = plan(inputs.spec, method=method, preset=preset, **plan_kwargs, **overrides)
    except DoesNotFitError as exc:  # the planner's advice names max_prompt_length, which train() measures itself
        advice = (
            train_advice(str(exc), inputs.prompt_tokens)
            if recipe is None
            else recipe_advice(str(exc), inputs.prompt_tokens, exc.smallest_budget_gb, recipe)
        )
        raise DoesNotFitError(advice, exc.smallest_budget_gb, exc.preset) from None
    if not quiet and run.state.is_main_process:
        from grpo_lite.planning.tables import plan_summary, plan_table

        if show_plan:
            run.console.print(plan_table(the_plan))
        else:
            run.console.print(plan_summary(the_plan), highlight=False, markup=False, soft_wrap=True)
    return the_plan


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


def _context_tokens(spec: Any, tokenizer: Any) -> int | None:
    """The model's context in tokens: its config's ``max_position_embeddings``, else the tokenizer's
    ``model_max_length`` (None when neither says, as for a tokenizer without a limit)."""
    context = None
    if spec.kind != "gguf":
        from transformers import AutoConfig

        try:
            context = getattr(AutoConfig.from_pretrained(spec.model_id), "max_position_embeddings", None)
        except (OSError, ValueError):  # not cached offline, or not a transformers config
            context = None
    if context is None:
        context = getattr(tokenizer, "model_max_length", None)
    return context if isinstance(context, int) and 0 < context < 10**7 else None


def check_context(the_plan: Plan, inputs: RunInputs) -> None:
    """Before the model loads: the longest prompt and the planned completions fit the model's context."""
    _check_context(inputs, the_plan.settings["max_completion_length"])


def check_inputs(
    model: str | os.PathLike,
    dataset: Any,
    prompt_style: PromptStyle | None,
    seed: int,
    skip_invalid: bool,
    max_completion_length: int | None,
) -> None:
    """What each rank checks before its model loads, checked once before the ranks start: the model resolves, the
    dataset loads (a missing file, a bad row) and its longest prompt with ``max_completion_length`` fits the
    model's context (None: the shortest the planner tries, so that no plan the ranks make fits either).

    Raises:
        ConfigError, DataError, ModelError: as train() raises them, one line.
    """
    from rich.console import Console

    from grpo_lite.planning.candidates import COMPLETION_LENGTHS

    inputs = load_inputs(model, dataset, [], prompt_style, seed, skip_invalid, Console(quiet=True))
    _check_context(inputs, min(COMPLETION_LENGTHS) if max_completion_length is None else max_completion_length)


def _check_context(inputs: RunInputs, completion: int) -> None:
    context = _context_tokens(inputs.spec, inputs.tokenizer)
    if context is None or inputs.prompt_tokens + completion <= context:
        return
    room = context - inputs.prompt_tokens
    fix = (
        f"set max_completion_length={room} or lower (--set max_completion_length={room}; in a recipe, "
        f"max_completion_length: {room} under trl:; Python: max_completion_length={room}), or "
        if room >= 1
        else ""
    )
    raise ConfigError(
        f"the longest prompt ({inputs.prompt_tokens} tokens) and max_completion_length ({completion}) "
        f"need {inputs.prompt_tokens + completion} positions; {inputs.spec.name} has a context of "
        f"{context} tokens: {fix}shorten the prompts (drop the longest rows from the dataset)"
    )
