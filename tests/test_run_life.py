"""A run survives what schedulers and users do to it: resume of a finished run, SIGTERM, another model, the lock.

| what happens | outcome |
| --- | --- |
| ``--resume`` of a finished run, same or no ``--max-steps`` | exit 0, "finished", nothing written (final/, run.json, checkpoints) |
| ``--resume`` with ``--max-steps`` below the steps done | exit 2, one line naming the steps done; nothing written |
| ``--resume`` of a finished run with more ``--max-steps`` | says so, trains the difference, history holds each step once |
| the same, its learning rates | the longer run's schedule from the step reached (not the old one's 0) |
| ``--resume`` with other rewards, seed or num_generations | one line naming each change; nothing written |
| a checkpoint at the last step, final/ never saved | no step trained: final/ is the checkpoint's weights |
| ``--resume`` on another base of the same shape, or another shape | one line naming the run's model; nothing written |
| ``--resume --preset full`` on a LoRA run | one line: drop --preset or --overwrite; nothing written |
| SIGTERM at a random step (CLI, subprocess) | exit 143, ``interrupted``, lock released; resume == uninterrupted run |
| a second SIGTERM during the save | exit 143, ``aborted``; resume from the last complete checkpoint |
| SIGTERM before training starts (loading) | exit 143, one line; the folder it made and its lock are gone |
| one SIGTERM, Ctrl-C or SIGHUP while the model loads | exit 128+N, one line; ``interrupted`` (not ``aborted``), lock gone |
| a stop asked during the last step | the run is ``finished`` (final/ saved), not interrupted |
| a symlink at ``.grpo-lite.lock`` | refused in one line; its target untouched |
| stopped before the first checkpoint | ``--resume`` names ``--overwrite``, which works as written |
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_faults import CLI_RUN, RUN, _break_save, _in_child, _one_thread  # noqa: F401 - _one_thread: autouse fixture
from tiny_run import signal_during_step

from grpo_lite import ConfigError, OutputDirError, train
from grpo_lite.cli import main


def _files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (the lock excepted) -> its sha256."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".grpo-lite.lock"
    }


def _record(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


def _history_steps(out: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (out / "history.jsonl").read_text().splitlines()]


def _adapter(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


@pytest.fixture(scope="module")
def finished_run(tiny_model_dir, tmp_path_factory) -> Path:
    """A finished 4-step LoRA run, a checkpoint after each step: each test works on its own copy."""
    out = tmp_path_factory.mktemp("finished") / "run"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(str(tiny_model_dir), output_dir=out, **RUN)
    finally:
        torch.set_num_threads(before)
    return out


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


@pytest.mark.parametrize("max_steps", [["--max-steps", "4"], []])
def test_resuming_a_finished_run_changes_nothing(tiny_model_dir, finished_run, tmp_path, capsys, max_steps):
    out = _copy(finished_run, tmp_path / "run")
    before = _files(out)
    argv = [a for a in CLI_RUN if a not in ("--max-steps", "4")] + max_steps
    assert main(["train", str(tiny_model_dir), *argv, "--output-dir", str(out), "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "finished: the run in" in printed and "already trained its 4 steps" in printed, printed
    assert printed.rstrip().endswith("(Python: max_steps=..., resume=True)"), printed  # "nothing changed" is last
    assert "step 5" not in printed and _files(out) == before  # final/, run.json, checkpoints: byte for byte
    assert not (out / ".grpo-lite.lock").exists()


def test_resuming_with_fewer_steps_than_done_is_refused(tiny_model_dir, finished_run, tmp_path, capsys):
    out = _copy(finished_run, tmp_path / "run")
    (out / "final").rename(out / "kept-final")  # not finished: the checkpoint at step 4 is what counts
    before = _files(out)
    argv = [a if a != "4" else "2" for a in CLI_RUN]
    assert main(["train", str(tiny_model_dir), *argv, "--output-dir", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds 4 trained steps (checkpoint-4) and max_steps=2 asks for fewer" in err[0], err
    assert "--max-steps 4 or more" in err[0] and "--overwrite" in err[0]
    assert _files(out) == before


def test_resuming_a_finished_run_with_more_steps_trains_the_difference(tiny_model_dir, finished_run, tmp_path, capsys):
    out = _copy(finished_run, tmp_path / "run")
    result = train(str(tiny_model_dir), output_dir=out, resume=True, **{**RUN, "max_steps": 6, "quiet": False})
    assert "the run finished at step 4: training on to step 6" in capsys.readouterr().out
    assert result.steps == 6 and not result.already_finished
    assert _history_steps(out) == [1, 2, 3, 4, 5, 6] and _record(out)["status"] == "finished"


def _rates_at_step_begin():
    """A callback that keeps the learning rate the optimizer trains each step with."""
    from transformers import TrainerCallback

    class Rates(TrainerCallback):
        rates: list[float] = []

        def on_step_begin(self, args, state, control, optimizer=None, **kwargs):
            self.rates.append(optimizer.param_groups[0]["lr"])

    return Rates()


def test_extending_a_finished_run_keeps_the_learning_rate_schedule(tiny_model_dir, finished_run, tmp_path):
    """The 4-step schedule ends at 0; trained on to 6 steps, steps 5 and 6 train at the 6-step schedule's rates
    (before: step 5 at 0, the rate the optimizer's state was saved with)."""
    out, extended, straight = _copy(finished_run, tmp_path / "run"), _rates_at_step_begin(), _rates_at_step_begin()
    train(str(tiny_model_dir), output_dir=out, resume=True, callbacks=[extended], **{**RUN, "max_steps": 6})
    train(str(tiny_model_dir), output_dir=tmp_path / "straight", callbacks=[straight], **{**RUN, "max_steps": 6})
    assert len(extended.rates) == 2 and extended.rates[0] > 0, extended.rates
    assert extended.rates == pytest.approx(straight.rates[4:], rel=1e-6)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"seed": 3}, "seed 3 instead of the run's 0. Resume with --seed 0 (Python: seed=0)"),
        ({"rewards": ["length", "soft_format"]}, "rewards ['length', 'soft_format'] instead of the run's ['length']"),
        ({"num_generations": 2}, "num_generations 2 instead of the run's 4. Resume with --set num_generations=4"),
    ],
    ids=["seed", "rewards", "num_generations"],
)
def test_resuming_with_other_rewards_seed_or_generations_is_refused(
    tiny_model_dir, finished_run, tmp_path, change, words
):
    out = _copy(finished_run, tmp_path / "run")
    before = _files(out)
    with pytest.raises(ConfigError, match="cannot be resumed with other settings than it trained with") as caught:
        train(str(tiny_model_dir), output_dir=out, resume=True, **{**RUN, "max_steps": 6, **change})
    assert words in str(caught.value) and "--overwrite" in str(caught.value) and "\n" not in str(caught.value)
    assert _files(out) == before and not (out / ".grpo-lite.lock").exists()


def test_resuming_with_another_learning_rate_says_what_a_resume_may_change(tiny_model_dir, finished_run, tmp_path):
    """Issue 44 L6: the checkpoint's optimizer state keeps the run's learning rate, so learning_rate=0.5 on a resume
    never applied, without a word. Refused before anything is written; the run's own value resumes."""
    out = _copy(finished_run, tmp_path / "run")
    before = _files(out)
    with pytest.raises(ConfigError, match=r"cannot be resumed with learning_rate=0\.5 \(the run's: ") as caught:
        train(str(tiny_model_dir), output_dir=out, resume=True, **{**RUN, "max_steps": 5, "learning_rate": 0.5})
    assert "A resume may change the steps (--max-steps), lengths" in str(caught.value)
    assert _files(out) == before and not (out / ".grpo-lite.lock").exists()
    kept = _record(out)["settings"]["learning_rate"]
    result = train(str(tiny_model_dir), output_dir=out, resume=True, **{**RUN, "max_steps": 5, "learning_rate": kept})
    assert result.steps == 5


def test_a_checkpoint_that_holds_every_step_trains_none(tiny_model_dir, finished_run, tmp_path):
    """Killed after the last checkpoint, before final/ was saved: the resume saves final/ from the checkpoint."""
    out = _copy(finished_run, tmp_path / "run")
    shutil.rmtree(out / "final")
    (out / "run.json").write_text(json.dumps({**_record(out), "status": "running"}))
    result = train(str(tiny_model_dir), output_dir=out, resume=True, **RUN)
    assert result.steps == 4 and [r["step"] for r in result.history] == [1, 2, 3, 4]
    assert _history_steps(out) == [1, 2, 3, 4] and not (out / "checkpoint-5").exists()
    saved, checkpoint = _adapter(out / "final"), _adapter(out / "checkpoint-4")
    assert saved.keys() == checkpoint.keys() and saved
    for name in saved:
        torch.testing.assert_close(saved[name], checkpoint[name], atol=0, rtol=0, msg=name)


def test_resuming_on_another_model_is_refused_before_anything_is_written(tiny_model_dir, finished_run, tmp_path):
    from grpo_lite.tiny import build_tiny_model

    out = _copy(finished_run, tmp_path / "run")
    before = _files(out)
    same_shape = build_tiny_model(tmp_path / "other", seed=1)
    assert (same_shape / "config.json").read_bytes() == (tiny_model_dir / "config.json").read_bytes()
    with pytest.raises(
        ConfigError,
        match=rf"was trained from {tiny_model_dir}; {same_shape} is another model \(its "
        rf"weights differ\): pass {tiny_model_dir} to resume the run, or --overwrite",
    ):
        train(str(same_shape), output_dir=out, resume=True, **RUN)
    wider = build_tiny_model(tmp_path / "wider", hidden_size=128)
    with pytest.raises(ConfigError, match=r"is another model \(its config and weights differ\)"):
        train(str(wider), output_dir=out, resume=True, **RUN)
    with pytest.raises(ConfigError, match=r"trained with preset 'lora'; --preset full asks for another: drop --preset"):
        train(str(tiny_model_dir), output_dir=out, resume=True, **{**RUN, "method": None, "preset": "full"})
    with pytest.raises(ConfigError, match=r"trained with method 'lora' .*--method full asks for another"):
        train(str(tiny_model_dir), output_dir=out, resume=True, **{**RUN, "method": "full"})
    assert _files(out) == before
    assert _record(out)["model_fingerprint"].keys() == {"config", "weights"}


@pytest.mark.slow  # two CLI processes (about 55 s on a 2-core machine)
def test_sigterm_stops_at_a_step_boundary_and_the_resume_matches_an_uninterrupted_run(
    tiny_model_dir, finished_run, tmp_path
):
    out = tmp_path / "run"
    stop_after = random.Random().choice([1, 2])  # the signal comes during step stop_after + 1
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    cmd = [sys.executable, "-m", "grpo_lite", "train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / "history.jsonl").is_file() and len((out / "history.jsonl").read_text().splitlines()) >= stop_after:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode == 143, f"SIGTERM after step {stop_after}: {output[-3000:]}"
    assert "SIGTERM: finishing the current step and saving a checkpoint" in output and "Traceback" not in output
    record = _record(out)
    stopped = record["steps"]
    assert record["status"] == "interrupted" and record["events"][-1]["signal"] == "SIGTERM", record["events"]
    assert stop_after <= stopped < 4 and (out / f"checkpoint-{stopped}").is_dir()
    assert not (out / ".grpo-lite.lock").exists() and not (out / "final").exists()

    resumed = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, env=env, timeout=180)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert _history_steps(out) == [1, 2, 3, 4] and _record(out)["status"] == "finished"
    ours, straight = _adapter(out / "final"), _adapter(finished_run / "final")
    assert ours.keys() == straight.keys() and ours
    for name in ours:
        torch.testing.assert_close(ours[name], straight[name], atol=1e-4, rtol=1e-3, msg=name)


def test_a_second_sigterm_during_the_save_aborts_and_the_run_resumes(tiny_model_dir, tmp_path):
    out = tmp_path / "run"

    def body():
        _break_save(3, "optimizer", "sigterm")
        from grpo_lite.training import pipeline

        original = pipeline.train  # the CLI calls train(); the first SIGTERM comes during step 3
        pipeline.train = lambda *a, **k: original(*a, **k, callbacks=[signal_during_step(3, signal.SIGTERM)])
        return main(["train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(out)])

    code, output = _in_child(body)
    assert code == 143, output[-2000:]
    assert "Traceback" not in output and output.strip().splitlines()[-1] == (
        f"interrupted: stopped without saving; the run in {out} continues from its last complete checkpoint "
        "(checkpoint-2) with the same command plus --resume"
    )
    assert _record(out)["status"] == "aborted" and not (out / ".grpo-lite.lock").exists()
    result = train(str(tiny_model_dir), output_dir=out, resume=True, **RUN)
    assert result.steps == 4 and _history_steps(out) == [1, 2, 3, 4]
    assert [e for e in result.events if e["event"] == "resume"][-1]["checkpoint"].endswith("checkpoint-2")


def test_a_symlink_at_the_lock_path_is_refused_and_its_target_kept(tiny_model_dir, tmp_path):
    out, target = tmp_path / "run", tmp_path / "precious.txt"
    out.mkdir()
    target.write_text("not a lock")
    (out / ".grpo-lite.lock").symlink_to(target)
    with pytest.raises(OutputDirError, match=r"\.grpo-lite\.lock is a symbolic link.*remove the link"):
        train(str(tiny_model_dir), output_dir=out, **RUN)
    assert target.read_text() == "not a lock" and (out / ".grpo-lite.lock").is_symlink()


def test_a_run_stopped_before_its_first_checkpoint_says_overwrite_which_works(tiny_model_dir, tmp_path, capsys):
    from transformers import TrainerCallback

    class CtrlCFirst(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            raise KeyboardInterrupt

    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(str(tiny_model_dir), output_dir=out, callbacks=[CtrlCFirst()], **{**RUN, "max_steps": 1})
    assert _record(out)["status"] == "interrupted" and not list(out.glob("checkpoint-*"))  # one Ctrl-C
    argv = ["train", str(tiny_model_dir), *[a if a != "4" else "1" for a in CLI_RUN], "--output-dir", str(out)]
    capsys.readouterr()
    for flags in (["--resume"], []):  # neither points back at the other
        assert main([*argv, *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--overwrite" in err[0] and "pass resume=True" not in err[0], err
        assert "drop resume" not in err[0], err
    assert main([*argv, "--overwrite"]) == 0
    assert _record(out)["status"] == "finished" and _history_steps(out) == [1]


def test_a_stop_asked_during_the_last_step_leaves_a_finished_run(tiny_model_dir, tmp_path):
    out, before = tmp_path / "run", signal.getsignal(signal.SIGTERM)
    result = train(
        str(tiny_model_dir),
        output_dir=out,
        callbacks=[signal_during_step(2, signal.SIGTERM)],
        **{**RUN, "max_steps": 2},
    )
    assert signal.getsignal(signal.SIGTERM) is before  # train() puts back the handler it found
    assert not result.interrupted and result.stop_signal is None and result.steps == 2
    assert _record(out)["status"] == "finished" and (out / "final" / "adapter_model.safetensors").is_file()


@pytest.mark.parametrize(
    "step_down",
    [
        {"event": "replanned", "cause": "out_of_memory", "from": {"preset": "full"}, "to": {"preset": "lora"}},
        {"event": "out_of_memory", "from_preset": "full", "to_preset": "lora"},  # a 0.4 record
    ],
    ids=["replanned", "0.4-record"],
)
def test_the_checks_accept_the_command_that_started_the_run(tmp_path, step_down):
    """Without fingerprints (a record older than them, a hub model not downloaded) the name decides; a run that
    stepped down accepts the preset and method it started with (the resume goes on with the lower rung)."""
    from grpo_lite.training.run.resume import EarlierRun, check_same_run

    earlier = EarlierRun(
        preset="lora", source=None, done=2, checkpoint_step=1, max_steps=4, model="org/base-a", events=[step_down]
    )
    for preset, method in [("full", None), ("lora", None), (None, "full"), (None, "lora")]:
        check_same_run(tmp_path, earlier, model_id="org/base-a", preset=preset, method=method)
    with pytest.raises(ConfigError, match=r"trained from org/base-a; org/base-b is another model \(another name\)"):
        check_same_run(tmp_path, earlier, model_id="org/base-b", preset=None, method=None)
    with pytest.raises(ConfigError, match=r"trained with preset 'lora'; --preset qlora asks for another"):
        check_same_run(tmp_path, earlier, model_id="org/base-a", preset="qlora", method=None)


def test_sigterm_before_training_starts_stops_the_run_and_gives_the_folder_back(tiny_model_dir, tmp_path):
    out = tmp_path / "run"

    def body():
        from grpo_lite.training import prepare

        original = prepare.load_inputs  # the signal comes while the dataset and tokenizer load

        def load_inputs(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGTERM)
            return original(*args, **kwargs)

        prepare.load_inputs = load_inputs
        return main(["train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(out)])

    code, output = _in_child(body)
    assert code == 143, output[-2000:]
    assert "Traceback" not in output and output.strip().splitlines()[-1] == (
        f"interrupted before the run wrote anything: nothing was kept ({out} is removed); run the same command again"
    )  # no --resume on a folder that is gone
    assert not out.exists()  # the run made the folder and wrote nothing in it: gone with its lock
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # this process's handler is untouched


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_one_signal_before_the_first_step_records_interrupted_not_aborted(tiny_model_dir, tmp_path, signum):
    """One stop signal while the model loads, run.json already written: ``interrupted`` (the docs keep ``aborted``
    for a second signal; it said ``aborted``), an event naming the signal, the lock released, one line."""
    out = tmp_path / "run"

    def body():
        from grpo_lite.training.attempts import Attempts

        # Ctrl-C as a terminal delivers it: a shell starts a background job with SIGINT ignored, and Python then
        # installs no KeyboardInterrupt handler (the run would go on, as any program started that way does)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        original = Attempts.build  # the signal comes while the trainer and its model are built

        def build(self, *args, **kwargs):
            os.kill(os.getpid(), signum)
            return original(self, *args, **kwargs)

        Attempts.build = build
        return main(["train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(out)])

    code, output = _in_child(body)
    assert code == 128 + signum, output[-2000:]
    assert "Traceback" not in output and output.strip().splitlines()[-1].startswith(
        f"interrupted: stopped without saving, before the first complete checkpoint in {out}: nothing to resume"
    )
    record = _record(out)
    assert record["status"] == "interrupted", record
    assert record["events"][-1] == {"event": "interrupted", "after_step": 0, "signal": signum.name}
    assert not (out / ".grpo-lite.lock").exists()


def test_sighup_from_a_closed_terminal_ends_like_sigterm(tiny_model_dir, tmp_path):
    """SIGHUP during step 2: the step finishes, a checkpoint is saved, ``interrupted``, the lock released, exit 129."""
    out = tmp_path / "run"

    def body():
        from grpo_lite.training import pipeline

        original = pipeline.train
        pipeline.train = lambda *a, **k: original(*a, **k, callbacks=[signal_during_step(2, signal.SIGHUP)])
        return main(["train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(out)])

    code, output = _in_child(body)
    assert code == 128 + signal.SIGHUP, output[-2000:]
    assert "SIGHUP (the terminal closed): finishing the current step and saving a checkpoint" in output
    assert "Traceback" not in output
    record = _record(out)
    assert record["status"] == "interrupted" and record["events"][-1]["signal"] == "SIGHUP", record["events"]
    assert record["steps"] == 2 and (out / "checkpoint-2").is_dir() and not (out / ".grpo-lite.lock").exists()


def test_a_stop_before_the_first_checkpoint_names_overwrite_not_resume(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from grpo_lite.training import pipeline

    out = tmp_path / "run"

    def stopped(*args, **kwargs):  # Ctrl-C during step 1: run.json written, no checkpoint yet
        out.mkdir()
        (out / "run.json").write_text('{"status": "aborted"}')
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "train", stopped)
    capsys.readouterr()
    assert main(["train", str(tiny_model_dir), *CLI_RUN, "--output-dir", str(out)]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"interrupted: stopped without saving, before the first complete checkpoint in {out}: nothing to resume; "
        "start again with the same command plus --overwrite"
    )


def test_one_sigterm_during_the_final_save_finishes_the_run(tiny_model_dir, tmp_path):
    """Every step is trained when the final save starts: one SIGTERM there lets it finish; the run is finished."""
    out = tmp_path / "run"

    def body():
        from transformers import Trainer

        original = Trainer.save_model

        def save_model(self, output_dir=None, *args, **kwargs):
            if str(output_dir).endswith(".final.tmp"):
                os.kill(os.getpid(), signal.SIGTERM)
            return original(self, output_dir, *args, **kwargs)

        Trainer.save_model = save_model
        return main(["train", str(tiny_model_dir), *CLI_RUN[:-2], "--max-steps", "2", "--output-dir", str(out)])

    code, output = _in_child(body)
    assert code == 0, output[-2000:]
    assert "SIGTERM: every step is trained; finishing the final save first, then the run ends" in output
    assert _record(out)["status"] == "finished" and (out / "final" / "adapter_model.safetensors").is_file()
    assert not (out / ".grpo-lite.lock").exists() and not (out / ".final.tmp").exists()


def test_the_lock_is_held_until_the_final_model_and_run_json_are_written(tiny_model_dir, tmp_path, monkeypatch):
    """Another run cannot take the folder while the final save runs, and the lock is given back only once final/
    and a finished run.json are on disk (a run that took it in between would write into a run still finishing)."""
    from transformers import Trainer

    from grpo_lite.training.run.lock import RunHeld, RunLock

    out, seen = tmp_path / "run", []
    save_model, release = Trainer.save_model, RunLock.release

    def saving(self, output_dir=None, *args, **kwargs):  # noqa: ANN001, ANN202
        if str(output_dir).endswith(".final.tmp"):
            with pytest.raises(RunHeld):
                RunLock.check(out)
            seen.append("final/ saved under the lock")
        return save_model(self, output_dir, *args, **kwargs)

    def releasing(self):  # noqa: ANN001, ANN202
        if self.lock is not None:
            with pytest.raises(RunHeld):
                RunLock.check(out)
            seen.append((_record(out)["status"], (out / "final" / "adapter_model.safetensors").is_file()))
        release(self)

    monkeypatch.setattr(Trainer, "save_model", saving)
    monkeypatch.setattr(RunLock, "release", releasing)
    train(str(tiny_model_dir), output_dir=out, **{**RUN, "max_steps": 1, "save_strategy": "no"})
    assert seen == ["final/ saved under the lock", ("finished", True)]
    RunLock.check(out)  # given back at the end
