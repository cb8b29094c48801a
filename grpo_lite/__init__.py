"""grpo-lite: GRPO fine-tuning that fits the GPU you own.

Importing this package is cheap: TRL, PEFT, bitsandbytes and even torch load only when a
function that needs them is called (PEP 562 lazy attributes).

>>> import grpo_lite
>>> grpo_lite.plan.__module__  # loaded from its module on first use
'grpo_lite.planning.choose'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from grpo_lite._version import __version__

# public name -> module that defines it (one table; __all__ and __getattr__ read it)
_EXPORTS: dict[str, str] = {
    name: module
    for module, names in {
        "grpo_lite.api": "train TrainResult",
        "grpo_lite.evaluation": "evaluate EvalResult",
        "grpo_lite.export.gguf_file": "export_gguf",
        "grpo_lite.data.loaders": "load_gsm8k load_dataset",
        "grpo_lite.data.synthetic": "synthetic_problems",
        "grpo_lite.data.prompts": "PromptStyle",
        "grpo_lite.planning.choose": "plan",
        "grpo_lite.planning.result": "Plan",
        "grpo_lite.planning.ladder": "Preset get_preset LADDER",
        "grpo_lite.memory.models": "resolve_model ModelSpec demo_model_path",
        "grpo_lite.memory.estimate": "estimate MemoryEstimate",
        "grpo_lite.simulation.run": "simulate",
        "grpo_lite.simulation.result": "Simulation",
        "grpo_lite.planning.tables": "plan_table",
        "grpo_lite.recipe.recipe": "Recipe",
        "grpo_lite.planning.hardware": "detect_vram",
        "grpo_lite.demo": "DemoConfig run_demo",
        "grpo_lite.errors": "GrpoLiteError ConfigError DataError ModelError DoesNotFitError OutputDirError RewardError "
        "ExportError SimulationError",
    }.items()
    for name in names.split()
}
_SUBMODULES = ("rewards",)

__all__ = ["__version__", *_EXPORTS, *_SUBMODULES]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from grpo_lite import rewards
    from grpo_lite.api import TrainResult, train
    from grpo_lite.data.loaders import load_dataset, load_gsm8k
    from grpo_lite.data.prompts import PromptStyle
    from grpo_lite.data.synthetic import synthetic_problems
    from grpo_lite.demo import DemoConfig, run_demo
    from grpo_lite.errors import (
        ConfigError,
        DataError,
        DoesNotFitError,
        ExportError,
        GrpoLiteError,
        ModelError,
        OutputDirError,
        RewardError,
        SimulationError,
    )
    from grpo_lite.evaluation import EvalResult, evaluate
    from grpo_lite.export.gguf_file import export_gguf
    from grpo_lite.memory.estimate import MemoryEstimate, estimate
    from grpo_lite.memory.models import ModelSpec, demo_model_path, resolve_model
    from grpo_lite.planning.choose import plan
    from grpo_lite.planning.hardware import detect_vram
    from grpo_lite.planning.ladder import LADDER, Preset, get_preset
    from grpo_lite.planning.result import Plan
    from grpo_lite.planning.tables import plan_table
    from grpo_lite.recipe.recipe import Recipe
    from grpo_lite.simulation.result import Simulation
    from grpo_lite.simulation.run import simulate


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"grpo_lite.{name}")
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'grpo_lite' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
