"""The recipe: written by the planner with each setting's memory cost, trained as written, handed to plain TRL."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import yaml

from grpo_lite import ConfigError, plan
from grpo_lite.cli import main
from grpo_lite.defaults import RUN
from grpo_lite.memory.estimate import GIB
from grpo_lite.recipe.recipe import Recipe

# plans whose recipes cover every commented setting: full 8-bit on a card, QLoRA, LoRA on CPU, GaLore
PLANS = {
    "llama-1b-16gb": lambda: plan("Llama-3.2-1B-Instruct", budget_gb=16, shared_prefix=True),
    "llama-8b-16gb-qlora": lambda: plan("Llama-3.1-8B-Instruct", budget_gb=16, shared_prefix=True),
    "qwen-0.5b-cpu-lora": lambda: plan("Qwen2.5-0.5B", device="cpu", preset="lora", shared_prefix=True),
    "llama-1b-8gb-galore": lambda: plan("Llama-3.2-1B-Instruct", 8, method="galore"),
}
NOTE = re.compile(r"^\s*(?P<key>\w+): (?P<value>.*?)  # (?P<note>.*)$")
SIZE = re.compile(r"^(?P<component>\w+) (?P<gib>\d+\.\d\d) GiB$")
DELTA = re.compile(r"^(?P<verb>saves|costs) (?P<gib>\d+\.\d\d) GiB at the peak \((?P<component>\w+)\) vs (?P<alt>.+)$")
SAME = re.compile(r"^same peak vs (?P<alt>.+)$")


def _alternative(text: str) -> dict:
    """``k=v, k2=v2`` as estimate() settings (values read as YAML)."""
    return {k: yaml.safe_load(v) for k, v in (part.split("=", 1) for part in text.split(", "))}


# Qwen2.5-0.5B by hand: 494,032,768 parameters (its model card's 0.49B; the safetensors' tensors), 24 layers,
# hidden 896, 2 KV heads of 64, MLP 4864 (its config.json). Rank-16 LoRA on the seven linears of each layer:
# r x (in + out) each, for q and o (896 -> 896), k and v (896 -> 128), gate, up and down (896 <-> 4864).
QWEN_05B_PARAMS = 494_032_768
QWEN_05B_LORA = 24 * 16 * (2 * (896 + 896) + 2 * (896 + 128) + 3 * (896 + 4864))


def _notes(recipe_yaml: str) -> dict[str, str]:
    """Each commented setting's note, by key."""
    return {m["key"]: m["note"] for line in recipe_yaml.splitlines() if (m := NOTE.match(line))}


def test_the_gib_figures_in_the_comments_are_the_hand_derived_bytes():
    """The fp32 LoRA recipe of Qwen2.5-0.5B on CPU: the weights are the base's and the adapters' parameters x 4 B;
    the optimizer state is AdamW's two fp32 moments of the adapters (and of the update monitor's 3 x 4,096 sampled
    elements); doubling the rank costs more than the adapters' weights and moments again (12 B a parameter; no
    gradients at the peak, freed after each step; the wider adapter activations come on top), so rank 16 saves it."""
    notes = _notes(Recipe.from_plan(PLANS["qwen-0.5b-cpu-lora"]()).to_yaml())
    weights = (QWEN_05B_PARAMS + QWEN_05B_LORA) * 4
    moments = (2 * QWEN_05B_LORA + 2 * 3 * 4096) * 4
    size = SIZE.match(notes["dtype"].split("; ")[0])
    assert size and size["component"] == "weights" and float(size["gib"]) == pytest.approx(weights / GIB, abs=0.005)
    size = SIZE.match(notes["r"].split("; ")[0])
    assert size and size["component"] == "optimizer_state"
    assert float(size["gib"]) == pytest.approx(moments / GIB, abs=0.005)
    delta = DELTA.match(notes["r"].split("; ")[1])
    assert delta and (delta["verb"], delta["component"], delta["alt"]) == ("saves", "optimizer_state", "lora_r=32")
    assert float(delta["gib"]) >= round(QWEN_05B_LORA * 12 / GIB, 2)


@pytest.mark.parametrize("name", PLANS)
def test_every_memory_note_names_its_alternative_and_the_direction_expected(name):
    """Each note's alternative is not the recipe itself, and the trade-offs point the way
    the memory model is built to: checkpointing, a smaller rank and the shared prefix save memory."""
    text = Recipe.from_plan(PLANS[name]()).to_yaml()
    data = yaml.safe_load(text)
    flat = {**{k: v for k, v in data.items() if not isinstance(v, dict)}, **data.get("trl", {})}
    expected = {"gradient_checkpointing": "saves", "shared_prefix": "saves", "r": "saves"}
    checked = 0
    for key, note in _notes(text).items():
        for part in note.split("; "):
            if not (delta := DELTA.match(part) or SAME.match(part)):
                continue
            alternative = _alternative(delta["alt"])
            known = {k: v for k, v in alternative.items() if k in flat}
            assert not known or any(flat[k] != v for k, v in known.items()), part  # not the recipe itself
            if key in expected and flat.get(key, True) is not False and "verb" in delta.groupdict():
                assert delta["verb"] == expected[key], (key, part)
            checked += 1
    assert checked >= 3, f"only {checked} notes with an alternative"


def test_the_gradient_checkpointing_note_reads_as_a_trade_off():
    text = Recipe.from_plan(PLANS["llama-8b-16gb-qlora"]()).to_yaml()
    line = next(x for x in text.splitlines() if x.strip().startswith("gradient_checkpointing:"))
    assert re.search(
        r"gradient_checkpointing: true  # saves \d+\.\d\d GiB at the peak \(activations\) vs "
        r"gradient_checkpointing=false; .*~20-30% slower",
        line,
    ), line


def test_the_header_has_the_peak_the_budget_and_the_commands():
    p = PLANS["llama-1b-16gb"]()
    text = Recipe.from_plan(p).to_yaml("r.yaml")
    head = text.split("\nmodel:", 1)[0]
    assert f"planned peak {p.estimate.total_gib:.2f} GiB" in head and "16 GB card" in head
    assert f"{p.budget_gib:.2f} GiB usable" in head
    assert "grpo-lite train --config r.yaml" in head and 'train(config="r.yaml")' in head


@pytest.mark.parametrize("name", PLANS)
def test_yaml_round_trip(name):
    recipe = Recipe.from_plan(PLANS[name]())
    again = Recipe.from_yaml(recipe.to_yaml())
    assert again == recipe and again.to_dict() == recipe.to_dict()
    assert list(again.trl)[: len(recipe.plan.settings)] == list(recipe.plan.settings)  # the plan's settings first
    assert set(RUN) <= set(again.trl)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"model": "m", "preset": "lora", "learning_rate": 1e-5},
            "unknown key(s) 'learning_rate'; GRPOConfig fields go under trl:",
        ),
        ({"model": "m", "preset": "lora", "presets": "x"}, "'presets' (did you mean 'preset'?)"),
        ({"preset": "lora"}, "has no model: every recipe names its model and its preset"),
        (
            {"model": "m", "preset": "lora", "device": "tpu"},
            "the recipe: device: tpu is not valid; choose one of cuda, cpu",
        ),
        ({"model": "m", "preset": "lora", "trl": [1]}, "trl must be a mapping"),
        ({"model": "m", "preset": "lora", "prompt_style": "chatty"}, "unknown prompt style 'chatty'"),
        (
            {"model": "m", "preset": "lora", "prompt_style": {"examples": [{"question": "1+1", "reasoning": "2"}]}},
            "the recipe: prompt_style: Example.__init__() missing 1 required positional argument: 'answer'; give a",
        ),
        ({"model": "m", "preset": "lora", "rewards": "correctness"}, "rewards must be a list of reward names"),
        (["model"], "must be a YAML mapping"),
    ],
)
def test_bad_recipes_say_what_to_change(data, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        Recipe.from_dict(data)


@pytest.mark.parametrize(
    ("key", "value", "where"),
    [
        ("max_steps", 7, "write it at the top level of the recipe (max_steps: 7)"),
        ("seed", 3, "write it at the top level of the recipe (seed: 3)"),
        ("output_dir", "elsewhere", "--output-dir DIR"),
    ],
)
def test_grpo_lites_own_keys_under_trl_are_refused_naming_where_they_belong(tmp_path, key, value, where):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"model": "m", "preset": "lora", "trl": {"learning_rate": 1e-5, key: value}}))
    with pytest.raises(ConfigError, match=re.escape(f"{path}: trl: {key}: ")) as caught:
        Recipe.read(path)
    assert where in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match=re.escape(where)):  # the same through train(config=..., trl=...)
        Recipe("m", "lora").with_overrides(trl={key: value})


@pytest.mark.parametrize(
    ("key", "value"),
    [("shared_prefix", False), ("stop_strings", ["x"]), ("prompt_style", "plain"), ("rewards", ["integer"])],
)
def test_a_top_level_key_under_trl_is_refused_naming_the_file_and_the_top_level(tmp_path, key, value):
    """A recipe key written under trl: is not read there: the one line names the file and says where it goes
    (trl: shared_prefix used to pass the file's check and fail later as an unknown setting, file unnamed)."""
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"model": "m", "preset": "lora", "trl": {"learning_rate": 1e-5, key: value}}))
    with pytest.raises(ConfigError, match=re.escape(f"{path}: trl: {key}: ")) as caught:
        Recipe.read(path)
    assert f"write it at the top level of the recipe ({key}: " in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("style", "where", "unknown", "fields"),
    [
        (
            {"system": "Be brief.", "one_shot": False},
            "prompt_style",
            "'system' (did you mean 'system_prompt'?)",
            "write the fields system_prompt, one_shot, prefill, examples, or a style name (guided, plain, one_step)",
        ),
        (
            {"examples": [{"question": "1+1", "reasoning": "1+1=2", "answr": "2"}]},
            "prompt_style: examples[0]",
            "'answr' (did you mean 'answer'?)",
            "write the fields question, reasoning, answer",
        ),
    ],
)
def test_an_unknown_prompt_style_field_is_refused_naming_the_file_and_the_valid_fields(
    tmp_path, style, where, unknown, fields
):
    """An unknown field of a prompt_style mapping was Python's "PromptStyle.__init__() got an unexpected keyword
    argument", the file unnamed: one line names the file, the field with its closest valid name, the valid ones."""
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"model": "m", "preset": "lora", "prompt_style": style}))
    with pytest.raises(ConfigError) as caught:
        Recipe.read(path)
    assert str(caught.value).startswith(f"{path}: {where}: unknown field(s) {unknown}; {fields}")
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("key", "value", "where"),
    [
        ("max_steps", 3, "write it at the top level of the recipe (max_steps: 3) or pass --max-steps"),
        ("shared_prefix", False, "write it at the top level of the recipe (shared_prefix: false)"),
        ("learning_rate", 1e-5, "write it under trl: (learning_rate: 1.0e-05)"),
        ("lora_r", 8, "write it as r: 8 under lora:"),
    ],
)
def test_a_key_under_lora_that_is_not_peft_s_is_refused_naming_the_file_and_where_it_belongs(
    tmp_path, key, value, where
):
    """lora: holds peft.LoraConfig's arguments; grpo-lite's own keys there were refused only after the model loaded,
    as the recipe's and the run's lora dicts, the key unnamed: the file's check names the key and where it goes."""
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({"model": "m", "preset": "lora", "lora": {"r": 16, "lora_alpha": 32, key: value}}))
    with pytest.raises(ConfigError, match=re.escape(f"{path}: lora: {key}: ")) as caught:
        Recipe.read(path)
    assert "not a peft.LoraConfig argument; " + where in str(caught.value) and "\n" not in str(caught.value)


def test_missing_file_says_how_to_write_one(tmp_path):
    with pytest.raises(ConfigError, match="grpo-lite plan MODEL --budget-gb N --write"):
        Recipe.read(tmp_path / "none.yaml")


def test_differences_name_what_cannot_run_as_written():
    planned = Recipe.from_plan(PLANS["llama-1b-16gb"]())
    edited = planned.with_overrides(lora={"r": 8})  # LoRA settings under a full fine-tuning preset
    assert edited.differences(planned) == ["lora: the recipe says {'r': 8}, the run would use None"]
    assert dataclasses.replace(planned, lora=None, dtype=None).differences(planned) == []  # None: the planner's


def test_a_shared_prefix_the_model_runs_without_is_filled_as_the_plan_turned_it_off():
    """shared_prefix: true asks for it where training runs it: on a sliding window shorter than the sequence the
    plan turns it off (what the trainer would), and the recipe filled by that plan says so; false stays false."""
    the_plan = plan("Phi-3-mini-4k-instruct", budget_gb=80, max_prompt_length=1500, max_completion_length=1024)
    asked = Recipe("Phi-3-mini-4k-instruct", the_plan.preset.name, trl={"max_completion_length": 1024})
    assert asked.shared_prefix and the_plan.estimate.settings.shared_prefix is False
    assert asked.filled(the_plan).shared_prefix is False
    assert dataclasses.replace(asked, shared_prefix=False).filled(the_plan).shared_prefix is False


def test_flags_override_the_file_as_in_trls_cli(tmp_path, monkeypatch):
    """The file's values, then each flag written, even at the flag's own default (--seed 0 over the file's 5)."""
    from grpo_lite.training import pipeline

    ran = []
    monkeypatch.setattr(pipeline, "train", lambda **kwargs: ran.append(kwargs["config"]) or 1 / 0)
    path = Recipe.from_plan(PLANS["qwen-0.5b-cpu-lora"](), seed=5, max_steps=7).write(tmp_path / "r.yaml")
    for argv, expected in (
        (["--config", str(path)], ("Qwen/Qwen2.5-0.5B", 5, 7, "lora")),
        (["--config", str(path), "--seed", "0", "--max-steps", "2", "my-model"], ("my-model", 0, 2, "lora")),
    ):
        with pytest.raises(ZeroDivisionError):
            main(["train", *argv])
        assert (ran[-1].model, ran[-1].seed, ran[-1].max_steps, ran[-1].preset) == expected


def test_the_files_values_are_defaults_only_for_the_command_line_that_names_it():
    """Under --config a flag left out is the file's; the same parser then parses a command without one with its
    own defaults."""
    from grpo_lite.cli import build_parser
    from grpo_lite.cli.train import FROM_FILE

    parser = build_parser()
    with_file = parser.parse_args(["train", "--config", "r.yaml", "--seed", "0"])
    assert (with_file.model, with_file.seed, with_file.num_processes) == (FROM_FILE, 0, FROM_FILE)
    plain = parser.parse_args(["train", "m"])
    assert (plain.model, plain.seed, plain.num_processes, plain.sharding, plain.rewards) == ("m", 0, 1, None, None)


def test_plan_write_writes_what_plan_prints(tmp_path, capsys):
    out = tmp_path / "r.yaml"
    assert main(["plan", "Llama-3.2-1B-Instruct", "--budget-gb", "16", "--json", "--write", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    written = yaml.safe_load(out.read_text())
    assert written["preset"] == printed["preset"] and written["budget_gb"] == 16
    assert {k: written["trl"][k] for k in printed["settings"]} == printed["settings"]
    assert written["shared_prefix"] is True  # planned as train() runs


def test_train_refuses_a_recipe_planned_for_a_gpu_before_loading_anything(tmp_path):
    path = Recipe.from_plan(PLANS["llama-1b-16gb"]()).write(tmp_path / "r.yaml")
    with pytest.raises(ConfigError, match="planned for device 'cuda' but this run is on 'cpu'"):
        from grpo_lite import train

        train(config=path, output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


# ---- a recipe trains as written: write it, edit it, train it, read run.json -------------------------------
@pytest.fixture(scope="module")
def recipe_run(tiny_model_dir, tmp_path_factory):
    """``grpo-lite plan --write``, edited as a user would (tiny data, a dense reward, tensorboard), then
    ``grpo-lite train --config``."""
    folder = tmp_path_factory.mktemp("recipe")
    path = folder / "recipe.yaml"
    assert (
        main(
            [
                "plan",
                str(tiny_model_dir),
                "--device",
                "cpu",
                "--preset",
                "lora",
                "--write",
                str(path),
                "--set",
                "num_generations=4",
                "--set",
                "per_device_train_batch_size=4",
                "--set",
                "max_completion_length=16",
                "--json",
            ]
        )
        == 0
    )
    text = path.read_text()
    for old, new in (
        ("dataset: gsm8k", "dataset: synthetic"),
        ("max_steps: null", "max_steps: 2"),
        ("learning_rate: 1.0e-05", "learning_rate: 0.01"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    assert "report_to" not in text and "save_strategy" not in text  # TRL's defaults: the recipe leaves them out
    text += "  report_to: tensorboard\n  save_strategy: 'no'\n"  # added under trl:, the file's last block
    text = re.sub(r"rewards: \[.*\]", "rewards: [length]", text)
    path.write_text(text)
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["train", "--config", str(path), "--output-dir", str(folder / "run")]) == 0
    finally:
        torch.set_num_threads(threads)
    return yaml.safe_load(path.read_text()), json.loads((folder / "run" / "run.json").read_text()), folder / "run"


def test_run_json_settings_equal_the_files(recipe_run):
    written, run, _ = recipe_run
    assert run["steps"] == 2
    assert run["settings"] == {
        **written["trl"],
        "output_dir": run["settings"]["output_dir"],
        "seed": written["seed"],
        "max_steps": written["max_steps"],
    }
    recorded = run["recipe"]
    assert {k: v for k, v in recorded.items() if k in written} == written  # every line of the file, as it ran
    assert run["plan"]["preset"] == written["preset"] and run["plan"]["lora"] == written["lora"]
    assert run["plan"]["model_kwargs"] == {"dtype": written["dtype"]}


def test_tensorboard_event_files_carry_the_reward(recipe_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, run, out = recipe_run
    events = sorted(out.rglob("events.out.tfevents.*"))
    assert events, f"no event files under {out}"
    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    rewards = [e.value for e in acc.Scalars("train/reward")]
    assert len(rewards) == 2 and rewards == pytest.approx([row["reward"] for row in run["history"]])


# ---- plain TRL: GRPOTrainer from what the plan hands over --------------------------------------------------
def test_plain_trl_trains_two_steps_from_the_recipe(tiny_model_dir, tmp_path):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOTrainer

    from grpo_lite.rewards import length_reward

    recipe = Recipe.from_plan(
        plan(
            str(tiny_model_dir),
            device="cpu",
            preset="lora",
            num_generations=4,
            per_device_train_batch_size=4,
            max_completion_length=8,
            learning_rate=1e-2,
        )
    )
    model = AutoModelForCausalLM.from_pretrained(recipe.model, **recipe.from_pretrained_kwargs())
    args = recipe.grpo_config(tmp_path / "trl", max_steps=2, save_strategy="no")
    assert type(args).__module__.startswith("trl") and args.optim == recipe.trl["optim"]
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[length_reward],
        args=args,
        peft_config=recipe.lora_config(),
        train_dataset=Dataset.from_dict({"prompt": [f"Count to {i}:" for i in range(8)]}),
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    torch.set_num_threads(1)
    trainer.train()
    assert trainer.state.global_step == 2
    moved = [n for n, p in trainer.model.named_parameters() if p.requires_grad and not torch.equal(before[n], p)]
    assert moved and all("lora_" in n for n in moved)


def test_trackio_logs_the_reward_to_a_local_database(tiny_model_dir, tmp_path):
    """report_to="trackio": no account, no network; the reward lands in trackio's SQLite file."""
    import sqlite3

    pytest.importorskip("trackio", reason="trackio is in the dev extra: pip install trackio")
    import uuid

    import torch
    from trackio.sqlite_storage import SQLiteStorage

    from grpo_lite import train

    torch.set_num_threads(1)
    project = f"recipe-test-{uuid.uuid4().hex[:8]}"
    result = train(
        str(tiny_model_dir),
        dataset="synthetic",
        rewards=["length"],
        output_dir=tmp_path / "run",
        max_steps=2,
        num_generations=2,
        per_device_train_batch_size=2,
        max_completion_length=8,
        save_strategy="no",
        report_to="trackio",
        project=project,
        quiet=True,
    )
    database = SQLiteStorage.get_project_db_path(project)  # under $TRACKIO_DIR (tests/conftest.py sets it)
    rows = [json.loads(r[0]) for r in sqlite3.connect(database).execute("select metrics from metrics")]
    logged = [r["train/reward"] for r in rows if "train/reward" in r]
    assert logged == pytest.approx([row["reward"] for row in result.history])


def _alias_bomb(depth: int, width: int = 10) -> str:
    """YAML for a list of nested aliases ``depth`` deep, each level ``width`` copies of the one below."""
    lines = [f"- &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"- &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    return "\n".join(("    " + line) for line in lines)


@pytest.mark.parametrize("depth", [6, 10])
@pytest.mark.parametrize("where", ["trl:\n  report_to:\n", "stop_strings:\n"])
def test_an_alias_bomb_under_a_known_key_is_refused_in_one_line(tmp_path, capsys, where, depth):
    # ten deep is 10**10 values once expanded (out of memory in 40-56 s); six deep still a million
    path = tmp_path / "bomb.yaml"
    path.write_text(f"model: m\npreset: lora\n{where}{_alias_bomb(depth)}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}, line ") + ".*expand to more than 100,000 values"):
        Recipe.read(path)
    assert main(["train", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "alias" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_aliases_of_a_modest_size_still_read(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model: m\npreset: lora\nstop_strings: &s ['</answer>']\ntrl:\n  optim_target_modules: *s\n")
    assert Recipe.read(path).trl["optim_target_modules"] == ["</answer>"]


def test_a_folder_given_as_the_recipe_file_is_said_to_be_a_folder(tmp_path, capsys):
    (tmp_path / "r.yaml").write_text("model: m\n")
    assert main(["train", "--config", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: recipe file {tmp_path} is a folder (it holds r.yaml); pass a recipe file (YAML), or write one with "
        f"grpo-lite plan MODEL --budget-gb N --write {tmp_path / 'recipe.yaml'}"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"lora": {"r": 0}}, "lora.r: 0 must be >= 1; e.g. r: 16"),
        ({"lora": {"lora_dropout": 2}}, "lora.lora_dropout: 2 must be in [0, 1); e.g. lora_dropout: 0.05"),
        ({"max_steps": -3}, "max_steps: -3 must be a whole number from 1 to 100_000_000; e.g. max_steps: 1"),
        ({"num_processes": 0}, "num_processes: 0 must be a positive integer; e.g. num_processes: 1"),
        ({"trl": {"learning_rate": -1}}, "trl: learning_rate=-1 must be > 0"),  # as before: named the file already
    ],
)
def test_a_value_out_of_range_in_a_recipe_file_names_the_file(tmp_path, capsys, edit, message):
    path = Recipe.from_plan(PLANS["qwen-0.5b-cpu-lora"]()).write(tmp_path / "r.yaml")
    data = yaml.safe_load(path.read_text())
    for key, value in edit.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    path.write_text(yaml.safe_dump(data))
    assert main(["train", "--config", str(path), "--dataset", "synthetic"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {path}: {message}"), err
