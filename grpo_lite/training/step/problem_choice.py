"""Problems chosen by what the model can still learn from (``problem_choice="learnable"``): a problem whose last
``k`` groups all passed or all failed is skipped with probability ``1 - skip_base**k`` (capped), the batch drawn
from the rest weighted towards pass rates near one half, and filled in plain order when too few are left. Batch
``c`` is chosen from the results of batches up to ``c - lag`` exactly (:func:`lag_batches`), so a resumed run
chooses what an uninterrupted one does (docs/internals.md). Stdlib only at import.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from grpo_lite.defaults import CHOICE_DEFAULTS, ChoiceRule, ProblemChoice
from grpo_lite.training.step.trl_seam import train_metrics

__all__ = [
    "CHOICE_DEFAULTS",
    "COLUMN",
    "PROBLEM_CHOICE_DEFAULT",
    "STATE_FILE",
    "ChoiceRule",
    "ChoiceSampler",
    "PassRateReport",
    "ProblemChoice",
    "ProblemChoiceRun",
    "ProblemChooser",
    "lag_batches",
]

PROBLEM_CHOICE_DEFAULT: ProblemChoice = CHOICE_DEFAULTS.setting
COLUMN = "_problem_index"  # the dataset column the reward receives: each row's index in the training set
STATE_FILE = "problem_choice.json"  # in each checkpoint-N folder


def lag_batches(grad_accum: int, batches_per_generation: int, ahead: int = CHOICE_DEFAULTS.loader_ahead) -> int:
    """How many generation batches back the results are complete when the next one is chosen: the trainer fetches
    ``grad_accum`` loader batches per optimizer step, the loader ``ahead`` more; a generation batch spans
    ``batches_per_generation`` loader batches and is sampled at its first.

    >>> lag_batches(1, 1), lag_batches(4, 4), lag_batches(8, 4), lag_batches(2, 4)
    (2, 2, 3, 1)
    """
    g, r = grad_accum, batches_per_generation
    return max(((k + 1) * g + ahead - 1) // r + (-(k * g) // r) + 1 for k in range(r))  # the last minus ceil(kg / r)


class ProblemChooser:
    """The history of each problem's group pass rates (problems: the training set's row indices), and the rule that
    picks the next batch of ``per_batch`` distinct problems from it; ``seed`` drives every draw, and batch ``c`` is
    chosen from the results of batches ``<= c - lag``. Its state goes into each checkpoint."""

    KEEP = 32  # batches of snapshots and results kept for a checkpoint (more than any lag)

    def __init__(
        self, n_problems: int, per_batch: int, seed: int, lag: int = 2, rule: ChoiceRule = CHOICE_DEFAULTS
    ) -> None:
        if not 1 <= per_batch <= n_problems:
            raise ValueError(f"a batch of {per_batch} distinct problems needs at least that many, got {n_problems}")
        self.n, self.per_batch, self.lag, self.rule = n_problems, per_batch, lag, rule
        self.rng = random.Random(seed)
        self.history: dict[int, list[float]] = {}
        self.queue: deque[int] = deque()
        self.chosen = 0  # the next batch to choose
        self.applied = 0  # the results of batches below this are in the history
        self.skipped = 0  # problems passed over, over the run
        self.filled = 0  # places filled in plain order with skipped problems: too few were learnable
        self.results: dict[int, dict[int, float]] = {}  # batch -> problem -> pass rate, as reported
        self.reported = 0  # the next batch whose results come
        self.groups = self.groups_with_spread = self.late = 0
        self._snapshots: dict[int, dict[str, Any]] = {}

    # ---- the rule ----------------------------------------------------------------------------------
    def skip_probability(self, problem: int) -> float:
        """``1 - skip_base**k`` for the last ``k`` groups all alike (all passed or all failed), capped."""
        k = 0
        for rate in reversed(self.history.get(problem, ())):
            if 0 < rate < 1:
                break
            k += 1
        return 0.0 if k == 0 else min(1 - self.rule.return_floor, 1 - self.rule.skip_base**k)

    def weight(self, problem: int) -> float:
        """The draw weight: 1 at a mean pass rate of one half (or no history), ``weight_floor`` at 0 or 1."""
        rates = self.history.get(problem)
        if not rates:
            return 1.0
        p = sum(rates) / len(rates)
        return self.rule.weight_floor + (1 - self.rule.weight_floor) * 4 * p * (1 - p)

    def choose(self) -> list[int]:
        """The next batch's problems, distinct, in the order they were drawn from the queue."""
        batch = self.chosen
        self._snapshots[batch] = self.state()
        self._apply(batch - self.lag)
        want, walked, seen = self.per_batch, list[int](), set[int]()
        eligible: list[int] = []
        passed: list[int] = []
        later: list[int] = []
        while len(eligible) < want * self.rule.pool_factor and len(walked) < self.n:
            if not self.queue:
                order = list(range(self.n))
                self.rng.shuffle(order)
                self.queue.extend(order)
            problem = self.queue.popleft()
            if problem in seen:  # a new permutation began within this walk: it waits for the next batch
                later.append(problem)
                continue
            seen.add(problem)
            walked.append(problem)
            (passed if self.rng.random() < self.skip_probability(problem) else eligible).append(problem)
        picked = set(self._draw(eligible, want))
        short = min(want - len(picked), len(passed))  # too few learnable ones: skipped ones at random fill the batch
        fill = [passed[i] for i in sorted(self.rng.sample(range(len(passed)), short))] if short > 0 else []
        picked.update(fill)
        self.queue.extendleft(reversed([p for p in eligible if p not in picked] + later))  # first in line next time
        self.skipped += len(passed) - len(fill)
        self.filled += len(fill)
        self.chosen += 1
        for old in [b for b in self._snapshots if b < batch - self.KEEP]:
            del self._snapshots[old]
        return [p for p in walked if p in picked]

    def _draw(self, eligible: list[int], want: int) -> list[int]:
        """``want`` of ``eligible`` by weight, without replacement (keys ``u ** (1 / w)``, the largest win)."""
        keys = [self.rng.random() ** (1 / self.weight(p)) for p in eligible]
        if len(eligible) <= want:
            return eligible
        order = sorted(range(len(eligible)), key=lambda i: -keys[i])
        return [eligible[i] for i in sorted(order[:want])]

    def _apply(self, last: int) -> None:
        """Put the results of batches ``applied..last`` into the history, in batch order, stopping at a gap."""
        while self.applied <= last:
            rates = self.results.get(self.applied)
            if rates is None:  # chosen before the results it should see: a loader that runs further ahead
                self.late += 1
                return
            for problem, rate in rates.items():
                kept = self.history.setdefault(problem, [])
                kept.append(rate)
                del kept[: -self.rule.window]
            self.applied += 1
        for old in [b for b in self.results if b < self.applied - self.KEEP]:
            del self.results[old]

    def report(self, rates: Mapping[int, float]) -> None:
        """One generation batch's pass rate per problem (every rank reports the same, in the same order)."""
        self.results[self.reported] = {int(p): float(r) for p, r in rates.items()}
        self.reported += 1
        self.groups += len(rates)
        self.groups_with_spread += sum(0 < r < 1 for r in rates.values())

    # ---- the checkpoint ----------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """What choosing goes on from: the history, the queue, the RNG and the counts (JSON-ready)."""
        version, internal, gauss = self.rng.getstate()
        return {
            "chosen": self.chosen, "applied": self.applied, "skipped": self.skipped, "filled": self.filled,
            "history": {str(p): list(r) for p, r in self.history.items()}, "queue": list(self.queue),
            "rng": [version, list(internal), gauss],
        }  # fmt: skip

    def checkpoint(self) -> dict[str, Any]:
        """The state to resume from after the batches sampled so far: as it was before the next one was chosen
        (the loader has chosen ahead), with the results not yet in its history."""
        at = self.reported
        state = self._snapshots.get(at, self.state() if self.chosen == at else None)
        if state is None:
            raise RuntimeError(f"no choice state for batch {at}: {self.chosen} chosen, {self.reported} reported")
        pending = {str(b): {str(p): r for p, r in self.results[b].items()} for b in range(state["applied"], at)}
        return {
            "state": state, "results": pending, "reported": at, "groups": self.groups,
            "groups_with_spread": self.groups_with_spread, "late": self.late,
        }  # fmt: skip

    def restore(self, saved: Mapping[str, Any]) -> None:
        """Go on from :meth:`checkpoint`'s record: the next batch chosen is the one the saved run chose next."""
        state = saved["state"]
        self.chosen, self.applied = state["chosen"], state["applied"]
        self.skipped, self.filled = state["skipped"], state["filled"]
        self.history = {int(p): list(r) for p, r in state["history"].items()}
        self.queue = deque(state["queue"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        self.results = {int(b): {int(p): r for p, r in rates.items()} for b, rates in saved["results"].items()}
        self.reported = saved["reported"]
        self.groups, self.groups_with_spread, self.late = saved["groups"], saved["groups_with_spread"], saved["late"]
        self._snapshots = {}


class ChoiceSampler:
    """TRL's ``RepeatSampler`` layout (as many generation batches per epoch, each problem ``mini_repeat_count`` times
    in a row, the batch ``repeat_count`` times), each batch's problems chosen when it is reached."""

    def __init__(self, chooser: ProblemChooser, mini_repeat_count: int, repeat_count: int) -> None:
        self.chooser, self.mini_repeat_count, self.repeat_count = chooser, mini_repeat_count, repeat_count
        self.batches = chooser.n // chooser.per_batch

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.batches):
            chunk = self.chooser.choose()
            for _ in range(self.repeat_count):
                for index in chunk:
                    yield from [index] * self.mini_repeat_count

    def __len__(self) -> int:
        return self.batches * self.chooser.per_batch * self.mini_repeat_count * self.repeat_count


class PassRateReport:
    """The correctness reward, which also hands ``sink`` each group's pass rate (a reward above 0 passes) in
    training, gathered from every rank and grouped by problem (the :data:`COLUMN` kwarg, else the prompt text)."""

    def __init__(
        self, func: Callable[..., list], sink: Callable[[dict[Any, float]], None], training: Callable[[], bool]
    ):
        self.func, self.sink, self.training = func, sink, training
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __call__(self, prompts: Any, completions: Any, **kwargs: Any) -> list:
        rewards = self.func(prompts=prompts, completions=completions, **kwargs)  # as TRL calls a reward
        if self.training():
            from accelerate.utils import gather_object  # a heavy dependency: only when a run reports

            keys = kwargs.get(COLUMN) or [json.dumps(p, sort_keys=True, default=str) for p in prompts]
            rows = gather_object([(k, r is not None and r > 0) for k, r in zip(keys, rewards)])
            groups: dict[Any, list[bool]] = {}
            for key, passed in rows:
                groups.setdefault(key, []).append(bool(passed))
            self.sink({key: sum(v) / len(v) for key, v in groups.items()})
        return rewards


def _plain_function(func: Any) -> bool:
    """A reward TRL calls as a function (not a reward model, not a coroutine), so a wrapper can stand in for it."""
    import inspect

    coroutine = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
    return not hasattr(func, "parameters") and not coroutine


def judged_reward(reward_funcs: Sequence[Any]) -> int:
    """The index of the reward that says pass or fail: grpo-lite's correctness reward, else the first."""
    names = [getattr(f, "__name__", "") for f in reward_funcs]
    return names.index("correctness_reward") if "correctness_reward" in names else 0


class ProblemChoiceRun:
    """The choice wired to one trainer built by TRL's ``__init__``: the reward that reports, the sampler, the record,
    the checkpoint file. With ``setting="off"`` (or an ``off_reason``) TRL's sampler runs; groups are still counted.
    """

    def __init__(self, trainer: Any, setting: ProblemChoice, off_reason: str | None = None) -> None:
        if setting not in ("off", "learnable"):
            raise ValueError(f"problem_choice={setting!r} is not valid; choose 'off' or 'learnable'")
        args = trainer.args
        self.record: dict[str, Any] = {"setting": setting}
        self.chooser: ProblemChooser | None = None
        self.groups = self.groups_with_spread = 0
        judged = judged_reward(trainer.reward_funcs) if off_reason is None else 0
        if off_reason is None and not hasattr(trainer.train_dataset, "add_column"):
            off_reason = "the training set is streamed (an IterableDataset): its rows cannot be chosen"
        elif off_reason is None and not _plain_function(trainer.reward_funcs[judged]):
            off_reason = "the reward that says pass or fail is a model or async: its calls cannot report"
        if off_reason is not None:  # TRL's sampler, nothing reported
            self.record.update({"off": off_reason} if setting == "learnable" else {})
            self._metrics, self._layout = None, (0, 0)
            return
        repeat = trainer.num_iterations * args.steps_per_generation  # loader batches per generation batch
        if setting == "learnable":
            per_batch = args.generation_batch_size // trainer.num_generations
            ahead = CHOICE_DEFAULTS.loader_ahead + args.dataloader_num_workers * (args.dataloader_prefetch_factor or 0)
            lag = lag_batches(args.gradient_accumulation_steps, repeat, ahead)
            self.chooser = ProblemChooser(len(trainer.train_dataset), per_batch, args.seed, lag)
            trainer.train_dataset = trainer.train_dataset.add_column(COLUMN, list(range(len(trainer.train_dataset))))
            args.ignore_data_skip = True  # the chooser's own state resumes the order; replaying batches would not
            rule = {k: v for k, v in asdict(CHOICE_DEFAULTS).items() if k != "setting"}
            self.record.update(rule=rule, lag_batches=lag)
        self._layout = (trainer.num_generations, repeat)
        self._metrics = train_metrics(trainer)  # TRL averages these lists at each log (the seam checks it)
        trainer.reward_funcs[judged] = PassRateReport(
            trainer.reward_funcs[judged], self._report, lambda: bool(trainer.model.training)
        )
        self._update()

    def _report(self, rates: dict[Any, float]) -> None:
        spread = sum(0 < r < 1 for r in rates.values())
        self.groups, self.groups_with_spread = self.groups + len(rates), self.groups_with_spread + spread
        if self.chooser is not None:
            self.chooser.report(rates)  # it counts the same, for its checkpoint
        if self._metrics is not None and rates:
            self._metrics["problem_choice/spread"].append(spread / len(rates))
            if self.chooser is not None:
                self._metrics["problem_choice/skipped"].append(float(self.chooser.skipped))
        self._update()

    def _update(self) -> None:
        """run.json's figures, updated in place (the trainer's record is the run's)."""
        self.record.update(groups=self.groups, groups_with_spread=self.groups_with_spread)
        if self.chooser is not None:
            c = self.chooser
            self.record.update(batches=c.chosen, skipped=c.skipped, filled_in_order=c.filled, late=c.late)

    def sampler(self) -> ChoiceSampler | None:
        """The sampler of the training set with the choice on; None with it off (TRL's own serves)."""
        return None if self.chooser is None else ChoiceSampler(self.chooser, *self._layout)

    # ---- checkpoints --------------------------------------------------------------------------------
    def save(self, folder: Path) -> None:
        """Write the chooser's state into a ``checkpoint-N`` folder (the main process; every rank holds the same)."""
        if self.chooser is not None and folder.is_dir():
            from grpo_lite.training.report.summary import write_json_atomic

            write_json_atomic(folder / STATE_FILE, self.chooser.checkpoint())

    def load(self, folder: str | Path) -> bool:
        """Go on from a checkpoint's state; False when it has none (a run saved with the choice off)."""
        path = Path(folder) / STATE_FILE
        if self.chooser is None or not path.is_file():
            return False
        self.chooser.restore(json.loads(path.read_text()))
        self.groups, self.groups_with_spread = self.chooser.groups, self.chooser.groups_with_spread
        self._update()
        return True
