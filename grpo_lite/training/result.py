"""The result stage: the final model saved (unless the run was interrupted), run.json written, the summary printed,
as one :class:`TrainResult`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite.training import build
from grpo_lite.training.report.summary import finish_report, first_last

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan
    from grpo_lite.training.attempts import Attempts
    from grpo_lite.training.prepare import RunInputs
    from grpo_lite.training.run.folder import RunFolder


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
        return first_last(self.history, window).get("reward", (None, None))

    @classmethod
    def of_finished_run(cls, run: RunFolder, inputs: RunInputs, the_plan: Plan) -> TrainResult:
        """Resuming a run that is finished, with no steps asked beyond it: what its run.json records; nothing
        trained or written (``model`` is None; the model is in ``model_dir``)."""
        from grpo_lite.training.run.resume import read_record  # heavy: imports transformers

        record = read_record(run.out, move=False)[0] or {}
        return cls(
            output_dir=run.out, model_dir=run.out / "final", plan=the_plan, steps=run.earlier.reached,
            history=run.earlier.history, peak_memory=record.get("peak_memory"),
            wall_seconds=record.get("wall_seconds") or 0.0, events=run.earlier.events, tokenizer=inputs.tokenizer,
            already_finished=True,
        )  # fmt: skip


def finish(loop: Attempts, trainer: Any, inputs: RunInputs, run: RunFolder) -> TrainResult:
    """Save the final model (unless interrupted), write run.json, print the summary."""
    from grpo_lite.training.run import checkpoints  # heavy: imports transformers

    out = run.out
    # a stop asked during the last step leaves nothing to resume: the run is finished
    watch = loop.watch
    interrupted = watch.interrupt.requested and trainer.state.global_step < trainer.state.max_steps
    model_dir = None if interrupted else build.save_final(trainer, inputs.tokenizer, out)
    saved = checkpoints.scan(out).newest
    if interrupted:
        loop.events.append(
            {"event": "interrupted", "step": loop.done, "checkpoint": str(saved), "signal": watch.interrupt.signal}
        )
    result = TrainResult(
        output_dir=out, model_dir=model_dir, plan=loop.plan, steps=loop.done, history=watch.history.rows,
        peak_memory=watch.memory.peak(), wall_seconds=loop.wall, interrupted=interrupted, events=loop.events,
        stop_signal=watch.interrupt.signal if interrupted else None,
        model=trainer.model, tokenizer=inputs.tokenizer,
    )  # fmt: skip
    loop.write_record(status="interrupted" if interrupted else "finished", model_dir=model_dir)
    if run.state.is_main_process:
        finish_report(result, run.console)
        if interrupted:
            run.console.print(
                f"[bold]interrupted at step {loop.done}[/bold]: checkpoint saved in {saved}. "
                f"Resume with the same command plus --resume (Python: train(..., output_dir={str(out)!r}, resume=True))"
            )
    return result
