"""Settings typed as TRL's own parser (``HfArgumentParser``) types them, and a recipe file read safely.

:func:`typed`: a field's type and choices read from its annotation as TRL's parser reads it (``"1e-5"`` becomes a
number; a list field takes a list). :func:`read_mapping`: UTF-8 and ``yaml.safe_load``, every failure one line.

>>> typed("learning_rate", "1e-5"), typed("num_generations", 4), typed("stop_strings", ["</answer>"])
(1e-05, 4, ['</answer>'])
>>> typed("stop_strings", "</answer>")
Traceback (most recent call last):
...
grpo_lite.errors.ConfigError: stop_strings='</answer>': stop_strings takes a list of text; e.g. stop_strings=['</answer>']
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import functools
import math
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from grpo_lite import settings as settings_module
from grpo_lite.errors import ConfigError
from grpo_lite.planning.candidates import LORA_KEYS
from grpo_lite.settings import PLANNER, check_written, where


@dataclass(frozen=True)
class Kind:
    """How TRL's parser (``HfArgumentParser``) types a field, read from its annotation as that parser reads it."""

    parse: Callable[[str], Any]  # text -> the value (the parser's ``type``)
    choices: tuple[Any, ...] | None  # a Literal's or an Enum's values
    many: bool  # a list (the parser's nargs="+")
    takes_none: bool
    default: Any
    only_text: bool  # annotated ``str`` alone (grpo-lite's model, preset): a list is not text


def _kind(f: dataclasses.Field[Any], hint: Any, own: bool) -> Kind:
    """The :class:`Kind` of a field annotated ``hint``, as ``HfArgumentParser._parse_dataclass_field`` types it."""
    from transformers.hf_argparser import make_choice_type_function, string_to_bool

    args = typing.get_args(hint)
    takes_none = type(None) in args or (not own and f.default is None)  # GRPOConfig's ``x: int = None`` takes None
    only_text = own and [a for a in args or (hint,) if a is not type(None)] == [str]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # Optional[X] is X; X | str is X
        if type(None) not in args:
            hint = args[0] if args[1] is str else args[1]
        else:
            hint = bool if bool in args else args[0] if args[1] is type(None) else args[1]
    origin, choices, many = typing.get_origin(hint), None, False
    if origin is typing.Literal or (isinstance(hint, type) and issubclass(hint, Enum)):
        choices = typing.get_args(hint) if origin is typing.Literal else tuple(x.value for x in hint)
        parse: Any = make_choice_type_function(list(choices))
    elif hint is bool:
        parse = string_to_bool
    elif isinstance(origin, type) and issubclass(origin, list):
        many, parse = True, typing.get_args(hint)[0]
    else:
        parse = hint
    default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    default = None if default in (dataclasses.MISSING, PLANNER) else default
    return Kind(parse, choices, many, takes_none, default, only_text)


@functools.lru_cache(maxsize=1)
def _kinds(lite: type) -> dict[str, Kind]:
    """Setting -> its :class:`Kind`: grpo-lite's own (:class:`~grpo_lite.settings.LiteArguments`, those TRL's parser
    types) and GRPOConfig's fields."""
    from trl import GRPOConfig

    out = {}
    for cls in (lite, GRPOConfig):  # GRPOConfig's seed and max_steps type train()'s, as TRL's parser reads them
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if f.init and f.metadata.get("typed", True):
                out[f.name] = _kind(f, hints[f.name], own=cls is lite)
    return out


def kind(key: str) -> Kind | None:
    """The :class:`Kind` of the setting ``key``; None for a name that is neither grpo-lite's nor GRPOConfig's."""
    return _kinds(settings_module.LiteArguments).get(key)


# what a non-text value must be for a field's type (by its name; text goes through the type); a field of several
# types (``str | list[str]``) is typed as text, its lists and mappings pass to TRL
_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "int": ((int,), "a whole number"),
    "float": ((int, float), "a number"),
    "str": ((list, dict), "text"),
    "string_to_bool": ((bool,), "True or False"),
}
_NOT_OF_TYPE = (ValueError, TypeError, argparse.ArgumentTypeError)  # what a type or _one raises for a value not of it
_PLANNER_CHOICES = {"optim"}  # choices the planner checks against what it models (a shorter, truer list)
# text fields that TRL also takes as True or False: GRPOConfig.__post_init__ maps scale_rewards True to "group" and
# False to "none" (Dr. GRPO recipes write false)
_ALSO_BOOL = {"scale_rewards"}


def none_is_text(key: str) -> bool:
    """Whether ``key`` is a text field that does not take None, where TRL's parser reads ``none`` as the text
    (``--set scale_rewards=none`` is TRL's "none")."""
    found = kind(key)
    return found is not None and found.parse is str and not found.many and not found.takes_none


def _what(found: Kind) -> str:
    if found.choices is not None:
        return "one of " + ", ".join(map(str, found.choices))
    name = getattr(found.parse, "__name__", "a value")
    return _KINDS[name][1] if name in _KINDS else name


def _one(key: str, found: Kind, value: Any) -> Any:
    """One value through the field's type; ValueError when it is not of it."""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, str):
        value = found.parse(value)  # TRL's parser: text -> the type
    elif found.only_text:  # model, preset: a list would reach the loader (a TypeError)
        raise ValueError
    elif isinstance(value, bool) and key in _ALSO_BOOL:
        return value
    elif (shape := _KINDS.get(getattr(found.parse, "__name__", ""))) is not None:
        if not isinstance(value, shape[0]) or (isinstance(value, bool) and bool not in shape[0]):  # True is an int
            raise ValueError
    if found.choices is not None and key not in _PLANNER_CHOICES and value not in found.choices:
        raise ValueError
    return value


def typed(key: str, value: Any, *, optional: bool = False, written: str | None = None) -> Any:
    """``value`` parsed as the setting ``key`` (a GRPOConfig field or a :class:`~grpo_lite.settings.LiteArguments`
    one).

    Args:
        optional: None is accepted even where the field's type does not take it (a recipe's ``max_steps``).
        written: how the user wrote it, for the message. Default: ``key=value``.

    Returns:
        The value, typed; an unknown key's value unchanged.

    Raises:
        ConfigError: the value is not of the field's type or choices (naming what it takes and a value that works).
    """
    found = kind(key)
    if found is None or (value is None and (found.takes_none or optional)):
        return value
    try:
        if value is None or (found.many and not isinstance(value, (list, tuple))):
            raise ValueError
        result = [_one(key, found, v) for v in value] if found.many else _one(key, found, value)
    except _NOT_OF_TYPE:
        pass
    else:
        if key == "stop_strings" and "" in result:  # "" is found at every position: each completion would end at once
            raise ConfigError(
                f"{written or f'{key}={value!r}'}: an empty stop string ends every completion at its first token; "
                "remove it (stop_strings: [] samples to the length limit)"
            )
        return result
    written = written or f"{key}={value!r}"
    what = _what(found)
    what = f"a list of {what.removeprefix('a ')}{'s' if what.endswith('number') else ''}" if found.many else what
    if found.choices is not None and value is not None and not found.many:
        raise ConfigError(f"{written} is not valid; choose {what}{_example(key, found, value)}")
    what = what.replace(" or ", ", ") + " or None" if found.takes_none or optional else what
    raise ConfigError(f"{written}: {key} takes {what}{_example(key, found, value)}")


def _example(key: str, found: Kind, value: Any) -> str:
    """``; e.g. key=<a value that works>``: the value in a list (when it is of the type), or the field's default."""
    if found.many and value == "":  # an empty --set value: the empty list, not a list of the empty text
        return f"; e.g. {key}=[] (an empty list)"
    if found.many and not isinstance(value, (list, tuple)):
        with contextlib.suppress(*_NOT_OF_TYPE):
            return f"; e.g. {key}={[_one(key, found, value)]!r}"
    setting = settings_module.settings().get(key)
    rule = setting.range if setting is not None else None
    default = rule.example if rule is not None else found.default  # TRL's max_steps=-1 is refused here
    if isinstance(default, Enum):
        default = default.value
    if default is None or isinstance(default, (list, tuple, dict)):
        return ""
    return f"; e.g. {key}={default!r}"


def read_mapping(path: Path) -> Any:
    """The YAML of a recipe file, read safely (:func:`load_yaml`).

    Raises:
        ConfigError: the file is missing or unreadable, not UTF-8 or not YAML (naming the file, the line and the key).
    """
    if not path.exists():
        raise ConfigError(
            f"recipe file {path} does not exist; write one with grpo-lite plan MODEL --budget-gb N --write {path}"
        )
    if not path.is_file():
        raise ConfigError(
            f"recipe file {path} is not a regular file (a device, a pipe or a socket); pass a recipe file (YAML) "
            "written with grpo-lite plan MODEL --budget-gb N --write FILE"
        )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the recipe file {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        text = raw.decode("utf-8", errors="replace")
        raise ConfigError(
            f"{path}, line {line}{_key_at(text, line)}: byte {raw[exc.start]:#x} is not UTF-8; save the "
            "file as UTF-8 (or remove the character)"
        ) from None
    return load_yaml(text, str(path))


MAX_YAML_NODES = 100_000  # values a document may expand to, aliases counted as copies: a recipe holds a few hundred
MAX_YAML_CHARS = 100_000  # a recipe's length: a few thousand characters; more is not a recipe (and is slow to read)


def load_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load(text)``; an error is one line naming ``source``, the line and the key. A text longer than
    :data:`MAX_YAML_CHARS`, a ``!!python`` tag, a key written twice, an alias bomb (:func:`_check_nodes`) and nesting
    too deep for the reader are refused before anything is built.
    """
    import yaml

    if len(text) > MAX_YAML_CHARS:
        raise ConfigError(
            f"{source}: {len(text):,} characters is too long for a recipe (at most {MAX_YAML_CHARS:,}; a recipe holds "
            "a few hundred values); keep the settings and put long lists (a dataset, prompts) in their own files"
        )
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, text, source)
        return loader.construct_document(node)
    except RecursionError:
        raise ConfigError(
            f"{source}: the YAML nests too deep to read; a recipe's values are at most a few levels deep"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "context_mark", None) or getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if isinstance(exc, yaml.constructor.ConstructorError):
            problem += " (recipes hold plain values: tags such as !!python/... are refused, never run)"
        raise ConfigError(f"{source}, line {line}{_key_at(text, line)}: not valid YAML: {problem}") from None
    finally:
        loader.dispose()


def _check_nodes(root: Any, text: str, source: str) -> None:
    """Refuse a YAML node graph whose aliases expand past :data:`MAX_YAML_NODES` values, that holds itself (each
    node's size counted once: an alias is the same node object again), or a mapping that writes a key twice."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    aliased = False  # a node met twice: the document repeats values through aliases

    def refuse(node: Any, what: str) -> ConfigError:
        line = node.start_mark.line + 1
        return ConfigError(
            f"{source}, line {line}{_key_at(text, line)}: {what}; write the values out (a recipe holds a few "
            "hundred at most)"
        )

    def size(node: Any) -> int:
        nonlocal aliased
        key = id(node)
        if key in sizes:
            aliased = True
            return sizes[key]
        if key in open_nodes:
            raise refuse(node, "an alias refers to the value that holds it (a value inside itself)")
        open_nodes.add(key)
        if isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            _check_keys(node, text, source)
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        else:
            total = 1
        open_nodes.discard(key)
        if total > MAX_YAML_NODES:
            what = "its aliases expand to" if aliased else "it holds"
            raise refuse(node, f"{what} more than {MAX_YAML_NODES:,} values{' (an alias bomb)' if aliased else ''}")
        sizes[key] = total
        return total

    size(root)


def _check_keys(node: Any, text: str, source: str) -> None:
    """Refuse a mapping that writes a key twice (YAML would keep the last one silently), naming the key and lines."""
    seen: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if key.tag == "tag:yaml.org,2002:merge" or not isinstance(key.value, str):
            continue  # ``<<: *base`` merges are YAML's own, repeatable
        line = key.start_mark.line + 1
        if (key.tag, key.value) in seen:
            raise ConfigError(
                f"{source}, lines {seen[key.tag, key.value]} and {line}: the key {key.value!r} is written twice (YAML "
                "would keep the last silently); keep one"
            )
        seen[key.tag, key.value] = line


def _key_at(text: str, line: int) -> str:
    """`` (key)``: the top-level key whose value holds ``line`` (1-based), or nothing."""
    for row in reversed(text.splitlines()[:line]):
        if row[:1].isalpha() and ":" in row:
            return f" ({row.split(':', 1)[0].strip()})"
    return ""


# ---- names and ranges: what TRL's parser does not check ---------------------------------------------
def check_config_keys(settings: dict[str, Any], also: Sequence[str] = ()) -> None:
    """Raise ConfigError for keys that are not GRPOConfig fields (or in ``also``), with the closest valid name."""
    from trl import GRPOConfig

    valid = {f.name for f in dataclasses.fields(GRPOConfig)} | set(also)
    unknown = sorted(set(settings) - valid)
    if unknown:
        load = where("load")
        raise ConfigError(
            f"unknown training setting(s): {closest_names(unknown, [*valid, *LORA_KEYS, *load])}; pass "
            f"GRPOConfig/TrainingArguments fields, LoRA settings ({', '.join(LORA_KEYS)}) or the weights' dtype "
            f"({', '.join(load)})"
        )


def closest_names(unknown: Sequence[Any], valid: Sequence[str]) -> str:
    """``'presets' (did you mean 'preset'?), 'x'``: each unknown name with the closest valid one, when one is close.

    >>> closest_names(["lerning_rate", "zzz"], ["learning_rate", "seed"])
    "'lerning_rate' (did you mean 'learning_rate'?), 'zzz'"
    """
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), sorted(valid), n=1)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return ", ".join(hints)


def refuse_removed(settings: Mapping[str, Any], where: str = "") -> None:
    """Raise the ConfigError of ``problem_choice``, removed in 0.6.0 for want of a measured win, when it is passed.

    >>> refuse_removed({"problem_choice": "learnable"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    grpo_lite.errors.ConfigError: problem_choice='learnable': problem_choice was removed in grpo-lite 0.6.0: it ...
    """
    if "problem_choice" in settings:
        raise ConfigError(
            f"{where}problem_choice={settings['problem_choice']!r}: problem_choice was removed in grpo-lite 0.6.0: it "
            "measured no win (docs/vs_trl.md: with it on, 201 against 172 CPU seconds to the target accuracy on one "
            "task and 167 against 175 on the other, and a lower accuracy at the budget on both); remove it: every run "
            "samples its problems in TRL's order, as problem_choice='off' did"
        )


# GRPOConfig fields that publish, by a word of their names: push_to_hub, hub_*, log_completions_hub_repo, Trackio's
# Space and Bucket on the Hub
_PUBLISHING_WORDS = {"hub", "space", "bucket"}
# GRPOConfig fields a grpo-lite run cannot honour away from TRL's default, and what to do instead
_NOT_RUN = {
    "eval_strategy": "grpo-lite trains without an eval dataset (TRL's Trainer refuses one missing); leave it out "
    "('no') and score the trained model with grpo-lite eval",
    "deepspeed": "grpo-lite's launcher writes DeepSpeed's config: leave it out and pass --sharding zero2 or zero3 "
    "with --num-processes N (docs/scaling.md)",
}


def _credential(key: Any, value: Any) -> bool:
    """A value under a name that holds a credential (``hub_token``, ``token``, ``*_token``), at any depth of a mapping
    (``model_init_kwargs: {token: ...}``); None is no credential."""
    if value is not None and str(key).rsplit("_", 1)[-1] == "token":  # token, hub_token, ...
        return True
    return isinstance(value, Mapping) and any(_credential(k, v) for k, v in value.items())


def refuse_credentials(settings: Mapping[str, Any], where: str = "") -> None:
    """Raise ConfigError for a setting that holds a credential, before its value is typed or shown anywhere: run.json
    and each checkpoint's training_args.bin would hold it in plain text (the message never shows it)."""
    for key, value in settings.items():
        if _credential(key, value):
            raise ConfigError(
                f"{where}{key}: a credential is never a setting (run.json and every checkpoint would hold it in "
                "plain text); remove it: a run does not publish, and the Hub reads hf auth login or HF_TOKEN"
            )


def refuse_unrunnable(settings: Mapping[str, Any], where: str = "") -> None:
    """Raise ConfigError for a typed GRPOConfig setting away from TRL's default that a grpo-lite run does not take:
    one that publishes (a word of :data:`_PUBLISHING_WORDS` in its name) or one of :data:`_NOT_RUN`. At TRL's default
    (``push_to_hub: false``) it does nothing and passes."""
    from trl import GRPOConfig

    for f in dataclasses.fields(GRPOConfig):
        value, default = (v.value if isinstance(v, Enum) else v for v in (settings.get(f.name, f.default), f.default))
        if value == default or f.default is dataclasses.MISSING:
            continue
        if _PUBLISHING_WORDS & set(f.name.split("_")):
            raise ConfigError(
                f"{where}{f.name}={value!r}: a grpo-lite run does not publish to the Hugging Face Hub; remove it "
                "and upload the trained model after the run (hf upload REPO OUTPUT_DIR/final)"
            )
        if f.name in _NOT_RUN:
            raise ConfigError(f"{where}{f.name}={value!r}: {_NOT_RUN[f.name]}")


def check_overrides(overrides: dict[str, Any], *, n_rewards: int | None = None) -> dict[str, Any]:
    """Check every override's name, type and range before anything loads; return them typed.

    Args:
        overrides: ``train(**overrides)``, or the parsed ``--set`` values.
        n_rewards: the number of reward functions (``reward_weights`` must give one weight each).

    Returns:
        The overrides typed as TRL's parser types them (:func:`typed`).

    Raises:
        ConfigError: an unknown name (with the closest valid one), a removed one (:func:`refuse_removed`), a
            credential (:func:`refuse_credentials`), one that publishes or a run cannot honour
            (:func:`refuse_unrunnable`), a wrong type, a value out of range.
    """
    refuse_removed(overrides)
    refuse_credentials(overrides)
    check_config_keys(overrides, also=(*LORA_KEYS, *where("load"), *where("trainer")))
    overrides = {key: typed(key, value) for key, value in overrides.items()}
    refuse_unrunnable(overrides)
    for key, value in overrides.items():
        check_written(key, value)
    _check_trackers(overrides.get("report_to"))
    weights = overrides.get("reward_weights")  # typed above: a list of numbers
    if weights is not None:
        if not all(math.isfinite(w) for w in weights):
            raise ConfigError(f"reward_weights={weights!r} must be finite numbers, one per reward")
        if n_rewards is not None and len(weights) != n_rewards:
            raise ConfigError(
                f"reward_weights has {len(weights)} weights for {n_rewards} rewards; give one per "
                "reward, in the order of the rewards"
            )
    return overrides


def _check_trackers(report_to: Any) -> None:
    """Each tracker of ``report_to`` is one transformers knows and finds installed: checked before the run folder
    is written (transformers' own check comes when the trainer is built, after the folder holds a run).

    Raises:
        ConfigError: an unknown or missing tracker, with what to install or pass instead.
    """
    from transformers.integrations.integration_utils import (
        INTEGRATION_TO_CALLBACK,
        get_available_reporting_integrations,
    )

    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    asked = [name for name in names if name not in ("none", "all")]
    unknown = [name for name in asked if name not in INTEGRATION_TO_CALLBACK]
    missing = [name for name in asked if name not in unknown and name not in get_available_reporting_integrations()]
    if unknown or missing:
        what = f"{', '.join(map(repr, unknown))} is not a tracker transformers knows ({', '.join(INTEGRATION_TO_CALLBACK)})"
        if missing:
            what = f"{', '.join(missing)} is not installed (pip install {' '.join(missing)})"
        raise ConfigError(
            f"report_to={report_to!r}: {what}; or drop it (report_to='none': run.json and history.jsonl hold the curves)"
        )
