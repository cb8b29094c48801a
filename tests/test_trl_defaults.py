"""TRL's defaults unless there is a reason: what a run sets that the user did not name is TRL's GRPOConfig default,
except what the plan sets for memory and grpo-lite's run defaults (each with its reason); the plan prints each
difference, run.json records it. Expected values are TRL's own field defaults, read from the installed TRL."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from grpo_lite.defaults import RUN
from grpo_lite.recipe.departures import departures

NOT_MEMORY = ("learning_rate", "lr_scheduler_type", "warmup_steps", "max_grad_norm", "adam_beta1", "adam_beta2",
              "weight_decay", "num_train_epochs", "temperature", "report_to", "save_strategy", "loss_type",
              "scale_rewards")  # fmt: skip


def _trl_field_defaults() -> dict:
    from trl import GRPOConfig

    return {f.name: f.default for f in dataclasses.fields(GRPOConfig) if f.default is not dataclasses.MISSING}


def test_a_planned_run_takes_trl_defaults_for_what_nobody_set() -> None:
    """Full fine-tuning on CPU: every setting not about memory is TRL's (1e-6, linear, no warmup, clip 1.0, beta2
    0.999, no decay, 3 epochs), but for grpo-lite's run defaults; 0.6 set cosine, 0.1, 0.99, 0.1, 1 epoch."""
    from trl import GRPOConfig

    from grpo_lite import plan
    from grpo_lite.recipe.recipe import Recipe

    config = Recipe.from_plan(plan("Qwen2.5-0.5B", device="cpu", preset="full")).grpo_config("/tmp/x")
    plain = GRPOConfig("/tmp/x", use_cpu=True, bf16=False)  # TRL's own, after its __post_init__
    trl = _trl_field_defaults()
    for key in NOT_MEMORY:
        assert getattr(config, key) == getattr(plain, key), key
    for key, departure in RUN.items():
        assert getattr(config, key) == departure.value != trl[key], key


def test_each_departure_says_who_and_why() -> None:
    from grpo_lite import plan

    p = plan("Qwen2.5-0.5B", device="cpu", preset="lora", max_grad_norm=0.5, logging_steps=5)
    trl = {**p.settings, **{k: d.value for k, d in RUN.items() if k not in p.settings}}
    rows = {d.key: d for d in departures(trl, written=p.fixed, plan=p)}
    assert (rows["max_grad_norm"].source, rows["max_grad_norm"].trl) == ("you", 1.0)
    assert rows["logging_steps"].source == "you"  # the user's 5, not grpo-lite's 1
    assert rows["save_steps"].source == "grpo-lite" and rows["save_steps"].reason == RUN["save_steps"].reason
    assert rows["learning_rate"].source == "plan" and "LoRA" in rows["learning_rate"].reason  # 1e-5 vs TRL's 1e-6
    assert rows["gradient_checkpointing"].source == "plan"  # False on this plan; TRL's default is True
    # a setting at TRL's value is no departure, however it was written: 1 and 1.0 are the same number
    assert departures({"max_grad_norm": 1, "beta": 0.0}, written={"max_grad_norm", "beta"}) == []


def test_plan_prints_and_json_records_each_difference(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from grpo_lite.cli import main

    assert main(["plan", "Qwen2.5-0.5B", "--device", "cpu", "--preset", "full", "--set", "beta=0.04"]) == 0
    text = capsys.readouterr().out
    assert "not TRL's defaults (GRPOConfig):" in text
    assert re.search(r"- beta=0\.04 \(TRL's 0\.0\), yours", text)
    assert re.search(r"- save_steps=50 \(TRL's 500\), grpo-lite's: a checkpoint every 50 steps", text)
    assert "lr_scheduler_type" not in text and "max_grad_norm" not in text  # TRL's, so not listed
    assert main(["plan", "Qwen2.5-0.5B", "--device", "cpu", "--preset", "full", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["trl_differences"]
    assert {r["key"]: (r["value"], r["trl"], r["source"]) for r in rows}["save_total_limit"] == (2, None, "grpo-lite")


def test_from_trl_doc_lists_every_run_default() -> None:
    """docs/from_trl.md's list of the defaults grpo-lite changes is the code's: each key, its value and TRL's."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "from_trl.md").read_text()
    trl = _trl_field_defaults()
    listed = set(re.findall(r"^\| `(\w+)` \| `[^`]*` \| `[^`]*` \|", text, flags=re.M))
    assert listed == set(RUN)
    for key, departure in RUN.items():
        assert f"| `{key}` | `{departure.value!r}` | `{trl[key]!r}` | {departure.reason} |" in text


def test_plan_reads_trls_defaults_without_importing_it() -> None:
    """``grpo-lite plan`` imports no heavy library: TRL's defaults read from its installed sources are the
    dataclass's own, field for field (a default computed at import, ``optim``, is the one left out)."""
    import subprocess
    import sys

    code = (
        "import sys, json\nfrom grpo_lite.recipe.departures import trl_defaults\n"
        "print(json.dumps([sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules), "
        "trl_defaults()], default=repr))"
    )
    heavy, written = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                               check=True).stdout)  # fmt: skip
    assert heavy == []
    real = {k: v for k, v in _trl_field_defaults().items() if isinstance(v, (int, float, str, bool, type(None)))}
    assert {k: written[k] for k in written if k in real} == {k: real[k] for k in written if k in real}
    assert set(real) - set(written) == {"optim"}
