"""The libraries' console noise, filtered where it comes from and only while grpo-lite's call runs (the table of
what is filtered: docs/internals.md).
"""

from __future__ import annotations

import functools
import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# logger name -> start of the messages dropped from it. bitsandbytes' CPU backend, imported on a CPU with AVX512-BF16,
# asks the kernels package for an optional hub kernel and falls back to its own: both say so (troubleshooting.md)
DROPPED_LOG_LINES: dict[str, tuple[str, ...]] = {
    "bitsandbytes.backends.cpu.ops": ("Failed to load CPU gemm_4bit_forward from kernels-community",),
    "kernels._internals.hf_hub": ("Skipping publisher trust check for 'kernels-community/quantization-bitsandbytes'",),
    # checkpoints saved less than a second apart (a tiny model): sorted by step number instead, as they should be
    "transformers.trainer_utils": ("mtime may not be reliable on this filesystem",),
    # its dump of a row's inputs when every reward returned None for it: grpo-lite's NoRewardWarning says it in a line
    "trl.trainer.grpo_trainer": ("All reward functions returned None",),
}
# (regex on the message, category) of the warnings ignored
IGNORED_WARNINGS: tuple[tuple[str, type[Warning]], ...] = (
    (r"`is_gradient_checkpointing` is deprecated", FutureWarning),
    (r"`gradient_checkpointing_(enable|disable)` is deprecated", FutureWarning),  # PEFT's k-bit preparation calls it
)


class _DropLines(logging.Filter):
    def __init__(self, starts: tuple[str, ...]) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        return not re.sub(r"^\[RANK \d+\] ", "", str(record.msg)).startswith(self.starts)  # accelerate's prefix


@contextmanager
def quiet_log_lines() -> Iterator[None]:
    """Drop the log lines of the module's table while the block runs; cheap (no library imported), so it can wrap
    the first import of TRL or PEFT, which imports bitsandbytes (its CPU backend logs a line at import)."""
    filters = [(logging.getLogger(name), _DropLines(starts)) for name, starts in DROPPED_LOG_LINES.items()]
    for logger, dropped in filters:
        logger.addFilter(dropped)
    try:
        yield
    finally:
        for logger, dropped in filters:
            logger.removeFilter(dropped)


@contextmanager
def quiet_libraries() -> Iterator[None]:
    """Filter the noise of the module's table while the block (or the decorated function) runs.

    >>> import logging
    >>> with quiet_libraries():
    ...     logging.getLogger("bitsandbytes.backends.cpu.ops").warning("Failed to load CPU gemm_4bit_forward from kernels-community: x")
    >>> logging.getLogger("bitsandbytes.backends.cpu.ops").filters
    []
    """
    from huggingface_hub import utils as hub_utils  # heavy: huggingface_hub
    from transformers.utils import logging as hf_logging

    bars, hub_bars = hf_logging.is_progress_bar_enabled(), not hub_utils.are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # transformers' bars; it turns the hub's off too: downloads keep theirs
    if hub_bars:
        hub_utils.enable_progress_bars()
    try:
        with quiet_log_lines(), warnings.catch_warnings():
            for message, category in IGNORED_WARNINGS:
                warnings.filterwarnings("ignore", message=message, category=category)
            yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()
        if not hub_bars:
            hub_utils.disable_progress_bars()


@contextmanager
def quiet_gguf_conversion() -> Iterator[None]:
    """transformers' GGUF loader without its progress bar (it calls tqdm itself); put back afterwards."""
    from transformers import modeling_gguf_pytorch_utils as gguf_utils  # heavy: transformers

    bar = getattr(gguf_utils, "tqdm", None)
    if bar is None:  # another transformers: nothing to quiet
        yield
        return
    gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = bar
