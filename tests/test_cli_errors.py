"""Every bad input on the command line: one `error:` line saying what to change, exit code 2, no traceback,
and nothing already written is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_lite.cli import main

TINY = "{tiny}"  # replaced by the tiny model's folder
FAST = ["--dataset", "synthetic", "--reward", "length", "--max-steps", "1", "--set", "max_completion_length=8"]


def _write(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


# (argv, a fragment the error line must contain); {tmp} and {tiny} are filled in per test.
CASES = [
    (["train", "no-such-org/NoSuchModel-7B"], "known"),
    (["train", "{tmp}/does/not/exist"], "does not exist"),
    (["train", "{tmp}"], "config.json"),
    (["plan", "Llama-3.2-1B", "--budget-gb", "16", "--set", "num_generations=1"], "num_generations"),
    (["plan", "Llama-3.2-1B", "--budget-gb", "16", "--preset", "huge"], "full, full-8bit"),
    (["plan", "Llama-3.1-8B-Instruct", "--budget-gb", "4"], "smallest budget that fits is"),
    (
        [
            "plan",
            "Llama-3.2-1B",
            "--budget-gb",
            "16",
            "--set",
            "per_device_train_batch_size=3",
            "--set",
            "gradient_accumulation_steps=1",
            "--set",
            "num_generations=8",
        ],
        "per_device_train_batch_size",
    ),
    (["train", TINY, "--reward", "nope", "--dataset", "synthetic"], "correctness"),
    (["train", TINY, "--dataset", "{tmp}/missing.jsonl"], "missing.jsonl"),
    (["train", TINY, "--dataset", "@empty.jsonl"], "empty"),
    (["train", TINY, "--dataset", "@broken.jsonl"], "line 1"),
    (["train", TINY, "--dataset", "@nocols.jsonl"], "answer"),
    (["train", TINY, "--dataset", "@noanswer.jsonl", "--answer-kind", "number"], "line 1"),
    (["train", TINY, "--dataset", "@mixed.jsonl"], "the golds mix kinds: line 1 is a number ('7'), line 2 is text"),
    (["eval", TINY, "--dataset", "@mixed.jsonl", "--answer-kind", "choice"], "is not one option letter"),
    (["train", TINY, *FAST, "--set", "learning_rat=1e-5"], "did you mean 'learning_rate'"),
    (["train", TINY, *FAST, "--set", "num_generations=1"], "num_generations"),
    (["eval", TINY, "--dataset", "synthetic", "--batch-size", "0"], "batch_size"),
    (["train", TINY, *FAST, "--set", "max_steps=3"], "use --max-steps"),
    (["plan", "Llama-3.2-1B", "--budget-gb", "16", "--set", "max_prompt_length=300"], "use --max-prompt-length"),
    # issue 44: plan checks --set with train's ranges (before: ZeroDivisionError; learning_rate=-1 exited 0)
    (["plan", "Llama-3.2-1B", "--budget-gb", "16", "--set", "num_generations=0"], "num_generations=0 must be >= 2"),
    (["plan", "Llama-3.2-1B", "--budget-gb", "16", "--set", "learning_rate=-1"], "learning_rate=-1 must be > 0"),
    (["plan", "Llama-3.2-1B", "--budget-gb", "16", "--write", "{tmp}/" + "b" * 300 + ".yaml"], "is 305 bytes"),
    (["train", TINY, *FAST, "--seed", "-1"], "seed=-1 must be a whole number from 0 to 2**32 - 1"),
    (["train", TINY, *FAST, "--set", "max_completion_length=None"], "leave it out for the planner's choice"),
    (["train", TINY, *FAST, "--set", "max_completion_length=1000000000"], "has a context of 1024 tokens"),
]
FILES = {
    "empty.jsonl": "",
    "broken.jsonl": "{not json\n",
    "nocols.jsonl": '{"text": "hi"}\n',
    "noanswer.jsonl": '{"question": "How many?", "answer": "many"}\n',
    "mixed.jsonl": '{"question": "How many?", "answer": "7"}\n{"question": "Which?", "answer": "many"}\n',
}


@pytest.mark.parametrize(("argv", "fragment"), CASES, ids=[" ".join(c[0][:3]) for c in CASES])
def test_bad_input_is_one_line_and_exit_2(argv, fragment, tiny_model_dir, tmp_path, capsys):
    for name, text in FILES.items():
        _write(tmp_path, name, text)
    args = [a.replace("{tmp}", str(tmp_path)).replace("{tiny}", str(tiny_model_dir)) for a in argv]
    args = [str(tmp_path / a[1:]) if a.startswith("@") else a for a in args]
    if args[0] == "train":
        args += ["--output-dir", str(tmp_path / "out")]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert fragment in err[0], err[0]
    assert "Traceback" not in err[0]


@pytest.mark.parametrize("budget", ["0", "-3", "nan", "abc", "1e9"])
def test_bad_budget_is_refused_by_the_parser(budget, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "Llama-3.2-1B", "--budget-gb", budget])
    assert exc.value.code == 2
    assert "--budget-gb" in capsys.readouterr().err


def test_output_dir_with_another_run_loses_nothing(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text('{"status": "finished", "steps": 7}')
    (out / "checkpoint-7").mkdir()
    (out / "checkpoint-7" / "trainer_state.json").write_text("{}")  # complete: --resume is the way on
    assert main(["train", str(tiny_model_dir), *FAST, "--output-dir", str(out)]) == 2
    assert "--resume" in capsys.readouterr().err
    assert json.loads((out / "run.json").read_text())["steps"] == 7 and (out / "checkpoint-7").is_dir()


def test_plan_json_error_is_one_json_object(tmp_path, capsys):
    from transformers import MixtralConfig

    MixtralConfig(num_local_experts=8, num_experts_per_tok=2).save_pretrained(tmp_path / "mixtral")
    assert main(["plan", str(tmp_path / "mixtral"), "--budget-gb", "80", "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["error_type"] == "ModelError"
    assert data["error"].startswith("mixtral is a mixture-of-experts model (8 experts, 2 per token)")


def _failing_simulation(monkeypatch):  # noqa: ANN001, ANN202
    import grpo_lite.simulation.run as run

    def broken(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("a sliding-window mask\nof the wrong shape")

    monkeypatch.setattr(run, "simulate", broken)


def test_a_failed_simulation_keeps_the_plan_and_says_so_in_one_line(monkeypatch, capsys):
    _failing_simulation(monkeypatch)
    assert main(["plan", "Llama-3.2-1B", "--budget-gb", "16", "--simulate"]) == 2
    out, err = capsys.readouterr()
    assert "Llama-3.2-1B: preset" in out  # the plan is printed
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: --simulate failed for Llama-3.2-1B (RuntimeError: a sliding-window mask of the wrong shape)"
    ), lines
    assert lines[0].endswith("rerun without --simulate")


def test_a_failed_simulation_under_json_is_the_plan_with_an_error(monkeypatch, capsys):
    _failing_simulation(monkeypatch)
    assert main(["plan", "Llama-3.2-1B", "--budget-gb", "16", "--simulate", "--json"]) == 2
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is True and data["error"].startswith("--simulate failed")


@pytest.mark.parametrize("as_json", [False, True])
def test_an_unexpected_failure_is_one_line_not_a_traceback(monkeypatch, capsys, as_json):
    import grpo_lite.planning.choose as choose

    def broken(*_a, **_k):  # noqa: ANN002, ANN003, ANN202
        raise KeyError("rope_theta")

    monkeypatch.setattr(choose, "plan", broken)
    assert main(["plan", "Llama-3.2-1B", "--budget-gb", "16", *(["--json"] if as_json else [])]) == 2
    out, err = capsys.readouterr()
    message = json.loads(out)["error"] if as_json else err.strip()
    assert "\n" not in message and "Traceback" not in message
    assert "failed unexpectedly (KeyError: 'rope_theta'); rerun with --blocks formulas" in message


def _one_error_line(capsys) -> str:  # noqa: ANN001
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_eval_of_a_folder_without_tokenizer_files_says_which_are_missing(tiny_model_dir, tmp_path, capsys):
    folder = tmp_path / "weights-only"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        (folder / name).write_bytes((tiny_model_dir / name).read_bytes())
    assert main(["eval", str(folder), "--dataset", "synthetic", "--limit", "1"]) == 2
    assert _one_error_line(capsys) == (
        f"error: {folder} has no tokenizer files (tokenizer.json, tokenizer_config.json): copy them into it from "
        "the model it was made from (or save its tokenizer there with tokenizer.save_pretrained)"
    )


@pytest.mark.parametrize("with_checkpoint", [False, True])
def test_eval_of_a_run_without_final_says_what_to_evaluate_instead(tmp_path, capsys, with_checkpoint):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text('{"status": "failed", "model": "my-model"}')
    instead = ""
    if with_checkpoint:
        (run / "checkpoint-4").mkdir()
        (run / "checkpoint-4" / "trainer_state.json").write_text("{}")
        instead = f"evaluate its newest checkpoint ({run / 'checkpoint-4'}) or "
    assert main(["eval", str(run), "--dataset", "synthetic", "--limit", "1"]) == 2
    assert _one_error_line(capsys) == (
        f"error: {run} holds a run without its final/ folder (where a run writes its model when it finishes): "
        f"{instead}finish the run with grpo-lite train my-model --output-dir {run} --resume"
    )


def test_eval_refuses_prompts_past_the_context_and_the_length_it_suggests_fits(tiny_model_dir, tmp_path, capsys):
    import re

    data = _write(tmp_path, "long.jsonl", json.dumps({"question": "one plus one " * 60, "answer": "2"}) + "\n")
    assert main(["eval", str(tiny_model_dir), "--dataset", data]) == 2  # 256 new tokens do not fit: none decoded
    line = _one_error_line(capsys)
    assert f"; {tiny_model_dir} has a context of 1024 tokens: set max_new_tokens=" in line, line
    room = re.search(r"set max_new_tokens=(\d+) or lower \(--max-new-tokens \1; Python: max_new_tokens=\1\)", line)
    assert room, line
    assert main(["eval", str(tiny_model_dir), "--dataset", data, "--max-new-tokens", room[1]]) == 0
    assert main(["eval", str(tiny_model_dir), "--dataset", data, "--max-new-tokens", str(int(room[1]) + 1)]) == 2
    capsys.readouterr()
    longer = _write(tmp_path, "longer.jsonl", json.dumps({"question": "one plus one " * 600, "answer": "2"}) + "\n")
    assert main(["eval", str(tiny_model_dir), "--dataset", longer, "--max-new-tokens", "1"]) == 2
    assert _one_error_line(capsys).endswith(
        "has a context of 1024 tokens: shorten the prompts (drop the longest rows from the dataset)"
    )


def _run_into(stdout: int, *argv: str) -> tuple[int, str]:
    """``python -m grpo_lite ARGV`` with ``stdout`` as its standard output: its exit code and its stderr."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "grpo_lite", *argv], stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120
    )
    return done.returncode, done.stderr


PLAN_JSON = ("plan", "Llama-3.2-1B", "--budget-gb", "16", "--json")


def test_output_into_a_closed_pipe_ends_quietly_as_sigpipe_would():
    import os
    import signal

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line, as `| head -1` is after it
    try:
        code, err = _run_into(write, *PLAN_JSON)
    finally:
        os.close(write)
    assert code == 128 + signal.SIGPIPE
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err and "error" not in err


@pytest.mark.parametrize("argv", [PLAN_JSON, ("presets",)], ids=["plan --json", "presets (rich)"])
def test_output_onto_a_full_disk_is_one_error_line(argv):
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here (Linux has one): nothing to write a full disk with")
    with open("/dev/full", "w") as full:
        code, err = _run_into(full.fileno(), *argv)
    assert code == 2 and "Traceback" not in err and "Exception ignored" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert lines == [
        "error: cannot write the output to standard output (No space left on device); send it where it can be "
        "written (a file on a disk with room, or the terminal) and run the command again"
    ], err
