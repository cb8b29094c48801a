"""train()'s arguments, checked before anything loads or the output folder is touched.

- :func:`recipe_with_passed_arguments`: train()'s arguments left None take grpo-lite's defaults
  (:data:`DEFAULTED`, from :mod:`grpo_lite.defaults`); ``train(config=...)`` runs the recipe with the arguments the
  caller wrote applied over it (:data:`RECIPE_ARGUMENTS`: the arguments a recipe holds).
- :func:`check_recipe_launch`: a recipe planned for a device, or for N processes, runs only there.
- :func:`typed_arguments`: train()'s own seed, shared_prefix and stop_strings typed as a recipe's are.
- :func:`check_arguments`: max_steps, on_oom, on_stall; none of the settings train() decides itself
  (:data:`PLAN_OWNED`); the rewards resolved and every override typed and range-checked as TRL's parser types them.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from grpo_lite.defaults import RESILIENCE, STEP, TRAINER
from grpo_lite.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.recipe.recipe import Recipe

__all__ = [
    "DEFAULTED",
    "PLAN_OWNED",
    "RECIPE_ARGUMENTS",
    "check_arguments",
    "check_recipe_launch",
    "recipe_with_passed_arguments",
    "typed_arguments",
]

R = TypeVar("R")


# plan() inputs that train() decides itself: passing them as overrides is an error that says why.
PLAN_OWNED: dict[str, str] = {
    "max_prompt_length": "train() measures the longest prompt of the dataset; shorten or filter the prompts instead",
    "device": "train() uses CUDA when torch sees a GPU, else the CPU",
    "num_processes": "set by the launcher (grpo-lite train --num-processes N, or accelerate launch)",
    "sharding": "set by the launcher (grpo-lite train --sharding, or the accelerate config)",
}


# train()'s arguments a recipe holds (Recipe fields of the same name); the rest of a recipe are overrides
RECIPE_ARGUMENTS = (
    "model",
    "budget_gb",
    "dataset",
    "rewards",
    "preset",
    "prompt_style",
    "seed",
    "max_steps",
    "shared_prefix",
    "stop_strings",
)


# train()'s arguments whose None means grpo-lite's default: the one place they are resolved
DEFAULTED: dict[str, Any] = {
    "dataset": TRAINER.dataset,
    "on_oom": RESILIENCE.on_oom,
    "oom_window_steps": RESILIENCE.oom_window_steps,
    "on_stall": RESILIENCE.on_stall,
    "shared_prefix": STEP.shared_prefix,
    "stop_strings": TRAINER.stop_strings,
}


def recipe_with_passed_arguments(func: Callable[..., R]) -> Callable[..., R]:
    """train() with its None arguments resolved (:data:`DEFAULTED`); with ``config=``: the recipe, then the
    arguments the caller wrote (:meth:`Recipe.with_arguments`).

    The call is bound to train()'s signature, so an argument written at its default still counts (one of
    :data:`DEFAULTED` written None keeps the recipe's value); train() itself then runs the resulting Recipe with
    nothing else of the recipe's passed.
    """
    signature = inspect.signature(func)

    def resolved(passed: dict[str, Any]) -> dict[str, Any]:
        return {**passed, **{key: value for key, value in DEFAULTED.items() if passed.get(key) is None}}

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        passed = signature.bind(*args, **kwargs).arguments
        if passed.get("config") is None:
            overrides = passed.pop("overrides", {})
            return func(**resolved(passed), **overrides)
        from grpo_lite.recipe.recipe import Recipe

        written = {key: passed.pop(key) for key in RECIPE_ARGUMENTS if key in passed}
        written = {key: value for key, value in written.items() if not (key in DEFAULTED and value is None)}
        recipe = Recipe.with_arguments(passed.pop("config"), {**written, **passed.pop("overrides", {})})
        return func(config=recipe, **resolved(passed))

    return wrapper


def check_recipe_launch(recipe: Recipe) -> None:
    """A recipe planned for a GPU, or for N processes, runs only there (checked before anything is loaded)."""
    import torch

    from grpo_lite.training.run.ranks import process_state

    here = "cuda" if torch.cuda.is_available() else "cpu"
    if recipe.device is not None and recipe.device != here:
        raise ConfigError(
            f"the recipe was planned for device {recipe.device!r} but this run is on {here!r}: write it "
            f"again for this device (grpo-lite plan {recipe.model} --device {here} --write FILE)"
        )
    processes = process_state().num_processes
    if recipe.num_processes != processes:
        raise ConfigError(
            f"the recipe was planned for {recipe.num_processes} process(es) but this run has {processes}: "
            "start it with grpo-lite train --config FILE (it launches the recipe's processes) or set "
            "num_processes in the file"
        )


def typed_arguments(seed: Any, shared_prefix: Any, stop_strings: Any) -> tuple[int, bool, Any]:
    """train()'s own ``seed``, ``shared_prefix`` and ``stop_strings``, typed as a recipe's are (a ConfigError
    naming the argument when one is not of its type)."""
    from grpo_lite.recipe.values import typed

    return typed("seed", seed), typed("shared_prefix", shared_prefix), typed("stop_strings", stop_strings)


def check_arguments(
    max_steps: int | None, on_oom: str, rewards: Any, overrides: dict[str, Any], on_stall: str = RESILIENCE.on_stall
) -> tuple[list[Any], dict[str, Any]]:
    """Reject bad arguments and settings before anything is loaded; return the reward callables and the
    overrides typed as TRL's parser types them."""
    from grpo_lite import rewards as reward_lib
    from grpo_lite.recipe.values import check_overrides

    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ConfigError(f"max_steps must be a positive integer, got {max_steps!r}")
    if on_oom not in ("step_down", "raise"):
        raise ConfigError(f"on_oom={on_oom!r} is not valid; choose 'step_down' or 'raise'")
    if on_stall not in ("warn", "adapt"):
        raise ConfigError(f"on_stall={on_stall!r} is not valid; choose 'warn' or 'adapt'")
    taken = sorted(set(overrides) & set(PLAN_OWNED))
    if taken:
        raise ConfigError("; ".join(f"{key} cannot be set here: {PLAN_OWNED[key]}" for key in taken))
    reward_funcs = reward_lib.resolve_rewards(rewards)
    return reward_funcs, check_overrides(overrides, n_rewards=len(reward_funcs))
