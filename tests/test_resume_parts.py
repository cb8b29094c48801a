"""The parts of a resume that decide what survives a crash, on folders built by hand (milliseconds a test): which
checkpoint counts, what is set aside, which steps are kept, when a run is finished. The runs themselves (kill,
full disk, step down, then resume) are tests/test_faults.py's and tests/test_resilience.py's."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo_lite.errors import ConfigError, OutputDirError
from grpo_lite.training.run import checkpoints, resume
from grpo_lite.training.run.checkpoints import MARKER, mark_complete, scan, set_aside, why_incomplete
from grpo_lite.training.run.resume import EarlierRun, check_steps, read_history, resume_point


def _checkpoint(run: Path, step: int, *, marked: bool = True, state: str | None = '{"global_step": 1}') -> Path:
    """``run/checkpoint-<step>`` with a 5-byte weights file and a trainer state; marked complete when ``marked``."""
    folder = run / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "adapter_model.safetensors").write_bytes(b"12345")
    if state is not None:
        (folder / "trainer_state.json").write_text(state)
    if marked:
        mark_complete(folder, {"preset": "lora"})
    return folder


def _earlier(reached: int, *, done: int = 0, status: str | None = "running", max_steps: int | None = 10) -> EarlierRun:
    return EarlierRun("lora", None, done, reached - done, max_steps, status=status)


def test_a_marked_checkpoint_is_complete_until_a_file_changes(tmp_path):
    folder = _checkpoint(tmp_path, 2, marked=False)
    (folder / "rng").mkdir()
    (folder / "rng" / "rank0.pth").write_bytes(b"123")
    mark_complete(folder, {"preset": "lora"})
    assert why_incomplete(folder) is None
    assert json.loads((folder / MARKER).read_text())["files"] == {
        "adapter_model.safetensors": 5,
        "rng/rank0.pth": 3,
        "trainer_state.json": 18,
    }  # files only, in subfolders too
    (folder / "adapter_model.safetensors").write_bytes(b"123")
    assert why_incomplete(folder) == "adapter_model.safetensors has 3 bytes, 5 when it was saved"
    (folder / "adapter_model.safetensors").unlink()
    assert why_incomplete(folder) == "adapter_model.safetensors is missing"
    (folder / MARKER).write_text("{")
    assert why_incomplete(folder) == f"its completion marker {MARKER} cannot be read"
    (folder / MARKER).write_text('{"files": []}')  # the wrong shape reads as no marker at all
    assert why_incomplete(folder) == f"its completion marker {MARKER} cannot be read"


def test_an_unmarked_checkpoint_counts_only_with_a_whole_trainer_state(tmp_path):
    assert why_incomplete(_checkpoint(tmp_path, 1, marked=False)) is None  # a checkpoint of 0.3 or older
    assert why_incomplete(_checkpoint(tmp_path, 2, marked=False, state=None)) == (
        "trainer_state.json is missing: the save was cut off"
    )
    assert (
        why_incomplete(_checkpoint(tmp_path, 3, marked=False, state='{"global_st')) == "trainer_state.json is cut off"
    )


def test_the_scan_takes_the_newest_complete_checkpoint_by_step_not_by_name(tmp_path):
    for step in (2, 10, 9):
        _checkpoint(tmp_path, step)
    _checkpoint(tmp_path, 12, marked=False, state=None)
    _checkpoint(tmp_path, 11, marked=False, state="{")
    (tmp_path / "checkpoint-13").write_text("a file, not a folder")
    (tmp_path / "checkpoint-latest").mkdir()
    found = scan(tmp_path)
    assert found.newest == tmp_path / "checkpoint-10"  # "checkpoint-9" sorts after it as text
    assert [(p.name, why[:19]) for p, why in found.incomplete] == [
        ("checkpoint-12", "trainer_state.json "),
        ("checkpoint-11", "trainer_state.json "),
    ]
    assert checkpoints.checkpoint_step(Path("checkpoint-007")) == 7
    assert checkpoints.checkpoint_step(Path("checkpoint-7b")) is None
    assert checkpoints.checkpoint_step(Path("my-checkpoint-7")) is None


def test_setting_aside_moves_and_replaces_an_older_copy(tmp_path):
    old = tmp_path / "incomplete" / "checkpoint-3"
    old.mkdir(parents=True)
    (old / "stale").write_text("from an earlier resume")
    cut = _checkpoint(tmp_path, 3, marked=False, state=None)
    moved = set_aside(tmp_path, [(cut, "cut off")])
    assert moved == [old] and not cut.exists()
    assert sorted(p.name for p in old.iterdir()) == ["adapter_model.safetensors"]


def test_setting_aside_refuses_a_link_and_moves_nothing(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    cut = _checkpoint(run, 3, marked=False, state=None)
    (run / "incomplete").symlink_to(elsewhere)
    with pytest.raises(OutputDirError):
        set_aside(run, [(cut, "cut off")])
    assert cut.is_dir() and not any(elsewhere.iterdir())


def test_the_resume_point_says_what_it_skipped(tmp_path):
    _checkpoint(tmp_path, 2)
    _checkpoint(tmp_path, 4, marked=False, state=None)
    newest, notes = resume_point(tmp_path, move=True)
    assert newest == tmp_path / "checkpoint-2"
    assert notes == [
        f"checkpoint-4 is incomplete (trainer_state.json is missing: the save was cut off): skipped, moved to "
        f"{tmp_path / 'incomplete' / 'checkpoint-4'}",
        "resuming from checkpoint-2, the newest complete checkpoint",
    ]
    assert (tmp_path / "incomplete" / "checkpoint-4").is_dir()


def test_an_older_incomplete_checkpoint_is_left_in_place_without_move(tmp_path):
    _checkpoint(tmp_path, 4)
    _checkpoint(tmp_path, 2, marked=False, state=None)
    newest, notes = resume_point(tmp_path, move=False)
    assert newest.name == "checkpoint-4" and len(notes) == 1 and (tmp_path / "checkpoint-2").is_dir()


@pytest.mark.parametrize(
    ("made", "says"),
    [
        ("nothing", "holds no checkpoint-N folder; drop resume to start a new run, or point output_dir at the run to "
         "continue"),
        ("run.json", "stopped before its first checkpoint: nothing to resume; start it again with --overwrite (Python: "
         "overwrite=True) instead of --resume"),
        ("history.jsonl", "stopped before its first checkpoint"),
        ("two cut checkpoints", "holds no complete checkpoint (checkpoint-2: trainer_state.json is missing: the save "
         "was cut off; checkpoint-1: trainer_state.json is missing: the save was cut off); start the run again with "
         "overwrite=True (--overwrite), or restore the missing files"),
    ],
)  # fmt: skip
def test_nothing_to_resume_says_what_to_do(tmp_path, made, says):
    if made == "two cut checkpoints":
        _checkpoint(tmp_path, 1, marked=False, state=None)
        _checkpoint(tmp_path, 2, marked=False, state=None)
    elif made != "nothing":
        (tmp_path / made).write_text("{}")
    with pytest.raises(ConfigError, match=re.escape(says)):
        resume_point(tmp_path, move=True)
    assert made != "two cut checkpoints" or (tmp_path / "checkpoint-1").is_dir()  # an error moves nothing


def test_a_record_without_history_or_plan_still_resumes(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"status": "running", "model": "org/m"}))
    earlier = resume.earlier_run(tmp_path, _checkpoint(tmp_path, 1), main=True)
    assert earlier.preset == "lora" and earlier.events == [{"event": "crashed", "after_step": None}]  # the marker's
    assert resume._from_record({"status": "running"})["preset"] is None


def test_the_history_keeps_whole_rows_with_a_step(tmp_path):
    (tmp_path / resume.HISTORY_FILE).write_text(
        '{"step": 1, "reward": 0.5}\n{"step": 2, "re\n{"reward": 0.7}\n{"step": "2"}\n[1, 2]\n{"step": 2, "reward": 0.6}\n'
        '{"step": 3, "re'
    )  # a line cut by a crash, then whole ones: a crash that a resume continued
    assert read_history(tmp_path) == [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.6}]
    assert read_history(tmp_path / "nowhere") == []


def test_merged_history_takes_each_step_from_the_first_source_and_stops_at_the_checkpoint():
    on_disk = [{"step": 1, "from": "disk"}, {"step": 3, "from": "disk"}]
    recorded = [{"step": 1, "from": "record"}, {"step": 2, "from": "record"}, {"step": 4, "from": "record"}]
    merged = resume._merge(on_disk, recorded, last=3)
    assert [(r["step"], r["from"]) for r in merged] == [(1, "disk"), (2, "record"), (3, "disk")]


def test_the_checkpoints_log_goes_on_from_the_steps_done_before_its_attempt(tmp_path):
    folder = _checkpoint(
        tmp_path,
        2,
        state=json.dumps(
            {
                "log_history": [
                    {"step": 1, "loss": 0.1},
                    {"step": 1, "train_runtime": 9},
                    {"loss": 0.3},
                    {"step": 2, "loss": 0.2},
                ]
            }
        ),
    )  # the end-of-train summary and a row without a step are not steps
    assert resume._log_history(folder, 5) == [{"loss": 0.1, "step": 6}, {"loss": 0.2, "step": 7}]
    assert resume._log_history(tmp_path, 5) == []  # no trainer_state.json


def test_a_step_down_in_the_record_gives_the_rung_the_weights_and_the_steps_done():
    record = {
        "plan": {"preset": "full"},
        "max_steps": 9,
        "recipe": {"rewards": ["correctness"], "seed": 3, "trl": {"num_generations": 4}},
        "events": [
            {"event": "replanned", "cause": "out_of_memory", "step": 2, "weights": "out/stepdown-1",
             "from": {"preset": "full"}, "to": {"preset": "full-8bit"}},
            {"event": "replanned", "cause": "stall", "step": 3},
            {"event": "replanned", "cause": "out_of_memory", "step": 5, "weights": "out/stepdown-2",
             "from": {"preset": "full-8bit"}, "to": {"preset": "lora"}},
            {"event": "out_of_memory", "step": 6, "weights": "out/stepdown-3",  # a 0.4 record's shape
             "from_preset": "lora", "to_preset": "qlora"},
        ],
        "model_fingerprint": {"config": "c", "weights": "w"},
    }  # fmt: skip
    taken = resume._from_record(record)
    assert (taken["source"], taken["done"], taken["max_steps"]) == ("out/stepdown-3", 6, 9)
    assert (taken["rewards"], taken["seed"], taken["num_generations"]) == (["correctness"], 3, 4)
    assert (taken["preset"], taken["fingerprint"]) == ("full", {"config": "c", "weights": "w"})  # the first plan's
    earlier = EarlierRun("qlora", taken["source"], 6, 2, 9, events=record["events"])
    assert earlier.reached == 8 and earlier.presets() == ["full", "full-8bit", "lora", "qlora"]
    assert EarlierRun("lora", None, 0, 2, 9).presets() == ["lora"]


def test_fewer_steps_than_the_checkpoint_holds_are_refused_with_the_count(tmp_path):
    with pytest.raises(ConfigError, match=r"holds 7 trained steps \(checkpoint-2\) and max_steps=6 asks for fewer: "):
        check_steps(tmp_path, _earlier(7, done=5), 6)
    assert check_steps(tmp_path, _earlier(7, done=5), 7) == (False, None)  # running: it goes on
    with pytest.raises(ConfigError, match="max_steps=6 asks for fewer"):  # the record's own max_steps counts
        check_steps(tmp_path, _earlier(7, done=5, max_steps=6), None)


def test_a_finished_run_trains_only_when_asked_for_more(tmp_path):
    (tmp_path / "final").mkdir()
    finished = _earlier(4, status="finished", max_steps=4)
    done, line = check_steps(tmp_path, finished, None)
    assert done and line == (
        f"finished: the run in {tmp_path} already trained its 4 steps (model in {tmp_path / 'final'}); nothing "
        "changed. To train on, pass --max-steps above 4 with --resume (Python: max_steps=..., resume=True)"
    )
    assert check_steps(tmp_path, finished, 4)[0]
    more, line = check_steps(tmp_path, finished, 6)
    assert not more and line == "the run finished at step 4: training on to step 6; final/ is replaced at the end"
    (tmp_path / "final").rmdir()  # finished in run.json, but the model folder is gone: train again to write it
    assert check_steps(tmp_path, finished, None) == (False, None)


def _record(run: Path, **fields: object) -> None:
    record = {"status": "running", "plan": {"preset": "lora"}, "max_steps": 5, "model": "org/m", "history": []}
    (run / "run.json").write_text(json.dumps({**record, **fields}))


def test_a_run_that_stopped_without_a_word_is_recorded_as_crashed_with_its_steps(tmp_path):
    checkpoint = _checkpoint(tmp_path, 2, state=json.dumps({"log_history": [{"step": 1, "from": "log"}]}))
    stall = {"event": "health", "finding": "stall", "step": 1}
    _record(tmp_path, events=[stall], history=[{"step": 2, "from": "record"}, {"step": 5, "from": "record"}])
    (tmp_path / resume.HISTORY_FILE).write_text('{"step": 1, "from": "disk"}\n{"step": 4, "from": "disk"}\n')
    earlier = resume.earlier_run(tmp_path, checkpoint, main=True)
    assert (earlier.preset, earlier.model, earlier.max_steps, earlier.reached) == ("lora", "org/m", 5, 2)
    assert earlier.status == "running"
    assert [(r["step"], r["from"]) for r in earlier.history] == [(1, "disk"), (2, "record")]  # up to the checkpoint
    assert earlier.events == [stall, {"event": "crashed", "after_step": 5}]  # the last step any record holds
    assert earlier.notes == [
        "the earlier run stopped without a word after step 5 (killed, or the machine went down): recorded as crashed"
    ]


def test_a_run_that_crashed_before_logging_a_step_says_so_without_a_step(tmp_path):
    _record(tmp_path)
    earlier = resume.earlier_run(tmp_path, _checkpoint(tmp_path, 1), main=False)
    assert earlier.events == [{"event": "crashed", "after_step": None}]
    assert earlier.notes == [
        "the earlier run stopped without a word (killed, or the machine went down): recorded as crashed"
    ]


def test_without_run_json_the_checkpoint_and_its_log_tell_the_run(tmp_path):
    step_down = {"event": "replanned", "cause": "out_of_memory", "from": {"preset": "lora"}, "to": {"preset": "qlora"}}
    folder = tmp_path / "checkpoint-2"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.5}]}))
    mark_complete(folder, {"preset": "qlora", "events": [step_down]})
    earlier = resume.earlier_run(tmp_path, folder, main=True)
    assert (earlier.preset, earlier.done, earlier.reached, earlier.status) == ("qlora", 0, 2, None)
    assert earlier.events == [step_down] and earlier.notes == []
    assert earlier.history == [{"loss": 0.5, "step": 1}]
    assert resume.read_record(tmp_path, move=True) == (None, None)


def test_the_checkpoints_own_record_wins_and_an_unreadable_run_json_is_kept_aside(tmp_path):
    checkpoint = _checkpoint(tmp_path, 3)  # its marker's record: preset "lora"
    _record(tmp_path, status="finished", plan={"preset": "full"})
    assert resume.earlier_run(tmp_path, checkpoint, main=False).preset == "lora"
    (tmp_path / "run.json").write_text('{"status": "runn')
    earlier = resume.earlier_run(tmp_path, checkpoint, main=True)
    assert earlier.status is None and earlier.events == [] and (tmp_path / "run.json.corrupt").is_file()
    assert earlier.notes[0].startswith("run.json could not be read (") and earlier.notes[0].endswith(
        "): kept as run.json.corrupt; the run's record is rebuilt from the checkpoint and history.jsonl"
    )


def _model(folder: Path, weights: bytes, config: str = '{"hidden_size": 8}') -> str:
    folder.mkdir()
    (folder / "config.json").write_text(config)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "notes.txt").write_text("not a weights file")
    return str(folder)


def test_a_models_fingerprint_tells_its_config_from_its_weights(tmp_path):
    a = resume.model_fingerprint(_model(tmp_path / "a", b"\x00" * 10000))
    b = resume.model_fingerprint(_model(tmp_path / "b", b"\x00" * 9999 + b"\x01"))  # one byte, in the last sample
    c = resume.model_fingerprint(_model(tmp_path / "c", b"\x00" * 10000, config='{"hidden_size": 9}'))
    assert a["config"] == b["config"] != c["config"] and a["weights"] == c["weights"] != b["weights"]
    (tmp_path / "m.gguf").write_bytes(b"GGUF" + b"\x00" * 100)
    gguf = resume.model_fingerprint(str(tmp_path / "m.gguf"))
    assert gguf["config"] == gguf["weights"] and len(gguf["weights"]) == 16
    # run.json keeps these: a change in how they are computed refuses every earlier run's resume
    assert (a["config"], a["weights"]) == ("5ab0624c89985494", "96a1bcd2744a717b")


def test_a_hub_id_is_fingerprinted_from_its_snapshot_in_the_local_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    snapshot = tmp_path / "hub" / "models--org--tiny" / "snapshots" / "abc123"
    snapshot.parent.mkdir(parents=True)
    _model(snapshot, b"\x00" * 10000)
    (tmp_path / "hub" / "models--org--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--tiny" / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    by_id = resume.model_fingerprint("org/tiny")
    assert by_id == resume.model_fingerprint(str(snapshot)) and set(by_id) == {"config", "weights"}
    assert by_id["config"] != by_id["weights"]
    assert resume.model_fingerprint("org/not-cached") is None  # a hub id not in the local cache


@pytest.mark.parametrize(
    ("model", "preset", "method", "says"),
    [
        (
            "b",
            None,
            None,
            "was trained from {a}; {b} is another model (its weights differ): pass {a} to resume the "
            "run, or --overwrite to start a new run in {run} (Python: overwrite=True)",
        ),
        ("d", None, None, "is another model (its config and weights differ)"),
        ("c", None, None, "is another model (its config differs)"),
        ("a", "qlora", None, "was trained with preset 'lora'; --preset qlora asks for another: drop --preset"),
        ("a", None, "galore", "was trained with method 'lora' (preset 'lora'); --method galore asks for"),
        ("a", "lora", "lora", None),  # the rung it stepped down to, and its method: the same run
        ("a", "full-8bit", "full", None),  # ... or a rung it trained on before, and that one's method
    ],
)
def test_a_resume_of_another_model_preset_or_method_is_refused(tmp_path, model, preset, method, says):
    paths = {
        "a": _model(tmp_path / "a", b"\x00" * 10000),
        "b": _model(tmp_path / "b", b"\x01" * 10000),
        "c": _model(tmp_path / "c", b"\x00" * 10000, config="{}"),
        "d": _model(tmp_path / "d", b"\x01" * 10000, config="{}"),
    }
    step_down = {
        "event": "replanned",
        "cause": "out_of_memory",
        "from": {"preset": "full"},
        "to": {"preset": "full-8bit"},
    }
    step_down2 = {**step_down, "from": {"preset": "full-8bit"}, "to": {"preset": "lora"}}
    earlier = EarlierRun("lora", None, 0, 2, 9, events=[step_down, step_down2], model=paths["a"])
    earlier.fingerprint = resume.model_fingerprint(paths["a"])
    if says is None:
        resume.check_same_run(tmp_path, earlier, model_id=paths[model], preset=preset, method=method)
        return
    with pytest.raises(ConfigError, match=re.escape(says.format(**paths, run=tmp_path))):
        resume.check_same_run(tmp_path, earlier, model_id=paths[model], preset=preset, method=method)


def test_without_fingerprints_a_model_is_the_same_by_name_or_path(tmp_path, monkeypatch):
    earlier = EarlierRun("lora", None, 0, 2, 9, model="org/not-downloaded")
    resume.check_same_run(tmp_path, earlier, model_id="org/not-downloaded", preset=None, method=None)
    with pytest.raises(ConfigError, match="is another model \\(another name\\)"):
        resume.check_same_run(tmp_path, earlier, model_id="org/another", preset=None, method=None)
    # a run recorded before fingerprints (0.4): its folder, named another way, is the same model; another is not
    folder = _model(tmp_path / "a", b"\x00" * 100)
    older = EarlierRun("lora", None, 0, 2, 9, model=folder)
    monkeypatch.chdir(tmp_path)
    resume.check_same_run(tmp_path, older, model_id="./a", preset=None, method=None)
    with pytest.raises(ConfigError, match="another name"):
        resume.check_same_run(tmp_path, older, model_id=_model(tmp_path / "b", b"\x00" * 100), preset=None, method=None)


def _recipe(dataset: str = "gsm8k", rewards: tuple[str, ...] = ("correctness",), seed: int = 2) -> SimpleNamespace:
    written = {"rewards": list(rewards), "dataset": dataset}
    return SimpleNamespace(to_dict=lambda: written, seed=seed, trl={"num_generations": 8})


def test_a_resume_that_changes_what_the_run_optimized_is_refused_with_the_flags_to_pass(tmp_path):
    recipe = _recipe()
    earlier = EarlierRun("lora", None, 0, 2, 9, rewards=["correctness", "format"], seed=1, num_generations=4)
    with pytest.raises(ConfigError) as caught:
        resume.check_same_training(tmp_path, earlier, recipe, None)
    assert str(caught.value) == (
        f"{tmp_path} cannot be resumed with other settings than it trained with: rewards ['correctness'] instead of "
        "the run's ['correctness', 'format']; seed 2 instead of the run's 1; num_generations 8 instead of the run's 4. "
        "Resume with --reward correctness --reward format (Python: rewards=['correctness', 'format']), --seed 1 "
        "(Python: seed=1), --set num_generations=4 (Python: num_generations=4), or pass --overwrite to start a new "
        f"run in {tmp_path} (Python: overwrite=True)"
    )
    older = EarlierRun("lora", None, 0, 2, 9)  # a record from before these were kept: nothing to compare
    resume.check_same_training(tmp_path, older, recipe, None)


def test_a_resume_on_another_dataset_is_refused_and_the_same_file_by_another_path_is_not(tmp_path, monkeypatch):
    def earlier(dataset: str) -> EarlierRun:
        return EarlierRun("lora", None, 0, 2, 9, rewards=["correctness"], seed=2, num_generations=8, dataset=dataset)

    with pytest.raises(ConfigError) as caught:  # no --dataset on the resume of a synthetic run: gsm8k
        resume.check_same_training(tmp_path, earlier("synthetic"), _recipe("gsm8k"), None)
    assert str(caught.value) == (
        f"{tmp_path} cannot be resumed with other settings than it trained with: dataset 'gsm8k' instead of the "
        "run's 'synthetic'. Resume with --dataset synthetic (Python: dataset='synthetic'), or pass --overwrite to "
        f"start a new run in {tmp_path} (Python: overwrite=True)"
    )
    (tmp_path / "data.jsonl").write_text("{}")
    (tmp_path / "other.jsonl").write_text("{}")
    monkeypatch.chdir(tmp_path)
    resume.check_same_training(tmp_path, earlier("data.jsonl"), _recipe(str(tmp_path / "data.jsonl")), None)
    with pytest.raises(ConfigError, match=re.escape("Resume with --dataset data.jsonl (Python: dataset='data.jsonl')")):
        resume.check_same_training(tmp_path, earlier("data.jsonl"), _recipe("other.jsonl"), None)
    with pytest.raises(ConfigError, match=re.escape("Resume with the run's own dataset (Dataset: 20 rows; Python: ")):
        resume.check_same_training(tmp_path, earlier("<Dataset: 20 rows>"), _recipe("<Dataset: 30 rows>"), None)


KEPT = {  # every key a resume keeps: the run's value, and another one
    "rewards": (["correctness"], ["format"]),
    "seed": (2, 3),
    "num_generations": (8, 4),
    "dataset": ("data.jsonl", "other.jsonl"),
    "answer_kind": ("number", "text"),
    "data_fingerprint": ("the run's files", "edited files"),
}
SAID = {
    "rewards": "--reward correctness (Python: rewards=['correctness'])",
    "seed": "--seed 2 (Python: seed=2)",
    "num_generations": "--set num_generations=8 (Python: num_generations=8)",
    "dataset": "--dataset data.jsonl (Python: dataset='data.jsonl')",
    "answer_kind": "--answer-kind number (Python: answer_kind='number')",
    "data_fingerprint": "the dataset as the run trained on it (its files restored)",
}


@pytest.mark.parametrize("key", list(KEPT))
def test_each_key_a_resume_keeps_changed_alone_is_refused(tmp_path, monkeypatch, key):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.jsonl").write_text("{}")
    (tmp_path / "other.jsonl").write_text("{}")
    assert set(KEPT) == set(resume.trained_with(_recipe(), None))  # the test covers every key a resume keeps
    runs = {k: run for k, (run, _) in KEPT.items()}

    def asked(**changed):
        values = {**runs, **changed}
        monkeypatch.setattr(resume, "data_fingerprint", lambda spec: values["data_fingerprint"])
        recipe = SimpleNamespace(to_dict=lambda: {"rewards": values["rewards"], "dataset": values["dataset"]},
                                 seed=values["seed"], trl={"num_generations": values["num_generations"]})  # fmt: skip
        return recipe, values["answer_kind"]

    earlier = EarlierRun("lora", None, 0, 2, 9, **runs)
    resume.check_same_training(tmp_path, earlier, *asked())  # nothing changed: it goes on
    with pytest.raises(ConfigError) as caught:
        resume.check_same_training(tmp_path, earlier, *asked(**{key: KEPT[key][1]}))
    message = str(caught.value)
    assert message.count(" instead of the run's ") + message.count("changed since") == 1, message  # that key alone
    assert f"Resume with {SAID[key]}, or pass --overwrite to start a new run in {tmp_path}" in message


def test_a_data_file_edited_in_place_changes_its_fingerprint_and_the_same_file_keeps_it(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "q", "answer": "1"}\n')
    first = resume.data_fingerprint(str(path))
    assert first is not None and resume.data_fingerprint(str(path)) == first  # read again, unchanged: the same
    assert resume.data_fingerprint(str(tmp_path)) is None  # a folder without a train file: nothing to compare
    stat = path.stat()
    path.write_text('{"question": "q", "answer": "2"}\n')  # same size, same time: its content tells
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert resume.data_fingerprint(str(path)) != first
    assert resume.data_fingerprint("gsm8k") is None


def test_the_dataset_a_run_trained_on_is_read_from_its_record_and_its_checkpoint(tmp_path):
    checkpoint = _checkpoint(tmp_path, 1)
    _record(tmp_path, status="running", recipe={"dataset": "synthetic"})
    assert resume.earlier_run(tmp_path, checkpoint, main=False).dataset == "synthetic"
    mark_complete(checkpoint, {"preset": "lora", "dataset": "data.jsonl"})  # the checkpoint's own record wins
    assert resume.earlier_run(tmp_path, checkpoint, main=False).dataset == "data.jsonl"


def test_checking_a_resume_writes_nothing_and_says_a_finished_run_is_finished(tmp_path):
    model = _model(tmp_path / "m", b"\x00" * 100)
    run = tmp_path / "run"
    _checkpoint(run, 2)
    _checkpoint(run, 3, marked=False, state=None)
    _record(run, status="finished", model=model, max_steps=2)
    (run / "final").mkdir()
    finished, line = resume.check_resume(run, model, max_steps=None, preset=None, method=None)
    assert finished and line.startswith(f"finished: the run in {run} already trained its 2 steps")
    assert (run / "checkpoint-3").is_dir() and not (run / "incomplete").exists()  # nothing moved
    other = _model(tmp_path / "other", b"\x01" * 100)
    for asked, says in [
        ({"model_id": other}, f"{run} was trained from {model}; {other} is another model"),
        ({"model_id": model, "preset": "qlora"}, f"{run} was trained with preset 'lora'; --preset qlora asks for"),
        ({"model_id": model, "method": "galore"}, "--method galore asks for another"),
        ({"model_id": model, "max_steps": 1}, "holds 2 trained steps (checkpoint-2) and max_steps=1 asks for fewer"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(says)):
            resume.check_resume(run, **{"max_steps": None, "preset": None, "method": None, **asked})
    (run / "run.json").write_text("{")  # unreadable: checked as it is, not moved aside (the run itself does that)
    assert resume.check_resume(run, model, max_steps=None, preset=None, method=None) == (False, None)
    assert (run / "run.json").read_text() == "{" and not (run / "run.json.corrupt").exists()


def test_dropping_an_attempts_checkpoints_unlinks_a_link_and_keeps_its_target(tmp_path):
    _checkpoint(tmp_path, 1)
    _checkpoint(tmp_path, 2)
    kept = tmp_path / "elsewhere"
    kept.mkdir()
    (tmp_path / "checkpoint-3").symlink_to(kept)
    (tmp_path / "final").mkdir()
    checkpoints.drop_checkpoints(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "final"] and kept.is_dir()


def test_a_saved_checkpoint_is_marked_complete_by_the_main_process_only(tmp_path):
    folder = _checkpoint(tmp_path, 4, marked=False)
    saved = []
    callback = checkpoints.CompletionCallback(lambda: {"preset": "lora", "step": 4}, saved.append)
    args = SimpleNamespace(output_dir=str(tmp_path))
    callback.on_save(args, SimpleNamespace(global_step=4, is_world_process_zero=False), None)
    assert not (folder / MARKER).exists() and saved == []
    callback.on_save(args, SimpleNamespace(global_step=4, is_world_process_zero=True), None)
    marker = json.loads((folder / MARKER).read_text())
    assert marker["step"] == 4 and marker["run"] == {"preset": "lora", "step": 4} and saved == [4]
    assert set(marker["files"]) == {"adapter_model.safetensors", "trainer_state.json"}
    callback.on_save(args, SimpleNamespace(global_step=5, is_world_process_zero=True), None)  # no folder: no marker
    assert saved == [4, 5] and not (tmp_path / "checkpoint-5").exists()


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        # the adapter (32,768 parameters in fp32) and its two fp32 AdamW moments
        ({"method": "lora"}, 32768 * 4 + 32768 * 8),
        # every bf16 weight and its two bf16 moments (round to nearest)
        ({"method": "full", "optim": "adamw_torch", "update_rounding": "nearest"}, 138048 * 2 + 138048 * 4),
        # sharded: each process saves its shard of the moments, all of them together the whole
        (
            {"method": "full", "optim": "adamw_torch", "update_rounding": "nearest", "sharding": "fsdp",
             "num_processes": 2},
            138048 * 2 + 138048 * 4,
        ),
    ],
)  # fmt: skip
def test_a_checkpoints_bytes_on_disk_by_hand(settings, expected):
    from test_memory import SMALL, TOY

    from grpo_lite.memory.estimate import estimate

    plan = SimpleNamespace(estimate=estimate(TOY, **settings, **SMALL))
    assert checkpoints.checkpoint_bytes(plan) == expected + 16 * 2**20  # + tokenizer, trainer and RNG state


# ---- a step down, at every instant; a run moved; a record or a checkpoint that is not the run's ----------------
_DOWN = {"event": "replanned", "cause": "out_of_memory", "step": 3, "weights": "stepdown-1",
         "from": {"preset": "full"}, "to": {"preset": "lora"}}  # fmt: skip


def _carried(run: Path, *, done: int = 3, marked: bool = True) -> Path:
    """``run/stepdown-1``: the weights a step down after step ``done`` carried, marked complete when ``marked``."""
    folder = run / "stepdown-1"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"carried")
    if marked:
        mark_complete(folder, {"preset": "lora", "source": "stepdown-1", "done": done, "events": [_DOWN]})
    return folder


@pytest.mark.parametrize("old_checkpoint", [False, True])
def test_a_run_killed_after_a_step_down_resumes_from_the_carried_weights(tmp_path, old_checkpoint):
    """Killed after the step down at step 3, before the next rung's first checkpoint: the run goes on from
    stepdown-1 (3 steps), whether the old rung's checkpoint-2 is dropped yet or not; not "nothing to resume"."""
    run = tmp_path / "run"
    if old_checkpoint:
        mark_complete(_checkpoint(run, 2, marked=False), {"preset": "full", "done": 0})
    carried = _carried(run)
    _record(run, plan={"preset": "lora"}, events=[_DOWN])
    point, notes = resume_point(run, move=True)
    assert point == carried and notes == ["resuming from stepdown-1, the weights carried at the step down after step 3"]
    earlier = resume.earlier_run(run, point, main=True)
    assert (earlier.preset, earlier.source, earlier.done, earlier.reached) == ("lora", str(carried), 3, 3)
    with pytest.raises(ConfigError, match=re.escape("holds 3 trained steps (carried at its step down) and max_st")):
        check_steps(run, earlier, 2)


def test_the_next_rungs_first_checkpoint_wins_over_the_carried_weights_and_an_unmarked_carry_counts_not(tmp_path):
    run = tmp_path / "run"
    _carried(run, marked=False)  # cut off while it was saved: the old rung's checkpoint is the resume point
    old = _checkpoint(run, 2, marked=False)
    mark_complete(old, {"preset": "full", "done": 0})
    assert scan(run).newest == old
    (run / "stepdown-1" / MARKER).unlink(missing_ok=True)
    mark_complete(run / "stepdown-1", {"preset": "lora", "done": 3})
    assert scan(run).newest == run / "stepdown-1"
    checkpoints.drop_checkpoints(run)  # as the step down does once stepdown-1 is marked
    new = run / "checkpoint-1"  # the next rung's first: 3 + 1 steps
    new.mkdir()
    (new / "trainer_state.json").write_text("{}")
    mark_complete(new, {"preset": "lora", "done": 3})
    assert scan(run).newest == new


@pytest.mark.parametrize("recorded", ["stepdown-1", "/gone/original/run/stepdown-1", "original/run/stepdown-1"])
def test_a_moved_or_copied_run_goes_on_from_its_own_carried_weights(tmp_path, recorded):
    """The weights of a step down are named relative to the run folder; an older record's path (absolute, or from
    where the run started) is read as this folder's own stepdown-1."""
    run = tmp_path / "copy"
    checkpoint = _checkpoint(run, 1)
    _carried(run)
    _record(run, events=[{**_DOWN, "weights": recorded}])
    assert resume.earlier_run(run, checkpoint, main=False).source == str(run / "stepdown-1")
    assert checkpoints.carried_path(run, "/elsewhere/model") == "/elsewhere/model"  # not a step down's: as written


@pytest.mark.parametrize(
    "event",
    [{"event": "replanned", "cause": "out_of_memory", "step": 2, "from": {"preset": "full"}, "to": {"preset": "lora"}},
     {"event": "out_of_memory", "step": 2, "from_preset": "full", "to_preset": "lora"},  # a 0.4 record's shape
     {**_DOWN, "step": "3"}],
)  # fmt: skip
def test_a_step_down_without_its_weights_makes_run_json_corrupt_not_a_traceback(tmp_path, event):
    checkpoint = _checkpoint(tmp_path, 1)
    _record(tmp_path, events=[event])
    earlier = resume.earlier_run(tmp_path, checkpoint, main=True)
    assert (tmp_path / "run.json.corrupt").is_file() and not (tmp_path / "run.json").exists()
    assert earlier.notes == [
        "run.json could not be read (events[0] is a step down without the weights it went on from and its step): "
        "kept as run.json.corrupt; the run's record is rebuilt from the checkpoint and history.jsonl"
    ]


def test_a_checkpoint_another_run_saved_is_refused_and_its_own_resumes(tmp_path):
    model = _model(tmp_path / "m", b"\x00" * 100)
    run = tmp_path / "run"
    mark_complete(_checkpoint(run, 2, marked=False), {"preset": "lora", "run_id": "ours"})
    _record(run, status="finished", model=model, max_steps=2, run_id="ours")
    (run / "final").mkdir()
    assert resume.check_resume(run, model, max_steps=None, preset=None, method=None)[0]
    mark_complete(_checkpoint(run, 3, marked=False), {"preset": "lora", "run_id": "theirs"})  # dropped in
    says = f"checkpoint-3 in {run} was saved by another run (run id theirs; this run's is ours, in its run.json)"
    with pytest.raises(ConfigError, match=re.escape(says)):
        resume.check_resume(run, model, max_steps=None, preset=None, method=None)
    (run / "checkpoint-3" / MARKER).unlink()  # cut off before its marker (or a plain TRL checkpoint): not checked
    assert resume.earlier_run(run, run / "checkpoint-3", main=False).run_id == "ours"


def test_a_resume_with_another_answer_kind_or_its_data_edited_in_place_is_refused(tiny_model_dir, tmp_path):
    from grpo_lite import train

    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(json.dumps({"question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n" for i in range(4))
    )
    kw = dict(num_generations=2, per_device_train_batch_size=2, max_completion_length=8, quiet=True, save_steps=1,
              rewards=["correctness"], dataset=str(data), output_dir=tmp_path / "run")  # fmt: skip
    train(str(tiny_model_dir), max_steps=1, **kw)
    with pytest.raises(ConfigError, match=r"answer_kind 'text' instead of the run's 'number'\. Resume with "
                                          r"--answer-kind number"):  # fmt: skip
        train(str(tiny_model_dir), max_steps=2, resume=True, answer_kind="text", **kw)
    data.write_text(data.read_text().replace('"answer": "2"', '"answer": "3"'))
    with pytest.raises(ConfigError, match=r"the dataset's files changed since the run trained on them .*Resume with "
                                          r"the dataset as the run trained on it"):  # fmt: skip
        train(str(tiny_model_dir), max_steps=2, resume=True, **kw)
