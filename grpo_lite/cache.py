"""Where grpo-lite keeps what it computes once and reuses: ``$GRPO_LITE_CACHE``, else ``~/.cache/grpo_lite``.

Converted GGUF models (``gguf/``) and traced decoder blocks (``blocks/``) live under it. Imports nothing heavy.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (not necessarily existing yet), read from the environment at each call."""
    return Path(os.environ.get("GRPO_LITE_CACHE") or Path.home() / ".cache" / "grpo_lite")  # set empty: not set
