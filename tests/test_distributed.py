"""Scaling out: shipped accelerate configs, launch commands, sharding detection, rank records, two gloo ranks.

FSDP and DeepSpeed do not run on CPU, so their configs are checked with accelerate's own config
classes and launcher preparation; two CPU (gloo) processes really train the tiny model (slow test).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo_lite.cli import relaunch as RL
from grpo_lite.errors import ConfigError, GrpoLiteError
from grpo_lite.scale import distributed as D
from grpo_lite.training.run import ranks as RR

TINY_RUN = [
    "--dataset",
    "synthetic",
    "--reward",
    "length",
    "--max-steps",
    "2",
    "--set",
    "num_generations=4",
    "--set",
    "per_device_train_batch_size=2",
    "--set",
    "max_completion_length=16",
    "--set",
    "save_strategy=no",
]


# ---- shipped configs, read back by accelerate -------------------------------------------------------
@pytest.mark.parametrize(
    "sharding, distributed_type, section, expected",
    [
        ("ddp", "MULTI_GPU", None, {}),
        (
            "zero2",
            "DEEPSPEED",
            "deepspeed_config",
            {"zero_stage": 2, "zero3_init_flag": False, "offload_param_device": "none"},
        ),
        (
            "zero3",
            "DEEPSPEED",
            "deepspeed_config",
            {"zero_stage": 3, "zero3_init_flag": True, "zero3_save_16bit_model": True},
        ),
        (
            "fsdp",
            "FSDP",
            "fsdp_config",
            {
                "fsdp_version": 2,
                "fsdp_reshard_after_forward": True,
                "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
                "fsdp_state_dict_type": "FULL_STATE_DICT",
                "fsdp_activation_checkpointing": False,
            },
        ),
    ],
)
def test_shipped_config_loads_in_accelerate(sharding, distributed_type, section, expected):
    from accelerate.commands.config.config_args import ClusterConfig

    path = D.config_path(sharding)
    cfg = ClusterConfig.from_yaml_file(path)
    assert str(cfg.distributed_type).endswith(distributed_type)
    assert (cfg.num_machines, str(cfg.mixed_precision)) == (1, "bf16")
    assert path.read_text().startswith(f'# grpo-lite, sharding "{sharding}"')
    got = getattr(cfg, section) if section else {}
    assert {k: got[k] for k in expected} == expected
    if section == "deepspeed_config":  # left to the training arguments ("auto"), else DeepSpeed and TRL disagree
        assert "gradient_accumulation_steps" not in got and "gradient_clipping" not in got


@pytest.mark.parametrize("sharding", ["ddp", "zero2", "zero3", "fsdp"])
def test_shipped_config_is_package_data_and_has_a_registry_row(sharding):
    assert D.config_path(sharding).is_file()
    assert D.SHARDINGS[sharding].config == f"{sharding}.yaml"


def _accelerate_env(cmd: list[str]) -> dict[str, str]:
    """What accelerate launch would set for the processes of ``cmd``, without launching anything."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    assert cmd[1:3] == ["-m", "accelerate.commands.launch"]
    args, defaults, mp_from_config = _validate_launch_command(launch_command_parser().parse_args(cmd[3:]))
    assert (args.module, args.training_script, args.training_script_args) == (True, "grpo_lite", ["train", "m"])
    if not args.use_deepspeed:
        return {**prepare_multi_gpu_env(args), "WORLD_SIZE": str(args.num_processes), "LOCAL_RANK": "0"}
    fields = list(defaults.deepspeed_config) + (["mixed_precision"] if mp_from_config else [])  # as launch_command()
    args.deepspeed_fields_from_accelerate_config = ",".join(fields)
    return prepare_deepspeed_cmd_env(args)[1]


@pytest.mark.parametrize("sharding", ["ddp", "zero2", "zero3", "fsdp"])
def test_accelerate_launch_sets_what_detect_sharding_reads(sharding):
    env = _accelerate_env(D.launch_command(["train", "m"], 4, sharding, cuda=True))
    assert D.detect_sharding(env) == sharding
    assert env["ACCELERATE_MIXED_PRECISION"] == "bf16"


def test_fsdp_launch_is_full_shard_with_layer_wrap():
    env = _accelerate_env(D.launch_command(["train", "m"], 2, "fsdp", cuda=True))
    assert (env["FSDP_VERSION"], env["FSDP_RESHARD_AFTER_FORWARD"], env["FSDP_AUTO_WRAP_POLICY"]) == (
        "2",
        "true",
        "TRANSFORMER_BASED_WRAP",
    )


# ---- launch commands and their errors ---------------------------------------------------------------
def test_cpu_launch_uses_torchrun_standalone():
    cmd = D.launch_command(["train", "m", "--max-steps=2"], 3, None, cuda=False, python="py")
    assert cmd == [
        "py",
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "3",
        "-m",
        "grpo_lite",
        "train",
        "m",
        "--max-steps=2",
    ]


def test_cuda_launch_uses_the_shipped_config_unless_given():
    assert D.launch_command(["train", "m"], 2, "zero2", cuda=True)[4] == str(D.config_path("zero2"))
    assert D.launch_command(["train", "m"], 2, "zero2", cuda=True, config_file="my.yaml")[4] == "my.yaml"


@pytest.mark.parametrize(
    "sharding, n, cuda, message",
    [
        ("none", 2, True, "sharding 'none' runs one process"),
        ("ddp", 1, True, "'ddp' needs at least 2 processes"),
        ("zero3", 2, False, r"'zero3' \(DeepSpeed ZeRO stage 3\) runs only on CUDA GPUs"),
        ("fsdp", 2, False, "on CPU use --sharding ddp"),
        ("zero4", 2, True, "sharding='zero4' is not valid; choose one of none, ddp, zero2, zero3, fsdp"),
        ("ddp", 0, True, "num_processes=0 must be a positive integer"),
    ],
)
def test_launch_command_rejects(sharding, n, cuda, message):
    with pytest.raises(ConfigError, match=message):
        D.launch_command(["train", "m"], n, sharding, cuda=cuda)


def test_one_process_zero3_launch_is_allowed_for_smoke_tests():
    cmd = D.launch_command(["train", "m"], 1, "zero3", cuda=True, python="python")
    assert cmd[3:7] == ["--config_file", str(D.config_path("zero3")), "--num_processes", "1"]


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, "none"),
        ({"WORLD_SIZE": "1", "LOCAL_RANK": "0"}, "none"),
        ({"WORLD_SIZE": "2", "LOCAL_RANK": "1"}, "ddp"),
        ({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2"}, "zero2"),
        ({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}, "zero3"),
        ({"ACCELERATE_USE_FSDP": "true", "WORLD_SIZE": "4"}, "fsdp"),
    ],
)
def test_detect_sharding(env, expected):
    assert D.detect_sharding(env) == expected


def test_detect_sharding_rejects_zero1():
    with pytest.raises(ConfigError, match="ZeRO stage 1 is not modelled"):
        D.detect_sharding({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "1"})


LAUNCH_ENV_ERRORS = [
    ({"WORLD_SIZE": "abc"}, "WORLD_SIZE='abc': torchrun and accelerate launch set these to whole numbers"),
    ({"WORLD_SIZE": "0", "LOCAL_RANK": "0"}, "WORLD_SIZE=0: torchrun and accelerate launch set these to whole numbers"),
    ({"WORLD_SIZE": "2", "RANK": "x", "MASTER_PORT": "p"}, "RANK='x', MASTER_PORT='p': torchrun and accelerate"),
    (
        {"WORLD_SIZE": "2", "LOCAL_RANK": "0", "RANK": "0"},
        "WORLD_SIZE=2 says this process is one of 2, but MASTER_ADDR (rank 0's host) is not set: start the processes "
        "with torchrun or accelerate launch, which set them (grpo-lite train --num-processes 2 does), or unset "
        "WORLD_SIZE to train in one process",
    ),
    ({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "1"}, "ZeRO stage 1 is not modelled"),
]


@pytest.mark.parametrize(("env", "says"), LAUNCH_ENV_ERRORS)
def test_the_launchers_variables_are_checked_before_accelerate_reads_them(
    env, says, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    import re

    from grpo_lite.cli import main

    with pytest.raises(ConfigError, match=re.escape(says)):
        D.launched_world_size(env)
    for key in ("WORLD_SIZE", "LOCAL_RANK", "RANK", "MASTER_ADDR", "MASTER_PORT", "ACCELERATE_USE_DEEPSPEED"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    argv = ["train", str(tiny_model_dir), *TINY_RUN, "--output-dir", str(tmp_path / "run")]
    assert main(argv) == 2  # not accelerate's ValueError traceback
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], err


def test_a_launched_process_with_its_variables_is_one_of_world_size():
    env = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
    assert D.launched_world_size(env) == 4 and D.launched_world_size({}) == 1


# ---- the CLI: options, the relaunched command line, relaunch guard -----------------------------------
def _train_parser():
    import argparse

    from grpo_lite.cli import train

    return train.add_parser(argparse.ArgumentParser().add_subparsers())


def test_the_ranks_rerun_the_command_line_with_the_folder_and_sharding_fixed(tiny_model_dir, monkeypatch):
    from grpo_lite.cli import build_parser, main

    _no_launch(monkeypatch)
    launched = []
    monkeypatch.setattr(RL.subprocess, "Popen", lambda cmd: launched.append(cmd) or SimpleNamespace(wait=lambda: 0))
    argv = ["train", str(tiny_model_dir), *TINY_RUN, "--reward", "soft_format", "--no-shared-prefix"]
    argv += ["--num-processes", "2"]
    assert main(argv) == 0
    (cmd,) = launched
    ranks_argv = cmd[cmd.index("grpo_lite") + 1 :]
    assert ranks_argv[: len(argv)] == argv and ranks_argv[-1] == "--sharding=ddp"
    given, ranks = vars(build_parser().parse_args(argv)), vars(build_parser().parse_args(ranks_argv))
    assert ranks["output_dir"] == ranks_argv[-2].removeprefix("--output-dir=") and ranks["sharding"] == "ddp"
    assert {k: v for k, v in ranks.items() if k not in ("output_dir", "sharding")} == {
        k: v for k, v in given.items() if k not in ("output_dir", "sharding")
    }


def test_launched_process_does_not_relaunch_and_checks_world_size(monkeypatch):
    parser = _train_parser()
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "localhost")
    assert RL.maybe_relaunch(parser.parse_args(["m", "--num-processes", "2"])) is None
    with pytest.raises(ConfigError, match="--num-processes 4 but this process was launched with WORLD_SIZE=2"):
        RL.maybe_relaunch(parser.parse_args(["m", "--num-processes", "4"]))


def test_one_process_trains_here(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(RL, "_detect_gpus", lambda: pytest.fail("one process must not probe GPUs"))
    assert RL.maybe_relaunch(_train_parser().parse_args(["m"])) is None


def test_more_processes_than_gpus_is_an_error(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(RL, "_detect_gpus", lambda: (2, 79.1))
    with pytest.raises(ConfigError, match="--num-processes 4 needs 4 GPUs, one per process; 2 found"):
        RL.maybe_relaunch(_train_parser().parse_args(["m", "--num-processes", "4"]))


def _no_launch(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(RL, "_detect_gpus", lambda: (0, None))
    monkeypatch.setattr(RL.subprocess, "Popen", lambda *a, **k: pytest.fail(f"launched processes: {a}"))


def _long_prompts(tmp_path: Path) -> Path:
    path = tmp_path / "long.jsonl"
    question = "How many apples are left? " + "The farmer counts the apples in every basket again. " * 60
    path.write_text(json.dumps({"question": question, "answer": "4"}) + "\n")
    return path


@pytest.mark.parametrize(
    ("dataset", "set_", "fragment"),
    [
        ("{tmp}/missing.jsonl", "max_completion_length=32", "missing.jsonl"),
        ("{long}", "max_completion_length=32", "has a context of 1024 tokens"),
        ("{long}", None, "and max_completion_length (256)"),  # the planner's shortest: no plan of the ranks fits
    ],
)
def test_a_bad_input_is_refused_once_before_the_ranks_start(
    tiny_model_dir, tmp_path, monkeypatch, capsys, dataset, set_, fragment
):
    _no_launch(monkeypatch)
    from grpo_lite.cli import main

    out = tmp_path / "run"
    dataset = dataset.format(tmp=tmp_path, long=_long_prompts(tmp_path))
    argv = ["train", str(tiny_model_dir), "--num-processes", "2", "--output-dir", str(out), "--dataset", dataset]
    assert main([*argv, *(["--set", set_] if set_ else []), "--reward", "length"]) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()  # no folder left


def test_a_recipes_bad_input_is_refused_before_the_ranks_start(tiny_model_dir, tmp_path, monkeypatch, capsys):
    _no_launch(monkeypatch)
    from grpo_lite.cli import main

    config = tmp_path / "r.yaml"
    config.write_text(
        f"model: {tiny_model_dir}\npreset: lora\nnum_processes: 2\ndataset: {_long_prompts(tmp_path)}\n"
        "rewards: [length]\ntrl:\n  max_completion_length: 64\n"
    )
    out = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert "and max_completion_length (64)" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("resume", [False, True])
def test_a_finished_runs_folder_is_refused_before_the_launcher_touches_it(
    tiny_model_dir, tmp_path, monkeypatch, capsys, resume
):
    """Issue 50: without --resume the launcher deleted the old run's ranks/rank0.json, then each rank failed in a
    40-line elastic traceback. Now refused as one process refuses it; with --resume the ranks start."""
    _no_launch(monkeypatch)
    launched = []
    monkeypatch.setattr(RL.subprocess, "Popen", lambda cmd: launched.append(cmd) or SimpleNamespace(wait=lambda: 0))
    from grpo_lite.cli import main

    out = tmp_path / "run"
    (out / "ranks").mkdir(parents=True)
    (out / "ranks" / "rank0.json").write_text('{"rank": 0}')
    (out / "run.json").write_text('{"status": "finished", "steps": 2}')
    (out / "checkpoint-2").mkdir()
    (out / "checkpoint-2" / "trainer_state.json").write_text("{}")
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    argv = ["train", str(tiny_model_dir), *TINY_RUN, "--num-processes", "2"]
    code = main([*argv, "--output-dir", str(out), *(["--resume"] if resume else [])])
    if resume:  # the ranks start (this fake launcher leaves no records: the check after it says so)
        assert len(launched) == 1
        return
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "already holds a run" in err[0] and "--resume" in err[0], err
    assert launched == [] and {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


# ---- rank records -----------------------------------------------------------------------------------
def _write_records(out: Path, *records: RR.RankRecord) -> None:
    (out / "ranks").mkdir(parents=True)
    for r in records:
        (out / "ranks" / f"rank{r.rank}.json").write_text(json.dumps(r.__dict__))


def test_check_ranks_accepts_a_full_world(tmp_path):
    _write_records(tmp_path, RR.RankRecord(1, 2, 2, 4, "gloo"), RR.RankRecord(0, 2, 2, 4, "gloo"))
    assert [r.rank for r in RR.check_ranks(tmp_path, 2)] == [0, 1]


@pytest.mark.parametrize(
    "records, message",
    [
        ([RR.RankRecord(0, 2, 2, 4, "gloo")], r"expected records of ranks 0..1 .* found \[0\]"),
        ([RR.RankRecord(0, 1, 2, 4, None), RR.RankRecord(0, 1, 2, 4, None)], r"found \[0, 0\]"),
        (
            [RR.RankRecord(0, 2, 2, 4, "gloo"), RR.RankRecord(1, 1, 2, 4, None)],
            r"ranks \[1\] ran with world size 1, not 2",
        ),
    ],
)
def test_check_ranks_rejects(tmp_path, records, message):
    (tmp_path / "ranks").mkdir()
    for i, r in enumerate(records):
        (tmp_path / "ranks" / f"rank{i}.json").write_text(json.dumps(r.__dict__))
    with pytest.raises(GrpoLiteError, match=message):
        RR.check_ranks(tmp_path, 2)


def test_rank_record_callback_counts_micro_batches_and_writes_its_rank(tmp_path):
    import torch
    from transformers import TrainerCallback, TrainerState

    from grpo_lite.training.report.callbacks import RankRecordCallback

    cb = RankRecordCallback(tmp_path)
    assert isinstance(cb, TrainerCallback)
    args = SimpleNamespace(process_index=3, world_size=4, per_device_train_batch_size=2)
    state = TrainerState(global_step=0)
    cb.on_train_begin(args, state, None)
    for _ in range(2):  # two optimizer steps of two micro-batches each
        cb.on_substep_end(args, state, None)
        state.global_step += 1
        cb.on_step_end(args, state, None)
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.fill_(0.5)
        model.bias.fill_(-1.0)
    cb.on_train_end(args, state, None, model=model)
    record = json.loads((tmp_path / "ranks" / "rank3.json").read_text())
    assert {k: record[k] for k in ("rank", "world_size", "steps", "local_samples", "micro_batches", "backend")} == {
        "rank": 3,
        "world_size": 4,
        "steps": 2,
        "local_samples": 8,
        "micro_batches": 4,
        "backend": None,
    }
    assert record["param_sum"] == pytest.approx(6 * 0.5 - 2.0)
    assert record["pid"] == os.getpid()


def test_the_launching_process_names_the_rank_that_failed_first(tiny_model_dir, tmp_path, monkeypatch, capsys):
    """Rank 0 wrote run.json with its own error (its collective failed) before rank 1 recorded the out-of-memory error
    that caused it: once the ranks have exited, the launching process names rank 1's error in run.json and says it
    with what to change, keeping rank 0's own error."""
    from grpo_lite.cli import main

    _no_launch(monkeypatch)
    out = tmp_path / "run"
    collective = "DistBackendError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer"

    def ranks_that_fail(cmd):
        def wait():  # what the two ranks leave: rank 0's run.json and both records, rank 1's error caught first
            out.mkdir(exist_ok=True)
            event = {"event": "failed", "after_step": 1, "error": collective}
            (out / "run.json").write_text(json.dumps({"status": "failed", "events": [event]}))
            oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 1.90 GiB"
            _write_records(
                out,
                RR.RankRecord(0, 2, 1, 4, "gloo", error=collective, failed_at=1000.5),
                RR.RankRecord(1, 2, 1, 4, "gloo", error=oom, advice="Use a larger GPU, or ...", failed_at=1000.0),
            )
            return 1

        return SimpleNamespace(wait=wait)

    monkeypatch.setattr(RL.subprocess, "Popen", ranks_that_fail)
    argv = ["train", str(tiny_model_dir), *TINY_RUN, "--output-dir", str(out)]
    assert main([*argv, "--num-processes", "2"]) == 1
    assert json.loads((out / "run.json").read_text())["events"] == [
        {
            "event": "failed",
            "after_step": 1,
            "error": "OutOfMemoryError on rank 1: CUDA out of memory. Tried to allocate 1.90 GiB",
            "rank0_error": collective,
            "advice": "Use a larger GPU, or ...",
        }
    ]
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("failed: OutOfMemoryError on rank 1: CUDA out of memory") and "Use a larger GPU" in last


# ---- the planner's per-device arithmetic and the doc rendered from it --------------------------------
def _bench():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_sharding.py"
    spec = importlib.util.spec_from_file_location("gpu_sharding", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def per_device():
    bench = _bench()
    return {r["sharding"]: r for r in bench.sharding_rows(bench.DOC_MODEL, 4, **bench.DOC_SETTINGS)}


@pytest.mark.parametrize(
    "sharding, weights, gradients, buckets",
    [
        ("ddp", 1, 1, 1),  # a full replica plus DDP's bucket copy of the gradients
        ("zero2", 1, 1 / 4, 0),  # gradients and optimizer state divided, weights whole
        ("zero3", 1 / 4, 1 / 4, 0),
        ("fsdp", 1 / 4, 1 / 4, 0),
    ],
)
def test_per_device_shares_over_four_processes(per_device, sharding, weights, gradients, buckets):
    one, row = per_device["none"], per_device[sharding]
    assert row["processes"] == 4
    assert row["weights"] == pytest.approx(one["weights"] * weights)
    assert row["gradients"] == pytest.approx(one["gradients"] * gradients)
    assert row.get("grad_buckets", 0.0) == pytest.approx(one["gradients"] * buckets)


def test_optimizer_state_division(per_device):
    monitor = 3 * 4096 * 8 / 2**30  # the update monitor's shadow moments (GiB), kept whole on every process
    assert per_device["fsdp"]["optimizer_state"] - monitor == pytest.approx(
        (per_device["none"]["optimizer_state"] - monitor) / 4
    )
    # DeepSpeed: fp32 master weights + fp32 Adam states, divided; the same for ZeRO-2 and ZeRO-3
    assert per_device["zero2"]["optimizer_state"] == pytest.approx(per_device["zero3"]["optimizer_state"])
    assert per_device["zero2"]["optimizer_state"] > per_device["fsdp"]["optimizer_state"]


def test_planner_shards_only_when_replicas_do_not_fit_and_keeps_the_batch_rule():
    bench = _bench()
    with bench._doc_extras():
        rows = bench.planner_rows("Qwen2.5-14B-Instruct", 8, (1, 4)) + bench.planner_rows("Qwen2.5-7B-Instruct", 24)
    assert not rows[0]["fits"]  # one 8 GB card cannot hold it
    assert rows[1]["fits"] and rows[1]["sharding"] in ("zero2", "zero3", "fsdp")
    assert [r["sharding"] for r in rows[2:]] == ["none", "ddp", "ddp", "ddp"]
    for r in rows[1:]:
        assert r["generation_batch"] % r["generations"] == 0
        assert r["generation_batch"] % (r["micro_batch"] * r["processes"]) == 0


def test_scaling_doc_tables_are_up_to_date():
    bench = _bench()
    page = Path(__file__).resolve().parents[1] / "docs" / "scaling.md"
    assert bench.update_doc(page, check=True), "run: python benchmarks/gpu_sharding.py --docs docs/scaling.md"


# ---- two gloo processes really train the tiny model -------------------------------------------------
def _assert_two_ranks_trained(out: Path) -> list[RR.RankRecord]:
    records = RR.check_ranks(out, 2)
    assert [(r.rank, r.world_size, r.steps, r.backend) for r in records] == [(0, 2, 2, "gloo"), (1, 2, 2, "gloo")]
    run = json.loads((out / "run.json").read_text())
    assert run["plan"]["num_processes"] == 2  # the record says what ran
    accumulation = run["settings"]["gradient_accumulation_steps"]
    assert all(r.local_samples == 2 * accumulation * 2 for r in records)  # steps x micro-batches x completions
    assert records[0].pid != records[1].pid
    # each rank trains on its own prompts; identical weights after: the gradients were all-reduced
    assert records[0].param_sum == pytest.approx(records[1].param_sum, rel=1e-9, abs=1e-9)
    return records


@pytest.mark.slow
def test_grpo_lite_train_num_processes_2_runs_two_ranks(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "grpo_lite",
        "train",
        str(tiny_model_dir),
        "--num-processes",
        "2",
        "--output-dir",
        str(out),
        *TINY_RUN,
    ]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    wall = time.perf_counter() - start
    assert done.returncode == 0, done.stderr[-3000:]
    assert "-m torch.distributed.run --standalone --nproc_per_node 2 -m grpo_lite train" in done.stderr
    _assert_two_ranks_trained(out)
    assert "rank 0: 2 steps" in done.stdout and "rank 1: 2 steps" in done.stdout
    print(f"two gloo processes, grpo-lite train --num-processes 2: {wall:.1f} s wall")
