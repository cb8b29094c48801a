"""The preset ladder: the rungs from best quality and speed to most frugal, each with its trade-off. Pure data.

>>> [p.name for p in LADDER]
['full', 'full-8bit', 'full-8bit-ckpt', 'galore', 'lora', 'qlora']
>>> get_preset("qlora").method
'qlora'
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_lite.defaults import LORA, PER_METHOD, learning_rate
from grpo_lite.errors import ConfigError
from grpo_lite.memory.optimizers import GaloreArgs
from grpo_lite.memory.step_settings import Quantization
from grpo_lite.settings import Method


@dataclass(frozen=True)
class Preset:
    """One rung of the ladder.

    Attributes:
        name: stable id used on the CLI.
        method: full, galore, lora or qlora.
        summary: the one-line trade-off.
        optim: optimizer on CUDA; cpu_optim: on CPU; multi_optim: with several processes (or None).
        gradient_checkpointing: recompute blocks in backward.
        quantization: how the frozen base is loaded (qlora: nf4).
        learning_rate: Default: the method's (``grpo_lite.defaults.PER_METHOD``).
        lora_r: LoRA rank (PEFT rungs). Default: ``grpo_lite.defaults.LORA.r``.
        requires: installed packages the rung needs (fields of hardware.Extras).
        galore_args: GaLore ``optim_args`` (galore rung).
    """

    name: str
    method: Method
    summary: str
    optim: str
    cpu_optim: str
    gradient_checkpointing: bool
    quantization: Quantization = "none"
    learning_rate: float = None  # type: ignore[assignment]  # Default: the method's, filled in __post_init__
    lora_r: int = None  # type: ignore[assignment]  # Default: LORA.r, filled in __post_init__
    requires: tuple[str, ...] = ()
    multi_optim: str | None = None
    galore_args: str | None = None

    def __post_init__(self) -> None:
        if self.learning_rate is None:
            object.__setattr__(self, "learning_rate", learning_rate(self.method))
        if self.lora_r is None:
            object.__setattr__(self, "lora_r", LORA.r)


LADDER: tuple[Preset, ...] = (
    Preset(
        "full",
        "full",
        "bf16 weights stepped in fp32 and rounded back stochastically (fp32 AdamW states), "
        "no recompute: best quality and speed (12 bytes/param + activations)",
        PER_METHOD["full"].optim,
        PER_METHOD["full"].cpu_optim,
        False,
    ),
    Preset(
        "full-8bit",
        "full",
        "8-bit AdamW states: 2 bytes/param instead of 8, same quality in practice; updates land by stochastic rounding",
        "adamw_8bit",
        "adamw_8bit",
        False,
        requires=("bitsandbytes",),
    ),
    Preset(
        "full-8bit-ckpt",
        "full",
        "+ gradient checkpointing: keeps one tensor per block and recomputes the rest in backward (~20-30% slower)",
        "adamw_8bit",
        "adamw_8bit",
        True,
        requires=("bitsandbytes",),
    ),
    Preset(
        "galore",
        "galore",
        "full-parameter, GaLore rank-128 8-bit states updated block by block inside "
        "backward: no gradient buffer (the GaLore paper's layer-wise 8-bit setting)",
        PER_METHOD["galore"].optim,
        PER_METHOD["galore"].cpu_optim,
        True,
        requires=("galore_torch",),
        multi_optim="galore_adamw_8bit",
        galore_args=GaloreArgs().to_optim_args(),
    ),
    Preset(
        "lora",
        "lora",
        f"frozen bf16 base + rank-{LORA.r} LoRA on every linear: tiny optimizer state, adapter-only updates",
        PER_METHOD["lora"].optim,
        PER_METHOD["lora"].cpu_optim,
        True,
    ),
    Preset(
        "qlora",
        "qlora",
        f"4-bit NF4 base (double quant) + rank-{LORA.r} LoRA, paged 8-bit AdamW: ~0.52 bytes per linear weight",
        PER_METHOD["qlora"].optim,
        PER_METHOD["qlora"].cpu_optim,
        True,
        quantization="nf4",
        requires=("bitsandbytes",),
    ),
)


def get_preset(name: str) -> Preset:
    """Look a rung up by name.

    Raises:
        ConfigError: unknown name; the message lists the rungs.

    >>> get_preset("qlora").method
    'qlora'
    >>> get_preset("tiny")
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: unknown preset 'tiny'; choose one of: full, full-8bit, ..., lora, qlora
    """
    for preset in LADDER:
        if preset.name == name:
            return preset
    raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join(p.name for p in LADDER)}")
