"""``update/realized``: the share of the optimizer's intended update that the weights actually received.

:class:`UpdateMonitor` replays each step on fp32 shadows of a few sampled parameters (a clone of their optimizer,
synced to its live state). Not for parameters sharded by FSDP / ZeRO-3. The design and its cost: docs/internals.md.
"""

from __future__ import annotations

import copy
import logging
import math
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from transformers import TrainerCallback

from grpo_lite.errors import spelled
from grpo_lite.memory.optimizers import MONITOR_ELEMENTS, MONITOR_TENSORS
from grpo_lite.precision.rounding import BNB_BLOCK, inner_optimizers, is_elementwise, state_nbytes, unwrap

logger = logging.getLogger(__name__)


class UpdatesLostWarning(UserWarning):
    """The weights received less than half of the optimizer's intended update."""


LOST_UPDATES_HINT = (
    "set update_rounding='stochastic' (train(..., update_rounding=...), --set update_rounding="
    "stochastic), load float32 weights (dtype='float32'), or raise the learning rate"
)

MetricsSink = Callable[[dict[str, float]], None]


@dataclass
class _Probe:
    """One sampled parameter, its shadow and the window sums for its sampled elements."""

    name: str
    param: Tensor
    owner: torch.optim.Optimizer  # the optimizer that steps ``param`` (per-parameter one when layer-wise)
    group: dict[str, Any]  # its live param group (the LR scheduler edits it in place)
    index: Tensor  # flat indices of the sampled elements
    elementwise: bool
    shadow: Tensor = field(init=False)
    optimizer: torch.optim.Optimizer | None = None  # the shadow's optimizer
    before: Tensor | None = None
    grad: Tensor | None = None
    hparams: dict[str, Any] | None = None
    applied: Tensor = field(init=False)
    intended: Tensor = field(init=False)
    step_norm_sum: float | Tensor = 0.0  # Σ |intended step| over the window's steps, weights of norm 0 left out
    weight_norm_sum: float | Tensor = 0.0  # Σ |weight before the step| over the same steps
    steps: int = 0
    synced: bool = False  # the shadow's optimizer state has been the live one's (copied, or both empty)
    unmapped: str | None = None  # why the live state could not be copied while the shadow was not synced
    layout_checked: dict[Any, bool] = field(default_factory=dict)  # 8-bit states: dequantizes as bitsandbytes does

    def __post_init__(self) -> None:
        shape = self.index.shape if self.elementwise else self.param.shape
        self.shadow = torch.zeros(shape, dtype=torch.float32, device=self.param.device)
        self.applied = torch.zeros(self.index.shape, dtype=torch.float32, device=self.param.device)
        self.intended = torch.zeros_like(self.applied)

    def exact(self, sampled: bool = False) -> Tensor:
        """The weight as the optimizer holds it (plus any Kahan compensation) in fp32, or only its sampled elements."""
        pick = (lambda t: t.detach().reshape(-1)[self.index]) if sampled else (lambda t: t.detach())
        value = pick(self.param).float()
        comp = compensation(self.owner, self.param)
        return value if comp is None else value + pick(comp).float()

    def take(self, full: Tensor) -> Tensor:
        return full.reshape(-1)[self.index]

    def capture(self, grad: Tensor, hparams: dict[str, Any]) -> None:
        g = (self.take(grad.detach()) if self.elementwise else grad.detach()).float()  # sample, then cast
        self.grad = g.clone() if self.grad is None else self.grad + g
        self.hparams = hparams


class UpdateMonitor(TrainerCallback):
    """Log ``update/realized`` (with its standard error and ``update/relative_step``) at every logging step.

    Args:
        n_tensors: parameter tensors to sample (2-D, trainable, not embeddings, evenly spread through the model).
        n_elements: elements sampled per tensor.
        sink: receives ``{"update/realized", "update/realized_stderr", "update/relative_step"}`` when the Trainer logs
            (grpo-lite's trainer adds them to the step's metrics). Default: ``self.history.append``.
        seed: sampling seed.
        warn_below: warn once (:class:`UpdatesLostWarning`) when a window's share is below this. Default: 0.5.
    """

    def __init__(
        self,
        n_tensors: int = MONITOR_TENSORS,
        n_elements: int = MONITOR_ELEMENTS,
        sink: MetricsSink | None = None,
        seed: int = 0,
        warn_below: float = 0.5,
    ):
        self.n_tensors, self.n_elements, self.seed, self.warn_below = n_tensors, n_elements, seed, warn_below
        self.warned = False
        self._noted = False  # the log said once that a state could not be mapped
        self._unreliable = False  # this window replayed a probe whose shadow state is not the live one's
        self.history: list[dict[str, float]] = []
        self.sink: MetricsSink = sink or self.history.append
        self.probes: list[_Probe] = []
        self._hooks: list[Any] = []
        self._layerwise = False

    def setup(self, model: nn.Module, optimizer: Any) -> None:
        """Pick the tensors and build their shadows (called by ``on_train_begin``; callable directly)."""
        self.close()
        self._unreliable = False
        self._layerwise = hasattr(unwrap(optimizer), "optimizer_dict")
        gen = torch.Generator().manual_seed(self.seed)
        for name, p in self._choose(model, optimizer):
            inner, group = owner(optimizer, p)
            index = sample(p.numel(), self.n_elements, gen).to(p.device)
            probe = _Probe(name, p, inner, group, index, is_elementwise(inner, group))
            probe.optimizer = clone_optimizer(inner, p, probe.shadow)
            self.probes.append(probe)
            if self._layerwise:  # the step runs inside backward; catch the gradient on its way in
                self._hooks.append(
                    p.register_hook(lambda grad, probe=probe: probe.capture(grad, hyperparameters(probe.group)))
                )

    def _choose(self, model: nn.Module, optimizer: Any) -> list[tuple[str, Tensor]]:
        """2-D trainable tensors, embeddings excluded (sparse rows; bitsandbytes keeps them 32-bit)."""
        embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        eligible = [
            (n, p) for n, p in model.named_parameters() if p.requires_grad and p.ndim == 2 and id(p) not in embeddings
        ]
        if not eligible:
            return []
        mixing = [(n, p) for n, p in eligible if not is_elementwise(*owner(optimizer, p))]
        if mixing:  # whole-tensor shadows: take the smallest targets, spread over depth
            smallest = min(p.numel() for _, p in mixing)
            eligible = [(n, p) for n, p in mixing if p.numel() == smallest] or mixing
        step = max(1, len(eligible) // self.n_tensors)
        return eligible[step // 2 :: step][: self.n_tensors]

    def nbytes(self) -> int:
        """Memory the monitor holds: shadows, their optimizer state, captured gradients, window sums."""
        total = 0
        for probe in self.probes:
            tensors = [probe.shadow, probe.applied, probe.intended, probe.index, probe.before, probe.grad]
            total += sum(t.numel() * t.element_size() for t in tensors if t is not None)
            total += state_nbytes(probe.optimizer) if probe.optimizer is not None else 0
        return total

    def close(self) -> None:
        for handle in self._hooks:
            handle.remove()
        self._hooks, self.probes = [], []

    def on_train_begin(
        self, args: Any, state: Any, control: Any, model: nn.Module | None = None, optimizer: Any = None, **kwargs: Any
    ) -> None:
        if model is not None and optimizer is not None:
            self.setup(model, optimizer)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.begin_step()

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not self._layerwise:
            self.capture_grads()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.end_step()
        if control.should_log:
            self.sink(self.flush())

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.close()

    def begin_step(self) -> None:
        """Before forward/backward: remember the sampled weights and re-sync the shadows to them."""
        for probe in self.probes:
            probe.before = probe.exact(sampled=True)
            probe.shadow.copy_(probe.before if probe.elementwise else probe.exact())
            self._sync_state(probe)
            probe.grad = None

    def _sync_state(self, probe: _Probe) -> None:
        """The shadow optimizer's state := the live optimizer's state for ``probe.param`` (before its step)."""
        if probe.optimizer is None:
            return
        live = probe.owner.state.get(probe.param) or {}
        try:
            mapped = shadow_state(live, probe)
        except UnmappableState as why:
            if not probe.synced:  # the shadow's own state did not start from the live one's: not its step
                probe.unmapped = str(why)
                self._note(probe)
            return  # synced before: the shadow's state followed the live one's from there
        refill(probe.optimizer.state[probe.shadow], mapped)
        probe.synced, probe.unmapped = True, None

    def _note(self, probe: _Probe) -> None:
        if not self._noted:
            self._noted = True
            logger.warning(
                "grpo-lite: the update monitor cannot replay %s from its state (%s); update/realized is not the live "
                "step's share for %s and raises no UpdatesLostWarning",
                type(probe.owner).__name__,
                probe.unmapped,
                probe.name,
            )

    def capture_grads(self) -> None:
        """After clipping, before the step (non-layer-wise optimizers)."""
        for probe in self.probes:
            if probe.param.grad is not None:
                probe.grad = None
                probe.capture(probe.param.grad, hyperparameters(probe.group))

    def end_step(self) -> None:
        """After the step: replay it on the shadows and add both displacements to the window."""
        for probe in self.probes:
            if probe.before is None or probe.grad is None or probe.optimizer is None:
                continue
            applied = probe.exact(sampled=True) - probe.before
            shadow = self._replay(probe)
            intended = (shadow if probe.elementwise else probe.take(shadow)) - probe.before
            probe.applied += applied
            probe.intended += intended
            self._unreliable = self._unreliable or probe.unmapped is not None
            # a tensor until the window is logged: no device sync per step (and a step on meta tensors runs)
            # a weight still at zero (LoRA's B at the start) has no relative step: it is left out of both sums
            weight_norm = probe.before.norm()
            step_norm = torch.where(weight_norm > 0, intended.norm(), torch.zeros_like(weight_norm))
            probe.step_norm_sum = probe.step_norm_sum + step_norm
            probe.weight_norm_sum = probe.weight_norm_sum + weight_norm
            probe.steps += 1
            probe.before, probe.grad = None, None

    @staticmethod
    def _replay(probe: _Probe) -> Tensor:
        shadow_group = probe.optimizer.param_groups[0]
        for key, value in (probe.hparams or {}).items():
            if isinstance(shadow_group.get(key), Tensor) and isinstance(value, Tensor):
                shadow_group[key].copy_(value)
            else:
                shadow_group[key] = value
        probe.shadow.grad = probe.grad.to(probe.shadow.device)
        probe.optimizer.step()
        probe.shadow.grad = None
        return probe.shadow.detach()

    def flush(self) -> dict[str, float]:
        """The window's metrics; starts a new window."""
        metrics = _window_metrics(self.probes)
        if not self._unreliable:
            self._maybe_warn(metrics)
        self._unreliable = False
        for probe in self.probes:
            probe.applied.zero_()
            probe.intended.zero_()
            probe.step_norm_sum, probe.weight_norm_sum, probe.steps = 0.0, 0.0, 0
        return metrics

    def _maybe_warn(self, metrics: dict[str, float]) -> None:
        share, stderr = metrics["update/realized"], metrics["update/realized_stderr"]
        if self.warned or not share < self.warn_below or not stderr < (self.warn_below - share) / 2:
            return
        self.warned = True
        names = sorted({type(p.owner).__name__ for p in self.probes})
        warnings.warn(
            spelled(
                f"update/realized = {share:.2f}: the weights received only {share:.0%} of the update "
                f"{'/'.join(names)} intended (bf16 rounds small steps away); {LOST_UPDATES_HINT}"
            ),
            UpdatesLostWarning,
            stacklevel=2,
        )


def _window_metrics(probes: list[_Probe]) -> dict[str, float]:
    """Least-squares share ``s`` in ``applied ≈ s · intended``, and its standard error from the residuals
    (stochastic rounding's noise is independent per element: ``var(s) = Σ I² var(e) / (Σ I²)²``)."""
    nan = math.nan
    steps = sum(p.steps for p in probes)
    if not probes or not steps:
        return {"update/realized": nan, "update/realized_stderr": nan, "update/relative_step": nan}
    applied = torch.cat([p.applied for p in probes]).double()
    intended = torch.cat([p.intended for p in probes]).double()
    denom = float(intended.square().sum())
    share = float((applied * intended).sum()) / denom if denom > 0 else nan
    residual = applied - share * intended
    stderr = float((intended.square() * residual.square()).sum().sqrt()) / denom if denom > 0 else nan
    weight_norms = sum(float(p.weight_norm_sum) for p in probes)
    return {
        "update/realized": share,
        "update/realized_stderr": stderr,
        "update/relative_step": sum(float(p.step_norm_sum) for p in probes) / weight_norms if weight_norms > 0 else nan,
    }


# ---- the replay's plumbing: a parameter's optimizer, a clone of it over an fp32 shadow, the live state mapped onto it
KAHAN_KEYS = ("kahan_comp",)  # torch-optimi's Kahan summation buffer
CODEBOOK_KEYS = ("qmap", "absmax")  # bitsandbytes' 8-bit state: codebook and block scales (used to dequantize)


class UnmappableState(Exception):
    """The live optimizer's state holds an entry the monitor cannot copy onto the shadow."""


def owner(optimizer: Any, p: Tensor) -> tuple[torch.optim.Optimizer, dict[str, Any]]:
    """The optimizer that steps ``p`` (the per-parameter one when layer-wise) and its param group."""
    for inner in inner_optimizers(optimizer):
        for group in inner.param_groups:
            if any(q is p for q in group["params"]):
                return inner, group
    raise LookupError("parameter not found in the optimizer")


def hyperparameters(group: dict[str, Any]) -> dict[str, Any]:
    """The group minus its params, tensors cloned (torchao keeps lr as a tensor the scheduler fills in place)."""
    return {k: (v.clone() if isinstance(v, Tensor) else v) for k, v in group.items() if k != "params"}


def compensation(inner: torch.optim.Optimizer, p: Tensor) -> Tensor | None:
    """The Kahan compensation buffer the optimizer keeps for ``p``, if any."""
    state = inner.state.get(p, {})
    for key in KAHAN_KEYS:
        comp = state.get(key)
        if isinstance(comp, Tensor) and comp.shape == p.shape:
            return comp
    return None


def sample(numel: int, n: int, gen: torch.Generator) -> Tensor:
    """Exactly ``n`` flat indices (the monitor's memory known in advance): every element, repeated when the tensor is
    smaller; distinct ones up to 2**24 elements; uniform draws above (no numel-sized permutation)."""
    if numel <= n:
        return torch.arange(n) % numel
    if numel <= 1 << 24:
        return torch.randperm(numel, generator=gen)[:n].sort().values
    return torch.randint(0, numel, (n,), generator=gen).sort().values


def clone_optimizer(inner: torch.optim.Optimizer, p: Tensor, shadow: Tensor) -> torch.optim.Optimizer:
    """Same class and attributes as ``inner`` (``__init__`` bypassed), over ``shadow`` only, with empty state; the
    live optimizer's ``step`` patches and hooks are not copied. A bitsandbytes clone keeps 32-bit state."""
    _, group = owner(inner, p)
    clone = object.__new__(type(inner))
    clone.__dict__.update(inner.__dict__)
    clone.__dict__.pop("step", None)
    for key, value in inner.__dict__.items():
        if key.startswith("_optimizer_") and isinstance(value, OrderedDict):
            setattr(clone, key, OrderedDict())
    clone.state = defaultdict(dict)
    clone.param_groups = [{**hyperparameters(group), "params": [shadow]}]
    if hasattr(clone, "mng"):  # bitsandbytes: a private override manager (the global one is keyed by index)
        from bitsandbytes.optim import GlobalOptimManager  # heavy: bitsandbytes

        manager = object.__new__(GlobalOptimManager)
        manager.initialize()
        clone.mng, clone.initialized = manager, False
        args = getattr(inner, "args", None)
        if args is not None:
            live_8bit = getattr(args, "optim_bits", 32) == 8 and p.numel() >= getattr(args, "min_8bit_size", 0)
            clone.args = copy.copy(args)
            clone.args.optim_bits = 32
            if live_8bit:  # bitsandbytes' blockwise 8-bit update ignores max_unorm: so does the 32-bit replay
                clone.args.max_unorm = 0.0
    return clone


def shadow_state(live: dict[str, Any], probe: _Probe) -> dict[str, Any]:
    """The live optimizer's state for ``probe.param``, mapped onto its fp32 shadow (only :func:`refill` may store
    it: whole tensors and objects are the live ones).

    Element-wise probes gather per-element tensors at the sampled elements; bitsandbytes' 8-bit tensors are
    dequantized; per-tensor entries and plain values pass; objects (GaLore's projector) pass for mixing optimizers
    only; Kahan buffers are left out (the shadow's weight includes them).

    Raises:
        UnmappableState: an entry that is none of these (said why).
    """
    n = probe.param.numel()
    out: dict[str, Any] = {}
    for key, value in live.items():
        if isinstance(key, str) and (key in KAHAN_KEYS or key.startswith(CODEBOOK_KEYS)):
            continue
        if value is None or isinstance(value, (bool, int, float, str)):
            out[key] = value
        elif type(value) in (Tensor, nn.Parameter):
            out[key] = _state_tensor(key, value.detach(), live, probe, n)
        elif not probe.elementwise:
            out[key] = value
        else:
            raise UnmappableState(f"{key!r} is a {type(value).__name__}")
    return out


def refill(state: dict[str, Any], mapped: dict[str, Any]) -> None:
    """Make the shadow's ``state`` equal to ``mapped``, floating tensors in fp32, copied into the tensors it already
    holds where they fit (no allocation per step); objects refilled attribute by attribute."""
    for key in [k for k in state if k not in mapped]:
        del state[key]
    for key, value in mapped.items():
        old = state.get(key)
        if isinstance(value, Tensor):
            dtype = torch.float32 if value.is_floating_point() else value.dtype
            if isinstance(old, Tensor) and (old.shape, old.dtype, old.device) == (value.shape, dtype, value.device):
                old.copy_(value)
            else:
                state[key] = value.to(dtype, copy=True)
        elif _is_object(value) and type(old) is type(value):
            refill(vars(old), vars(value))
        else:
            state[key] = _fp32_copy(value)


def _is_object(value: Any) -> bool:
    return hasattr(value, "__dict__") and not isinstance(value, (type, Tensor))


def _state_tensor(key: Any, value: Tensor, live: dict[str, Any], probe: _Probe, n: int) -> Tensor:
    if value.dtype == torch.uint8:
        return _dequantize(key, value, live, probe)
    if not probe.elementwise or value.numel() == 1 and n > 1:  # whole, or per tensor (torch's step count)
        return value
    if value.numel() == n and value.is_floating_point():
        return probe.take(value)  # an index gather: a copy
    raise UnmappableState(f"{key!r} holds {value.numel()} {value.dtype} values for a {n}-element parameter")


def _dequantize(key: Any, codes: Tensor, live: dict[str, Any], probe: _Probe) -> Tensor:
    """A bitsandbytes blockwise 8-bit state (``state<k>``, codebook ``qmap<k>``, one ``absmax<k>`` per
    :data:`BNB_BLOCK` elements) in fp32, whole or at the sampled elements (checked once against bitsandbytes')."""
    from bitsandbytes.functional import dequantize_blockwise  # heavy: bitsandbytes

    suffix = str(key).removeprefix("state")
    qmap, absmax = live.get(f"qmap{suffix}"), live.get(f"absmax{suffix}")
    m = codes.numel()
    if (
        not isinstance(qmap, Tensor)
        or not isinstance(absmax, Tensor)
        or absmax.numel() != -(-m // BNB_BLOCK)
        or (probe.elementwise and m != probe.param.numel())
    ):
        raise UnmappableState(
            f"{key!r} is 8-bit but not bitsandbytes' blockwise layout (codebook, one scale per {BNB_BLOCK} elements)"
        )
    if not probe.elementwise:
        return dequantize_blockwise(codes, absmax=absmax, code=qmap, blocksize=BNB_BLOCK)
    flat, scales = codes.reshape(-1), absmax.reshape(-1)
    if key not in probe.layout_checked and codes.device.type != "meta":  # one device sync, on the first step
        head = flat[:BNB_BLOCK]
        theirs = dequantize_blockwise(head, absmax=scales[:1], code=qmap, blocksize=BNB_BLOCK).float()
        probe.layout_checked[key] = torch.allclose(qmap[head.long()] * scales[0], theirs, rtol=1e-6, atol=0.0)
    if not probe.layout_checked.get(key, True):
        raise UnmappableState(f"{key!r} does not dequantize as qmap[code] * absmax[block]")
    return qmap[flat[probe.index].long()] * scales[probe.index // BNB_BLOCK]


def _fp32_copy(value: Any) -> Any:
    """A copy of a state value (GaLore's projector, a list of matrices) with its floating tensors in fp32."""
    if isinstance(value, Tensor):
        return value.to(torch.float32 if value.is_floating_point() else value.dtype, copy=True)
    if isinstance(value, (list, tuple)):
        return type(value)(_fp32_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: _fp32_copy(v) for k, v in value.items()}
    if _is_object(value):
        dup = copy.copy(value)
        for name, attribute in vars(value).items():
            setattr(dup, name, _fp32_copy(attribute))
        return dup
    return copy.deepcopy(value)
