"""One decoder block's bytes per token, as the model's own code makes them: what the planner scales by layers.

The formulas of :mod:`grpo_lite.memory.tokens` describe a Llama block. Other decoders keep more (Qwen3's and
OLMo 2's q/k norms, Gemma's extra norms and soft-capping, Phi-3's fused projections) or less. A
:data:`BlockSource` measures a block instead: it builds a few decoder layers of the model's config at full
width on the meta device, runs them forward and backward under the plan's dtype, autocast, LoRA and
checkpointing, and returns :class:`BlockTerms`. The planner scales them by layers and tokens; without a
source (or when a source cannot trace the model) the formulas stay.

The tracer itself (:func:`grpo_lite.simulation.block.traced_block_terms`) reuses the simulation's GPU
semantics, so it lives there; ``grpo-lite plan`` and ``simulate()`` pass it in.

>>> terms = BlockTerms(saved=(100.0, 2.0, 4096.0), backward=(300.0, 4.0, 0.0), how="example")
>>> terms.saved_at(512, tokens=1024), terms.backward_at(512, tokens=1024)
(1128.0, 2348.0)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.architectures import Architecture
    from grpo_lite.memory.settings import StepSettings

__all__ = ["BlockSource", "BlockTerms"]


@dataclass(frozen=True)
class BlockTerms:
    """Bytes of one decoder block: ``a + b x S`` per token for rows of ``S`` tokens (the attention mask's bias grows
    with the keys; everything else is per token), plus ``c`` bytes per block whatever the tokens (casts of the
    weights, small buffers).

    Attributes:
        saved: ``(a, b, c)`` of what one block keeps for backward (its checkpoint only, when checkpointing).
        backward: ``(a, b, c)`` of one block's own high point in its backward, beyond the blocks below it: what
            it still keeps, what it recomputes (checkpointing) and the gradients of its intermediates.
        how: where the numbers come from, for the plan's table.
    """

    saved: tuple[float, float, float]
    backward: tuple[float, float, float]
    how: str

    def saved_at(self, seq: int, *, tokens: int) -> float:
        """Bytes per token one block keeps, for ``tokens`` tokens in rows of ``seq``."""
        a, b, c = self.saved
        return a + b * seq + c / tokens

    def backward_at(self, seq: int, *, tokens: int) -> float:
        """Bytes per token of one block's backward high point, for ``tokens`` tokens in rows of ``seq``."""
        a, b, c = self.backward
        return a + b * seq + c / tokens


# (shapes, resolved settings) -> the block's terms, or None where it cannot trace (then the formulas hold)
BlockSource = Callable[["Architecture", "StepSettings"], "BlockTerms | None"]
