"""Tests for grpo_lite.data.prompts: styles, messages, chat rendering, the prefill column."""

from __future__ import annotations

import re
from typing import get_args

import pytest

from grpo_lite.errors import ConfigError, DataError, ModelError
from grpo_lite.data.prompts import (
    ONE_SHOT_ANSWER,
    ONE_SHOT_QUESTION,
    ONE_SHOT_REASONING,
    PROMPT_STYLES,
    SYSTEM_PROMPT,
    PromptStyle,
    PromptStyleName,
    apply_prompt_style,
    build_messages,
    format_solution,
    render_prompt,
)

TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
STRICT_FORMAT = re.compile(r"^<reasoning>\n.+?\n</reasoning>\n<answer>\n.+?\n</answer>$", re.DOTALL)


def make_tokenizer(adds_bos: bool, template: str | None = TEMPLATE):
    """A word-level tokenizer built here (no download); optionally adds BOS when encoding."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "a": 3}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if adds_bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    tokenizer.chat_template = template
    return tokenizer


def small_dataset(prompts: list):
    from datasets import Dataset

    questions = [f"q{i}" for i in range(len(prompts))]
    return Dataset.from_dict({"question": questions, "prompt": prompts, "answer": ["1"] * len(prompts)})


def test_system_prompt_names_every_tag_and_has_no_literal_ellipsis() -> None:
    for tag in ("<reasoning>", "</reasoning>", "<answer>", "</answer>"):
        assert SYSTEM_PROMPT.count(tag) == 1
    assert "..." not in SYSTEM_PROMPT  # a literal "..." was copied by the model (reward hacking)


def test_one_shot_example_is_in_the_strict_format_and_its_arithmetic_holds() -> None:
    solution = format_solution(ONE_SHOT_REASONING, ONE_SHOT_ANSWER)
    assert STRICT_FORMAT.match(solution)
    assert "..." not in solution
    numbers = [int(n) for n in re.findall(r"\d+", ONE_SHOT_QUESTION)]
    assert numbers == [4, 9, 23]
    assert int(ONE_SHOT_ANSWER) == 4 * 9 - 23
    for left, op, right, result in re.findall(r"(\d+) ([x\-+]) (\d+) = (\d+)", ONE_SHOT_REASONING):
        value = {"x": int(left) * int(right), "-": int(left) - int(right), "+": int(left) + int(right)}[op]
        assert value == int(result)


def test_default_style_is_guided() -> None:
    style = PromptStyle()
    assert (style.system_prompt, style.one_shot, style.prefill) == (SYSTEM_PROMPT, True, "<reasoning>\n")
    assert PromptStyle.plain() == PromptStyle(one_shot=False, prefill="")


def test_registry_matches_the_literal() -> None:
    assert tuple(PROMPT_STYLES) == get_args(PromptStyleName)


@pytest.mark.parametrize("name", list(PROMPT_STYLES))
def test_named_returns_the_registered_style(name: str) -> None:
    assert PromptStyle.named(name) is PROMPT_STYLES[name][0]


def test_named_unknown_lists_valid_names() -> None:
    with pytest.raises(ConfigError, match=r"unknown prompt style 'fancy'; valid styles: 'guided', 'plain'"):
        PromptStyle.named("fancy")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"system_prompt": None}, "system_prompt must be a str"),
        ({"one_shot": "yes"}, "one_shot must be True or False"),
        ({"prefill": 3}, "prefill must be a str"),
    ],
)
def test_style_rejects_bad_types(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PromptStyle(**kwargs)


@pytest.mark.parametrize(
    ("style", "roles"),
    [
        (PromptStyle(), ["system", "user", "assistant", "user"]),
        (PromptStyle.plain(), ["system", "user"]),
        (PromptStyle(system_prompt=""), ["user", "assistant", "user"]),
        (PromptStyle(system_prompt="", one_shot=False), ["user"]),
    ],
)
def test_build_messages_roles(style: PromptStyle, roles: list[str]) -> None:
    messages = build_messages("How many?", style)
    assert [m["role"] for m in messages] == roles
    assert messages[-1] == {"role": "user", "content": "How many?"}


def test_build_messages_one_shot_content() -> None:
    messages = build_messages("How many?")
    assert messages[0]["content"] == SYSTEM_PROMPT
    assert messages[1]["content"] == ONE_SHOT_QUESTION
    assert messages[2]["content"] == format_solution(ONE_SHOT_REASONING, ONE_SHOT_ANSWER)


def test_render_strips_bos_when_the_tokenizer_adds_it() -> None:
    tokenizer = make_tokenizer(adds_bos=True)
    text = render_prompt(build_messages("a"), tokenizer, prefill="<reasoning>\n")
    assert not text.startswith("<s>")
    assert text.startswith("<|system|>\n")
    assert text.endswith("<|assistant|>\n<reasoning>\n")
    ids = tokenizer(text)["input_ids"]
    assert ids[0] == 1 and ids[1] != 1  # exactly one BOS once TRL tokenizes the text


def test_render_keeps_bos_when_the_tokenizer_does_not_add_it() -> None:
    text = render_prompt([{"role": "user", "content": "a"}], make_tokenizer(adds_bos=False))
    assert text == "<s><|user|>\na<|end|>\n<|assistant|>\n"


def test_render_without_chat_template_raises() -> None:
    with pytest.raises(ModelError, match="no chat template"):
        render_prompt([{"role": "user", "content": "a"}], make_tokenizer(adds_bos=False, template=None))


def test_apply_prompt_style_renders_and_adds_prefill_column() -> None:
    tokenizer = make_tokenizer(adds_bos=True)
    ds = small_dataset([build_messages("q0"), build_messages("q1")])
    out = apply_prompt_style(ds, tokenizer, PromptStyle())
    assert out.column_names == ["question", "prompt", "answer", "prefill"]
    assert out["prefill"] == ["<reasoning>\n", "<reasoning>\n"]
    assert out["prompt"][1] == render_prompt(build_messages("q1"), tokenizer, "<reasoning>\n")
    assert out["prompt"][1].endswith("<|user|>\nq1<|end|>\n<|assistant|>\n<reasoning>\n")


def test_apply_prompt_style_without_prefill_keeps_conversational_prompts() -> None:
    ds = small_dataset([build_messages("q0")])
    out = apply_prompt_style(ds, make_tokenizer(adds_bos=True), PromptStyle.plain())
    assert out is ds
    assert "prefill" not in out.column_names


def test_apply_prompt_style_on_text_prompts_is_idempotent() -> None:
    tokenizer = make_tokenizer(adds_bos=True)
    once = apply_prompt_style(small_dataset(["Question: 2+2?\n"]), tokenizer)
    assert once["prompt"] == ["Question: 2+2?\n<reasoning>\n"]
    twice = apply_prompt_style(once, tokenizer)
    assert twice["prompt"] == once["prompt"] and twice["prefill"] == ["<reasoning>\n"]
    assert twice.column_names == once.column_names


def test_apply_prompt_style_needs_a_prompt_column() -> None:
    from datasets import Dataset

    with pytest.raises(DataError, match="no 'prompt' column"):
        apply_prompt_style(Dataset.from_dict({"question": ["q"]}), make_tokenizer(adds_bos=False))


def test_apply_prompt_style_rejects_a_bad_prompt() -> None:
    with pytest.raises(DataError, match="row 1: 'prompt' must be text or a list"):
        apply_prompt_style(small_dataset([[{"speaker": "x"}]]), make_tokenizer(adds_bos=False))
