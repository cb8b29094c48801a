"""Nothing a user did must cost them finished work: output-dir guard, resume, OOM step down, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tiny_run import TINY_RUN

from grpo_lite import ConfigError, DoesNotFitError, train

FAST = dict(TINY_RUN)


def _oom_at(step: int):
    """A callback that raises CUDA's out-of-memory error once, when ``step`` begins."""
    from transformers import TrainerCallback

    class InjectOOM(TrainerCallback):
        fired = False

        def on_step_begin(self, args, state, control, **kwargs):
            if not self.fired and state.global_step + 1 == step:
                type(self).fired = True
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.90 GiB (injected)")

    return InjectOOM()


def _step_downs(events: list) -> list:
    """The out-of-memory step downs among a run's events (``replanned`` events of that cause)."""
    return [e for e in events if e["event"] == "replanned" and e["cause"] == "out_of_memory"]


def _time_attempts(monkeypatch) -> list[float]:
    """The seconds of each attempt's ``trainer.train()`` as long as it ran (an OOM ends all but the last), in order."""
    import trl

    took, train_once = [], trl.GRPOTrainer.train

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return train_once(self, *args, **kwargs)
        finally:
            took.append(time.perf_counter() - start)

    monkeypatch.setattr(trl.GRPOTrainer, "train", timed)
    return took


def _stop_at(step: int):
    """A callback that stops training after ``step`` and saves a checkpoint, as Ctrl-C does."""
    from transformers import TrainerCallback

    class StopAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == step:
                control.should_save = control.should_training_stop = True

    return StopAt()


def test_output_dir_with_another_run_is_refused_and_kept(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text('{"status": "finished"}')
    with pytest.raises(
        ConfigError, match=r"already holds a run.*no complete checkpoint to resume: pass overwrite=True"
    ):
        train(str(tiny_model_dir), output_dir=out, max_steps=1, save_strategy="no", **FAST)
    (out / "checkpoint-1").mkdir()
    (out / "checkpoint-1" / "trainer_state.json").write_text("{}")  # a complete checkpoint: resume is the way on
    with pytest.raises(ConfigError, match=r"already holds a run.*resume=True.*overwrite=True"):
        train(str(tiny_model_dir), output_dir=out, max_steps=1, save_strategy="no", **FAST)
    assert json.loads((out / "run.json").read_text()) == {"status": "finished"}


def test_overwrite_replaces_the_old_run(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    (out / "checkpoint-7").mkdir(parents=True)
    (out / "run.json").write_text("{}")
    result = train(str(tiny_model_dir), output_dir=out, max_steps=1, save_strategy="no", overwrite=True, **FAST)
    assert result.steps == 1 and not (out / "checkpoint-7").exists()
    assert json.loads((out / "run.json").read_text())["status"] == "finished"


def test_resume_without_checkpoint_is_a_clear_error(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="holds no checkpoint-N folder"):
        train(str(tiny_model_dir), output_dir=tmp_path / "empty", max_steps=1, resume=True, **FAST)


def test_two_plus_two_resumed_steps_match_four_straight(tiny_model_dir, tmp_path):
    kw = dict(method="lora", save_strategy="steps", save_steps=100, **FAST)
    straight = train(str(tiny_model_dir), output_dir=tmp_path / "straight", max_steps=4, **kw)
    first = train(str(tiny_model_dir), output_dir=tmp_path / "split", max_steps=4, callbacks=[_stop_at(2)], **kw)
    assert first.steps == 2 and (tmp_path / "split" / "checkpoint-2").is_dir()
    resumed = train(str(tiny_model_dir), output_dir=tmp_path / "split", max_steps=4, resume=True, **kw)
    assert resumed.steps == straight.steps == 4
    assert resumed.events[0]["event"] == "resume"
    a = {n: p.detach() for n, p in straight.model.named_parameters() if "lora_" in n}
    b = {n: p.detach() for n, p in resumed.model.named_parameters() if "lora_" in n}
    assert a.keys() == b.keys() and a
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-4, rtol=1e-3, msg=name)


def test_out_of_memory_steps_down_the_ladder_and_keeps_the_steps(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    result = train(str(tiny_model_dir), output_dir=out, max_steps=4, preset="full", save_strategy="no",
                   callbacks=[_oom_at(3)], **FAST)  # fmt: skip
    assert result.steps == 4
    oom = _step_downs(result.events)
    assert len(oom) == 1 and oom[0]["step"] == 2 and oom[0]["from"]["preset"] == "full"
    assert result.plan.preset.name == oom[0]["to"]["preset"] != "full"
    assert oom[0]["to"]["peak_gib"] == round(result.plan.estimate.total_gib, 3)
    assert [r["step"] for r in result.history] == [1, 2, 3, 4]
    record = json.loads((out / "run.json").read_text())
    assert record["events"][0]["to"]["preset"] == result.plan.preset.name and record["steps"] == 4
    assert record["settings"]["per_device_train_batch_size"] == record["recipe"]["trl"]["per_device_train_batch_size"]


def test_a_step_down_from_lora_carries_the_adapters_merged_with_the_tokenizer(
    tiny_model_dir, tmp_path, capfd, monkeypatch
):
    """From a LoRA rung the next one starts from the base with the adapters of step 2 merged in (a PEFT model's
    save_pretrained would write the adapters alone), from a folder that also holds the tokenizer, named in the
    event and the line; the wall time counts both attempts."""
    from transformers import AutoModelForCausalLM, TrainerCallback

    from grpo_lite.training import replan

    class Reached(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step == 2:
                self.weights = _digest(model)  # the adapters of step 2 merged into a copy

    took = _time_attempts(monkeypatch)
    asked, next_plan = [], replan.next_plan
    monkeypatch.setattr(replan, "next_plan", lambda current, **kw: (asked.append(kw), next_plan(current, **kw))[1])

    out, starts, reached = tmp_path / "run", _starts(), Reached()
    result = train(str(tiny_model_dir), output_dir=out, max_steps=3, preset="lora", save_strategy="no",
                   callbacks=[_oom_at(3), starts, reached], **{**FAST, "quiet": False})  # fmt: skip
    oom, carried = _step_downs(result.events), out / "stepdown-1"
    assert len(oom) == 1 and oom[0]["from"]["preset"] == "lora" and oom[0]["weights"] == "stepdown-1"
    said = capfd.readouterr()
    assert f"going on from the weights reached (saved in {carried})" in said.out + said.err
    assert (carried / "config.json").is_file() and not (carried / "adapter_config.json").exists()
    assert (carried / "tokenizer_config.json").is_file()
    saved = _digest(AutoModelForCausalLM.from_pretrained(carried))  # what the next rung (4-bit) loads
    assert _close(saved, reached.weights) <= 1e-6 < 1e-3 < _close(saved, starts.seen[0])  # step 2's, not the base
    assert len(asked) == 1 and asked[0]["device"] == "cpu" and asked[0]["max_prompt_length"] > 0  # the run's inputs
    assert len(took) == 2 and sum(took) <= result.wall_seconds <= sum(took) + 0.5  # both attempts, from the calls
    assert json.loads((out / "run.json").read_text())["wall_seconds"] == round(result.wall_seconds, 2)


def test_a_step_down_keeps_what_the_user_wrote_and_takes_the_rest_from_the_next_rung(tiny_model_dir, tmp_path):
    """The next rung trains the user's settings filled by its own plan: what they wrote as written (the learning
    rate, the LoraConfig's rank, rsLoRA and the targets peft picks), what they left out the new plan's."""
    from peft import LoraConfig

    out = tmp_path / "run"
    lora = LoraConfig(r=4, lora_alpha=16, use_rslora=True)  # target_modules None: peft's own for the model
    result = train(str(tiny_model_dir), output_dir=out, max_steps=2, preset="lora", save_strategy="no",
                   peft_config=lora, callbacks=[_oom_at(2)], **{**FAST, "learning_rate": 3e-3})  # fmt: skip
    (oom,) = _step_downs(result.events)
    recipe, new = json.loads((out / "run.json").read_text())["recipe"], result.plan
    assert recipe["preset"] == new.preset.name == oom["to"]["preset"] != "lora" and result.steps == 2
    assert recipe["trl"]["learning_rate"] == 3e-3 and recipe["seed"] == 0
    assert (recipe["lora"]["r"], recipe["lora"]["use_rslora"], recipe["lora"]["target_modules"]) == (4, True, None)
    assert recipe["quantization"] == new.model_kwargs["quantization"] is not None  # the new rung's load
    assert recipe["dtype"] == new.model_kwargs["dtype"]
    assert {k: recipe["trl"][k] for k in new.settings} == new.settings  # the new plan's (the written ones fixed)


def test_two_step_downs_keep_every_steps_and_every_attempts_time(tiny_model_dir, tmp_path, monkeypatch):
    """An OOM as the first attempt's step 2 begins and as the second's step 3 begins (its own count): two rungs
    down, four steps in all, the wall time the three attempts' sum."""
    took = _time_attempts(monkeypatch)
    result = train(str(tiny_model_dir), output_dir=tmp_path / "run", max_steps=4, preset="full", save_strategy="no",
                   callbacks=[_oom_at(2), _oom_at(3)], **FAST)  # fmt: skip
    assert [e["step"] for e in _step_downs(result.events)] == [1, 3] and result.steps == 4  # 3: 1 + 2 steps
    assert len(took) == 3 and sum(took) <= result.wall_seconds <= sum(took) + 0.5


def test_out_of_memory_at_the_bottom_rung_says_what_is_needed(tiny_model_dir, tmp_path):
    with pytest.raises(DoesNotFitError, match="no cheaper rung is left"):
        train(str(tiny_model_dir), output_dir=tmp_path / "run", max_steps=3, preset="qlora", save_strategy="no",
              callbacks=[_oom_at(2)], **FAST)  # fmt: skip


def test_on_oom_raise_reraises(tiny_model_dir, tmp_path):
    with pytest.raises(torch.cuda.OutOfMemoryError):
        train(str(tiny_model_dir), output_dir=tmp_path / "run", max_steps=3, on_oom="raise", save_strategy="no",
              callbacks=[_oom_at(2)], **FAST)  # fmt: skip


@pytest.mark.slow
def test_ctrl_c_saves_a_loadable_checkpoint_and_says_how_to_resume(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "grpo_lite.cli", "train", str(tiny_model_dir), "--dataset", "synthetic",
           "--reward", "length", "--max-steps", "500", "--output-dir", str(out), "--method", "lora",
           "--set", "num_generations=4", "--set", "per_device_train_batch_size=4", "--set", "max_completion_length=16",
           "--set", "save_steps=1000", "--set", f"learning_rate={FAST['learning_rate']}"]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline:  # wait until training has really started
        if (out / "run.json").is_file() and "running" in (out / "run.json").read_text():
            break
        time.sleep(0.5)
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output[-2000:]
    assert "Resume with the same command plus --resume" in output
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "interrupted"
    step = record["steps"]
    ckpt = out / f"checkpoint-{step}"
    assert 1 <= step < 500 and (ckpt / "trainer_state.json").is_file() and (ckpt / "adapter_config.json").is_file()
    resumed = train(str(tiny_model_dir), output_dir=out, max_steps=step + 1, resume=True, method="lora",
                    save_strategy="no", **{k: v for k, v in FAST.items()})  # fmt: skip
    assert resumed.steps == step + 1


@pytest.mark.parametrize(
    ("requested", "step", "main", "interrupted"),
    [
        (True, 3, True, True),  # Ctrl-C or SIGTERM before the last step: a checkpoint, and how to resume
        (True, 5, True, False),  # asked during the last step: every step is trained, the run is finished
        (False, 3, True, False),  # no stop asked (an epoch's end before max_steps): finished
        (True, 3, False, True),  # another rank: the same record, nothing printed
    ],
)
def test_the_finish_of_a_run_stopped_or_not(tmp_path, monkeypatch, requested, step, main, interrupted):
    """``finish``: the final model saved unless stopped before the last step; the result, the event and run.json's
    status; the summary and the line that says how to resume (Python's form naming the folder) on the main rank."""
    from types import SimpleNamespace

    from grpo_lite.training import build, result
    from grpo_lite.training.run import checkpoints

    out, newest = tmp_path / "run", tmp_path / "run" / "checkpoint-3"
    saved, records, reports, printed = [], [], [], []
    monkeypatch.setattr(build, "save_final", lambda *args: saved.append(args) or out / "final")
    monkeypatch.setattr(checkpoints, "scan", lambda folder: SimpleNamespace(newest=newest if folder == out else None))
    monkeypatch.setattr(result, "finish_report", lambda *args: reports.append(args))
    watch = SimpleNamespace(
        interrupt=SimpleNamespace(requested=requested, signal="SIGTERM" if requested else None),
        history=SimpleNamespace(rows=[{"step": 1}]), memory=SimpleNamespace(peak=lambda: {"max_allocated_gib": 1.5}),
    )  # fmt: skip
    loop = SimpleNamespace(
        watch=watch, done=step, plan="the plan", wall=12.5, events=[{"event": "started"}],
        write_record=lambda **fields: records.append(fields),
    )  # fmt: skip
    trainer = SimpleNamespace(state=SimpleNamespace(global_step=step, max_steps=5), model="the model")
    inputs = SimpleNamespace(tokenizer="the tokenizer")
    run = SimpleNamespace(
        out=out, state=SimpleNamespace(is_main_process=main), console=SimpleNamespace(print=printed.append)
    )

    got = result.finish(loop, trainer, inputs, run)

    assert saved == ([] if interrupted else [(trainer, "the tokenizer", out)])
    model_dir = None if interrupted else out / "final"
    stopped = [{"event": "interrupted", "step": 3, "checkpoint": str(newest), "signal": "SIGTERM"}]
    assert got == result.TrainResult(
        output_dir=out, model_dir=model_dir, plan="the plan", steps=step, history=[{"step": 1}],
        peak_memory={"max_allocated_gib": 1.5}, wall_seconds=12.5, interrupted=interrupted,
        stop_signal="SIGTERM" if interrupted else None, events=[{"event": "started"}] + (stopped if interrupted else []),
        model="the model", tokenizer="the tokenizer",
    )  # fmt: skip
    assert got.events is loop.events  # the run's own list, the new event in it
    assert records == [{"status": "interrupted" if interrupted else "finished", "model_dir": model_dir}]
    assert reports == ([(got, run.console)] if main else [])
    resume = (
        f"[bold]interrupted at step 3[/bold]: checkpoint saved in {newest}. Resume with the same command plus "
        f"--resume (Python: train(..., output_dir={str(out)!r}, resume=True))"
    )
    assert printed == ([resume] if main and interrupted else [])


@pytest.mark.parametrize(
    ("record", "peak", "wall"),
    [
        ({"status": "finished", "peak_memory": {"max_allocated_gib": 2.5}, "wall_seconds": 7.5}, {"max_allocated_gib": 2.5}, 7.5),
        ({"status": "finished", "wall_seconds": None}, None, 0.0),
        (None, None, 0.0),  # no run.json
        ('{"status": "fini', None, 0.0),  # cut off: read as nothing, and left where it is
    ],
    ids=["finished", "no-wall-time", "no-run-json", "cut-off"],
)  # fmt: skip
def test_a_finished_run_resumed_with_no_steps_asked_is_its_record(tmp_path, record, peak, wall):
    """``TrainResult.of_finished_run``: what run.json and the earlier run hold, nothing trained (``model`` None)
    and nothing written."""
    from types import SimpleNamespace

    from grpo_lite.training.result import TrainResult

    if record is not None:
        (tmp_path / "run.json").write_text(record if isinstance(record, str) else json.dumps(record))
    history, events = [{"step": 1, "reward": 0.5}], [{"event": "started"}]
    run = SimpleNamespace(out=tmp_path, earlier=SimpleNamespace(reached=4, history=history, events=events))
    got = TrainResult.of_finished_run(run, SimpleNamespace(tokenizer="the tokenizer"), "the plan")
    assert got == TrainResult(
        output_dir=tmp_path, model_dir=tmp_path / "final", plan="the plan", steps=4, history=history,
        peak_memory=peak, wall_seconds=wall, events=events, tokenizer="the tokenizer", already_finished=True,
    )  # fmt: skip
    assert not got.interrupted and got.stop_signal is None and got.model is None and got.exported is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if record is None else ["run.json"])


def test_the_reward_change_is_the_first_and_last_windows_mean():
    from grpo_lite.training.result import TrainResult

    rows = [{"step": i, "reward": r} for i, r in enumerate([0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0], start=1)]
    result = TrainResult(Path("run"), None, None, 8, rows, None, 1.0)
    assert result.reward_change() == (1.0, 8.0) and result.reward_change(window=2) == (0.5, 9.0)  # 3 by default
    assert TrainResult(Path("run"), None, None, 0, [], None, 0.0).reward_change() == (None, None)


def _rows(n: int):
    from datasets import Dataset

    return Dataset.from_list([{"question": f"What is {i} plus {i}?", "answer": str(2 * i)} for i in range(1, n + 1)])


def test_no_max_steps_trains_trls_epochs(tiny_model_dir, tmp_path):
    result = train(str(tiny_model_dir), output_dir=tmp_path / "run", save_strategy="no",
                   **{**FAST, "dataset": _rows(3)})  # fmt: skip
    assert result.steps == 9  # one prompt (4 generations) per step, 3 prompts, GRPOConfig's 3 epochs (0.6 trained 1)


def test_out_of_memory_in_an_epoch_run_keeps_the_epoch_total(tiny_model_dir, tmp_path):
    result = train(str(tiny_model_dir), output_dir=tmp_path / "run", preset="full", save_strategy="no",
                   callbacks=[_oom_at(3)], num_train_epochs=1, **{**FAST, "dataset": _rows(4)})  # fmt: skip
    assert result.steps == 4 and [e["step"] for e in _step_downs(result.events)] == [2]


def test_resume_after_a_step_down_goes_on_from_the_carried_weights(tiny_model_dir, tmp_path):
    from transformers import TrainerCallback

    oom = _oom_at(3)

    class StopAfterStepDown(TrainerCallback):  # Ctrl-C one step into the attempt after the step down
        def on_step_end(self, args, state, control, **kwargs):
            if type(oom).fired and state.global_step == 1:
                control.should_save = control.should_training_stop = True

    out = tmp_path / "run"
    kw = dict(max_steps=5, save_strategy="steps", save_steps=1, **FAST)
    first = train(str(tiny_model_dir), output_dir=out, preset="full", callbacks=[oom, StopAfterStepDown()], **kw)
    assert first.steps == 3 and first.plan.preset.name != "full"
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1"]  # the full rung's are gone
    # the checkpoint holds 3 steps of the run: 2 before the step down and its own 1; fewer is refused, nothing moved
    with pytest.raises(ConfigError, match=r"holds 3 trained steps \(checkpoint-1\) and max_steps=2 asks for fewer"):
        train(str(tiny_model_dir), output_dir=out, resume=True, **{**kw, "max_steps": 2})
    moved = out.rename(tmp_path / "moved")  # a run moved (or copied) goes on from its own carried weights
    resumed = train(str(tiny_model_dir), output_dir=moved, resume=True, **kw)
    assert resumed.steps == 5 and resumed.plan.preset.name == first.plan.preset.name
    assert [r["step"] for r in resumed.history] == [1, 2, 3, 4, 5]
    assert [(e["event"], e.get("cause")) for e in resumed.events] == [("replanned", "out_of_memory"), ("resume", None)]
    rates = [r["learning_rate"] for r in resumed.history]  # one schedule over the whole run: no second warmup
    assert rates == pytest.approx([0.01, 0.008, 0.006, 0.004, 0.002]), rates  # TRL's linear decay over 5 steps


@pytest.mark.parametrize("instant", ["before the old rung's checkpoints go", "before the next rung's first checkpoint"])
def test_a_run_killed_during_a_step_down_resumes_from_the_weights_carried(tiny_model_dir, tmp_path, instant):
    """SIGKILL after the step down at step 2 has carried the weights: with the old rung's checkpoints still there,
    or without any checkpoint left, the resume goes on from stepdown-1 on the lower rung; no step is lost."""
    from test_faults import _in_child
    from transformers import TrainerCallback

    from grpo_lite.training.run import checkpoints

    torch.set_num_threads(1)  # a forked child cannot use the parent's OpenMP pool (conftest restores the count)
    oom, out = _oom_at(3), tmp_path / "run"
    kw = dict(max_steps=4, save_strategy="steps", save_steps=1, **FAST)

    class KillOnTheNextRung(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if type(oom).fired:
                os.kill(os.getpid(), signal.SIGKILL)

    def body():
        if instant.startswith("before the old"):
            checkpoints.drop_checkpoints = lambda output_dir: os.kill(os.getpid(), signal.SIGKILL)
        train(str(tiny_model_dir), output_dir=out, preset="full", callbacks=[oom, KillOnTheNextRung()], **kw)

    code, output = _in_child(body)
    assert code == -signal.SIGKILL, output[-2000:]
    left = sorted(p.name for p in out.glob("checkpoint-*"))
    assert left == (["checkpoint-1", "checkpoint-2"] if instant.startswith("before the old") else [])
    resumed = train(str(tiny_model_dir), output_dir=out, resume=True, **kw)
    assert resumed.steps == 4 and resumed.plan.preset.name != "full"
    assert [r["step"] for r in resumed.history] == [1, 2, 3, 4]
    assert [(e["event"], e.get("cause")) for e in resumed.events] == [
        ("replanned", "out_of_memory"), ("crashed", None), ("resume", None)
    ]  # fmt: skip
    assert "resuming from stepdown-1, the weights carried at the step down after step 2" in resumed.events[-1]["notes"]
    record = json.loads((out / "run.json").read_text())
    marker = json.loads((out / "checkpoint-2" / checkpoints.MARKER).read_text())  # the lower rung's last
    assert marker["run"]["run_id"] == record["run_id"] and marker["run"]["source"] == "stepdown-1"


def test_learning_rate_schedule_continues_across_a_step_down(tiny_model_dir, tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _check_schedule_across_a_step_down(tiny_model_dir, tmp_path)
    finally:
        torch.set_num_threads(threads)


def _check_schedule_across_a_step_down(tiny_model_dir, tmp_path):
    kw = dict(max_steps=4, preset="full", save_strategy="no", **FAST)
    straight = train(str(tiny_model_dir), output_dir=tmp_path / "straight", **kw)
    stepped = train(str(tiny_model_dir), output_dir=tmp_path / "stepped", callbacks=[_oom_at(3)], **kw)
    rates = [r["learning_rate"] for r in stepped.history]
    assert rates == pytest.approx([r["learning_rate"] for r in straight.history], rel=1e-6)
    assert rates[2] > 0  # before the fix the next rung warmed up again: 0.0 at step 3
    oom = _step_downs(stepped.events)
    assert oom[0]["lr_schedule"] == "continues at step 2 of 4"
    assert (
        json.loads((tmp_path / "stepped" / "run.json").read_text())["events"][0]["lr_schedule"] == oom[0]["lr_schedule"]
    )


def test_step_down_skips_rungs_whose_package_is_missing(monkeypatch):
    from grpo_lite import plan
    from grpo_lite.planning import hardware
    from grpo_lite.training.replan import next_plan

    missing = hardware.Extras(liger_kernel=False, vllm=False, galore_torch=False, bitsandbytes=True, deepspeed=False)
    monkeypatch.setattr(hardware, "installed_extras", lambda: missing)
    current = plan("Llama-3.2-1B-Instruct", budget_gb=16, preset="full-8bit-ckpt")
    assert next_plan(current, budget_gb=16).preset.name == "lora"


def test_step_down_skips_rungs_that_a_fixed_optimizer_rules_out():
    from grpo_lite import plan
    from grpo_lite.training.replan import next_plan

    current = plan("Llama-3.2-1B-Instruct", budget_gb=24, preset="full-8bit-ckpt", optim="adamw_torch")
    assert next_plan(current, budget_gb=24).preset.method != "galore"


def test_the_step_down_takes_the_rung_right_below():
    from grpo_lite import plan
    from grpo_lite.training.replan import OOM_ADVICE, next_plan

    assert next_plan(plan("Llama-3.2-1B-Instruct", budget_gb=16, preset="galore"), budget_gb=16).preset.name == "lora"
    with pytest.raises(DoesNotFitError) as bottom:
        next_plan(plan("Llama-3.2-1B-Instruct", budget_gb=16, preset="qlora"), budget_gb=16)
    assert (
        str(bottom.value)
        == f"out of GPU memory on preset 'qlora' and no cheaper rung is left to step down to. {OOM_ADVICE}"
    )


def test_no_rung_below_that_fits_names_the_smallest_budget_of_the_last_one_tried():
    """galore on 16 GB steps down on a 2 GB budget: lora (4 GB) and qlora (3 GB) do not fit; the error is
    qlora's, with train()'s advice (the longest prompt's tokens, not a max_prompt_length to set)."""
    from grpo_lite import plan
    from grpo_lite.training.replan import next_plan

    current = plan("Llama-3.2-1B-Instruct", budget_gb=16, preset="galore")
    with pytest.raises(DoesNotFitError) as caught:
        next_plan(current, budget_gb=2, max_prompt_length=300)
    with pytest.raises(DoesNotFitError) as qlora:
        plan("Llama-3.2-1B-Instruct", budget_gb=2, preset="qlora", max_prompt_length=300)
    error = caught.value
    assert (error.smallest_budget_gb, error.preset) == (qlora.value.smallest_budget_gb, "qlora") == (3.0, "qlora")
    message = str(error)
    assert message.startswith("out of GPU memory on preset 'galore' and no cheaper rung is left to step down to; ")
    assert str(qlora.value).split(" Or shorten max_prompt_length")[0] in message
    assert "train() plans for the longest, 300 tokens" in message and "Or shorten max_prompt_length" not in message


def _schedule_trainer(tmp_path, **args):
    """What continue_schedule() reads of a trainer: its TrainingArguments, its optimizer, no scheduler yet."""
    from types import SimpleNamespace

    from transformers import TrainingArguments

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-2)
    args = TrainingArguments(output_dir=str(tmp_path), learning_rate=1e-2, report_to=[], **args)
    return SimpleNamespace(args=args, optimizer=optimizer, lr_scheduler=None)


def test_the_schedule_reads_ahead_with_its_own_arguments(tmp_path):
    """A cosine schedule with a floor (its kwargs), warmed up once: after a step down at step 2 of 6 the new
    trainer's rates are transformers' own schedule of 6 steps read from step 2."""
    from transformers.optimization import get_scheduler

    from grpo_lite.training.attempts import continue_schedule

    kw = dict(lr_scheduler_type="cosine_with_min_lr", lr_scheduler_kwargs={"min_lr": 1e-3}, warmup_steps=1)
    trainer = _schedule_trainer(tmp_path, **kw)
    assert continue_schedule(trainer, offset=2, total_steps=6) == "continues at step 2 of 6"
    other = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-2)  # the one the trainer passes
    scheduler = trainer.create_scheduler(4, optimizer=other)
    assert scheduler.optimizer is other and trainer.create_scheduler(4) is scheduler
    whole = get_scheduler("cosine_with_min_lr", optimizer=_schedule_trainer(tmp_path).optimizer, num_warmup_steps=1,
                          num_training_steps=6, scheduler_specific_kwargs={"min_lr": 1e-3})  # fmt: skip
    rates = []
    for _ in range(4):
        rates.append(other.param_groups[0]["lr"])
        other.step(), scheduler.step()
    assert rates == pytest.approx([1e-2 * whole.lr_lambdas[0](step) for step in range(2, 6)], rel=1e-9)
    assert rates[-1] > 1e-3 * 0.99 and rates[0] < 1e-2  # past the warmup, above the floor


@pytest.mark.parametrize(
    "args, kind",
    [
        (dict(lr_scheduler_type="reduce_lr_on_plateau", eval_strategy="steps", eval_steps=1), "reduce_lr_on_plateau"),
        (dict(optim="galore_adamw_layerwise"), "linear"),
    ],
)
def test_a_schedule_that_cannot_start_later_restarts_and_says_why(tmp_path, args, kind):
    from grpo_lite.training.attempts import continue_schedule

    trainer = _schedule_trainer(tmp_path, **args)
    note = continue_schedule(trainer, offset=2, total_steps=6)
    assert note == f"restarts: a {kind} schedule (or a layer-wise optimizer's) cannot start at a later step"
    assert "create_scheduler" not in vars(trainer)


def test_a_trainer_of_another_transformers_restarts_the_schedule_with_a_warning(tmp_path, monkeypatch):
    from transformers import Trainer

    from grpo_lite.training.attempts import continue_schedule

    monkeypatch.setattr(Trainer, "create_scheduler", lambda self, steps: None)  # another signature
    trainer = _schedule_trainer(tmp_path)
    known = "restarts: transformers' Trainer.create_scheduler is not the one grpo-lite knows"
    with pytest.warns(UserWarning, match=f"^the learning-rate schedule {known}$"):
        assert continue_schedule(trainer, offset=2, total_steps=6) == known
    assert "create_scheduler" not in vars(trainer)


def test_planner_inputs_cannot_be_overridden(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="max_prompt_length cannot be set here: train.. measures"):
        train(str(tiny_model_dir), output_dir=tmp_path / "run", max_steps=1, max_prompt_length=300, **FAST)


def test_overwrite_removes_links_not_their_targets(tmp_path):
    """--overwrite over a run whose final/, a checkpoint, README.md, ranks/ and final.gguf are links: the links go,
    everything they point to stays; nothing is refused, no traceback."""
    from grpo_lite.training.run.folder import guard_output_dir

    out, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    out.mkdir()
    for name in ("final", "checkpoint-2", "ranks"):
        (elsewhere / name).mkdir(parents=True)
        (elsewhere / name / "kept.txt").write_text(name)
        (out / name).symlink_to(elsewhere / name, target_is_directory=True)
    for name in ("README.md", "final.gguf"):
        (elsewhere / name).write_text(name)
        (out / name).symlink_to(elsewhere / name)
    (out / "run.json").write_text("{}")
    (out / "notes.txt").write_text("the user's")  # not the run's: kept
    guard_output_dir(out, resume=False, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert sorted(str(p.relative_to(elsewhere)) for p in elsewhere.rglob("*.*")) == [
        "README.md", "checkpoint-2/kept.txt", "final.gguf", "final/kept.txt", "ranks/kept.txt"
    ]  # fmt: skip


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_without_a_run_keeps_the_users_files(tiny_model_dir, tmp_path, monkeypatch, overwrite):
    """A project folder (--output-dir .) whose README.md a run would replace with TRL's model card: refused before
    anything is written, with or without overwrite; the notes stay (before: replaced, rc 0)."""
    from grpo_lite import OutputDirError

    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("notes")
    (project / "final").mkdir()
    monkeypatch.chdir(project)
    with pytest.raises(OutputDirError, match=r"\. holds README\.md, final, which grpo-lite did not write.*another"):
        train(str(tiny_model_dir), output_dir=".", overwrite=overwrite, **{**FAST, "max_steps": 1})
    assert (project / "README.md").read_text() == "notes"
    assert sorted(p.name for p in project.iterdir()) == ["README.md", "final"]


def test_a_link_inside_a_checkpoint_is_refused_without_overwrite(tmp_path):
    from grpo_lite import OutputDirError
    from grpo_lite.training.run.folder import guard_output_dir

    out = tmp_path / "run"
    (out / "checkpoint-2").mkdir(parents=True)
    (tmp_path / "weights").write_text("elsewhere")
    (out / "checkpoint-2" / "adapter_model.safetensors").symlink_to(tmp_path / "weights")
    with pytest.raises(OutputDirError, match=r"checkpoint-2/adapter_model\.safetensors is a symbolic link"):
        guard_output_dir(out, resume=True, overwrite=False)
    assert (tmp_path / "weights").read_text() == "elsewhere"


# ---- the step down proven on weights -----------------------------------------------------------------
OOM = torch.cuda.OutOfMemoryError  # what run_attempts catches (torch.OutOfMemoryError on a CPU build)


def _digest(model) -> dict[str, torch.Tensor]:
    """The model's weights by name as plain fp32 tensors (a LoRA model's merged in): what a rung trains from."""
    if hasattr(model, "merge_and_unload"):  # a PEFT model: its base plus adapter, which starts at zero
        import copy

        model = copy.deepcopy(model).merge_and_unload()
    return {n.removeprefix("base_model.model."): p.detach().float().clone() for n, p in model.named_parameters()}


def _starts():
    """A callback that keeps the weights of each attempt's model as its training begins."""
    from transformers import TrainerCallback

    class Starts(TrainerCallback):
        seen: list[dict[str, torch.Tensor]] = []

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.seen.append(_digest(model))

    return Starts()


def _oom_inside(step: int, where: str):
    """A callback that arms a hook on the first decoder layer when ``step`` begins: the hook raises CUDA's
    out-of-memory error once, inside that step's training forward (``where="forward"``) or its backward."""
    from transformers import TrainerCallback

    class InjectInside(TrainerCallback):
        armed = fired = False
        calls = 0

        def raise_once(self) -> None:
            if self.armed and not self.fired:
                self.fired = True
                raise OOM(f"CUDA out of memory. Tried to allocate 1.90 GiB (injected in the {where})")

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            layer = next(m for n, m in model.named_modules() if n.endswith("layers.0"))
            if where == "forward":  # the training forward only: generation runs without grad
                layer.register_forward_hook(lambda *_: self.raise_once() if torch.is_grad_enabled() else None)
            else:
                layer.register_full_backward_hook(lambda *_: self.raise_once())

        def on_step_begin(self, args, state, control, **kwargs):
            self.armed = state.global_step + 1 == step

    return InjectInside()


def _close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The largest absolute difference over the weights both hold (and they hold the same names)."""
    assert a.keys() == b.keys() and a
    return max(float((a[n] - b[n]).abs().max()) for n in a)


@pytest.mark.parametrize("where", ["boundary", "forward", "backward"])
def test_the_next_rung_starts_from_the_weights_of_the_step_reached(tiny_model_dir, tmp_path, where):
    """An OOM when step 3 begins, or inside its forward or backward: the next rung's model is the full rung's
    after step 2 (compared with a run of 2 steps without an OOM), not the base model it started from."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same reductions in both runs
    try:
        kw = dict(preset="full", save_strategy="no", lr_scheduler_type="constant", **FAST)  # step 2 at one rate
        straight = _starts()
        two = train(str(tiny_model_dir), output_dir=tmp_path / "two", max_steps=2, callbacks=[straight], **kw)
        oom = _oom_at(3) if where == "boundary" else _oom_inside(3, where)
        starts = _starts()
        stepped = train(str(tiny_model_dir), output_dir=tmp_path / "oom", max_steps=4, callbacks=[oom, starts], **kw)
    finally:
        torch.set_num_threads(threads)
    assert [e["step"] for e in _step_downs(stepped.events)] == [2] and stepped.steps == 4
    assert where in _step_downs(stepped.events)[0]["why"] or where == "boundary"
    base, reached = starts.seen[0], _digest(two.model)
    assert len(starts.seen) == 2 and _close(straight.seen[0], base) == 0.0  # both runs began at the base model
    moved = _close(reached, base)
    assert moved > 1e-3, moved  # two steps at lr 1e-2 move the weights: equal to step 2's is not equal to the base
    difference = _close(starts.seen[1], reached)
    assert difference <= 1e-5 * moved, f"the next rung starts {difference:.2e} from step 2's weights ({moved=:.2e})"


def _ends():
    """A callback that keeps the weights of the model after each step (in the order the steps end)."""
    from transformers import TrainerCallback

    class Ends(TrainerCallback):
        seen: list[dict[str, torch.Tensor]] = []

        def on_step_end(self, args, state, control, model=None, **kwargs):
            self.seen.append(_digest(model))

    return Ends()


def test_a_run_that_saves_checkpoints_steps_down_from_the_weights_reached_not_its_newest_checkpoint(
    tiny_model_dir, tmp_path
):
    """Checkpoints every 2 steps, an OOM inside step 4: the next rung starts from the weights step 3 ended with,
    not checkpoint-2's, and the run ends with the checkpoints of its last rung only."""
    ends, starts, out = _ends(), _starts(), tmp_path / "run"
    stepped = train(str(tiny_model_dir), output_dir=out, max_steps=5, preset="full", save_strategy="steps",
                    save_steps=2, callbacks=[_oom_inside(4, "backward"), ends, starts], **FAST)  # fmt: skip
    assert [e["step"] for e in _step_downs(stepped.events)] == [3] and stepped.steps == 5
    checkpoint, reached = ends.seen[1], ends.seen[2]  # the first rung's model after steps 2 and 3
    apart = _close(reached, checkpoint)
    assert apart > 1e-3, apart  # step 3 moved the weights: starting from checkpoint-2's is told from step 3's
    difference = _close(starts.seen[1], reached)
    assert difference <= 1e-5 * apart, f"the next rung starts {difference:.2e} from step 3's weights ({apart=:.2e})"
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2"]  # the last rung's 2 steps


def test_an_out_of_memory_error_after_the_window_is_raised(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(OOM, match="injected in the backward"):
        train(str(tiny_model_dir), output_dir=out, max_steps=4, preset="full", oom_window_steps=2,
              save_strategy="no", callbacks=[_oom_inside(3, "backward")], **FAST)  # fmt: skip
    record = json.loads((out / "run.json").read_text())  # two steps done, then step 3's OOM: 2 >= the window of 2
    assert record["status"] == "failed" and record["plan"]["preset"] == "full"
    assert [e["event"] for e in record["events"]] == ["failed"] and "OutOfMemoryError" in record["events"][0]["error"]
    assert "max_completion_length" in record["events"][0]["advice"]  # what to change
    assert not list(out.glob("stepdown-*"))


@pytest.mark.slow
def test_an_out_of_memory_error_on_one_of_two_ranks_stops_both(tiny_model_dir, tmp_path):
    """Two gloo processes, CUDA's OOM raised on rank 1 only, in step 2: one rank cannot step down while the other
    waits in the step's collectives, so, as docs/troubleshooting.md says, the error is raised: rank 1 ends with it,
    rank 0's collective fails (its peer closed), the launcher ends both, and nothing stepped down. run.json, written by
    rank 0, names rank 1's error as the cause, with what to change; rank 0's own error is kept beside it."""
    out = tmp_path / "run"
    script = os.path.join(os.path.dirname(__file__), "oom_on_one_rank.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", script, "1", "2",
           "train", str(tiny_model_dir), "--num-processes", "2", "--output-dir", str(out), "--dataset", "synthetic",
           "--reward", "length", "--max-steps", "3", "--set", "num_generations=4", "--set",
           "per_device_train_batch_size=2", "--set", "max_completion_length=16", "--set", "save_strategy=no"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    oom = "CUDA out of memory. Tried to allocate 1.90 GiB (injected on rank 1)"
    assert f"torch.OutOfMemoryError: {oom}" in output
    record = json.loads((out / "run.json").read_text())  # written by rank 0, the main process
    assert record["status"] == "failed"
    assert [e["event"] for e in record["events"]] == ["failed"] and record["events"][0]["after_step"] == 1
    failed = record["events"][0]
    assert failed["error"] == f"OutOfMemoryError on rank 1: {oom}"
    assert "OutOfMemoryError" not in failed["rank0_error"]  # rank 0's collective, failed after rank 1 stopped
    assert "num_generations" in failed["advice"] and "max_completion_length" in failed["advice"]
    rank1 = json.loads((out / "ranks" / "rank1.json").read_text())
    assert rank1["error"].startswith("OutOfMemoryError: CUDA out of memory") and rank1["advice"] == failed["advice"]
    assert not list(out.glob("stepdown-*")) and "stepping down" not in output
