"""The GPU architectures a simulation can take its kernel choices from (``grpo-lite plan --gpu``), pure data; the
default is the 16 GB RTX 3080 Laptop's, which anchors the planner's "16 GB card".

>>> DEFAULT_GPU, list(GPU_ARCHES)
('sm86', ['sm86', 'sm89', 'sm80'])
"""

from __future__ import annotations

from typing import Literal

GpuArch = Literal["sm80", "sm86", "sm89"]
GPU_ARCHES: dict[str, str] = {
    "sm86": "RTX 30xx (the 16 GB RTX 3080 Laptop), A10, A40",
    "sm89": "RTX 40xx, L4, L40",
    "sm80": "A100, A30",
}
DEFAULT_GPU: GpuArch = "sm86"
