"""``grpo-lite plan --measure``: two real GRPO steps with a plan's settings, at the worst case it plans for, each
phase measured (also used by ``benchmarks/memory_fit.py`` and the calibration tests; docs/internals.md).
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING, Any

from grpo_lite.data.prompts import prompt_token_ids
from grpo_lite.errors import ConfigError
from grpo_lite.memory.heap import mmap_threshold_on_cpu
from grpo_lite.memory.measured.calibration import make_row
from grpo_lite.recipe.recipe import Recipe
from grpo_lite.training.build import build_trainer, grpo_settings

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan


_FILLERS = (" the", " a", " 1", " x", " and")


def exact_prompts(tokenizer: Any, tokens: int, n: int) -> list[str]:
    """``n`` distinct plain-text prompts of exactly ``tokens`` tokens as TRL tokenizes them (special tokens on).

    Raises:
        ConfigError: no filler word reaches the exact count (an unusual tokenizer, or ``tokens`` too small).
    """

    def count(text: str) -> int:
        return len(prompt_token_ids(tokenizer, [text])[0])

    prompts = []
    for i in range(n):
        head = f"Q{i}:"
        for word in _FILLERS:
            words = max(0, tokens - count(head))
            for _ in range(6):
                got = count(head + word * words)
                if got == tokens:
                    prompts.append(head + word * words)
                    break
                words += tokens - got
                if words < 0:
                    break
            if len(prompts) > i:
                break
        else:
            raise ConfigError(
                f"could not build prompts of exactly {tokens} tokens with this tokenizer; "
                "plan for a longer --max-prompt-length"
            )
    return prompts


def _length_reward(completions: list[Any], **_: Any) -> list[float]:
    """A dense reward (characters), so every group has an advantage and a real backward."""
    return [float(len(c[0]["content"] if isinstance(c, list) else c)) for c in completions]


def planned_kwargs(the_plan: Plan, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The estimate() keywords of a plan at the measured lengths (what its memory depends on)."""
    s = the_plan.estimate.settings
    keep = (
        "method device dtype optim optim_args gradient_checkpointing per_device_train_batch_size "
        "gradient_accumulation_steps steps_per_generation generation_batch_size num_generations num_iterations beta "
        "lora_r lora_dropout use_liger_kernel bf16 fp16 cast_lm_head_to_fp32 shared_prefix"
    ).split()
    kwargs = {k: getattr(s, k) for k in keep if hasattr(s, k)}
    if s.lora_target_modules is not None:
        kwargs["lora_target_modules"] = list(s.lora_target_modules)
    kwargs.update(
        max_prompt_length=prompt_tokens, max_completion_length=completion_tokens, blocks=the_plan.estimate.blocks
    )
    return kwargs


def measure_plan(the_plan: Plan, *, steps: int = 2, seed: int = 0, source: str | None = None) -> dict[str, Any]:
    """Train ``steps`` GRPO steps with the plan's settings and return planned against measured.

    Args:
        the_plan: the plan to check (its model must be on this machine).
        steps: GRPO steps; the last one is compared (two: the optimizer state exists in the second).
        seed: seed of the weights' sampling and the run.
        source: where to load the model from. Default: the plan's model id.

    Returns:
        A calibration row (:func:`grpo_lite.memory.measured.calibration.make_row`).
    """
    import torch  # heavy: torch
    from datasets import Dataset

    from grpo_lite.memory.measured.measure import measure_training  # heavy: imports torch
    from grpo_lite.training.loading import load_tokenizer

    source = source or the_plan.model.model_id
    cpu = the_plan.device == "cpu"
    with mmap_threshold_on_cpu(the_plan.device), tempfile.TemporaryDirectory() as out:  # lifted after, as train()
        tokenizer = load_tokenizer(source)
        completion = the_plan.settings["max_completion_length"]
        prompts = exact_prompts(tokenizer, the_plan.max_prompt_length, n=64)
        recipe = Recipe.from_plan(the_plan, seed=seed, stop_strings=())  # the worst case runs to the last token
        settings = grpo_settings(recipe, output_dir=os.path.join(out, "run"), seed=seed, max_steps=steps)
        settings.update(
            save_strategy="no",
            logging_steps=1,
            report_to="none",
            disable_tqdm=True,
            generation_kwargs={"min_new_tokens": completion},
        )
        trainer = build_trainer(
            source, recipe, settings, Dataset.from_dict({"prompt": prompts}), tokenizer, [_length_reward], []
        )
        from transformers.trainer_callback import PrinterCallback, ProgressCallback

        for quiet in (PrinterCallback, ProgressCallback):  # stdout stays for the plan (--json)
            trainer.remove_callback(quiet)
        backends = ("tensor",) if cpu else ("cuda", "tensor")
        report = measure_training(trainer, backends, pad_one=True)
    last = report.last()
    measured: dict[str, Any] = {}
    for phase, peak in last.phases["tensor"].items():
        measured[phase] = {"peak": peak.peak_bytes, "categories": dict(peak.categories)}
        if "cuda" in last.phases and phase in last.phases["cuda"]:
            cuda = last.phases["cuda"][phase]
            measured[phase].update(allocated=cuda.peak_bytes, reserved=cuda.categories.get("reserved", 0))
    p, c = report.lengths()
    extra: dict[str, Any] = {
        "peak_rss": report.peak_rss_bytes,
        "rss_start": report.rss_start_bytes,
        "wall_s": round(report.wall_s, 1),
        "threads": torch.get_num_threads(),
    }
    if not cpu:  # the device's own view: the allocator's reserved peak plus the context outside it
        free, total = torch.cuda.mem_get_info()
        context = total - free - torch.cuda.memory_reserved()
        extra.update(peak_device=torch.cuda.max_memory_reserved() + context, cuda_context=context)
    del trainer
    return make_row(the_plan.model.arch, planned_kwargs(the_plan, p, c), measured, extra, model=the_plan.model.name)
