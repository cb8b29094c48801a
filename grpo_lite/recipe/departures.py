"""Where a run's GRPOConfig departs from TRL's defaults, and why.

A setting that differs from ``GRPOConfig``'s own default is one of three: written by the user (kept as written),
planned for memory (the plan's, with the trade-off its recipe comment gives), or one of grpo-lite's run defaults
(:data:`grpo_lite.defaults.RUN`, each with its reason). Every other setting is TRL's default. ``grpo-lite plan``
prints them with their reasons, a run's first lines name them, run.json records them (``trl_differences``).

>>> rows = departures({"logging_steps": 1, "max_grad_norm": 1.0, "beta": 0.04}, written={"beta"})
>>> [(d.key, d.value, d.trl, d.source) for d in rows]
[('logging_steps', 1, 10, 'grpo-lite'), ('beta', 0.04, 0.0, 'you')]
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Literal, Mapping

from grpo_lite.defaults import PER_METHOD, RUN

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.planning.result import Plan

Source = Literal["you", "plan", "grpo-lite"]
_SAID: dict[Source, str] = {"you": "yours", "plan": "the plan's", "grpo-lite": "grpo-lite's"}


@dataclasses.dataclass(frozen=True)
class Departure:
    """One GRPOConfig setting away from TRL's default: its value, TRL's, who set it and why."""

    key: str
    value: Any
    trl: Any
    source: Source
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@functools.lru_cache(maxsize=1)
def trl_defaults() -> dict[str, Any]:
    """``GRPOConfig``'s field defaults. Where TRL is already imported (a run), its dataclass's; else (``grpo-lite
    plan``, which imports no heavy library) the literal defaults written in the installed sources of
    ``TrainingArguments``, TRL's base config and ``GRPOConfig`` (a default computed at import, such as ``optim``,
    is left out), or the dataclass's when those sources are not where they were."""
    if "trl" not in sys.modules:
        with contextlib.suppress(OSError, SyntaxError, ValueError, TypeError, AttributeError, StopIteration):
            return _written_defaults()
    from trl import GRPOConfig  # heavy: TRL's trainer

    missing = dataclasses.MISSING
    return {
        f.name: f.default if f.default is not missing else f.default_factory()  # type: ignore[misc]
        for f in dataclasses.fields(GRPOConfig)
        if f.init and (f.default is not missing or f.default_factory is not missing)
    }


_GRPO_CONFIG = ("trl", "trainer/grpo_config.py", "GRPOConfig")  # where its source is, in the installed TRL
_PUBLIC_BASES = {"TrainingArguments": ("transformers", "training_args.py")}  # a base imported by its public name


def _written_defaults() -> dict[str, Any]:
    """The literal defaults of GRPOConfig's fields and its bases', read from their source (nothing imported)."""
    out: dict[str, Any] = {}
    for cls in reversed(_class_chain()):  # base first: a subclass's default wins
        for node in cls.body:
            if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name) or node.value is None:
                continue
            value = node.value
            if isinstance(value, ast.Call):  # field(default=...); a default_factory is not literal
                value = next((k.value for k in value.keywords if k.arg == "default"), None)
            with contextlib.suppress(ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                out[node.target.id] = ast.literal_eval(value)  # type: ignore[arg-type]  # None: left out below
                continue
            out.pop(node.target.id, None)  # a computed default: not known without the import
    return out


def _class_chain() -> list[ast.ClassDef]:
    """GRPOConfig's class, then each first base's, as written in the installed sources (a relative import's module,
    or :data:`_PUBLIC_BASES`)."""
    package, file, name = _GRPO_CONFIG
    path, chain = _package_dir(package) / file, []
    while True:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
        chain.append(cls)
        if not cls.bases:
            return chain
        name = cls.bases[0].id  # type: ignore[attr-defined]  # not a plain name: AttributeError, the import
        if name in _PUBLIC_BASES:
            package, file = _PUBLIC_BASES[name]
            path = _package_dir(package) / file
        else:
            imported = next(n for n in tree.body if isinstance(n, ast.ImportFrom) and n.level == 1
                            and any(a.name == name for a in n.names))  # fmt: skip
            path = path.parent / f"{imported.module}.py"


def _package_dir(package: str) -> Path:
    spec = importlib.util.find_spec(package)  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"{package} is not installed")
    return Path(spec.submodule_search_locations[0])


def departures(trl: Mapping[str, Any], *, written: Collection[str] = (), plan: Plan | None = None) -> list[Departure]:
    """The settings of ``trl`` (GRPOConfig keyword arguments) that differ from TRL's defaults, in ``trl``'s order.

    Args:
        written: the keys the user wrote (a recipe, an argument, a flag): their values are the user's.
        plan: the plan that set the others for memory (its method's learning rate included), if any.
    """
    from grpo_lite.recipe.costs import KNOBS

    defaults, planned = trl_defaults(), plan.settings if plan is not None else {}
    tradeoffs = {knob.key.removeprefix("trl."): knob.tradeoff for knob in KNOBS if knob.tradeoff}
    rows = []
    for key, value in trl.items():
        if key not in defaults or _same(value, defaults[key]):
            continue
        source, reason = "you", "as written"
        if key not in written and key in RUN and _same(value, RUN[key].value):
            source, reason = "grpo-lite", RUN[key].reason
        elif (
            key not in written and plan is not None and key in planned
        ):  # the rung's own rate and optimizer, or the knob's trade-off
            rung, source = plan.preset, "plan"
            reason = {"learning_rate": PER_METHOD[rung.method].rate_reason, "optim": rung.summary}.get(
                key, tradeoffs.get(key, "for the memory and the device (the plan's table)")
            )
        rows.append(Departure(key, value, defaults[key], source, reason))
    return rows


def _same(a: Any, b: Any) -> bool:
    """Equal as settings: ``1`` and ``1.0`` are the same rate, ``True`` and ``1`` are not."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def departures_line(rows: list[Departure]) -> str | None:
    """One line for a run's start: the settings away from TRL's defaults, grouped by who set them."""
    if not rows:
        return None
    parts = []
    for source, said in _SAID.items():
        keys = [f"{d.key}={d.value!r}" for d in rows if d.source == source]
        if keys:
            parts.append(f"{', '.join(keys)} ({said})")
    return f"not TRL's defaults: {'; '.join(parts)} (grpo-lite plan: each reason; run.json: trl_differences)"


def departures_text(rows: list[Departure]) -> str:
    """The settings away from TRL's defaults, one line each with TRL's value, who set it and why."""
    lines = [f"- {d.key}={d.value!r} (TRL's {d.trl!r}), {_SAID[d.source]}: {d.reason}" for d in rows]
    return (
        "\n".join(["not TRL's defaults (GRPOConfig):", *lines])
        if lines
        else "every GRPOConfig setting is TRL's default"
    )
