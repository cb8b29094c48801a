"""train(): plan -> Recipe -> run, or, with ``config=``, Recipe -> check it fits -> the same run.

The pipeline, in order, each step a named function of the module that holds its concern:

1. the arguments checked before anything loads (:mod:`grpo_lite.training.arguments`; a recipe's own values
   checked where it was planned to run); the export asked for checked;
2. the run folder opened: checked, locked, guarded against another run, a resume checked and its checkpoint
   found (:func:`grpo_lite.training.run.folder.open_run`);
3. the inputs loaded and every prompt measured, then the plan: for the budget (plan -> Recipe), or the estimate
   of the recipe as written against its budget (Recipe -> fits?); the model's context and the disk checked
   (:mod:`grpo_lite.training.prepare`, :func:`grpo_lite.training.run.folder.check_disk`);
4. the run: attempts of TRL's ``GRPOTrainer`` built from the Recipe, stepping down the preset ladder on CUDA
   out-of-memory, stopping on Ctrl-C or SIGTERM with a checkpoint (:mod:`grpo_lite.training.run`);
5. the end: the model or adapter saved and ``run.json`` written atomically, the summary printed
   (:mod:`grpo_lite.training.report`), the export when asked.

On CPU the whole call runs under glibc's fixed mmap threshold, lifted when it returns or raises so
that the model handed back decodes as fast as a fresh one (:func:`grpo_lite.memory.heap.mmap_threshold_on_cpu`).

TRL, PEFT and bitsandbytes are imported inside functions, never at ``import grpo_lite``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from grpo_lite.data.prompts import DEFAULT_STOP_STRINGS  # the XML format's end: nothing after it earns a reward
from grpo_lite.errors import ConfigError
from grpo_lite.memory.heap import mmap_threshold_on_cpu
from grpo_lite.memory.settings import SHARED_PREFIX_DEFAULT
from grpo_lite.training import arguments, prepare
from grpo_lite.training.report.advice import OnStall
from grpo_lite.training.report.quiet import quiet_libraries
from grpo_lite.training.run import folder
from grpo_lite.training.run.attempts import OnOOM, RunFolder, RunInputs

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.export.after_training import ExportFormat
    from grpo_lite.planning.ladder import Method
    from grpo_lite.planning.result import Plan
    from grpo_lite.recipe.recipe import Recipe

__all__ = ["DEFAULT_STOP_STRINGS", "TrainResult", "train"]


@dataclass
class TrainResult:
    """What a train() run produced.

    Attributes:
        output_dir: the run folder (checkpoints, ``run.json``, ``reward_curve.png``).
        model_dir: the final model, or the LoRA adapter for LoRA/QLoRA runs.
        plan: the memory plan in force at the end (after any step down).
        steps: optimizer steps completed, over all attempts.
        history: one dict per logged step (reward, each reward's mean, loss, memory...).
        peak_memory: measured CUDA peaks in GiB (``max_allocated_gib``, ``max_reserved_gib``), None on CPU.
        wall_seconds: wall time of the training loop.
        interrupted: True when Ctrl-C or SIGTERM stopped the run (a checkpoint was saved; resume continues it).
        stop_signal: the signal that stopped it (``"SIGINT"``, ``"SIGTERM"``), or None.
        already_finished: True when ``resume`` found the run finished and ``max_steps`` asked for no more
            steps: nothing was trained or written (``model`` is None; the model is in ``model_dir``).
        events: what happened along the way (out-of-memory step downs, interrupts, resume).
        model: the trained model in memory (a PeftModel for LoRA/QLoRA), for evaluation right away.
        tokenizer: its tokenizer.
        exported: with ``export="gguf"``, the files written (:class:`grpo_lite.export.runtimes.RuntimeFiles`:
            ``gguf``, ``modelfile``, ``llama_cli``); else None.
    """

    output_dir: Path
    model_dir: Path | None
    plan: Plan
    steps: int
    history: list[dict[str, Any]]
    peak_memory: dict[str, float] | None
    wall_seconds: float
    interrupted: bool = False
    stop_signal: str | None = None
    already_finished: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)
    model: Any = field(default=None, repr=False)
    tokenizer: Any = field(default=None, repr=False)
    exported: Any = None

    def reward_change(self, window: int = 3) -> tuple[float | None, float | None]:
        """Mean total reward over the first and the last ``window`` logged steps."""
        from grpo_lite.training.report.summary import first_last

        return first_last(self.history, window).get("reward", (None, None))

    @classmethod
    def of_finished_run(cls, run: RunFolder, inputs: RunInputs, the_plan: Plan) -> TrainResult:
        """Resuming a run that is finished, with no steps asked beyond it: what its run.json records; nothing
        trained or written (``model`` is None; the model is in ``model_dir``)."""
        from grpo_lite.training.run.resume import read_record

        record, _ = read_record(run.out, move=False)
        record = record or {}
        return cls(
            output_dir=run.out,
            model_dir=run.out / "final",
            plan=the_plan,
            steps=run.earlier.reached,
            history=run.earlier.history,
            peak_memory=record.get("peak_memory"),
            wall_seconds=record.get("wall_seconds") or 0.0,
            events=run.earlier.events,
            tokenizer=inputs.tokenizer,
            already_finished=True,
        )


@quiet_libraries()
@arguments.recipe_with_passed_arguments
@mmap_threshold_on_cpu()  # CPU: freed tiles go back to the system (docs/memory.md plans for it); lifted at the end
def train(
    model: str | os.PathLike | None = None,
    budget_gb: float | None = None,
    *,
    config: str | os.PathLike | Recipe | None = None,
    dataset: str | os.PathLike | Dataset = "gsm8k",
    rewards: Sequence[str | Callable[..., list[float]]] | None = None,
    output_dir: str | os.PathLike | None = None,
    max_steps: int | None = None,
    method: Method | None = None,
    preset: str | None = None,
    prompt_style: PromptStyle | None = None,
    seed: int = 0,
    resume: bool = False,
    overwrite: bool = False,
    on_oom: OnOOM = "step_down",
    oom_window_steps: int = 20,
    on_stall: OnStall = "warn",
    callbacks: Sequence[Any] = (),
    quiet: bool = False,
    show_plan: bool = False,
    shared_prefix: bool = SHARED_PREFIX_DEFAULT,
    stop_strings: Sequence[str] = DEFAULT_STOP_STRINGS,
    skip_invalid: bool = False,
    export: ExportFormat | None = None,
    **overrides: Any,
) -> TrainResult:
    """Fine-tune ``model`` with GRPO on ``dataset`` under a memory plan for ``budget_gb``.

    Args:
        model: a hub id, a short name such as ``"Llama-3.2-1B-Instruct"``, a local folder, or a ``.gguf`` file.
        budget_gb: the GPU's nominal size in GB (16 for a 16 GB card), per device. None detects the
            current CUDA device; without CUDA the run uses a CPU plan.
        config: a recipe to run as written: a YAML file (``grpo-lite plan MODEL --write recipe.yaml``) or a
            :class:`~grpo_lite.recipe.recipe.Recipe`. The trainer is built from the recipe itself; before
            anything loads, the memory model's estimate of its settings (for your measured prompts) is checked
            against its ``budget_gb`` (DoesNotFitError naming the recipe keys to change); only a setting it
            leaves None is the planner's (:meth:`~grpo_lite.recipe.recipe.Recipe.filled`). The arguments you
            pass override its values (an argument you write wins even at its default:
            ``seed=0`` over the file's 7; one you leave out keeps the recipe's), as flags override ``--config``
            in TRL's CLI.
        dataset: ``"gsm8k"``, ``"synthetic"``, a path to a jsonl/json/parquet/csv file or folder, or a
            ``datasets.Dataset`` with a question (or prompt) column and an answer column.
        rewards: reward names from ``grpo_lite.rewards.REWARDS`` and/or callables with TRL's signature.
            Default: the five GSM8K rewards.
        output_dir: checkpoints, the final model and ``run.json``. Default: ``runs/<model>-<time>``.
        max_steps: optimizer steps in all; None trains one epoch.
        method: fix the memory method ("full", "galore", "lora", "qlora"); the planner picks the rest.
        preset: fix a whole preset by name (see ``grpo-lite presets``).
        prompt_style: system prompt, one-shot example and assistant prefill. Default: ``PromptStyle()``.
        seed: seed for data order, sampling and adapter initialisation. Default: 0.
        resume: continue from the newest complete ``checkpoint-N`` in ``output_dir`` (step count,
            optimizer, scheduler and RNG state continue; incomplete checkpoints are moved to
            ``output_dir/incomplete``). Default: False.
        overwrite: replace a run already in ``output_dir``. Default: False (such a folder is refused).
        on_oom: "step_down" frees memory after a CUDA out-of-memory error, moves to the next cheaper
            rung of the ladder and goes on from the weights reached; "raise" re-raises. Default: "step_down".
        oom_window_steps: step down only for an OOM within this many steps (later ones re-raise). Default: 20.
        on_stall: what the learning-health monitor does when the run is not learning (docs/health.md): "warn"
            prints the cause and a remedy and records it in run.json; "adapt" also raises max_completion_length,
            at the next checkpoint, to the longest the plan fits with the other settings unchanged, after most
            completions were cut at the limit. Default: "warn".
        callbacks: extra ``transformers.TrainerCallback`` objects.
        quiet: do not print the plan, the progress lines and the summary table.
        show_plan: print the whole plan (components, reasons, settings) instead of its two-line summary.
        shared_prefix: forward each group's prompt once for all its completions in the log-prob passes
            (same log-probs and gradients, checked against TRL's path on the first micro-batch; off
            where unsupported, see docs/shared_prefix.md). Default: True.
        stop_strings: end a sampled completion at the first of these. Default: ``("</answer>",)``,
            the end of the XML answer format; ``()`` samples up to ``max_completion_length``.
        skip_invalid: skip dataset rows without a usable question or answer (one warning gives the
            count) instead of raising. Default: False.
        export: ``"gguf"`` also writes ``final.gguf`` (q8_0), ``final.Modelfile`` (Ollama) and ``final.system_prompt.txt``
            in the run folder at the end (docs/export.md); checked before training starts. Default: None.
        **overrides: any GRPOConfig / TrainingArguments field (``learning_rate=1e-5``,
            ``num_generations=4``) or LoRA setting (``lora_r``, ``lora_alpha``, ``lora_dropout``,
            ``lora_target_modules``), applied verbatim: the planner only chooses what is not fixed here.
            ``problem_choice="learnable"`` chooses each batch's problems by what the model can still learn from
            (:mod:`grpo_lite.training.step.problem_choice`; default ``"off"``, TRL's order).
            Each is checked against GRPOConfig's type and range before anything loads.

    Raises:
        ConfigError: a bad argument or setting (before anything loads). DataError, ModelError: the
            dataset or model. DoesNotFitError: no preset fits. OutputDirError: the output folder is a
            file, read-only, full or held by another run, or the disk filled up during the run.
        RewardError: a reward function returned something other than one number (or None) per completion.
    """
    from grpo_lite.export.after_training import check_export
    from grpo_lite.training.run.attempts import Attempts, run_attempts
    from grpo_lite.training.step.trl_seam import seam_replan

    # a Recipe, the arguments passed already applied (recipe_with_passed_arguments)
    recipe = cast("Recipe | None", config)
    if recipe is not None:  # Recipe -> check it fits -> run: the recipe's values are the run's
        arguments.check_recipe_launch(recipe)
        model, budget_gb, dataset, rewards, seed, max_steps = (
            recipe.model,
            recipe.budget_gb,
            recipe.dataset,
            recipe.rewards,
            recipe.seed,
            recipe.max_steps,
        )
        prompt_style, shared_prefix = recipe.style(), recipe.shared_prefix
        overrides = recipe.plan_settings()  # checked below as train()'s own overrides are
    elif model is None:
        raise ConfigError("train() needs a model (a name, folder or .gguf file) or config='recipe.yaml'")
    else:  # plan -> Recipe -> run
        seed, shared_prefix, stop_strings = arguments.typed_arguments(seed, shared_prefix, stop_strings)
    reward_funcs, overrides = arguments.check_arguments(max_steps, on_oom, rewards, overrides, on_stall)
    check_export(export, model)  # before the output folder is touched

    run = folder.open_run(
        model,
        output_dir,
        resume=resume,
        overwrite=overwrite,
        quiet=quiet,
        max_steps=max_steps,
        preset=preset,
        method=method,
    )
    loop = None
    try:
        if run.earlier is not None and run.earlier.preset is not None and recipe is None:  # checked in open_run
            preset, method = run.earlier.preset, None  # the rung the checkpoint was trained on (after any step down)
        shared_prefix = seam_replan(shared_prefix, run.console)
        if recipe is not None and shared_prefix != recipe.shared_prefix:
            recipe = recipe.with_overrides(shared_prefix=shared_prefix)
        inputs = prepare.load_inputs(model, dataset, reward_funcs, prompt_style, seed, skip_invalid, run.console)
        plan_kwargs = prepare.plan_kwargs(budget_gb, inputs.prompt_tokens)
        if recipe is None:  # plan -> Recipe
            the_plan = prepare.make_plan(
                inputs,
                plan_kwargs,
                method,
                preset,
                {**overrides, "shared_prefix": shared_prefix},
                run,
                quiet or run.finished,
                show_plan,
            )
        else:  # the recipe as written: the estimate of its settings against its budget
            the_plan = prepare.make_plan(
                inputs,
                plan_kwargs,
                method,
                recipe.preset,
                recipe.plan_settings(),
                run,
                quiet or run.finished,
                show_plan,
                recipe=recipe,
            )
        if run.finished:
            return TrainResult.of_finished_run(run, inputs, the_plan)
        the_recipe = _recipe(recipe, the_plan, inputs, dataset, rewards, seed, max_steps, stop_strings)
        if recipe is None and "problem_choice" in overrides:  # a trainer option, not a plan setting
            the_recipe = the_recipe.with_overrides(problem_choice=overrides["problem_choice"])
        prepare.check_context(the_plan, inputs)
        folder.check_disk(run, the_plan)

        loop = Attempts.start(
            the_plan, inputs, run, the_recipe, callbacks=callbacks, plan_kwargs=plan_kwargs, on_stall=on_stall
        )
        trainer = run_attempts(loop, plan_kwargs, on_oom=on_oom, oom_window_steps=oom_window_steps)
        result = _finish(loop, trainer, inputs, run)
    except BaseException as exc:
        if loop is not None:
            loop.record_failure(exc)
            full = folder.disk_full(exc, run, loop.plan)
            if full is not None:
                raise full from exc
        raise
    finally:
        run.release()
    if export is not None and not result.interrupted and run.state.is_main_process:
        from grpo_lite.export.after_training import export_after_training

        # after run.json says finished: a failed export keeps the trained model and says how to export it again
        result.exported = export_after_training(run.out, export, run.console, result.model, run.state.num_processes)
    return result


def _recipe(
    recipe: Recipe | None,
    the_plan: Plan,
    inputs: RunInputs,
    dataset: Any,
    rewards: Any,
    seed: int,
    max_steps: int | None,
    stop_strings: Sequence[str],
) -> Recipe:
    """The Recipe the run trains: the plan written as one (plan -> Recipe), or the recipe given, with what it
    left to the planner filled in."""
    if recipe is not None:
        return recipe.filled(the_plan)
    from grpo_lite.recipe.recipe import Recipe

    return Recipe.from_plan(
        the_plan,
        dataset=dataset,
        rewards=None if rewards is None else list(rewards),
        prompt_style=inputs.style,
        seed=seed,
        max_steps=max_steps,
        stop_strings=stop_strings,
    )


def _finish(loop: Any, trainer: Any, inputs: RunInputs, run: RunFolder) -> TrainResult:
    """Save the final model (unless interrupted), write run.json, print the summary."""
    from grpo_lite.training import build
    from grpo_lite.training.run import checkpoints

    out = run.out
    # a stop asked during the last step leaves nothing to resume: the run is finished
    interrupted = loop.interrupt_cb.requested and trainer.state.global_step < trainer.state.max_steps
    model_dir = None if interrupted else build.save_final(trainer, inputs.tokenizer, out)
    saved = checkpoints.scan(out).newest
    if interrupted:
        loop.events.append(
            {"event": "interrupted", "step": loop.done, "checkpoint": str(saved), "signal": loop.interrupt_cb.signal}
        )
    result = TrainResult(
        output_dir=out, model_dir=model_dir, plan=loop.plan, steps=loop.done, history=loop.history_cb.rows,
        peak_memory=loop.memory_cb.peak(), wall_seconds=loop.wall, interrupted=interrupted, events=loop.events,
        stop_signal=loop.interrupt_cb.signal if interrupted else None,
        model=trainer.model, tokenizer=inputs.tokenizer,
    )  # fmt: skip
    loop.write_record(status="interrupted" if interrupted else "finished", model_dir=model_dir)
    if run.state.is_main_process:
        from grpo_lite.training.report.summary import finish_report

        finish_report(result, run.console)
        if interrupted:
            run.console.print(
                f"[bold]interrupted at step {loop.done}[/bold]: checkpoint saved in {saved}. "
                f"Resume with the same command plus --resume (Python: train(..., output_dir={str(out)!r}, resume=True))"
            )
    return result
