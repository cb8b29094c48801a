"""The batch's data on meta: integer and boolean tensors that carry their values, so the trainer's code runs as is.

:class:`BatchData` is a dispatch mode that keeps a CPU twin of every meta tensor made from the batch alone (up to
:data:`MAX_TWIN` elements), so ops whose output shape depends on values (``nonzero``, ``unique``, boolean indexing,
``.item()``) run as on a GPU; a value computed from the model reads as NaN, False or 0 and is counted
(:attr:`BatchData.guessed`). The rules: docs/internals.md.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.utils.weak import WeakIdKeyDictionary

from grpo_lite.memory.meta.private import TorchDispatchMode, simulation_ops, tree_flatten, tree_map

META = torch.device("meta")
CPU = torch.device("cpu")
aten = torch.ops.aten
MAX_TWIN = 1 << 20  # elements: larger tensors made from the batch (attention masks) keep no twin
UNSAFE_INDEX, LOCAL_SCALAR_DENSE, TO_COPY = simulation_ops()
_INDEXING = {aten.index.Tensor, aten.index_put.default, aten.index_put_.default, UNSAFE_INDEX}


def _is_meta(x: Any) -> bool:
    return isinstance(x, Tensor) and x.device.type == "meta"


def _makes_meta(kwargs: dict[str, Any]) -> bool:
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == "meta"


class BatchData(TorchDispatchMode):
    """A dispatch mode that keeps a CPU twin of every meta tensor computed from the batch alone (see the module)."""

    def __init__(self) -> None:
        super().__init__()
        self._twins: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.guessed = 0  # values read from tensors computed from the model (answered NaN, False or 0)

    def place(self, t: Tensor) -> Tensor:
        """``t`` (a CPU tensor of the batch) on meta, its values kept as its twin."""
        m = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=META)
        self._twins[m] = t
        return m

    def value(self, m: Tensor) -> Tensor | None:
        """The twin of meta tensor ``m`` (None: computed from the model, or made outside the batch)."""
        return self._twins.get(m)

    def _twin(self, x: Any) -> Any:
        if _is_meta(x):
            return self._twins[x]
        return CPU if isinstance(x, torch.device) and x.type == "meta" else x

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        first = args[0] if args else None
        if type(first) is torch.nn.Parameter or (
            isinstance(first, Tensor)
            and first.is_floating_point()
            and first.device.type == "meta"
            and first not in self._twins
            and func not in _INDEXING
            and func is not LOCAL_SCALAR_DENSE
        ):
            return func(*args, **kwargs)  # the model's own tensors (most ops): nothing to keep
        leaves, _ = tree_flatten((args, kwargs))
        metas = [x for x in leaves if _is_meta(x)]
        known = all(x in self._twins for x in metas)
        if func is LOCAL_SCALAR_DENSE:
            return self._scalar(args[0], known)
        if (
            func is TO_COPY and known and metas and kwargs.get("device") is not None and not _makes_meta(kwargs)
        ):  # .cpu(), .tolist(): the twin's values
            return func(self._twins[args[0]], **kwargs)
        factory = not metas
        if factory and not _makes_meta(kwargs):
            return func(*args, **kwargs)
        if metas and not known:
            if func in _INDEXING:
                args = self._true_positions(args)
            return func(*args, **kwargs)
        try:
            out = func(*args, **kwargs)
        except (NotImplementedError, RuntimeError):  # a shape only the values decide
            if factory:
                raise
            out = None
        made = [t for t in tree_flatten(out)[0] if isinstance(t, Tensor)] if out is not None else []
        if factory and any(t.is_floating_point() for t in made):
            return out  # a float buffer (the model's): no data to keep
        if any(t.numel() > MAX_TWIN for t in made):
            return out  # an attention mask the model builds: its values decide no shape
        cpu_out = func(*tree_map(self._twin, args), **tree_map(self._twin, kwargs))
        if out is None:
            out = tree_map(
                lambda c: (
                    torch.empty_strided(c.size(), c.stride(), dtype=c.dtype, device=META)
                    if isinstance(c, Tensor)
                    else c
                ),
                cpu_out,
            )
        for m, c in zip(tree_flatten(out)[0], tree_flatten(cpu_out)[0]):
            if _is_meta(m) and isinstance(c, Tensor):
                self._twins[m] = c
        return out

    def _true_positions(self, args: Any) -> Any:
        """Boolean index masks as the long indices of their true positions (on meta, with twins); a mask without
        a twin (computed from the model) as all its positions."""
        source, indices, *rest = args
        converted = []
        for index in indices:
            if not (_is_meta(index) and index.dtype == torch.bool):
                converted.append(index)
                continue
            twin = self._twins.get(index)
            if twin is None:  # a mask from the model's outputs (a metric's NaN filter): every position, counted
                self.guessed += 1
                twin = torch.ones(index.shape, dtype=torch.bool)
            converted += [self.place(i) for i in twin.nonzero().unbind(1)]
        return (source, converted, *rest)

    def _scalar(self, m: Tensor, known: bool) -> Any:
        if known and m in self._twins:
            return self._twins[m].item()
        self.guessed += 1  # a metric TRL logs from the model's outputs (nanmin, .item()): no value on meta
        if m.is_floating_point():
            return math.nan
        return False if m.dtype == torch.bool else 0
