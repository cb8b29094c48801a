"""The trainer whose loss the simulated step runs: ``LiteGRPOTrainer`` itself, on a light instance.

:func:`trainer_for` makes the instance with ``object.__new__`` and sets what TRL's ``__init__`` sets from the
``GRPOConfig``; its methods are the real ones. :func:`missing_attributes` lists every ``self.<name>`` they read that
the instance lacks, so a new TRL release stops the simulation with a :class:`~grpo_lite.errors.SimulationError`
naming it (docs/internals.md).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from grpo_lite.errors import SimulationError
from grpo_lite.memory.meta.private import TRL_LOSS, TRL_SCORING, trl_loss_state

if TYPE_CHECKING:  # pragma: no cover
    from grpo_lite.memory.step_settings import StepSettings
    from grpo_lite.simulation.build import Built


# the methods a training step's loss runs, as TRL calls them (Trainer.training_step -> compute_loss)
LOSS_METHODS = ("compute_loss", TRL_LOSS, TRL_SCORING)


class OneProcess:
    """What TRL's loss code asks of ``accelerate.Accelerator`` in a one-GPU run: its autocast, and collectives
    that return their input (one process)."""

    num_processes = 1
    is_main_process = True  # TRL's profiling decorator reads it
    sync_gradients = True

    def __init__(self, autocast: Callable[[], AbstractContextManager[Any]]) -> None:
        self.autocast = autocast

    @staticmethod
    def gather(tensor: Any) -> Any:
        return tensor

    gather_for_metrics = gather

    @staticmethod
    def reduce(tensor: Any, reduction: str = "sum") -> Any:
        return tensor

    @staticmethod
    def unwrap_model(model: Any) -> Any:
        return model


def trainer_for(
    built: Built, s: StepSettings, autocast: Callable[[], AbstractContextManager[Any]] = nullcontext
) -> Any:
    """A ``LiteGRPOTrainer`` for the simulated step (see the module): TRL's loss settings from the ``GRPOConfig``,
    grpo-lite's shared prefix as the plan has it, no self-check (it runs once, in the first step)."""
    from grpo_lite.training.step.grpo_trainer import LiteGRPOTrainer  # heavy: TRL
    from grpo_lite.training.step.zero_advantage import ZeroAdvantageSkip

    args = built.args
    trainer = object.__new__(LiteGRPOTrainer)
    text = built.lm.config.get_text_config()
    coef = args.router_aux_loss_coef
    values: dict[str, Any] = {  # as GRPOTrainer.__init__ sets them (TRL 1.16)
        "args": args,
        "model": built.model,
        "accelerator": OneProcess(autocast),
        "max_completion_length": args.max_completion_length,
        "temperature": args.temperature,
        "use_vllm": args.use_vllm,
        "vllm_importance_sampling_correction": args.vllm_importance_sampling_correction,
        "loss_type": args.loss_type,
        "importance_sampling_level": args.importance_sampling_level,
        "off_policy_mask_threshold": args.off_policy_mask_threshold,
        "top_entropy_quantile": args.top_entropy_quantile,
        "entropy_coef": args.entropy_coef,
        "use_adaptive_entropy": args.use_adaptive_entropy,
        **trl_loss_state(entropy_bonus=args.entropy_coef != 0.0 or args.use_adaptive_entropy),
        "epsilon_low": args.epsilon,
        "epsilon_high": args.epsilon_high if args.epsilon_high is not None else args.epsilon,
        "beta": args.beta,
        "current_gradient_accumulation_steps": args.gradient_accumulation_steps,
        "router_aux_loss_coef": getattr(text, "router_aux_loss_coef", 0.0) if coef is None else coef,
        # LiteGRPOTrainer's shared prefix: as planned, checked against TRL's path in the first step only
        "shared_prefix": s.shared_prefix,
        "_verify_pending": False,
        "shared_prefix_atol": None,
        "stop_when_shared_off": False,
        "shared_prefix_record": {"requested": s.shared_prefix, "calls": {"shared": 0, "trl": 0}},
        # the zero-advantage skip only ever trains fewer rows: the step is simulated with every row trained
        "zero_advantage": ZeroAdvantageSkip(False, "simulated: the peak of a batch whose every row trains"),
    }
    values["aux_loss_enabled"] = hasattr(text, "output_router_logits") and values["router_aux_loss_coef"] != 0.0
    vars(trainer).update(values)
    missing = missing_attributes(trainer)
    if missing:
        import trl

        raise SimulationError(
            f"TRL {trl.__version__}'s loss reads {', '.join(sorted(missing))}, which the simulation does not set "
            "(it was written for TRL 1.16): the plan stands without the simulation (drop --simulate), or install "
            "trl==1.16.*"
        )
    return trainer


def _reads(function: Any) -> set[str]:
    """The ``self.<name>`` attributes a method reads (from its source)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def missing_attributes(trainer: Any) -> set[str]:
    """What the loss methods (:data:`LOSS_METHODS`: grpo-lite's and TRL's versions, which the step runs) read that
    ``trainer`` lacks. transformers' ``Trainer.compute_loss`` is not run: TRL's overrides it."""
    read: set[str] = set()
    for cls in type(trainer).__mro__:
        if not cls.__module__.startswith(("trl.", "grpo_lite.")):
            continue
        for name in LOSS_METHODS:
            if name in vars(cls):
                read |= _reads(vars(cls)[name])
    return {name for name in read if not hasattr(trainer, name)}
