"""Where one decoder block's bytes per token come from: traced from the model's own code, or the Llama formulas.

:data:`DEFAULT_BLOCKS` is the one choice for every caller (``plan()``, ``estimate()``, ``train()``, the CLI, the
recipe's costs); the tracer loads torch only when a block is traced (docs/internals.md).

>>> terms = BlockTerms(saved=(100.0, 2.0, 4096.0), backward=((300.0, 4.0, 0.0), (200.0, 0.0, 2**20)), how="example")
>>> terms.saved_at(512, tokens=1024), terms.backward_at(512, tokens=1024), terms.backward_at(64, tokens=64)
(1128.0, 2348.0, 16584.0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, get_args

from grpo_lite.memory.meta.block import BlockTerms, traced_block_terms
from grpo_lite.settings import check

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.architectures import Architecture
    from grpo_lite.memory.step_settings import StepSettings


BlockMode = Literal["auto", "traced", "formulas"]
BLOCK_MODES: tuple[str, ...] = get_args(BlockMode)
DEFAULT_BLOCKS: BlockMode = "auto"  # plan(), estimate(), train(), the CLI and the recipe's costs: one default


# (shapes, resolved settings) -> the block's terms, or None where it cannot trace (then the formulas hold)
BlockSource = Callable[["Architecture", "StepSettings"], "BlockTerms | None"]


def block_source(mode: BlockMode = DEFAULT_BLOCKS) -> BlockSource | None:
    """Where a plan's per-block bytes come from.

    Args:
        mode: ``"traced"``: every model's own layers, traced; ``"formulas"``: the Llama formulas for every model;
            ``"auto"``: the formulas for the Llama and Qwen2 blocks they were checked for, traced for every other
            architecture and for float32 weights under 16-bit autocast.

    Returns:
        The source, or None for the formulas.

    Raises:
        ConfigError: an unknown mode.
    """
    check("blocks", mode, BLOCK_MODES)
    if mode == "formulas":
        return None
    if mode == "traced":
        return traced_block_terms
    return _unless_llama


def _unless_llama(arch: Architecture, s: StepSettings) -> BlockTerms | None:
    """The ``"auto"`` source (see :func:`block_source`): under 16-bit autocast, float32 weights keep a float32
    residual stream the formulas plan at 2 bytes."""
    mixed = s.dtype == "float32" and (s.bf16 or s.fp16)
    if (arch.family in ("llama", "qwen2") or arch.model_type in ("llama", "qwen2")) and not mixed:
        return None
    return traced_block_terms(arch, s)
