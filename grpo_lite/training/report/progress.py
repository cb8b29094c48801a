"""One compact progress line per logged step (:func:`format_line`), in place of the trainer's raw log dict (about
1,000 characters a step for GRPO), which still goes to run.json and ``report_to``. ``format`` and ``correct`` are
the shares of completions that earned those rewards; a task's own rewards show their means (a task without a gold
has no ``correct``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from transformers import TrainerCallback

from grpo_lite.rewards import REWARDS

# (label, reward name) in display order: the share of completions that earned it
SHARES: tuple[tuple[str, str], ...] = (("format", "soft_format_reward"), ("correct", "correctness_reward"))


def reward_shares(logs: Mapping[str, Any], reward_funcs: Sequence[Any]) -> dict[str, float]:
    """Label -> share of completions that earned the reward, for the rewards of SHARES in use.

    >>> from grpo_lite.rewards import correctness_reward, soft_format_reward
    >>> reward_shares({"rewards/correctness_reward/mean": 0.5, "rewards/soft_format_reward/mean": 0.25},
    ...               [correctness_reward, soft_format_reward])
    {'format': 0.5, 'correct': 0.25}
    """
    values = {getattr(f, "name", None): getattr(f, "value", None) for f in reward_funcs}
    out = {}
    for label, name in SHARES:
        mean, full = logs.get(f"rewards/{name}/mean"), values.get(name)
        if isinstance(mean, (int, float)) and isinstance(full, (int, float)) and full > 0:
            out[label] = mean / full
    return out


def own_reward_means(logs: Mapping[str, Any], reward_funcs: Sequence[Any]) -> dict[str, float]:
    """Name -> mean, for the task's own rewards (every reward that is not one of grpo-lite's built-in rewards): the
    figures of a task that has no gold to be correct against.

    >>> from grpo_lite.rewards import correctness_reward
    >>> def reversed_word(completions, **kwargs): ...
    >>> own_reward_means({"rewards/reversed_word/mean": 0.25, "rewards/correctness_reward/mean": 2.0},
    ...                  [reversed_word, correctness_reward])
    {'reversed_word': 0.25}
    """
    built_in = {spec.func.name for spec in REWARDS.values()}
    names = [getattr(f, "__name__", type(f).__name__) for f in reward_funcs]
    means = {n: logs.get(f"rewards/{n}/mean") for n in names if n not in built_in}
    return {n: float(m) for n, m in means.items() if isinstance(m, (int, float))}


def _duration(seconds: float) -> str:
    """``75`` -> ``'1m 15s'``; ``3700`` -> ``'1h 01m'``."""
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def format_line(
    step: int,
    total: int | None,
    logs: Mapping[str, Any],
    shares: Mapping[str, float],
    seconds_per_step: float | None,
    means: Mapping[str, float] | None = None,
) -> str:
    """The progress line of one step; absent figures are left out (``means``: the task's own rewards' means).

    >>> format_line(3, 16, {"reward": 1.4242, "completions/mean_length": 57.6, "completions/clipped_ratio": 0.25,
    ...                     "update/realized": 0.981}, {"format": 0.62, "correct": 0.125}, 21.37)
    'step  3/16  reward 1.42  format 62%  correct 12%  len 58 (cut 25%)  21.4 s/step  4m 38s left  realized 0.98'
    >>> format_line(1, 2, {"reward": 0.75}, {}, None, {"reversed_word": 0.5, "think_format_reward": 0.25})
    'step 1/2  reward 0.75  reversed_word 0.50  think_format_reward 0.25'
    """
    width = len(str(total)) if total else 1
    parts = [f"step {step:>{width}d}/{total}" if total else f"step {step}"]
    if isinstance(logs.get("reward"), (int, float)):
        parts.append(f"reward {logs['reward']:.2f}")
    parts += [f"{label} {share:.0%}" for label, share in shares.items()]
    parts += [f"{name} {mean:.2f}" for name, mean in (means or {}).items()]
    length = logs.get("completions/mean_length")
    if isinstance(length, (int, float)):
        clipped = logs.get("completions/clipped_ratio")
        parts.append(f"len {length:.0f}" + (f" (cut {clipped:.0%})" if isinstance(clipped, (int, float)) else ""))
    if seconds_per_step is not None:
        parts.append(f"{seconds_per_step:.1f} s/step")
        if total:
            parts.append(f"{_duration(seconds_per_step * (total - step))} left")
    if isinstance(logs.get("update/realized"), (int, float)):
        parts.append(f"realized {logs['update/realized']:.2f}")
    return "  ".join(parts)


class ProgressLine(TrainerCallback):
    """Prints :func:`format_line` for every logged training step (main process only)."""

    def __init__(
        self, console: Any, reward_funcs: Sequence[Any], *, step_offset: int = 0, total_steps: int | None = None
    ) -> None:
        self.console = console
        self.reward_funcs = list(reward_funcs)
        self.step_offset = step_offset  # steps of earlier attempts
        self.total_steps = total_steps  # steps of the whole run; None: the trainer's max_steps
        self._last: tuple[float, int] | None = None

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001 - transformers' signature
        self._last = (time.perf_counter(), state.global_step)

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
        if not logs or "train_runtime" in logs or not state.is_world_process_zero:
            return
        now, step = time.perf_counter(), state.global_step
        per_step = None
        if self._last is not None and step > self._last[1]:
            per_step = (now - self._last[0]) / (step - self._last[1])
        self._last = (now, step)
        total = self.total_steps or (self.step_offset + state.max_steps if state.max_steps > 0 else None)
        shares, means = reward_shares(logs, self.reward_funcs), own_reward_means(logs, self.reward_funcs)
        line = format_line(self.step_offset + step, total, logs, shares, per_step, means)
        self.console.print(line, highlight=False, markup=False, soft_wrap=True)  # one line, whatever the width


def replace_printer(trainer: Any, line: ProgressLine) -> None:
    """Swap the trainer's log printer (tqdm bar and raw dicts) for ``line``."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for callback in list(trainer.callback_handler.callbacks):
        if (
            isinstance(callback, (PrinterCallback, ProgressCallback))
            or type(callback).__name__ == "NotebookProgressCallback"
        ):
            trainer.remove_callback(callback)
    trainer.add_callback(line)
