"""train(): plan -> GRPOConfig, PEFT and bitsandbytes settings -> TRL's GRPOTrainer -> run.json.

The flow, in order: resolve the model, load its tokenizer and the dataset (prompt lengths are
measured, not assumed), plan the memory preset for the budget, load the model as the plan says,
build TRL's ``GRPOTrainer``, train, save the model or adapter and ``run.json`` atomically, and print
a summary. Around the loop: a guard against overwriting another run, resume from the latest
checkpoint, Ctrl-C that saves before it exits, and a step down the preset ladder on CUDA
out-of-memory (see :mod:`grpo_lite.training.resilience`). TRL, PEFT and bitsandbytes are imported inside the
function, never at ``import grpo_lite``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from grpo_lite.errors import ConfigError
from grpo_lite.training.attempts import OnOOM, RunFolder, RunInputs

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

    from grpo_lite.export.after_training import ExportFormat
    from grpo_lite.planning.ladder import Method

    from grpo_lite.planning.result import Plan
    from grpo_lite.data.prompts import PromptStyle

__all__ = ["DEFAULT_STOP_STRINGS", "TrainResult", "default_output_dir", "train"]

DEFAULT_STOP_STRINGS: tuple[str, ...] = ("</answer>",)  # the XML format's end: nothing after it earns a reward

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
        interrupted: True when Ctrl-C stopped the run (a checkpoint was saved; resume continues it).
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
    events: list[dict[str, Any]] = field(default_factory=list)
    model: Any = field(default=None, repr=False)
    tokenizer: Any = field(default=None, repr=False)
    exported: Any = None

    def reward_change(self, window: int = 3) -> tuple[float | None, float | None]:
        """Mean total reward over the first and the last ``window`` logged steps."""
        from grpo_lite.training.report import first_last

        return first_last(self.history, window).get("reward", (None, None))


def default_output_dir(model: str) -> Path:
    slug = Path(str(model)).name.removesuffix(".gguf").replace("/", "-") or "model"
    return Path("runs") / f"{slug}-{datetime.now():%Y%m%d-%H%M%S}"


def train(
    model: str | os.PathLike,
    budget_gb: float | None = None,
    *,
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
    callbacks: Sequence[Any] = (),
    quiet: bool = False,
    shared_prefix: bool = True,
    stop_strings: Sequence[str] = DEFAULT_STOP_STRINGS,
    export: ExportFormat | None = None,
    **overrides: Any,
) -> TrainResult:
    """Fine-tune ``model`` with GRPO on ``dataset`` under a memory plan for ``budget_gb``.

    Args:
        model: a hub id, a short name such as ``"Llama-3.2-1B-Instruct"``, a local folder, or a ``.gguf`` file.
        budget_gb: the GPU's nominal size in GB (16 for a 16 GB card), per device. None detects the
            current CUDA device; without CUDA the run uses a CPU plan.
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
        resume: continue from the latest ``checkpoint-N`` in ``output_dir`` (step count and RNG state
            continue). Default: False.
        overwrite: replace a run already in ``output_dir``. Default: False (such a folder is refused).
        on_oom: "step_down" frees memory after a CUDA out-of-memory error, moves to the next cheaper
            rung of the ladder and goes on from the weights reached; "raise" re-raises. Default: "step_down".
        oom_window_steps: step down only for an OOM within this many steps (later ones re-raise). Default: 20.
        callbacks: extra ``transformers.TrainerCallback`` objects.
        quiet: do not print the plan, the progress lines and the summary table.
        shared_prefix: forward each group's prompt once for all its completions in the log-prob passes
            (same log-probs and gradients, checked against TRL's path on the first micro-batch; off
            where unsupported, see docs/shared_prefix.md). Default: True.
        stop_strings: end a sampled completion at the first of these. Default: ``("</answer>",)``,
            the end of the XML answer format; ``()`` samples up to ``max_completion_length``.
        export: ``"gguf"`` also writes ``final.gguf`` (q8_0), ``final.Modelfile`` (Ollama) and ``final.system_prompt.txt``
            in the run folder at the end (docs/export.md); checked before training starts. Default: None.
        **overrides: any GRPOConfig / TrainingArguments field (``learning_rate=1e-5``,
            ``num_generations=4``) or LoRA setting (``lora_r``, ``lora_alpha``, ``lora_dropout``,
            ``lora_target_modules``), applied verbatim: the planner only chooses what is not fixed here.
    """
    from grpo_lite.training.attempts import Attempts, run_attempts

    _check_arguments(max_steps, on_oom, overrides)
    from grpo_lite.export.after_training import check_export

    check_export(export, model)  # before the output folder is touched
    from grpo_lite.memory.heap import use_mmap_threshold_on_cpu

    use_mmap_threshold_on_cpu()  # CPU: freed tiles go back to the system (docs/memory.md plans for it)
    run = _open_run(model, output_dir, resume=resume, overwrite=overwrite, quiet=quiet)
    if run.earlier is not None and preset is None and method is None:
        preset = run.earlier.preset  # the rung the checkpoint was trained on (after any step down)
    inputs = _load_inputs(model, dataset, rewards, prompt_style, seed, run.console)
    plan_kwargs = _plan_kwargs(budget_gb, inputs.prompt_tokens)
    the_plan = _make_plan(inputs, plan_kwargs, method, preset, {**overrides, "shared_prefix": shared_prefix}, run, quiet)
    loop = Attempts.start(the_plan, inputs, run, max_steps=max_steps, seed=seed, callbacks=callbacks,
                          trainer_options={"shared_prefix": shared_prefix, "stop_strings": tuple(stop_strings)})
    trainer = run_attempts(loop, plan_kwargs, on_oom=on_oom, oom_window_steps=oom_window_steps)
    return _finish(loop, trainer, inputs, run, export)


def process_state() -> Any:
    """accelerate's view of this process: rank, world size, main process.

    On CPU it must be asked with ``cpu=True``: otherwise accelerate ignores a torchrun launch (each
    rank would think it is alone, write run.json and record one process in the plan).
    """
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def _check_arguments(max_steps: int | None, on_oom: str, overrides: dict[str, Any]) -> None:
    """Reject bad arguments before anything is loaded."""
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ConfigError(f"max_steps must be a positive integer, got {max_steps!r}")
    if on_oom not in ("step_down", "raise"):
        raise ConfigError(f"on_oom={on_oom!r} is not valid; choose 'step_down' or 'raise'")
    taken = sorted(set(overrides) & set(_PLAN_OWNED))
    if taken:
        raise ConfigError("; ".join(f"{key} cannot be set here: {_PLAN_OWNED[key]}" for key in taken))


def _open_run(model: str | os.PathLike, output_dir: str | os.PathLike | None, *, resume: bool, overwrite: bool,
              quiet: bool) -> RunFolder:
    """Choose and guard the output folder (one for all ranks); find the checkpoint to resume from."""
    from rich.console import Console

    from grpo_lite.training import resilience

    state = process_state()
    console = Console(quiet=quiet or not state.is_main_process)
    out = Path(output_dir) if output_dir is not None else default_output_dir(str(model))
    if output_dir is None and state.num_processes > 1:  # one timestamped folder for every rank
        from accelerate.utils import broadcast_object_list

        out = Path(broadcast_object_list([str(out)], from_process=0)[0])
    if state.is_main_process:  # one process checks (and, with overwrite, clears) the folder; the rest wait
        resilience.guard_output_dir(out, resume=resume, overwrite=overwrite)
    state.wait_for_everyone()
    checkpoint = resilience.latest_checkpoint(out) if resume else None
    earlier = resilience.earlier_run(out, checkpoint) if checkpoint is not None else None
    return RunFolder(out, state, console, checkpoint, earlier)


def _load_inputs(model: str | os.PathLike, dataset: Any, rewards: Any, prompt_style: PromptStyle | None, seed: int,
                 console: Any) -> RunInputs:
    """Resolve the model, load its tokenizer and the dataset, and measure every prompt."""
    from grpo_lite import rewards as reward_lib
    from grpo_lite.data import prompts
    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.memory.models import resolve_model
    from grpo_lite.training.build import measure_prompt_tokens
    from grpo_lite.training.loading import load_tokenizer

    spec = resolve_model(model)
    if spec.note:
        console.print(f"[dim]{spec.note}[/dim]")
    reward_funcs = reward_lib.resolve_rewards(rewards)
    style = prompt_style or prompts.PromptStyle()
    tokenizer = load_tokenizer(spec.model_id)
    train_set = prompts.apply_prompt_style(load_dataset(dataset, split="train", style=style, seed=seed), tokenizer, style)
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
               overrides: dict[str, Any], run: RunFolder, quiet: bool) -> Plan:
    """plan() for this run, printed as a table on the main process."""
    from grpo_lite.planning.choose import plan

    the_plan = plan(inputs.spec, method=method, preset=preset, **plan_kwargs, **overrides)
    if not quiet and run.state.is_main_process:
        from grpo_lite.planning.tables import plan_table

        run.console.print(plan_table(the_plan))
    return the_plan


def _finish(loop: Any, trainer: Any, inputs: RunInputs, run: RunFolder, export: ExportFormat | None = None) -> TrainResult:
    """Save the final model (unless interrupted), write run.json, print the summary, export (main process)."""
    from grpo_lite.training import build, resilience

    out = run.out
    interrupted = loop.interrupt_cb.requested
    model_dir = None if interrupted else build.save_final(trainer, inputs.tokenizer, out)
    if interrupted:
        loop.events.append({"event": "interrupted", "step": loop.done,
                            "checkpoint": str(resilience.latest_checkpoint(out))})
    result = TrainResult(
        output_dir=out, model_dir=model_dir, plan=loop.plan, steps=loop.done, history=loop.history_cb.rows,
        peak_memory=loop.memory_cb.peak(), wall_seconds=loop.wall, interrupted=interrupted, events=loop.events,
        model=trainer.model, tokenizer=inputs.tokenizer,
    )  # fmt: skip
    loop.write_record(status="interrupted" if interrupted else "finished", model_dir=model_dir)
    if run.state.is_main_process:
        from grpo_lite.training.report import finish_report

        finish_report(result, run.console)
        if interrupted:
            run.console.print(
                f"[bold]interrupted at step {loop.done}[/bold]: checkpoint saved in {resilience.latest_checkpoint(out)}. "
                f"Resume with the same command plus --resume (Python: train(..., output_dir={str(out)!r}, resume=True))"
            )
        elif export is not None:
            from grpo_lite.export.after_training import export_after_training

            result.exported = export_after_training(out, export, run.console, result.model, run.state.num_processes)
    return result
