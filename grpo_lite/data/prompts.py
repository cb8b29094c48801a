"""Prompt formatting: the system prompt, a one-shot example, the assistant prefill, chat rendering.

The default :class:`PromptStyle` uses all three, so a small model writes the XML format from its first samples;
why each choice: docs/internals.md. Plain Python: nothing heavy is imported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from grpo_lite.defaults import TRAINER
from grpo_lite.errors import ConfigError, DataError, ModelError
from grpo_lite.settings import PromptStyleName

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset


SYSTEM_PROMPT = (
    "Respond in the following format:\n"
    "<reasoning>\n"
    "your step-by-step reasoning\n"
    "</reasoning>\n"
    "<answer>\n"
    "the final answer, a number only\n"
    "</answer>"
)

# The default system prompt's answer line for answers that are not numbers (by the answers' kind; a number's line above)
KIND_ANSWER_LINES = {
    "math": "the final answer only, in LaTeX where it needs it",
    "choice": "the letter of the chosen option only",
    "text": "the final answer only",
}

Shape = Literal["questions", "prompts"]
"""How a dataset's rows become prompts, decided once when it loads (:func:`grpo_lite.data.loaders.load_task`).
``"questions"``: grpo-lite builds each prompt from a question in a :class:`PromptStyle` (system prompt, one-shot
example, prefill: its XML answer format). ``"prompts"``: a ``prompt`` column and no question column, TRL's shape:
the rows go to TRL as written."""


def stop_strings_for(asked: Sequence[str], shape: Shape) -> tuple[str, ...]:
    """The stop strings sampling and greedy decoding use: the end of grpo-lite's XML answer format
    (``</answer>``) only where its prompt style asks for that format, the ``"questions"`` shape; the others as asked.

    >>> stop_strings_for(["</answer>", "###"], "prompts"), stop_strings_for(["</answer>"], "questions")
    (('###',), ('</answer>',))
    """
    return tuple(stop for stop in asked if shape == "questions" or stop not in TRAINER.stop_strings)


# An original grade-school problem written for this project (not from GSM8K).
ONE_SHOT_QUESTION = (
    "A baker fills 4 trays with 9 rolls each. She sells 23 rolls in the morning. How many rolls does she have left?"
)
ONE_SHOT_REASONING = "The baker makes 4 x 9 = 36 rolls.\nAfter selling 23 of them, she has 36 - 23 = 13 rolls left."
ONE_SHOT_ANSWER = "13"

# The one_step style's system prompt: the same two sections, in fewer words.
COMPACT_SYSTEM_PROMPT = (
    "Answer in this format:\n<reasoning>\nthe calculation\n</reasoning>\n<answer>\nthe final number\n</answer>"
)


def style_for_kind(style: PromptStyle | None, kind: str) -> PromptStyle:
    """``style`` whose default system prompt asks for the answers' kind; a system prompt of the user's stays as is.

    >>> style_for_kind(None, "text").system_prompt.splitlines()[5]
    'the final answer only'
    >>> style_for_kind(None, "number") == PromptStyle()
    True
    """
    style = PromptStyle() if style is None else style
    if kind not in KIND_ANSWER_LINES or style.system_prompt != SYSTEM_PROMPT:
        return style
    return replace(
        style, system_prompt=SYSTEM_PROMPT.replace("the final answer, a number only", KIND_ANSWER_LINES[kind])
    )


def format_solution(reasoning: str, answer: str) -> str:
    """A solution (worked steps, final answer; no tags) in the XML format the rewards check.

    >>> print(format_solution("2 + 3 = 5", "5"))
    <reasoning>
    2 + 3 = 5
    </reasoning>
    <answer>
    5
    </answer>
    """
    return f"<reasoning>\n{reasoning.strip()}\n</reasoning>\n<answer>\n{answer.strip()}\n</answer>"


@dataclass(frozen=True)
class Example:
    """A worked example exchange: a question and its solution, shown before the real question.

    Attributes:
        question: the example problem.
        reasoning: its worked steps (no tags).
        answer: its final answer (no tags).

    >>> print(Example("What is 2 + 3?", "2 + 3 = 5", "5").solution().splitlines()[1])
    2 + 3 = 5
    """

    question: str
    reasoning: str
    answer: str

    def __post_init__(self) -> None:
        for name in ("question", "reasoning", "answer"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"Example.{name} must be a non-empty str, got {value!r}")

    def solution(self) -> str:
        """The example's answer turn, in the XML format (:func:`format_solution`)."""
        return format_solution(self.reasoning, self.answer)


# Original problems written for this project (not from GSM8K).
GUIDED_EXAMPLE = Example(ONE_SHOT_QUESTION, ONE_SHOT_REASONING, ONE_SHOT_ANSWER)
"""The guided style's example: two steps (a product, then a difference)."""
ONE_STEP_EXAMPLES = (
    Example("Ana has 12 pens. She buys 5 more pens. How many pens does she have now?", "12 + 5 = 17 pens.", "17"),
    Example("A tray has 30 cups. Ben takes 8 cups. How many cups are left?", "30 - 8 = 22 cups are left.", "22"),
)
"""The one_step style's examples: one addition and one subtraction, one equation each, like the
synthetic level-1 problems (with one example only, the model copied its operation)."""


@dataclass(frozen=True)
class PromptStyle:
    """How a question becomes a prompt.

    Attributes:
        system_prompt: the system message; ``""`` sends no system message (for chat templates that
            refuse a system role). Default: :data:`SYSTEM_PROMPT`.
        one_shot: put the worked example exchanges (``examples``) before the question. Default: ``True``.
        prefill: text that opens the assistant's turn, appended to the rendered prompt; reward
            functions prepend it to completions. ``""`` for none. Default: ``"<reasoning>\\n"``.
        examples: the worked examples shown, in order, when ``one_shot`` is on; at least one.
            Default: ``(GUIDED_EXAMPLE,)``.

    >>> PromptStyle().prefill
    '<reasoning>\\n'
    >>> PromptStyle.plain().one_shot
    False
    >>> PromptStyle.one_step().examples == ONE_STEP_EXAMPLES
    True
    """

    system_prompt: str = field(default=SYSTEM_PROMPT, metadata={"help": "system message; '' for none"})
    one_shot: bool = field(default=True, metadata={"help": "include the worked example exchange"})
    prefill: str = field(default="<reasoning>\n", metadata={"help": "text opening the assistant turn; '' for none"})
    examples: tuple[Example, ...] = field(
        default=(GUIDED_EXAMPLE,), metadata={"help": "the worked examples (when one_shot)"}
    )

    def __post_init__(self) -> None:
        if not isinstance(self.system_prompt, str):
            got = type(self.system_prompt).__name__
            raise ConfigError(f"PromptStyle.system_prompt must be a str ('' for none), got {got}")
        if not isinstance(self.one_shot, bool):
            raise ConfigError(f"PromptStyle.one_shot must be True or False, got {self.one_shot!r}")
        if not isinstance(self.prefill, str):
            raise ConfigError(f"PromptStyle.prefill must be a str ('' for none), got {type(self.prefill).__name__}")
        if not isinstance(self.examples, tuple) or not all(isinstance(e, Example) for e in self.examples):
            raise ConfigError(f"PromptStyle.examples must be a tuple of Example, got {self.examples!r:.80}")
        if self.one_shot and not self.examples:
            raise ConfigError(
                "PromptStyle.examples is empty but one_shot is True: give an Example or set one_shot=False"
            )

    @classmethod
    def plain(cls) -> PromptStyle:
        """The public GSM8K GRPO recipe: system prompt only, no one-shot example, no prefill."""
        return cls(one_shot=False, prefill="")

    @classmethod
    def one_step(cls) -> PromptStyle:
        """Short system prompt + two one-step examples + prefill: for one-step problems (the demo's style)."""
        return cls(system_prompt=COMPACT_SYSTEM_PROMPT, examples=ONE_STEP_EXAMPLES)

    @classmethod
    def named(cls, name: str) -> PromptStyle:
        """The style registered as ``name`` in :data:`PROMPT_STYLES`.

        Raises:
            ConfigError: unknown name (the message lists the valid ones).

        >>> PromptStyle.named("plain") == PromptStyle.plain()
        True
        """
        if name not in PROMPT_STYLES:
            valid = ", ".join(repr(n) for n in PROMPT_STYLES)
            raise ConfigError(f"unknown prompt style {name!r}; valid styles: {valid}")
        return PROMPT_STYLES[name][0]


# The one registry of named styles: name -> (style, one-line description). Docs and CLI read it.
PROMPT_STYLES: dict[PromptStyleName, tuple[PromptStyle, str]] = {
    "guided": (
        PromptStyle(),
        "system prompt + one-shot example + prefill '<reasoning>\\n' (default; small models need it)",
    ),
    "plain": (PromptStyle.plain(), "system prompt only, as in the public GSM8K GRPO recipe"),
    "one_step": (
        PromptStyle.one_step(),
        "short system prompt + two one-step examples + prefill (the demo's; one-step problems)",
    ),
}


OWN_PROMPTS = PromptStyle(system_prompt="", one_shot=False, prefill="")
"""The style of a task that writes its own prompts (a ``prompt`` column and the user's rewards, no gold): nothing is
added, the prompts reach TRL as they are (docs/tasks.md)."""


def build_messages(question: str, style: PromptStyle | None = None) -> list[dict[str, str]]:
    """The ``{"role", "content"}`` messages for one question: system, [example user, example assistant]..., user
    (under ``style``, default ``PromptStyle()``). The prefill is not a message: :func:`render_prompt` appends it.

    >>> [m["role"] for m in build_messages("What is 2 + 2?")]
    ['system', 'user', 'assistant', 'user']
    >>> build_messages("What is 2 + 2?", PromptStyle.plain())[-1]
    {'role': 'user', 'content': 'What is 2 + 2?'}
    """
    style = PromptStyle() if style is None else style
    messages: list[dict[str, str]] = []
    if style.system_prompt:
        messages.append({"role": "system", "content": style.system_prompt})
    if style.one_shot:
        for example in style.examples:
            messages.append({"role": "user", "content": example.question})
            messages.append({"role": "assistant", "content": example.solution()})
    messages.append({"role": "user", "content": question})
    return messages


def is_messages(prompt: Any) -> bool:
    """Whether a prompt is a conversation: a non-empty list of ``{"role", "content"}`` messages."""
    return (
        isinstance(prompt, list)
        and bool(prompt)
        and all(isinstance(m, dict) and {"role", "content"} <= m.keys() for m in prompt)
    )


def adds_bos_token(tokenizer: Any) -> bool:
    """Whether ``tokenizer(text)`` puts the BOS token in front by itself."""
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos_id is None:
        return False
    ids = tokenizer("a")["input_ids"]
    return bool(ids) and ids[0] == bos_id


def render_prompt(messages: list[dict[str, str]], tokenizer: Any, prefill: str, adds_bos: bool) -> str:
    """The chat template applied (with the generation prompt) and the prefill appended. A BOS the template writes is
    stripped when the tokenizer adds its own (``adds_bos``: :func:`adds_bos_token`, probed once by the caller): TRL
    tokenizes text prompts with ``tokenizer(text)``, which would double it.

    Raises:
        ModelError: the tokenizer has no chat template.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ModelError(
            "the tokenizer has no chat template: use an instruct/chat model, set tokenizer.chat_template, "
            "or use PromptStyle(prefill='') to keep conversational prompts"
        )
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    bos = getattr(tokenizer, "bos_token", None)
    if adds_bos and bos and text.startswith(bos):
        text = text[len(bos) :]
    return text + prefill


def apply_prompt_style(dataset: Dataset, tokenizer: Any, style: PromptStyle | None = None) -> Dataset:
    """Make a dataset's ``prompt`` column ready for training or evaluation under ``style``.

    With a prefill, conversational prompts are rendered to text (:func:`render_prompt`), text prompts get the
    prefill unless they end with it (applying twice changes nothing), and a ``prefill`` column is added for the
    reward functions; without one the dataset is returned unchanged. The messages were built by
    ``load_dataset(..., style=style)``: pass the same style to both.

    Args:
        dataset: a dataset with a ``prompt`` column (from :mod:`grpo_lite.data.loaders`).
        tokenizer: the model's tokenizer.
        style: the prompt style. Default: ``PromptStyle()``.

    Returns:
        A new dataset, same column order, plus ``prefill`` when the style has one.

    Raises:
        DataError: no ``prompt`` column, or a prompt that is neither text nor a list of messages.
        ModelError: the tokenizer has no chat template.
    """
    style = PromptStyle() if style is None else style
    if "prompt" not in dataset.column_names:
        raise DataError(
            f"the dataset has no 'prompt' column (columns: {', '.join(dataset.column_names)}); "
            "load it with grpo_lite.data.loaders.load_dataset, which builds one"
        )
    if not style.prefill:
        return dataset
    adds_bos = adds_bos_token(tokenizer)
    texts: list[str] = []
    for i, prompt in enumerate(dataset["prompt"]):
        if isinstance(prompt, str):
            texts.append(prompt if prompt.endswith(style.prefill) else prompt + style.prefill)
        elif is_messages(prompt):
            texts.append(render_prompt(prompt, tokenizer, style.prefill, adds_bos))
        else:
            raise DataError(
                f"row {i + 1}: 'prompt' must be text or a list of {{'role', 'content'}} messages: {prompt!r:.80}"
            )
    order = list(dataset.column_names) + ([] if "prefill" in dataset.column_names else ["prefill"])
    out = dataset.remove_columns([c for c in ("prompt", "prefill") if c in dataset.column_names])
    out = out.add_column("prompt", texts).add_column("prefill", [style.prefill] * len(texts))
    return out.select_columns(order)


def prompt_token_ids(tokenizer: Any, prompts: list[Any]) -> list[list[int]]:
    """The token ids of a batch of prompts, as TRL's GRPOTrainer tokenizes them (train() measures with it,
    evaluate() feeds the model with it): text through ``tokenizer(text)``, conversations through the chat
    template with no special tokens on top. As in TRL, the first prompt decides for the batch.

    Args:
        tokenizer: the model's tokenizer.
        prompts: text prompts, or lists of ``{"role", "content"}`` messages.

    Returns:
        One list of token ids per prompt, unpadded.
    """
    if isinstance(prompts[0], str):
        return tokenizer(list(prompts))["input_ids"]
    texts = [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=False) for p in prompts]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def completion_token_ids(tokenizer: Any, completions: list[str]) -> list[list[int]]:
    """The token ids of decoded completions, no special tokens added: what TRL hands a reward as ``completion_ids``
    (evaluate() passes them to a task's rewards, e.g. TRL's overlong punishment)."""
    return tokenizer(list(completions), add_special_tokens=False)["input_ids"]


def reward_model_inputs(tokenizer: Any, prompts: Sequence[Any], completions: Sequence[Any]) -> Any:
    """A reward model's batch as GRPOTrainer tokenizes it: each prompt with its completion (a conversational prompt
    and the assistant's message through the chat template, else the texts joined), padded on the right, no special
    tokens added (evaluate() scores reward models with it)."""
    from trl import apply_chat_template  # heavy: TRL

    if prompts and isinstance(prompts[0], list):
        texts = [
            apply_chat_template({"messages": p + (c if isinstance(c, list) else [{"role": "assistant", "content": c}])},
                                tokenizer)["text"]
            for p, c in zip(prompts, completions)
        ]  # fmt: skip
    else:
        texts = [p + c for p, c in zip(prompts, completions)]
    return tokenizer(text=texts, return_tensors="pt", padding=True, padding_side="right", add_special_tokens=False)
