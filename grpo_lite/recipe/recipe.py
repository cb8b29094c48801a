"""The recipe: a plan written out one setting per line, the one object between the planner and the trainer.

``train()`` builds TRL's ``GRPOConfig``, the model and PEFT's ``LoraConfig`` from it and nothing else; on disk it
is YAML with each setting's memory cost beside it (:mod:`grpo_lite.recipe.costs`); plain TRL scripts take
:meth:`Recipe.grpo_config`, :meth:`Recipe.lora_config` and :meth:`Recipe.from_pretrained_kwargs` (docs/recipes.md).

>>> from grpo_lite.planning.choose import plan
>>> r = Recipe.from_plan(plan("Llama-3.2-1B-Instruct", budget_gb=16))
>>> r.preset, r.dtype, r.update_rounding, r.trl["optim"], r.lora
('full-8bit', 'bfloat16', 'stochastic', 'adamw_8bit', None)
>>> Recipe.from_yaml(r.to_yaml()) == r
True
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite._version import __version__
from grpo_lite.data.prompts import PROMPT_STYLES, Example, PromptStyle
from grpo_lite.defaults import RUN, STEP, TRAINER
from grpo_lite.errors import ConfigError, OutputDirError
from grpo_lite.files import write_text
from grpo_lite.memory.keywords import from_pretrained_kwargs, lora_config
from grpo_lite.planning.candidates import LORA_KEYS
from grpo_lite.recipe.values import (
    check_overrides,
    closest_names,
    load_yaml,
    read_mapping,
    refuse_credentials,
    refuse_removed,
    typed,
)
from grpo_lite.rewards.registry import reward_name
from grpo_lite.settings import AnswerKind, Device, Dtype, Sharding, UpdateRounding, check

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan


_LORA_ARGUMENTS = {peft: name for name, peft in LORA_KEYS.items()}  # peft.LoraConfig's names -> train()'s
# what a recipe must agree on with the run it drives, and what to do when it does not
_RUN_HINTS = {
    "device": "write the recipe again on this machine (grpo-lite plan MODEL --device cpu|cuda --write FILE)",
    "num_processes": "launch it with grpo-lite train --config FILE (it starts the recipe's processes) or set "
    "num_processes in the file",
    "sharding": "launch it with grpo-lite train --config FILE, or set sharding in the file",
    "quantization": "it follows the preset and the dtype: choose another preset (qlora loads NF4) or drop the section",
}
# GRPOConfig fields that the run sets itself (Recipe.grpo_settings): under trl: they would be ignored
_RUN_OWNED_TRL = {
    "seed": "write it at the top level of the recipe (seed: {value}) or pass --seed",
    "max_steps": "write it at the top level of the recipe (max_steps: {value}) or pass --max-steps",
    "output_dir": "the run's folder is not a recipe setting: pass it when you run (grpo-lite train --config FILE "
    "--output-dir DIR, or train(config=FILE, output_dir=DIR))",
}
# what a plan chooses for a recipe that leaves it None (Recipe.filled), besides LoRA's values and trl's
_PLANNED = ("preset", "device", "budget_gb", "sharding", "dtype", "quantization", "update_rounding", "shared_prefix")
_COMPARED = ("preset", "device", "budget_gb", "num_processes", "sharding", "dtype", "quantization", "lora",
             "update_rounding", "shared_prefix")  # fmt: skip  # Recipe.differences, in file order
_MAPPING = "a mapping (one setting per line)"
# a recipe's keys that hold more than one value: the type each must be, and how to write it
_SHAPES = (
    ("trl", dict, _MAPPING),
    ("lora", dict, _MAPPING),
    ("quantization", dict, _MAPPING),
    (
        "rewards",
        list,
        "a list of reward names (rewards: [correctness, think_format_reward, my_project.rewards:solved])",
    ),
)


@dataclass
class Recipe:
    """A whole run, one setting per line: what the planner chose (or you wrote), ready for ``train()`` or TRL.

    A setting that is None (or missing from a file) is the planner's to choose, as in ``train()``; every setting
    present is kept as written.
    """

    model: str  # hub id, local folder or .gguf file
    preset: str | None  # the rung of the ladder (grpo-lite presets); None: the planner's (never in a file)
    device: Device | None = None  # the device it was planned for
    budget_gb: float | None = None  # the card's nominal GB per device (RAM on CPU); None: a CPU plan without one
    num_processes: int = STEP.num_processes  # the launch it was planned for, with sharding
    sharding: Sharding | None = None
    dataset: Any = TRAINER.dataset  # "gsm8k", "synthetic" or a path (a datasets.Dataset in memory only)
    rewards: list[Any] | None = None  # reward names (callables in memory only); None: the five GSM8K rewards
    prompt_style: Any = TRAINER.prompt_style  # a name in PROMPT_STYLES, or a PromptStyle (its fields in a file)
    answer_kind: AnswerKind | None = None  # how answers compare (number, math, choice, text); None: from the data
    seed: int = 0
    max_steps: int | None = None  # optimizer steps; None: num_train_epochs epochs (TRL's 3)
    dtype: Dtype | None = None  # the dtype the weights load in
    quantization: dict[str, Any] | None = None  # BitsAndBytesConfig keyword arguments
    lora: dict[str, Any] | None = None  # peft.LoraConfig keyword arguments; None: every weight trains
    update_rounding: UpdateRounding | None = None  # how updates reach bf16 weights
    shared_prefix: bool = STEP.shared_prefix  # forward each prompt once for its group (grpo-lite's trainer)
    stop_strings: list[str] = field(default_factory=lambda: list(TRAINER.stop_strings))  # sampling stops at these
    trl: dict[str, Any] = field(
        default_factory=dict
    )  # GRPOConfig keyword arguments (output_dir, seed, max_steps aside)
    plan: Plan | None = field(default=None, compare=False, repr=False)  # the plan it was written from (the comments)

    def __post_init__(self) -> None:
        if isinstance(self.dataset, (str, os.PathLike)) and not os.fspath(self.dataset).strip():
            raise ConfigError(
                f"dataset={os.fspath(self.dataset)!r} names no dataset (an empty path is the working folder); pass "
                "gsm8k, synthetic, math, a hub id or a path such as ./data"
            )

    # ---- from a plan, to train() ------------------------------------------------------------------
    @classmethod
    def from_plan(
        cls,
        plan: Plan,
        *,
        dataset: Any = TRAINER.dataset,
        rewards: list[Any] | None = None,
        prompt_style: Any = None,
        answer_kind: AnswerKind | None = None,
        seed: int = 0,
        max_steps: int | None = None,
        stop_strings: Any = TRAINER.stop_strings,
    ) -> Recipe:
        """The plan as a recipe: its settings, then grpo-lite's run defaults (:data:`grpo_lite.defaults.RUN`), its load, LoRA and rounding, with the
        run's own settings (train()'s arguments; None: the default)."""
        from grpo_lite.rewards.registry import DEFAULT_REWARDS

        step = plan.estimate.settings
        trl = {**plan.settings, **{k: d.value for k, d in RUN.items() if k not in plan.settings}}
        return cls(
            model=plan.model.model_id, preset=plan.preset.name, device=plan.device, budget_gb=plan.budget_gb,
            num_processes=plan.num_processes, sharding=plan.sharding, dataset=dataset,
            rewards=list(DEFAULT_REWARDS) if rewards is None else list(rewards),
            prompt_style=_style_name(prompt_style), answer_kind=answer_kind, seed=seed, max_steps=max_steps,
            dtype=plan.model_kwargs["dtype"], quantization=_copy(plan.model_kwargs.get("quantization")),
            lora=_copy(plan.lora), update_rounding=step.update_rounding,
            shared_prefix=step.shared_prefix, stop_strings=list(stop_strings), trl=_copy(trl), plan=plan,
        )  # fmt: skip

    @classmethod
    def with_arguments(cls, config: str | os.PathLike | Recipe, passed: dict[str, Any]) -> Recipe:
        """The one override rule, for ``train(config=...)`` and ``grpo-lite train --config`` alike: the recipe
        (read when ``config`` is a file), then every argument the caller wrote, as written (even at its default).

        Raises:
            ConfigError: the file cannot be read, or it or a passed value is not a valid recipe.
        """
        recipe = config if isinstance(config, Recipe) else cls.read(config)
        return recipe.with_overrides(**passed) if passed else recipe

    def with_overrides(self, **overrides: Any) -> Recipe:
        """A copy with ``overrides`` applied: recipe fields by name, ``lora_r``/``lora_alpha``/``lora_dropout``/
        ``lora_target_modules`` into :attr:`lora`, anything else into :attr:`trl` (a GRPOConfig field).

        >>> r = Recipe("m", "lora", lora={"r": 16}).with_overrides(lora_r=8, learning_rate=1e-5, seed=3)
        >>> r.lora["r"], r.trl["learning_rate"], r.seed
        (8, 1e-05, 3)
        """
        names = {f.name for f in dataclasses.fields(self)} - {"plan", "trl"}
        changes: dict[str, Any] = {"trl": dict(self.trl), "lora": None if self.lora is None else dict(self.lora)}
        for key, value in overrides.items():
            if key not in ("trl", "lora"):
                value = check(key, typed(key, value, optional=key == "max_steps"))  # a recipe's max_steps may be None
            if key == "trl":
                _check_run_owned(value, "trl")
                changes["trl"].update(value)
            elif key in names:
                changes[key] = value
            elif key in LORA_KEYS:  # lora_r as r; lora_alpha, use_dora... by peft's own name
                changes["lora"] = {**(changes["lora"] or {}), LORA_KEYS[key]: value}
            else:
                changes["trl"][key] = value
        return dataclasses.replace(self, plan=None, **changes)

    def plan_settings(self) -> dict[str, Any]:
        """What :func:`grpo_lite.plan` keeps verbatim to estimate this recipe: its ``trl`` and LoRA settings (train()'s
        names), ``dtype``, ``update_rounding``, ``shared_prefix``; a setting left None stays the planner's."""
        written = {key: getattr(self, key) for key in ("dtype", "update_rounding") if getattr(self, key) is not None}
        lora = {
            _LORA_ARGUMENTS[key]: value
            for key, value in (self.lora or {}).items()
            if key in _LORA_ARGUMENTS and value is not None  # None: peft's default, planned as every linear
        }
        return {**self.trl, "shared_prefix": self.shared_prefix, **written, **lora}

    def style(self) -> PromptStyle:
        """The :class:`~grpo_lite.data.prompts.PromptStyle` that :attr:`prompt_style` names or spells out."""
        return _style_object(self.prompt_style)

    def filled(self, plan: Plan) -> Recipe:
        """This recipe as it runs on ``plan`` (the plan of :meth:`plan_settings`): what it leaves to the planner (a
        None, a shared prefix the model cannot run, the LoRA and ``trl`` values it does not write) taken from the
        plan, every setting written kept as written.

        Raises:
            ConfigError: the plan does not run a setting as written (:meth:`differences`, one phrase per key).
        """
        planned = Recipe.from_plan(plan)
        problems = self.differences(planned)
        if problems:
            raise ConfigError("the recipe cannot run as written: " + "; ".join(problems))
        chosen = {key: getattr(planned, key) for key in _PLANNED if self._leaves(key)}
        lora = planned.lora if self.lora is None else {**(planned.lora or {}), **self.lora}
        return dataclasses.replace(self, **chosen, lora=_copy(lora), trl={**planned.trl, **_copy(self.trl)}, plan=plan)

    def _leaves(self, key: str) -> bool:
        """Whether ``key`` is the planner's: None, or a shared prefix asked for (the plan turns it off for a model
        that training would run without it: memory.packing.planned_off_reason)."""
        return getattr(self, key) is None or (key == "shared_prefix" and self.shared_prefix)

    def differences(self, planned: Recipe) -> list[str]:
        """What ``planned`` (this recipe after planning) does not run as written, one line per setting present."""
        out = []
        mine, theirs = self.to_dict(), planned.to_dict()
        for key in _COMPARED:
            a, b = mine[key], theirs[key]
            if self._leaves(key):  # the planner's to choose
                continue
            if key == "lora":  # what the plan does not hold (use_dora...) and a None (peft's own default) are kept
                a = {k: v for k, v in a.items() if k in (b or {}) and v is not None}
            if isinstance(a, dict) and isinstance(b, dict):  # the keys written must agree; the rest is filled
                b = {k: b.get(k) for k in a}
            if a != b:
                hint = f" ({_RUN_HINTS[key]})" if key in _RUN_HINTS else ""
                out.append(f"{key}: the recipe says {mine[key]!r}, the run would use {theirs[key]!r}{hint}")
        for key, value in mine["trl"].items():
            if theirs["trl"].get(key, value) != value:
                out.append(f"trl.{key}: the recipe says {value!r}, the run would use {theirs['trl'][key]!r}")
        return out

    # ---- YAML ------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain values, in file order (what the YAML file holds, without the comments)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name == "plan":
                continue
            value = getattr(self, f.name)
            if f.name == "dataset" and not isinstance(value, (str, os.PathLike)):
                value = f"<{type(value).__name__}: {len(value)} rows>" if hasattr(value, "__len__") else repr(value)
            elif f.name == "rewards" and value is not None:
                value = [r if isinstance(r, str) else reward_name(r) for r in value]
            elif f.name == "prompt_style":  # its name, or its fields
                value = _style_name(value)
                value = dataclasses.asdict(value) if isinstance(value, PromptStyle) else value
            out[f.name] = str(value) if isinstance(value, os.PathLike) else _copy(value)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = "the recipe") -> Recipe:
        """Check a recipe's keys and values and build it.

        Raises:
            ConfigError: not a mapping, an unknown key (with the closest valid one), a missing ``model`` or
                ``preset``, or a value outside its choices.
        """
        if data is None:
            raise ConfigError(
                f"{source} is empty: every recipe names its model and its preset (grpo-lite plan MODEL --budget-gb N "
                "--write FILE writes one)"
            )
        if not isinstance(data, dict):
            raise ConfigError(
                f"{source} must be a YAML mapping of settings (model: ..., preset: ...), got {type(data).__name__}"
            )
        data = _without_removed(data, source)
        names = [f.name for f in dataclasses.fields(cls) if f.name != "plan"]
        unknown = [k for k in data if k not in names]
        if unknown:
            raise ConfigError(
                f"{source}: unknown key(s) {closest_names(unknown, names)}; GRPOConfig fields go under "
                f"trl:, LoRA settings under lora:; valid top-level keys: {', '.join(names)}"
            )
        missing = [k for k in ("model", "preset") if data.get(k) in (None, "")]
        if missing:
            raise ConfigError(
                f"{source} has no {' or '.join(missing)}: every recipe names its model and its preset "
                "(grpo-lite plan MODEL --budget-gb N --write FILE writes one)"
            )
        for key, kind, what in _SHAPES:
            if data.get(key) is not None and not isinstance(data[key], kind):
                raise ConfigError(f"{source}: {key} must be {what} or null, got {data[key]!r:.60}")
        if data.get("prompt_style") is not None:
            _style_object(data["prompt_style"], source)  # an unknown style name fails here, naming the valid ones
        values = _typed_fields(data, source)
        values.setdefault("stop_strings", list(TRAINER.stop_strings))
        return cls(**values)

    def to_yaml(self, path: str | os.PathLike | None = None) -> str:
        """The recipe as YAML: a header (the plan's peak, the budget, the commands that run it), then one setting per
        line with its memory cost and trade-off beside it (when the recipe has its plan)."""
        from grpo_lite.recipe import costs

        notes = {k: n.text() for k, n in costs.setting_notes(self.plan).items()} if self.plan is not None else {}
        if self.plan is not None:
            notes["preset"] = self.plan.preset.summary
        notes.setdefault("max_steps", "optimizer steps; null trains num_train_epochs epochs (TRL's 3)")
        notes.setdefault("budget_gb", "the card's nominal GB per device (RAM on CPU); null: not checked")
        notes.setdefault("answer_kind", "how answers compare: number, math, choice, text; null: chosen from the data")
        data = self.to_dict()
        lines = _header(self, str(path) if path is not None else "recipe.yaml")
        run = list(data)[: list(data).index("dtype")]  # model ... max_steps: the fields before the weights' load
        lines += [_line(key, data[key], notes.get(key)) for key in run]
        lines += ["", "# how the weights load (from_pretrained)", _line("dtype", data["dtype"], notes.get("dtype"))]
        lines += _block("quantization", data["quantization"], notes, first_note="quantization")
        lines += ["", "# LoRA (peft.LoraConfig); null: every weight trains"]
        lines += _block("lora", data["lora"], notes, note_prefix="lora.")
        lines += ["", "# grpo-lite's trainer on top of TRL's (plain TRL has neither)"]
        own = ("update_rounding", "shared_prefix", "stop_strings")
        lines += [_line(key, data[key], notes.get(key)) for key in own]
        lines += ["", "# GRPOConfig, verbatim (output_dir, seed and max_steps come from the run)", "trl:"]
        first_default = next((key for key in data["trl"] if key in RUN), None)
        for key, value in data["trl"].items():
            if key == first_default:
                lines.append("  # not about memory: grpo-lite's run defaults (each one's reason: grpo-lite plan)")
            lines.append(_line(key, value, notes.get(f"trl.{key}"), indent=1))
        return "\n".join(lines) + "\n"

    @classmethod
    def from_yaml(cls, text: str, *, source: str = "the recipe") -> Recipe:
        """Parse the YAML text of a recipe (see :meth:`from_dict` for the errors)."""
        return cls.from_dict(load_yaml(text, source), source=source)

    def write(self, path: str | os.PathLike) -> Path:
        """Write :meth:`to_yaml` to ``path`` (atomically) and return it.

        Raises:
            OutputDirError: ``path`` is a folder, or the file cannot be written there (read-only, a file in the way).
        """
        out = Path(path)
        if out.is_dir():
            raise OutputDirError(f"{out} is a folder: give the recipe a file name, e.g. {out / 'recipe.yaml'}")
        try:
            return write_text(out, self.to_yaml(out))
        except OSError as exc:
            raise OutputDirError(
                f"cannot write the recipe to {out}: {exc.strerror or exc}; pass a path in a folder you can write to"
            ) from None

    @classmethod
    def read(cls, path: str | os.PathLike) -> Recipe:
        """Read a recipe file.

        Raises:
            ConfigError: the file is missing or a folder, not UTF-8 or not YAML (one line naming the file, the line and
                the key), or holds an invalid recipe (naming the key and the file).
        """
        p = Path(path)
        if p.is_dir():
            yamls = sorted(q.name for q in p.glob("*.yaml"))[:3]
            inside = f" (it holds {', '.join(yamls)})" if yamls else ""
            raise ConfigError(
                f"recipe file {p} is a folder{inside}; pass a recipe file (YAML), or write one with grpo-lite plan "
                f"MODEL --budget-gb N --write {p / 'recipe.yaml'}"
            )
        return cls.from_dict(read_mapping(p), source=str(p))

    # ---- plain TRL ---------------------------------------------------------------------------------
    def grpo_settings(self, output_dir: str | os.PathLike = "runs/recipe", **overrides: Any) -> dict[str, Any]:
        """``GRPOConfig`` keyword arguments: :attr:`trl`, the output folder, the seed and max_steps, then ``overrides``."""
        return {
            **self.trl,
            "output_dir": str(output_dir),
            "seed": self.seed,
            "max_steps": -1 if self.max_steps is None else self.max_steps,
            **overrides,
        }

    def grpo_config(self, output_dir: str | os.PathLike = "runs/recipe", **overrides: Any) -> Any:
        """TRL's ``GRPOConfig`` with every setting of the recipe (``overrides`` win).

        Raises:
            ConfigError: TRL rejects the settings (its message included).
        """
        return make_grpo_config(self.grpo_settings(output_dir, **overrides))

    def lora_config(self) -> Any:
        """PEFT's ``LoraConfig`` of the recipe, or None when every weight trains."""
        return lora_config(self.lora)

    def from_pretrained_kwargs(self, device_map: Any = None) -> dict[str, Any]:
        """``AutoModelForCausalLM.from_pretrained`` keyword arguments: the dtype and a ``BitsAndBytesConfig``."""
        return from_pretrained_kwargs(self.dtype, self.quantization, device_map=device_map)


def make_grpo_config(settings: dict[str, Any]) -> Any:
    """``trl.GRPOConfig(**settings)``, TRL's refusal turned into a ConfigError that quotes it."""
    from trl import GRPOConfig

    try:
        with warnings.catch_warnings():  # TRL still declares gradient_checkpointing; transformers 5 renamed it
            warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*deprecated", category=FutureWarning)
            return GRPOConfig(**settings)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"TRL rejected the settings: {exc}") from exc


# ---- helpers --------------------------------------------------------------------------------------
def _typed_fields(data: dict[str, Any], source: str) -> dict[str, Any]:
    """A recipe mapping with each value typed; a message names the file, the key and the value as written."""
    from grpo_lite.recipe.costs import show_value

    def typed_as(path: str, key: str, value: Any) -> Any:
        return typed(key, value, optional=key == "max_steps", written=f"{source}: {path}: {show_value(value)}")

    values = {key: value if key in ("trl", "lora") else typed_as(key, key, value) for key, value in data.items()}
    _check_run_owned(values.get("trl") or {}, f"{source}: trl")
    refuse_credentials(values.get("trl") or {}, f"{source}: trl: ")  # before a message could show its value
    values["trl"] = {k: typed_as(f"trl.{k}", k, v) for k, v in (values.get("trl") or {}).items()}
    try:
        check_overrides(values["trl"])  # unknown names (with the closest valid one) and ranges
    except ConfigError as exc:
        raise ConfigError(f"{source}: trl: {exc}") from None
    if values.get("lora") is not None:
        _check_lora_keys(values["lora"], f"{source}: lora")
        values["lora"] = {
            k: typed_as(f"lora.{k}", _LORA_ARGUMENTS[k], v) if k in _LORA_ARGUMENTS else v
            for k, v in values["lora"].items()
        }
        for k, v in values["lora"].items():  # the ranges train()'s lora_* arguments have, named as the file names them
            check(_LORA_ARGUMENTS.get(k, ""), v, written=f"{source}: lora.{k}: {v!r}", named=k, sep=": ")
    for key, value in values.items():  # grpo-lite's own (max_steps: null trains num_train_epochs epochs)
        if key not in ("trl", "lora"):
            check(key, value, written=f"{source}: {key}: {value!r}", sep=": ")
    return values


def _without_removed(data: dict[str, Any], source: str) -> dict[str, Any]:
    """A recipe of 0.5 with ``problem_choice: 'off'`` (what every run does now; YAML reads a bare ``off`` as False)
    without it, and a note; another value of it is the error :func:`~grpo_lite.recipe.values.refuse_removed` raises."""
    if data.get("problem_choice", "off") not in ("off", False):
        refuse_removed(data, f"{source}: ")
    if "problem_choice" in data:
        warnings.warn(
            f"{source}: problem_choice: off is read and dropped: problem_choice was removed in grpo-lite 0.6.0 "
            "(docs/vs_trl.md) and every run samples its problems in TRL's order, as off did; delete the line",
            stacklevel=4,
        )
    return {key: value for key, value in data.items() if key != "problem_choice"}


def _check_run_owned(trl: dict[str, Any], where: str) -> None:
    """Refuse grpo-lite's own settings under ``trl:``, where they would be ignored (``dtype`` is read there too)."""
    top_level = {f.name for f in dataclasses.fields(Recipe)} - {"trl", "plan", "dtype"}
    for key, value in trl.items():
        if key in _RUN_OWNED_TRL or key in top_level:
            from grpo_lite.recipe.costs import show_value

            where_to = _RUN_OWNED_TRL.get(key, "write it at the top level of the recipe ({key}: {value})")
            raise ConfigError(
                f"{where}: {key}: {show_value(value):.60} is grpo-lite's own setting, not read under trl:; "
                + where_to.format(key=key, value=show_value(value))
            )


def _check_lora_keys(lora: dict[str, Any], where: str) -> None:
    """Refuse grpo-lite's own settings, GRPOConfig's and train()'s ``lora_*`` names under ``lora:``, which holds
    peft.LoraConfig's arguments: read there, they would reach the LoRA config, not the run."""
    from trl import GRPOConfig  # heavy: TRL (already loaded by the trl: check)

    from grpo_lite.recipe.costs import show_value

    top_level = {f.name for f in dataclasses.fields(Recipe)} - {"trl", "lora", "plan"}
    grpo_config = {f.name for f in dataclasses.fields(GRPOConfig)}
    for key, value in lora.items():
        shown = show_value(value)
        if key in _RUN_OWNED_TRL or key in top_level:
            what = "grpo-lite's own setting"
            where_to = _RUN_OWNED_TRL.get(key, "write it at the top level of the recipe ({key}: {value})")
        elif key in LORA_KEYS and key not in _LORA_ARGUMENTS:  # lora_r; lora_alpha is peft's name too
            what, where_to = "train()'s name of a LoRA setting", f"write it as {LORA_KEYS[key]}: {{value}} under lora:"
        elif key in grpo_config:
            what, where_to = "a GRPOConfig setting", "write it under trl: ({key}: {value})"
        else:
            continue
        raise ConfigError(
            f"{where}: {key}: {shown:.60} is {what}, not a peft.LoraConfig argument; "
            + where_to.format(key=key, value=shown)
        )


def _copy(value: Any) -> Any:
    """A deep copy of plain data (dicts, lists, tuples as lists)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value


def _style_name(style: Any) -> Any:
    """A PromptStyle as its registered name when it has one (None: the default style's name)."""
    if style is None:
        return TRAINER.prompt_style
    if isinstance(style, PromptStyle):
        return next((name for name, (known, _) in PROMPT_STYLES.items() if known == style), style)
    return style


def _style_object(value: Any, source: str = "the recipe") -> PromptStyle:
    """The PromptStyle a recipe's ``prompt_style`` names or spells out (``source``: the file, named by its errors)."""
    if isinstance(value, PromptStyle):
        return value
    if value is None:
        return PromptStyle()
    if isinstance(value, str):
        return PromptStyle.named(value)
    if isinstance(value, dict):
        fields = dict(value)
        names = [f.name for f in dataclasses.fields(PromptStyle)]
        _known_fields(fields, names, f"{source}: prompt_style", f"or a style name ({', '.join(PROMPT_STYLES)})")
        try:
            if "examples" in fields:  # a bad example is the same one line as a bad field
                example = [f.name for f in dataclasses.fields(Example)]
                for i, e in enumerate(fields["examples"]):
                    if isinstance(e, dict):
                        _known_fields(
                            e, example, f"{source}: prompt_style: examples[{i}]", "each example has all three"
                        )
                fields["examples"] = tuple(Example(**e) for e in fields["examples"])
            return PromptStyle(**fields)
        except TypeError as exc:
            raise ConfigError(
                f"{source}: prompt_style: {exc}; give a name ({', '.join(PROMPT_STYLES)}) or the fields "
                "system_prompt, one_shot, prefill, examples"
            ) from None
    raise ConfigError(
        f"{source}: prompt_style must be a name ({', '.join(PROMPT_STYLES)}) or a mapping, got {value!r:.60}"
    )


def _known_fields(fields: dict[str, Any], names: list[str], where: str, alternative: str) -> None:
    """Raise ConfigError naming ``where``, the unknown fields (with the closest valid ones) and the valid ones."""
    unknown = [k for k in fields if k not in names]
    if unknown:
        raise ConfigError(
            f"{where}: unknown field(s) {closest_names(unknown, names)}; write the fields {', '.join(names)}, "
            f"{alternative}"
        )


def _line(key: str, value: Any, note: str | None = None, indent: int = 0) -> str:
    from grpo_lite.recipe.costs import show_value

    text = f"{'  ' * indent}{key}: {show_value(value)}"
    return f"{text}  # {note}" if note else text


def _block(
    name: str, value: dict[str, Any] | None, notes: dict[str, str], *, note_prefix: str = "", first_note: str = ""
) -> list[str]:
    """A mapping one key per line (or ``name: null``); the first line carries ``first_note``'s note."""
    if not value:
        return [_line(name, value)]
    lines = [f"{name}:"]
    for i, (key, item) in enumerate(value.items()):
        note = notes.get(first_note) if first_note and i == 0 else notes.get(f"{note_prefix}{key}")
        lines.append(_line(key, item, note, indent=1))
    return lines


def _header(recipe: Recipe, path: str) -> list[str]:
    """The comment lines on top: what it is, the plan's peak and budget, and the commands that run it."""
    from grpo_lite.recipe import costs

    plan = recipe.plan
    name = plan.model.name if plan is not None else recipe.model
    lines = [f"# grpo-lite recipe: {name}, preset {recipe.preset} (grpo-lite {__version__})"]
    if plan is not None:
        card = (
            "no budget (CPU)"
            if plan.budget_gb is None
            else f"{plan.budget_gb:g} GB of RAM"
            if plan.device == "cpu"
            else f"{'%d x ' % plan.num_processes if plan.num_processes > 1 else ''}{plan.budget_gb:g} GB card"
        )
        lines += [
            f"# budget: {card}; {costs.peak_line(plan)}",
            f"#   for prompts of {plan.max_prompt_length} tokens (train() measures yours and checks again)",
            f"# peak components: {costs.components_line(plan)}",
        ]
    lines += [
        "#",
        "# Run it (flags and --set override the file, as in TRL's CLI):",
        f"#   grpo-lite train --config {path}",
    ]
    if recipe.num_processes > 1:
        from grpo_lite.scale.distributed import launch_command

        launch = launch_command(
            ["train", "--config", path], recipe.num_processes, recipe.sharding, cuda=recipe.device == "cuda"
        )
        lines.append(f"#   ({recipe.num_processes} processes, {recipe.sharding}: it runs {' '.join(launch)})")
    lines += [
        f"#   grpo-lite train --config {path} --max-steps 200 --set learning_rate=2e-6",
        f"#   python -c 'import grpo_lite; grpo_lite.train(config=\"{path}\")'",
        "# Your own TRL script: grpo_lite.Recipe.read(FILE).grpo_config(), .lora_config(),",
        "#   .from_pretrained_kwargs() (docs/recipes.md). Each note: the memory the setting costs or saves",
        "#   against the alternative named after 'vs' (grpo_lite.memory.estimate), then its trade-off.",
        "",
    ]
    return lines
