"""Updates that land on bf16 weights: per rung, the share of an fp32 copy's displacement realized and
the optimizer step's time against plain AdamW, in one run.

Realized share: a random Llama (hidden 256, 4 layers, 3.4M params) in bf16, the same real LM gradient
every step, lr 1e-6, after 10 and 50 steps; the reference is fp32 AdamW on an fp32 copy (GaLore and
APOLLO: their own algorithm on the fp32 copy, since their update is not AdamW's). Step time: 30 bf16
tensors of 576 x 1536 (SmolLM2-135M's MLP shape, 26.5M params), median of 5 steps after 2 warm-up
steps, one thread, relative to torch AdamW on the same bf16 tensors; state bytes per parameter from
the optimizer's own tensors.

Rows: each full-parameter rung's optimizer as planned on this device (``update_rounding="stochastic"``)
and the same optimizer rounding to nearest; then the alternatives weighed in docs/presets.md, when
installed (torchao's AdamW8bit with ``bf16_stochastic_round``, torch-optimi's StableAdamW with Kahan
summation, APOLLO layer-wise).

    python benchmarks/precision.py            # about 3 minutes on 2 CPU cores
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/, beside this folder

import torch
from torch import nn

from grpo_lite.planning.ladder import LADDER
from grpo_lite.precision.rounding import install_update_rounding, state_nbytes
from tools.realized import (
    bf16_and_fp32_copies,
    fp32_adamw,
    lm_gradients,
    planned_optimizer,
    realized_share,
    step,
    tiny_llama,
)

LR = 1e-6
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
Factory = Callable[[nn.Module], Any]


def _planned(optim: str, rounding: str, optim_args: str | None = None) -> Factory:
    targets = TARGETS if optim.startswith(("galore", "apollo")) else None
    return lambda m: planned_optimizer(
        m, optim, learning_rate=LR, update_rounding=rounding, optim_args=optim_args, target_modules=targets
    )


def _torchao_adamw8bit(m: nn.Module) -> Any:
    from torchao.optim import AdamW8bit

    return AdamW8bit(m.parameters(), lr=LR, weight_decay=0.0, bf16_stochastic_round=True)


def _optimi_stable_adamw(m: nn.Module) -> Any:
    from optimi import StableAdamW

    return StableAdamW(m.parameters(), lr=LR, weight_decay=0.0, kahan_sum=True)


def _with_sr(factory: Factory) -> Factory:
    def make(m: nn.Module) -> Any:
        optimizer = factory(m)
        install_update_rounding(optimizer)
        return optimizer

    return make


def rows() -> list[tuple[str, Factory, Factory | None]]:
    """(label, candidate, reference or None for fp32 AdamW)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out: list[tuple[str, Factory, Factory | None]] = []
    for rung in (p for p in LADDER if p.method in ("full", "galore")):
        optim = rung.optim if device == "cuda" else rung.cpu_optim
        same = _planned(optim, "nearest", rung.galore_args) if rung.method == "galore" else None
        out.append(
            (
                f"{rung.name}: {optim} + stochastic rounding (planned)",
                _planned(optim, "stochastic", rung.galore_args),
                same,
            )
        )
        out.append((f"{rung.name}: {optim}, round to nearest", _planned(optim, "nearest", rung.galore_args), same))
    if importlib.util.find_spec("torchao") and device == "cuda":  # its CPU path compiles for minutes
        out.append(("torchao AdamW8bit, bf16_stochastic_round", _torchao_adamw8bit, None))
    if importlib.util.find_spec("optimi"):
        out.append(("torch-optimi StableAdamW, Kahan summation", _optimi_stable_adamw, None))
    if importlib.util.find_spec("apollo_torch"):
        apollo = _planned("apollo_adamw_layerwise", "nearest")
        out.append(("APOLLO layer-wise + stochastic rounding", _with_sr(apollo), apollo))
        out.append(("APOLLO layer-wise, round to nearest", apollo, apollo))
    return out


class _Bag(nn.Module):
    """30 MLP-shaped bf16 tensors, named like linear layers so that GaLore/APOLLO target them."""

    def __init__(self) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.layers = nn.ModuleList(nn.Module() for _ in range(30))
        for layer in self.layers:
            layer.up_proj = nn.Linear(576, 1536, bias=False, dtype=torch.bfloat16)
            with torch.no_grad():
                layer.up_proj.weight.copy_(torch.randn(1536, 576, generator=gen) * 0.02)


def _step_ms(factory: Factory) -> tuple[float, float]:
    """(median step milliseconds, optimizer state bytes per parameter) on the bag of tensors."""
    bag = _Bag()
    optimizer = factory(bag)
    params = [p for p in bag.parameters()]
    gen = torch.Generator().manual_seed(1)
    grads = [(torch.randn(p.shape, generator=gen) * 1e-3).bfloat16() for p in params]
    times = []
    for i in range(7):
        for p, g in zip(params, grads):
            p.grad = g.clone()
        t0 = time.perf_counter()
        step(optimizer)
        if i >= 2:
            times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times), state_nbytes(optimizer) / sum(p.numel() for p in params)


def main() -> int:
    torch.set_num_threads(1)
    if not torch.cuda.is_available():
        torch.cuda.synchronize = lambda *a, **k: None  # type: ignore[assignment]  # GaLore 8-bit syncs always
    base = tiny_llama(hidden=256, layers=4)
    grads = lm_gradients(base)
    base_ms, _ = _step_ms(lambda m: torch.optim.AdamW(m.parameters(), lr=LR, weight_decay=0.0))
    print(
        f"device: {'cuda' if torch.cuda.is_available() else 'cpu'}, lr {LR:g}, "
        f"{sum(p.numel() for p in base.parameters()):,} params; torch AdamW on bf16: {base_ms:.0f} ms/step\n"
    )
    print("| optimizer | realized, 10 steps | realized, 50 steps | step time vs torch AdamW | state B/param |")
    print("|---|---|---|---|---|")
    for label, make, reference in rows():
        ref = reference or (lambda m: fp32_adamw(m, LR))
        shares = [realized_share(make, *bf16_and_fp32_copies(base), grads, n, ref).share for n in (10, 50)]
        ms, per_param = _step_ms(make)
        print(f"| {label} | {shares[0]:.2f} | {shares[1]:.2f} | {ms / base_ms:.2f}x | {per_param:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
