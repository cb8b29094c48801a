"""What :class:`~grpo_lite.training.step.grpo_trainer.LiteGRPOTrainer` needs of TRL's private code, checked when it is built.

Each feature of LiteGRPOTrainer relies on a part of TRL's private code, checked against the code grpo-lite was
written for (TRL :data:`TESTED_TRL`; the table of what each relies on: docs/internals.md).
:func:`seam_problems` names what differs, per feature; the trainer turns such a feature off and runs TRL's own
code in its place, with one warning naming the TRL version, and a shared prefix turned off so is planned again.

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
from typing import Any, Literal

# The TRL releases the trainer, shared-prefix and stop-string tests passed with (pyproject.toml's bound).
# 1.13.0 and 1.14.0 differ at the seam (the trainer warns and runs TRL's code); 1.15.0 has the same seam but its
# fused LM head needs Triton, so no training step runs on a CPU-only torch and it was not tested further.
TESTED_TRL = ("1.16.0",)
Feature = Literal["shared_scoring", "shared_sampling", "stop_strings", "update_monitor", "skip_zero_advantage"]
FEATURES: dict[Feature, str] = {  # the words of the warning, in the order the trainer checks them
    "shared_scoring": "shared-prefix scoring",
    "shared_sampling": "shared-prefix sampling",
    "stop_strings": "stop strings",
    "update_monitor": "update monitor metrics",
    "skip_zero_advantage": "zero-advantage skip",
}

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
    missing = [p for p in ("fused_lm_head", "shift_labels") if p not in params]
    return f"the fused LM head takes no {', '.join(missing)}" if missing else None


def seam_problems(trainer: Any, trl_class: type | None = None) -> dict[Feature, str]:
    """Feature -> what differs from the TRL code it relies on, for a ``GRPOTrainer`` built by TRL's ``__init__``.

    Args:
        trainer: the trainer (its attributes and model are read).
        trl_class: the class whose private methods the overrides call. Default: ``trl.GRPOTrainer``.
    """
    if trl_class is None:
        from trl import GRPOTrainer as trl_class  # heavy: TRL
    scoring, sampling = "_get_per_token_logps_and_entropies", "_generate_single_turn"
    is_bool = lambda v: isinstance(v, bool)  # noqa: E731
    switches = _attribute_problem(trainer, {"use_vllm": is_bool, "use_transformers_continuous_batching": is_bool})
    # TRL calls the overrides whatever it samples with; what they change applies to transformers' generate only
    local = switches is None and not (trainer.use_vllm or trainer.use_transformers_continuous_batching)
    generate = (
        _signature_problem(trl_class, sampling, _SAMPLING, rest_none=False)
        or switches
        or (local and _source_problem(trl_class, sampling, (_LEFT_PAD, _GENERATE_CALL)))
    )
    tokenizer = {"_tokenizer": lambda t: hasattr(t, "pad_token_id")}
    found: dict[Feature, str | None] = {
        "shared_scoring": _signature_problem(trl_class, scoring, _SCORING, rest_none=True)
        or _fused_head_problem(trainer),
        "shared_sampling": generate
        or (local and (_source_problem(trl_class, sampling, _SLICE) or _attribute_problem(trainer, tokenizer))),
        "stop_strings": generate
        or (
            local
            and (
                _source_problem(trl_class, sampling, (_EOS_CUT,))
                or _attribute_problem(
                    trainer,
                    {
                        **tokenizer,
                        "generation_config": lambda c: c is not None,
                        "eos_token_ids": lambda ids: (
                            isinstance(ids, (list, tuple)) and all(isinstance(i, int) for i in ids)
                        ),
                    },
                )
            )
        ),
        "update_monitor": _attribute_problem(
            trainer, {"_metrics": lambda m: isinstance(m, dict) and hasattr(m.get("train"), "__getitem__")}
        ),
        "skip_zero_advantage": _source_problem(trl_class, _LOSS[0], digest=_LOSS[1]),
    }
    return {feature: problem for feature, problem in found.items() if problem}


def seam_warning(problems: dict[Feature, str], version: str) -> str:
    """The one warning for a trainer whose TRL differs: the version, each feature turned off and why.

    >>> print(seam_warning({"stop_strings": "x changed"}, "9.0.0").split(": ", 1)[1].split(". ")[0])
    TRL 9.0.0 differs from the code grpo-lite was tested with (TRL 1.16.0): stop strings off (x changed)
    """
    off = "; ".join(f"{FEATURES[feature]} off ({why})" for feature, why in problems.items())
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
