"""The training loop's attempts: build a GRPOTrainer, train, and step down the ladder on out-of-memory.

An attempt trains until the run ends; a CUDA out-of-memory error within the first ``oom_window_steps`` steps ends
it instead: the weights reached are carried (LoRA merged), the next cheaper rung that fits is planned
(:func:`~grpo_lite.training.replan.next_plan`, :func:`~grpo_lite.training.replan.replan`) and a new attempt
goes on with the steps left, its learning-rate schedule where the run was (:func:`continue_schedule`).
``history.jsonl`` gets every logged step as it happens; ``run.json`` is rewritten at the start of every attempt,
after every checkpoint and at the end, its ``status`` one of ``running``, ``finished``, ``interrupted``, ``aborted``,
``failed`` or ``crashed`` (their meaning: docs/troubleshooting.md).
"""

from __future__ import annotations

import functools
import gc
import inspect
import signal
import time
import uuid
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from grpo_lite.errors import spelled
from grpo_lite.files import write_json as write_json_atomic
from grpo_lite.recipe.departures import departures
from grpo_lite.rewards.checked import check_rewards
from grpo_lite.rewards.registry import reward_name
from grpo_lite.run_record import is_step_down
from grpo_lite.settings import OnOOM, OnStall
from grpo_lite.training import build, replan
from grpo_lite.training.report.summary import first_last, versions
from grpo_lite.training.run.ranks import _clear_records, error_line, failure_fields, read_rank_records

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan
    from grpo_lite.recipe.recipe import Recipe
    from grpo_lite.training.prepare import RunInputs
    from grpo_lite.training.run.folder import RunFolder


@dataclass
class Watchers:
    """grpo-lite's own callbacks, built once and handed to every attempt's trainer (their state spans the run)."""

    memory: Any  # MemoryCallback: the peak and per-step memory
    history: Any  # HistoryCallback: history.jsonl, the logged rows
    interrupt: Any  # InterruptCallback: the stop signal asked for
    rank: Any  # RankRecordCallback: this rank's record, with its error when it fails
    health: Any  # HealthMonitor: findings over the run's logged steps
    callbacks: list[Any]  # all of grpo-lite's, in the order the trainer calls them (health is added last, per attempt)


@dataclass
class Attempts:
    """What carries from one attempt to the next: plan, recipe, weights, steps done, events, wall time."""

    plan: Plan
    inputs: RunInputs
    run: RunFolder
    recipe: Recipe  # the plan as the trainer takes it (``asked`` filled by ``plan``); follows every re-plan
    asked: Recipe  # the user's recipe, with the changes the run made to it: a re-plan fills it with its plan
    source: str  # the weights the next attempt loads (the model, or weights carried after a step down)
    max_steps: int | None
    callbacks: Sequence[Any]  # the caller's
    plan_kwargs: dict[str, Any]  # what train() called plan() with (replan)
    done: int = 0
    wall: float = 0.0
    events: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # the GRPOConfig settings of the attempt
    fingerprint: dict[str, str] | None = None  # resume.model_fingerprint of the base model
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])  # in run.json and every checkpoint's marker
    resumed: dict[str, Any] | None = None  # the resume event, logged once training has really resumed
    watch: Watchers = field(init=False)  # built by start()
    # what the last trainer did, for run.json: shared_prefix, zero_advantage, precision (updated in place as it runs)
    records: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def start(
        cls,
        plan: Plan,
        inputs: RunInputs,
        run: RunFolder,
        recipe: Recipe,
        *,
        asked: Recipe,
        callbacks: Sequence[Any],
        plan_kwargs: dict[str, Any] | None = None,
        on_stall: OnStall = "warn",
    ) -> Attempts:
        """The first attempt's state (the recipe's seed and max_steps are the run's); a resumed run takes over the
        earlier run's steps, events and history."""
        from grpo_lite.training.report.advice import Advisor
        from grpo_lite.training.report.callbacks import HistoryCallback, MemoryCallback, RankRecordCallback
        from grpo_lite.training.report.health import HealthMonitor
        from grpo_lite.training.run.checkpoints import CompletionCallback
        from grpo_lite.training.run.resilience import InterruptCallback, SaveAtEndCallback, StopWhenDone
        from grpo_lite.training.run.resume import HISTORY_FILE, model_fingerprint

        model_id = inputs.spec.model_id
        loop = cls(plan, inputs, run, recipe, asked, model_id, recipe.max_steps, callbacks, dict(plan_kwargs or {}))
        loop.fingerprint = model_fingerprint(model_id)  # a resume checks it names the same model
        advisor = Advisor(
            plan, loop.plan_kwargs, context=inputs.context, replan=functools.partial(replan.replan, loop),
            on_decline=loop.record_decline,
        )  # fmt: skip
        health = HealthMonitor(inputs.reward_funcs, report=loop.record_health, advisor=advisor, on_stall=on_stall)
        memory, interrupt, rank = MemoryCallback(), InterruptCallback(), RankRecordCallback(run.out)
        _clear_records(run.out, rank=run.state.process_index)  # an earlier run's error would name a wrong cause
        history = HistoryCallback(run.out / HISTORY_FILE if run.state.is_main_process else None)
        callbacks = [
            memory, history, interrupt, SaveAtEndCallback(),
            CompletionCallback(loop.checkpoint_record, lambda step: loop.write_record(status="running")),
            _resumed_callback(loop), rank,  # one record per rank: proves data parallelism
            StopWhenDone(),  # last: the resume event is logged before it ends a finished attempt
        ]  # fmt: skip
        loop.watch = watch = Watchers(memory, history, interrupt, rank, health, callbacks)
        earlier = run.earlier
        rows: list[dict[str, Any]] = []
        if earlier is not None:  # go on where the checkpoint's attempt started: its weights, steps, records
            loop.events, rows = earlier.events, earlier.history
            loop.run_id = earlier.run_id or loop.run_id  # the same run: its checkpoints stay its own
            loop.source, loop.done = earlier.source or loop.source, earlier.done
            loop.max_steps = loop.max_steps if loop.max_steps is not None else earlier.max_steps
            loop.resumed = {"event": "resume", "checkpoint": str(run.checkpoint), "step": earlier.reached}
            loop.resumed.update({"notes": earlier.notes} if earlier.notes else {})
        watch.history.start_file(rows)  # a resumed run's file holds exactly the steps it takes over
        return loop

    def build(self) -> Any:
        """GRPOConfig settings for the steps left, run.json marked running, and the trainer."""
        from grpo_lite.training.report.progress import ProgressLine, replace_printer

        watch = self.watch
        self.settings = self.grpo_settings()
        self.write_record(status="running")
        watch.history.step_offset = self.done
        trainer = build.build_trainer(
            self.source, self.recipe, self.settings, self.inputs.train_set, self.inputs.tokenizer,
            check_rewards(self.inputs.reward_funcs), [*watch.callbacks, *self.callbacks],
            reward_processing_classes=self.inputs.reward_processing_classes,
        )  # fmt: skip
        if self.done > 0 and self.max_steps is not None:  # after a step down: the run's schedule goes on
            note = continue_schedule(trainer, offset=self.done, total_steps=self.max_steps)
            downs = [e for e in self.events if is_step_down(e)]
            if downs and "lr_schedule" not in downs[-1]:
                downs[-1]["lr_schedule"] = note
        m = trainer.update_monitor
        self.records = {
            "shared_prefix": trainer.shared_prefix_record,
            "zero_advantage": trainer.zero_advantage.record,
            "precision": {
                "monitor": m
                and {"tensors": m.n_tensors, "elements_per_tensor": m.n_elements, "warn_below": m.warn_below}
            },
        }
        line = ProgressLine(
            self.run.console, self.inputs.reward_funcs, step_offset=self.done, total_steps=self.max_steps
        )
        replace_printer(trainer, line)  # one compact line per step; the raw dicts go to run.json and report_to
        watch.health.step_offset = self.done
        watch.health.advisor.plan, watch.health.advisor.trainer = self.plan, trainer
        trainer.add_callback(watch.health)  # after the progress line: a finding's line follows its step's
        return trainer

    def grpo_settings(self) -> dict[str, Any]:
        """The GRPOConfig settings of the recipe for the steps left (a new seed after each step down)."""
        steps_left = None if self.max_steps is None else self.max_steps - self.done
        seed = self.recipe.seed + sum(is_step_down(e) for e in self.events)
        return build.grpo_settings(self.recipe, output_dir=self.run.out, seed=seed, max_steps=steps_left)

    def plan_as_built(self, trainer: Any) -> None:
        """When the trainer turned the shared prefix off once the model loaded (the TRL seam, FSDP or ZeRO-3), or
        its first self-check failed (the attempt ended with ``SharedPrefixOff``), the run is planned again without
        it (shared sampling alone changes no plan). With one process a failed self-check ends the attempt; with
        several (one rank alone cannot), the trainer goes on with TRL's forward.

        Raises:
            DoesNotFitError: without the shared prefix the recipe no longer fits its budget.
        """
        if hasattr(trainer, "stop_when_shared_off"):  # grpo-lite's trainer
            trainer.stop_when_shared_off = self.run.state.num_processes == 1
        if not self.recipe.shared_prefix or trainer.shared_prefix:
            return
        record = trainer.shared_prefix_record
        seam = "shared_scoring" in (record.get("trl_seam") or {}).get("off", {})
        why = record.get("off", "turned off by the trainer")
        step = self.done + trainer.state.global_step
        replan.replan(
            self, "trl_seam" if seam else "shared_prefix_off", step=step, why=why, change={"shared_prefix": False}
        )

    def say(self, line: str, event: dict[str, Any]) -> None:
        """One line in the progress output, one event in run.json; what they say to change in the command's spelling
        (:func:`~grpo_lite.errors.spelled`)."""
        self.run.console.print(spelled(line), style="yellow", highlight=False, markup=False, soft_wrap=True)
        self.events.append({key: spelled(value) if isinstance(value, str) else value for key, value in event.items()})
        self.write_record(status="running")

    def record_health(self, finding: Any) -> None:
        self.say(finding.line(), finding.event())

    def record_decline(self, step: int, event: dict[str, Any]) -> None:
        """``on_stall="adapt"`` could not raise the completion length (an ``adapt_skipped`` event)."""
        self.say(f"health: max_completion_length stays {event['max_completion_length']}: {event['why']}", event)

    def checkpoint_record(self) -> dict[str, Any]:
        """What a checkpoint's completion marker keeps of the run: enough to resume without run.json."""
        from grpo_lite.training.run.resume import trained_with

        return {
            **trained_with(self.recipe, self.inputs.answer_kind),
            "preset": self.plan.preset.name,
            "source": None if self.source == self.inputs.spec.model_id else self.carried(),
            "done": self.done,
            "max_steps": self.max_steps,
            "events": self.events,
            "model": self.inputs.spec.model_id,
            "fingerprint": self.fingerprint,
            "run_id": self.run_id,
        }

    def carried(self) -> str:
        """The weights this attempt started from as a record names them: a ``stepdown-N`` of the run folder by its
        name (a run moved or copied loads its own), any other folder by its path."""
        source = Path(self.source)
        return source.name if source.parent == self.run.out else self.source

    def record_failure(self, exc: BaseException) -> None:
        """Mark run.json ``aborted`` (a second Ctrl-C, SIGTERM or SIGHUP), ``interrupted`` (one, before the training
        loop: nothing to finish or save) or ``failed``; a full disk may refuse even that. A failed event names the
        error of the rank that failed first (:meth:`failed_fields`)."""
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C's own, or resilience.Aborted (SIGTERM, SIGHUP, a second one)
            status = "aborted" if getattr(exc, "again", False) else "interrupted"
        else:
            status = "failed"
        last = self.watch.history.rows[-1]["step"] if self.watch.history.rows else self.done
        event: dict[str, Any] = {"event": status, "after_step": last}
        if status == "interrupted":
            event["signal"] = signal.Signals(getattr(exc, "signum", signal.SIGINT)).name
        if status == "failed":
            event.update(self.failed_fields(exc))
        self.events.append(event)
        try:
            self.write_record(status=status)
        except OSError:
            pass

    def failed_fields(self, exc: BaseException) -> dict[str, str]:
        """Record this rank's error in its rank record (every rank), then, on the main process, what the failed event
        says: the error of the rank that failed first (another rank's, when this one's collective failed after it)
        and, for an out-of-memory error, what to change (:func:`~grpo_lite.training.run.ranks.failure_fields`)."""
        import torch  # heavy: torch (loaded by the attempt already)

        error, state = error_line(exc), self.run.state
        advice = spelled(replan.OOM_ADVICE) if isinstance(exc, torch.cuda.OutOfMemoryError) else None
        try:
            self.watch.rank.record_failure(error, advice, rank=state.process_index, world_size=state.num_processes)
            records = read_rank_records(self.run.out) if state.is_main_process else []
        except (OSError, ValueError):  # a full disk, a record cut off: the event says this rank's own error
            records = []
        return failure_fields(records, error, advice)

    def step_down(self, trainer: Any, reached: int, error: str) -> None:
        """Carry the weights reached to the next cheaper rung that fits (DoesNotFitError at the bottom)."""
        from grpo_lite.training.run.checkpoints import drop_checkpoints, mark_complete

        out, name = self.run.out, f"stepdown-{len(self.events) + 1}"
        if self.max_steps is None:  # an epoch: keep its total, not a new epoch per attempt
            self.max_steps = self.done + trainer.state.max_steps
        lower = replan.next_plan(self.plan, **self.plan_kwargs)  # the rung; replan() checks and records it
        carried = build.carry_weights(trainer, self.inputs.tokenizer, out / name)
        self.source, self.done, self.run.checkpoint = str(carried), reached, None
        note = f"going on from the weights reached (saved in {carried})"
        replan.replan(self, "out_of_memory", step=reached, why=error, change={"preset": lower.preset.name}, keep="fixed",
               note=note, weights=name)  # fmt: skip  # relative to the run folder: a copy of the run loads its own
        mark_complete(carried, self.checkpoint_record())  # a resume goes on from here until the next checkpoint
        drop_checkpoints(out)  # they hold the old rung's state; the carried weights supersede them

    def write_record(self, *, status: str, model_dir: Path | None = None) -> None:
        """Write run.json atomically (main process only)."""
        if not self.run.state.is_main_process:
            return
        running = status == "running"
        plan, history, memory, health = self.plan, self.watch.history, self.watch.memory, self.watch.health
        summary = {k: {"first": a, "last": b} for k, (a, b) in first_last(history.rows).items()}
        write_json_atomic(
            self.run.out / "run.json",
            {
                "status": status,
                "run_id": self.run_id,
                "model": plan.model.model_id,
                "model_fingerprint": self.fingerprint,
                "plan": plan.to_dict(),
                "settings": self.settings,
                "trl_differences": [d.to_dict() for d in departures(self.recipe.trl, written=plan.fixed, plan=plan)],
                "rewards": [reward_name(f) for f in self.inputs.reward_funcs],
                "prompt_style": asdict(self.inputs.style),
                "answer_kind": self.inputs.answer_kind,
                "measured_prompt_tokens": self.inputs.prompt_tokens,
                "shared_prefix": self.records.get("shared_prefix"),
                "zero_advantage": self.records.get("zero_advantage"),
                "health": health and {"on_stall": health.on_stall, "findings": [f.kind for f in health.found]},
                "precision": {**plan.precision, **self.records.get("precision", {})},
                "stop_strings": list(self.recipe.stop_strings),
                "recipe": self.recipe.to_dict(),
                "steps": self.done,
                "max_steps": self.max_steps,
                "wall_seconds": None if running else round(self.wall, 2),
                "peak_memory": memory.peak(),
                "planned_peak_gib": round(plan.estimate.total_gib, 3),
                "events": self.events,
                "summary": summary,
                "history": history.rows,
                "per_step_memory": memory.per_step,
                "versions": versions(),
                "model_dir": None if model_dir is None else str(model_dir),
            },
        )


def _resumed_callback(loop: Attempts) -> Any:
    """Logs the resume event once the trainer has loaded the checkpoint: a resume that fails before leaves none."""
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
    """After a checkpoint is loaded: the optimizer's learning rates are the schedule's at the step it resumes (they
    differ when a finished run is extended: the old schedule ended at 0)."""
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
    from grpo_lite.training.step.grpo_trainer import SharedPrefixOff

    carried: dict[str, Any] = {}  # the failed self-check, kept in run.json's record by the next attempt
    while True:
        trainer = loop.build()
        trainer.shared_prefix_record.update(carried)
        loop.plan_as_built(trainer)
        checkpoint = loop.run.checkpoint  # None, a checkpoint-N, or a stepdown-N (its weights are loop.source)
        if checkpoint is not None and checkpoint.name.startswith("stepdown-"):
            checkpoint = None
        start = time.perf_counter()
        try:
            with resilience.stop_signals_save(loop.watch.interrupt):  # quiet_libraries() filters TRL's noise
                try:
                    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
                except resilience.NothingLeft:  # the checkpoint, now loaded, holds every step: nothing to train
                    pass
            loop.wall += time.perf_counter() - start
            break
        except SharedPrefixOff:  # the step starts again in the next attempt, planned without the shared prefix
            loop.wall += time.perf_counter() - start
            carried = {k: v for k, v in trainer.shared_prefix_record.items() if k in ("requested", "off", "self_check")}
            next_attempt: Callable[[Any], None] = loop.plan_as_built
        except torch.cuda.OutOfMemoryError as exc:
            loop.wall += time.perf_counter() - start
            reached = loop.done + trainer.state.global_step
            if on_oom == "raise" or reached >= oom_window_steps or loop.run.state.num_processes > 1:
                raise  # several processes: one rank cannot step down alone (the others wait in a collective)
            error = str(exc).splitlines()[0][:300]
            next_attempt = functools.partial(loop.step_down, reached=reached, error=error)
        # Outside the except block, the traceback no longer pins the failed step's tensors.
        next_attempt(trainer)
        del trainer  # the failed attempt's tensors go before the next attempt allocates
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    loop.done += trainer.state.global_step  # after a resume, global_step already counts the checkpoint's steps
    return trainer


def continue_schedule(trainer: Any, *, offset: int, total_steps: int) -> str:
    """Make ``trainer``'s learning-rate schedule the whole run's (warmup and decay over ``total_steps``) read
    ``offset`` steps ahead, instead of warming up again after a step down; through ``create_scheduler``, the method
    transformers documents to override (this trainer's only). Returns what run.json says about the schedule
    (``"continues at step 2 of 6"``, or why it restarts)."""
    from torch.optim.lr_scheduler import LambdaLR  # heavy: torch
    from transformers import Trainer
    from transformers.optimization import get_scheduler

    args = trainer.args
    if list(inspect.signature(Trainer.create_scheduler).parameters)[:3] != ["self", "num_training_steps", "optimizer"]:
        note = "restarts: transformers' Trainer.create_scheduler is not the one grpo-lite knows"
        warnings.warn(f"the learning-rate schedule {note}", stacklevel=2)
        return note
    kind = str(getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type))
    if kind == "reduce_lr_on_plateau" or "layerwise" in str(getattr(args.optim, "value", args.optim)):
        return f"restarts: a {kind} schedule (or a layer-wise optimizer's) cannot start at a later step"

    def create_scheduler(num_training_steps: int, optimizer: Any = None) -> Any:
        if trainer.lr_scheduler is None:
            optimizer = optimizer if optimizer is not None else trainer.optimizer
            whole = get_scheduler(
                args.lr_scheduler_type,
                optimizer=optimizer,
                num_warmup_steps=args.get_warmup_steps(total_steps),
                num_training_steps=total_steps,
                scheduler_specific_kwargs=args.lr_scheduler_kwargs,
            )
            if type(whole) is LambdaLR:
                trainer.lr_scheduler = LambdaLR(optimizer, [_shifted(f, offset) for f in whole.lr_lambdas])
            else:  # pragma: no cover - a transformers release whose schedulers are not LambdaLR
                warnings.warn(
                    f"the {kind} learning-rate schedule is not a LambdaLR: it starts at step 0 of the whole "
                    f"run's schedule instead of step {offset}",
                    stacklevel=2,
                )
                trainer.lr_scheduler = whole
        return trainer.lr_scheduler

    trainer.create_scheduler = create_scheduler
    return f"continues at step {offset} of {total_steps}"


def _shifted(schedule: Callable[[int], float], offset: int) -> Callable[[int], float]:
    """``schedule`` read ``offset`` steps ahead (a plain function: LambdaLR does not save it in its state)."""

    def shifted(step: int) -> float:
        return schedule(step + offset)

    return shifted
