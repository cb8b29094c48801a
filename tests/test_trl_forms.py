"""train() takes what TRL's GRPOTrainer takes (docs/from_trl.md): the quick start's dataset and reward, a
``peft.LoraConfig``, ``model_init_kwargs``, reward models (a folder or an object), a hub dataset id; each is used as
given and the plan is priced on it. Bad forms are one line, before anything is written."""

from __future__ import annotations

import json

import pytest
from tiny_run import TINY_RUN

from grpo_lite import ConfigError, DataError, train
from grpo_lite.planning.choose import plan

FAST = {**TINY_RUN, "max_steps": 1, "save_strategy": "no"}


@pytest.fixture(scope="module")
def reward_model_dir(tmp_path_factory, tiny_model_dir):
    """A tiny AutoModelForSequenceClassification with one label, and its tokenizer, saved in a folder."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    folder = tmp_path_factory.mktemp("rm") / "tiny-rm"
    config = AutoConfig.from_pretrained(tiny_model_dir, num_labels=1)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(folder)
    return folder


def _quick_start_rows():
    """The shape of TRL's GRPOTrainer quick start: a conversational ``prompt`` and a ``solution``."""
    from datasets import Dataset

    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + 1?"}], "solution": f"${i + 1}$"} for i in range(8)]
    return Dataset.from_list(rows)


def test_the_grpo_trainer_quick_start_shape_and_model_init_kwargs(tiny_model_dir, tmp_path):
    """A ``prompt`` + ``solution`` dataset scored by ``trl.rewards.accuracy_reward``; ``model_init_kwargs`` reach
    from_pretrained (the loaded model's config says eager, not the default sdpa)."""
    from trl.rewards import accuracy_reward

    result = train(
        str(tiny_model_dir), output_dir=tmp_path / "run", model_init_kwargs={"attn_implementation": "eager"},
        **{**FAST, "dataset": _quick_start_rows(), "rewards": [accuracy_reward]},
    )  # fmt: skip
    assert result.steps == 1
    assert result.model.config._attn_implementation == "eager"
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["rewards"] == ["accuracy_reward"] and "rewards/accuracy_reward/mean" in record["history"][0]
    from grpo_lite.evaluation import evaluate

    scores = evaluate(tmp_path / "run", _quick_start_rows(), split="train", limit=2, max_new_tokens=2)
    assert list(scores.reward_means) == ["accuracy_reward"]  # the run's own rewards, read from its run.json


def test_model_init_kwargs_reach_from_pretrained_and_their_dtype_is_the_plans(tiny_model_dir, monkeypatch):
    """revision and trust_remote_code reach from_pretrained as TRL passes them; a dtype there is the run's dtype (the
    plan is priced on it); "auto" and a second, other dtype are refused in one line."""
    import transformers

    from grpo_lite.training import loading
    from grpo_lite.training.arguments import init_dtype

    seen = {}
    real = transformers.AutoModelForCausalLM.from_pretrained

    def recording(source, **kwargs):
        seen.update(kwargs)
        return real(source, **{k: v for k, v in kwargs.items() if k not in ("revision", "trust_remote_code")})

    monkeypatch.setattr(loading.AutoModelForCausalLM, "from_pretrained", recording)
    init = {"trust_remote_code": True, "revision": "main", "attn_implementation": "eager"}
    loading.load_model(tiny_model_dir, dtype="bfloat16", init_kwargs=init)
    assert {k: seen[k] for k in init} == init and str(seen["dtype"]) == "torch.bfloat16"
    real_tokenizer, seen_by_tokenizer = transformers.AutoTokenizer.from_pretrained, {}

    def tokenizer_recording(source, **kwargs):
        seen_by_tokenizer.update(kwargs)
        return real_tokenizer(source, padding_side=kwargs["padding_side"])

    monkeypatch.setattr(loading.AutoTokenizer, "from_pretrained", tokenizer_recording)
    loading.load_tokenizer(tiny_model_dir, revision="main", trust_remote_code=True)
    assert (seen_by_tokenizer["revision"], seen_by_tokenizer["trust_remote_code"]) == ("main", True)

    assert init_dtype({"model_init_kwargs": {"torch_dtype": "bfloat16", "revision": "v1"}}) == {
        "model_init_kwargs": {"revision": "v1"},
        "dtype": "bfloat16",
    }
    assert init_dtype({"model_init_kwargs": {"revision": "v1"}}) == {}  # nothing to move: unchanged
    with pytest.raises(ConfigError, match=r"model_init_kwargs=\{'dtype': 'auto'\}.*name one"):
        init_dtype({"model_init_kwargs": {"dtype": "auto"}})
    with pytest.raises(ConfigError, match="in model_init_kwargs or as dtype="):
        init_dtype({"model_init_kwargs": {"dtype": "bfloat16"}, "dtype": "float32"})
    assert init_dtype({"model_init_kwargs": {"dtype": "float32"}, "dtype": "float32"})["dtype"] == "float32"


def test_a_peft_config_is_trained_as_given_and_priced(tiny_model_dir, tmp_path):
    """The adapter has the LoraConfig's rank, targets and DoRA; the plan is priced on its rank and targets."""
    from peft import LoraConfig

    given = LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj", "v_proj"], use_dora=True)
    result = train(str(tiny_model_dir), output_dir=tmp_path / "run", peft_config=given, **FAST)
    adapter = result.model.peft_config["default"]
    assert (adapter.r, adapter.lora_alpha, set(adapter.target_modules), adapter.use_dora) == (
        4, 16, {"q_proj", "v_proj"}, True,
    )  # fmt: skip
    planned = result.plan.estimate.settings
    assert (planned.method, planned.lora_r, planned.lora_target_modules) == ("lora", 4, ("q_proj", "v_proj"))


def test_the_default_lora_config_keeps_peft_s_own_targets(tiny_model_dir):
    """LoraConfig() as TRL's docs pass it: its r and alpha kept, its targets left to peft (a recipe says null); the
    plan prices every linear for them (an upper bound)."""
    from peft import LoraConfig

    from grpo_lite.training.arguments import peft_lora

    lora = peft_lora(LoraConfig(), {}, None)
    assert lora == {
        "r": 8, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": None,
        "use_dora": False, "use_rslora": False, "modules_to_save": None,
    }  # fmt: skip
    from grpo_lite.recipe.recipe import Recipe

    recipe = Recipe(str(tiny_model_dir), None, lora=lora)
    assert recipe.plan_settings()["lora_r"] == 8 and "lora_target_modules" not in recipe.plan_settings()
    planned = plan(str(tiny_model_dir), device="cpu", **recipe.plan_settings())
    assert recipe.filled(planned).lora["target_modules"] is None  # peft picks them, as under TRL


@pytest.mark.parametrize(
    ("passed", "message"),
    [
        ({"lora_r": 8}, "peft_config and lora_r both set the LoRA adapter: set it in the LoraConfig"),
        ({"method": "full"}, "peft_config trains a LoRA adapter but method='full' trains every weight"),
    ],
)
def test_peft_config_with_lora_settings_is_one_line_and_nothing_written(tiny_model_dir, tmp_path, passed, message):
    from peft import LoraConfig

    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=message) as info:
        train(str(tiny_model_dir), output_dir=out, peft_config=LoraConfig(r=4), **{**FAST, **passed})
    assert "\n" not in str(info.value) and not out.exists()


def test_a_peft_config_that_is_not_lora_is_refused(tiny_model_dir, tmp_path):
    from peft import PromptTuningConfig

    with pytest.raises(ConfigError, match=r"peft_config=PromptTuningConfig\(\.\.\.\).*pass a peft.LoraConfig"):
        train(str(tiny_model_dir), output_dir=tmp_path / "run", peft_config=PromptTuningConfig(num_virtual_tokens=4))


def test_a_reward_model_folder_scores_and_is_planned_for(tiny_model_dir, reward_model_dir, tmp_path):
    """A folder of an AutoModelForSequenceClassification is a reward model, as GRPOTrainer loads one by name: it
    scores the completions (logged under its name) and its weights are a component of the plan."""
    result = train(
        str(tiny_model_dir), output_dir=tmp_path / "run", **{**FAST, "rewards": ["length", str(reward_model_dir)]}
    )
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["rewards"] == ["length_reward", "tiny-rm"]
    assert "rewards/tiny-rm/mean" in record["history"][0]
    from transformers import AutoModelForSequenceClassification

    loaded = AutoModelForSequenceClassification.from_pretrained(reward_model_dir, num_labels=1)
    weights = sum(t.nbytes for t in (*loaded.parameters(), *loaded.buffers()))
    components = {c.name: c.bytes for c in result.plan.estimate.phases[0].components}
    assert components["reward_models"] == weights
    from grpo_lite.evaluation import evaluate

    said = "was trained with the rewards length_reward, tiny-rm; tiny-rm cannot be rebuilt from its run.json"
    for run in (tmp_path / "run", tmp_path / "run" / "final"):
        with pytest.raises(ConfigError, match=said):
            evaluate(run, "synthetic", limit=2, max_new_tokens=2)
    scores = evaluate(tmp_path / "run", "synthetic", limit=2, max_new_tokens=2, rewards=[str(reward_model_dir)])
    assert scores.n == 2 and scores.n_unscored == 0 and scores.graded


def test_a_reward_model_object_with_its_processing_class(tiny_model_dir, reward_model_dir):
    """A loaded model is taken as it is; reward_processing_classes gives one entry per reward, else one line."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from grpo_lite.rewards import resolve_rewards
    from grpo_lite.training.arguments import check_processing_classes

    model = AutoModelForSequenceClassification.from_pretrained(reward_model_dir, num_labels=1)
    assert resolve_rewards(["length", model])[1] is model
    tokenizer = AutoTokenizer.from_pretrained(reward_model_dir)
    assert check_processing_classes([None, tokenizer], 2) == [None, tokenizer]
    assert check_processing_classes(tokenizer, 1) == [tokenizer]
    with pytest.raises(ConfigError, match="reward_processing_classes has 1 entries for 2 rewards: give one per"):
        check_processing_classes([tokenizer], 2)


def test_a_reward_model_that_does_not_load_is_one_line_and_nothing_written(tiny_model_dir, tmp_path):
    """A folder without weights, a path that is not there: one line naming the reward model; an import path is still
    an import path (its own message)."""
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    out = tmp_path / "run"
    for name in (str(empty), str(tmp_path / "missing" / "rm"), "nobody/no-such-reward-model"):
        with pytest.raises(ConfigError, match=rf"rewards: the reward model '{name}' does not load .*pass a folder"):
            train(str(tiny_model_dir), output_dir=out, **{**FAST, "rewards": [name]})
        assert not out.exists()
    with pytest.raises(ConfigError, match="no module 'no_such_package'"):
        train(str(tiny_model_dir), output_dir=out, **{**FAST, "rewards": ["no_such_package.rewards:solved"]})


def test_a_hub_dataset_id_offline_is_one_line_and_nothing_written(tiny_model_dir, tmp_path, monkeypatch):
    """``owner/name`` goes to datasets.load_dataset; offline it says it needs the hub and how to pass a local copy.
    A path with a file suffix or two folders is still a path (file not found)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    with pytest.raises(
        DataError, match=r"dataset='trl-lib/DeepMath-103K' is a Hugging Face hub id .*needs the hub"
    ) as info:
        train(str(tiny_model_dir), output_dir=out, **{**FAST, "dataset": "trl-lib/DeepMath-103K"})
    assert "pass a local copy" in str(info.value) and "\n" not in str(info.value) and not out.exists()
    for path in ("data/train.jsonl", "data/some/folder"):
        with pytest.raises(DataError, match="file not found"):
            train(str(tiny_model_dir), output_dir=out, **{**FAST, "dataset": path})


def test_use_rslora_and_use_dora_from_train_and_a_recipe(tiny_model_dir, tmp_path):
    """peft's own LoRA values are train() settings and a recipe's lora: keys: the planner keeps the run a LoRA run
    and the adapter gets them as written."""
    from grpo_lite.recipe.recipe import Recipe

    result = train(str(tiny_model_dir), output_dir=tmp_path / "a", use_rslora=True, **FAST)
    assert result.plan.preset.method in ("lora", "qlora") and result.model.peft_config["default"].use_rslora
    written = Recipe.from_dict(
        {"model": str(tiny_model_dir), "preset": "lora", "device": "cpu", "lora": {"r": 4, "use_dora": True}}
    )
    result = train(config=written, output_dir=tmp_path / "b", **FAST)
    adapter = result.model.peft_config["default"]
    assert (adapter.r, adapter.use_dora) == (4, True)


def test_the_plan_prices_a_reward_model_beside_the_policy(tiny_model_dir):
    """reward_model_bytes (train() measures it) adds a component, and never reaches GRPOConfig's settings."""
    alone = plan(str(tiny_model_dir), device="cpu")
    beside = plan(str(tiny_model_dir), device="cpu", reward_model_bytes=2**30)
    assert beside.estimate.total_bytes - alone.estimate.total_bytes == pytest.approx(2**30, rel=0.01)
    assert "reward_model_bytes" not in beside.settings


def _counted_loads(monkeypatch) -> list[str]:
    """Each reward model's weights loaded from now on (AutoModelForSequenceClassification.from_pretrained)."""
    from transformers import AutoModelForSequenceClassification

    loads, load = [], AutoModelForSequenceClassification.from_pretrained.__func__

    def counted(cls, name, *args, **kwargs):
        loads.append(str(name))
        return load(cls, name, *args, **kwargs)

    monkeypatch.setattr(AutoModelForSequenceClassification, "from_pretrained", classmethod(counted))
    return loads


def test_the_cli_loads_a_reward_model_folder_once(tiny_model_dir, reward_model_dir, tmp_path, monkeypatch):
    """trl grpo's --reward_model_name_or_path (one load for the run); the launcher of --num-processes 2 checks the
    rewards before it starts the ranks without loading the weights (each rank loads its own), and still refuses a
    folder that holds no model in one line."""
    from grpo_lite.cli import main, relaunch

    loads = _counted_loads(monkeypatch)
    out = tmp_path / "run"
    argv = ["train", "--model_name_or_path", str(tiny_model_dir), "--dataset_name", "synthetic", "--output_dir"]
    argv += [str(out), "--reward_model_name_or_path", str(reward_model_dir), "--reward_funcs", "length"]
    argv += ["--num_generations", "4", "--per_device_train_batch_size", "4", "--max_completion_length", "8"]
    assert main([*argv, "--max_steps", "1", "--save_strategy", "no", "--quiet", "true"]) == 0
    assert loads == [str(reward_model_dir)]
    assert json.loads((out / "run.json").read_text())["rewards"] == ["tiny-rm", "length_reward"]

    launched = []
    monkeypatch.setattr(relaunch, "maybe_relaunch", lambda args: launched.append(args) or 0)
    argv = ["train", str(tiny_model_dir), "--dataset", "synthetic", "--num-processes", "2", "--reward", "length"]
    argv += ["--output-dir"]
    assert main([*argv, str(tmp_path / "two"), "--reward", str(reward_model_dir)]) == 0
    assert len(launched) == 1 and loads == [str(reward_model_dir)]  # none by the launcher
    (tmp_path / "empty").mkdir()
    assert main([*argv, str(tmp_path / "two"), "--reward", str(tmp_path / "empty")]) == 2
    assert len(launched) == 1


def test_evaluate_scores_a_reward_model_as_grpo_trainer_does(tiny_model_dir, reward_model_dir, tmp_path):
    """A reward model (its folder or the object) is a reward of evaluate() too: the prompt and completion through its
    tokenizer, its one logit, named as TRL logs it; a score does not depend on the batch it is padded in."""
    from transformers import AutoModelForSequenceClassification

    from grpo_lite.evaluation import _ModelReward, evaluate

    prompts = [[{"role": "user", "content": q}] for q in ("What is 1 + 1?", "Name a color of the sky at noon, please.")]
    texts = ["2", "It is blue, most of the time, unless clouds cover it."]
    model = AutoModelForSequenceClassification.from_pretrained(reward_model_dir, num_labels=1)
    score = _ModelReward(model)
    together = score(prompts, texts)
    alone = [score([p], [t])[0] for p, t in zip(prompts, texts)]
    assert together == pytest.approx(alone, abs=1e-5) and together[0] != pytest.approx(together[1], abs=1e-6)
    dataset = _quick_start_rows().select_columns(["prompt"])
    for reward in (str(reward_model_dir), model):
        result = evaluate(
            str(tiny_model_dir), dataset, split="train", rewards=[reward, "length"], max_new_tokens=4, batch_size=3
        )
        assert set(result.reward_means) == {"tiny-rm", "length_reward"} and result.n == 8
        assert result.reward_unscored == {"tiny-rm": 0, "length_reward": 0}


def test_evaluate_gives_a_conversational_task_s_rewards_the_messages_trl_gives(tiny_model_dir):
    """After a conversational prompt TRL passes each completion as the assistant's message: a reward written as TRL's
    docs write it (``completion[0]["content"]``) scores in evaluate() as in training (it raised: a string's [0])."""
    from grpo_lite.evaluation import evaluate

    def letters(completions, **kwargs):
        return [float(len(completion[0]["content"])) for completion in completions]

    result = evaluate(str(tiny_model_dir), _quick_start_rows(), split="train", rewards=[letters], max_new_tokens=4)
    assert result.n == 8 and result.reward_unscored == {"letters": 0} and result.reward_means["letters"] > 0
