"""From a Recipe to TRL objects: GRPOConfig settings, the model as the recipe loads it, GRPOTrainer.

Also the two ways a run's weights leave the trainer: the final save (atomic rename) and the
carried state when stepping down after an out-of-memory error. Imported only inside train().
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from grpo_lite.memory.keywords import lora_config
from grpo_lite.recipe.recipe import make_grpo_config
from grpo_lite.recipe.values import check_config_keys

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

    from grpo_lite.recipe.recipe import Recipe


def grpo_settings(recipe: Recipe, *, output_dir: Path, seed: int, max_steps: int | None) -> dict[str, Any]:
    """The recipe's GRPOConfig settings (grpo-lite's run defaults under the plan's), then the run's own."""
    settings = recipe.grpo_settings(output_dir, seed=seed, max_steps=max_steps if max_steps is not None else -1)
    check_config_keys(settings)
    return settings


def _device_map(recipe: Recipe) -> Any:
    if recipe.device != "cuda" or not recipe.quantization:
        return None
    from accelerate import PartialState

    return {"": PartialState().local_process_index}  # bitsandbytes weights must sit on this rank's GPU


def build_trainer(
    source: str,
    recipe: Recipe,
    settings: dict[str, Any],
    dataset: Dataset,
    tokenizer: Any,
    reward_funcs: Sequence[Callable[..., Any]],
    callbacks: Sequence[Any],
    **trainer_options: Any,
) -> Any:
    """Load the model from ``source`` as the recipe says and wrap everything in a GRPOTrainer
    (:class:`~grpo_lite.training.step.grpo_trainer.LiteGRPOTrainer`: the recipe's shared prefix, stop strings
    and update rounding; ``trainer_options`` are its other keyword arguments)."""
    import torch

    from grpo_lite.training.loading import load_model
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    args = make_grpo_config(settings)
    torch.manual_seed(settings["seed"])
    init = {"trust_remote_code": args.trust_remote_code, **(args.model_init_kwargs or {})}  # as TRL loads a name
    args.model_init_kwargs = None  # honoured here: TRL would warn that it ignores them for a loaded model
    policy = load_model(source, dtype=recipe.dtype, quantization=recipe.quantization, device_map=_device_map(recipe),
                        init_kwargs=init)  # fmt: skip
    return LiteGRPOTrainer(
        shared_prefix=recipe.shared_prefix,
        stop_strings=tuple(recipe.stop_strings),
        update_rounding=recipe.update_rounding,
        model=policy,
        reward_funcs=list(reward_funcs),
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(recipe.lora),
        callbacks=list(callbacks),
        **trainer_options,
    )


def save_final(trainer: Any, tokenizer: Any, out: Path) -> Path:
    """Save the final model (or adapter) to ``out/final`` via a temporary folder and a rename. Every step is
    trained: a stop signal now lets the save finish (:func:`~grpo_lite.training.run.resilience.finish_first`)."""
    from grpo_lite.files import remove
    from grpo_lite.training.run.resilience import finish_first

    final, tmp = out / "final", out / ".final.tmp"
    with finish_first("the final save"):
        remove(tmp)  # a link is unlinked, never written through
        try:
            trainer.save_model(str(tmp))
            if trainer.accelerator.is_main_process:
                tokenizer.save_pretrained(str(tmp))
                remove(final)
                os.replace(tmp, final)
        except BaseException:
            if trainer.accelerator.is_main_process:  # a cut-off save (a full disk): no partial model stays behind,
                with contextlib.suppress(OSError):  # and its room is free again for run.json's failure record
                    remove(tmp)
            raise
    return final


def carry_weights(trainer: Any, tokenizer: Any, path: Path) -> Path:
    """Save the weights reached so far as a plain model folder (LoRA merged in) to restart from."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    from grpo_lite.files import remove

    remove(path)  # a link is unlinked, never written through
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path
