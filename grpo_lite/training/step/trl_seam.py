"""What :class:`~grpo_lite.training.step.grpo_trainer.LiteGRPOTrainer` needs of TRL's private code, checked when it is built.

Each feature of LiteGRPOTrainer relies on a part of TRL's private code, checked against the code grpo-lite was
written for (TRL :data:`TESTED_TRL`; the table of what each relies on: docs/internals.md).
:data:`SEAM` is the table: one row per feature, with the TRL names it relies on, its check, its fallback and its
words in the warning. :func:`seam_problems` runs the checks; the trainer turns each feature whose check found a
difference off and runs TRL's own code in its place, with one warning naming the TRL version, and a shared prefix
turned off so is planned again.

The training code's private names of TRL, transformers, torch and bitsandbytes, all in this module (the memory
layer's and the simulation's are in :mod:`grpo_lite.memory.meta.private`); other modules read them through the
functions here:

| private name | used by | when it changes | test |
| --- | --- | --- | --- |
| ``GRPOTrainer._compute_loss`` (overridden) | the zero-advantage skip | its source's digest differs: the skip is off, TRL's loss runs, one warning | ``test_zero_advantage.py::test_another_trl_loss_falls_back_with_one_warning`` |
| ``GRPOTrainer._get_per_token_logps_and_entropies`` (overridden) | shared-prefix scoring | another signature: TRL's method serves its calls, one warning | ``test_trl_seam.py`` |
| ``GRPOTrainer._generate_single_turn`` (overridden) | shared-prefix sampling, stop strings | another signature or source: TRL's method, one warning | ``test_trl_seam.py`` |
| ``GRPOTrainer._tokenizer`` (:func:`trainer_tokenizer`) | shared-prefix sampling, stop strings | missing or without ``pad_token_id``: both off, TRL's method, one warning | ``test_private_names.py::test_a_trainer_without_the_tokenizer_turns_sampling_features_off`` |
| ``GRPOTrainer._metrics`` (:func:`train_metrics`) | the update monitor, the skip's metrics | missing or not a dict of lists: the monitor off, one warning (the skip: its ``_compute_loss`` digest) | ``test_private_names.py::test_a_trainer_without_metrics_turns_the_monitor_off`` |
| ``GRPOTrainer._entropy_bonus_enabled`` (:func:`entropy_bonus_enabled`) | the zero-advantage skip | missing: read as on, the skip off (TRL's loss) | ``test_private_names.py::test_a_trainer_without_the_entropy_flag_keeps_trls_loss`` |
| ``PretrainedConfig._attn_implementation`` (transformers; :func:`attn_implementation`) | shared-prefix scoring | missing: read as None, which no kernel list holds: the shared prefix off, TRL's forward | ``test_private_names.py::test_a_config_without_the_attention_name_keeps_trls_forward`` |
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

# The TRL releases the trainer, shared-prefix and stop-string tests passed with (pyproject.toml's bound).
# 1.13.0 and 1.14.0 differ at the seam (the trainer warns and runs TRL's code); 1.15.0 has the same seam but its
# fused LM head needs Triton, so no training step runs on a CPU-only torch and it was not tested further.
TESTED_TRL = ("1.16.0",)
Feature = Literal["shared_scoring", "shared_sampling", "stop_strings", "update_monitor", "skip_zero_advantage"]

_SCORING_METHOD, _SAMPLING_METHOD = "_get_per_token_logps_and_entropies", "_generate_single_turn"
_SCORING = (
    "self",
    "model",
    "input_ids",
    "attention_mask",
    "logits_to_keep",
    "batch_size",
    "compute_entropy",
    "compute_aux_loss",
)  # then only fields that default to None (multimodal inputs)
_HEAD_ARGUMENTS = ("fused_lm_head", "shift_labels")  # of the forward TRL gives its fused LM head
_SAMPLING = ("self", "prompt_ids", "images", "multimodal_fields", "num_generations", "has_tool_images")
# Lines of TRL's _generate_single_turn (whitespace and trailing commas ignored) that the layout and the stop
# strings rely on: the left padding, the one generate call, the slice at the padded width, the first-EOS cut.
_GENERATE_CALL = "unwrapped_model.generate(**generate_inputs, generation_config=self.generation_config)"
_SLICE = (
    'prompt_length = generate_inputs["input_ids"].size(1)',
    "completion_ids = prompt_completion_ids[:, prompt_length:]",
)
_LEFT_PAD = 'padding_side="left"'
_EOS_CUT = "torch.isin(completion_ids, torch.tensor(self.eos_token_ids"
# sha256 of TRL 1.16's GRPOTrainer._compute_loss source, whitespace removed (_compact), first 16 hex digits. The skip's
# proof reads the whole function (any new term may count the skipped rows), so the whole function is compared.
_LOSS = ("_compute_loss", "eaa6a1420809f02d")


def _compact(text: str) -> str:
    return "".join(text.split()).replace(",)", ")")


def _signature_problem(cls: type, name: str, expected: tuple[str, ...], *, rest_none: bool) -> str | None:
    """Why the parameters of ``cls.name`` are not ``expected`` (then, with ``rest_none``, fields defaulting to None)."""
    method = getattr(cls, name)
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return f"{name}: signature unreadable"
    params = list(signature.parameters.values())
    extra = params[len(expected) :]
    if (
        tuple(p.name for p in params[: len(expected)]) != expected
        or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)
        or (extra and not rest_none)
        or any(p.default is not None for p in extra)
    ):
        return f"{name}{signature} is not {name}({', '.join(expected)}{', ...' if rest_none else ''})"
    return None


def _source_problem(cls: type, name: str, lines: tuple[str, ...] = (), digest: str | None = None) -> str | None:
    """Which of ``lines`` the source of ``cls.name`` lacks, or why it is not the source whose sha256 begins with
    ``digest`` (whitespace and formatting ignored)."""
    try:
        source = _compact(inspect.getsource(getattr(cls, name)))
    except (OSError, TypeError):
        return f"{name}: source unreadable"
    if digest is not None and hashlib.sha256(source.encode()).hexdigest()[:16] != digest:
        return f"{name} is not the code read (its per-token loss or divisor may count every row)"
    missing = [line for line in lines if _compact(line) not in source]
    return f"{name} no longer has {'; '.join(missing)}" if missing else None


def _attribute_problem(trainer: Any, checks: dict[str, Callable[[Any], bool]]) -> str | None:
    wrong = [name for name, ok in checks.items() if not (hasattr(trainer, name) and ok(getattr(trainer, name)))]
    return f"attributes {', '.join(wrong)} missing or of another type" if wrong else None


def _fused_head_problem(trainer: Any) -> str | None:
    try:
        params = inspect.signature(patched_lm(trainer.model).forward, follow_wrapped=False).parameters
    except (AttributeError, TypeError, ValueError):
        return "the model's forward is unreadable"
    missing = [p for p in _HEAD_ARGUMENTS if p not in params]
    return f"the fused LM head takes no {', '.join(missing)}" if missing else None


# The attributes each check reads, and what their values must be (the rows' TRL names are these dicts' keys).
_SWITCHES: dict[str, Callable[[Any], bool]] = {
    "use_vllm": lambda v: isinstance(v, bool),
    "use_transformers_continuous_batching": lambda v: isinstance(v, bool),
}
_TOKENIZER: dict[str, Callable[[Any], bool]] = {"_tokenizer": lambda t: hasattr(t, "pad_token_id")}
_STOP = {
    **_TOKENIZER,
    "generation_config": lambda c: c is not None,
    "eos_token_ids": lambda ids: isinstance(ids, (list, tuple)) and all(isinstance(i, int) for i in ids),
}
_METRICS: dict[str, Callable[[Any], bool]] = {
    "_metrics": lambda m: isinstance(m, dict) and hasattr(m.get("train"), "__getitem__")
}


def _samples_locally(trainer: Any) -> bool:
    """Whether transformers' ``generate`` samples (TRL calls the overrides whatever it samples with; what they change
    applies to ``generate`` only)."""
    return _attribute_problem(trainer, _SWITCHES) is None and not (
        trainer.use_vllm or trainer.use_transformers_continuous_batching
    )


def _generate_problem(trainer: Any, trl_class: type) -> str | None:
    """What both sampling features need: the method's signature, the switches, the left padding and generate call."""
    if why := _signature_problem(trl_class, _SAMPLING_METHOD, _SAMPLING, rest_none=False):
        return why
    if not _samples_locally(trainer):
        return _attribute_problem(trainer, _SWITCHES)
    return _source_problem(trl_class, _SAMPLING_METHOD, (_LEFT_PAD, _GENERATE_CALL))


def _scoring_problem(trainer: Any, trl_class: type) -> str | None:
    return _signature_problem(trl_class, _SCORING_METHOD, _SCORING, rest_none=True) or _fused_head_problem(trainer)


def _sampling_problem(trainer: Any, trl_class: type) -> str | None:
    if (why := _generate_problem(trainer, trl_class)) or not _samples_locally(trainer):
        return why
    return _source_problem(trl_class, _SAMPLING_METHOD, _SLICE) or _attribute_problem(trainer, _TOKENIZER)


def _stop_strings_problem(trainer: Any, trl_class: type) -> str | None:
    if (why := _generate_problem(trainer, trl_class)) or not _samples_locally(trainer):
        return why
    return _source_problem(trl_class, _SAMPLING_METHOD, (_EOS_CUT,)) or _attribute_problem(trainer, _STOP)


@dataclass(frozen=True)
class SeamRow:
    """One feature of LiteGRPOTrainer that relies on TRL's private code."""

    feature: Feature
    name: str  # in the warning: "<name> off (<what its check found>)"
    relies_on: tuple[str, ...]  # TRL's names: GRPOTrainer's, and its fused LM head's forward arguments
    check: Callable[[Any, type], str | None]  # (trainer, TRL's GRPOTrainer) -> what differs, None when nothing
    fallback: str  # what runs when the check finds a difference

    def message(self, why: str) -> str:
        return f"{self.name} off ({why})"


# In the order the trainer checks them (and the warning names them); docs/internals.md shows the same table.
SEAM = (
    SeamRow(
        "shared_scoring",
        "shared-prefix scoring",
        (_SCORING_METHOD, *_HEAD_ARGUMENTS),
        _scoring_problem,
        "TRL's own forward scores every row (the shared prefix off; the run plans again)",
    ),
    SeamRow(
        "shared_sampling",
        "shared-prefix sampling",
        (_SAMPLING_METHOD, *_SWITCHES, *_TOKENIZER),
        _sampling_problem,
        "TRL's own `_generate_single_turn` samples every prompt",
    ),
    SeamRow(
        "stop_strings",
        "stop strings",
        (_SAMPLING_METHOD, *_SWITCHES, *_STOP),
        _stop_strings_problem,
        "no stop strings: completions end at EOS or `max_completion_length`",
    ),
    SeamRow(
        "update_monitor",
        "update monitor",
        tuple(_METRICS),
        lambda trainer, trl_class: _attribute_problem(trainer, _METRICS),
        "no update monitor: its metrics are not logged",
    ),
    SeamRow(
        "skip_zero_advantage",
        "zero-advantage skip",
        (_LOSS[0],),
        lambda trainer, trl_class: _source_problem(trl_class, _LOSS[0], digest=_LOSS[1]),
        "TRL's own `_compute_loss` trains every row",
    ),
)


def seam_problems(trainer: Any, trl_class: type | None = None) -> dict[Feature, str]:
    """Feature -> what differs from the TRL code it relies on (its :data:`SEAM` row's check), for a ``GRPOTrainer``
    built by TRL's ``__init__``.

    Args:
        trainer: the trainer (its attributes and model are read).
        trl_class: the class whose private methods the overrides call. Default: ``trl.GRPOTrainer``.
    """
    if trl_class is None:
        from trl import GRPOTrainer as trl_class  # heavy: TRL
    found = {row.feature: row.check(trainer, trl_class) for row in SEAM}
    return {feature: why for feature, why in found.items() if why}


def seam_warning(problems: dict[Feature, str], version: str) -> str:
    """The one warning for a trainer whose TRL differs: the version, each feature turned off and why.

    >>> print(seam_warning({"stop_strings": "x changed"}, "9.0.0").split(": ", 1)[1].split(". ")[0])
    TRL 9.0.0 differs from the code grpo-lite was tested with (TRL 1.16.0): stop strings off (x changed)
    """
    off = "; ".join(row.message(problems[row.feature]) for row in SEAM if row.feature in problems)
    return (
        f"grpo-lite: TRL {version} differs from the code grpo-lite was tested with (TRL "
        f"{', '.join(TESTED_TRL)}): {off}. TRL's own code runs instead; docs/troubleshooting.md says how "
        "to check a TRL release"
    )


# The private methods of TRL's GRPOTrainer that LiteGRPOTrainer overrides (the first table's rows); the only private
# names of a dependency another module may name: its ``def`` and its ``super()`` call.
OVERRIDES = ("_compute_loss", "_get_per_token_logps_and_entropies", "_generate_single_turn")


# ---- the private names other modules read ----------------------------------------------------------------
def trainer_tokenizer(trainer: Any) -> Any:
    """TRL's ``GRPOTrainer._tokenizer`` (the seam checks it before a feature that reads it is on)."""
    return trainer._tokenizer


def train_metrics(trainer: Any) -> Any:
    """TRL's ``GRPOTrainer._metrics["train"]``: the lists TRL averages at each log (checked by the seam)."""
    return trainer._metrics["train"]


def entropy_bonus_enabled(trainer: Any) -> bool:
    """TRL's ``GRPOTrainer._entropy_bonus_enabled`` (True when the trainer has none: the skip then stays off)."""
    return bool(getattr(trainer, "_entropy_bonus_enabled", True))


def attn_implementation(config: Any) -> str | None:
    """transformers' ``config._attn_implementation`` (None: the config has none, so no attention list holds it)."""
    return getattr(config, "_attn_implementation", None)


def patched_lm(model: Any) -> Any:
    """The causal LM TRL gave a fused LM head: unwrapped from DDP/DeepSpeed/compile and from PEFT."""
    from accelerate.utils import extract_model_from_parallel, is_peft_model  # heavy: accelerate

    model = extract_model_from_parallel(model)
    return model.get_base_model() if is_peft_model(model) else model
