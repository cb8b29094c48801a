"""The private names of torch, transformers, TRL and bitsandbytes that the memory layer and the simulation rely on.

The one module of the memory layer (the tracker, the model on meta, the block tracer) and of the simulation that
names a dependency's private attribute; the others take them from here. Imports torch at the top: loaded to measure,
trace or simulate, never on the ``grpo-lite plan`` path.

| private name | used by | when it changes | test |
| --- | --- | --- | --- |
| ``torch.utils._python_dispatch.TorchDispatchMode``, ``_disable_current_modes`` | the tensor tracker (training's measurement and the tracer), the simulation's batch data and KV cache | error: :class:`PrivateNameChanged` when this module loads | ``test_private_names.py::test_a_missing_module_is_a_clear_error`` |
| ``torch.utils._pytree.tree_flatten``, ``tree_leaves``, ``tree_map`` | the tracker, meta autocast, the simulation's batch data | error: the same | the same |
| ``torch.ops.aten._scaled_dot_product_{flash,efficient}_attention``, ``_scaled_dot_product_attention_math`` | the emulated attention kernels (:mod:`~grpo_lite.memory.meta.attention`) | error when a kernel is called | ``test_private_names.py::test_a_missing_name_is_a_clear_error`` |
| ``torch.ops.aten._unsafe_index``, ``_local_scalar_dense``, ``_to_copy`` | the simulation's batch data | error when the simulation loads | the same |
| ``torch.utils._foreach_utils._get_foreach_kernels_supported_devices``, ``torch.optim.optimizer._get_{foreach,fused}_kernels_supported_devices``, ``_default_to_fused_or_foreach`` | meta counted as CUDA for the optimizer's choice (:mod:`~grpo_lite.memory.meta.cuda`); the simulation's optimizer line | error when a step is emulated | the same |
| ``module._gradient_checkpointing_func`` (transformers) | a recomputed block keeps its forward's autocast on meta | a module without it is left as it is (no autocast restored) | ``test_private_names.py::test_a_module_without_the_checkpoint_function_is_left_alone`` |
| ``AutoModelForCausalLM._model_mapping`` (transformers) | the decoder layer's class name of a traced block | error when a block is traced | ``test_private_names.py::test_the_causal_lm_mapping_gone_is_a_clear_error`` |
| ``transformers.masking_utils._ignore_causal_mask_sdpa`` | the 4-D mask decision on meta | error when a step is emulated | ``test_private_names.py::test_a_missing_name_is_a_clear_error`` |
| ``trl.kernels.chunked_logprob._addmm_fp32``, ``_use_triton``, ``_forward_kernel``, ``_backward_kernel`` | the fused LM head's CUDA path on meta | their source is hashed with the head's (``TRL_HEAD_SOURCE``): another one (or one gone) simulates TRL's CPU fold, one warning | ``test_simulation.py::test_trl_head_code_that_changed_is_not_patched``, ``test_private_names.py::test_absent_optional_names_are_skipped`` |
| ``trl.trainer.utils._use_triton``, ``_CHUNKED_LOGPROB_CHUNK_SIZE`` | the compact fused-head path; the tile width in the simulation's line | absent: not patched; the width reads ``?`` | ``test_private_names.py::test_absent_optional_names_are_skipped`` |
| ``Params4bit._quantize`` (bitsandbytes) | NF4 weights built on meta | error when a 4-bit model is built on meta | ``test_private_names.py::test_a_missing_name_is_a_clear_error`` |
| ``GRPOTrainer._get_per_token_logps_and_entropies`` (TRL) | the simulation's scoring forward | error when a step is simulated | the same |
| ``GRPOTrainer._get_per_token_logps_and_entropies``, ``Trainer._clip_grad_norm`` (transformers) | the measured scoring and optimizer-step phases (:mod:`grpo_lite.memory.measured.measure`) | error when a measurement starts | ``test_private_names.py::test_a_missing_name_is_a_clear_error`` |
| ``GRPOTrainer._compute_loss`` and the attributes its ``__init__`` sets for the loss (``_entropy_bonus_enabled``, ``_last_world_entropy``, ``_entropy_window_stats``, ``_metrics``) | the simulation's trainer, built without TRL's ``__init__`` | a loss that reads another attribute stops the simulation with its name (``missing_attributes``) | ``test_simulation.py::test_a_trl_loss_that_reads_more_stops_the_simulation_with_its_name`` |
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch


class PrivateNameChanged(RuntimeError):
    """A dependency's private name that grpo-lite relies on is gone: the dependency's release is not one tested."""


def _missing(owner: str, name: str, what: str) -> PrivateNameChanged:
    return PrivateNameChanged(
        f"{owner}.{name} is gone (torch {torch.__version__}): grpo-lite uses it for {what}. Install the torch, "
        "transformers, TRL and bitsandbytes releases pyproject.toml names, or report the release that lacks it"
    )


def need(obj: Any, name: str, what: str) -> Any:
    """``getattr(obj, name)``, or a :class:`PrivateNameChanged` naming it and what uses it."""
    try:
        return getattr(obj, name)
    except AttributeError:
        owner = getattr(obj, "__name__", type(obj).__name__)
        raise _missing(owner, name, what) from None


try:
    from torch.utils._python_dispatch import TorchDispatchMode as TorchDispatchMode  # the tracker's and simulation's
    from torch.utils._python_dispatch import _disable_current_modes
    from torch.utils._pytree import tree_flatten as tree_flatten
    from torch.utils._pytree import tree_leaves as tree_leaves
    from torch.utils._pytree import tree_map as tree_map
except ImportError as error:  # no fallback: the tracker and the simulation see tensors through these
    raise PrivateNameChanged(
        f"{error.name or 'torch.utils'} is gone (torch {torch.__version__}): grpo-lite's memory tracker and simulation "
        "see tensors through it. Install the torch release pyproject.toml names, or report the release that lacks it"
    ) from error


disable_current_modes = _disable_current_modes  # run outside the dispatch modes in force


def _aten(name: str) -> Any:
    return need(torch.ops.aten, name, "the emulated kernels on meta")


def sdpa_flash(*args: Any, **kwargs: Any) -> Any:
    return _aten("_scaled_dot_product_flash_attention")(*args, **kwargs)


def sdpa_efficient(*args: Any, **kwargs: Any) -> Any:
    return _aten("_scaled_dot_product_efficient_attention")(*args, **kwargs)


def sdpa_math(*args: Any, **kwargs: Any) -> Any:
    return _aten("_scaled_dot_product_attention_math")(*args, **kwargs)


@functools.cache
def simulation_ops() -> tuple[Any, Any, Any]:
    """``aten._unsafe_index.Tensor``, ``aten._local_scalar_dense.default``, ``aten._to_copy.default``."""
    return _aten("_unsafe_index").Tensor, _aten("_local_scalar_dense").default, _aten("_to_copy").default


def optimizer_device_lists() -> list[tuple[Any, str]]:
    """(module, name) of torch's lists of devices with foreach / fused optimizer kernels."""
    import torch.optim.optimizer as optimizer  # heavy: torch
    import torch.utils._foreach_utils as foreach

    names = [(foreach, "_get_foreach_kernels_supported_devices")]
    names += [
        (optimizer, n) for n in ("_get_foreach_kernels_supported_devices", "_get_fused_kernels_supported_devices")
    ]
    for module, name in names:
        need(module, name, "counting meta as CUDA in the optimizer's choice")
    return names


def default_to_fused_or_foreach() -> Callable[..., Any]:
    """``torch.optim.optimizer._default_to_fused_or_foreach``."""
    import torch.optim.optimizer as optimizer  # heavy: torch

    return need(optimizer, "_default_to_fused_or_foreach", "the simulated optimizer's implementation")


_CHECKPOINT = "_gradient_checkpointing_func"


def gradient_checkpointing_func(module: Any) -> Any:
    """transformers' checkpoint function of a module (None: the module has none)."""
    return getattr(module, _CHECKPOINT, None)


def set_gradient_checkpointing_func(module: Any, fn: Any) -> None:
    setattr(module, _CHECKPOINT, fn)


def causal_lm_class(config: Any) -> type:
    """The causal-LM class transformers maps ``config`` to (``AutoModelForCausalLM._model_mapping``)."""
    from transformers import AutoModelForCausalLM  # heavy: transformers

    what = "the decoder layer's class of a traced block"
    mapping = need(AutoModelForCausalLM, "_model_mapping", what)
    if mapping is None:  # transformers' base auto class has None
        raise _missing("AutoModelForCausalLM", "_model_mapping", what)
    return mapping[type(config)]


def sdpa_mask_decision() -> tuple[Any, str]:
    """(module, name) of transformers' decision whether SDPA needs a 4-D mask."""
    import transformers.masking_utils as masking  # heavy: transformers

    name = "_ignore_causal_mask_sdpa"
    need(masking, name, "the 4-D mask decision on meta")
    return masking, name


TRL_HEAD_NAMES = ("_use_triton", "_forward_kernel", "_backward_kernel", "_addmm_fp32")


def trl_head() -> tuple[Any, tuple[Any, ...]]:
    """TRL's chunked log-prob module and its private parts the CUDA path on meta replaces, in
    :data:`TRL_HEAD_NAMES`' order (None: absent)."""
    import trl.kernels.chunked_logprob as chunked  # heavy: TRL

    return chunked, tuple(getattr(chunked, name, None) for name in TRL_HEAD_NAMES)


def trl_optional() -> tuple[Any, Any, Any]:
    """``trl.trainer.utils``, its ``_use_triton`` and ``_CHUNKED_LOGPROB_CHUNK_SIZE`` (None: absent)."""
    import trl.trainer.utils as trl_utils  # heavy: TRL

    return trl_utils, getattr(trl_utils, "_use_triton", None), getattr(trl_utils, "_CHUNKED_LOGPROB_CHUNK_SIZE", None)


def quantize(weight: Any, device: str) -> Any:
    """bitsandbytes' ``Params4bit._quantize(device)``."""
    return need(weight, "_quantize", "NF4 weights built on meta")(device)


TRL_LOSS = "_compute_loss"  # GRPOTrainer's loss of a micro-batch
TRL_SCORING = "_get_per_token_logps_and_entropies"  # GRPOTrainer's log-prob forward
CLIP_GRAD = "_clip_grad_norm"  # transformers' Trainer: the optimizer step's start


def trainer_logps(trainer: Any) -> Callable[..., Any]:
    """TRL's ``GRPOTrainer._get_per_token_logps_and_entropies`` of ``trainer``."""
    return need(trainer, TRL_SCORING, "the simulated scoring forward")


def measured_methods(trainer: Any) -> tuple[str, str]:
    """The names of the trainer's private methods a memory measurement wraps (scoring, the optimizer step), checked."""
    need(trainer, TRL_SCORING, "the measured scoring phase")
    need(trainer, CLIP_GRAD, "the measured optimizer-step phase")
    return TRL_SCORING, CLIP_GRAD


def trl_loss_state(entropy_bonus: bool) -> dict[str, Any]:
    """The private attributes ``GRPOTrainer.__init__`` sets that its loss reads (TRL 1.16), for a trainer built
    without it; ``missing_attributes`` of the simulation checks the loss reads no other."""
    return {
        "_entropy_bonus_enabled": entropy_bonus,
        "_last_world_entropy": float("inf"),
        "_entropy_window_stats": None,
        "_metrics": {"train": defaultdict(list), "eval": defaultdict(list)},
    }
