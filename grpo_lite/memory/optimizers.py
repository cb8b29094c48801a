"""The optimizers the memory model knows, keyed by their ``TrainingArguments.optim`` name, and their state's bytes.

>>> get_optimizer("adamw_8bit").state
'int8'
>>> state_bytes(get_optimizer("adamw_torch"), numel=10_000, param_bytes=2)
40000.0
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Literal

from grpo_lite.errors import ConfigError

StateDtype = Literal["param", "fp32", "int8"]

# bitsandbytes keeps tensors below this many elements in 32-bit state (`min_8bit_size`).
BNB_MIN_8BIT_SIZE = 4096
# bitsandbytes blockwise 8-bit optimizer state: one fp32 absmax per 256 values, per state.
BNB_BLOCK = 256
# Elements rounded back to bf16 at once by grpo_lite.precision.rounding (int32 noise + bf16 result per chunk).
SR_CHUNK = 1 << 22
# The update monitor (grpo_lite.precision.monitor) samples this many tensors, this many elements each.
MONITOR_TENSORS, MONITOR_ELEMENTS = 3, 4096


@dataclass(frozen=True)
class OptimizerSpec:
    """How one optimizer holds its state.

    Attributes:
        name: the ``optim`` string passed to GRPOConfig / TrainingArguments.
        state: dtype of the two Adam moments: like the parameter, fp32, or int8 blockwise (bitsandbytes 8-bit).
        paged: state in CUDA unified memory, evicted to CPU under pressure.
        galore: projects the gradients of the target matrices to rank r.
        layerwise: updates each parameter inside backward (no gradient buffer; one process, no accumulation).
        step_temp: the step allocates one parameter-sized temporary (PyTorch foreach AdamW's sqrt).
        cuda_only: fails without CUDA.
        embedding_32bit: bitsandbytes: transformers keeps every ``nn.Embedding`` weight in 32-bit state.
        summary: one-line trade-off.
    """

    name: str
    state: StateDtype
    paged: bool = False
    galore: bool = False
    layerwise: bool = False
    step_temp: bool = False
    cuda_only: bool = False
    embedding_32bit: bool = False
    summary: str = ""


OPTIMIZERS: tuple[OptimizerSpec, ...] = (
    OptimizerSpec("adamw_torch_fused", "param", summary="PyTorch fused AdamW, states in the weights' dtype"),
    OptimizerSpec(
        "adamw_torch",
        "param",
        step_temp=True,
        summary="PyTorch foreach AdamW: states in the weights' dtype, one weight-sized temporary per step",
    ),
    OptimizerSpec(
        "adamw_8bit",
        "int8",
        embedding_32bit=True,
        summary="bitsandbytes blockwise 8-bit AdamW: 2 bytes/param of state (embeddings 8)",
    ),
    OptimizerSpec("adamw_bnb_8bit", "int8", embedding_32bit=True, summary="alias of adamw_8bit"),
    OptimizerSpec(
        "paged_adamw_8bit",
        "int8",
        paged=True,
        embedding_32bit=True,
        summary="8-bit AdamW in paged (unified) memory: spills to CPU instead of failing",
    ),
    OptimizerSpec(
        "paged_adamw_32bit", "fp32", paged=True, embedding_32bit=True, summary="fp32 AdamW states in paged memory"
    ),
    OptimizerSpec("galore_adamw", "param", galore=True, summary="GaLore AdamW: rank-r states for target matrices"),
    OptimizerSpec(
        "galore_adamw_layerwise",
        "param",
        galore=True,
        layerwise=True,
        summary="GaLore AdamW updated per layer inside backward: no gradient buffer",
    ),
    OptimizerSpec(
        "galore_adamw_8bit",
        "int8",
        galore=True,
        cuda_only=True,
        summary="GaLore with 8-bit states (GPU only: galore_torch calls torch.cuda.synchronize)",
    ),
    OptimizerSpec(
        "galore_adamw_8bit_layerwise",
        "int8",
        galore=True,
        layerwise=True,
        cuda_only=True,
        summary="8-bit GaLore per layer: the GaLore paper's 7B-in-24GB setting (GPU only)",
    ),
)


def get_optimizer(name: str) -> OptimizerSpec:
    """Look an optimizer up by its ``optim`` name.

    Raises:
        ConfigError: unknown name; the message lists the modelled ones.

    >>> get_optimizer("sgd")
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: optim='sgd' is not modelled by the memory planner; use one of: ...
    """
    for spec in OPTIMIZERS:
        if spec.name == name:
            return spec
    names = ", ".join(s.name for s in OPTIMIZERS)
    raise ConfigError(f"optim={name!r} is not modelled by the memory planner; use one of: {names}")


def state_bytes(spec: OptimizerSpec, numel: int, param_bytes: float) -> float:
    """Bytes of Adam state (both moments) for one tensor of ``numel`` elements of ``param_bytes`` each.

    >>> state_bytes(get_optimizer("adamw_8bit"), numel=1_000_000, param_bytes=2)
    2031250.0
    >>> state_bytes(get_optimizer("adamw_8bit"), numel=2048, param_bytes=2)  # small tensors stay 32-bit
    16384.0
    """
    if spec.state == "param":
        return 2.0 * param_bytes * numel
    if spec.state == "fp32" or numel < BNB_MIN_8BIT_SIZE:
        return 8.0 * numel
    return 2.0 * numel + 2.0 * 4.0 * numel / BNB_BLOCK


@dataclass(frozen=True)
class GaloreArgs:
    """The GaLore knobs read from ``optim_args`` (transformers' defaults)."""

    rank: int = 128
    update_proj_gap: int = 200
    scale: float = 0.25
    proj_type: str = "std"

    def to_optim_args(self) -> str:
        """Render as the ``optim_args`` string transformers parses.

        >>> GaloreArgs().to_optim_args()
        'rank=128,update_proj_gap=200,scale=0.25,proj_type=std'
        """
        return f"rank={self.rank},update_proj_gap={self.update_proj_gap},scale={self.scale},proj_type={self.proj_type}"


def parse_galore_args(optim_args: str | None) -> GaloreArgs:
    """Parse ``"rank=64,update_proj_gap=100"`` style strings.

    Raises:
        ConfigError: a piece is not ``key=value`` or a number does not parse.

    >>> parse_galore_args("rank=64").rank
    64
    >>> parse_galore_args(None).rank
    128
    """
    if not optim_args:
        return GaloreArgs()
    values: dict[str, str] = {}
    for piece in optim_args.replace(" ", "").split(","):
        if not piece:
            continue
        if "=" not in piece:
            raise ConfigError(f"optim_args piece {piece!r} is not key=value (e.g. 'rank=128,update_proj_gap=200')")
        key, value = piece.split("=", 1)
        values[key] = value
    default, known = GaloreArgs(), {f.name for f in fields(GaloreArgs)}
    try:  # each value parsed as its default's type (int, float, str); other keys are transformers' own
        return replace(default, **{k: type(getattr(default, k))(v) for k, v in values.items() if k in known})
    except ValueError as exc:
        raise ConfigError(f"optim_args {optim_args!r}: {exc}; e.g. 'rank=128,update_proj_gap=200'") from exc
