"""Stop strings end sampled completions early, closed by the EOS token."""

from __future__ import annotations

import json

import pytest
from tiny_run import TINY_RUN

from grpo_lite import train
from grpo_lite.training.step.grpo_trainer import end_at_stop


@pytest.mark.parametrize(
    "ids, pad, eos, expected",
    [
        ([5, 6, 0, 0], 0, [2], [5, 6, 2]),  # stopped early: pads dropped, EOS closes the completion
        ([5, 6, 2], 2, [2], [5, 6, 2]),  # pad is EOS: TRL already cut there
        ([5, 6, 7], 0, [2], [5, 6, 7]),  # ran to the length limit: unchanged
        ([], 0, [2], []),
        ([5, 0], None, [2], [5, 0]),  # no pad token: nothing to strip
    ],
)
def test_end_at_stop(ids, pad, eos, expected):
    assert end_at_stop(ids, pad, eos) == expected


def _mean_length(out) -> float:
    history = json.loads((out / "run.json").read_text())["history"]
    return sum(row["completions/mean_length"] for row in history) / len(history)


def test_a_stop_string_shortens_the_completions(tiny_model_dir, tmp_path):
    # the tiny BPE writes digits often: stop at the first "1"
    common = dict(TINY_RUN, max_steps=1, save_strategy="no", method="lora", shared_prefix=False)
    train(str(tiny_model_dir), output_dir=tmp_path / "full", stop_strings=(), **common)
    train(str(tiny_model_dir), output_dir=tmp_path / "stop", stop_strings=("1",), **common)
    full, stopped = _mean_length(tmp_path / "full"), _mean_length(tmp_path / "stop")
    assert full == TINY_RUN["max_completion_length"]
    assert stopped < full
    assert json.loads((tmp_path / "stop" / "run.json").read_text())["stop_strings"] == ["1"]


def test_sampling_forwards_the_group_prompt_once_and_decodes_the_same(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from grpo_lite.training.step.grpo_trainer import _patched_generate

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    head = "a long shared system prompt with a worked example " * 3
    prompts = [head + "how many apples?", head + "how many apples?", head + "and pears?", head + "and pears?"]
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    seen = []
    real_forward = model.forward

    def counting_forward(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen.append(tuple(ids.shape))
        return real_forward(*args, **kwargs)

    config = GenerationConfig(max_new_tokens=6, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    with torch.no_grad():
        plain = model.generate(**enc, generation_config=config)
        model.forward = counting_forward
        with _patched_generate(model, tokenizer, stops=False, share=True, pad_token_id=tokenizer.pad_token_id):
            shared = model.generate(**enc, generation_config=config)  # as TRL calls it
        del model.forward
    assert seen[0][0] == 1 and seen[0][1] >= 16  # the common prefix, once
    assert seen[1][0] == 4 and seen[1][1] < enc["input_ids"].shape[1] - 16  # then only each row's own tokens
    width = enc["input_ids"].shape[1]  # the prompt's width is kept: TRL cuts completions there
    assert shared.shape == plain.shape and torch.equal(shared[:, width:], plain[:, width:])
