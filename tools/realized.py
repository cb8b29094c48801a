"""How much of the intended update reaches bf16 weights: an optimizer against an fp32 copy fed the same gradients
(docs/internals.md); :func:`planned_optimizer` builds a rung's optimizer as training does (tests, benchmarks).
Not in the package: nothing in it uses this measure."""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from grpo_lite.precision.rounding import install_update_rounding, unwrap

Grads = dict[str, Tensor]
OptimizerFactory = Callable[[nn.Module], Any]


@dataclass(frozen=True)
class Realized:
    """The applied displacement against the intended one."""

    share: float  # <applied, intended> / |intended|^2: 1.0, every update landed; near 0, bf16 rounded them away
    norm_ratio: float  # |applied| / |intended|
    cosine: float


def tiny_llama(hidden: int = 64, layers: int = 2, vocab: int = 128, seed: int = 0) -> nn.Module:
    """A random fp32 Llama (initializer range 0.02, norms at 1.0): weights of a realistic size for bf16."""
    from transformers import LlamaConfig, LlamaForCausalLM  # heavy: transformers

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=4 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 32),
        num_key_value_heads=max(1, hidden // 64),
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    return LlamaForCausalLM(config).float()


def bf16_and_fp32_copies(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """``model`` in bf16, and an fp32 copy holding exactly the same (bf16-representable) values."""
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    return bf16, copy.deepcopy(bf16).float()


def lm_gradients(model: nn.Module, batches: int = 1, seed: int = 0, tokens: int = 32) -> list[Grads]:
    """Language-model gradients on random tokens, rounded to bf16 so that both copies see the same values."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(batches):
        ids = torch.randint(0, model.config.vocab_size, (4, tokens), generator=gen)
        model.zero_grad()
        model(input_ids=ids, labels=ids).loss.backward()
        out.append({n: p.grad.to(torch.bfloat16).float() for n, p in model.named_parameters() if p.grad is not None})
    model.zero_grad()
    return out


def planned_optimizer(
    model: nn.Module,
    optim: str,
    *,
    learning_rate: float,
    update_rounding: str,
    optim_args: str | None = None,
    target_modules: Sequence[str] | None = None,
) -> Any:
    """The optimizer transformers builds for ``optim`` (weight decay 0), with stochastic rounding installed when
    ``update_rounding == "stochastic"``, as in training."""
    from transformers import Trainer, TrainingArguments  # heavy: transformers

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out,
            optim=optim,
            optim_args=optim_args,
            learning_rate=learning_rate,
            weight_decay=0.0,
            use_cpu=not torch.cuda.is_available(),
            report_to=[],
            optim_target_modules=list(target_modules) if target_modules else None,
        )
        cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    # layer-wise: one optimizer per parameter; GaLore: its own param groups (the projected targets); else all trainable
    params = (
        kwargs.pop("optimizer_dict", None)
        or kwargs.pop("params", None)
        or [p for p in model.parameters() if p.requires_grad]
    )
    optimizer = cls(params, **kwargs)
    if update_rounding == "stochastic":
        install_update_rounding(optimizer)
    return optimizer


def fp32_adamw(model: nn.Module, learning_rate: float) -> torch.optim.Optimizer:
    """The reference: torch AdamW on fp32 weights (transformers' default betas and eps, no weight decay)."""
    return torch.optim.AdamW(model.parameters(), lr=learning_rate, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)


def step(optimizer: Any) -> None:
    """One optimizer step; layer-wise ones (``optimizer_dict``) step each parameter as their backward hooks would."""
    per_param = getattr(unwrap(optimizer), "optimizer_dict", None)
    if per_param is None:
        optimizer.step()
        return
    for p, opt in per_param.items():
        if p.grad is not None:
            opt.step()
            opt.zero_grad()


def _displacement(model: nn.Module, optimizer: Any, grads: Sequence[Grads], steps: int) -> dict[str, Tensor]:
    before = {n: p.detach().float().clone() for n, p in model.named_parameters()}
    for i in range(steps):
        for n, p in model.named_parameters():
            g = grads[i % len(grads)].get(n)
            p.grad = None if g is None else g.to(p.dtype).clone()
        step(optimizer)
    return {n: p.detach().float() - before[n] for n, p in model.named_parameters()}


def realized_share(
    make: OptimizerFactory,
    model_bf16: nn.Module,
    model_fp32: nn.Module,
    grads: Sequence[Grads],
    steps: int,
    reference: OptimizerFactory,
) -> Realized:
    """Step ``make(model_bf16)`` and ``reference(model_fp32)`` (same starting values) with the same gradients
    (cycled) and compare the displacements. Both models are modified.

    >>> base = tiny_llama(hidden=32, layers=1)
    >>> grads = lm_gradients(base)
    >>> adamw = lambda m: fp32_adamw(m, 1e-6)
    >>> realized_share(adamw, *bf16_and_fp32_copies(base), grads, 5, adamw).share < 0.1  # the steps round away
    True
    """
    applied = _displacement(model_bf16, make(model_bf16), grads, steps)
    intended = _displacement(model_fp32, reference(model_fp32), grads, steps)
    dot = sum(float((applied[n] * intended[n]).sum()) for n in intended)
    a2 = sum(float(applied[n].square().sum()) for n in intended)
    i2 = sum(float(intended[n].square().sum()) for n in intended)
    return Realized(share=dot / i2, norm_ratio=(a2 / i2) ** 0.5, cosine=dot / max((a2 * i2) ** 0.5, 1e-30))
