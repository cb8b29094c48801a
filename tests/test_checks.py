"""Bad values stop early, as one line: settings and the output folder before anything loads, reward
values at the first step. From the CLI each is one ``error:`` line and exit code 2, without a traceback."""

from __future__ import annotations

import asyncio
import copy
import errno
import json
import math
import os
import re
import warnings

import numpy as np
import pytest
import torch
from tiny_run import TINY_RUN

from grpo_lite import ConfigError, DoesNotFitError, OutputDirError, RewardError, train
from grpo_lite.cli import main
from grpo_lite.rewards.checked import NoRewardWarning, check_rewards, check_values

FAST = [
    "--dataset",
    "synthetic",
    "--reward",
    "length",
    "--max-steps",
    "1",
    "--set",
    "max_completion_length=8",
    "--set",
    "num_generations=4",
    "--set",
    "per_device_train_batch_size=4",
    "--set",
    "save_strategy=no",
]


@pytest.fixture
def nothing_loads(monkeypatch):
    """Fail the test if train() gets as far as loading the tokenizer or the dataset."""
    from grpo_lite.training import prepare

    def loaded(*args, **kwargs):
        raise AssertionError("train() loaded its inputs before rejecting the setting")

    monkeypatch.setattr(prepare, "load_inputs", loaded)


# (--set value, the fragment the error line must contain): every bad value of the issue, and their kin
BAD_SETTINGS = [
    ("learning_rate=abc", "learning_rate='abc': learning_rate takes a number; e.g. learning_rate=1e-05"),
    ("learning_rate=-1", "learning_rate=-1 must be > 0; e.g. learning_rate=1e-05"),
    ("learning_rate=0", "learning_rate=0 must be > 0"),
    ("learning_rate=nan", "learning_rate=nan must be a finite number"),
    ("learning_rate=1e999", "learning_rate=inf must be a finite number"),
    ("adam_beta2=1", "adam_beta2=1 must be in [0, 1)"),
    ("weight_decay=-0.1", "weight_decay=-0.1 must be >= 0"),
    ("max_grad_norm=-1", "max_grad_norm=-1 must be >= 0 (0 turns clipping off)"),
    ("warmup_steps=-5", "warmup_steps=-5 must be >= 0"),
    ("temperature=0", "temperature=0 must be > 0"),
    ("top_p=1.5", "top_p=1.5 must be in (0, 1]"),
    ("save_steps=x", "save_steps='x': save_steps takes a number"),
    ("num_generations=2.5", "num_generations=2.5: num_generations takes a whole number or None"),
    ("bf16=maybe", "bf16='maybe': bf16 takes True, False or None"),
    ("lr_scheduler_type=cosin", "lr_scheduler_type='cosin' is not valid; choose one of linear, cosine"),
    ("lora_r=0", "lora_r=0 must be >= 1"),
    ("lora_dropout=1", "lora_dropout=1 must be in [0, 1)"),
    ("reward_weights=[1,2]", "reward_weights has 2 weights for 1 rewards"),
    ("reward_weights=2", "reward_weights=2: reward_weights takes a list of numbers or None; e.g. reward_weights=[2]"),
    ("reward_weights=x", "reward_weights='x': reward_weights takes a list of numbers or None"),  # no [x] to suggest
    ("learning_rat=1e-5", "did you mean 'learning_rate'"),
]


@pytest.mark.parametrize(("item", "fragment"), BAD_SETTINGS, ids=[i for i, _ in BAD_SETTINGS])
def test_bad_set_value_is_one_line_before_anything_loads(
    item, fragment, tiny_model_dir, tmp_path, capsys, nothing_loads
):
    out = tmp_path / "out"
    assert main(["train", str(tiny_model_dir), *FAST, "--set", item, "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and fragment in err[0], err
    assert not out.exists()  # not even the output folder was made


def test_bad_override_from_python_is_the_same_error(tiny_model_dir, tmp_path, nothing_loads):
    with pytest.raises(ConfigError, match=r"learning_rate=-1 must be > 0; e.g. learning_rate=1e-05"):
        train(str(tiny_model_dir), output_dir=tmp_path / "out", **{**TINY_RUN, "learning_rate": -1})
    with pytest.raises(ConfigError, match="reward_weights has 3 weights for 1 rewards"):
        train(str(tiny_model_dir), output_dir=tmp_path / "out", reward_weights=[1.0, 1.0, 1.0], **TINY_RUN)


def test_good_overrides_pass_typed():
    """Good values pass, and come back typed as TRL's parser types ``--set`` text (``"1e-5"`` -> 1e-05)."""
    from grpo_lite.recipe.values import check_overrides

    given = {
        "learning_rate": "1e-5",
        "warmup_steps": "3",
        "lr_scheduler_type": "cosine",
        "bf16": None,
        "report_to": ["tensorboard"],
        "optim": "adamw_8bit",
        "lora_target_modules": ["q_proj"],
        "dtype": "bfloat16",
        "save_total_limit": None,
        "reward_weights": [1, 0.5],
    }
    assert check_overrides(given, n_rewards=2) == {**given, "learning_rate": 1e-5, "warmup_steps": 3}
    with pytest.raises(ConfigError, match="reward_weights has 2 weights for 3 rewards"):
        check_overrides(given, n_rewards=3)  # the same values, one reward more: not a check that passes anything


def test_output_dir_that_is_a_file_is_one_line(tiny_model_dir, tmp_path, capsys, nothing_loads):
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    assert main(["train", str(tiny_model_dir), *FAST, "--output-dir", str(a_file)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"output folder {a_file} is a file, not a folder" in err[0], err
    with pytest.raises(OutputDirError, match=f"{a_file} is a file"):
        train(str(tiny_model_dir), output_dir=a_file / "run", **TINY_RUN)
    assert a_file.read_text() == "keep me"


def test_read_only_output_dir_is_one_line(tiny_model_dir, tmp_path, capsys, monkeypatch, nothing_loads):
    """Simulated (the tests may run as root, which writes anywhere): the write probe gets EROFS."""
    real_open = os.open

    def read_only(path, *args, **kwargs):
        if ".grpo-lite-write-test" in str(path):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    assert main(["train", str(tiny_model_dir), *FAST, "--output-dir", str(tmp_path / "ro")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot write in the output folder" in err[0] and "Read-only file system" in err[0], err


def test_too_little_disk_for_one_checkpoint_is_refused_before_the_model_loads(tiny_model_dir, tmp_path, monkeypatch):
    import shutil

    from grpo_lite.training import loading
    from grpo_lite.training.run import folder

    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(loading, "load_model", no_model)
    monkeypatch.setattr(
        folder.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**12, 10**12 - 2**20, 2**20)
    )
    with pytest.raises(OutputDirError, match=r"has 1.0 MiB free; one checkpoint of this run needs about 1\d.\d MiB"):
        train(str(tiny_model_dir), output_dir=tmp_path / "run", max_steps=1, method="lora", **TINY_RUN)


def test_checkpoint_size_estimate_matches_a_real_checkpoint(tiny_model_dir, tmp_path):
    from grpo_lite.training.run.checkpoints import _EXTRA_BYTES, checkpoint_bytes

    torch.set_num_threads(1)
    for method in ("lora", "full"):
        out = tmp_path / method
        result = train(str(tiny_model_dir), output_dir=out, max_steps=1, method=method, **TINY_RUN)
        names = ("adapter_model.safetensors", "model.safetensors", "optimizer.pt")
        written = sum((out / "checkpoint-1" / n).stat().st_size for n in names if (out / "checkpoint-1" / n).exists())
        estimated = checkpoint_bytes(result.plan) - _EXTRA_BYTES
        assert 0.8 < estimated / written < 1.2, (method, estimated, written)


def test_planner_advice_from_train_can_be_followed():
    """plan() advises shortening max_prompt_length, which train() refuses: train()'s message says what works."""
    from grpo_lite import plan
    from grpo_lite.training.replan import train_advice

    with pytest.raises(DoesNotFitError) as caught:
        plan("Llama-3.1-8B-Instruct", budget_gb=4)
    advice = train_advice(str(caught.value), 312)
    assert "max_prompt_length" not in advice and "The smallest budget that fits is" in advice
    assert "train() plans for the longest, 312 tokens: drop the longest rows" in advice
    assert "--set key=value; Python: key=value" in advice


# ---- reward values at the boundary -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "n", "fragment"),
    [
        (1.0, 2, "returned a float (1.0), not a list of 2 values"),
        ("0.5", 1, "returned a str ('0.5'), not a list of 1 values"),
        (["1.0", "0.0"], 2, "returned a str at index 0, not a number: ['1.0', '0.0']"),
        ([0.0], 2, "returned 1 values for 2 completions: [0.0]"),
        ([0.0, 0.0, 0.0], 2, "returned 3 values for 2 completions"),  # one too many, as one too few
        (np.zeros(3), 2, "returned 3 values for 2 completions"),
        (np.zeros((2, 1)), 2, "returned a ndarray (array("),  # 2-d: TRL could not put it in a column either
        ([0.0, 3.5e38], 2, "returned 3.5e+38 at index 1, past float32's range (±3.4e38), in which TRL keeps rewards"),
        ([-3.5e38], 1, "returned -3.5e+38 at index 0, past float32's range"),
        ([1e308, 0.0], 2, "returned 1e+308 at index 0, past float32's range"),
        (torch.zeros(2, device="meta"), 2, "returned a Tensor on the meta device, which holds no values"),
        (
            [torch.tensor(0.0, device="meta")],
            1,
            "returned a Tensor on the meta device, which holds no value at index 0",
        ),
        ([0.0, math.inf], 2, "returned inf at index 1: [0.0, inf]"),
        ([math.nan, 0.0], 2, "returned nan at index 0"),
        ([0.0, -math.inf], 2, "returned -inf at index 1"),
        ([0.0, object()], 2, "returned a object at index 1, not a number"),
        ([torch.tensor([1.0, 2.0]), 0.0], 2, "returned a Tensor at index 0, not a number"),
    ],
)
def test_bad_reward_values_name_the_function(values, n, fragment):
    with pytest.raises(
        RewardError,
        match="reward function 'my_reward' " + re.escape(fragment),
    ):
        check_values("my_reward", values, n)


def test_good_reward_values_pass_as_floats():
    assert check_values("r", [1, 0.5, None, True, np.float32(0.25), torch.tensor(2.0)], 6) == [
        1.0,
        0.5,
        None,
        1.0,
        0.25,
        2.0,
    ]
    assert check_values("r", (None, None), 2) == [None, None]
    assert check_values("r", [3.4e38, -3.4e38], 2) == [3.4e38, -3.4e38]  # float32's edge still fits


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (np.array([1.0, 0.5]), [1.0, 0.5]),
        (np.array([1.0, 0.5], dtype=np.float32), [1.0, 0.5]),
        (torch.tensor([1.0, 0.5]), [1.0, 0.5]),
        (np.array([1.0, None], dtype=object), [1.0, None]),
    ],
    ids=["numpy", "float32", "tensor", "none"],
)
def test_arrays_and_tensors_are_taken_as_trl_takes_them(values, expected):
    assert check_values("r", values, 2) == expected


def _bad_reward(kind: str):
    def reward(prompts, completions, **kwargs):
        n = len(completions)
        if kind == "exit":
            raise SystemExit(0)
        return {
            "strings": ["1.0"] * n,
            "scalar": 1.0,
            "inf": [math.inf] + [0.0] * (n - 1),
            "nan": [math.nan] * n,
            "short": [0.0],
            "huge": [1e308] * n,
            "meta": [torch.tensor(0.0, device="meta")] * n,
        }[kind]

    reward.__name__ = f"{kind}_reward"
    return reward


@pytest.mark.parametrize("kind", ["strings", "scalar", "inf", "nan", "short", "huge", "meta", "exit"])
def test_bad_reward_is_one_line_from_the_cli_at_the_first_step(kind, tiny_model_dir, tmp_path, capsys, monkeypatch):
    from grpo_lite.rewards import registry

    spec = registry.REWARDS["length"]
    monkeypatch.setitem(
        registry.REWARDS, "length", registry.RewardSpec("length", _bad_reward(kind), spec.description, 1.0)
    )
    torch.set_num_threads(1)
    out = tmp_path / "run"
    assert main(["train", str(tiny_model_dir), *FAST, "--output-dir", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("error")]
    said = "raised SystemExit: 0 at test_checks.py" if kind == "exit" else "returned"
    assert len(err) == 1 and f"error: reward function '{kind}_reward' {said}" in err[0], err

    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "failed" and record["history"] == [] and "RewardError" in record["events"][-1]["error"]


def test_async_reward_is_checked_too(tiny_model_dir, tmp_path):
    async def async_inf_reward(prompts, completions, **kwargs):
        return [math.inf] * len(completions)

    torch.set_num_threads(1)
    with pytest.raises(RewardError, match="reward function 'async_inf_reward' returned inf at index 0"):
        train(
            str(tiny_model_dir),
            output_dir=tmp_path / "run",
            max_steps=1,
            save_strategy="no",
            **{**TINY_RUN, "rewards": [async_inf_reward]},
        )


def test_every_reward_none_warns_once(tiny_model_dir, tmp_path, caplog):
    def never(prompts, completions, **kwargs):
        return [None] * len(completions)

    torch.set_num_threads(1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = train(
            str(tiny_model_dir),
            output_dir=tmp_path / "run",
            max_steps=2,
            save_strategy="no",
            **{**TINY_RUN, "rewards": [never]},
        )
    assert result.steps == 2
    mine = [w for w in seen if issubclass(w.category, NoRewardWarning)]
    assert len(mine) == 1 and "every reward function (never) returned None" in str(mine[0].message)
    assert not [r for r in caplog.records if "All reward functions returned None" in r.getMessage()]  # TRL's dump


def test_a_reward_that_is_all_none_beside_one_that_scores_trains_quietly(tiny_model_dir, tmp_path, caplog):
    def never(prompts, completions, **kwargs):
        return [None] * len(completions)

    torch.set_num_threads(1)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        train(str(tiny_model_dir), output_dir=tmp_path / "run", max_steps=1, save_strategy="no",
              **{**TINY_RUN, "rewards": ["length", never]})  # fmt: skip
    assert not [w for w in seen if issubclass(w.category, NoRewardWarning)]  # each completion has a reward
    assert not [r for r in caplog.records if "All reward functions returned None" in r.getMessage()]
    (row,) = [json.loads(line) for line in (tmp_path / "run" / "history.jsonl").read_text().splitlines()]
    assert row["rewards/never/mean"] is None and row["reward"] == row["rewards/length_reward/mean"] > 0


def test_wrapped_rewards_keep_what_trl_reads():
    from trl.trainer.utils import get_callable_name, is_async_callable

    from grpo_lite.rewards import length_reward

    async def later(prompts, completions, **kwargs):
        return [0.0] * len(completions)

    wrapped_sync, wrapped_async = check_rewards([length_reward, later])
    assert get_callable_name(wrapped_sync) == "length_reward" and wrapped_sync.value == length_reward.value
    assert is_async_callable(wrapped_async) and not is_async_callable(wrapped_sync)
    assert get_callable_name(wrapped_async) == "later"


def test_several_processes_are_not_launched_for_a_bad_setting_or_folder(tiny_model_dir, tmp_path, capsys, monkeypatch):
    """The launcher checks first: a rank's error would come back inside torchrun's traceback."""
    from grpo_lite.cli import relaunch

    def no_launch(*args, **kwargs):
        raise AssertionError("ranks were launched")

    monkeypatch.setattr(relaunch.subprocess, "Popen", no_launch)
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for extra, fragment in (
        (["--output-dir", str(a_file)], "is a file, not a folder"),
        (["--output-dir", str(tmp_path / "run"), "--set", "learning_rate=-1"], "learning_rate=-1 must be > 0"),
    ):
        assert main(["train", str(tiny_model_dir), *FAST, "--num-processes", "2", *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and fragment in err[0], err


def test_a_run_that_fails_before_training_leaves_no_folder_it_made(tiny_model_dir, tmp_path):
    out = tmp_path / "new"
    with pytest.raises(Exception, match="missing.jsonl"):
        train(str(tiny_model_dir), output_dir=out, **{**TINY_RUN, "dataset": str(tmp_path / "missing.jsonl")})
    assert not out.exists()


def test_a_reward_that_raises_is_called_once_and_said_in_one_line():
    calls = []

    def judge(prompts, completions, **kwargs):
        calls.append(len(completions))  # a slow judge, or one with side effects: once per batch, not per row
        return json.loads("the judge's reply")

    with pytest.raises(RewardError) as error:
        check_rewards([judge])[0](prompts=["q"] * 3, completions=["a", "b", "c"])
    assert calls == [3]
    assert re.fullmatch(  # the reward's own line, not json's innermost one
        r"reward function 'judge' raised JSONDecodeError: Expecting value: line 1 column 1 \(char 0\) at "
        r"test_checks\.py:\d+ on a batch of 3 completions; fix the reward, or return None for a completion it does "
        r"not apply to",
        str(error.value),
    )


@pytest.mark.parametrize("raised", [SystemExit(0), SystemExit(3), GeneratorExit()], ids=["exit0", "exit3", "gen"])
def test_a_reward_that_exits_is_a_reward_error_but_ctrl_c_stops(raised):
    def leaves(prompts, completions, **kwargs):
        raise raised

    async def leaves_later(prompts, completions, **kwargs):
        raise raised

    with pytest.raises(RewardError, match=f"reward function 'leaves' raised {type(raised).__name__}"):
        check_rewards([leaves])[0](prompts=["q"], completions=["a"])
    with pytest.raises(RewardError, match=f"reward function 'leaves_later' raised {type(raised).__name__}"):
        asyncio.run(check_rewards([leaves_later])[0](prompts=["q"], completions=["a"]))

    def interrupted(prompts, completions, **kwargs):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        check_rewards([interrupted])[0](prompts=["q"], completions=["a"])


def test_each_reward_gets_its_own_inputs():
    prompts = [[{"role": "user", "content": "Reverse: apple"}], [{"role": "user", "content": "Reverse: house"}]]
    completions, ids, target = ["elppa", "esuoh"], [[1, 2], [3, 4]], ["elppa", "esuoh"]
    kept = copy.deepcopy((prompts, completions, ids, target))

    def vandal(prompts, completions, completion_ids, target, **kwargs):
        prompts[0][0]["content"] = "edited"
        prompts.append(prompts[0])
        completion_ids[0].clear()
        target[1] = None
        completions.clear()
        return []

    seen = []

    def reader(prompts, completions, completion_ids, target, **kwargs):
        seen.append((prompts, completions, completion_ids, target))
        return [0.0] * len(completions)

    first, second = check_rewards([vandal, reader])
    inputs = dict(prompts=prompts, completions=completions, completion_ids=ids, target=target)
    with pytest.raises(RewardError, match="reward function 'vandal' returned 0 values for 2 completions: \\[\\]"):
        first(**inputs)
    assert second(**inputs) == [0.0, 0.0] and seen == [kept]
    assert (prompts, completions, ids, target) == kept  # TRL's lists too, which it logs after the rewards


def test_completions_without_any_reward_warn_once_each_way():
    def first_only(prompts, completions, **kwargs):
        return [None, 1.0]

    def never(prompts, completions, **kwargs):
        return [None, None]

    def second_only(prompts, completions, **kwargs):
        return [1.0, None]

    call = dict(prompts=["q", "q"], completions=["a", "b"])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(2):
            for f in check_rewards([first_only, never]):
                f(**call)
        both = check_rewards([first_only, second_only])  # each completion has a reward: nothing to say
        for f in both:
            f(**call)
    said = [str(w.message) for w in seen if issubclass(w.category, NoRewardWarning)]
    assert (
        said
        == [
            "every reward function (first_only, never) returned None for 1 of 2 completions of a step: TRL scores each "
            "of them 0. Return a number for the completions each reward applies to"
        ]
        * 2
    )  # once per run (each check_rewards call is a run)
