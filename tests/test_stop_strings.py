"""Stop strings end sampled completions early, closed by the EOS token."""

from __future__ import annotations

import json
import re

import pytest
from tiny_run import TINY_RUN

from grpo_lite import train
from grpo_lite.errors import ConfigError
from grpo_lite.training.step.grpo_trainer import end_at_stop, stopped_at_stop


@pytest.mark.parametrize(
    "ids, pad, eos, expected",
    [
        ([5, 6, 0, 0], 0, [2], [5, 6, 2]),  # stopped early: pads dropped, EOS closes the completion
        ([5, 6, 2], 2, [2], [5, 6, 2]),  # pad is EOS: TRL already cut there
        ([5, 6, 7], 0, [2], [5, 6, 7]),  # ran to the length limit: unchanged
        ([5, 6, 0], 0, [2], [5, 6, 2]),  # one pad
        ([7], 0, [2], [7]),  # one token, at the limit
        ([], 0, [2], []),
        ([5, 0], None, [2], [5, 0]),  # no pad token: nothing to strip
    ],
)
def test_end_at_stop(ids, pad, eos, expected):
    assert end_at_stop(ids, pad, eos) == expected


def _clipped_share(rows, eos, pad):
    """TRL's ``completions/clipped_ratio``: the share of completions whose last token is neither EOS nor pad."""
    return sum(row[-1] not in (*eos, pad) for row in rows) / len(rows)


def test_a_completion_a_stop_string_ended_at_the_batchs_longest_is_not_cut(tiny_model_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    eos, pad = [tokenizer.eos_token_id], tokenizer.pad_token_id
    stops = ["</answer>"]
    longest = tokenizer.encode("<answer>\n18\n</answer>", add_special_tokens=False)  # stopped: the batch's longest
    shorter = tokenizer.encode("<answer>7</answer>", add_special_tokens=False)
    padded = shorter + [pad] * (len(longest) - len(shorter))  # stopped earlier: generate pads it
    cut = tokenizer.encode("<answer>\n18 and then 19 and", add_special_tokens=False)[: len(longest)]
    assert len(cut) == len(longest) and pad not in eos

    # the batch ended before the length limit (16): every row of it ended; only a row at the limit can be cut
    limit = 16
    assert len(longest) < limit
    closed = [end_at_stop(r, pad, eos, stopped=stopped_at_stop(r, tokenizer, stops, limit)) for r in (longest, padded)]
    assert closed == [[*longest, eos[0]], [*shorter, eos[0]]]
    assert _clipped_share(closed, eos, pad) == 0

    # at the limit: the row that wrote the stop string ended, the other was cut
    limit = len(longest)
    assert stopped_at_stop(longest, tokenizer, stops, limit) and not stopped_at_stop(cut, tokenizer, stops, limit)
    rows = [end_at_stop(r, pad, eos, stopped=stopped_at_stop(r, tokenizer, stops, limit)) for r in (longest, cut)]
    assert rows == [[*longest, eos[0]], cut]
    assert _clipped_share(rows, eos, pad) == 0.5
    # a stop string earlier in the text, not at its end, did not end it
    inside = tokenizer.encode("</answer> and then 19 and", add_special_tokens=False)
    assert not stopped_at_stop(inside, tokenizer, stops, len(inside))
    # ... nor one that ended a token before the limit (generate would have stopped there), nor no stop strings
    late = longest + tokenizer.encode("x", add_special_tokens=False)[-1:]  # one token after the stop string
    assert not stopped_at_stop(late, tokenizer, stops, len(late))
    assert not stopped_at_stop(longest, tokenizer, [], len(longest))
    # a completion that is the stop string alone ended on it
    only = tokenizer.encode("</answer>", add_special_tokens=False)
    assert stopped_at_stop(only, tokenizer, stops, len(only))


@pytest.mark.parametrize("stops", [[""], ["</answer>", ""]])
def test_an_empty_stop_string_is_refused(tmp_path, capsys, stops):
    from grpo_lite.cli import main
    from grpo_lite.recipe.recipe import Recipe

    message = "an empty stop string ends every completion at its first token"
    with pytest.raises(ConfigError, match=message):
        train("m", stop_strings=stops)
    path = tmp_path / "r.yaml"
    path.write_text(f"model: m\npreset: lora\nstop_strings: {json.dumps(stops)}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: stop_strings: ") + ".*" + message):
        Recipe.read(path)
    assert main(["train", "--config", str(path)]) == 2
    assert main(["train", "m", "--set", f"stop_strings={stops!r}"]) == 2
    assert capsys.readouterr().err.count(message) == 2  # the file's and the flag's, one line each


@pytest.mark.parametrize(
    ("stops", "message"),
    [
        ([""], "an empty stop string ends every completion at its first token"),
        (("</answer>", ""), "an empty stop string ends every completion at its first token"),
        ("</answer>", "stop_strings takes a list of text; e.g. stop_strings=['</answer>']"),
    ],
)
def test_evaluate_checks_its_stop_strings_as_training_does(stops, message):
    from grpo_lite import evaluate

    for run in (lambda: train("m", stop_strings=stops), lambda: evaluate("no-model-is-loaded", stop_strings=stops)):
        with pytest.raises(ConfigError, match=re.escape(message)):  # before any model loads
            run()


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


def test_a_batch_that_every_completion_ended_early_has_none_cut(tiny_model_dir, tmp_path):
    # the tiny BPE writes a space within 11 tokens in each of the first step's completions (seed 0)
    common = dict(TINY_RUN, max_steps=1, save_strategy="no", method="lora", shared_prefix=False)
    train(str(tiny_model_dir), output_dir=tmp_path / "run", stop_strings=(" ",), **common)
    row = json.loads((tmp_path / "run" / "run.json").read_text())["history"][0]
    # the batch ended before the limit, so every completion ended (EOS or the stop string): the longest, which has
    # no padding to show that it stopped, is not cut either
    assert row["completions/max_length"] < TINY_RUN["max_completion_length"]
    assert row["completions/clipped_ratio"] == 0


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
