"""Learning health: a run that is not learning says so, names the cause and a remedy that works as written.

:class:`HealthMonitor` reads the metrics TRL logs each step over a sliding window and reports each kind of finding
once per run (the findings and their thresholds: docs/health.md). A remedy's numbers come from an
:class:`~grpo_lite.training.report.advice.Advisor` when one is given (train() gives one), with the exact flags.
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from transformers import TrainerCallback

from grpo_lite import settings
from grpo_lite.defaults import HEALTH, RESILIENCE
from grpo_lite.errors import spelled
from grpo_lite.settings import OnStall
from grpo_lite.training.report.progress import own_reward_means, reward_shares

FindingKind = Literal["length_cut", "zero_spread", "format_only", "correctness_falling", "reward_flat"]


class LearningStalledWarning(UserWarning):
    """A run shows a cause of not learning (see :class:`HealthMonitor`)."""


@dataclass(frozen=True)
class Finding:
    """One cause of a run not learning: what was seen, at which step, and what to change."""

    kind: FindingKind
    step: int
    cause: str
    remedy: str
    measured: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        """The progress output's line."""
        return f"health: {self.cause}. Remedy: {self.remedy}"

    def event(self) -> dict[str, Any]:
        """The run.json event."""
        return {
            "event": "health",
            "finding": self.kind,
            "step": self.step,
            "cause": self.cause,
            "remedy": self.remedy,
            **{k: round(v, 4) for k, v in self.measured.items()},
        }


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _series(rows: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    values = [row.get(key) for row in rows]
    return [float(v) for v in values if isinstance(v, (int, float)) and not math.isnan(v)]


class HealthMonitor(TrainerCallback):
    """Watch the logged metrics of a GRPO run for the causes of not learning.

    Args:
        reward_funcs: the run's reward functions (the format and correctness shares come from them).
        report: receives each :class:`Finding`. Default: a :class:`LearningStalledWarning`.
        advisor: the remedies' numbers (an ``Advisor``); None: remedies without them.
        on_stall: ``"warn"`` reports; ``"adapt"`` also lets the advisor raise ``max_completion_length`` at the
            next checkpoint after a ``length_cut`` finding. Default: ``"warn"``.
        step_offset: steps done by earlier attempts (the step a finding names is the run's).
    """

    def __init__(
        self,
        reward_funcs: Sequence[Any],
        *,
        report: Callable[[Finding], None] | None = None,
        advisor: Any = None,
        on_stall: OnStall = RESILIENCE.on_stall,
        step_offset: int = 0,
    ) -> None:
        # a HealthMonitor added to your own trainer
        settings.check("on_stall", on_stall)
        self.reward_funcs = list(reward_funcs)
        self.report = report or _warn
        self.advisor, self.on_stall, self.step_offset = advisor, on_stall, step_offset
        self.rows: deque[dict[str, float]] = deque(
            maxlen=max(HEALTH.window_steps, HEALTH.trend_steps, HEALTH.flat_steps)
        )
        self.found: list[Finding] = []
        self.adapt_pending = False

    # ---- Trainer events ---------------------------------------------------------------------------------
    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001 - transformers' signature
        if not logs or "train_runtime" in logs or not state.is_world_process_zero:
            return
        settings = {k: getattr(args, k, None) for k in ("max_completion_length", "num_generations", "learning_rate")}
        self.observe(logs, self.step_offset + state.global_step, settings)

    def on_save(self, args, state, control, **kwargs):  # noqa: ANN001
        if self.adapt_pending and self.advisor is not None:
            self.adapt_pending = False
            self.advisor.adapt(self.step_offset + state.global_step)

    # ---- the checks -------------------------------------------------------------------------------------
    def observe(self, logs: Mapping[str, Any], step: int, settings: Mapping[str, Any] | None = None) -> list[Finding]:
        """Add one logged step; report and return the findings it completes."""
        row = {k: float(v) for k, v in logs.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        row.update({f"share/{k}": v for k, v in reward_shares(logs, self.reward_funcs).items()})
        row.update({f"mean/{k}": v for k, v in own_reward_means(logs, self.reward_funcs).items()})
        self.rows.append(row)
        settings = dict(settings or {})
        new = []
        for check in (self._length_cut, self._zero_spread, self._trends, self._reward_flat):
            finding = check(step, settings)
            if finding is not None and finding.kind not in {f.kind for f in self.found}:
                self.found.append(finding)
                new.append(finding)
                self.report(finding)
                if finding.kind == "length_cut" and self.on_stall == "adapt" and self.advisor is not None:
                    blocker = self.advisor.adapt_blocker()
                    if blocker is None:
                        self.adapt_pending = True
                    else:
                        self.advisor.decline(step, blocker)
        return new

    def _last(self, n: int, key: str) -> list[float] | None:
        """``key`` over the last ``n`` logged steps, when every one of them has it."""
        rows = list(self.rows)[-n:]
        values = _series(rows, key)
        return values if len(rows) == n and len(values) == n else None

    def _length_cut(self, step: int, settings: dict[str, Any]) -> Finding | None:
        cut = self._last(HEALTH.window_steps, "completions/clipped_ratio")
        if cut is None or _mean(cut) < HEALTH.cut_share:
            return None
        length = settings.get("max_completion_length")
        cause = (
            f"{_mean(cut):.0%} of completions were cut at max_completion_length={length} over the last "
            f"{HEALTH.window_steps} steps: the rewards judge unfinished answers"
        )
        remedy = (
            self.advisor.length_remedy()
            if self.advisor is not None
            else (
                "raise max_completion_length (--set max_completion_length=N, Python: max_completion_length=N; "
                "grpo-lite plan MODEL --set max_completion_length=N says whether it fits), or ask for shorter answers"
            )
        )
        return Finding("length_cut", step, cause, remedy, {"clipped_ratio": _mean(cut)})

    def _zero_spread(self, step: int, settings: dict[str, Any]) -> Finding | None:
        zero = self._last(HEALTH.window_steps, "frac_reward_zero_std")
        if zero is None or _mean(zero) < HEALTH.zero_spread_share:
            return None
        correct = self._last(HEALTH.window_steps, "share/correct")
        why = ""
        if correct is not None and _mean(correct) < 0.1:
            why = f" (correct share {_mean(correct):.0%}: the problems look too hard for the model)"
        elif correct is not None and _mean(correct) > 0.9:
            why = f" (correct share {_mean(correct):.0%}: the problems look too easy)"
        elif correct is None:  # a task without a gold: its own rewards' means say how hard it is
            means = {k[5:]: self._last(HEALTH.window_steps, k) for k in self.rows[-1] if k.startswith("mean/")}
            said = ", ".join(f"{name} {_mean(v):.3g}" for name, v in means.items() if v is not None)
            why = f" (mean of {said})" if said else ""
        cause = (
            f"{_mean(zero):.0%} of groups gave all their completions the same reward over the last "
            f"{HEALTH.window_steps} steps: those groups have no advantage and no gradient{why}"
        )
        remedy = (
            self.advisor.generations_remedy()
            if self.advisor is not None
            else (
                "raise num_generations (--set num_generations=N, Python: num_generations=N), or train on problems "
                "the model solves some of the time (docs/datasets.md)"
            )
        )
        return Finding("zero_spread", step, cause, remedy, {"frac_reward_zero_std": _mean(zero)})

    def _trends(self, step: int, settings: dict[str, Any]) -> Finding | None:
        fmt, correct = self._last(HEALTH.trend_steps, "share/format"), self._last(HEALTH.trend_steps, "share/correct")
        if fmt is None or correct is None:
            return None
        half = HEALTH.trend_steps // 2
        f1, f2, c1, c2 = _mean(fmt[:half]), _mean(fmt[half:]), _mean(correct[:half]), _mean(correct[half:])
        measured = {"format_first": f1, "format_last": f2, "correct_first": c1, "correct_last": c2}
        if c2 - c1 <= -HEALTH.correct_fall:
            lr = settings.get("learning_rate")
            lower = (
                f"--set learning_rate={lr / 2:g}, Python: learning_rate={lr / 2:g}" if lr else "--set learning_rate=..."
            )
            return Finding(
                "correctness_falling",
                step,
                f"the correct share fell {c1:.0%} -> {c2:.0%} over the last {HEALTH.trend_steps} steps "
                f"(format {f1:.0%} -> {f2:.0%})",
                f"halve the learning rate ({lower}) and compare the checkpoints with grpo-lite eval",
                measured,
            )
        if f2 - f1 >= HEALTH.format_rise and abs(c2 - c1) < HEALTH.correct_flat:
            remedy = (
                self.advisor.generations_remedy(format_only=True)
                if self.advisor is not None
                else (
                    "let correctness vary within a group: more generations (--set num_generations=N) or problems the "
                    "model solves some of the time (docs/datasets.md)"
                )
            )
            return Finding(
                "format_only",
                step,
                f"the format share rose {f1:.0%} -> {f2:.0%} over the last {HEALTH.trend_steps} steps while the "
                f"correct share stayed {c1:.0%} -> {c2:.0%}: the run learns the format, not the answers",
                remedy,
                measured,
            )
        return None

    def _reward_flat(self, step: int, settings: dict[str, Any]) -> Finding | None:
        reward = self._last(HEALTH.flat_steps, "reward")
        if reward is None or max(reward) - min(reward) > HEALTH.flat_tolerance:
            return None
        return Finding(
            "reward_flat",
            step,
            f"the mean reward has been {reward[-1]:.4g} for the last {HEALTH.flat_steps} steps: the rewards give "
            "the model's completions the same score whatever it samples",
            "score a few sampled completions with each reward function (--set log_completions=true prints "
            "them with their rewards, Python: log_completions=True): a reward that never fires on this "
            "model's output (a format it does not write, an answer it cannot reach) gives nothing to learn",
            {"reward": reward[-1]},
        )


def _warn(finding: Finding) -> None:
    warnings.warn(spelled(finding.line()), LearningStalledWarning, stacklevel=3)
