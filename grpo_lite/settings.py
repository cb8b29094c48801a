"""Every setting grpo-lite owns, declared once as a field of :class:`LiteArguments` (its type, default, help, range,
flag, where it goes, whether a recipe holds it), and the ranges of the settings declared elsewhere (GRPOConfig's,
evaluate()'s: :data:`OTHER_RANGES`). The range check (:func:`check`, called where a value enters: a recipe file, a
Python argument, a CLI flag), the typing of a value as TRL's parser types it, both forms of ``grpo-lite train``
(its options and ``--help``), and which of train()'s arguments a recipe holds all read :func:`settings`;
``tests/test_settings.py`` adds a field and finds it everywhere.

>>> check("num_processes", 2)
2
>>> check("num_processes", 0)
Traceback (most recent call last):
...
grpo_lite.errors.ConfigError: num_processes=0 must be a positive integer; e.g. num_processes=1
>>> settings()["seed"].flag, settings()["seed"].recipe, settings()["learning_rate"].goes
('--seed', True, 'grpo_config')
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Collection, Literal, Optional, Union, get_args, get_origin, get_type_hints

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
PromptStyleName = Literal["guided", "plain", "one_step"]  # grpo_lite.data.prompts.PROMPT_STYLES' names
ExportFormat = Literal["gguf"]  # train(export=...): written by the optional export part (grpo_lite.export)


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


def own(
    default: Any,
    help: str,
    *,
    range: Range | None = None,
    flag: str | None = None,
    goes: Goes = "run",
    recipe: bool = True,
    peft: str | None = None,
    typed: bool = True,
) -> Any:
    """A field of :class:`LiteArguments`: its default (PLANNER: decided for the model and budget; a tuple for a list)
    and, as TRL's config dataclasses carry their help, the metadata every reader takes:

    help: one line, what it does and its trade-off (``--help``, docs); range: a number's bound (:func:`check`);
    flag: its ``grpo-lite train`` option (None: a recipe or ``--set`` only); goes: where its value ends up; recipe: a
    recipe holds it (at the top level, or under lora:) and train(config=) takes it; peft: its name in
    ``peft.LoraConfig`` when that differs (lora_r: r); typed: TRL's parser types it from the annotation (False: a
    value the reader checks itself, such as a dataset object or a prompt style's fields).
    """
    meta = {"help": help, "range": range, "flag": flag, "goes": goes, "recipe": recipe, "peft": peft, "typed": typed}
    return field(default=default, metadata=meta)


def _run(default: Any, help: str, **how: Any) -> Any:
    """train()'s own: how this run goes, not what it trains (no recipe holds it)."""
    return own(default, help, recipe=False, **how)


@dataclass
class LiteArguments:
    """grpo-lite's own settings, each declared once: its type, default, and metadata (:func:`own`). train(), a
    recipe, ``grpo-lite train``'s options (both forms) and :func:`check` read these fields; GRPOConfig's fields are
    TRL's (only their ranges are grpo-lite's: :data:`OTHER_RANGES`)."""

    # fmt: off
    # ---- what to train on what: train()'s arguments that a recipe holds --------------------------------------------
    model: str = own(None, "hub id, short name (Llama-3.2-1B-Instruct), local folder or .gguf file")
    budget_gb: Optional[float] = own(None, "GPU size in GB, e.g. 16, per device (default: detect the current CUDA "
                                     "device)", flag="--budget-gb")
    dataset: str = own(TRAINER.dataset, f"gsm8k, synthetic, math, or a path (default {TRAINER.dataset})",
                       flag="--dataset", typed=False)
    rewards: Optional[list[str]] = own(None, "reward (repeatable): a grpo-lite or TRL reward name, or your "
                                       "module:function (default: the GSM8K set)", flag="--reward", typed=False)
    preset: Optional[str] = own(None, "use exactly this preset (see grpo-lite presets)", flag="--preset")
    prompt_style: Optional[PromptStyleName] = own(None, "system prompt, one-shot example and assistant prefill (a "
                                                  "name or its fields)", typed=False)
    answer_kind: Optional[AnswerKind] = own(None, "how answers compare with the golds: number, math (LaTeX), choice "
                                            "(a letter), text (default: the dataset's, else chosen from its golds)",
                                            flag="--answer-kind")
    seed: int = own(0, "seed (default 0)", range=Range(lambda x: 0 <= x < 2**32, "a whole number from 0 to 2**32 - 1 "
                    "(numpy's seeds)", 0, whole=True), flag="--seed")
    max_steps: Optional[int] = own(None, "optimizer steps (default: num_train_epochs epochs, TRL's 3)", range=Range(
        lambda x: 1 <= x <= MAX_STEPS, f"a whole number from 1 to {MAX_STEPS:_}", 1, whole=True), flag="--max-steps")
    stop_strings: list[str] = own(TRAINER.stop_strings, "end a sampled completion at the first of these ([] samples "
                                  "to the length limit)")
    # ---- how it runs: the plan's own keys ----------------------------------------------------------------------
    device: Optional[Device] = own(None, "the device the recipe was planned for")
    num_processes: int = own(STEP.num_processes, "data-parallel processes, one GPU each (CPU: gloo); --budget-gb is "
                             "per device", range=_whole(STEP.num_processes), flag="--num-processes")
    sharding: Optional[Sharding] = own(None, "split state across processes (default: the planner's choice; ddp on "
                                       "CPU)", flag="--sharding")
    dtype: Optional[Dtype] = own(None, "the dtype the weights load in", goes="load")
    update_rounding: Optional[UpdateRounding] = own(None, "how updates reach bf16 weights (stochastic lands steps "
                                                    "below half a bf16 spacing)", goes="trainer")
    shared_prefix: bool = own(STEP.shared_prefix, "forward each prompt once for all its completions (same log-probs, "
                              "checked on the first step; default on)", flag="--shared-prefix", goes="trainer")
    lora_r: int = own(PLANNER, "LoRA rank: more trains more of the model, at more memory",
                      range=_whole(LORA.r, ">= 1"), goes="lora", peft="r")
    lora_alpha: float = own(PLANNER, "LoRA scale (alpha / r multiplies the update)",
                            range=_above(LORA.alpha(LORA.r)), goes="lora")
    lora_dropout: float = own(PLANNER, "dropout on the LoRA path", range=Range(lambda x: 0 <= x < 1, "in [0, 1)",
                              0.05), goes="lora")
    lora_target_modules: Union[None, str, list[str]] = own(PLANNER, "the linears LoRA adapts (default all-linear)",
                                                           goes="lora", peft="target_modules")
    use_dora: bool = own(PLANNER, "DoRA: the update split in magnitude and direction (peft's use_dora)", goes="lora")
    use_rslora: bool = own(PLANNER, "rank-stabilized LoRA: the update scaled by alpha / sqrt(r)", goes="lora")
    modules_to_save: Optional[list[str]] = own(PLANNER, "modules trained in full beside the adapter (e.g. lm_head)",
                                               goes="lora")
    # ---- how this run goes: train()'s own, not in a recipe -----------------------------------------------------
    method: Optional[Method] = _run(None, "fix the memory method; the planner picks the rest of the preset",
                                    flag="--method")
    output_dir: Optional[str] = _run(None, "run folder (default runs/<model>-<time>)", flag="--output-dir")
    resume: bool = _run(False, "continue from the newest complete checkpoint in --output-dir", flag="--resume")
    overwrite: bool = _run(False, "replace a run already in --output-dir", flag="--overwrite")
    on_oom: OnOOM = _run(RESILIENCE.on_oom, "on CUDA out-of-memory: step down the preset ladder and go on "
                         "(default), or stop", flag="--on-oom")
    oom_window_steps: int = _run(RESILIENCE.oom_window_steps, "step down only for an OOM within this many steps "
                                 "(later ones re-raise)", range=_whole(RESILIENCE.oom_window_steps, "a whole number "
                                 ">= 0 (0 never steps down)", least=0))
    on_stall: OnStall = _run(RESILIENCE.on_stall, "when the run is not learning: print the cause and a remedy "
                             "(default), or also raise max_completion_length at the next checkpoint when most "
                             "completions are cut (docs/health.md)", flag="--on-stall")
    quiet: bool = _run(False, "do not print the plan, the progress lines and the summary table")
    show_plan: bool = _run(False, "print the whole plan (components, reasons, settings), not its summary",
                           flag="--show-plan")
    skip_invalid: bool = _run(False, "skip dataset rows without a usable question or answer (a task: prompt; one "
                              "warning gives the count) instead of stopping at the first", flag="--skip-invalid")
    export: Optional[ExportFormat] = _run(None, "also write the trained model as one GGUF file (docs/export.md)")
    # fmt: on


@dataclass(frozen=True)
class Setting:
    """One setting as every reader sees it: a :class:`LiteArguments` field, or a range of :data:`OTHER_RANGES`."""

    name: str
    help: str  # one line: what it does, its trade-off where it has one (the CLI's --help, docs)
    default: Any = PLANNER  # PLANNER: decided for the model and budget (grpo_lite.defaults, the planner)
    type: Any = None  # its annotation (None: GRPOConfig's or evaluate()'s own)
    range: Range | None = None
    flag: str | None = None
    recipe: bool = True
    goes: Goes = "grpo_config"
    peft: str | None = None
    typed: bool = True

    @property
    def choices(self) -> tuple[Any, ...] | None:
        """The values a setting of a few named values takes (its ``Literal``'s), else None."""
        for kind in (self.type, *get_args(self.type)):  # Literal[...] or Optional[Literal[...]]
            if get_origin(kind) is Literal:
                return get_args(kind)
        return None


_S = Setting

# ranges of settings declared elsewhere: GRPOConfig's fields (TRL's parser types them but does not bound them;
# --set KEY=VALUE or a recipe's trl:) and evaluate()'s arguments
OTHER_RANGES: tuple[Setting, ...] = (
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
    _S("batch_size", "evaluate(): prompts decoded together", EVALUATION.batch_size, int, _whole(EVALUATION.batch_size),
       recipe=False, goes="run"),
    _S("max_new_tokens", "evaluate(): tokens decoded per answer at most", EVALUATION.max_new_tokens, int,
       _whole(EVALUATION.max_new_tokens), recipe=False, goes="run"),
)  # fmt: skip


def settings() -> dict[str, Setting]:
    """Every setting by name: :class:`LiteArguments`' fields, then :data:`OTHER_RANGES` (both read when called: a
    field or a range added is in it)."""
    return {**_own_settings(LiteArguments), **{s.name: s for s in OTHER_RANGES}}


@functools.lru_cache(maxsize=1)
def _own_settings(lite: type) -> dict[str, Setting]:
    hints = get_type_hints(lite)
    return {f.name: Setting(f.name, default=f.default, type=hints[f.name], **f.metadata) for f in fields(lite)}


def where(goes: Goes) -> tuple[str, ...]:
    """The names of the settings that go to ``goes``, in the table's order.

    >>> where("trainer"), where("load")
    (('update_rounding', 'shared_prefix'), ('dtype',))
    """
    return tuple(name for name, s in settings().items() if s.goes == goes)


def flags() -> dict[str, Setting]:
    """The settings that are ``grpo-lite train`` options, by name."""
    return {name: s for name, s in settings().items() if s.flag is not None}


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
    setting = settings().get(key)
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
    setting = settings().get(key)
    rule = setting.range if setting is not None else None
    if value is None and rule is not None and not rule.takes_none:
        written = how.get("written") or f"{key}=None"
        raise ConfigError(
            f"{written}: {key} must be a number; leave it out for the planner's choice, or e.g. {key}={rule.example!r}"
        )
    return check(key, value, **how)
