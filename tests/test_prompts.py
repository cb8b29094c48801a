"""Tests for grpo_lite.data.prompts: styles, messages, chat rendering, the prefill column."""

from __future__ import annotations

import re
from typing import get_args

import pytest

from grpo_lite.data.prompts import (
    COMPACT_SYSTEM_PROMPT,
    GUIDED_EXAMPLE,
    ONE_SHOT_ANSWER,
    ONE_SHOT_QUESTION,
    ONE_SHOT_REASONING,
    ONE_STEP_EXAMPLES,
    PROMPT_STYLES,
    SYSTEM_PROMPT,
    Example,
    PromptStyle,
    PromptStyleName,
    adds_bos_token,
    apply_prompt_style,
    build_messages,
    format_solution,
    render_prompt,
)
from grpo_lite.errors import ConfigError, DataError, ModelError

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


@pytest.mark.parametrize("system_prompt", [SYSTEM_PROMPT, COMPACT_SYSTEM_PROMPT])
def test_system_prompt_names_every_tag_and_has_no_literal_ellipsis(system_prompt: str) -> None:
    for tag in ("<reasoning>", "</reasoning>", "<answer>", "</answer>"):
        assert system_prompt.count(tag) == 1
    assert "..." not in system_prompt  # a literal "..." was copied by the model (reward hacking)


def test_one_step_system_prompt_is_shorter() -> None:
    assert len(COMPACT_SYSTEM_PROMPT) < len(SYSTEM_PROMPT)


def _check_arithmetic(reasoning: str) -> int:
    """Check every ``a op b = c`` in the reasoning; return how many there are."""
    equations = re.findall(r"(\d+) ([x\-+]) (\d+) = (\d+)", reasoning)
    for left, op, right, result in equations:
        value = {"x": int(left) * int(right), "-": int(left) - int(right), "+": int(left) + int(right)}[op]
        assert value == int(result), (left, op, right, result)
    return len(equations)


def test_one_shot_example_is_in_the_strict_format_and_its_arithmetic_holds() -> None:
    solution = format_solution(ONE_SHOT_REASONING, ONE_SHOT_ANSWER)
    assert STRICT_FORMAT.match(solution)
    assert "..." not in solution
    numbers = [int(n) for n in re.findall(r"\d+", ONE_SHOT_QUESTION)]
    assert numbers == [4, 9, 23]
    assert int(ONE_SHOT_ANSWER) == 4 * 9 - 23
    assert _check_arithmetic(ONE_SHOT_REASONING) == 2
    assert GUIDED_EXAMPLE == Example(ONE_SHOT_QUESTION, ONE_SHOT_REASONING, ONE_SHOT_ANSWER)


@pytest.mark.parametrize("example", ONE_STEP_EXAMPLES)
def test_one_step_examples_are_one_step_strict_and_right(example: Example) -> None:
    assert STRICT_FORMAT.match(example.solution()) and "..." not in example.solution()
    assert _check_arithmetic(example.reasoning) == 1  # one equation: one step, like level-1 problems
    assert example.reasoning.split(" = ")[1].split()[0] == example.answer


def test_one_step_examples_show_both_operations() -> None:
    assert [re.search(r" ([+-]) ", e.reasoning)[1] for e in ONE_STEP_EXAMPLES] == ["+", "-"]


def test_one_step_style_fields() -> None:
    style = PromptStyle.named("one_step")
    assert (style.system_prompt, style.one_shot, style.prefill) == (COMPACT_SYSTEM_PROMPT, True, "<reasoning>\n")
    assert style.examples == ONE_STEP_EXAMPLES and style == PromptStyle.one_step()


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
    with pytest.raises(
        ConfigError, match=r"unknown prompt style 'fancy'; valid styles: 'guided', 'plain', 'one_step'$"
    ):
        PromptStyle.named("fancy")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"system_prompt": None}, "system_prompt must be a str"),
        ({"one_shot": "yes"}, "one_shot must be True or False"),
        ({"prefill": 3}, "prefill must be a str"),
        ({"examples": [GUIDED_EXAMPLE]}, "examples must be a tuple of Example"),
        ({"examples": ("a question",)}, "examples must be a tuple of Example"),
        ({"examples": ()}, "examples is empty but one_shot is True"),
    ],
)
def test_style_rejects_bad_types(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PromptStyle(**kwargs)


def test_style_without_examples_is_fine_when_one_shot_is_off() -> None:
    assert build_messages("q", PromptStyle(one_shot=False, examples=())) == build_messages("q", PromptStyle.plain())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"question": "", "reasoning": "1 + 1 = 2", "answer": "2"}, "question must be a non-empty str"),
        ({"question": "q", "reasoning": None, "answer": "2"}, "reasoning must be a non-empty str"),
        ({"question": "q", "reasoning": "1 + 1 = 2", "answer": 2}, "answer must be a non-empty str"),
    ],
)
def test_example_rejects_empty_or_non_text(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Example(**kwargs)


@pytest.mark.parametrize(
    ("style", "roles"),
    [
        (PromptStyle(), ["system", "user", "assistant", "user"]),
        (PromptStyle.plain(), ["system", "user"]),
        (PromptStyle(system_prompt=""), ["user", "assistant", "user"]),
        (PromptStyle(system_prompt="", one_shot=False), ["user"]),
        (PromptStyle.one_step(), ["system", "user", "assistant", "user", "assistant", "user"]),
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


def test_build_messages_one_step_content_in_order() -> None:
    contents = [m["content"] for m in build_messages("How many?", PromptStyle.one_step())]
    add, sub = ONE_STEP_EXAMPLES
    assert contents == [COMPACT_SYSTEM_PROMPT, add.question, add.solution(), sub.question, sub.solution(), "How many?"]


def test_one_step_prompt_renders_with_prefill_after_the_question() -> None:
    text = render_prompt(
        build_messages("q", PromptStyle.one_step()), make_tokenizer(adds_bos=False), "<reasoning>\n", False
    )
    assert text.startswith(f"<s><|system|>\n{COMPACT_SYSTEM_PROMPT}<|end|>\n")
    assert text.endswith("<|user|>\nq<|end|>\n<|assistant|>\n<reasoning>\n")


def test_render_strips_bos_when_the_tokenizer_adds_it() -> None:
    tokenizer = make_tokenizer(adds_bos=True)
    text = render_prompt(build_messages("a"), tokenizer, "<reasoning>\n", adds_bos_token(tokenizer))
    assert not text.startswith("<s>")
    assert text.startswith("<|system|>\n")
    assert text.endswith("<|assistant|>\n<reasoning>\n")
    ids = tokenizer(text)["input_ids"]
    assert ids[0] == 1 and ids[1] != 1  # exactly one BOS once TRL tokenizes the text


def test_render_keeps_bos_when_the_tokenizer_does_not_add_it() -> None:
    text = render_prompt([{"role": "user", "content": "a"}], make_tokenizer(adds_bos=False), "", False)
    assert text == "<s><|user|>\na<|end|>\n<|assistant|>\n"


def test_render_without_chat_template_raises() -> None:
    with pytest.raises(ModelError, match="no chat template"):
        render_prompt([{"role": "user", "content": "a"}], make_tokenizer(adds_bos=False, template=None), "", False)


def test_apply_prompt_style_renders_and_adds_prefill_column() -> None:
    tokenizer = make_tokenizer(adds_bos=True)
    ds = small_dataset([build_messages("q0"), build_messages("q1")])
    out = apply_prompt_style(ds, tokenizer, PromptStyle())
    assert out.column_names == ["question", "prompt", "answer", "prefill"]
    assert out["prefill"] == ["<reasoning>\n", "<reasoning>\n"]
    assert out["prompt"][1] == render_prompt(
        build_messages("q1"), tokenizer, "<reasoning>\n", adds_bos_token(tokenizer)
    )
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
