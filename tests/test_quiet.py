"""A run prints grpo-lite's own lines: the libraries' noise is filtered at its source, only around our calls,
and the plan is a two-line summary (the whole table behind --show-plan)."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import subprocess
import sys
import warnings

import pytest
import yaml

from grpo_lite.training.report.quiet import quiet_libraries

NOISE = (
    "Loading weights",
    "Writing model shards",
    "Converting and de-quantizing",
    "it/s]",
    "gemm_4bit_forward",
    "FutureWarning",
    "is_gradient_checkpointing",
    "memory not checked",
    "Paged optimizers",
)
FAST = ["--dataset", "synthetic", "--reward", "length", "--max-steps", "1", "--set", "max_completion_length=8"]
BNB = "bitsandbytes.backends.cpu.ops"
KERNELS = "kernels._internals.hf_hub"
HUB_KERNEL = "kernels-community/quantization-bitsandbytes"


def test_the_known_noise_is_dropped_and_the_rest_shows(caplog):
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_libraries():
            assert not hf_logging.is_progress_bar_enabled()
            logging.getLogger(BNB).warning("Failed to load CPU gemm_4bit_forward from kernels-community: %s", "x")
            logging.getLogger(BNB).warning("another bitsandbytes warning")
            logging.getLogger(KERNELS).warning(f"Skipping publisher trust check for '{HUB_KERNEL}' because ...")
            logging.getLogger(KERNELS).warning("Skipping publisher trust check for 'someone/else' because ...")
            warnings.warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)
            warnings.warn("a warning a user should see", FutureWarning)
        logging.getLogger(BNB).warning("Failed to load CPU gemm_4bit_forward from kernels-community: after")
    assert [str(w.message) for w in seen] == ["a warning a user should see"]
    assert [r.getMessage() for r in caplog.records] == [
        "another bitsandbytes warning",
        "Skipping publisher trust check for 'someone/else' because ...",
        "Failed to load CPU gemm_4bit_forward from kernels-community: after",
    ]
    assert hf_logging.is_progress_bar_enabled() == bars and not logging.getLogger(BNB).filters


def test_trls_dump_of_a_row_without_rewards_is_dropped(caplog):
    trl = logging.getLogger("trl.trainer.grpo_trainer")
    with caplog.at_level(logging.WARNING), quiet_libraries():
        trl.warning("[RANK 0] All reward functions returned None for the following kwargs:\n{'prompt': 'q'}\n...")
        trl.warning("All reward functions returned None for the following kwargs: ...")  # without accelerate's rank
        trl.warning("[RANK 0] another TRL warning")
    assert [r.getMessage() for r in caplog.records] == ["[RANK 0] another TRL warning"]


def test_checkpoints_saved_within_a_second_are_sorted_without_a_line(tmp_path):
    """A tiny model saves checkpoints less than a second apart: transformers then sorts them by step number, as
    grpo-lite's do, and says its mtime is not reliable; while grpo-lite's call runs, it does not say so."""
    from transformers.trainer_utils import sort_checkpoints

    for step in (3, 1, 2):
        (tmp_path / f"checkpoint-{step}").mkdir()
    said: list[str] = []
    seen = logging.Handler()
    seen.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("transformers.trainer_utils")  # its own handler: whatever stream it was given
    logger.addHandler(seen)
    try:
        for quiet in (True, False):
            logging.Logger.warning_once.cache_clear()  # type: ignore[attr-defined]  # transformers says it once
            with quiet_libraries() if quiet else contextlib.nullcontext():
                order = sort_checkpoints(str(tmp_path), use_mtime=True)
            assert [p.rsplit("-", 1)[1] for p in order] == ["1", "2", "3"]
            assert any("mtime may not be reliable" in line for line in said) is not quiet  # (the test can fail)
    finally:
        logger.removeHandler(seen)


@pytest.mark.parametrize("preset", ["lora", "qlora"])
def test_train_prints_only_its_own_lines(tiny_model_dir, tmp_path, capfd, preset):
    """QLoRA on a CPU too: its 8-bit optimizer is not the paged one (paging needs CUDA; bitsandbytes warns)."""
    from grpo_lite.cli import main

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        command = ["train", str(tiny_model_dir), *FAST, "--preset", preset, "--output-dir", str(tmp_path / "run")]
        assert main(command) == 0
    out, err = capfd.readouterr()
    printed = out + err
    assert not [n for n in NOISE if n in printed], printed
    assert not [w for w in seen if "is_gradient_checkpointing" in str(w.message) or "Paged" in str(w.message)]
    plan_lines = [line for line in out.splitlines() if line.startswith("plan: ")]
    assert (
        len(plan_lines) == 1 and "peak" in plan_lines[0] and "fits the 64.0 GiB of RAM available now" in plan_lines[0]
    )
    assert "--show-plan" in out and "┏" not in out.split("step 1/1")[0]  # no table before the first step
    assert out.splitlines()[-1].startswith("trained 1 steps")


def test_the_cpu_plan_says_what_its_memory_was_checked_against(monkeypatch):
    from grpo_lite.planning import hardware
    from grpo_lite.planning.choose import plan
    from grpo_lite.planning.tables import plan_headline, plan_summary

    checked = plan("SmolLM2-135M-Instruct", device="cpu")
    assert plan_headline(checked).endswith("fits the 64.0 GiB of RAM available now")
    assert plan_summary(checked).count("\n") == 1
    monkeypatch.setattr(hardware, "detect_ram", lambda: (None, "free RAM could not be read"))
    unknown = plan("SmolLM2-135M-Instruct", device="cpu")
    assert "not checked (no budget given, and the RAM available could not be read)" in plan_headline(unknown)
    budget = plan("Llama-3.2-1B-Instruct", 16)
    assert plan_summary(budget).startswith(f"plan: Llama-3.2-1B-Instruct: preset {budget.preset.name} fits 16 GB")
    assert f"peak {budget.estimate.total_gib:.2f} of {budget.budget_gib:.2f} GiB usable" in plan_summary(budget)


@pytest.mark.parametrize(
    ("command", "target"),
    [
        (["train", "some-model", "--show-plan"], "grpo_lite.api.train"),
        (["demo", "--show-plan"], "grpo_lite.demo.run_demo"),
    ],
)
def test_show_plan_reaches_train(command, target, monkeypatch):
    from grpo_lite.cli import main

    seen = {}

    def stop(*args, **kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(target, stop)
    assert main(command) == 130
    assert seen["show_plan"] is True


# Runs the code after it as on a CPU with or without AVX512-BF16 (env AVX512_BF16), whatever this one has, where the
# program's first import of TRL imports bitsandbytes (as PEFT did up to 0.21; 0.22 imports it later): bitsandbytes' CPU
# backend reads the feature once, when imported, and only with it looks up a hub kernel and logs the noise. Every line
# the libraries log is noted in the file named by env LOGGED, shown or not, so a test knows the noise was made.
AS_ON_A_CPU = """
import importlib.abc, importlib.machinery, logging, os, sys

class _Cpu(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "bitsandbytes.backends.cpu.ops":
            sys.modules["bitsandbytes.functional"].has_avx512bf16 = lambda: os.environ["AVX512_BF16"] == "1"
        if name == "trl":
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            run = spec.loader.exec_module

            def exec_module(module):
                import bitsandbytes
                run(module)

            spec.loader.exec_module = exec_module
            return spec
        return None

def _noted(self, record, handle=logging.Logger.handle):
    with open(os.environ["LOGGED"], "a") as logged:
        logged.write(record.name + ": " + " ".join(record.getMessage().split()) + chr(10))
    return handle(self, record)

logging.Logger.handle = _noted
sys.meta_path.insert(0, _Cpu())
"""


def _as_on_a_cpu(avx512_bf16: bool, code: str, *args: str, tmp_path, online: bool = False):
    """``code`` run in a new interpreter as on a CPU with or without AVX512-BF16; (the process, whether the kernel
    lookup's noise was logged, shown or not)."""
    logged = tmp_path / "logged"
    env = {**os.environ, "AVX512_BF16": str(int(avx512_bf16)), "LOGGED": str(logged), "HF_HUB_OFFLINE": "1"}
    if online:  # online without a network: the hub cannot be reached (no proxy answers, nothing is downloaded)
        env.update(HF_HUB_OFFLINE="0", HTTPS_PROXY="http://127.0.0.1:9", HTTP_PROXY="http://127.0.0.1:9")
    done = subprocess.run(
        [sys.executable, "-c", AS_ON_A_CPU + code, *args], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    lines = logged.read_text().splitlines() if logged.exists() else []
    return done, any(line.startswith(BNB) and "gemm_4bit_forward" in line for line in lines)


CLI = "import runpy; sys.argv[0] = 'grpo-lite'; runpy.run_module('grpo_lite', run_name='__main__')"


@pytest.mark.parametrize(
    ("avx512_bf16", "online"), [(True, False), (False, False), (True, True)], ids=["avx512_bf16", "without", "online"]
)
def test_a_recipe_error_on_the_cpu_is_the_only_line(tmp_path, avx512_bf16, online):
    """The first import of TRL imports bitsandbytes (PEFT up to 0.21 did; here on any version), whose CPU backend, on a
    CPU with AVX512-BF16, asks the kernels package for a hub kernel: that lookup's lines (kernels' and
    bitsandbytes') never show, the recipe error is printed alone, on either CPU, online or offline."""
    assert importlib.util.find_spec("bitsandbytes") is not None  # the import that looks the kernel up
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"model": "m", "preset": "lora", "device": "cpu", "trl": {"lerning_rate": 0.1}}))
    done, noisy = _as_on_a_cpu(avx512_bf16, CLI, "train", "--config", str(path), tmp_path=tmp_path, online=online)
    assert noisy == avx512_bf16  # the noise was made (the test can fail)
    assert done.returncode == 2 and "gemm_4bit_forward" not in done.stdout + done.stderr, done.stderr
    assert done.stderr.startswith(f"error: {path}: trl: unknown training setting(s): 'lerning_rate'"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "call",
    [
        "grpo_lite.train(MODEL, output_dir='run', lerning_rate=0.1)",
        "grpo_lite.simulate(grpo_lite.plan(MODEL, 8, preset='qlora'))",
    ],
    ids=["train", "simulate"],
)
def test_the_python_functions_that_import_bitsandbytes_first_keep_the_lookup_quiet(tiny_model_dir, tmp_path, call):
    """train() (its recipe check imports TRL) and simulate() (a QLoRA plan's 4-bit layers) import bitsandbytes
    first in a program: on a CPU with AVX512-BF16 nothing of its kernel lookup is printed, nor the deprecation
    warnings of the names TRL and PEFT call."""
    code = f"import grpo_lite\nMODEL = {str(tiny_model_dir)!r}\ntry:\n    {call}\nexcept grpo_lite.GrpoLiteError:\n    pass"
    done, noisy = _as_on_a_cpu(True, code, tmp_path=tmp_path)
    assert done.returncode == 0 and noisy, done.stderr  # the noise was made (the test can fail)
    assert "kernels-community" not in done.stdout + done.stderr and "FutureWarning" not in done.stderr, done.stderr
