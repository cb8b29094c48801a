"""train(): plan -> GRPOConfig, PEFT and bitsandbytes settings -> TRL's GRPOTrainer -> run.json.

The flow, in order: resolve the model, load its tokenizer and the dataset (prompt lengths are
measured, not assumed), plan the memory preset for the budget, load the model as the plan says,
build TRL's ``GRPOTrainer``, train, save the model or adapter and ``run.json`` atomically, and print
a summary. Around the loop: a guard against overwriting another run, resume from the latest
checkpoint, Ctrl-C that saves before it exits, and a step down the preset ladder on CUDA
out-of-memory (see :mod:`grpo_lite.resilience`). TRL, PEFT and bitsandbytes are imported inside the
function, never at ``import grpo_lite``.
"""

from __future__ import annotations

import gc
import json
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence

from grpo_lite.errors import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

    from grpo_lite.presets import Method, Plan
    from grpo_lite.prompts import PromptStyle

__all__ = ["TrainResult", "default_output_dir", "train"]

OnOOM = Literal["step_down", "raise"]

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

    def reward_change(self, window: int = 3) -> tuple[float | None, float | None]:
        """Mean total reward over the first and the last ``window`` logged steps."""
        from grpo_lite.report import first_last

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
        quiet: do not print the plan and the summary table.
        **overrides: any GRPOConfig / TrainingArguments field (``learning_rate=1e-5``,
            ``num_generations=4``) or LoRA setting (``lora_r``, ``lora_alpha``, ``lora_dropout``,
            ``lora_target_modules``), applied verbatim: the planner only chooses what is not fixed here.
    """
    import torch
    from accelerate import PartialState
    from rich.console import Console

    from grpo_lite import grpo_build, presets, prompts, resilience
    from grpo_lite import rewards as reward_lib
    from grpo_lite.callbacks import HistoryCallback, MemoryCallback
    from grpo_lite.data import load_dataset
    from grpo_lite.distributed import detect_sharding
    from grpo_lite.loading import load_tokenizer
    from grpo_lite.models import resolve_model

    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ConfigError(f"max_steps must be a positive integer, got {max_steps!r}")
    if on_oom not in ("step_down", "raise"):
        raise ConfigError(f"on_oom={on_oom!r} is not valid; choose 'step_down' or 'raise'")
    taken = sorted(set(overrides) & set(_PLAN_OWNED))
    if taken:
        raise ConfigError("; ".join(f"{key} cannot be set here: {_PLAN_OWNED[key]}" for key in taken))
    state = PartialState()
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
    if earlier is not None and preset is None and method is None:
        preset = earlier.preset  # the rung the checkpoint was trained on (after any step down)
    spec = resolve_model(model)
    if spec.note:
        console.print(f"[dim]{spec.note}[/dim]")
    reward_funcs = reward_lib.resolve_rewards(rewards)
    style = prompt_style or prompts.PromptStyle()

    tokenizer = load_tokenizer(spec.model_id)
    train_set = prompts.apply_prompt_style(load_dataset(dataset, split="train", style=style, seed=seed), tokenizer, style)
    prompt_tokens = grpo_build.measure_prompt_tokens(train_set, tokenizer)  # every row: TRL does not truncate
    plan_kwargs = dict(
        device="cuda" if torch.cuda.is_available() else "cpu",
        max_prompt_length=prompt_tokens,
        num_processes=state.num_processes,
        sharding=detect_sharding(),  # what the launcher set up (zero2/zero3/fsdp), else None/ddp
    )
    if budget_gb is not None:
        plan_kwargs["budget_gb"] = budget_gb
    the_plan = presets.plan(spec, method=method, preset=preset, **plan_kwargs, **overrides)
    if not quiet and state.is_main_process:
        from grpo_lite.tables import plan_table

        console.print(plan_table(the_plan))

    memory_cb, history_cb, interrupt_cb = MemoryCallback(), HistoryCallback(), resilience.InterruptCallback()
    own_callbacks = [memory_cb, history_cb, interrupt_cb, resilience.SaveAtEndCallback(), *_rank_callbacks(out)]
    events: list[dict[str, Any]] = []
    source, done, wall = spec.model_id, 0, 0.0
    if earlier is not None:  # go on where the checkpoint's attempt started: its weights, steps, records
        events, history_cb.rows = earlier.events, earlier.history
        source, done = earlier.source or source, earlier.done
        max_steps = max_steps if max_steps is not None else earlier.max_steps
        events.append({"event": "resume", "checkpoint": str(checkpoint), "step": done + earlier.checkpoint_step})
    record = _Record(out, style, reward_funcs, prompt_tokens, state.is_main_process)
    while True:
        steps_left = None if max_steps is None else max_steps - done
        step_downs = sum(e["event"] == "out_of_memory" for e in events)  # a new seed after each step down
        settings = grpo_build.grpo_settings(the_plan, output_dir=out, seed=seed + step_downs, max_steps=steps_left)
        record.write(the_plan, settings, history_cb, memory_cb, events, status="running", steps=done, max_steps=max_steps)
        trainer = grpo_build.build_trainer(
            source, the_plan, settings, train_set, tokenizer, reward_funcs, [*own_callbacks, *callbacks]
        )
        history_cb.step_offset = done
        start = time.perf_counter()
        try:
            with resilience.sigint_saves(interrupt_cb), warnings.catch_warnings():
                # TRL calls transformers' renamed is_gradient_checkpointing on every step; the rename is not ours to fix
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*deprecated", category=FutureWarning)
                trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
            wall += time.perf_counter() - start
            break
        except torch.cuda.OutOfMemoryError as exc:
            wall += time.perf_counter() - start
            reached = done + trainer.state.global_step
            if on_oom == "raise" or reached >= oom_window_steps or state.num_processes > 1:
                raise  # several processes: one rank cannot step down alone (the others wait in a collective)
            error = str(exc).splitlines()[0][:300]
        # Outside the except block, the traceback no longer pins the failed step's tensors.
        if max_steps is None:  # an epoch: keep its total, not a new epoch per attempt
            max_steps = done + trainer.state.max_steps
        lower = resilience.next_plan(the_plan, **plan_kwargs)  # DoesNotFitError at the bottom rung
        carried = grpo_build.carry_weights(trainer, tokenizer, out / f"stepdown-{len(events) + 1}")
        resilience.drop_checkpoints(out)  # they hold the old rung's state; the carried weights supersede them
        del trainer
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        events.append(
            {"event": "out_of_memory", "step": reached, "from_preset": the_plan.preset.name,
             "to_preset": lower.preset.name, "error": error, "weights": str(carried)}
        )  # fmt: skip
        console.print(
            f"[yellow]out of GPU memory at step {reached} on preset {the_plan.preset.name!r}: stepping down "
            f"to {lower.preset.name!r} and going on from the weights reached (saved in {carried})[/yellow]"
        )
        the_plan, source, done, checkpoint = lower, str(carried), reached, None

    done += trainer.state.global_step  # after a resume, global_step already counts the checkpoint's steps
    interrupted = interrupt_cb.requested
    model_dir = None if interrupted else grpo_build.save_final(trainer, tokenizer, out)
    if interrupted:
        events.append({"event": "interrupted", "step": done, "checkpoint": str(resilience.latest_checkpoint(out))})
    result = TrainResult(
        output_dir=out, model_dir=model_dir, plan=the_plan, steps=done, history=history_cb.rows,
        peak_memory=memory_cb.peak(), wall_seconds=wall, interrupted=interrupted, events=events,
        model=trainer.model, tokenizer=tokenizer,
    )  # fmt: skip
    record.write(the_plan, settings, history_cb, memory_cb, events, status="interrupted" if interrupted else "finished",
                 steps=done, max_steps=max_steps, wall=wall, model_dir=model_dir)  # fmt: skip
    if state.is_main_process:
        from grpo_lite.report import finish_report

        finish_report(result, console)
        if interrupted:
            console.print(
                f"[bold]interrupted at step {done}[/bold]: checkpoint saved in {resilience.latest_checkpoint(out)}. "
                f"Resume with the same command plus --resume (Python: train(..., output_dir={str(out)!r}, resume=True))"
            )
    return result


def _rank_callbacks(out: Path) -> list[Any]:
    """One callback per process that records rank, world size and steps (proves data parallelism)."""
    from grpo_lite.rank_records import RankRecordCallback

    return [RankRecordCallback(out)]


@dataclass
class _Record:
    """Writes run.json (atomically) at the start of each attempt and at the end."""

    out: Path
    style: Any
    reward_funcs: Sequence[Any]
    prompt_tokens: int
    main: bool

    def write(self, plan: Plan, settings: dict[str, Any], history_cb: Any, memory_cb: Any, events: list, *,
              status: str, steps: int, max_steps: int | None, wall: float | None = None,
              model_dir: Path | None = None) -> None:  # fmt: skip
        if not self.main:
            return
        from grpo_lite.report import first_last, versions, write_json_atomic

        summary = {k: {"first": a, "last": b} for k, (a, b) in first_last(history_cb.rows).items()}
        write_json_atomic(
            self.out / "run.json",
            {
                "status": status,
                "model": plan.model.model_id,
                "plan": plan.to_dict(),
                "settings": settings,
                "rewards": [getattr(f, "__name__", repr(f)) for f in self.reward_funcs],
                "prompt_style": asdict(self.style),
                "measured_prompt_tokens": self.prompt_tokens,
                "steps": steps,
                "max_steps": max_steps,
                "wall_seconds": None if wall is None else round(wall, 2),
                "peak_memory": memory_cb.peak(),
                "planned_peak_gib": round(plan.estimate.total_gib, 3),
                "events": events,
                "summary": summary,
                "history": history_cb.rows,
                "per_step_memory": memory_cb.per_step,
                "versions": versions(),
                "model_dir": None if model_dir is None else str(model_dir),
            },
        )
