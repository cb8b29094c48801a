"""The training loop's attempts: build a GRPOTrainer, train, and step down the ladder on out-of-memory.

An attempt builds the trainer from the current plan and trains until the run ends. A CUDA
out-of-memory error within the first ``oom_window_steps`` steps ends the attempt instead: the weights
reached are carried (LoRA merged), the next cheaper rung that fits is planned
(:func:`grpo_lite.training.run.resilience.next_plan`, made the run's by
:func:`grpo_lite.training.run.replan.replan`) and a new attempt goes on with the steps left, its
learning-rate schedule continuing where the run was (:func:`~grpo_lite.training.run.resilience.continue_schedule`).

What is on disk at any instant: ``history.jsonl`` gets every logged step as it happens; ``run.json``
is rewritten at the start of every attempt, after every checkpoint and at the end, with its
``status``: ``running``, ``finished``, ``interrupted`` (Ctrl-C or SIGTERM, checkpoint saved), ``aborted`` (a
second one), ``failed`` (an error, a full disk), or ``crashed`` (seen by a later resume: the process died).
"""

from __future__ import annotations

import functools
import gc
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence

from grpo_lite.training.report.advice import OnStall

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.planning.result import Plan
    from grpo_lite.recipe.recipe import Recipe

__all__ = ["Attempts", "OnOOM", "OnStall", "RunFolder", "RunInputs", "run_attempts"]

OnOOM = Literal["step_down", "raise"]


@dataclass
class RunFolder:
    """Where the run writes, who is the main process, and what an earlier run left to resume."""

    out: Path
    state: Any  # accelerate.PartialState
    console: Any  # rich.console.Console
    checkpoint: Path | None
    earlier: Any  # resume.EarlierRun | None
    lock: Any = None  # runlock.RunLock on the main process, held for the run's life
    created: bool = False  # the run made the folder: an early failure leaves no empty folder behind
    finished: bool = False  # resume found the run finished with no steps left: nothing is trained or written
    restore_sigterm: Callable[[], Any] | None = None  # puts back the SIGTERM handler train() found

    def release(self) -> None:
        """Give the folder back (the main process removes its lock, and the folder if it made it and it is empty)."""
        if self.restore_sigterm is not None:
            self.restore_sigterm()
            self.restore_sigterm = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None
            if self.created:
                try:
                    self.out.rmdir()  # only when empty
                except OSError:
                    pass


@dataclass
class RunInputs:
    """The model, tokenizer, prompts and rewards of a run."""

    spec: Any  # memory.models.ModelSpec
    tokenizer: Any
    train_set: Any  # datasets.Dataset with the prompt style applied
    reward_funcs: list[Callable[..., Any]]
    style: PromptStyle
    prompt_tokens: int  # the longest prompt, measured
    context: int | None = None  # the model's context in tokens (None: no known limit)


@dataclass
class Attempts:
    """What carries from one attempt to the next: plan, weights, steps done, events, wall time."""

    plan: Plan
    inputs: RunInputs
    run: RunFolder
    source: str  # the weights the next attempt loads (the model, or weights carried after a step down)
    max_steps: int | None
    seed: int
    callbacks: Sequence[Any]
    trainer_options: dict[str, Any] = field(default_factory=dict)  # LiteGRPOTrainer's other keyword arguments
    done: int = 0
    wall: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    memory_cb: Any = None
    history_cb: Any = None
    interrupt_cb: Any = None
    own_callbacks: list[Any] = field(default_factory=list)
    resumed: dict[str, Any] | None = None  # the resume event, logged once training has really resumed
    shared_prefix_record: dict[str, Any] | None = None  # what the last trainer's log-prob forwards did
    monitor_record: dict[str, Any] = field(default_factory=dict)  # the update monitor's settings, for run.json
    recipe: Recipe | None = None  # the plan as the trainer takes it (grpo_lite.recipe); follows every step down
    fingerprint: dict[str, str] | None = None  # resume_checks.model_fingerprint of the base model
    zero_advantage_record: dict[str, Any] | None = None  # what the last trainer's zero-advantage skip saved
    health: Any = None  # health.HealthMonitor: findings over the run's logged steps, kept across attempts
    plan_kwargs: dict[str, Any] = field(default_factory=dict)  # what train() called plan() with (replan.replan)
    problem_choice_record: dict[str, Any] | None = None  # what the last trainer's problem choice did

    @classmethod
    def start(
        cls,
        plan: Plan,
        inputs: RunInputs,
        run: RunFolder,
        recipe: Recipe,
        *,
        callbacks: Sequence[Any],
        trainer_options: dict[str, Any] | None = None,
        plan_kwargs: dict[str, Any] | None = None,
        on_stall: OnStall = "warn",
    ) -> Attempts:
        """The first attempt's state, the trainer built from ``recipe`` (its seed and max_steps are the run's);
        a resumed run takes over the earlier run's steps, events and history."""
        from grpo_lite.training.report.advice import Advisor
        from grpo_lite.training.report.callbacks import HistoryCallback, MemoryCallback
        from grpo_lite.training.report.health import HealthMonitor
        from grpo_lite.training.run.checkpoints import CompletionCallback
        from grpo_lite.training.run.ranks import RankRecordCallback
        from grpo_lite.training.run.replan import replan
        from grpo_lite.training.run.resilience import InterruptCallback, SaveAtEndCallback, StopWhenDone
        from grpo_lite.training.run.resume import HISTORY_FILE
        from grpo_lite.training.run.resume_checks import model_fingerprint

        max_steps = recipe.max_steps
        loop = cls(
            plan,
            inputs,
            run,
            inputs.spec.model_id,
            max_steps,
            recipe.seed,
            callbacks,
            dict(trainer_options or {}),
            recipe=recipe,
        )
        loop.fingerprint = model_fingerprint(inputs.spec.model_id)  # a resume checks it names the same model
        loop.plan_kwargs = dict(plan_kwargs or {})
        advisor = Advisor(
            plan,
            loop.plan_kwargs,
            context=inputs.context,
            replan=functools.partial(replan, loop),
            on_decline=loop.record_decline,
        )
        loop.health = HealthMonitor(inputs.reward_funcs, report=loop.record_health, advisor=advisor, on_stall=on_stall)
        history_file = run.out / HISTORY_FILE if run.state.is_main_process else None
        loop.memory_cb, loop.history_cb, loop.interrupt_cb = (
            MemoryCallback(),
            HistoryCallback(history_file),
            InterruptCallback(),
        )
        loop.own_callbacks = [
            loop.memory_cb,
            loop.history_cb,
            loop.interrupt_cb,
            SaveAtEndCallback(),
            CompletionCallback(loop.checkpoint_record, lambda step: loop.write_record(status="running")),
            _resumed_callback(loop),
            RankRecordCallback(run.out),  # one record per rank: proves data parallelism
            StopWhenDone(),
        ]  # last: the resume event is logged before it ends a finished attempt
        earlier = run.earlier
        rows: list[dict[str, Any]] = []
        if earlier is not None:  # go on where the checkpoint's attempt started: its weights, steps, records
            loop.events, rows = earlier.events, earlier.history
            loop.source, loop.done = earlier.source or loop.source, earlier.done
            loop.max_steps = max_steps if max_steps is not None else earlier.max_steps
            loop.resumed = {
                "event": "resume",
                "checkpoint": str(run.checkpoint),
                "step": loop.done + earlier.checkpoint_step,
                **({"notes": earlier.notes} if earlier.notes else {}),
            }
        if run.state.is_main_process:
            loop.history_cb.start_file(rows)  # a resumed run's file holds exactly the steps it takes over
        else:
            loop.history_cb.rows = list(rows)
        return loop

    def build(self) -> Any:
        """GRPOConfig settings for the steps left, run.json marked running, and the trainer."""
        from grpo_lite.rewards.checked import check_rewards
        from grpo_lite.training import build
        from grpo_lite.training.report.progress import ProgressLine, replace_printer
        from grpo_lite.training.report.summary import is_step_down
        from grpo_lite.training.run import resilience

        self.settings = self.grpo_settings()
        self.write_record(status="running")
        self.history_cb.step_offset = self.done
        trainer = build.build_trainer(
            self.source,
            self.recipe,
            self.settings,
            self.inputs.train_set,
            self.inputs.tokenizer,
            check_rewards(self.inputs.reward_funcs),
            [*self.own_callbacks, *self.callbacks],
            **self.trainer_options,
        )
        if self.done > 0 and self.max_steps is not None:  # after a step down: the run's schedule goes on
            note = resilience.continue_schedule(trainer, offset=self.done, total_steps=self.max_steps)
            downs = [e for e in self.events if is_step_down(e)]
            if downs and "lr_schedule" not in downs[-1]:
                downs[-1]["lr_schedule"] = note
        self.shared_prefix_record = trainer.shared_prefix_record  # updated in place as the run goes
        self.zero_advantage_record = trainer.zero_advantage.record  # likewise
        self.problem_choice_record = trainer.problem_choice.record  # likewise: skipped problems, groups with spread
        monitor = trainer.update_monitor
        self.monitor_record = {
            "monitor": None
            if monitor is None
            else {
                "tensors": monitor.n_tensors,
                "elements_per_tensor": monitor.n_elements,
                "warn_below": monitor.warn_below,
            }
        }
        line = ProgressLine(
            self.run.console, self.inputs.reward_funcs, step_offset=self.done, total_steps=self.max_steps
        )
        replace_printer(trainer, line)  # one compact line per step; the raw dicts go to run.json and report_to
        self.health.step_offset = self.done
        self.health.advisor.plan, self.health.advisor.trainer = self.plan, trainer
        self.health.problem_choice = self.recipe.problem_choice  # the zero-spread finding names it when off
        trainer.add_callback(self.health)  # after the progress line: a finding's line follows its step's
        return trainer

    def grpo_settings(self) -> dict[str, Any]:
        """The GRPOConfig settings of the recipe for the steps left (a new seed after each step down)."""
        from grpo_lite.training import build
        from grpo_lite.training.report.summary import is_step_down

        assert self.recipe is not None
        steps_left = None if self.max_steps is None else self.max_steps - self.done
        step_downs = sum(is_step_down(e) for e in self.events)
        return build.grpo_settings(
            self.recipe, output_dir=self.run.out, seed=self.seed + step_downs, max_steps=steps_left
        )

    def plan_as_built(self, trainer: Any) -> None:
        """The plan of what the trainer runs: when it turned the shared prefix off once the model loaded (TRL's
        code differs from the seam, TRL's fused LM head differs, FSDP or ZeRO-3), or turns it off later (the first
        micro-batch's self-check, through ``trainer.on_shared_off``, at that moment), the run is planned again
        without it (:func:`~grpo_lite.training.run.replan.replan`). Shared sampling turned off alone changes no
        plan: the plan counts sampling's KV cache for every row either way.

        Raises:
            DoesNotFitError: without the shared prefix the recipe no longer fits its budget.
        """
        from grpo_lite.training.run.replan import replan

        assert self.recipe is not None
        if hasattr(trainer, "on_shared_off"):  # grpo-lite's trainer: the same rule when its self-check fails
            trainer.on_shared_off = lambda: self.plan_as_built(trainer)
        if not self.recipe.shared_prefix or trainer.shared_prefix:
            return
        record = trainer.shared_prefix_record
        seam = "shared_scoring" in (record.get("trl_seam") or {}).get("off", {})
        why = record.get("off", "turned off by the trainer")
        step = self.done + trainer.state.global_step
        replan(self, "trl_seam" if seam else "shared_prefix_off", step=step, why=why, change={"shared_prefix": False})

    def record_health(self, finding: Any) -> None:
        """A health finding: one line in the progress output, one event in run.json."""
        self.run.console.print(finding.line(), style="yellow", highlight=False, markup=False, soft_wrap=True)
        self.events.append(finding.event())
        self.write_record(status="running")

    def record_decline(self, step: int, event: dict[str, Any]) -> None:
        """``on_stall="adapt"`` could not raise the completion length: one line, one ``adapt_skipped`` event."""
        text = f"health: max_completion_length stays {event['max_completion_length']}: {event['why']}"
        self.run.console.print(text, style="yellow", highlight=False, markup=False, soft_wrap=True)
        self.events.append(event)
        self.write_record(status="running")

    def checkpoint_record(self) -> dict[str, Any]:
        """What a checkpoint's completion marker keeps of the run: enough to resume without run.json."""
        from grpo_lite.training.run.resume_checks import trained_with

        return {
            **({} if self.recipe is None else trained_with(self.recipe)),
            "preset": self.plan.preset.name,
            "source": None if self.source == self.inputs.spec.model_id else self.source,
            "done": self.done,
            "max_steps": self.max_steps,
            "events": self.events,
            "model": self.inputs.spec.model_id,
            "fingerprint": self.fingerprint,
        }

    def record_failure(self, exc: BaseException) -> None:
        """Mark run.json ``aborted`` (a second Ctrl-C or SIGTERM) or ``failed``; a full disk may refuse even that."""
        status = "aborted" if isinstance(exc, KeyboardInterrupt) else "failed"
        last = self.history_cb.rows[-1]["step"] if self.history_cb and self.history_cb.rows else self.done
        event = {"event": status, "after_step": last}
        if status == "failed":
            event["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        self.events.append(event)
        try:
            self.write_record(status=status)
        except OSError:
            pass

    def step_down(self, trainer: Any, reached: int, error: str) -> None:
        """Carry the weights reached to the next cheaper rung that fits (DoesNotFitError at the bottom)."""
        from grpo_lite.training import build
        from grpo_lite.training.run import resilience
        from grpo_lite.training.run.replan import replan

        out = self.run.out
        if self.max_steps is None:  # an epoch: keep its total, not a new epoch per attempt
            self.max_steps = self.done + trainer.state.max_steps
        lower = resilience.next_plan(self.plan, **self.plan_kwargs)  # the rung; replan() checks and records it
        carried = build.carry_weights(trainer, self.inputs.tokenizer, out / f"stepdown-{len(self.events) + 1}")
        resilience.drop_checkpoints(out)  # they hold the old rung's state; the carried weights supersede them
        self.source, self.done, self.run.checkpoint = str(carried), reached, None
        note = f"going on from the weights reached (saved in {carried})"
        replan(self, "out_of_memory", step=reached, why=error, change={"preset": lower.preset.name}, keep="fixed",
               note=note, weights=str(carried))  # fmt: skip

    def write_record(self, *, status: str, model_dir: Path | None = None) -> None:
        """Write run.json atomically (main process only)."""
        if not self.run.state.is_main_process:
            return
        from grpo_lite.training.report.summary import first_last, versions, write_json_atomic

        running = status == "running"
        plan, history_cb, memory_cb = self.plan, self.history_cb, self.memory_cb
        summary = {k: {"first": a, "last": b} for k, (a, b) in first_last(history_cb.rows).items()}
        write_json_atomic(
            self.run.out / "run.json",
            {
                "status": status,
                "model": plan.model.model_id,
                "model_fingerprint": self.fingerprint,
                "plan": plan.to_dict(),
                "settings": self.settings,
                "rewards": [getattr(f, "__name__", repr(f)) for f in self.inputs.reward_funcs],
                "prompt_style": asdict(self.inputs.style),
                "measured_prompt_tokens": self.inputs.prompt_tokens,
                "shared_prefix": self.shared_prefix_record,
                "zero_advantage": self.zero_advantage_record,
                "problem_choice": self.problem_choice_record,
                "health": None
                if self.health is None
                else {"on_stall": self.health.on_stall, "findings": [f.kind for f in self.health.found]},
                "precision": {**plan.precision, **self.monitor_record},
                "stop_strings": [] if self.recipe is None else list(self.recipe.stop_strings),
                "recipe": None if self.recipe is None else self.recipe.to_dict(),
                "steps": self.done,
                "max_steps": self.max_steps,
                "wall_seconds": None if running else round(self.wall, 2),
                "peak_memory": memory_cb.peak(),
                "planned_peak_gib": round(plan.estimate.total_gib, 3),
                "events": self.events,
                "summary": summary,
                "history": history_cb.rows,
                "per_step_memory": memory_cb.per_step,
                "versions": versions(),
                "model_dir": None if model_dir is None else str(model_dir),
            },
        )


def _resumed_callback(loop: Attempts) -> Any:
    """Logs the resume event once the trainer has loaded the checkpoint (weights, state, optimizer):
    a resume that fails before that leaves no ``resume`` event behind."""
    from transformers import TrainerCallback

    class Resumed(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
            if loop.resumed is not None:
                _schedule_at_its_step(kwargs.get("optimizer"), kwargs.get("lr_scheduler"))
                loop.events.append(loop.resumed)
                loop.resumed = None
                loop.write_record(status="running")

    return Resumed()


def _schedule_at_its_step(optimizer: Any, scheduler: Any) -> None:
    """After a checkpoint is loaded: the optimizer's learning rates are the schedule's at the step it resumes.

    The optimizer's state carries the rates its last step set; the scheduler's lambdas are this run's. They agree
    when the run goes on as planned, not when a finished run is extended (``max_steps`` raised): the old schedule
    ended at 0, so the next step would train at 0 until the scheduler steps again.
    """
    from torch.optim.lr_scheduler import LambdaLR

    scheduler = getattr(scheduler, "scheduler", scheduler)  # accelerate's wrapper, when the trainer prepared one
    if optimizer is None or type(scheduler) is not LambdaLR:  # other schedulers keep what they loaded
        return
    rates = [base * f(scheduler.last_epoch) for base, f in zip(scheduler.base_lrs, scheduler.lr_lambdas)]
    for group, rate in zip(optimizer.param_groups, rates):
        group["lr"] = rate


def run_attempts(loop: Attempts, *, on_oom: OnOOM, oom_window_steps: int) -> Any:
    """Train until the run ends, stepping down on an early CUDA out-of-memory error; return the last trainer."""
    import torch

    from grpo_lite.training.run import resilience

    while True:
        trainer = loop.build()
        loop.plan_as_built(trainer)
        checkpoint = loop.run.checkpoint
        start = time.perf_counter()
        try:
            with resilience.stop_signals_save(loop.interrupt_cb), warnings.catch_warnings():
                # TRL calls transformers' renamed is_gradient_checkpointing on every step; the rename is not ours to fix
                warnings.filterwarnings(
                    "ignore", message=".*is_gradient_checkpointing.*deprecated", category=FutureWarning
                )
                try:
                    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
                except resilience.NothingLeft:  # the checkpoint, now loaded, holds every step: nothing to train
                    pass
            loop.wall += time.perf_counter() - start
            break
        except torch.cuda.OutOfMemoryError as exc:
            loop.wall += time.perf_counter() - start
            reached = loop.done + trainer.state.global_step
            if on_oom == "raise" or reached >= oom_window_steps or loop.run.state.num_processes > 1:
                raise  # several processes: one rank cannot step down alone (the others wait in a collective)
            error = str(exc).splitlines()[0][:300]
        # Outside the except block, the traceback no longer pins the failed step's tensors.
        loop.step_down(trainer, reached, error)
        del trainer  # the failed attempt's tensors go before the next attempt allocates
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    loop.done += trainer.state.global_step  # after a resume, global_step already counts the checkpoint's steps
    return trainer
