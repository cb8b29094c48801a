"""``grpo-lite train`` speaks ``trl grpo`` (docs/from_trl.md): a ``trl grpo`` command line or ``--config`` YAML,
``trl grpo`` replaced by ``grpo-lite train``, trains with every setting the user wrote as written and the rest
planned; what grpo-lite cannot plan, and an unknown flag, are one line, exit code 2, nothing written."""

from __future__ import annotations

import json
import re

import pytest

from grpo_lite import ConfigError, DataError
from grpo_lite.cli import main
from grpo_lite.cli.trl_form import is_trl_form, parse, train_arguments, trl_spelling

# the settings of a job the tiny model runs in a second: 4 completions of 8 tokens, one step
JOB = {
    "learning_rate": 1e-3,
    "num_generations": 4,
    "per_device_train_batch_size": 4,
    "max_completion_length": 8,
    "beta": 0.0,  # TRL's own default, written: kept as written
    "save_strategy": "no",
}

REWARDS = '''
def reward_num_unique_letters(completions, **kwargs):
    """TRL's quick start reward: the number of unique letters of each completion."""
    return [float(len(set(c[0]["content"] if isinstance(c, list) else c))) for c in completions]
'''


@pytest.fixture
def job(tmp_path, monkeypatch):
    """A ``trl grpo`` job's data (a conversational ``prompt`` and a ``solution``) and the user's reward module."""
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + 1?"}], "solution": f"${i + 1}$"} for i in range(8)]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "my_rewards.py").write_text(REWARDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return data


def _flags(settings: dict) -> list[str]:
    return [word for key, value in settings.items() for word in (f"--{key}", str(value))]


def _fixed(out) -> dict:
    return json.loads((out / "run.json").read_text())["plan"]["fixed"]


def test_a_trl_grpo_command_line_trains_with_each_setting_as_written(tiny_model_dir, job, tmp_path, capsys):
    """TRL's reward names and an import path; every GRPOConfig field written is the run's, TRL's default value
    too (beta 0.0); a field left out (temperature) is the plan's; seed is grpo-lite's 0, not TRL's 42."""
    out = tmp_path / "run"
    argv = ["train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", str(job)]
    argv += ["--reward_funcs", "accuracy_reward", "my_rewards.reward_num_unique_letters"]
    assert main([*argv, *_flags(JOB), "--max_steps", "1", "--output_dir", str(out)]) == 0
    record = json.loads((out / "run.json").read_text())
    assert {key: _fixed(out).get(key) for key in JOB} == JOB
    assert "temperature" not in record["plan"]["fixed"] and record["steps"] == 1
    assert record["rewards"] == ["accuracy_reward", "reward_num_unique_letters"]
    assert record["recipe"]["seed"] == 0
    assert f"model in {out / 'final'}" in capsys.readouterr().out


def test_the_same_job_as_a_yaml_config_with_flags_over_it(tiny_model_dir, job, tmp_path):
    """TRL's precedence: the YAML's values, the flags over them; ``--use_peft --lora_r 4`` trains a rank-4 adapter."""
    out = tmp_path / "run"
    config = {"model_name_or_path": str(tiny_model_dir), "dataset_name": str(job), "reward_funcs": ["accuracy_reward"]}
    config.update(JOB, max_steps=1, output_dir=str(out), lora_r=8)
    (tmp_path / "job.yaml").write_text(json.dumps(config))  # JSON is YAML
    argv = ["train", "--config", str(tmp_path / "job.yaml"), "--learning_rate", "2e-3", "--use_peft", "--lora_r", "4"]
    assert main(argv) == 0
    fixed = _fixed(out)
    assert {key: fixed.get(key) for key in JOB} == {**JOB, "learning_rate": 2e-3}
    assert json.loads((out / "final" / "adapter_config.json").read_text())["r"] == 4
    differences = {d["key"]: d for d in json.loads((out / "run.json").read_text())["trl_differences"]}
    assert (differences["learning_rate"]["value"], differences["learning_rate"]["source"]) == (2e-3, "you")
    assert differences["save_steps"]["source"] == "grpo-lite" and "lr_scheduler_type" not in differences


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--lerning_rate", "1e-3"], "unrecognized arguments: --lerning_rate 1e-3 (did you mean --learning_rate?)"),
        (["--learning_rate", "fast"], "argument --learning_rate/--learning-rate: invalid float value: 'fast'"),
    ],
)
def test_an_unknown_flag_is_argparses_line_with_the_closest_name(extra, said, tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exc:
        main(["train", "--model_name_or_path", str(tiny_model_dir), "--output_dir", str(out), *extra])
    assert exc.value.code == 2 and not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("usage: grpo-lite train --model_name_or_path MODEL") and len(err) == 2
    assert err[1] == f"grpo-lite train: error: {said}"


def test_an_unknown_yaml_key_is_named_as_an_unknown_flag_is(tmp_path, capsys):
    (tmp_path / "job.yaml").write_text("model_name_or_path: m\nlerning_rate: 0.001\n")
    with pytest.raises(SystemExit):
        parse(["--config", str(tmp_path / "job.yaml")])
    said = f"--config {tmp_path / 'job.yaml'}: unknown keys 'lerning_rate' (did you mean 'learning_rate'?)"
    assert capsys.readouterr().err.splitlines()[-1] == f"grpo-lite train: error: {said}"


def test_what_the_user_wrote_is_told_from_trls_defaults(tmp_path):
    """A flag in either spelling and a YAML key count as written, even at TRL's default; the rest does not."""
    (tmp_path / "job.yaml").write_text("model_name_or_path: m\nbeta: 0.0\nlearning_rate: 0.001\n")
    values, written = parse(
        ["--config", str(tmp_path / "job.yaml"), "--num-generations", "4", "--learning_rate", "2e-3"]
    )
    assert {"beta", "num_generations", "learning_rate", "model_name_or_path"} <= written
    assert not written & {"temperature", "seed", "lora_r"}
    assert (values["learning_rate"], values["num_generations"], values["beta"]) == (2e-3, 4, 0.0)


@pytest.mark.parametrize(
    ("argv", "trl"),
    [
        (["--model_name_or_path", "m"], True),
        (["--dataset-name", "d", "--model-name-or-path", "m"], True),
        (["m", "--model_name_or_path", "m"], False),  # grpo-lite's MODEL first: its own flags
        (["--budget-gb", "8", "--dataset", "synthetic"], False),
        ([], False),
    ],
)
def test_trl_grpos_form_is_told_by_its_flags(argv, trl):
    assert is_trl_form(argv) is trl


@pytest.mark.parametrize(("text", "trl"), [("model_name_or_path: m\n", True), ("model: m\ndtype: bfloat16\n", False)])
def test_trl_grpos_form_is_told_by_its_yaml_keys(text, trl, tmp_path):
    """TRL's flat keys; a grpo-lite recipe's ``model:`` and ``dtype:`` (also a ModelConfig name) are not."""
    (tmp_path / "job.yaml").write_text(text)
    assert is_trl_form(["--config", str(tmp_path / "job.yaml")]) is trl


def test_the_model_arguments_are_built_as_trl_grpo_builds_them():
    """revision and attn_implementation in model_init_kwargs, dtype as the run's dtype, each only when written;
    --load_in_4bit is grpo-lite's qlora method (its NF4), with a LoRA as trl grpo's get_peft_config makes it."""
    argv = ["--model_name_or_path", "m", "--model_revision", "v1", "--attn_implementation", "eager"]
    kwargs = train_arguments([*argv, "--model_init_kwargs", '{"device_map": "cpu", "revision": "v2"}'])
    assert kwargs["model_init_kwargs"] == {"revision": "v2", "attn_implementation": "eager", "device_map": "cpu"}
    kwargs = train_arguments(argv)
    assert kwargs["model_init_kwargs"] == {"revision": "v1", "attn_implementation": "eager"}
    assert "dtype" not in kwargs and "peft_config" not in kwargs and kwargs["method"] is None
    kwargs = train_arguments(["--model_name_or_path", "m", "--dtype", "bfloat16", "--load_in_4bit", "--use_peft"])
    assert kwargs["dtype"] == "bfloat16" and "model_init_kwargs" not in kwargs and kwargs["method"] == "qlora"
    assert kwargs["peft_config"].r == 16 and kwargs["rewards"] is None


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--load_in_8bit"], "--load_in_8bit: grpo-lite plans 16/32-bit weights or 4-bit NF4"),
        (["--bnb_4bit_quant_type", "fp4"], "--bnb_4bit_quant_type: grpo-lite's 4-bit weights are NF4"),
        (["--dataset_streaming"], "--dataset_streaming: grpo-lite measures every prompt"),
        (["--max_tool_calling_iterations", "2"], "--max_tool_calling_iterations: grpo-lite does not plan tool calls"),
        (["--model_init_kwargs", "{bad"], "--model_init_kwargs {bad: not JSON"),
        (["--load_in_4bit", "--method", "full"], "--load_in_4bit loads the weights in 4 bits (the qlora method)"),
    ],
)
def test_a_trl_grpo_flag_grpo_lite_cannot_plan_is_named(extra, said):
    with pytest.raises(ConfigError, match=said.replace("(", r"\(").replace(")", r"\)")):
        train_arguments(["--model_name_or_path", "m", *extra])


@pytest.mark.parametrize(
    "extra",
    [
        ["--load_in_8bit", "false"],
        ["--bnb_4bit_quant_type", "nf4"],
        ["--use_bnb_nested_quant", "true"],
        ["--dataset_streaming", "false"],
        ["--load_in_4bit", "--method", "qlora"],
    ],
)
def test_those_flags_at_what_grpo_lite_does_pass(extra):
    """Each of those flags written at the value grpo-lite plans (TRL's default, or grpo-lite's NF4) is taken."""
    assert train_arguments(["--model_name_or_path", "m", *extra])["model"] == "m"


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--use_vllm"], "drop the GPU-only options: use_vllm"),
        (["--push_to_hub"], "push_to_hub=True: a grpo-lite run does not publish to the Hugging Face Hub"),
        ([], "grpo-lite train needs --model_name_or_path MODEL"),
        (["--resume_from_checkpoint", "x"], "resume_from_checkpoint cannot be set here: pass resume=True (--resume)"),
    ],
)
def test_what_grpo_lite_refuses_is_one_line_and_exit_2(extra, said, tiny_model_dir, job, tmp_path, capsys):
    out = tmp_path / "run"
    model = ["--model_name_or_path", str(tiny_model_dir)] if extra else []
    argv = ["train", "--dataset_name", str(job), "--reward_funcs", "accuracy_reward", *model, *extra]
    assert main([*argv, "--output_dir", str(out), "--max_steps", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and not out.exists()


@pytest.mark.parametrize("use_vllm", [False, True])
def test_use_vllm_on_a_cpu_plan_is_named_not_a_missing_preset(use_vllm, tiny_model_dir):
    """The CPU plan (no budget) says why vLLM is refused; without it the same plan is found."""
    from grpo_lite.planning.choose import plan

    if not use_vllm:
        assert plan(str(tiny_model_dir), device="cpu", use_vllm=False).fits
        return
    with pytest.raises(ConfigError, match="drop the GPU-only options: use_vllm"):
        plan(str(tiny_model_dir), device="cpu", use_vllm=True)


def test_a_dataset_split_is_loaded_as_trl_grpo_loads_it(tmp_path):
    """``--dataset_train_split test`` of a folder: that split's rows, through datasets.load_dataset; the train split
    alone is passed to train() as written; a hub id offline with a config is one line saying what to do."""
    (tmp_path / "train.jsonl").write_text('{"prompt": "a"}\n')
    (tmp_path / "test.jsonl").write_text('{"prompt": "b"}\n{"prompt": "c"}\n')
    base = ["--model_name_or_path", "m", "--dataset_name", str(tmp_path)]
    assert train_arguments([*base, "--dataset_train_split", "test"])["dataset"]["prompt"] == ["b", "c"]
    assert train_arguments(base)["dataset"] == str(tmp_path)
    with pytest.raises(DataError, match="save that split to a local jsonl file and pass its path as --dataset_name"):
        train_arguments(["--model_name_or_path", "m", "--dataset_name", "owner/name", "--dataset_config", "main"])


def test_use_peft_false_trains_every_weight_and_a_misfit_names_the_rung_that_fits() -> None:
    """``--use_peft false`` is trl grpo's full fine-tuning: the plan keeps every weight trained (the full rungs);
    left out, the planner may choose LoRA. When no full rung fits, the one line names the rung that would."""
    from grpo_lite.memory.models import resolve_model
    from grpo_lite.training.fit import _other_method

    assert train_arguments(["--model_name_or_path", "m", "--use_peft", "false"])["method"] == "full"
    assert train_arguments(["--model_name_or_path", "m"])["method"] is None  # not written: the planner's
    assert train_arguments(["--model_name_or_path", "m", "--use_peft", "false", "--method", "galore"])["method"] == (
        "galore"
    )
    spec = resolve_model("Llama-3.2-1B-Instruct")  # a known config: planned without its weights
    asked = {"device": "cuda", "budget_gb": 8, "max_prompt_length": 256}
    said = _other_method("full", spec, "gsm8k", asked)
    assert said.startswith("method=full does not fit; the planner's galore") and said.endswith(
        "pass --method galore (Python: method='galore'). "
    )  # GaLore trains every weight too: the rung a use_peft false job can take
    assert trl_spelling(said).endswith("pass --method galore (Python: method='galore'). ")
    said = _other_method("galore", spec, "gsm8k", {**asked, "budget_gb": 4})
    assert said.endswith("rung fits, peak 3.31 GiB: pass --method lora (Python: method='lora'). ")
    assert trl_spelling(said).endswith("rung fits, peak 3.31 GiB: pass --use_peft (Python: method='lora'). ")
    assert _other_method("full", spec, "gsm8k", {**asked, "budget_gb": 1}) == ""  # nothing fits 1 GB: no rung named


# ---- what the run says to change, spelled as the trl form takes it -------------------------------------------
def _named_flags(line: str) -> list[str]:
    """The flags a line names for the run's command: ``--key value`` pairs, up to the Python spelling."""
    return line.split(" (Python")[0].split(": ")[-1].split()


def test_a_job_that_does_not_fit_says_what_to_change_in_the_trl_form(tiny_model_dir, job, tmp_path, capsys):
    """The planner's advice names the settings as flags of this form (not grpo-lite's ``--set key=value``) and the
    launch as accelerate's; an error made after the command is spelled as grpo-lite's own again."""
    out = tmp_path / "run"
    argv = ["train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", str(job), "--budget_gb", "1"]
    argv += ["--reward_funcs", "accuracy_reward", *_flags({"num_generations": 64, "max_completion_length": 1000})]
    argv += ["--per_device_train_batch_size", "64"]
    assert main([*argv, "--output_dir", str(out)]) == 2 and not out.exists()
    err = capsys.readouterr().err.strip()
    assert "smallest budget that fits is 22 GB" in err and "--set" not in err and "--num-processes" not in err
    assert "(--key value; Python: key=value)" in err
    assert "(accelerate launch --num_processes N -m grpo_lite train ..., with an accelerate --config_file" in err
    assert str(ConfigError("lower it: --set num_generations=4")) == "lower it: --set num_generations=4"


HEALTH_REWARDS = '''
def same_for_all(completions, **kwargs):
    """One score for every completion: no group has an advantage."""
    return [1.0] * len(completions)
'''


@pytest.mark.slow
def test_a_health_remedy_of_a_trl_form_run_works_as_written_in_that_form(tiny_model_dir, job, tmp_path, monkeypatch):
    """Every completion cut at 4 tokens, every group one score: the remedies (the line and run.json) name the
    planner's numbers as this form's flags, and those flags are taken by this form's parser as written."""
    from dataclasses import replace

    from grpo_lite.training.report import health

    monkeypatch.setattr(health, "HEALTH", replace(health.HEALTH, window_steps=3))
    (tmp_path / "my_health.py").write_text(HEALTH_REWARDS)
    out = tmp_path / "run"
    argv = ["train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", str(job)]
    argv += ["--reward_funcs", "my_health.same_for_all", *_flags({**JOB, "max_completion_length": 4})]
    assert main([*argv, "--max_steps", "3", "--output_dir", str(out)]) == 0
    events = json.loads((out / "run.json").read_text())["events"]
    remedies = {e["finding"]: e["remedy"] for e in events if e["event"] == "health"}
    assert set(remedies) == {"length_cut", "zero_spread"} and "--set" not in " ".join(remedies.values())
    for remedy in remedies.values():
        flags = _named_flags(remedy.split("; or ")[0])
        values, written = parse(["--model_name_or_path", "m", *flags])
        names = {flag[2:] for flag in flags if flag.startswith("--")}
        assert names and names <= written, remedy
        assert all(str(values[name]) == flags[flags.index(f"--{name}") + 1] for name in names)
    assert int(remedies["length_cut"].split("--max_completion_length ")[1].split()[0]) > 4


# ---- TRL's dataset mixtures (datasets: in the YAML) ------------------------------------------------------------
def _mixture_job(tmp_path, job, **more) -> list[str]:
    """A trl grpo YAML whose data is a mixture of two local files, three quarters from the first."""
    doubled = tmp_path / "doubled.jsonl"
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} * 2?"}], "solution": f"${2 * i}$"} for i in range(8)]
    doubled.write_text("".join(json.dumps(row) + "\n" for row in rows))
    datasets = [
        {"path": "json", "data_files": str(job), "columns": ["prompt", "solution"], "fraction": 0.75},
        {"path": "json", "data_files": str(doubled), "fraction": 0.25},
    ]
    config = {"model_name_or_path": "m", "reward_funcs": ["accuracy_reward"], "datasets": datasets, **more}
    (tmp_path / "job.yaml").write_text(json.dumps(config))
    return ["--config", str(tmp_path / "job.yaml")]


def test_a_datasets_mixture_is_loaded_as_trl_grpo_loads_it(job, tmp_path):
    """TRL's get_dataset: each entry's rows (its columns), the fractions as shares of the largest mixture that
    oversamples none (8 and 8 rows at 3:1: 8 + 3); with dataset_name too, the mixture is the data, as in trl grpo."""
    dataset = train_arguments(_mixture_job(tmp_path, job, dataset_name="ignored.jsonl"))["dataset"]
    questions = [row["prompt"][0]["content"] for row in dataset]
    assert questions == [f"What is {i} + 1?" for i in range(8)] + [f"What is {i} * 2?" for i in range(3)]
    assert dataset.column_names == ["prompt", "solution"]


def test_a_datasets_mixture_trains(tiny_model_dir, job, tmp_path):
    out = tmp_path / "run"
    argv = _mixture_job(tmp_path, job)
    config = json.loads((tmp_path / "job.yaml").read_text())
    (tmp_path / "job.yaml").write_text(
        json.dumps({**config, **JOB, "model_name_or_path": str(tiny_model_dir), "max_steps": 1, "output_dir": str(out)})
    )
    assert main(["train", *argv]) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["steps"] == 1 and record["rewards"] == ["accuracy_reward"]


@pytest.mark.parametrize(
    ("entry", "more", "error", "said"),
    [
        ({"path": "owner/name"}, {}, DataError, "datasets: path 'owner/name' is a Hugging Face hub id and loading it "
         "needs the hub (HF_HUB_OFFLINE is set); pass a local copy"),
        ({"path": "json", "data_files": "missing.jsonl"}, {}, DataError, "datasets: the mixture does not load"),
        ({"path": "json", "data_files": "{job}"}, {"streaming": True}, ConfigError, "--streaming: grpo-lite measures"),
        ({"path": "json", "data_files": "{job}"}, {"dataset_train_split": "test"}, DataError,
         "--dataset_train_split test: the datasets: mixture has the splits train; name one"),
    ],
)  # fmt: skip
def test_a_datasets_mixture_that_cannot_run_is_one_line(entry, more, error, said, job, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    entry = {key: value.format(job=job) for key, value in entry.items()}
    config = {"model_name_or_path": "m", "datasets": [entry], **more}
    (tmp_path / "job.yaml").write_text(json.dumps(config))
    with pytest.raises(error, match=re.escape(said)):
        train_arguments(["--config", str(tmp_path / "job.yaml")])


@pytest.mark.parametrize(
    ("advice", "key", "value"),
    [
        ("update_rounding", "update_rounding", "stochastic"),
        ("rewards", "reward_funcs", ["accuracy_reward", "my_rewards.f"]),
        ("positions", "max_completion_length", 1008),
    ],
)
def test_advice_from_every_layer_is_taken_as_written_by_the_trl_form(advice, key, value):
    """What the precision monitor, a resume check and the context check tell the user to change, made inside a trl
    form command: the flags it names, parsed by this form's parser, set what it says."""
    from grpo_lite.errors import spelling
    from grpo_lite.precision.monitor import LOST_UPDATES_HINT
    from grpo_lite.training.checks import check_positions
    from grpo_lite.training.run.resume import _SAID

    flags = [f"--{key}", *map(str, value if isinstance(value, list) else [value])]
    with spelling(trl_spelling):
        if advice == "positions":
            with pytest.raises(ConfigError) as caught:
                check_positions(16, 4096, 1024, "m")
            said = str(caught.value)
        else:
            said = trl_spelling(LOST_UPDATES_HINT if advice == "update_rounding" else _SAID["rewards"](value))
    assert " ".join(flags) in said and "--set" not in said, said
    assert parse(["--model_name_or_path", "m", *flags])[0][key] == value


def test_the_help_of_the_trl_form_shows_the_defaults(capsys):
    """Each flag's default as TRL and grpo-lite declare it (it showed the parser's internal mark of an unwritten
    flag, ``<object object at 0x...>``, for every flag)."""
    with pytest.raises(SystemExit) as exc:
        main(["train", "--model_name_or_path", "m", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert exc.value.code == 0 and "object object" not in text
    assert "--num_generations" in text and "(default: 8)" in text and "--budget_gb" in text
