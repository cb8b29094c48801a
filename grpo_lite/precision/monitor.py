"""``update/realized``: the share of the optimizer's intended update that the weights actually received.

Design (optimizer-agnostic "shadow replay"):

* A few parameter tensors are sampled (3 by default). For each, a *shadow* fp32 copy is stepped by a clone of the
  very optimizer that owns the parameter (same class, same param-group hyper-parameters, its own state), fed the
  same gradient. Whatever the optimizer's maths (AdamW, 8-bit states, StableAdamW, GaLore / APOLLO projections), the
  shadow's displacement is what that maths intends when nothing is rounded away.
* Before every step the shadow is re-synced to the live weights (plus any Kahan compensation the optimizer keeps),
  so intended updates never drift from the real trajectory.
* Element-wise optimizers are shadowed on just the sampled elements (4096 per tensor: the smallest size that
  bitsandbytes / torchao still quantize, so the shadow's state is like the real one); optimizers that mix a tensor's
  elements (GaLore / APOLLO projections, Adafactor factoring) are shadowed on the whole tensor, so the sampled
  tensors are then the smallest eligible ones.
* ``update/realized = <Σ applied, Σ intended> / |Σ intended|²`` over the sampled elements, summed since the last log:
  the window averages stochastic-rounding noise out; ``update/realized_stderr`` is its standard error (SR noise
  shrinks as 1/sqrt(window · elements · relative step)). Also logged: ``update/relative_step``, the intended step's
  norm over the weight's (bf16 keeps 8 significant bits: far below ~2**-9 round-to-nearest drops the update).

Cost (``UpdateMonitor.nbytes``; docs/presets.md): element-wise optimizers hold 3 x 4096 fp32 shadow
elements and their state (~0.3 MB); GaLore-like ones hold the smallest eligible tensors whole, in fp32
with their shadow state. The replay is one optimizer step over those shadows.

When a window's share falls below ``warn_below`` (0.5) with a tight enough standard error, one warning
(:class:`UpdatesLostWarning`) says what to change.

Hooks: ``on_step_begin`` (snapshot, before backward: layer-wise optimizers step inside backward),
``on_pre_optimizer_step`` (gradients after clipping; layer-wise: a tensor hook captured them), ``on_step_end``
(replay, accumulate; when ``control.should_log`` hand the window's metrics to ``sink``). Not supported: parameters
sharded by FSDP / DeepSpeed ZeRO-3 (the monitor sees local shards only).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn
from transformers import TrainerCallback

from grpo_lite.memory.optimizers import MONITOR_ELEMENTS, MONITOR_TENSORS
from grpo_lite.precision.rounding import inner_optimizers, is_elementwise, state_nbytes, unwrap

__all__ = ["LOST_UPDATES_HINT", "MetricsSink", "UpdateMonitor", "UpdatesLostWarning"]


class UpdatesLostWarning(UserWarning):
    """The weights received less than half of the optimizer's intended update."""


LOST_UPDATES_HINT = ("set update_rounding='stochastic' (train(..., update_rounding=...), --set update_rounding="
                     "stochastic), load float32 weights (dtype='float32'), or raise the learning rate")

MetricsSink = Callable[[dict[str, float]], None]
# --------------------------------------------------------------------------------------------- one sampled tensor


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
    step_ratio_sum: float | Tensor = 0.0
    steps: int = 0

    def __post_init__(self) -> None:
        shape = self.index.shape if self.elementwise else self.param.shape
        self.shadow = torch.zeros(shape, dtype=torch.float32, device=self.param.device)
        self.applied = torch.zeros(self.index.shape, dtype=torch.float32, device=self.param.device)
        self.intended = torch.zeros_like(self.applied)

    def exact(self, sampled: bool = False) -> Tensor:
        """The weight as the optimizer holds it (plus any Kahan compensation), in fp32; ``sampled``: only
        the sampled elements (no copy of the whole tensor)."""
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
            (``control.should_log``). grpo-lite passes a function that appends to ``GRPOTrainer._metrics["train"]``
            so the values go out with the step's other metrics; default: ``self.history``.
        seed: sampling seed.
        warn_below: warn once (:class:`UpdatesLostWarning`) when a window's share is below this. Default: 0.5.
    """

    def __init__(self, n_tensors: int = MONITOR_TENSORS, n_elements: int = MONITOR_ELEMENTS, sink: MetricsSink | None = None, seed: int = 0,
                 warn_below: float = 0.5):
        self.n_tensors, self.n_elements, self.seed, self.warn_below = n_tensors, n_elements, seed, warn_below
        self.warned = False
        self.history: list[dict[str, float]] = []
        self.sink: MetricsSink = sink or self.history.append
        self.probes: list[_Probe] = []
        self._hooks: list[Any] = []
        self._layerwise = False

    # ----------------------------------------------------------------------------------------- setup

    def setup(self, model: nn.Module, optimizer: Any) -> None:
        """Pick the tensors and build their shadows (called by ``on_train_begin``; callable directly)."""
        self.close()
        self._layerwise = hasattr(unwrap(optimizer), "optimizer_dict")
        gen = torch.Generator().manual_seed(self.seed)
        for name, p in self._choose(model, optimizer):
            inner, group = owner(optimizer, p)
            index = sample(p.numel(), self.n_elements, gen).to(p.device)
            probe = _Probe(name, p, inner, group, index, is_elementwise(inner, group))
            probe.optimizer = clone_optimizer(inner, p, probe.shadow)
            self.probes.append(probe)
            if self._layerwise:  # the step runs inside backward; catch the gradient on its way in
                self._hooks.append(p.register_hook(self._grad_hook(probe)))

    def _choose(self, model: nn.Module, optimizer: Any) -> list[tuple[str, Tensor]]:
        """2-D trainable tensors, embeddings excluded (sparse rows; bitsandbytes keeps them 32-bit)."""
        embeddings = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
        eligible = [(n, p) for n, p in model.named_parameters()
                    if p.requires_grad and p.ndim == 2 and id(p) not in embeddings]
        if not eligible:
            return []
        mixing = [(n, p) for n, p in eligible if not is_elementwise(*owner(optimizer, p))]
        if mixing:  # whole-tensor shadows: take the smallest targets, spread over depth
            smallest = min(p.numel() for _, p in mixing)
            eligible = [(n, p) for n, p in mixing if p.numel() == smallest] or mixing
        step = max(1, len(eligible) // self.n_tensors)
        return eligible[step // 2 :: step][: self.n_tensors]

    @staticmethod
    def _grad_hook(probe: _Probe) -> Callable[[Tensor], None]:
        def hook(grad: Tensor) -> None:
            probe.capture(grad, hyperparameters(probe.group))

        return hook

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

    # ----------------------------------------------------------------------------------------- Trainer events

    def on_train_begin(self, args: Any, state: Any, control: Any, model: nn.Module | None = None,
                       optimizer: Any = None, **kwargs: Any) -> None:
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

    # ----------------------------------------------------------------------------------------- the work

    def begin_step(self) -> None:
        """Before forward/backward: remember the sampled weights and re-sync the shadows to them."""
        for probe in self.probes:
            probe.before = probe.exact(sampled=True)
            probe.shadow.copy_(probe.before if probe.elementwise else probe.exact())
            probe.grad = None

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
            # a tensor until the window is logged: no device sync per step (and a step on meta tensors runs)
            probe.step_ratio_sum = probe.step_ratio_sum + intended.norm() / probe.before.norm().clamp_min(1e-30)
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
        self._maybe_warn(metrics)
        for probe in self.probes:
            probe.applied.zero_()
            probe.intended.zero_()
            probe.step_ratio_sum, probe.steps = 0.0, 0
        return metrics

    def _maybe_warn(self, metrics: dict[str, float]) -> None:
        share, stderr = metrics["update/realized"], metrics["update/realized_stderr"]
        if self.warned or not share < self.warn_below or not stderr < (self.warn_below - share) / 2:
            return
        self.warned = True
        names = sorted({type(p.owner).__name__ for p in self.probes})
        warnings.warn(f"update/realized = {share:.2f}: the weights received only {share:.0%} of the update "
                      f"{'/'.join(names)} intended (bf16 rounds small steps away); {LOST_UPDATES_HINT}",
                      UpdatesLostWarning, stacklevel=2)


def _window_metrics(probes: list[_Probe]) -> dict[str, float]:
    """Least-squares share ``s`` in ``applied ≈ s · intended`` and its standard error.

    Stochastic rounding adds independent zero-mean noise per element, so ``var(s) = Σ I² var(e) / (Σ I²)²``,
    estimated with the residuals ``e = applied - s · intended``.
    """
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
    return {
        "update/realized": share,
        "update/realized_stderr": stderr,
        "update/relative_step": sum(float(p.step_ratio_sum) for p in probes) / steps,
    }


# ---- the replay's plumbing: who owns a parameter, whether its update is element-wise, a clone of its optimizer over
# an fp32 shadow, and which elements to sample
KAHAN_KEYS = ("kahan_comp",)  # torch-optimi's Kahan summation buffer


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
    """Exactly ``n`` flat indices (so the monitor's memory is known in advance): every element, repeated
    when the tensor is smaller; distinct ones up to 2**24 elements; uniform draws above (no numel-sized
    permutation)."""
    if numel <= n:
        return torch.arange(n) % numel
    if numel <= 1 << 24:
        return torch.randperm(numel, generator=gen)[:n].sort().values
    return torch.randint(0, numel, (n,), generator=gen).sort().values


def clone_optimizer(inner: torch.optim.Optimizer, p: Tensor, shadow: Tensor) -> torch.optim.Optimizer:
    """Same class and attributes as ``inner``, over ``shadow`` only, with fresh state.

    ``__init__`` is bypassed (constructor signatures differ); instance-level ``step`` patches (LR-scheduler counters,
    rounding wrappers) and step hooks stay with the real optimizer. Python scalars in the live state (APOLLO's
    projection seed) are copied so random projections match; tensors are not (the shadow starts from zero moments).
    """
    _, group = owner(inner, p)
    clone = object.__new__(type(inner))
    clone.__dict__.update(inner.__dict__)
    clone.__dict__.pop("step", None)
    for key, value in inner.__dict__.items():
        if key.startswith("_optimizer_") and isinstance(value, OrderedDict):
            setattr(clone, key, OrderedDict())
    clone.state = defaultdict(dict)
    clone.param_groups = [{**hyperparameters(group), "params": [shadow]}]
    scalars = {k: v for k, v in inner.state.get(p, {}).items() if k != "step" and isinstance(v, (int, float, str))}
    if scalars:
        clone.state[shadow].update(scalars)
    if hasattr(clone, "mng"):  # bitsandbytes: a private override manager (the global one is keyed by index)
        from bitsandbytes.optim import GlobalOptimManager

        manager = object.__new__(GlobalOptimManager)
        manager.initialize()
        clone.mng, clone.initialized = manager, False
        args = getattr(inner, "args", None)
        if args is not None and p.numel() < getattr(args, "min_8bit_size", 0):  # the live tensor keeps 32-bit
            clone.args = copy.copy(args)  # state: so does its shadow, whatever its sampled size
            clone.args.min_8bit_size = shadow.numel() + 1
    return clone
