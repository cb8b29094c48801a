"""train(): plan -> Recipe -> TRL's GRPOTrainer -> run.json, or, with ``config=``, Recipe -> fits? -> the same run.

The flow, in order: resolve the model, load its tokenizer and the dataset (prompt lengths are
measured, not assumed), plan the memory preset for the budget and write it as a Recipe (or, with a
recipe, estimate the recipe's own settings and refuse it when they do not fit its budget), load the
model and build TRL's ``GRPOTrainer`` from the Recipe, train, save the model or adapter and
``run.json`` atomically, and print a summary. Before anything loads, every setting and the output folder are checked
(:mod:`grpo_lite.training.checks`). Around the loop: one run per folder (a lock), a guard against
overwriting another run, resume from the newest complete checkpoint, Ctrl-C that saves before it
exits, a step down the preset ladder on CUDA out-of-memory (see :mod:`grpo_lite.training.run.resilience`),
and a full disk reported as such. TRL, PEFT and bitsandbytes are imported inside the
function, never at ``import grpo_lite``.
"""

from __future__ import annotations

import functools
import inspect
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, cast

from grpo_lite.data.prompts import DEFAULT_STOP_STRINGS  # the XML format's end: nothing after it earns a reward
from grpo_lite.errors import ConfigError
from grpo_lite.memory.settings import SHARED_PREFIX_DEFAULT
from grpo_lite.training.report.advice import OnStall
from grpo_lite.training.run.attempts import OnOOM, RunFolder, RunInputs
from grpo_lite.training.report.quiet import quiet_libraries

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

    from grpo_lite.errors import GrpoLiteError
    from grpo_lite.export.after_training import ExportFormat
    from grpo_lite.planning.ladder import Method

    from grpo_lite.planning.result import Plan
    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.recipe.recipe import Recipe

__all__ = ["DEFAULT_STOP_STRINGS", "RECIPE_ARGUMENTS", "TrainResult", "default_output_dir", "train"]


# plan() inputs that train() decides itself: passing them as overrides is an error that says why.
_PLAN_OWNED: dict[str, str] = {
    "max_prompt_length": "train() measures the longest prompt of the dataset; shorten or filter the prompts instead",
    "device": "train() uses CUDA when torch sees a GPU, else the CPU",
    "num_processes": "set by the launcher (grpo-lite train --num-processes N, or accelerate launch)",
    "sharding": "set by the launcher (grpo-lite train --sharding, or the accelerate config)",
}


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


def default_output_dir(model: str) -> Path:
    slug = Path(str(model)).name.removesuffix(".gguf").replace("/", "-") or "model"
    return Path("runs") / f"{slug}-{datetime.now():%Y%m%d-%H%M%S}"


# train()'s arguments a recipe holds (Recipe fields of the same name); the rest of a recipe are overrides
RECIPE_ARGUMENTS = ("model", "budget_gb", "dataset", "rewards", "preset", "prompt_style", "seed", "max_steps",
                    "shared_prefix", "stop_strings")


def _recipe_with_passed_arguments(func: Callable[..., TrainResult]) -> Callable[..., TrainResult]:
    """train() with ``config=``: the recipe, then the arguments the caller wrote (:meth:`Recipe.with_arguments`).

    The call is bound to train()'s signature, so an argument written at its default still counts; train()
    itself then runs the resulting Recipe with nothing else of the recipe's passed.
    """
    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> TrainResult:
        passed = signature.bind(*args, **kwargs).arguments
        if passed.get("config") is None:
            return func(*args, **kwargs)
        from grpo_lite.recipe.recipe import Recipe

        written = {key: passed.pop(key) for key in RECIPE_ARGUMENTS if key in passed}
        recipe = Recipe.with_arguments(passed.pop("config"), {**written, **passed.pop("overrides", {})})
        return func(config=recipe, **passed)

    return wrapper


@quiet_libraries()
@_recipe_with_passed_arguments
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
            Each is checked against GRPOConfig's type and range before anything loads.

    Raises:
        ConfigError: a bad argument or setting (before anything loads). DataError, ModelError: the
            dataset or model. DoesNotFitError: no preset fits. OutputDirError: the output folder is a
            file, read-only, full or held by another run, or the disk filled up during the run.
        RewardError: a reward function returned something other than one number (or None) per completion.
    """
    from grpo_lite.training.run.attempts import Attempts, run_attempts

    recipe = cast("Recipe | None", config)  # a Recipe, the arguments passed already applied (_recipe_with_passed_arguments)
    if recipe is not None:
        _check_recipe_launch(recipe)
        model, budget_gb, dataset, rewards, seed, max_steps = (recipe.model, recipe.budget_gb, recipe.dataset,
                                                               recipe.rewards, recipe.seed, recipe.max_steps)
        prompt_style, shared_prefix = recipe.style(), recipe.shared_prefix
        overrides = recipe.plan_settings()  # checked below as train()'s own overrides are
    elif model is None:
        raise ConfigError("train() needs a model (a name, folder or .gguf file) or config='recipe.yaml'")
    else:
        from grpo_lite.recipe.values import typed

        seed, shared_prefix, stop_strings = (typed(key, value) for key, value in (
            ("seed", seed), ("shared_prefix", shared_prefix), ("stop_strings", stop_strings)))  # as a recipe's are
    reward_funcs, overrides = _check_arguments(max_steps, on_oom, rewards, overrides, on_stall)
    from grpo_lite.export.after_training import check_export

    check_export(export, model)  # before the output folder is touched
    from grpo_lite.memory.heap import use_mmap_threshold_on_cpu

    use_mmap_threshold_on_cpu()  # CPU: freed tiles go back to the system (docs/memory.md plans for it)
    run = _open_run(model, output_dir, resume=resume, overwrite=overwrite, quiet=quiet, max_steps=max_steps,
                    preset=preset, method=method)
    loop = None
    try:
        if run.earlier is not None and run.earlier.preset is not None and recipe is None:  # checked in _open_run
            preset, method = run.earlier.preset, None  # the rung the checkpoint was trained on (after any step down)
        shared_prefix = _seam_replan(shared_prefix, run.console)
        if recipe is not None and shared_prefix != recipe.shared_prefix:
            recipe = recipe.with_overrides(shared_prefix=shared_prefix)
        inputs = _load_inputs(model, dataset, reward_funcs, prompt_style, seed, skip_invalid, run.console)
        plan_kwargs = _plan_kwargs(budget_gb, inputs.prompt_tokens)
        if recipe is None:  # plan -> Recipe
            from grpo_lite.recipe.recipe import Recipe

            the_plan = _make_plan(inputs, plan_kwargs, method, preset, {**overrides, "shared_prefix": shared_prefix},
                                  run, quiet or run.finished, show_plan)
            if run.finished:
                return _already_finished(run, inputs, the_plan)
            the_recipe = Recipe.from_plan(the_plan, dataset=dataset, rewards=None if rewards is None else list(rewards),
                                          prompt_style=inputs.style, seed=seed, max_steps=max_steps,
                                          stop_strings=stop_strings)
        else:  # the recipe as written: the estimate of its settings against its budget, then the recipe runs
            the_plan = _make_plan(inputs, plan_kwargs, method, recipe.preset, recipe.plan_settings(), run,
                                  quiet or run.finished, show_plan, recipe=recipe)
            if run.finished:
                return _already_finished(run, inputs, the_plan)
            the_recipe = recipe.filled(the_plan)
        _check_context(the_plan, inputs)
        _check_disk(run, the_plan)
        loop = Attempts.start(the_plan, inputs, run, the_recipe, callbacks=callbacks, plan_kwargs=plan_kwargs,
                              on_stall=on_stall)
        trainer = run_attempts(loop, plan_kwargs, on_oom=on_oom, oom_window_steps=oom_window_steps)
        result = _finish(loop, trainer, inputs, run)
    except BaseException as exc:
        from grpo_lite.errors import GrpoLiteError

        if loop is not None:
            loop.record_failure(exc)
            full = None if isinstance(exc, GrpoLiteError) else _disk_full(exc, run, loop.plan)
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


def process_state() -> Any:
    """accelerate's view of this process: rank, world size, main process.

    On CPU it must be asked with ``cpu=True``: otherwise accelerate ignores a torchrun launch (each
    rank would think it is alone, write run.json and record one process in the plan).
    """
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def _check_recipe_launch(recipe: Recipe) -> None:
    """A recipe planned for a GPU, or for N processes, runs only there (checked before anything is loaded)."""
    import torch

    here = "cuda" if torch.cuda.is_available() else "cpu"
    if recipe.device is not None and recipe.device != here:
        raise ConfigError(f"the recipe was planned for device {recipe.device!r} but this run is on {here!r}: write it "
                          f"again for this device (grpo-lite plan {recipe.model} --device {here} --write FILE)")
    processes = process_state().num_processes
    if recipe.num_processes != processes:
        raise ConfigError(f"the recipe was planned for {recipe.num_processes} process(es) but this run has {processes}: "
                          "start it with grpo-lite train --config FILE (it launches the recipe's processes) or set "
                          "num_processes in the file")


def _seam_replan(shared_prefix: bool, console: Any) -> bool:
    """Whether the run shares prompts: not when TRL's code turns the shared prefix off
    (trl_seam.code_problems), which is said before planning, so the plan printed is the plan trained."""
    from grpo_lite.training.step.trl_seam import code_problems, seam_warning

    problems = code_problems() if shared_prefix else {}
    if not problems:
        return shared_prefix
    import trl

    console.print(f"[yellow]{seam_warning(problems, trl.__version__)}. The run is planned without the shared "
                  "prefix: the plan below is the plan trained[/yellow]", highlight=False)
    return False


def _check_arguments(max_steps: int | None, on_oom: str, rewards: Any, overrides: dict[str, Any],
                     on_stall: str = "warn") -> tuple[list[Any], dict[str, Any]]:
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
    taken = sorted(set(overrides) & set(_PLAN_OWNED))
    if taken:
        raise ConfigError("; ".join(f"{key} cannot be set here: {_PLAN_OWNED[key]}" for key in taken))
    reward_funcs = reward_lib.resolve_rewards(rewards)
    return reward_funcs, check_overrides(overrides, n_rewards=len(reward_funcs))


def _open_run(model: str | os.PathLike, output_dir: str | os.PathLike | None, *, resume: bool, overwrite: bool,
              quiet: bool, max_steps: int | None = None, preset: str | None = None,
              method: str | None = None) -> RunFolder:
    """Choose, check, lock and guard the output folder (one for all ranks); find the checkpoint to resume from.

    The main process does the checks and takes the lock; its error, if any, is raised on every rank. A resume
    is checked (same model, preset and method; steps) before anything in the folder is written.
    """
    from rich.console import Console

    from grpo_lite.errors import GrpoLiteError
    from grpo_lite.training import checks
    from grpo_lite.training.run import resilience, resume_checks, resume as resuming
    from grpo_lite.training.run.lock import RunLock

    state = process_state()
    console = Console(quiet=quiet or not state.is_main_process)
    out = Path(output_dir) if output_dir is not None else default_output_dir(str(model))
    if output_dir is None and state.num_processes > 1:  # one timestamped folder for every rank
        from accelerate.utils import broadcast_object_list

        out = Path(broadcast_object_list([str(out)], from_process=0)[0])
    run = RunFolder(out, state, console, None, None)
    error: GrpoLiteError | None = None
    if state.is_main_process:  # one process checks (and, with overwrite, clears) the folder; the rest wait
        try:
            run.created = not out.exists()
            checks.check_output_dir(out)
            run.lock = RunLock.acquire(out)
            stale = run.lock.stale_note()
            if stale and not resume:
                console.print(f"[yellow]{stale}[/yellow]")
            resilience.guard_output_dir(out, resume=resume, overwrite=overwrite)
            if resume:  # before anything is written: same model, preset, method; steps left
                run.finished, line = resume_checks.check_resume(out, model, max_steps=max_steps, preset=preset,
                                                                method=method)
                if line is not None:
                    console.print(line if run.finished else f"[yellow]{line}[/yellow]", highlight=False, soft_wrap=True)
            if resume and not run.finished:
                run.checkpoint, notes = resuming.resume_point(out, move=True)
                run.earlier = resuming.earlier_run(out, run.checkpoint, main=True)
                run.earlier.notes[:0] = ([stale] if stale else []) + notes
                for note in run.earlier.notes:
                    console.print(f"[yellow]{note}[/yellow]")
                _record_crash(out, run.earlier)
        except GrpoLiteError as exc:
            run.release()
            error = exc
    error = _shared_error(state, error)
    if error is not None:
        raise error
    if resume and not state.is_main_process:
        run.finished, _ = resume_checks.check_resume(out, model, max_steps=max_steps, preset=preset, method=method)
    if resume and (run.finished or not state.is_main_process):
        run.checkpoint, _ = resuming.resume_point(out, move=False)
        run.earlier = resuming.earlier_run(out, run.checkpoint, main=False)
    run.restore_sigterm = resilience.sigterm_raises()  # until run.release(): SIGTERM stops the run as Ctrl-C does
    return run


def _already_finished(run: RunFolder, inputs: RunInputs, the_plan: Plan) -> TrainResult:
    """The result of resuming a finished run: what run.json records; nothing trained or written."""
    from grpo_lite.training.run.resume import read_record

    record, _ = read_record(run.out, move=False)
    record = record or {}
    return TrainResult(output_dir=run.out, model_dir=run.out / "final", plan=the_plan, steps=run.earlier.reached,
                       history=run.earlier.history, peak_memory=record.get("peak_memory"),
                       wall_seconds=record.get("wall_seconds") or 0.0, events=run.earlier.events,
                       tokenizer=inputs.tokenizer, already_finished=True)


def _shared_error(state: Any, error: GrpoLiteError | None) -> GrpoLiteError | None:
    """The main process's error on every rank (the others would otherwise wait for it forever)."""
    if state.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        kind, text = broadcast_object_list([type(error).__name__ if error else None, str(error) if error else None],
                                           from_process=0)
        if error is None and kind is not None:
            from grpo_lite import errors

            error = getattr(errors, kind, errors.GrpoLiteError)(text)
    state.wait_for_everyone()
    return error


def _record_crash(out: Path, earlier: Any) -> None:
    """A run whose record said ``running`` when nobody held its lock crashed: say so in run.json now."""
    from grpo_lite.training.report.summary import write_json_atomic
    from grpo_lite.training.run.resume import read_record

    if not any(e.get("event") == "crashed" for e in earlier.events[-1:]):
        return
    record, _ = read_record(out, move=False)
    if record is not None:
        write_json_atomic(out / "run.json", {**record, "status": "crashed", "events": earlier.events})


def _load_inputs(model: str | os.PathLike, dataset: Any, reward_funcs: list[Any], prompt_style: PromptStyle | None,
                 seed: int, skip_invalid: bool, console: Any) -> RunInputs:
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


def _plan_kwargs(budget_gb: float | None, prompt_tokens: int) -> dict[str, Any]:
    """What train() decides for plan(): the device, the prompt length, the launcher's processes and sharding."""
    import torch

    from grpo_lite.scale.distributed import detect_sharding

    kwargs: dict[str, Any] = dict(
        device="cuda" if torch.cuda.is_available() else "cpu",
        max_prompt_length=prompt_tokens,
        num_processes=process_state().num_processes,
        sharding=detect_sharding(),  # what the launcher set up (zero2/zero3/fsdp), else None/ddp
    )
    if budget_gb is not None:
        kwargs["budget_gb"] = budget_gb
    return kwargs


def _make_plan(inputs: RunInputs, plan_kwargs: dict[str, Any], method: Method | None, preset: str | None,
               overrides: dict[str, Any], run: RunFolder, quiet: bool, show_plan: bool = False,
               recipe: Recipe | None = None) -> Plan:
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
        advice = (train_advice(str(exc), inputs.prompt_tokens) if recipe is None else
                  _recipe_advice(str(exc), inputs.prompt_tokens, exc.smallest_budget_gb, recipe))
        raise DoesNotFitError(advice, exc.smallest_budget_gb, exc.preset) from None
    if not quiet and run.state.is_main_process:
        from grpo_lite.planning.tables import plan_summary, plan_table

        if show_plan:
            run.console.print(plan_table(the_plan))
        else:
            run.console.print(plan_summary(the_plan), highlight=False, markup=False, soft_wrap=True)
    return the_plan


def _recipe_advice(message: str, prompt_tokens: int, smallest_gb: float | None, recipe: Recipe) -> str:
    """The planner's refusal of a recipe, with the recipe keys that make it fit (one line)."""
    cut = message.find(" Or shorten")
    budget = "" if smallest_gb is None else f"budget_gb: {smallest_gb:g} or more (on a machine that has it), "
    card = (f" --device {recipe.device}" if recipe.device is not None else "") + (
        f" --budget-gb {recipe.budget_gb:g}" if recipe.budget_gb is not None else "")
    return (f"the recipe does not fit as written: {message[:cut] if cut >= 0 else message} Change in the recipe: "
            f"{budget}a lower trl.max_completion_length or trl.num_generations (floor 4), or a cheaper preset; or "
            f"shorten the prompts (the longest is {prompt_tokens} tokens); or write a recipe that fits: "
            f"grpo-lite plan {recipe.model}{card} --write FILE")


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


def _check_context(the_plan: Plan, inputs: RunInputs) -> None:
    """Before the model loads: the longest prompt and the planned completions fit the model's context."""
    context = _context_tokens(inputs.spec, inputs.tokenizer)
    completion = the_plan.settings["max_completion_length"]
    if context is None or inputs.prompt_tokens + completion <= context:
        return
    room = context - inputs.prompt_tokens
    fix = (f"set max_completion_length={room} or lower (--set max_completion_length={room}; in a recipe, "
           f"max_completion_length: {room} under trl:; Python: max_completion_length={room}), or " if room >= 1 else "")
    raise ConfigError(f"the longest prompt ({inputs.prompt_tokens} tokens) and max_completion_length ({completion}) "
                      f"need {inputs.prompt_tokens + completion} positions; {inputs.spec.name} has a context of "
                      f"{context} tokens: {fix}shorten the prompts (drop the longest rows from the dataset)")


def _check_disk(run: RunFolder, the_plan: Plan) -> None:
    """Before the model loads: room on the disk for one checkpoint (a warning when the whole run may not fit)."""
    from grpo_lite.training.build import RUN_DEFAULTS
    from grpo_lite.training.checks import check_free_space

    if the_plan.settings.get("save_strategy", RUN_DEFAULTS["save_strategy"]) == "no":
        return
    keep = the_plan.settings.get("save_total_limit", RUN_DEFAULTS["save_total_limit"])
    note = check_free_space(run.out, the_plan, keep=keep)
    if note:
        run.console.print(f"[yellow]{note}[/yellow]")


def _disk_full(exc: BaseException, run: RunFolder, the_plan: Plan) -> Exception | None:
    """A failure caused by a full disk, as an OutputDirError that says so (None for any other failure)."""
    from grpo_lite.training.run import checkpoints
    from grpo_lite.training.run.resilience import disk_full_error

    return disk_full_error(exc, run.out, checkpoints.checkpoint_bytes(the_plan), checkpoints.scan(run.out).newest)


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
        loop.events.append({"event": "interrupted", "step": loop.done, "checkpoint": str(saved),
                            "signal": loop.interrupt_cb.signal})
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
