"""train()'s arguments, checked before anything loads or the output folder is touched: :func:`request` makes the
:class:`Request` the rest of the pipeline reads, the same for a recipe and for a model planned for a budget.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from grpo_lite import rewards as reward_lib
from grpo_lite.data.answer_kinds import check_answer_kind
from grpo_lite.defaults import RESILIENCE, TRAINER
from grpo_lite.errors import ConfigError
from grpo_lite.planning.candidates import LORA_KEYS
from grpo_lite.recipe.recipe import Recipe
from grpo_lite.recipe.values import check_overrides, typed
from grpo_lite.settings import Method, check, settings
from grpo_lite.training import checks
from grpo_lite.training.run.ranks import process_state

R = TypeVar("R")


# plan() inputs that train() decides itself: passing them as overrides is an error that says why.
PLAN_OWNED: dict[str, str] = {
    "max_prompt_length": "train() measures the longest prompt of the dataset; shorten or filter the prompts instead",
    "device": "train() uses CUDA when torch sees a GPU, else the CPU",
    "num_processes": "set by the launcher (grpo-lite train --num-processes N, or accelerate launch)",
    "sharding": "set by the launcher (grpo-lite train --sharding, or the accelerate config)",
    "resume_from_checkpoint": "pass resume=True (--resume): the run goes on from the newest complete checkpoint in "
    "output_dir",
}


def recipe_with_passed_arguments(func: Callable[..., R]) -> Callable[..., R]:
    """train() with ``config=``: the recipe with the arguments the caller wrote applied over it, even at their
    default (``seed=0`` over the file's 7); the arguments left out keep the recipe's values."""
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        passed = signature.bind(*args, **kwargs).arguments
        if passed.get("config") is None:
            return func(*args, **kwargs)
        own = settings()
        written = {key: passed.pop(key) for key in list(passed) if key in own and own[key].recipe}
        recipe = Recipe.with_arguments(passed.pop("config"), {**written, **passed.pop("overrides", {})})
        return func(config=recipe, **passed)

    return wrapper


def check_recipe_launch(recipe: Recipe) -> None:
    """A recipe planned for a GPU, or for N processes, runs only there (checked before anything is loaded)."""
    import torch  # heavy: torch

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


def check_arguments(
    max_steps: int | None, on_oom: str, rewards: Any, overrides: dict[str, Any], on_stall: str = RESILIENCE.on_stall
) -> tuple[list[Any], dict[str, Any]]:
    """Reject bad arguments and settings before anything is loaded; return the reward callables and the
    overrides typed as TRL's parser types them."""
    check("max_steps", max_steps)
    check("on_oom", on_oom)
    check("on_stall", on_stall)
    taken = sorted(set(overrides) & set(PLAN_OWNED))
    if taken:
        raise ConfigError("; ".join(f"{key} cannot be set here: {PLAN_OWNED[key]}" for key in taken))
    reward_funcs = reward_lib.resolve_rewards(rewards)
    return reward_funcs, check_overrides(overrides, n_rewards=len(reward_funcs))


SWITCHES = tuple(s.name for s in settings().values() if s.type is bool and not s.recipe)  # train()'s True or False


def check_run_options(*, oom_window_steps: Any, **flags: Any) -> None:
    """train()'s switches are True or False ("no" is not False), and its OOM window a whole number of steps.

    Raises:
        ConfigError: naming the argument and what it takes.
    """
    for key, value in flags.items():
        if not isinstance(value, bool):
            raise ConfigError(f"{key}={value!r} is not valid; choose True or False")
    check("oom_window_steps", oom_window_steps)


@dataclass
class Request:
    """What train() was asked for, checked: the run as a :class:`Recipe` (the one given with ``config=``, or the one
    ``model=`` and the arguments make, its preset None when the planner chooses), and what a recipe does not hold."""

    recipe: Recipe  # the run's settings; a setting left None is the planner's
    reward_funcs: list[Any]  # recipe.rewards resolved
    method: Method | None = None  # fix the memory method (train(model, method=...)); the planner picks the rest
    written: bool = False  # a recipe given with config=, run as written (else the plan for the budget)
    reward_processing_classes: list[Any] | None = None  # GRPOTrainer's, one per reward (None: a model's own)


def request(config: Any, model: Any, budget_gb: float | None, **passed: Any) -> Request:
    """train()'s arguments checked and typed, as one :class:`Request` (``passed``: its other arguments by name).

    Raises:
        ConfigError: no model and no recipe; None for an argument whose default is a value; a recipe planned for
            another device or number of processes; a bad argument or setting.
    """
    for key in ("dataset", "on_oom", "oom_window_steps", "on_stall"):  # their defaults are values, not None
        if passed[key] is None:
            raise ConfigError(f"{key}=None is not a value train() takes: leave {key} out for its default")
    check_run_options(**{key: passed.pop(key) for key in (*SWITCHES, "oom_window_steps")})
    checks.check_output_path(passed.pop("output_dir"))
    on_oom, on_stall, method = passed.pop("on_oom"), passed.pop("on_stall"), passed.pop("method")
    overrides = passed.pop("overrides")
    lora = peft_lora(passed.pop("peft_config"), overrides, method)
    processing = passed.pop("reward_processing_classes")
    recipe = config  # a Recipe, the arguments passed already applied (recipe_with_passed_arguments)
    if recipe is not None and lora is not None:
        recipe = recipe.with_overrides(lora=lora)  # peft_config over the recipe's lora:, as any argument passed
    if recipe is not None:  # the recipe's values are the run's
        check_recipe_launch(recipe)
        overrides = recipe.plan_settings()  # checked below as train()'s own overrides are
    elif model is None:
        raise ConfigError("train() needs a model (a name, folder or .gguf file) or config='recipe.yaml'")
    else:  # the run as a recipe, typed and checked as a file's are; the preset None when the planner chooses
        check_answer_kind(passed.get("answer_kind"))
        passed.update({key: check(key, typed(key, passed[key])) for key in ("seed", "shared_prefix", "stop_strings")})
        model = typed("model", os.fspath(model) if isinstance(model, os.PathLike) else model)
        passed["prompt_style"] = passed["prompt_style"] or TRAINER.prompt_style  # None: the default, named
        recipe = Recipe(model, passed.pop("preset"), budget_gb=budget_gb, **passed)
    reward_funcs, overrides = check_arguments(recipe.max_steps, on_oom, recipe.rewards, overrides, on_stall)
    loaded_in = init_dtype(overrides)  # model_init_kwargs' dtype as the run's dtype
    if config is None:  # LoRA settings into lora, GRPOConfig's into trl
        recipe = recipe.with_overrides(**{**overrides, **loaded_in, **({} if lora is None else {"lora": lora})})
    elif loaded_in:
        recipe = recipe.with_overrides(**loaded_in)
    processing = check_processing_classes(processing, len(reward_funcs))
    return Request(recipe, reward_funcs, method, written=config is not None, reward_processing_classes=processing)


def peft_lora(peft_config: Any, overrides: dict[str, Any], method: Method | None) -> dict[str, Any] | None:
    """``peft_config`` (a ``peft.LoraConfig``) as a recipe's ``lora``: its rank, scale, dropout and targets (the
    plan prices them) and every other value it sets, as given; None without one.

    Raises:
        ConfigError: not a LoraConfig; given with train()'s lora_* settings or a method that trains every weight.
    """
    if peft_config is None:
        return None
    from peft import LoraConfig  # heavy: peft

    if not isinstance(peft_config, LoraConfig):
        raise ConfigError(
            f"peft_config={type(peft_config).__name__}(...): grpo-lite plans and trains LoRA adapters; pass a "
            "peft.LoraConfig, or leave peft_config out"
        )
    both = [key for key in LORA_KEYS if key in overrides]
    if both:
        raise ConfigError(
            f"peft_config and {', '.join(both)} both set the LoRA adapter: set it in the LoraConfig "
            f"(LoraConfig(r=..., lora_alpha=..., target_modules=[...])) or drop peft_config"
        )
    if method in ("full", "galore"):
        raise ConfigError(
            f"peft_config trains a LoRA adapter but method={method!r} trains every weight: drop one of them "
            "(method='lora' or 'qlora' takes the LoraConfig)"
        )
    given, default = peft_config.to_dict(), LoraConfig().to_dict()
    fields = {f.name for f in dataclasses.fields(LoraConfig) if f.init}
    lora = {k: v for k, v in given.items() if k in fields and (k in LORA_KEYS.values() or v != default.get(k))}
    return {k: sorted(v) if isinstance(v, (set, frozenset)) else v for k, v in lora.items()}


def init_dtype(overrides: dict[str, Any]) -> dict[str, Any]:
    """``model_init_kwargs``' dtype made the run's ``dtype`` (the plan is priced on it, the weights load in it): the
    changes to apply, or nothing.

    Raises:
        ConfigError: ``"auto"``, or a dtype other than the ``dtype`` also passed.
    """
    init = overrides.get("model_init_kwargs")
    if not isinstance(init, dict) or not (keys := [key for key in ("dtype", "torch_dtype") if key in init]):
        return {}
    rest = {k: v for k, v in init.items() if k not in keys}
    name = str(init[keys[0]]).removeprefix("torch.")
    if name == "auto" or overrides.get("dtype", name) != name:
        raise ConfigError(
            f"model_init_kwargs={{{keys[0]!r}: {name!r}}}: the weights load in one dtype the plan is priced on; "
            f"name one (bfloat16, float16, float32) once, in model_init_kwargs or as dtype="
        )
    return {"model_init_kwargs": rest, "dtype": check("dtype", typed("dtype", name))}


def check_processing_classes(processing: Any, n_rewards: int) -> list[Any] | None:
    """GRPOTrainer's ``reward_processing_classes``: one per reward (a reward function's is not read).

    Raises:
        ConfigError: a list of another length than the rewards.
    """
    if processing is None:
        return None
    listed = list(processing) if isinstance(processing, (list, tuple)) else [processing]
    if len(listed) != n_rewards:
        raise ConfigError(
            f"reward_processing_classes has {len(listed)} entries for {n_rewards} rewards: give one per reward, "
            "in the order of the rewards (None for a reward function or a model that loads its own tokenizer)"
        )
    return listed
