"""The inputs stage: the model resolved once, its tokenizer and context, the dataset in the prompt style, every
prompt measured (before the model loads).

train() resolves the model once (:func:`~grpo_lite.memory.models.resolve_model`) and hands the
:class:`~grpo_lite.memory.models.ModelSpec` to every stage: the run folder, the resume checks, these inputs, the plan
and the export's check.

- :func:`load_inputs`: the model's tokenizer and context, the dataset in the prompt style, every prompt measured.
- :func:`context_tokens`: the model's context, from its config or its tokenizer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_lite.training.run.attempts import RunInputs

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.models import ModelSpec
    from grpo_lite.training.arguments import Request

__all__ = ["context_tokens", "load_inputs"]


def load_inputs(spec: ModelSpec, request: Request, skip_invalid: bool, console: Any) -> RunInputs:
    """Load the model's tokenizer and the dataset, measure every prompt and the model's context."""
    from grpo_lite.data import prompts
    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.training.build import measure_prompt_tokens
    from grpo_lite.training.loading import load_tokenizer

    if spec.note:
        console.print(f"[dim]{spec.note}[/dim]")
    style = request.prompt_style or prompts.PromptStyle()
    tokenizer = load_tokenizer(spec.model_id)
    rows = load_dataset(request.dataset, split="train", style=style, seed=request.seed, skip_invalid=skip_invalid)
    train_set = prompts.apply_prompt_style(rows, tokenizer, style)
    prompt_tokens = measure_prompt_tokens(train_set, tokenizer)  # every row: TRL does not truncate
    context = context_tokens(spec, tokenizer)
    return RunInputs(spec, tokenizer, train_set, request.reward_funcs, style, prompt_tokens, context)


def context_tokens(spec: Any, tokenizer: Any) -> int | None:
    """The model's context in tokens: its config's ``max_position_embeddings``, else the tokenizer's
    ``model_max_length`` (None when neither says, as for a tokenizer without a limit)."""
    context = None
    if spec.kind != "gguf":
        from transformers import AutoConfig

        try:
            context = getattr(AutoConfig.from_pretrained(spec.model_id), "max_position_embeddings", None)
        except (OSError, ValueError):  # not cached offline, or not a transformers config
            context = None
    if context is None:
        context = getattr(tokenizer, "model_max_length", None)
    return context if isinstance(context, int) and 0 < context < 10**7 else None
