"""``grpo-lite train`` in ``trl grpo``'s form: a ``trl grpo`` command line or ``--config`` YAML, with ``trl grpo``
replaced by ``grpo-lite train``, parsed by TRL's own ``TrlParser`` over ``trl grpo``'s argument dataclasses plus
:class:`grpo_lite.settings.LiteArguments` (what grpo-lite adds), and run as one :func:`grpo_lite.train` call.

TRL's precedence: the YAML's values are the defaults, the flags win. Every GRPOConfig field the user wrote (in the
YAML or on the command line, even at TRL's default) is passed as written; a field left out is the plan's.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import typing
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_lite import settings
from grpo_lite.defaults import STEP
from grpo_lite.errors import ConfigError, DataError
from grpo_lite.recipe.values import closest_names, read_mapping
from grpo_lite.settings import PLANNER, Method
from grpo_lite.training.report.quiet import quiet_libraries

if TYPE_CHECKING:  # pragma: no cover
    from trl import TrlParser

USAGE = (
    "grpo-lite train --model_name_or_path MODEL [--dataset_name DATA] [--reward_funcs NAME ...] [--config job.yaml] "
    "[any trl grpo flag] [--budget_gb GB] (grpo-lite train --model_name_or_path M --help lists them)"
)


# grpo-lite's settings the trl form does not take as flags of their own: trl grpo spells them (--model_name_or_path,
# --dataset_name, --reward_funcs; ModelConfig's --lora_r... and --use_peft make the LoRA), or the launch sets them
NOT_FLAGS = ("model", "dataset", "rewards", "device", "num_processes", "sharding")


def _lite_arguments(taken: set[str]) -> type:
    """:class:`grpo_lite.settings.LiteArguments` as HfArgumentParser reads a dataclass: the fields trl grpo's own
    dataclasses (``taken``) do not declare, each with its default and help (the parser passes the metadata to
    argparse, which takes no other key)."""
    lite = settings.LiteArguments
    hints = typing.get_type_hints(lite)
    rows = [
        (f.name, hints[f.name], _parser_field(f))
        for f in dataclasses.fields(lite)
        if f.name not in taken and f.name not in NOT_FLAGS and f.metadata["goes"] != "lora"
    ]
    return dataclasses.make_dataclass("LiteArguments", rows)


def _parser_field(f: dataclasses.Field[Any]) -> Any:
    """``f`` with its help alone; PLANNER's default is None, and a tuple default a list (the parser's nargs="+")."""
    meta = {"help": f.metadata["help"]}
    if isinstance(f.default, tuple):
        return field(default_factory=lambda: list(f.default), metadata=meta)  # type: ignore[arg-type]
    return field(default=None if f.default is PLANNER else f.default, metadata=meta)


# A grpo-lite command inside a message (grpo-lite plan MODEL --budget-gb N ...) is written in its own form: kept
_COMMAND = re.compile(r"(grpo-lite (?:train|plan|eval|export|demo|presets)\b[^;),]*)")


def _spelled_rules() -> list[tuple[str, Any]]:
    """grpo-lite's spelling of a change -> trl grpo's, in order: the launch, the rewards, a GRPOConfig field (a flag
    of its own), the method as ModelConfig's flags, then each of grpo-lite's own flags by its field's name."""
    own = [
        (rf"{re.escape(s.flag)}(?![\w-])", f"--{name}")
        for name, s in settings.flags().items()
        if s.flag is not None and s.flag != f"--{name}" and name not in NOT_FLAGS
    ]
    return [
        ("--num-processes N with --sharding", "accelerate launch --num_processes N -m grpo_lite train ..., with an "
         "accelerate --config_file for ZeRO or FSDP"),
        (r"--reward (\S+)((?: --reward \S+)*)", lambda m: "--reward_funcs " + m[0].replace("--reward ", "")),
        (r"--set (\w+)=([^\s,;)]*)", r"--\1 \2"),
        (r"pass --method lora\b", "pass --use_peft"),
        (r"pass --method qlora\b", "pass --use_peft --load_in_4bit"),
        (r"--dataset(?![\w-])", "--dataset_name"),
        *own,
    ]  # fmt: skip


def trl_spelling(text: str) -> str:
    """A message's advice as ``grpo-lite train`` in trl grpo's form takes it: ``--set key=value`` is ``--key value``,
    ``--budget-gb`` is ``--budget_gb``, ``--reward a --reward b`` is ``--reward_funcs a b``; a ``grpo-lite``
    command it quotes stays in its own form (:data:`grpo_lite.errors.SPELLING` is set to this for the run).

    >>> trl_spelling("lower it (--set max_completion_length=256; Python: max_completion_length=256)")
    'lower it (--max_completion_length 256; Python: max_completion_length=256)'
    >>> trl_spelling("--budget-gb 24, or check: grpo-lite plan M --budget-gb 24; --reward a --reward b")
    '--budget_gb 24, or check: grpo-lite plan M --budget-gb 24; --reward_funcs a b'
    """
    parts, rules = _COMMAND.split(text), _spelled_rules()
    for i in range(0, len(parts), 2):  # the odd parts are grpo-lite commands
        for pattern, spelled in rules:
            parts[i] = re.sub(pattern, spelled, parts[i])
    return "".join(parts)


# GRPOConfig fields that are train()'s own arguments of the same name
OWN_ARGUMENTS = ("output_dir", "seed", "max_steps")


def _script_types() -> tuple[Any, Any]:
    with quiet_libraries():  # TRL's first import may bring in bitsandbytes, whose CPU lookup is noise
        from trl import ModelConfig  # light: TRL's lazy module, the trainer not imported
        from trl.scripts.grpo import GRPOScriptArguments

    return GRPOScriptArguments, ModelConfig


def _flag_names(arg: str) -> str:
    return arg[2:].split("=", 1)[0].replace("-", "_")


def is_trl_form(args: list[str]) -> bool:
    """Whether ``grpo-lite train``'s arguments are ``trl grpo``'s: they start with a flag and name one of its script
    or model arguments (``--model_name_or_path``), on the command line or as a key of the ``--config`` YAML."""
    if not args or not args[0].startswith("--"):
        return False
    names = {f.name for cls in _script_types() for f in dataclasses.fields(cls)}
    if any(_flag_names(arg) in names for arg in args if arg.startswith("--")):
        return True
    if "--config" not in args[:-1]:
        return False
    try:  # read as a recipe is read: bounded, no alias bomb, no key twice
        keys = read_mapping(Path(args[args.index("--config") + 1]))
    except ConfigError:  # the recipe reader says what is wrong with it
        return False
    recipe_keys = names.difference(settings.settings())  # a recipe's dtype is not trl grpo's
    return isinstance(keys, dict) and bool(recipe_keys.intersection(keys))


def _parser() -> TrlParser:
    from trl import TrlParser  # heavy: TRL's trainer

    return TrlParser(_types(), prog="grpo-lite train", usage=USAGE)


def _types() -> list[Any]:
    """trl grpo's argument dataclasses in its order (script, GRPOConfig, model, dataset mixture), then grpo-lite's."""
    from trl import DatasetMixtureConfig, GRPOConfig  # heavy: TRL's trainer

    script, model = _script_types()
    theirs = (script, GRPOConfig, model, DatasetMixtureConfig)
    return [*theirs, _lite_arguments({f.name for c in theirs for f in dataclasses.fields(c)})]


def _field_names(parser: TrlParser) -> list[str]:
    return [f.name for cls in parser.dataclass_types for f in dataclasses.fields(cls) if f.init]


def parse(argv: list[str]) -> tuple[dict[str, Any], set[str]]:
    """TrlParser's reading of ``argv`` (``--config FILE``'s YAML as the defaults, the flags over them) as one
    mapping of every field, and the names the user wrote. An unknown flag or key is argparse's error: one line
    naming the closest flag, after the usage, exit code 2."""

    parser, args, config = _parser(), list(argv), {}
    if {"-h", "--help"} & set(args):  # argparse prints the help and exits: with the defaults, not the marks below
        parser.parse_known_args(args)
    if "--config" in args:
        at = args.index("--config")
        if at + 1 == len(args):
            parser.error("argument --config: expected one argument")
        config = read_mapping(Path(args.pop(at + 1)))
        args.pop(at)
        if not isinstance(config, dict):
            parser.error(f"--config {argv[at + 1]}: the file must hold a YAML mapping of trl grpo's arguments")
        env = config.pop("env", {})  # TrlParser's env: the variables the job runs with
        if not isinstance(env, dict):
            parser.error(f"--config {argv[at + 1]}: env must be a mapping of variable names to values")
        os.environ.update({str(key): str(value) for key, value in env.items()})
    names = _field_names(parser)
    usual = {name: parser.get_default(name) for name in names}
    unset = object()  # a flag's value only where one is written (not text: argparse would type it)
    parser.set_defaults(**dict.fromkeys(names, unset))
    written = {name for name, value in vars(parser.parse_known_args(args)[0]).items() if value is not unset}
    parser.set_defaults(**usual)
    unknown = [key[2:] for key in parser.set_defaults_with_config(**config)[::2]]
    if unknown:
        parser.error(f"--config {argv[argv.index('--config') + 1]}: unknown keys {closest_names(unknown, names)}")
    unknown = parser.parse_known_args(args)[1]
    if unknown:
        close = difflib.get_close_matches(unknown[0].split("=")[0], [f"--{name}" for name in names], n=1)
        parser.error(f"unrecognized arguments: {' '.join(unknown)}" + "".join(f" (did you mean {c}?)" for c in close))
    return vars(parser.parse_known_args(args)[0]), written | set(config)


def train_arguments(argv: list[str]) -> dict[str, Any]:
    """``trl grpo``'s arguments as the keyword arguments of one :func:`grpo_lite.train` call: the model, the data,
    the rewards and the LoRA as ``trl grpo`` builds them; every GRPOConfig field written, as written; grpo-lite's own
    (:class:`~grpo_lite.settings.LiteArguments`). What grpo-lite cannot plan is one line naming the flag.

    Raises:
        ConfigError: no model, or a flag grpo-lite cannot plan (8-bit weights, another 4-bit format, streaming).
        DataError: a dataset config or split that cannot be loaded.
    """
    from trl import GRPOConfig

    values, written = parse(argv)
    script_type, model_type = _script_types()
    script, model = (_instance(cls, values) for cls in (script_type, model_type))
    if model.model_name_or_path is None:
        raise ConfigError(
            "grpo-lite train needs --model_name_or_path MODEL (on the command line or in the --config file): a hub "
            "id, a local folder or a .gguf file"
        )
    _refuse_unplanned(values, written)
    lite = {f.name: values[f.name] for f in dataclasses.fields(_types()[-1])}
    trl = {f.name: values[f.name] for f in dataclasses.fields(GRPOConfig) if f.name in written}
    init = {"revision": model.model_revision} if "model_revision" in written else {}
    if model.attn_implementation is not None:
        init["attn_implementation"] = model.attn_implementation
    if init or isinstance(trl.get("model_init_kwargs"), str):  # as trl grpo builds it: the model's, then the written
        trl["model_init_kwargs"] = {**init, **_mapping("model_init_kwargs", trl.get("model_init_kwargs") or {})}
    if "dtype" in written:
        trl["dtype"] = model.dtype
    rewards = [script.reward_model_name_or_path] if script.reward_model_name_or_path else []
    rewards += script.reward_funcs or []
    kwargs = {**lite, **{key: trl.pop(key) for key in OWN_ARGUMENTS if key in trl}, **trl}
    mixture = _instance(_types()[3], values)
    if mixture.datasets:  # trl grpo's rule: the mixture, dataset_name ignored
        kwargs["dataset"] = _mixture(mixture, script.dataset_train_split)
    elif script.dataset_name is not None:
        kwargs["dataset"] = _dataset(script.dataset_name, script.dataset_config, script.dataset_train_split)
    if model.use_peft:
        from trl import get_peft_config

        kwargs["peft_config"] = get_peft_config(model)
    if model.load_in_4bit:
        kwargs["method"] = _four_bit_method(lite["method"])
    elif "use_peft" in written and not model.use_peft and lite["method"] is None:
        kwargs["method"] = "full"  # trl grpo's use_peft false: every weight trains (the planner fits full rungs)
    return {"model": model.model_name_or_path, "rewards": rewards or None, **kwargs}


def _mapping(name: str, value: Any) -> Any:
    """A dict field as a command line writes it, JSON text, read as TRL's ``TrainingArguments`` reads it."""
    try:
        return json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f'--{name} {value}: not JSON ({exc.msg}); write a mapping, e.g. \'{{"key": "value"}}\''
        ) from None


def _instance(cls: type, values: dict[str, Any]) -> Any:
    return cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.init})


# ``trl grpo`` flags grpo-lite cannot plan -> the one value it takes (what grpo-lite does), and why not another
UNPLANNED: dict[str, tuple[Any, str]] = {
    "load_in_8bit": (False, "grpo-lite plans 16/32-bit weights or 4-bit NF4 (--load_in_4bit, the qlora method), not "
                     "8-bit; use --load_in_4bit or drop it"),
    "bnb_4bit_quant_type": ("nf4", "grpo-lite's 4-bit weights are NF4 as its plan prices them; drop it"),
    "use_bnb_nested_quant": (STEP.double_quant, "grpo-lite's NF4 quantizes its scales as its plan prices them; drop "
                             "it"),
    "bnb_4bit_quant_storage": (None, "grpo-lite's NF4 storage is the one its plan prices; drop it"),
    "dataset_streaming": (False, "grpo-lite measures every prompt before it plans; drop it (or save a slice to a "
                          "file)"),
    "streaming": (False, "grpo-lite measures every prompt of the datasets: mixture before it plans; drop it"),
    "max_tool_calling_iterations": (None, "grpo-lite does not plan tool calls (trl grpo takes no tools either); drop "
                                    "it"),
}  # fmt: skip


def _refuse_unplanned(values: dict[str, Any], written: set[str]) -> None:
    for name, (taken, why) in UNPLANNED.items():
        if name in written and values[name] != taken:
            raise ConfigError(f"--{name}: {why}")


def _four_bit_method(method: Method | None) -> Method:
    """``--load_in_4bit``: grpo-lite's QLoRA (the method loads the weights in NF4 and trains a LoRA adapter)."""
    if method not in (None, "qlora"):
        raise ConfigError(
            f"--load_in_4bit loads the weights in 4 bits (the qlora method) but --method {method} is asked: drop one"
        )
    return "qlora"


def _dataset(name: str, config: str | None, split: str) -> Any:
    """``--dataset_name`` as train() takes it (a hub id, a name, a file or folder), or with a ``--dataset_config``
    or a split other than train, that split loaded as ``trl grpo`` loads it (``datasets.load_dataset``)."""
    if config is None and split == "train":
        return name
    from datasets import load_dataset  # heavy: datasets

    try:
        return load_dataset(name, name=config, split=split)
    except Exception as exc:  # offline, not cached, no such config or split: all mean "not loadable here"
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(
            f"--dataset_name {name} --dataset_config {config} --dataset_train_split {split}: cannot load it ({why}); "
            "save that split to a local jsonl file and pass its path as --dataset_name"
        ) from None


def _mixture(mixture: Any, split: str) -> Any:
    """trl grpo's dataset mixture (``datasets:`` in the YAML) loaded as it loads one (TRL's ``get_dataset``: each
    entry through ``datasets.load_dataset``, its columns and fractions, an optional test split), its ``split``.

    Raises:
        DataError: an entry does not load (a hub id offline: the hub's one line), or no such split.
    """
    from trl import get_dataset  # heavy: TRL

    from grpo_lite.data.loaders import hub_offline, is_hub_id, needs_hub

    try:
        loaded = get_dataset(mixture)
    except Exception as exc:  # offline, no such file or config, fractions set for some entries only
        hub = [entry.path for entry in mixture.datasets if is_hub_id(entry.path) and not Path(entry.path).exists()]
        if hub and hub_offline():
            instead = "write it as an entry of datasets: with path: json and data_files: train.jsonl"
            raise needs_hub(hub[0], "train", exc, f"datasets: path {hub[0]!r}", instead) from None
        why = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise DataError(
            f"datasets: the mixture does not load ({type(exc).__name__}: {why}); give each entry a path that "
            "datasets.load_dataset reads (a local folder, or path: json with data_files: FILE)"
        ) from None
    if split not in loaded:
        raise DataError(
            f"--dataset_train_split {split}: the datasets: mixture has the splits {', '.join(loaded)}; name one"
        )
    return loaded[split]
