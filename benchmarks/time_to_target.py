"""Time to a target accuracy: grpo-lite beside plain TRL, by MLPerf Training's rules scaled to this machine.

Accuracy at a fixed budget cannot show that one arm got there sooner once both stop improving; MLPerf Training
scores the time to a quality target fixed in advance. Here, on the demo's model and synthetic problems
(benchmarks/vs_trl.py builds the arms, the problems, the rewards and the evaluation; this script imports them):

- arms: ``trl-defaults`` (TRL's GRPOConfig defaults), ``trl-lite-hp`` (plain TRL with grpo-lite's settings) and
  ``grpo-lite`` (grpo-lite's ``train()`` as it ships; 0.5 ran it as ``grpo-lite-off`` beside a ``problem_choice``
  arm, removed in 0.6.0 after this benchmark: docs/vs_trl.md);
- tasks: two difficulty mixes of the synthetic problems (:data:`TASKS`), each with its own target;
- the target (:data:`TARGETS`): :data:`TARGET_SHARE` of the way from the untrained model's accuracy to the plateau
  (the mean accuracy at the budget) of reference runs of ``trl-lite-hp``, measured before any grpo-lite run
  (``--reference`` runs them and prints the line to write here, with the runs it came from) and never moved after;
- the clock: training CPU seconds of the run's process (vs_trl.py's ``--clock cpu``), ``--budget`` a run;
- the curve: the run saves its trainable weights (the LoRA adapter) after every ``--snapshot-every`` optimizer steps
  (every step by default) and after its last, each with the training CPU seconds reached, the save's own CPU time
  off the clock (:class:`Snapshots`); after the run, each saved point is evaluated on the held-out problems
  (``--eval-n``, at least 200 for a verdict; greedy, vs_trl.py's scorer). Evaluation is the instrument, not the
  run: it costs the run no training time, and the curve has a point a step, not one per evaluation's cost;
- time to target: the training CPU seconds of the first saved point at or above the target (no interpolation);
- seeds: ``--seeds`` (at least 5) for the two arms with grpo-lite's settings, ``--defaults-seeds`` for
  trl-defaults; with 3 or more, the fastest and the slowest are dropped and the rest averaged; a run that never
  reaches the target counts at the budget; every run's curve is kept (``--out``/time_to_target.json);
- printed per task and arm: time to target (mean of the kept runs, their range, how many reached it), accuracy at
  the budget (the last saved point; pooled, 95% Wilson interval), the share of groups with spread (the correctness
  reward passed some of a group's completions and failed others), optimizer steps and generated tokens per
  training CPU second (where the time went), the fewest points of a curve, and the ratios to ``trl-lite-hp``;
  then every run's curve with its own steps/s and tokens/s.

The training set is ``--train-n`` problems (24 by default): problems come back within a run, as in a run of
several epochs, which is where choosing among them can matter.

    python benchmarks/time_to_target.py --reference   # the targets, from trl-lite-hp runs: write them in TARGETS
    python benchmarks/time_to_target.py               # 5 seeds x 2 arms (+1 trl-defaults) x 2 tasks, 300 CPU s a run
    python benchmarks/time_to_target.py --quick       # the smoke configuration: 1 seed, 15 s a run, n=8

The closing lines are ``time_to_target: <task> grpo-lite/trl-lite-hp speedup=<r> ...`` per task, and the last
``time_to_target: <s> s of wall time in all``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Literal

from transformers import TrainerCallback

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vs_trl  # noqa: E402 - the arms, the problems, the time limit, the waves

Arm = Literal["trl-defaults", "trl-lite-hp", "grpo-lite"]
ARMS: tuple[Arm, ...] = ("trl-defaults", "trl-lite-hp", "grpo-lite")
LITE_HP: tuple[Arm, ...] = ("trl-lite-hp", "grpo-lite")  # the arms with grpo-lite's settings
TASKS: dict[str, tuple[int, ...]] = {"one-step": (1,), "mixed": (1, 2)}  # synthetic levels: arithmetic steps
TARGET_SHARE = 0.75  # of the way from the untrained model's accuracy to the reference runs' plateau
# The target accuracy per task, fixed from --reference runs of trl-lite-hp (the runs beside it) before any
# grpo-lite run, and never moved after. `python benchmarks/time_to_target.py --reference --out DIR` printed these
# on 2026-12-02 (this project's 2-core AMD EPYC machine, other jobs on it: 3,460 s of wall time).
TARGETS: dict[str, float | None] = {
    "one-step": 0.2900,  # trl-lite-hp, 240 CPU s, n=200: before 31/200, at the budget seed 100 57/200, seed 101 70/200, seed 102 74/200
    "mixed": 0.1375,  # trl-lite-hp, 240 CPU s, n=200: before 18/200, at the budget seed 100 28/200, seed 101 33/200, seed 102 31/200
}
# A run saves its weights after every step (the LoRA adapter: 20 MB, off the clock) and evaluates them after it
# has trained: an evaluation of 200 problems costs about 120 CPU s, five of grpo-lite's optimizer steps, so the
# evaluation, outside the budget, sets how long a benchmark takes, no longer how many points a curve has. 300 CPU s
# give TRL's 40-55 s steps 5 points or more before the budget, grpo-lite's about twice as many.
PRESETS: dict[str, dict[str, Any]] = {
    "default": {"budget": 300.0, "snapshot_every": 1, "eval_n": 200, "seeds": [0, 1, 2, 3, 4], "defaults_seeds": [0]},
    # the targets: trl-lite-hp on seeds of its own, evaluated at the budget only (the plateau is all a target needs)
    "reference": {"budget": 240.0, "snapshot_every": 0, "eval_n": 200, "seeds": [100, 101, 102], "defaults_seeds": []},
    # the smoke run: trl-defaults left out (its first step alone, 512 tokens for 8 completions, takes minutes)
    "quick": {"budget": 15.0, "snapshot_every": 1, "eval_n": 8, "seeds": [0], "defaults_seeds": [], "train_n": 8},
}


# ---- one run, in its own process ----------------------------------------------------------------------
class Snapshots(TrainerCallback):
    """Saves the trainable weights (the LoRA adapter; every weight of a full fine-tuning) after every ``every``-th
    optimizer step and after the last (``every`` 0: the last only), each with the training CPU seconds it was
    reached at on ``limit``'s clock (put it after ``limit`` in the callbacks). The save's own CPU time goes to
    ``paused``, which that clock leaves out: saving costs the run none of its budget."""

    def __init__(self, folder: Path, every: int, limit: Any, paused: list[float]) -> None:
        self.folder, self.every, self.limit, self.paused = folder, every, limit, paused
        self.points: list[dict[str, Any]] = []  # {"step", "train_cpu_s"}, in step order
        self.model: Any = None

    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.every and state.global_step % self.every == 0:
            self.save(model, state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if not self.points or self.points[-1]["step"] != state.global_step:  # the weights at the budget
            self.save(model, state.global_step)

    def path(self, step: int) -> Path:
        return self.folder / f"step-{step}.pt"

    def save(self, model: Any, step: int) -> None:
        import torch

        cpu, mark = self.limit.cpu_clock() - self.limit.cpu_start, time.process_time()
        self.folder.mkdir(parents=True, exist_ok=True)
        torch.save({name: p.detach() for name, p in model.named_parameters() if p.requires_grad}, self.path(step))
        self.points.append({"step": step, "train_cpu_s": cpu})
        self.model = model
        self.paused[0] += time.process_time() - mark


def evaluate_snapshots(snapshots: Snapshots, score: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    """The curve: each snapshot's weights loaded into the trained model and ``score``\'d (a copy, which scoring may
    merge), after the run and off its clock; each file deleted once scored."""
    import torch

    curve = []
    for point in snapshots.points:
        path = snapshots.path(point["step"])
        loaded = snapshots.model.load_state_dict(torch.load(path), strict=False)
        if loaded.unexpected_keys:
            raise RuntimeError(f"{path} holds weights the trained model lacks: {loaded.unexpected_keys[:3]}")
        curve.append({**point, **score(copy.deepcopy(snapshots.model).eval())})
        path.unlink()
    return curve


class SpreadCount:
    """The correctness reward, which also counts [groups, groups with spread] (the completions of one prompt in a
    call, a group, that it passed some of, a reward above 0, and failed others of) and ``tokens``: the completion
    tokens TRL scored, what sampling generated and kept, in every arm alike."""

    def __init__(self, func: Any) -> None:
        self.func, self.groups, self.tokens = func, [0, 0], 0
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __call__(self, prompts: Any, completions: Any, **kwargs: Any) -> list:
        rewards = self.func(prompts=prompts, completions=completions, **kwargs)  # as TRL calls a reward
        groups: dict[str, list[bool]] = {}
        for prompt, reward in zip(prompts, rewards):
            groups.setdefault(json.dumps(prompt, sort_keys=True, default=str), []).append(bool(reward and reward > 0))
        self.groups[0] += len(groups)
        self.groups[1] += sum(0 < sum(passed) < len(passed) for passed in groups.values())
        self.tokens += sum(len(ids) for ids in kwargs.get("completion_ids") or ())
        return rewards


def _child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    out, levels = Path(args.out), TASKS[args.task]
    if args.child == "before":
        from grpo_lite.evaluation import load_for_eval

        model, _ = load_for_eval(vs_trl.model_folder(args.model))
        (out / "result.json").write_text(json.dumps({"eval": vs_trl._evaluate(model, args, levels), **_provenance()}))
        return
    paused = [0.0]  # CPU seconds of the snapshots' saves, off the clock
    limit = vs_trl.TimeLimit(args.budget, "cpu", cpu_clock=lambda: time.process_time() - paused[0])
    snapshots = Snapshots(out / "snapshots", args.snapshot_every, limit, paused)
    rows = vs_trl.problems("train", args.train_n, args.seed, levels)
    rewards = vs_trl.rewards()
    judged = [getattr(f, "__name__", "") for f in rewards].index("correctness_reward")
    rewards[judged] = counted = SpreadCount(rewards[judged])  # the held-out evaluation does not call the rewards
    run = (rows, args.seed, out / "run", [limit, snapshots], args.max_steps)
    if args.child == "grpo-lite":
        vs_trl.lite_train(args.model, *run, rewards=rewards)
    else:
        vs_trl.trl_trainer(args.child, args.model, *run, reward_funcs=rewards).train()
    mark = time.process_time()
    curve = evaluate_snapshots(snapshots, lambda model: vs_trl._evaluate(model, args, levels))
    record = {"steps": limit.steps, "train_cpu_s": limit.cpu, "curve": curve, "groups": counted.groups}
    record.update(tokens=counted.tokens, save_cpu_s=paused[0], eval_cpu_s=time.process_time() - mark)
    record.update(_provenance())
    (out / "result.json").write_text(json.dumps(record))


def _provenance() -> dict[str, str]:
    """The code and the processor a run measured: CPU seconds compare only between runs of one kind of machine."""
    here = Path(__file__).resolve().parent
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True)
    cpuinfo = Path("/proc/cpuinfo")
    models = (
        [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if line.startswith("model name")]
        if cpuinfo.is_file()
        else []
    )
    return {
        "commit": git.stdout.strip() or "unknown",
        "cpu": models[0] if models else platform.processor() or "unknown",
    }


def _folder(job: tuple[str, str, int], out: Path) -> Path:
    """A run's folder in ``out``: TASK/ARM-seedN (what :func:`finished` reads back)."""
    arm, task, seed = job
    return out / task / f"{arm}-seed{seed}"


def _done(job: tuple[str, str, int], out: Path) -> bool:
    return (_folder(job, out) / "result.json").is_file()


def finished(out: Path) -> list[tuple[str, str, int]]:
    """Every run with a result.json in ``out`` (TASK/ARM-seedN/), whichever invocation ran it: several invocations
    may share one ``--out`` (a stopped benchmark resumed, runs added later), each writing its own summary file."""
    found = []
    for path in sorted(out.glob("*/*-seed*/result.json")):
        arm, _, seed = path.parent.name.rpartition("-seed")
        if path.parent.parent.name in TASKS and arm in ("before", *ARMS) and seed.isdigit():
            found.append((arm, path.parent.parent.name, int(seed)))
    return found


def _record(job: tuple[str, str, int], out: Path) -> dict[str, Any]:
    """A finished run's result.json with its arm, task and seed."""
    arm, task, seed = job
    return {**json.loads((_folder(job, out) / "result.json").read_text()), "arm": arm, "task": task, "seed": seed}


def _run(job: tuple[str, str, int], args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One run in a fresh process, its output in its folder's log.txt; a failure is said and left out. A run whose
    result.json is already in ``--out`` (an interrupted benchmark started again) is read, not run again."""
    arm, task, seed = job
    out = _folder(job, tmp)
    if _done(job, tmp):
        print(f"  {task} {arm} seed {seed}: done before, read from {out / 'result.json'}", flush=True)
        return _record(job, tmp)
    out.mkdir(parents=True, exist_ok=True)
    flags = {"--child": arm, "--task": task, "--seed": seed, "--out": out, "--budget": args.budget,
             "--snapshot-every": args.snapshot_every, "--eval-n": args.eval_n, "--eval-tokens": args.eval_tokens,
             "--train-n": args.train_n, "--max-steps": args.max_steps, "--model": args.model,
             "--threads": args.threads}  # fmt: skip
    cmd = [sys.executable, str(Path(__file__).resolve()), *(f"{k}={v}" for k, v in flags.items())]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    with (out / "log.txt").open("w") as log:
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    if code != 0:
        print(f"  {task} {arm} seed {seed} FAILED (exit code {code}); its log: {out / 'log.txt'}", flush=True)
        return {"arm": arm, "task": task, "seed": seed, "failed": code}
    record = _record(job, tmp)
    final = record["eval"] if arm == "before" else record["curve"][-1]
    print(
        f"  {task} {arm} seed {seed}: {record.get('steps', '-')} steps, accuracy {final['correct']}/{final['n']}",
        flush=True,
    )
    return record


# ---- the figures --------------------------------------------------------------------------------------
def target_from(before: dict[str, Any], reference: list[dict[str, Any]]) -> float:
    """:data:`TARGET_SHARE` of the way from the untrained accuracy to the reference runs' mean accuracy at the budget.

    >>> round(target_from({"correct": 10, "n": 100}, [{"curve": [{"correct": 40, "n": 100}]}] * 2), 3)
    0.325
    """
    plateau = sum(r["curve"][-1]["correct"] / r["curve"][-1]["n"] for r in reference) / len(reference)
    start = before["correct"] / before["n"]
    return start + TARGET_SHARE * (plateau - start)


def time_to(run: dict[str, Any], target: float) -> float | None:
    """The training CPU seconds of the first evaluation at or above ``target``; None when none was.

    >>> time_to({"curve": [{"train_cpu_s": 61, "correct": 1, "n": 4}, {"train_cpu_s": 122, "correct": 3, "n": 4}]},
    ...         0.5)
    122
    """
    return next((p["train_cpu_s"] for p in run["curve"] if p["correct"] / p["n"] >= target), None)


def kept(times: list[float]) -> list[float]:
    """MLPerf's rule: with 3 or more runs, the fastest and the slowest dropped.

    >>> kept([5.0, 1.0, 3.0, 9.0]), kept([2.0, 1.0])
    ([3.0, 5.0], [1.0, 2.0])
    """
    ordered = sorted(times)
    return ordered[1:-1] if len(ordered) >= 3 else ordered


def share(k: int, n: int) -> str:
    """``29.0% [23.2, 35.6]``: the share and its 95% Wilson interval (grpo_lite.evaluation), in percent."""
    from grpo_lite.evaluation import wilson_interval

    lo, hi = wilson_interval(k, n)
    return f"{100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def pace(runs: list[dict[str, Any]]) -> str:
    """``steps/s | tokens/s`` of training CPU time, pooled over ``runs``: where the time went. "-" for records
    without the count (before the snapshots).

    >>> pace([{"steps": 4, "tokens": 900, "train_cpu_s": 100.0}, {"steps": 2, "tokens": 300, "train_cpu_s": 50.0}])
    '0.040 | 8.0'
    """
    cpu = sum(r["train_cpu_s"] for r in runs)
    tokens = f"{sum(r['tokens'] for r in runs) / cpu:.1f}" if all("tokens" in r for r in runs) else "-"
    return f"{sum(r['steps'] for r in runs) / cpu:.3f} | {tokens}"


def _arm_rows(runs: list[dict[str, Any]], target: float, floor: float) -> tuple[list[str], dict]:
    """The table's row of each arm, and each arm's mean time to target."""
    lines, means = [], {}
    for arm in ARMS:
        rows = [r for r in runs if r["arm"] == arm]
        if not rows:
            continue
        times = [time_to(r, target) for r in rows]
        rest = kept([max(floor, r["curve"][-1]["train_cpu_s"]) if t is None else t for r, t in zip(rows, times)])
        means[arm] = sum(rest) / len(rest)
        k, n = sum(r["curve"][-1]["correct"] for r in rows), sum(r["curve"][-1]["n"] for r in rows)
        groups, spread = sum(r["groups"][0] for r in rows), sum(r["groups"][1] for r in rows)
        lines.append(
            f"| {arm} | {len(rows)} | {sum(t is not None for t in times)} | {means[arm]:.0f} [{rest[0]:.0f}, "
            f"{rest[-1]:.0f}] | {share(k, n)} | {share(spread, groups) if groups else '-'} | "
            f"{sum(r['steps'] for r in rows) / len(rows):.1f} | {pace(rows)} | {min(len(r['curve']) for r in rows)} |"
        )
    return lines, means


def report(task: str, before: dict[str, Any], runs: list[dict[str, Any]], budget: float) -> str:
    """One task's table, its closing line and every run's curve."""
    target, provisional = TARGETS[task], ""
    reference = [r for r in runs if r["arm"] == "trl-lite-hp"]
    if target is None and reference:
        target, provisional = target_from(before, reference), " (PROVISIONAL: from this run's own trl-lite-hp runs)"
    if target is None:
        return f"{task}: no target (run --reference) and no trl-lite-hp runs to take one from"
    if target <= before["correct"] / before["n"]:  # every run would "reach" it at its first evaluation
        return (
            f"{task}: no time to target: the target {100 * target:.1f}%{provisional} is not above the untrained "
            f"model's {share(before['correct'], before['n'])} (the reference runs did not improve on it)"
        )
    # a run that never reaches the target counts at the budget, or later: at its own end when it overran the
    # budget (at least one step runs), and never sooner than a run that did reach it; another run's overrun (TRL's
    # defaults take minutes a step) does not move it
    reached = [t for t in (time_to(r, target) for r in runs) if t is not None]
    floor = max([budget, *reached])
    rows, means = _arm_rows(runs, target, floor)
    lines = [
        f"## {task} (levels {TASKS[task]}): before {share(before['correct'], before['n'])}, "
        f"target {100 * target:.1f}%{provisional}, budget {budget:.0f} CPU s (a run that never reaches the target "
        f"counts at {floor:.0f}, or at its own end when later)",
        "",
        "| arm | runs | reached | time to target, CPU s: mean of kept [range] | accuracy at the budget, pooled [95%] "
        "| groups with spread | steps (mean) | steps/s | generated tokens/s | points a curve (fewest) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
    ]
    if "trl-lite-hp" in means:
        base = means["trl-lite-hp"]
        ratios = ", ".join(f"{arm} {base / t:.2f}x" for arm, t in means.items() if arm != "trl-lite-hp" and t > 0)
        lines += ["", f"speedup over trl-lite-hp (its mean time to target / the arm's): {ratios}"]
        if "grpo-lite" in means:
            lines.append(
                f"time_to_target: {task} grpo-lite/trl-lite-hp speedup={base / means['grpo-lite']:.2f} "
                f"(goal: >= 2.00; runs that never reached the target count at the budget)"
            )
    lines += ["", "Every run's curve (the first saved weights at or above the target are its time; s: training CPU):"]
    lines += ["", "| arm | seed | steps | steps/s | generated tokens/s | weights saved: training CPU s / step / "
              "correct of n |", "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in sorted(runs, key=lambda r: (ARMS.index(r["arm"]), r["seed"])):
        points = ", ".join(f"{p['train_cpu_s']:.0f} s / {p['step']} / {p['correct']}" for p in r["curve"])
        lines.append(f"| {r['arm']} | {r['seed']} | {r['steps']} | {pace([r])} | {points} |")
    return "\n".join(lines)


def reference_line(task: str, before: dict[str, Any], runs: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """What ``--reference`` prints: the target to write in :data:`TARGETS`, with the runs it came from."""
    reference = [r for r in runs if r["arm"] == "trl-lite-hp"]
    if not reference:
        return f"{task}: no trl-lite-hp run finished: no target"
    finals = ", ".join(f"seed {r['seed']} {r['curve'][-1]['correct']}/{r['curve'][-1]['n']}" for r in reference)
    return (
        f'    "{task}": {target_from(before, reference):.4f},  # trl-lite-hp, {args.budget:.0f} CPU s, n={args.eval_n}: '
        f"before {before['correct']}/{before['n']}, at the budget {finals}"
    )


# ---- the whole benchmark ------------------------------------------------------------------------------
def jobs(args: argparse.Namespace) -> list[tuple[str, str, int]]:
    """Every run: each task's evaluation before training, then seed by seed every task's arms, trl-defaults last;
    a benchmark stopped part way has as many seeds of every arm and task (give or take one)."""
    arms = ("trl-lite-hp",) if args.reference else LITE_HP
    out: list[tuple[str, str, int]] = [("before", task, vs_trl.EVAL_SEED) for task in args.tasks]
    out += [(arm, task, seed) for seed in args.seeds for task in args.tasks for arm in arms]
    if not args.reference:
        out += [("trl-defaults", task, seed) for seed in args.defaults_seeds for task in args.tasks]
    return out


def arguments() -> argparse.Namespace:
    """The command line, with its preset's values where it left them out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument(
        "--quick", action="store_true", help="smoke configuration: 1 seed, 15 s a run, n=8, no trl-defaults run"
    )
    modes.add_argument("--reference", action="store_true", help="only trl-lite-hp: print the targets to write")
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS), help="the problem mixes")
    parser.add_argument(
        "--seeds", type=int, nargs="*", default=None, help="seeds of the grpo-lite arms (none: trl-defaults only)"
    )
    parser.add_argument("--defaults-seeds", type=int, nargs="*", default=None, help="seeds of trl-defaults")
    parser.add_argument("--budget", type=float, default=None, help="training CPU seconds a run (default 300)")
    parser.add_argument(
        "--snapshot-every", type=int, default=None, help="save the weights every N optimizer steps (0: the last only)"
    )
    parser.add_argument("--eval-n", type=int, default=None, help="held-out problems (default 200)")
    parser.add_argument("--eval-tokens", type=int, default=64, help="greedy tokens per held-out answer")
    parser.add_argument("--train-n", type=int, default=24, help="training problems (they come back within a run)")
    parser.add_argument("--max-steps", type=int, default=256, help="the schedule's steps (the budget stops first)")
    parser.add_argument("--parallel", type=int, default=2, help="runs side by side, one core each")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per run")
    parser.add_argument("--model", default=None, help="model path; default: the demo's SmolLM2 GGUF")
    parser.add_argument("--out", type=Path, default=None, help="keep every run's folder and time_to_target.json here")
    parser.add_argument(
        "--summarize", action="store_true", help="only print the figures of every run finished in --out"
    )
    parser.add_argument("--child", choices=("before", *ARMS), help=argparse.SUPPRESS)
    parser.add_argument("--task", choices=list(TASKS), default="one-step", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for key, value in PRESETS["quick" if args.quick else "reference" if args.reference else "default"].items():
        if getattr(args, key, None) is None or (args.quick and key == "train_n"):
            setattr(args, key, value)
    if args.model is None:
        from grpo_lite.memory.models import demo_model_path

        args.model = str(demo_model_path())
    return args


def main() -> int:
    args = arguments()
    if args.child:
        _child(args)
        return 0
    start = time.perf_counter()
    if args.summarize:
        if args.out is None or not args.out.is_dir():
            raise SystemExit("--summarize reads the runs in --out: give the --out of a benchmark, finished or not")
        done = finished(args.out)
        if (args.out / "time_to_target.json").is_file():  # the budget the runs had, not today's default
            args.budget = json.loads((args.out / "time_to_target.json").read_text())["args"]["budget"]
        args.tasks = [task for task in TASKS if any(t == task for _, t, _ in done)]
        print_figures([_record(job, args.out) for job in done], args)
        return 0
    vs_trl.check_cores(args.parallel, args.threads)
    todo = jobs(args)
    print(
        f"time_to_target: {len(todo)} runs ({', '.join(args.tasks)}), {args.budget:.0f} CPU s a run, weights saved "
        f"every {args.snapshot_every or 'last'} step(s) and evaluated after the run on n={args.eval_n}, "
        f"{args.parallel} at a time, {args.threads} thread(s) a run",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as scratch, ThreadPoolExecutor(max_workers=args.parallel) as pool:
        tmp = args.out or Path(scratch)
        # a run starts as soon as a core is free (not in waves: a wave waits for its longest run)
        records = [r for r in pool.map(lambda job: _run(job, args, tmp), todo) if "failed" not in r]
        if args.out:
            (args.out / "time_to_target.json").write_text(
                json.dumps({"runs": records, "args": vars(args)}, default=str)
            )
    print_figures(records, args)
    print(f"time_to_target: {time.perf_counter() - start:.0f} s of wall time in all")
    return 0


def print_figures(records: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """Each task's report (or, with ``--reference``, the target lines to write in :data:`TARGETS`)."""
    print()
    for task in args.tasks:
        before = next((r["eval"] for r in records if r["arm"] == "before" and r["task"] == task), None)
        if before is None:
            print(f"{task}: the evaluation before training failed: no figures")
            continue
        runs = [r for r in records if r["arm"] != "before" and r["task"] == task]
        print(reference_line(task, before, runs, args) if args.reference else report(task, before, runs, args.budget))
        print()


if __name__ == "__main__":
    sys.exit(main())
