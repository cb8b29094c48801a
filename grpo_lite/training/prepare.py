"""The inputs stage: the model's tokenizer and context, the dataset in the prompt style, every prompt measured
before the model loads (docs/internals.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from grpo_lite.data import prompts
from grpo_lite.data.loaders import has_gold, load_task
from grpo_lite.defaults import PLANNER
from grpo_lite.errors import ConfigError
from grpo_lite.memory.models import resolve_model
from grpo_lite.recipe.recipe import Recipe
from grpo_lite.rewards.functions import CorrectnessReward
from grpo_lite.training.checks import check_positions

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

    from grpo_lite.data.prompts import PromptStyle, Shape
    from grpo_lite.memory.models import ModelSpec


@dataclass
class RunInputs:
    """The model, tokenizer, prompts and rewards of a run."""

    spec: ModelSpec
    tokenizer: Any
    train_set: Any  # datasets.Dataset with the prompt style applied
    reward_funcs: list[Callable[..., Any]]
    style: PromptStyle
    prompt_tokens: int  # the longest prompt, measured
    context: int | None = None  # the model's context in tokens (None: no known limit)
    answer_kind: str | None = None  # how the golds compare (data.answer_kinds); None: no gold read (TRL's shape)
    shape: Shape = "questions"  # decided once, when the dataset loaded (data.loaders.Shape)
    reward_processing_classes: list[Any] | None = None  # GRPOTrainer's, one per reward (None: a model's own)


def load_inputs(
    spec: ModelSpec, asked: Recipe, reward_funcs: list[Callable[..., Any]], skip_invalid: bool, console: Any
) -> RunInputs:
    """Load the model's tokenizer and ``asked``'s dataset in its prompt style, measure every prompt and the model's
    context."""
    from grpo_lite.training.loading import load_tokenizer  # heavy: imports torch, transformers

    if spec.note:
        console.print(f"[dim]{spec.note}[/dim]")
    style = asked.style()
    init = asked.trl.get("model_init_kwargs")  # TRL loads the processing class at the model's revision
    revision = init.get("revision") if isinstance(init, dict) else None
    tokenizer = load_tokenizer(spec.model_id, revision=revision, trust_remote_code=asked.trl.get("trust_remote_code"))
    task = load_task(
        asked.dataset, split="train", style=style, seed=asked.seed, skip_invalid=skip_invalid,
        answer_kind=asked.answer_kind,
    )  # fmt: skip
    if task.shape == "prompts":
        if not has_gold(task.dataset):
            _check_task_rewards(reward_funcs)
        style = prompts.OWN_PROMPTS  # a task's own prompts, as written
    train_set = prompts.apply_prompt_style(task.dataset, tokenizer, style)
    prompt_tokens = measure_prompt_tokens(train_set, tokenizer)  # every row: TRL does not truncate
    context = context_tokens(spec, tokenizer)
    return RunInputs(
        spec, tokenizer, train_set, reward_funcs, style, prompt_tokens, context, task.answer_kind, task.shape
    )


def measure_prompt_tokens(dataset: Dataset, tokenizer: Any) -> int:
    """The longest prompt of the dataset, in tokens: the planner's prompt length (TRL does not truncate)."""
    return max(len(ids) for ids in prompts.prompt_token_ids(tokenizer, dataset["prompt"]))


def _check_task_rewards(reward_funcs: list[Callable[..., Any]]) -> None:
    """A task without a gold (a ``prompt`` column, no answer) cannot be scored by the correctness reward, which
    compares with the gold: said before the model loads, not at the first step."""
    gold_readers = [f.name for f in reward_funcs if isinstance(f, CorrectnessReward)]
    if gold_readers:
        raise ConfigError(
            f"the dataset has no gold answer (a task with a 'prompt' column), and {gold_readers[0]} compares with "
            "one: pass the task's own rewards (rewards=[...], --reward NAME, rewards: in a recipe; docs/tasks.md)"
        )


def context_tokens(spec: Any, tokenizer: Any) -> int | None:
    """The model's context in tokens: its config's ``max_position_embeddings``, else the tokenizer's
    ``model_max_length`` (None when neither says, as for a tokenizer without a limit)."""
    config = None
    if spec.kind != "gguf":
        from transformers import AutoConfig  # heavy: transformers

        try:
            config = AutoConfig.from_pretrained(spec.model_id)
        except (OSError, ValueError):  # not cached offline, or not a transformers config
            config = None
    return model_context(config, tokenizer)


def model_context(config: Any, tokenizer: Any) -> int | None:
    """The context in tokens of a model with this config (None: unknown) and tokenizer (:func:`context_tokens`)."""
    context = getattr(config, "max_position_embeddings", None)
    if context is None:
        context = getattr(tokenizer, "model_max_length", None)
    return context if isinstance(context, int) and 0 < context < 10**7 else None


def check_inputs(asked: Recipe, skip_invalid: bool, max_completion_length: int | None) -> None:
    """What each rank checks before its model loads, checked once before the ranks start: ``asked``'s model resolves,
    its dataset loads (a missing file, a bad row) and its longest prompt with ``max_completion_length`` fits the
    model's context (None: the shortest the planner tries, so that no plan the ranks make fits either).

    Raises:
        ConfigError, DataError, ModelError: as train() raises them, one line.
    """
    from rich.console import Console  # loaded to draw: rich

    spec = resolve_model(asked.model)
    inputs = load_inputs(spec, asked, [], skip_invalid, Console(quiet=True))
    completion = min(PLANNER.completion_lengths) if max_completion_length is None else max_completion_length
    check_positions(inputs.prompt_tokens, completion, inputs.context, spec.name)
