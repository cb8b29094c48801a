"""Settings flow one way: each fault of a recipe, a flag or an argument is one error line before anything loads,
and an argument written wins over the recipe by the same rule in Python and on the command line."""

from __future__ import annotations

import pytest

from grpo_lite import ConfigError, train
from grpo_lite.cli import main
from grpo_lite.recipe.recipe import Recipe

BASE = "model: some-model\npreset: lora\ndevice: cpu\n"


class Resolved(Exception):
    """Raised where train() has its recipe, before anything loads."""


@pytest.fixture
def resolved_recipe(monkeypatch):
    """train() stops once it has the recipe it would run, and hands it over."""
    from grpo_lite.training import arguments

    def stop(recipe):
        raise Resolved(recipe)

    monkeypatch.setattr(arguments, "check_recipe_launch", stop)

    def run(**kwargs):
        with pytest.raises(Resolved) as caught:
            train(**kwargs)
        return caught.value.args[0]

    return run


def _cli_error(argv, capsys) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


def test_an_argument_written_at_its_default_wins_over_the_recipe(tmp_path, resolved_recipe):
    path = tmp_path / "r.yaml"
    path.write_text(BASE + "seed: 7\nshared_prefix: false\n")
    recipe = resolved_recipe(config=path, shared_prefix=True, seed=0)
    assert (recipe.seed, recipe.shared_prefix) == (0, True)
    left_out = resolved_recipe(config=path)
    assert (left_out.seed, left_out.shared_prefix) == (7, False)
    as_object = resolved_recipe(config=Recipe.read(path), seed=0, learning_rate=2e-6)
    assert (as_object.seed, as_object.trl["learning_rate"]) == (0, 2e-6)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("max_steps: [unclosed\n", "line 4 (max_steps)"),
        ("presets: lora\n", "'presets' (did you mean 'preset'?)"),
        ("dataset: !!python/object/apply:os.system ['touch pwned']\n", "line 4 (dataset)"),
    ],
)
def test_a_bad_recipe_file_is_one_line_from_the_cli(text, fragment, tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_text(BASE + text)
    error = _cli_error(["train", "--config", str(path), "--output-dir", str(tmp_path / "run")], capsys)
    assert str(path) in error and fragment in error, error
    assert not (tmp_path / "run").exists() and not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (
            "stop_strings: </answer>\n",
            "stop_strings: </answer>: stop_strings takes a list of text; e.g. stop_strings=['</answer>']",
        ),
        ("seed: null\n", "seed: null: seed takes a whole number; e.g. seed=0"),  # grpo-lite's default, not TRL's
        ("rewards: 5\n", "rewards must be a list of reward names"),
        ("budget_gb: lots\n", "budget_gb: lots: budget_gb takes a number or None"),
        ("trl:\n  learning_rat: 1.0e-5\n", "did you mean 'learning_rate'?"),
        ("trl:\n  num_generations: 2.5\n", "trl.num_generations: 2.5: num_generations takes a whole number"),
        ("trl:\n  learning_rate: -1\n", "trl: learning_rate=-1 must be > 0"),
        ("dtype: bf16\n", "dtype: bf16 is not valid; choose one of bfloat16, float16, float32"),
        ("lora:\n  r: eight\n", "lora.r: eight: lora_r takes a whole number"),
    ],
)
def test_a_wrong_value_in_a_recipe_names_the_file_and_key_before_any_folder_is_made(text, fragment, tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_text(BASE.replace("model: some-model\n", "") + "model: some-model\n" + text)
    error = _cli_error(["train", "--config", str(path), "--output-dir", str(tmp_path / "run")], capsys)
    assert f"{path}: " in error and fragment in error, error
    assert not (tmp_path / "run").exists()


def test_model_of_the_wrong_type_is_named(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("model: 5\npreset: lora\n")
    with pytest.raises(ConfigError, match=r"r\.yaml: model: 5: model takes text"):
        Recipe.read(path)


@pytest.mark.parametrize("report_to", ["['tensorboard']", "nosuch"])
def test_a_tracker_that_is_missing_is_refused_before_the_folder_is_written(
    tiny_model_dir, tmp_path, capsys, monkeypatch, report_to
):
    """Issue 44 M4: transformers' RuntimeError came after run.json was written, and the folder then refused a plain
    rerun. Missing here: transformers finds no tracker installed (whatever this machine has)."""
    from transformers.integrations import integration_utils

    monkeypatch.setattr(integration_utils, "get_available_reporting_integrations", lambda: [])
    out = tmp_path / "run"
    argv = ["train", str(tiny_model_dir), "--dataset", "synthetic", "--reward", "length", "--max-steps", "1"]
    error = _cli_error([*argv, "--set", f"report_to={report_to}", "--output-dir", str(out)], capsys)
    if report_to == "nosuch":
        assert "'nosuch' is not a tracker transformers knows (azure_ml, " in error, error
    else:
        assert "tensorboard is not installed (pip install tensorboard); or drop it (report_to='none'" in error, error
    assert not out.exists()


def test_the_run_folder_and_the_cache_are_never_the_current_folder_by_accident(monkeypatch, tmp_path):
    """GRPO_LITE_CACHE set empty is unset (before: the cache went into the current folder), as an empty
    output_dir is refused (tests/test_ranges.py)."""
    from grpo_lite.cache import cache_root

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GRPO_LITE_CACHE", "")
    assert cache_root() == tmp_path / ".cache" / "grpo_lite"
    monkeypatch.setenv("GRPO_LITE_CACHE", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c"


def test_a_byte_that_is_not_utf8_names_the_line_and_key(tmp_path, capsys):
    path = tmp_path / "r.yaml"
    path.write_bytes(BASE.encode() + "seed: 3  # caf\xe9\n".encode("latin-1"))
    error = _cli_error(["train", "--config", str(path), "--output-dir", str(tmp_path / "run")], capsys)
    assert f"{path}, line 4 (seed): byte 0xe9 is not UTF-8" in error, error


def test_numbers_pyyaml_reads_as_text_are_numbers(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(BASE + "budget_gb: 16\ntrl:\n  learning_rate: 1e-5\n  beta: 4e-2\n")
    recipe = Recipe.read(path)
    assert recipe.trl["learning_rate"] == 1e-5 and recipe.trl["beta"] == 0.04 and recipe.budget_gb == 16
    assert isinstance(recipe.trl["learning_rate"], float)


def test_a_wrong_argument_from_python_is_named_as_written(tmp_path, resolved_recipe):
    path = tmp_path / "r.yaml"
    path.write_text(BASE)
    with pytest.raises(ConfigError, match=r"^seed=None: seed takes a whole number"):
        resolved_recipe(config=path, seed=None)
    with pytest.raises(ConfigError, match=r"stop_strings='</answer>': stop_strings takes a list of text"):
        resolved_recipe(config=path, stop_strings="</answer>")
    assert resolved_recipe(config=path, learning_rate="1e-5").trl["learning_rate"] == 1e-5


# ---- train(config=...): the recipe as written is estimated, checked and run ----------------------------------
class Started(Exception):
    """Raised where the trainer would be built, with the plan and the recipe it would be built from."""


@pytest.fixture
def started(monkeypatch):
    """train(config=...) stops where the attempts start and hands over (plan, recipe)."""
    from grpo_lite.training import attempts

    def stop(cls, plan, inputs, run, recipe, **kwargs):
        raise Started(plan, recipe)

    monkeypatch.setattr(attempts.Attempts, "start", classmethod(stop))

    def run(**kwargs):
        with pytest.raises(Started) as caught:
            train(**kwargs)
        return caught.value.args

    return run


def _tiny_recipe(tiny_model_dir, **changes) -> Recipe:
    from grpo_lite import plan

    p = plan(
        str(tiny_model_dir),
        device="cpu",
        preset="lora",
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=16,
    )
    return Recipe.from_plan(p, dataset="synthetic", rewards=["length"], max_steps=1).with_overrides(**changes)


def test_a_recipe_runs_as_written_and_only_its_gaps_are_planned(tiny_model_dir, tmp_path, started):
    written = _tiny_recipe(tiny_model_dir, temperature=0.5, learning_rate=3e-3)
    written.dtype = None  # left to the planner
    del written.trl["optim"]
    written.lora["lora_dropout"] = 0.1
    the_plan, ran = started(config=written, output_dir=tmp_path / "run")
    assert (ran.trl["temperature"], ran.trl["learning_rate"], ran.lora["lora_dropout"]) == (0.5, 3e-3, 0.1)
    assert ran.dtype == the_plan.model_kwargs["dtype"] == "float32" and ran.trl["optim"] == the_plan.settings["optim"]
    assert {k: v for k, v in ran.trl.items() if k != "optim"} == written.trl and ran.plan is the_plan
    # the estimate is of the recipe's own settings, not of settings the planner traded
    step = the_plan.estimate.settings
    assert (step.num_generations, step.max_completion_length, step.per_device_train_batch_size) == (4, 16, 4)
    assert the_plan.lora["lora_dropout"] == 0.1


def test_a_recipe_that_leaves_its_rung_to_the_planner_trains_what_train_model_trains(tiny_model_dir, tmp_path, started):
    """train(config=Recipe(model, None, ...)) and train(model, ...) hand the trainer one object: the user's recipe
    filled by the plan, the planner's rung, load and LoRA where it wrote nothing, its own settings as written."""
    run = dict(dataset="synthetic", rewards=["length"], max_steps=1)
    trl = dict(num_generations=4, per_device_train_batch_size=4, max_completion_length=16, learning_rate=3e-3)
    recipe = Recipe(str(tiny_model_dir), None, **run, trl=trl)
    the_plan, by_recipe = started(config=recipe, output_dir=tmp_path / "a")
    _, by_model = started(model=str(tiny_model_dir), output_dir=tmp_path / "b", **run, **trl)
    assert by_recipe == by_model and by_recipe.plan is the_plan
    assert (by_recipe.preset, by_recipe.device, by_recipe.lora) == (the_plan.preset.name, "cpu", the_plan.lora)
    assert by_recipe.dtype == the_plan.model_kwargs["dtype"] and by_recipe.trl["optim"] == the_plan.settings["optim"]
    assert {k: by_recipe.trl[k] for k in trl} == trl and by_recipe.seed == 0


def test_a_recipe_that_does_not_fit_its_budget_is_refused_naming_its_keys(tiny_model_dir, tmp_path, started):
    recipe = _tiny_recipe(
        tiny_model_dir, budget_gb=0.25, num_generations=64, per_device_train_batch_size=64, max_completion_length=640
    )
    from grpo_lite.errors import DoesNotFitError

    with pytest.raises(DoesNotFitError) as caught:
        train(config=recipe, output_dir=tmp_path / "run")
    message = str(caught.value)
    assert len(message.splitlines()) == 1, message
    assert message.startswith("the recipe does not fit as written: ") and "with preset lora" in message, message
    assert f"budget_gb: {caught.value.smallest_budget_gb:g} or more" in message, message
    assert "trl.max_completion_length" in message and "any preset" not in message, message
    assert not (tmp_path / "run").exists()


def test_lora_settings_under_a_full_preset_are_refused_naming_the_key(tiny_model_dir, tmp_path, started):
    recipe = _tiny_recipe(tiny_model_dir, preset="full")
    with pytest.raises(ConfigError, match=r"^the recipe cannot run as written: lora: the recipe says"):
        started(config=recipe, output_dir=tmp_path / "run")


def test_a_shared_prefix_turned_off_after_the_model_loads_is_planned_again(tiny_model_dir, tmp_path, monkeypatch):
    """TRL's fused LM head found changed once the model is built: the plan in run.json is the plan trained."""
    import json

    from grpo_lite.training.step import trl_seam
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer

    monkeypatch.setattr(trl_seam, "_fused_head_problem", lambda trainer: "the fused LM head takes no shift_labels")

    def stop(self, *args, **kwargs):
        raise Started(self.shared_prefix)

    monkeypatch.setattr(LiteGRPOTrainer, "train", stop)
    recipe = _tiny_recipe(tiny_model_dir)
    assert recipe.shared_prefix
    with pytest.raises(Started) as caught:
        train(config=recipe, output_dir=tmp_path / "run", quiet=True)
    assert caught.value.args == (False,)  # the trainer runs TRL's scoring
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    replanned = [e for e in record["events"] if e["event"] == "replanned"]
    assert len(replanned) == 1 and "shift_labels" in replanned[0]["why"], record["events"]
    assert replanned[0]["cause"] == "trl_seam" and replanned[0]["step"] == 0
    assert replanned[0]["from"]["shared_prefix"] is True and replanned[0]["to"]["shared_prefix"] is False
    without = _tiny_plan_without_shared_prefix(tiny_model_dir, record)
    assert record["planned_peak_gib"] == replanned[0]["to"]["peak_gib"] == round(without.estimate.total_gib, 3)
    assert replanned[0]["from"]["peak_gib"] != replanned[0]["to"]["peak_gib"]
    assert record["recipe"]["shared_prefix"] is False
    assert {k: record["plan"]["settings"][k] for k in without.settings} == without.settings


@pytest.fixture
def leaky_mask(monkeypatch):
    """A layout bug in the shared prefix that the first micro-batch's self-check finds during step 1: each
    completion's block mask lets it see the completions packed before it."""
    import dataclasses

    import torch

    from grpo_lite.training.step import shared_prefix

    real = shared_prefix.pack_groups

    def leaky(*args, **kwargs):
        packed = real(*args, **kwargs)
        causal = torch.ones(packed.allowed.size(-1), packed.allowed.size(-1), dtype=torch.bool).tril()
        return dataclasses.replace(packed, allowed=packed.allowed | causal)

    monkeypatch.setattr(shared_prefix, "pack_groups", leaky)


def test_a_shared_prefix_the_self_check_turns_off_is_planned_again(
    tiny_model_dir, tmp_path, leaky_mask, capsys, monkeypatch
):
    """Step 1's self-check fails: the run goes on without the shared prefix, planned again as at build time, between
    attempts (never inside TRL's forward)."""
    import inspect
    import json

    from grpo_lite.training import replan

    real, callers = replan.replan, []
    monkeypatch.setattr(replan, "replan", lambda *a, **k: callers.append(inspect.stack(0)) or real(*a, **k))
    recipe = _tiny_recipe(tiny_model_dir)
    train(config=recipe, output_dir=tmp_path / "run")
    (called_from,) = [{frame.function for frame in stack} for stack in callers]
    assert "run_attempts" in called_from and "_get_per_token_logps_and_entropies" not in called_from
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["status"] == "finished" and record["steps"] == 1
    assert not record["shared_prefix"]["self_check"]["ok"] and record["shared_prefix"]["calls"]["shared"] == 0
    replanned = [e for e in record["events"] if e["event"] == "replanned"]
    assert len(replanned) == 1 and replanned[0]["cause"] == "shared_prefix_off", record["events"]
    assert replanned[0]["why"].startswith("self-check: log-probs differ from TRL's by up to ")
    without = _tiny_plan_without_shared_prefix(tiny_model_dir, record)
    before, after = replanned[0]["from"]["peak_gib"], replanned[0]["to"]["peak_gib"]
    assert record["planned_peak_gib"] == after == round(without.estimate.total_gib, 3) and before < after
    assert record["recipe"]["shared_prefix"] is False and record["plan"]["estimate_gib"] == after
    out = " ".join(capsys.readouterr().out.split())
    assert "(the shared prefix is off: self-check: log-probs differ from TRL's by up to" in out, out
    assert f"shared_prefix True -> False; planned peak {before:.2f} -> {after:.2f} GiB" in out, out


def test_a_run_that_no_longer_fits_once_the_self_check_fails_stops_in_one_line(tiny_model_dir, tmp_path, leaky_mask):
    """A budget that the plan with the shared prefix fits and the plan without it does not (the planner's own
    boundary, found by bisection): step 1's failed self-check stops the run with a DoesNotFitError, recorded."""
    import json

    from grpo_lite import plan
    from grpo_lite.errors import DoesNotFitError

    recipe = _tiny_recipe(tiny_model_dir)
    train(config=recipe, output_dir=tmp_path / "probe", quiet=True)  # the prompt length train() measures
    prompt_tokens = json.loads((tmp_path / "probe" / "run.json").read_text())["measured_prompt_tokens"]

    def fits(budget: float, shared: bool) -> bool:
        try:
            plan(
                str(tiny_model_dir),
                device="cpu",
                preset="lora",
                num_generations=4,
                per_device_train_batch_size=4,
                max_completion_length=16,
                max_prompt_length=prompt_tokens,
                shared_prefix=shared,
                budget_gb=budget,
            )
        except DoesNotFitError:
            return False
        return True

    low, high = 0.2, 4.0  # without the shared prefix: fits at high, not at low
    assert fits(high, False) and not fits(low, False)
    for _ in range(30):
        low, high = (low, (low + high) / 2) if fits((low + high) / 2, False) else ((low + high) / 2, high)
    assert fits(low, True), "the shared prefix must lower the tiny run's peak for this test"
    with pytest.raises(DoesNotFitError) as caught:
        train(config=recipe.with_overrides(budget_gb=low), output_dir=tmp_path / "run", quiet=True)
    message = str(caught.value)
    assert len(message.splitlines()) == 1, message
    assert message.startswith("the shared prefix is off (self-check: log-probs differ from TRL's"), message
    assert "and the run planned again does not fit: " in message and "with preset lora" in message, message
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["status"] == "failed" and record["steps"] == 0 and record["history"] == []
    assert record["events"][-1]["event"] == "failed" and record["events"][-1]["error"].startswith("DoesNotFitError: ")
    assert not (tmp_path / "run" / ".grpo-lite.lock").exists()  # the folder is free for a resume or a new run


# ---- dead ends of grpo-lite plan --write --------------------------------------------------------------------
PLAN = ["plan", "Llama-3.2-1B-Instruct", "--budget-gb", "16"]


def test_plan_write_into_a_folder_names_a_file_to_give(tmp_path, capsys):
    error = _cli_error([*PLAN, "--write", str(tmp_path)], capsys)
    assert f"{tmp_path} is a folder: give the recipe a file name, e.g. {tmp_path / 'recipe.yaml'}" in error


def test_plan_write_where_it_cannot_write_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "file").write_text("x")
    error = _cli_error([*PLAN, "--write", str(tmp_path / "file" / "r.yaml")], capsys)
    assert f"cannot write the recipe to {tmp_path / 'file' / 'r.yaml'}" in error
    import errno

    def read_only(file, *args, **kwargs):  # the folder refuses the recipe's temporary file
        raise PermissionError(errno.EACCES, "Permission denied", str(file))

    monkeypatch.setattr("grpo_lite.files.open", read_only, raising=False)
    error = _cli_error([*PLAN, "--write", str(tmp_path / "r.yaml")], capsys)
    assert f"cannot write the recipe to {tmp_path / 'r.yaml'}: Permission denied" in error
    assert list(tmp_path.iterdir()) == [tmp_path / "file"]  # no temporary file left


def test_compare_with_write_is_refused_not_ignored(tmp_path, capsys):
    error = _cli_error([*PLAN, "--compare", "--write", str(tmp_path / "r.yaml")], capsys)
    assert "--write saves one plan as a recipe; --compare shows every preset" in error
    assert not (tmp_path / "r.yaml").exists()


def test_prompts_and_completions_beyond_the_context_are_reported_before_training(
    tiny_model_dir, tmp_path, capsys, monkeypatch
):
    """The tiny model has 1024 positions: 1100 completion tokens cannot fit, whatever the memory."""
    from grpo_lite.training import attempts

    monkeypatch.setattr(attempts.Attempts, "start", lambda *a, **k: pytest.fail("training started"))
    error = _cli_error(
        [
            "train",
            str(tiny_model_dir),
            "--dataset",
            "synthetic",
            "--reward",
            "length",
            "--set",
            "max_completion_length=1100",
            "--set",
            "num_generations=2",
            "--set",
            "per_device_train_batch_size=2",
            "--output-dir",
            str(tmp_path / "run"),
        ],
        capsys,
    )
    assert "has a context of 1024 tokens: set max_completion_length=" in error
    room = int(error.split("set max_completion_length=")[1].split(" ")[0])
    assert 0 < room < 1024 and f"--set max_completion_length={room}" in error


# ---- a TRL whose code turns the shared prefix off: the run is planned without it ---------------------------
def test_a_trl_seam_that_turns_the_shared_prefix_off_replans_and_says_so(tiny_model_dir, tmp_path, monkeypatch, capsys):
    import json

    import torch
    from tiny_run import TINY_RUN
    from trl import GRPOTrainer

    original = GRPOTrainer._get_per_token_logps_and_entropies

    def changed(self, model, *args, **kwargs):  # TRL 1.14's shape: the trainer runs TRL's code
        return original(self, model, *args, **kwargs)

    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", changed)
    torch.set_num_threads(1)
    result = train(
        str(tiny_model_dir),
        output_dir=tmp_path / "run",
        max_steps=1,
        save_strategy="no",
        **{**TINY_RUN, "quiet": False},
    )
    printed = " ".join(capsys.readouterr().out.split())
    assert "(TRL's code differs from grpo-lite's seam: TRL " in printed and "shared_prefix True -> False" in printed
    assert result.plan.estimate.settings.shared_prefix is False  # the plan trained
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [(e["cause"], e["step"]) for e in record["events"] if e["event"] == "replanned"] == [("trl_seam", 0)]
    assert record["recipe"]["shared_prefix"] is False and record["shared_prefix"]["calls"]["shared"] == 0


def test_the_same_arguments_without_a_recipe_are_typed_alike(tmp_path, monkeypatch):
    from grpo_lite.training.run import folder

    monkeypatch.setattr(folder, "open_run", lambda *a, **k: pytest.fail("the output folder was touched"))
    for kwargs, message in (
        ({"seed": None}, "seed=None: seed takes a whole number"),
        ({"stop_strings": "</answer>"}, "stop_strings='</answer>': stop_strings takes a list"),
        ({"shared_prefix": "no way"}, "shared_prefix='no way': shared_prefix takes True or False"),
    ):
        with pytest.raises(ConfigError, match=message):
            train("some-model", output_dir=tmp_path / "run", **kwargs)


def test_lora_target_modules_take_names_or_peft_s_pattern():
    base = {"model": "m", "preset": "lora"}
    assert (
        Recipe.from_dict({**base, "lora": {"r": 8, "target_modules": "all-linear"}}).lora["target_modules"]
        == "all-linear"
    )
    assert Recipe.from_dict({**base, "lora": {"target_modules": ["q_proj"]}}).lora["target_modules"] == ["q_proj"]
    with pytest.raises(ConfigError, match=r"the recipe: lora.target_modules: 5: lora_target_modules takes text"):
        Recipe.from_dict({**base, "lora": {"target_modules": 5}})


def _tiny_plan_without_shared_prefix(tiny_model_dir, record):
    """The plan of the tiny LoRA run that run.json records, planned again without the shared prefix."""
    from grpo_lite import plan

    return plan(
        str(tiny_model_dir),
        device="cpu",
        preset="lora",
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=16,
        max_prompt_length=record["measured_prompt_tokens"],
        shared_prefix=False,
    )


# ---- issue 50: a run does not publish nor carry a credential; CLI values one line each ------------------------
TOKEN = "hf_SeCrEt0123456789"


def _files_holding(folder, text: str) -> list[str]:
    """Every file under ``folder`` whose bytes hold ``text`` (grep -r)."""
    return [str(p) for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.parametrize(
    "route",
    ["train()", "--set", "recipe trl:", "recipe model_init_kwargs", "--config with --set"],
)
def test_a_token_by_any_route_is_refused_and_never_written(tiny_model_dir, tmp_path, capsys, route):
    """Before: a recipe's trl: hub_token (and train()'s, --set's) was written in plain text to run.json."""
    out = tmp_path / "run"
    argv = ["train", str(tiny_model_dir), "--dataset", "synthetic", "--reward", "length", "--max-steps", "1"]
    argv += ["--set", "max_completion_length=8", "--output-dir", str(out)]
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"model: {tiny_model_dir}\npreset: lora\ndataset: synthetic\nrewards: [length]\n")
    if route == "train()":
        with pytest.raises(ConfigError) as caught:
            train(tiny_model_dir, dataset="synthetic", rewards=["length"], max_steps=1, output_dir=out, hub_token=TOKEN)
        error = str(caught.value)
    elif route == "--set":
        error = _cli_error([*argv, "--set", f"hub_token={TOKEN}"], capsys)
    elif route == "--config with --set":
        error = _cli_error(
            ["train", "--config", str(recipe), "--output-dir", str(out), "--set", f"hub_token={TOKEN}"], capsys
        )
    else:
        trl = f"  hub_token: {TOKEN}\n" if route == "recipe trl:" else f"  model_init_kwargs:\n    token: {TOKEN}\n"
        recipe.write_text(recipe.read_text() + "trl:\n" + trl)
        error = _cli_error(["train", "--config", str(recipe), "--output-dir", str(out)], capsys)
    assert "a credential is never a setting" in error and TOKEN not in error, error
    assert not out.exists() and _files_holding(tmp_path, TOKEN) == ([str(recipe)] if "recipe" in route else [])


@pytest.mark.parametrize(
    ("trl", "fragment"),
    [
        ("hub_token: null", None),  # TRL's default: holds nothing
        ("logging_steps: 2", None),  # the neighbour of the refused fields
        ("push_to_hub: false", None),  # TRL's default: publishes nothing
        ("push_to_hub: true", "trl: push_to_hub=True: a grpo-lite run does not publish to the Hugging Face Hub"),
        ("hub_private_repo: false", "hub_private_repo=False: a grpo-lite run does not publish"),  # default: None
        ("hub_model_id: me/model", "hub_model_id='me/model': a grpo-lite run does not publish"),
        ("log_completions_hub_repo: me/c", "log_completions_hub_repo='me/c': a grpo-lite run does not publish"),
        ("hub_token: abc", "trl: hub_token: a credential is never a setting"),
        ("eval_strategy: 'no'", None),
        ("eval_strategy: steps", "eval_strategy='steps': grpo-lite trains without an eval dataset"),
        ("deepspeed: ds.json", "deepspeed='ds.json': grpo-lite's launcher writes DeepSpeed's config"),
    ],
)
def test_a_recipe_cannot_publish_but_takes_its_neighbours(trl, fragment, tmp_path):
    text = BASE + f"trl:\n  {trl}\n"
    if fragment is None:
        assert Recipe.from_yaml(text, source="r.yaml").trl  # read as written
    else:
        with pytest.raises(ConfigError) as caught:
            Recipe.from_yaml(text, source="r.yaml")
        assert str(caught.value).startswith("r.yaml: trl: ") and fragment in str(caught.value), caught.value
        assert "abc" not in str(caught.value)  # a credential's value is never shown


@pytest.mark.parametrize(
    ("set_", "fragment"),
    [
        ("eval_strategy=steps", "eval_strategy='steps': grpo-lite trains without an eval dataset"),
        ("deepspeed={tmp}/ds.txt", "grpo-lite's launcher writes DeepSpeed's config: leave it out and pass --sharding"),
        ("push_to_hub=true", "push_to_hub=True: a grpo-lite run does not publish to the Hugging Face Hub"),
        ("stop_strings=", "stop_strings='': stop_strings takes a list of text; e.g. stop_strings=[] (an empty list)"),
    ],
)
def test_a_set_value_the_run_cannot_take_is_one_line_before_the_folder(
    tiny_model_dir, tmp_path, capsys, set_, fragment
):
    """Before: TRL's or transformers' traceback of 54 to 87 lines, after the run folder was made; stop_strings=
    suggested stop_strings=[''] (an empty stop string, refused in turn)."""
    (tmp_path / "ds.txt").write_text("not json")
    out = tmp_path / "run"
    argv = ["train", str(tiny_model_dir), "--dataset", "synthetic", "--reward", "length", "--max-steps", "1"]
    error = _cli_error([*argv, "--set", set_.format(tmp=tmp_path), "--output-dir", str(out)], capsys)
    assert fragment in error, error
    assert not out.exists()


@pytest.mark.parametrize(
    ("written", "read"),
    [("none", "none"), ("group", "group"), ("batch", "batch"), ("false", False), ("true", True)],
)
def test_scale_rewards_is_read_as_trl_reads_it(written, read, tmp_path):
    """Before: --set scale_rewards=none was Python's None (refused), and False/True (TRL maps them to "none"/"group",
    Dr. GRPO recipes write false) were refused."""
    from grpo_lite.cli.options import parse_set
    from grpo_lite.recipe.recipe import make_grpo_config
    from grpo_lite.recipe.values import check_overrides

    value = check_overrides(parse_set([f"scale_rewards={written}"]))["scale_rewards"]
    assert value == read
    assert Recipe.from_yaml(BASE + f"trl:\n  scale_rewards: {written}\n").trl["scale_rewards"] == read
    trl_reads = make_grpo_config({"output_dir": str(tmp_path), "scale_rewards": value, "use_cpu": True})
    assert trl_reads.scale_rewards in ("none", "group", "batch")
    with pytest.raises(ConfigError, match="scale_rewards=None: scale_rewards takes text"):
        check_overrides({"scale_rewards": None})  # None itself is no value of TRL's
    assert parse_set(["save_total_limit=none"]) == {"save_total_limit": None}  # a field that takes None: None


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("seed: 1\nseed: 2\n", "r.yaml, lines 4 and 5: the key 'seed' is written twice"),
        ("trl:\n  beta: 0.0\n  beta: 0.1\n", "r.yaml, lines 5 and 6: the key 'beta' is written twice"),
    ],
)
def test_a_key_written_twice_is_refused_naming_it_and_its_lines(text, fragment, tmp_path, capsys):
    """Before: YAML kept the last silently."""
    path = tmp_path / "r.yaml"
    path.write_text(BASE + text)
    with pytest.raises(ConfigError) as caught:
        Recipe.from_yaml(path.read_text(), source="r.yaml")
    assert fragment in str(caught.value), caught.value
    from grpo_lite.recipe.values import load_yaml

    # the same key in two mappings, and keys YAML reads apart (1 and '1'), are two keys
    assert load_yaml("a:\n  x: 1\nb:\n  x: 2\n1: a\n'1': b\n", "r.yaml") == {
        "a": {"x": 1},
        "b": {"x": 2},
        1: "a",
        "1": "b",
    }


def test_a_long_list_is_too_long_not_an_alias_bomb_and_quick(tmp_path, capsys):
    """Before: a plain 3M-item list was called an alias bomb after 82 s. Just under the bound a list reads."""
    import time

    from grpo_lite.recipe.values import MAX_YAML_CHARS

    head = BASE + "stop_strings:\n"
    item = "- " + "x" * 97 + "\n"  # 100 characters a line
    under = head + item * ((MAX_YAML_CHARS - len(head)) // len(item))
    assert len(under) <= MAX_YAML_CHARS and len(Recipe.from_yaml(under).stop_strings) > 900
    over = under + item
    path = tmp_path / "r.yaml"
    path.write_text(over)
    with pytest.raises(ConfigError, match=f"r.yaml: {len(over):,} characters is too long for a recipe"):
        Recipe.read(path)
    path.write_text(head + "- x\n" * 3_000_000)
    started = time.perf_counter()
    error = _cli_error(["train", "--config", str(path), "--output-dir", str(tmp_path / "run")], capsys)
    assert "too long for a recipe" in error and "alias" not in error, error
    assert time.perf_counter() - started < 5


def test_a_config_that_is_no_file_or_empty_says_so(tmp_path, capsys):
    """Before: /dev/null 'does not exist'."""
    error = _cli_error(["train", "--config", "/dev/null", "--output-dir", str(tmp_path / "run")], capsys)
    assert "recipe file /dev/null is not a regular file (a device, a pipe or a socket)" in error, error
    (tmp_path / "r.yaml").write_text("# nothing yet\n")
    error = _cli_error(["train", "--config", str(tmp_path / "r.yaml"), "--output-dir", str(tmp_path / "run")], capsys)
    assert f"{tmp_path / 'r.yaml'} is empty: every recipe names its model and its preset" in error, error
    error = _cli_error(["train", "--config", str(tmp_path / "no.yaml"), "--output-dir", str(tmp_path / "run")], capsys)
    assert "no.yaml does not exist" in error, error


@pytest.mark.parametrize("dataset", ["", "  "])
def test_an_empty_dataset_name_is_refused_not_the_working_folder(tiny_model_dir, tmp_path, capsys, dataset):
    argv = ["train", str(tiny_model_dir), "--dataset", dataset, "--output-dir", str(tmp_path / "run")]
    error = _cli_error(argv, capsys)
    assert f"dataset={dataset!r} names no dataset" in error, error
    with pytest.raises(ConfigError, match="names no dataset"):
        Recipe.from_yaml(BASE + f"dataset: '{dataset}'\n")
    assert Recipe.from_yaml(BASE + "dataset: ./data\n").dataset == "./data"  # a path: read where it points
