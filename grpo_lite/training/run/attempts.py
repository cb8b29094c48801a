"""The training loop's attempts: build a GRPOTrainer, train, and step down the ladder on out-of-memory.

An attempt builds the trainer from the current plan and trains until the run ends. A CUDA
out-of-memory error within the first ``oom_window_steps`` steps ends the attempt instead: the weights
reached are carried (LoRA merged), the next cheaper rung that fits is planned
(:func:`grpo_lite.training.run.resilience.next_plan`) and a new attempt goes on with the steps left, its
learning-rate schedule continuing where the run was (:func:`~grpo_lite.training.run.resilience.continue_schedule`).

What is on disk at any instant: ``history.jsonl`` gets every logged step as it happens; ``run.json``
is rewritten at the start of every attempt, after every checkpoint and at the end, with its
``status``: ``running``, ``finished``, ``interrupted`` (Ctrl-C or SIGTERM, checkpoint saved), ``aborted`` (a
second one), ``failed`` (an error, a full disk), or ``crashed`` (seen by a later resume: the process died).
"""

from __future__ import annotations

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
        advisor = Advisor(plan, plan_kwargs or {}, on_adapt=loop.record_adapt)
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
        from grpo_lite.training.run import resilience

        steps_left = None if self.max_steps is None else self.max_steps - self.done
        step_downs = sum(e["event"] == "out_of_memory" for e in self.events)  # a new seed after each step down
        assert self.recipe is not None
        self.settings = build.grpo_settings(
            self.recipe, output_dir=self.run.out, seed=self.seed + step_downs, max_steps=steps_left
        )
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
            downs = [e for e in self.events if e["event"] == "out_of_memory"]
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

    def plan_as_built(self, trainer: Any, plan_kwargs: dict[str, Any]) -> None:
        """The plan of what the trainer runs: when it turned the shared prefix off once the model loaded (TRL's
        fused LM head differs, FSDP or ZeRO-3), or turns it off later (the first micro-batch's self-check, through
        ``trainer.on_shared_off``, at that moment), the recipe is estimated again without it (the same settings
        otherwise) and the run says so, on the console and as a ``replanned`` event in run.json. Shared sampling
        turned off alone changes no plan: the plan counts sampling's KV cache for every row either way.

        Raises:
            DoesNotFitError: without the shared prefix the recipe no longer fits its budget.
        """
        assert self.recipe is not None
        if hasattr(trainer, "on_shared_off"):  # grpo-lite's trainer: the same rule when its self-check fails
            trainer.on_shared_off = lambda: self.plan_as_built(trainer, plan_kwargs)
        if not self.recipe.shared_prefix or trainer.shared_prefix:
            return
        from grpo_lite.errors import DoesNotFitError
        from grpo_lite.planning.choose import plan

        why = trainer.shared_prefix_record.get("off", "turned off by the trainer")
        recipe = self.recipe.with_overrides(shared_prefix=False)
        budget = {} if self.plan.budget_gb is None else {"budget_gb": self.plan.budget_gb}  # not the RAM left now
        try:
            lower = plan(
                self.plan.model, preset=self.plan.preset.name, **{**plan_kwargs, **budget}, **recipe.plan_settings()
            )
        except DoesNotFitError as exc:
            raise DoesNotFitError(
                f"the shared prefix is off ({why}), and without it the run does not fit: {exc}",
                exc.smallest_budget_gb,
                exc.preset,
            ) from None
        event = {
            "event": "replanned",
            "reason": f"shared prefix off: {why}",
            "from_peak_gib": round(self.plan.estimate.total_gib, 3),
            "to_peak_gib": round(lower.estimate.total_gib, 3),
        }
        self.plan, self.recipe = lower, recipe.filled(lower)
        if self.health is not None:
            self.health.advisor.plan = lower  # on_stall="adapt" re-plans from the plan trained
        self.events.append(event)
        self.run.console.print(
            f"[yellow]the shared prefix is off ({why}): the run is planned again without it, "
            f"peak {event['from_peak_gib']:.2f} -> {event['to_peak_gib']:.2f} GiB[/yellow]",
            highlight=False,
        )
        self.write_record(status="running")

    def record_health(self, finding: Any) -> None:
        """A health finding: one line in the progress output, one event in run.json."""
        self.run.console.print(finding.line(), style="yellow", highlight=False, markup=False, soft_wrap=True)
        self.events.append(finding.event())
        self.write_record(status="running")

    def record_adapt(self, step: int, new_plan: Plan | None, event: dict[str, Any]) -> None:
        """``on_stall="adapt"`` changed the completion length at a checkpoint (or could not): line, event, plan."""
        if new_plan is not None:
            self.plan = new_plan
            self.recipe = self.recipe.replanned(new_plan) if self.recipe is not None else None
            old, new = event["max_completion_length"]
            text = (
                f"health: adapted at step {step} (a checkpoint): max_completion_length {old} -> {new}, which the "
                f"plan fits with every other setting unchanged (peak {event['planned_peak_gib']} GiB); a resume "
                f"needs {event['resume_with']}"
            )
        else:
            text = f"health: max_completion_length stays {event['max_completion_length']}: {event['why']}"
        self.run.console.print(text, style="yellow", highlight=False, markup=False, soft_wrap=True)
        self.events.append(event)
        self.write_record(status="running")

    def checkpoint_record(self) -> dict[str, Any]:
        """What a checkpoint's completion marker keeps of the run: enough to resume without run.json."""
        return {
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

    def step_down(self, trainer: Any, reached: int, error: str, plan_kwargs: dict[str, Any]) -> None:
        """Carry the weights reached to the next cheaper rung that fits (DoesNotFitError at the bottom)."""
        from grpo_lite.training import build
        from grpo_lite.training.run import resilience

        out = self.run.out
        if self.max_steps is None:  # an epoch: keep its total, not a new epoch per attempt
            self.max_steps = self.done + trainer.state.max_steps
        lower = resilience.next_plan(self.plan, **plan_kwargs)
        carried = build.carry_weights(trainer, self.inputs.tokenizer, out / f"stepdown-{len(self.events) + 1}")
        resilience.drop_checkpoints(out)  # they hold the old rung's state; the carried weights supersede them
        self.events.append(
            {"event": "out_of_memory", "step": reached, "from_preset": self.plan.preset.name,
             "to_preset": lower.preset.name, "error": error, "weights": str(carried)}
        )  # fmt: skip
        self.run.console.print(
            f"[yellow]out of GPU memory at step {reached} on preset {self.plan.preset.name!r}: stepping down "
            f"to {lower.preset.name!r} and going on from the weights reached (saved in {carried})[/yellow]"
        )
        self.plan, self.source, self.done, self.run.checkpoint = lower, str(carried), reached, None
        self.recipe = self.recipe.replanned(lower) if self.recipe is not None else None

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
                loop.events.append(loop.resumed)
                loop.resumed = None
                loop.write_record(status="running")

    return Resumed()


def run_attempts(loop: Attempts, plan_kwargs: dict[str, Any], *, on_oom: OnOOM, oom_window_steps: int) -> Any:
    """Train until the run ends, stepping down on an early CUDA out-of-memory error; return the last trainer."""
    import torch

    from grpo_lite.training.run import resilience

    while True:
        trainer = loop.build()
        loop.plan_as_built(trainer, plan_kwargs)
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
        loop.step_down(trainer, reached, error, plan_kwargs)
        del trainer  # the failed attempt's tensors go before the next attempt allocates
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    loop.done += trainer.state.global_step  # after a resume, global_step already counts the checkpoint's steps
    return trainer
