"""Where the shared-prefix packing cannot serve a model: one rule for the trainer (the loaded model's config, the
batch's width) and the planner (the row's config, the longest sequence), so a plan packs only where training will.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_lite.memory.models import transformers_config

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.architectures import Architecture
    from grpo_lite.memory.step_settings import StepSettings


SLIDING_WINDOW = "sliding-window attention"


def sliding_window_reason(config: Any, sequence_length: int) -> str | None:
    """Why the packed block mask would be wrong for this config, or None: a layer of another kind than
    ``full_attention`` masks by its own rule, and a window with no layer kinds slides over every layer once the
    sequence is longer.

    >>> from types import SimpleNamespace as C
    >>> sliding_window_reason(C(layer_types=["sliding_attention", "full_attention"], sliding_window=512), 64)
    'sliding-window attention'
    >>> sliding_window_reason(C(layer_types=None, sliding_window=4096), 1024) is None
    True
    """
    layer_types = getattr(config, "layer_types", None) or ()
    window = getattr(config, "sliding_window", None)
    if any(t != "full_attention" for t in layer_types) or (
        not layer_types and window is not None and sequence_length > window
    ):
        return SLIDING_WINDOW
    return None


def planned_off_reason(arch: Architecture, s: StepSettings) -> str | None:
    """Why training will turn the shared prefix off for this model and these settings, or None (also when it is off):
    :func:`sliding_window_reason` at the longest sequence, for a row with a sliding window (it imports transformers).
    """
    if not s.shared_prefix or not arch.config_values.get("sliding_window"):
        return None
    return sliding_window_reason(transformers_config(arch), s.max_prompt_length + s.max_completion_length)
