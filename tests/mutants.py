"""Realistic bugs the suite must catch: each applied to a copy of the project, its tests run, none may pass.

Run: ``python tests/mutants.py`` (all, a few minutes on 2 cores; .ci/run runs it), ``python tests/mutants.py
--list``, or ``python tests/mutants.py NAME ...``. Exit status 0 when every mutant was killed, 1 when one
survived, 2 when a mutation no longer applies (the code moved: retarget its ``path`` and ``old`` text below).

Each mutant is one textual replacement that must match its file exactly once. The copy keeps the tree's layout
(the package, tests, docs, pyproject.toml), so the tests run there as here, importing the mutated package. A
mutant is killed when its tests fail (pytest's exit status 1); an error before any test ran (status 2 or more)
is reported as such, not counted as a kill. The wider, tool-driven run is ``mutmut run`` (docs/mutation.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COPY = ("grpo_lite", "tests", "tools", "docs", "benchmarks", "examples", "pyproject.toml", "README.md", "CHANGELOG.md")


@dataclass(frozen=True)
class Mutant:
    """A bug: ``old`` replaced by ``new`` in ``path`` (exactly one occurrence), and the tests that must fail."""

    name: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]
    why: str


MUTANTS = (
    Mutant(
        "step-down-from-base",
        "grpo_lite/training/attempts.py",
        "self.source, self.done, self.run.checkpoint = str(carried), reached, None",
        "self.source, self.done, self.run.checkpoint = self.inputs.spec.model_id, reached, None",
        ("tests/test_resilience.py::test_the_next_rung_starts_from_the_weights_of_the_step_reached[boundary]",),
        "after an OOM the next rung loads the base model instead of the weights reached",
    ),
    Mutant(
        "step-down-from-newest-checkpoint",
        "grpo_lite/training/attempts.py",
        "carried = build.carry_weights(trainer, self.inputs.tokenizer, out / name)",
        'carried = Path(__import__("shutil").copytree(max(out.glob("checkpoint-*")), out / name))',
        (
            "tests/test_resilience.py::"
            "test_a_run_that_saves_checkpoints_steps_down_from_the_weights_reached_not_its_newest_checkpoint",
        ),
        "in a run that saves checkpoints, the step down carries the newest checkpoint, not the weights reached",
    ),
    Mutant(
        "lock-released-before-final",
        "grpo_lite/training/pipeline.py",
        "        result = finish(loop, trainer, inputs, run)\n",
        "        run.release()\n        result = finish(loop, trainer, inputs, run)\n",
        ("tests/test_run_life.py::test_the_lock_is_held_until_the_final_model_and_run_json_are_written",),
        "the run's lock is given back before the final model and run.json are written: another run can take the folder",
    ),
    Mutant(
        "gguf-unaligned",
        "grpo_lite/export/gguf_file.py",
        "    writer = gguf.GGUFWriter(path=None, arch=arch.gguf_arch)\n",
        "    writer = gguf.GGUFWriter(path=None, arch=arch.gguf_arch)\n    writer.add_custom_alignment(1)\n",
        ("tests/test_export.py::test_every_tensor_lies_at_its_aligned_offset_as_the_writer_planned",),
        "the GGUF's tensors are written unaligned (general.alignment 1): every reader still reads them back",
    ),
    Mutant(
        "lora-default-in-one-copy",
        "grpo_lite/memory/step_settings.py",  # the LoRA rank estimate() assumes, written as a copy of defaults.LORA.r
        "    lora_r: int = LORA.r\n",
        "    lora_r: int = 8\n",
        (
            "tests/test_memory.py::test_estimate_assumes_the_lora_rank_the_ladder_plans_and_the_trainer_builds",
            "tests/test_one_place.py",
        ),
        "estimate() plans LoRA rank 8 while the ladder and the trainer use 16",
    ),
    Mutant(
        "sampling-buffers-dropped",
        "grpo_lite/memory/estimate.py",
        '        "work_buffers": T.sampling_buffers(arch, s),\n',
        "",
        ("tests/test_memory.py::test_every_component_by_hand_full_adamw",),
        "the plan forgets the fp32 vocabulary vectors of sampling a token",
    ),
    Mutant(
        "zero-advantage-divisor",
        "grpo_lite/training/step/zero_advantage.py",
        "scale: Tensor | float = factor * kept / rows",
        "scale: Tensor | float = factor",
        ("tests/test_zero_advantage.py::test_a_whole_run_with_the_skip_is_trls_run[grpo]",),
        "the kept rows' loss is not rescaled to TRL's per-row divisor when zero-advantage rows are skipped",
    ),
    Mutant(
        "zero-advantage-near-zero-skipped",
        "grpo_lite/training/step/zero_advantage.py",
        "zero = advantages == 0 if advantages.dim() == 1 else (advantages == 0).all(dim=-1)",
        "zero = advantages.abs() < 1e-6 if advantages.dim() == 1 else (advantages.abs() < 1e-6).all(dim=-1)",
        (
            "tests/test_zero_advantage.py::test_only_rows_exactly_zero_are_skipped",
            "tests/test_zero_advantage.py::test_an_advantage_near_zero_but_not_zero_is_trained_on_as_trl_does",
        ),
        "rows whose advantage is near zero but not zero are skipped as if zero: their gradient is lost",
    ),
    Mutant(
        "shared-prefix-groups-by-length",
        "grpo_lite/training/step/shared_prefix.py",
        "    key = prompt_ids.masked_fill(prompt_mask == 0, -1)\n    return torch.unique(key, dim=0, return_inverse=True)[1]",
        "    return torch.unique(prompt_mask.sum(1), return_inverse=True)[1]",
        ("tests/test_shared_prefix.py::test_prompts_of_equal_length_that_differ_in_one_token_are_scored_apart",),
        "rows are grouped by their prompt's length, not its tokens: different prompts of one length share one prompt",
    ),
    Mutant(
        "prefix-cache-columns-not-prefix",
        "grpo_lite/training/step/prefix_cache.py",
        "            break\n",
        "            continue\n",
        ("tests/test_shared_sampling.py::test_prompts_one_token_apart_that_agree_after_it_sample_as_trls",),
        "the shared sampling's prefix counts the columns where prompts agree, past the first where they differ",
    ),
    Mutant(
        "settings-inclusive-end-excluded",
        "grpo_lite/settings.py",
        'Range(lambda x: 0 < x <= 1, "in (0, 1]", 1.0)',
        'Range(lambda x: 0 < x < 1, "in (0, 1]", 1.0)',
        ("tests/test_settings_bounds.py",),
        "top_p=1 (its default, sampling from the whole vocabulary) is refused: the range's inclusive end excluded",
    ),
    Mutant(
        "settings-whole-zero-refused",
        "grpo_lite/settings.py",
        '">= 0 (0 never steps down)", least=0))',
        '">= 0 (0 never steps down)"))',
        ("tests/test_settings_bounds.py",),
        "oom_window_steps=0 (never step down, as its help says) is refused: the whole number's least left at 1",
    ),
    Mutant(
        "reward-penalty-flipped",
        "grpo_lite/rewards/functions.py",
        "return credit - self.trailing_penalty * len(",
        "return credit + self.trailing_penalty * len(",
        ("tests/test_rewards.py",),
        "text after the answer earns reward instead of losing it",
    ),
    Mutant(
        "resume-step-arithmetic",
        "grpo_lite/training/run/resume.py",
        "        return self.done + self.checkpoint_step\n",
        "        return self.checkpoint_step\n",
        ("tests/test_resilience.py::test_resume_after_a_step_down_goes_on_from_the_carried_weights",),
        "a resume after a step down forgets the steps the earlier attempts did",
    ),
    Mutant(
        "stop-string-cut",
        "grpo_lite/training/step/grpo_trainer.py",
        "    return [*ids[:end], eos_token_ids[0]]\n",
        "    return [*ids[: end - 1], eos_token_ids[0]]\n",
        ("tests/test_stop_strings.py",),
        "a completion stopped by a stop string loses its last token",
    ),
)


def mutated(mutant: Mutant, root: Path) -> str:
    """The text of ``mutant.path`` under ``root`` with the bug in; ValueError when ``old`` is not there exactly once."""
    path = root / mutant.path
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if text.count(mutant.old) != 1:
        raise ValueError(
            f"{mutant.name}: {mutant.path} holds {text.count(mutant.old)} copies of {mutant.old.strip()!r}, "
            "not 1: the code moved; retarget this mutant's path and old text in tests/mutants.py"
        )
    return text.replace(mutant.old, mutant.new)


def copy_tree(to: Path) -> Path:
    """The project's files a test run needs, copied under ``to`` (no virtual environment, no git)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "mutants")
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, to / name, ignore=ignore)
        elif src.is_file():
            shutil.copy2(src, to / name)
    return to


def run(mutant: Mutant) -> tuple[str, float, str]:
    """Apply ``mutant`` to a fresh copy, run its tests there: ("killed" | "survived" | "error", seconds, last line)."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        root = copy_tree(Path(tmp))
        (root / mutant.path).write_text(mutated(mutant, root), encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header", *mutant.tests]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR", "E "))]
    last = (lines[:1] or done.stdout.strip().splitlines()[-1:] or [""])[0]
    status = {0: "survived", 1: "killed"}.get(done.returncode, "error")
    if status == "error":
        last = f"pytest exited {done.returncode}: {(done.stdout + done.stderr).strip()[-600:]}"
    return status, seconds, last


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and their tests, run nothing")
    args = parser.parse_args(argv)
    known = {m.name: m for m in MUTANTS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown mutant(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    chosen = [known[n] for n in args.names] or list(MUTANTS)
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.why}\n    {m.path}\n    tests: {' '.join(m.tests)}")
        return 0
    for m in chosen:  # every mutation still applies before any test runs
        try:
            mutated(m, ROOT)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    survived = errors = 0
    for m in chosen:
        status, seconds, last = run(m)
        survived += status == "survived"
        errors += status == "error"
        print(f"{status:8} {m.name} ({seconds:.0f} s): {last}", flush=True)
    print(f"{len(chosen) - survived - errors} of {len(chosen)} mutants killed, {survived} survived, {errors} errors")
    return 1 if survived or errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
