"""train(): the pipeline, one call per stage, each stage in its own module (docs/architecture.md): arguments, the
model resolved once, the run folder opened, inputs, plan, recipe, the run's attempts, the result. It does not export:
:mod:`grpo_lite.api`'s ``train(export=...)`` passes the export in as an :class:`AfterTraining`; this module never
imports it. On CPU the call runs under glibc's fixed mmap threshold, lifted when it returns
(:func:`grpo_lite.memory.heap.mmap_threshold_on_cpu`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from grpo_lite.defaults import RESILIENCE, STEP, TRAINER
from grpo_lite.memory.heap import mmap_threshold_on_cpu
from grpo_lite.memory.models import resolve_model
from grpo_lite.settings import AnswerKind, Method, OnOOM, OnStall
from grpo_lite.training import arguments, fit, prepare
from grpo_lite.training.attempts import Attempts, run_attempts
from grpo_lite.training.report.quiet import quiet_libraries
from grpo_lite.training.result import TrainResult, finish
from grpo_lite.training.run import folder

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.memory.models import ModelSpec
    from grpo_lite.recipe.recipe import Recipe
    from grpo_lite.training.run.folder import RunFolder


class AfterTraining(Protocol):
    """What runs around the pipeline (``grpo_lite.train(export=...)`` passes its export): a check of the resolved
    model before the output folder is touched, and a step once run.json says finished."""

    def check(self, spec: ModelSpec) -> None: ...

    def run(self, result: TrainResult, run: RunFolder) -> Any: ...


@quiet_libraries()
@arguments.recipe_with_passed_arguments
@mmap_threshold_on_cpu()  # CPU: freed tiles go back to the system (docs/memory.md plans for it); lifted at the end
def train(
    model: str | os.PathLike | None = None,
    budget_gb: float | None = None,
    *,
    config: str | os.PathLike | Recipe | None = None,
    dataset: str | os.PathLike | Dataset = TRAINER.dataset,
    rewards: Sequence[str | Callable[..., list[float]] | PreTrainedModel] | None = None,
    reward_processing_classes: PreTrainedTokenizerBase | Sequence[PreTrainedTokenizerBase | None] | None = None,
    peft_config: LoraConfig | None = None,
    output_dir: str | os.PathLike | None = None,
    max_steps: int | None = None,
    method: Method | None = None,
    preset: str | None = None,
    prompt_style: PromptStyle | None = None,
    seed: int = 0,
    resume: bool = False,
    overwrite: bool = False,
    on_oom: OnOOM = RESILIENCE.on_oom,
    oom_window_steps: int = RESILIENCE.oom_window_steps,
    on_stall: OnStall = RESILIENCE.on_stall,
    callbacks: Sequence[Any] = (),
    quiet: bool = False,
    show_plan: bool = False,
    shared_prefix: bool = STEP.shared_prefix,
    stop_strings: Sequence[str] = TRAINER.stop_strings,
    skip_invalid: bool = False,
    answer_kind: AnswerKind | None = None,
    after: AfterTraining | None = None,
    **overrides: Any,
) -> TrainResult:
    """Fine-tune ``model`` with GRPO on ``dataset`` under a memory plan for ``budget_gb``.

    The defaults shown are :mod:`grpo_lite.defaults`' values (their trade-offs are written there); an argument
    whose default is None is decided as its line below says.

    Args:
        model: a hub id, a short name such as ``"Llama-3.2-1B-Instruct"``, a local folder, or a ``.gguf`` file.
        budget_gb: the GPU's nominal size in GB (16 for a 16 GB card), per device. None detects the
            current CUDA device; without CUDA the run uses a CPU plan.
        config: a recipe to run as written: a YAML file (``grpo-lite plan MODEL --write recipe.yaml``) or a
            :class:`~grpo_lite.recipe.recipe.Recipe`. Its estimate for your measured prompts is checked against its
            ``budget_gb`` before anything loads (DoesNotFitError naming the keys to change); only a setting it leaves
            None is the planner's. The arguments you write override its values, even at their default (``seed=0``
            over the file's 7), as flags override ``--config`` in TRL's CLI.
        dataset: ``"gsm8k"``, ``"synthetic"``, a path to a jsonl/json/parquet/csv file or folder, a hub dataset id
            (``"owner/name"``, loaded with ``datasets.load_dataset``), or a ``datasets.Dataset`` with a question (or
            prompt) column and an answer column. Default: ``"gsm8k"`` (``grpo_lite.defaults.TRAINER.dataset``).
        rewards: what GRPOTrainer's ``reward_funcs`` takes: reward names from ``grpo_lite.rewards.REWARDS`` or TRL's,
            import paths (``module:function``), callables with TRL's signature, and reward models (a folder, a hub
            id or an ``AutoModelForSequenceClassification`` with one label; its weights are planned for).
            Default: the five GSM8K rewards.
        reward_processing_classes: GRPOTrainer's: a tokenizer for each reward model, one entry per reward (None:
            the model's own). Default: None.
        peft_config: a ``peft.LoraConfig``, trained as given; the plan is priced on its rank and target modules
            (not with ``lora_r`` and the other ``lora_*`` settings). Default: None (the planner's LoRA, if any).
        output_dir: checkpoints, the final model and ``run.json``. Default: ``runs/<model>-<time>``.
        max_steps: optimizer steps in all; None trains ``num_train_epochs`` epochs (TRL's default: 3).
        method: fix the memory method ("full", "galore", "lora", "qlora"); the planner picks the rest.
        preset: fix a whole preset by name (see ``grpo-lite presets``).
        prompt_style: system prompt, one-shot example and assistant prefill. Default: ``PromptStyle()``.
        seed: seed for data order, sampling and adapter initialisation. Default: 0.
        resume: continue from the newest complete ``checkpoint-N`` in ``output_dir`` (step count,
            optimizer, scheduler and RNG state continue; incomplete checkpoints are moved to
            ``output_dir/incomplete``). Default: False.
        overwrite: replace a run already in ``output_dir``. Default: False (such a folder is refused).
        on_oom: "step_down" frees memory after a CUDA out-of-memory error, moves to the next cheaper
            rung of the ladder and goes on from the weights reached; "raise" re-raises. Default: "step_down"
            (``grpo_lite.defaults.RESILIENCE.on_oom``).
        oom_window_steps: step down only for an OOM within this many steps (later ones re-raise). Default: 20
            (``grpo_lite.defaults.RESILIENCE.oom_window_steps``).
        on_stall: what the learning-health monitor does when the run is not learning (docs/health.md): "warn"
            prints the cause and a remedy and records it in run.json; "adapt" also raises max_completion_length at
            the next checkpoint, to the longest the plan fits, after most completions were cut at the limit.
            Default: "warn" (``grpo_lite.defaults.RESILIENCE.on_stall``).
        callbacks: extra ``transformers.TrainerCallback`` objects.
        quiet: do not print the plan, the progress lines and the summary table.
        show_plan: print the whole plan (components, reasons, settings) instead of its two-line summary.
        shared_prefix: forward each group's prompt once for all its completions in the log-prob passes
            (same log-probs and gradients, checked against TRL's path on the first micro-batch; off
            where unsupported, see docs/shared_prefix.md). Default: True (``grpo_lite.defaults.STEP.shared_prefix``).
        stop_strings: end a sampled completion at the first of these. Default: ``("</answer>",)``,
            the end of the XML answer format (``grpo_lite.defaults.TRAINER.stop_strings``); ``()`` samples up to
            ``max_completion_length``.
        skip_invalid: skip dataset rows without a usable question or answer (one warning gives the
            count) instead of raising. Default: False.
        answer_kind: how the correctness reward compares answers with the golds: ``"number"``, ``"math"``
            (LaTeX, math-verify), ``"choice"`` (an option letter) or ``"text"`` (docs/datasets.md). Default: the named
            dataset's, else chosen from the golds (every gold a number: number; LaTeX: math; else text).
        after: what runs around the run: a check of the resolved model before the output folder is touched, and
            a step once the run is finished (``grpo_lite.train`` passes its ``export=`` here). Default: None.
        **overrides: any GRPOConfig / TrainingArguments field (``learning_rate=1e-5``,
            ``num_generations=4``, ``model_init_kwargs={"attn_implementation": "eager"}``: the model loads with them)
            or LoRA setting (``lora_r``, ``lora_alpha``, ``lora_dropout``, ``lora_target_modules``, ``use_dora``,
            ``use_rslora``, ``modules_to_save``), applied verbatim: the planner only chooses what is not fixed here.
            Each is checked against GRPOConfig's type and range before anything loads.

    Raises:
        ConfigError: a bad argument or setting (before anything loads). DataError, ModelError: the
            dataset or model. DoesNotFitError: no preset fits. OutputDirError: the output folder is a
            file, read-only, full or held by another run, or the disk filled up during the run.
        RewardError: a reward function returned something other than one number (or None) per completion.
    """
    request = arguments.request(
        config, model, budget_gb, dataset=dataset, rewards=rewards, seed=seed, max_steps=max_steps, method=method,
        peft_config=peft_config, reward_processing_classes=reward_processing_classes,
        preset=preset, prompt_style=prompt_style, shared_prefix=shared_prefix, stop_strings=stop_strings,
        on_oom=on_oom, on_stall=on_stall, overrides=overrides, resume=resume, overwrite=overwrite, quiet=quiet,
        show_plan=show_plan, skip_invalid=skip_invalid, oom_window_steps=oom_window_steps, output_dir=output_dir,
        answer_kind=answer_kind,
    )  # fmt: skip
    spec = resolve_model(request.recipe.model)  # once: every stage below reads this spec
    if after is not None:
        after.check(spec)  # before the output folder is touched
    run = folder.open_run(
        spec, output_dir, resume=resume, overwrite=overwrite, quiet=quiet, recipe=request.recipe, method=request.method
    )
    loop = None
    try:
        inputs = prepare.load_inputs(spec, request.recipe, request.reward_funcs, skip_invalid, run.console)
        inputs = dataclasses.replace(inputs, reward_processing_classes=request.reward_processing_classes)
        plan, plan_kwargs = fit.make_plan(inputs, request, run, quiet=quiet or run.finished, show_plan=show_plan)
        if run.finished:
            return TrainResult.of_finished_run(run, inputs, plan)
        asked = fit.asked_recipe(request, plan, inputs)  # config= and model= alike: the user's recipe
        recipe = fit.make_recipe(asked, plan, inputs, run)  # filled by the plan
        loop = Attempts.start(
            plan, inputs, run, recipe, asked=asked, callbacks=callbacks, plan_kwargs=plan_kwargs, on_stall=on_stall
        )
        trainer = run_attempts(loop, on_oom=on_oom, oom_window_steps=oom_window_steps)
        result = finish(loop, trainer, inputs, run)
    except BaseException as exc:
        if loop is not None:
            loop.record_failure(exc)  # run.json says failed or aborted; a full disk is said as such
            if (full := folder.disk_full(exc, run, loop.plan)) is not None:
                raise full from exc
        raise
    finally:
        run.release()
    if after is not None and not result.interrupted and run.state.is_main_process:
        result.exported = after.run(result, run)  # run.json says finished: a failed export keeps the model
    return result
