"""Every setting grpo-lite owns or passes on, declared once in :data:`SETTINGS`: its name, type, default, range,
help, and whether it is a ``grpo-lite train`` flag and a recipe key. The range check (:func:`check`, called where a
value enters: a recipe file, a Python argument, a CLI flag), TRL-style typing of grpo-lite's own settings
(``recipe/values.OwnSettings``), the CLI's flags and ``--help``, and which of ``train()``'s arguments a recipe holds
all read this table; ``tests/test_settings.py`` adds a setting here and finds it everywhere.

>>> check("num_processes", 2)
2
>>> check("num_processes", 0)
Traceback (most recent call last):
...
grpo_lite.errors.ConfigError: num_processes=0 must be a positive integer; e.g. num_processes=1
>>> SETTINGS["seed"].flag, SETTINGS["seed"].recipe, SETTINGS["learning_rate"].goes
('--seed', True, 'grpo_config')
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Collection, Literal, Optional, Union, get_args, get_origin

from grpo_lite.defaults import EVALUATION, LORA, RESILIENCE, RUN, STEP, TRAINER
from grpo_lite.errors import ConfigError

# the choices of the settings that take a few named values (each module that reads one imports it from here)
Method = Literal["full", "galore", "lora", "qlora"]
METHODS: tuple[Method, ...] = get_args(Method)  # the one list of method names (CLI choices, plan() checks)
Device = Literal["cuda", "cpu"]
Dtype = Literal["bfloat16", "float16", "float32"]
Sharding = Literal["none", "ddp", "zero2", "zero3", "fsdp"]
# How an update reaches bf16 trained weights: "stochastic" rounds an fp32 copy back stochastically (lands in
# expectation); "nearest" is PyTorch's own, which drops steps below half a bf16 spacing (most at lr 1e-6).
UpdateRounding = Literal["stochastic", "nearest"]
AnswerKind = Literal["number", "math", "choice", "text"]  # how an answer compares with its gold (docs/datasets.md)
OnOOM = Literal["step_down", "raise"]  # a CUDA out-of-memory error: step down the ladder and go on, or re-raise
OnStall = Literal["warn", "adapt"]  # a stalled run: say so (warn), or also raise max_completion_length (adapt)
# where a setting goes: a GRPOConfig field; peft.LoraConfig; from_pretrained; grpo-lite's trainer; the run itself
Goes = Literal["grpo_config", "lora", "load", "trainer", "run"]


@dataclass(frozen=True)
class Range:
    """What a setting's value must be: ``accepts(value)``, said as ``what``, with ``example`` a value that works."""

    accepts: Callable[[Any], bool]
    what: str
    example: Any
    whole: bool = False  # a whole number (True and False are not)
    takes_none: bool = True  # False: written as None it is refused (the planner needs a number; leave it out)


def _whole(example: int, what: str = "a positive integer", least: int = 1, *, takes_none: bool = True) -> Range:
    return Range(lambda x: x >= least, what, example, whole=True, takes_none=takes_none)


def _above(example: Any, least: float = 0) -> Range:
    return Range(lambda x: x > least, f"> {least:g}", example)


MAX_STEPS = 10**8  # about three years at a step a second: more is a typo (a warmup share of it never ends)


class _Planner:
    """The default of a setting the planner (or ``grpo_lite.defaults``) decides for the model and the budget."""

    def __repr__(self) -> str:
        return "the planner's"


PLANNER: Any = _Planner()


@dataclass(frozen=True)
class Setting:
    """One setting, declared once (the spirit of TRL's config dataclasses: a default and a help per field)."""

    name: str
    help: str  # one line: what it does, its trade-off where it has one (the CLI's --help, docs)
    default: Any = PLANNER  # PLANNER: decided for the model and budget (grpo_lite.defaults, the planner)
    type: Any = None  # grpo-lite's own: the type TRL's parser types it as (None: GRPOConfig's own, or checked apart)
    range: Range | None = None  # a number's bound (TRL's parser types GRPOConfig fields but does not bound them)
    flag: str | None = None  # its ``grpo-lite train`` option ("--seed"); None: --set KEY=VALUE or a recipe only
    recipe: bool = True  # a recipe holds it (at the top level, or under trl:/lora:), and train(config=) takes it
    goes: Goes = "grpo_config"
    peft: str | None = None  # under a recipe's lora: and in peft.LoraConfig, when its name differs (lora_r: r)

    @property
    def choices(self) -> tuple[Any, ...] | None:
        """The values a setting of a few named values takes (its ``Literal``'s), else None."""
        for kind in (self.type, *get_args(self.type)):  # Literal[...] or Optional[Literal[...]]
            if get_origin(kind) is Literal:
                return get_args(kind)
        return None


_S = Setting


def _run(
    name: str, help: str, default: Any, type: Any = None, range: Range | None = None, flag: str | None = None
) -> Setting:
    """train()'s or evaluate()'s own: how this run goes, not what it trains (no recipe holds it)."""
    return Setting(name, help, default, type, range, flag, recipe=False, goes="run")


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    # ---- what to train on what: train()'s arguments that a recipe holds --------------------------------------------
    _S("model", "hub id, short name (Llama-3.2-1B-Instruct), local folder or .gguf file", None, str, goes="run"),
    _S("budget_gb", "GPU size in GB, e.g. 16, per device (default: detect the current CUDA device)", None,
       Optional[float], flag="--budget-gb", goes="run"),
    _S("dataset", f"gsm8k, synthetic, math, or a path (default {TRAINER.dataset})", TRAINER.dataset, flag="--dataset",
       goes="run"),
    _S("rewards", "reward (repeatable): a grpo-lite or TRL reward name, or your module:function (default: the GSM8K "
       "set)", None, flag="--reward", goes="run"),
    _S("preset", "use exactly this preset (see grpo-lite presets)", None, str, flag="--preset", goes="run"),
    _S("prompt_style", "system prompt, one-shot example and assistant prefill (a name or its fields)", None,
       goes="run"),
    _S("answer_kind", "how answers compare with the golds: number, math (LaTeX), choice (a letter), text (default: "
       "the dataset's, else chosen from its golds)", None, Optional[AnswerKind], flag="--answer-kind", goes="run"),
    _S("seed", "seed (default 0)", 0, range=Range(lambda x: 0 <= x < 2**32, "a whole number from 0 to 2**32 - 1 "
       "(numpy's seeds)", 0, whole=True), flag="--seed", goes="run"),
    _S("max_steps", "optimizer steps (default: num_train_epochs epochs, TRL's 3)", None, range=Range(lambda x: 1 <= x <= MAX_STEPS,
       f"a whole number from 1 to {MAX_STEPS:_}", 1, whole=True), flag="--max-steps", goes="run"),
    _S("stop_strings", "end a sampled completion at the first of these ([] samples to the length limit)",
       TRAINER.stop_strings, list[str], goes="run"),
    # ---- how it runs: the plan's own keys ----------------------------------------------------------------------
    _S("device", "the device the recipe was planned for", None, Optional[Device], goes="run"),
    _S("num_processes", "data-parallel processes, one GPU each (CPU: gloo); --budget-gb is per device",
       STEP.num_processes, int, _whole(STEP.num_processes), flag="--num-processes", goes="run"),
    _S("sharding", "split state across processes (default: the planner's choice; ddp on CPU)", None,
       Optional[Sharding], flag="--sharding", goes="run"),
    _S("dtype", "the dtype the weights load in", None, Optional[Dtype], goes="load"),
    _S("update_rounding", "how updates reach bf16 weights (stochastic lands steps below half a bf16 spacing)", None,
       Optional[UpdateRounding], goes="trainer"),
    _S("shared_prefix", "forward each prompt once for all its completions (same log-probs, checked on the first "
       "step; default on)", STEP.shared_prefix, bool, flag="--shared-prefix", goes="trainer"),
    _S("lora_r", "LoRA rank: more trains more of the model, at more memory", PLANNER, int, _whole(LORA.r, ">= 1"),
       goes="lora", peft="r"),
    _S("lora_alpha", "LoRA scale (alpha / r multiplies the update)", PLANNER, float, _above(LORA.alpha(LORA.r)),
       goes="lora"),
    _S("lora_dropout", "dropout on the LoRA path", PLANNER, float, Range(lambda x: 0 <= x < 1, "in [0, 1)", 0.05),
       goes="lora"),
    _S("lora_target_modules", "the linears LoRA adapts (default all-linear)", PLANNER,
       Union[None, str, list[str]], goes="lora", peft="target_modules"),
    _S("use_dora", "DoRA: the update split in magnitude and direction (peft's use_dora)", PLANNER, bool, goes="lora"),
    _S("use_rslora", "rank-stabilized LoRA: the update scaled by alpha / sqrt(r)", PLANNER, bool, goes="lora"),
    _S("modules_to_save", "modules trained in full beside the adapter (e.g. lm_head)", PLANNER,
       Optional[list[str]], goes="lora"),
    # ---- GRPOConfig fields with a range (TRL's parser types them; --set KEY=VALUE or a recipe's trl:) ------------
    _S("learning_rate", "optimizer step size", range=_above(1e-5)),
    _S("weight_decay", "AdamW's decoupled weight decay", range=Range(lambda x: x >= 0, ">= 0", 0.1)),
    _S("adam_beta1", "Adam's first-moment decay", range=Range(lambda x: 0 <= x < 1, "in [0, 1)", 0.9)),
    _S("adam_beta2", "Adam's second-moment decay", range=Range(lambda x: 0 <= x < 1, "in [0, 1)", 0.99)),
    _S("adam_epsilon", "Adam's denominator floor", range=_above(1e-8)),
    _S("max_grad_norm", "gradient clipping", range=Range(lambda x: x >= 0, ">= 0 (0 turns clipping off)",
       1.0)),
    _S("warmup_steps", "learning-rate warmup", range=Range(lambda x: x >= 0, ">= 0 (below 1: a share of the steps)",
       0.1)),
    _S("num_train_epochs", "epochs when max_steps is not set", range=_above(1)),
    _S("logging_steps", "steps between progress lines", range=_above(RUN["logging_steps"].value)),
    _S("save_steps", "steps between checkpoints", range=Range(lambda x: x > 0, "> 0 (below 1: a share of the steps)",
       RUN["save_steps"].value)),
    _S("save_total_limit", "checkpoints kept", range=Range(lambda x: x >= 0, ">= 0 (0 or None keeps every "
       "checkpoint)", RUN["save_total_limit"].value)),
    _S("temperature", "sampling temperature", range=_above(0.7)),
    _S("top_p", "nucleus sampling", range=Range(lambda x: 0 < x <= 1, "in (0, 1]", 1.0)),
    _S("top_k", "top-k sampling", range=Range(lambda x: x >= 0, ">= 0 (0 turns it off)", 0)),
    _S("min_p", "min-p sampling", range=Range(lambda x: 0 <= x <= 1, "in [0, 1]", 0.05)),
    _S("repetition_penalty", "sampling's repetition penalty", range=_above(1.0)),
    _S("beta", "KL coefficient (0: no reference model, its memory saved)", range=Range(lambda x: x >= 0, ">= 0",
       STEP.beta)),
    _S("epsilon", "clipping below", range=_above(0.2)),
    _S("epsilon_high", "clipping above", range=_above(0.28)),
    _S("num_iterations", "updates per generation", range=_whole(STEP.num_iterations, ">= 1")),
    _S("num_generations", "completions per prompt", range=_whole(STEP.num_generations,
       ">= 2 (GRPO compares a group)", least=2, takes_none=False)),
    _S("vllm_gpu_memory_utilization", "vLLM's share of the GPU", range=Range(lambda x: 0 < x <= 1, "in (0, 1]",
       STEP.vllm_gpu_memory_utilization)),
    _S("per_device_train_batch_size", "completions per device and micro-batch",
       range=_whole(STEP.per_device_train_batch_size)),
    _S("gradient_accumulation_steps", "micro-batches per optimizer step",
       range=_whole(STEP.gradient_accumulation_steps)),
    _S("max_prompt_length", "prompt tokens planned for (train() measures the longest prompt)",
       range=_whole(STEP.max_prompt_length)),
    _S("max_completion_length", "completion tokens sampled at most", range=_whole(STEP.max_completion_length,
       takes_none=False)),
    # ---- how this run goes: train()'s and evaluate()'s own, not in a recipe -----------------------------------
    _run("method", "fix the memory method; the planner picks the rest of the preset", None, Optional[Method],
       flag="--method"),
    _run("output_dir", "run folder (default runs/<model>-<time>)", None, flag="--output-dir"),
    _run("resume", "continue from the newest complete checkpoint in --output-dir", False, bool, flag="--resume"),
    _run("overwrite", "replace a run already in --output-dir", False, bool, flag="--overwrite"),
    _run("on_oom", "on CUDA out-of-memory: step down the preset ladder and go on (default), or stop",
       RESILIENCE.on_oom, OnOOM, flag="--on-oom"),
    _run("oom_window_steps", "step down only for an OOM within this many steps (later ones re-raise)",
       RESILIENCE.oom_window_steps, int, _whole(RESILIENCE.oom_window_steps, "a whole number >= 0 (0 never steps "
       "down)", least=0)),
    _run("on_stall", "when the run is not learning: print the cause and a remedy (default), or also raise "
       "max_completion_length at the next checkpoint when most completions are cut (docs/health.md)",
       RESILIENCE.on_stall, OnStall, flag="--on-stall"),
    _run("quiet", "do not print the plan, the progress lines and the summary table", False, bool),
    _run("show_plan", "print the whole plan (components, reasons, settings), not its summary", False, bool,
       flag="--show-plan"),
    _run("skip_invalid", "skip dataset rows without a usable question or answer (a task: prompt; one warning gives the "
       "count) instead of stopping at the first", False, bool, flag="--skip-invalid"),
    _run("batch_size", "evaluate(): prompts decoded together", EVALUATION.batch_size, int,
       _whole(EVALUATION.batch_size)),
    _run("max_new_tokens", "evaluate(): tokens decoded per answer at most", EVALUATION.max_new_tokens, int,
       _whole(EVALUATION.max_new_tokens)),
)}  # fmt: skip


def where(goes: Goes) -> tuple[str, ...]:
    """The names of the settings that go to ``goes``, in the table's order.

    >>> where("trainer"), where("load")
    (('update_rounding', 'shared_prefix'), ('dtype',))
    """
    return tuple(name for name, s in SETTINGS.items() if s.goes == goes)


def flags() -> dict[str, Setting]:
    """The settings that are ``grpo-lite train`` options, by name."""
    return {name: s for name, s in SETTINGS.items() if s.flag is not None}


def check(
    key: str,
    value: Any,
    choices: Collection[Any] | None = None,
    *,
    written: str | None = None,
    named: str | None = None,
    sep: str = "=",
) -> Any:
    """Return ``value`` when it is in the range of the setting ``key``; None (not set) and an unbounded setting pass.

    Args:
        choices: the values a setting of a few named values takes, instead of a range. Default: its row's
            (:attr:`Setting.choices`).
        written: how the user wrote it, for the message. Default: ``named=value``.
        named: the setting's name as the user wrote it (``lora.r``'s ``r``), for the example. Default: ``key``.
        sep: ``"="`` (Python, ``--set``) or ``": "`` (a recipe file) between the name and the example.

    Raises:
        ConfigError: out of range, not finite, or not one of ``choices`` (with a value that works).
    """
    if value is None:
        return value
    setting = SETTINGS.get(key)
    rule = setting.range if setting is not None else None
    choices = setting.choices if choices is None and setting is not None else choices
    name = named or key
    written = written or f"{name}{sep}{value!r}"
    if choices is not None:
        if value not in choices:
            raise ConfigError(f"{written} is not valid; choose one of {', '.join(map(str, choices))}")
        return value
    example = f"; e.g. {name}{sep}{rule.example!r}" if rule is not None else ""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{written} must be a finite number{example}")
    if rule is None:
        return value
    number = (int,) if rule.whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, number) or not rule.accepts(value):
        raise ConfigError(f"{written} must be {rule.what}{example}")
    return value


def check_written(key: str, value: Any, **how: Any) -> Any:
    """:func:`check` for a value the user wrote (an override, ``--set``, a recipe's ``trl:``), where None is not
    "not set": a setting the planner needs as a number refuses it (``how``: :func:`check`'s keywords).

    Raises:
        ConfigError: None for such a setting (leave it out instead), or what :func:`check` raises.
    """
    setting = SETTINGS.get(key)
    rule = setting.range if setting is not None else None
    if value is None and rule is not None and not rule.takes_none:
        written = how.get("written") or f"{key}=None"
        raise ConfigError(
            f"{written}: {key} must be a number; leave it out for the planner's choice, or e.g. {key}={rule.example!r}"
        )
    return check(key, value, **how)
