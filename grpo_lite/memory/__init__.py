"""Stage 3 of the pipeline: a model and settings -> the peak memory of a GRPO step, in named components.

docs/index.md lists the modules, docs/internals.md says how they work. The model (architectures ... calibration) is
pure arithmetic: no torch import on the ``grpo-lite plan`` path; tracker and measure import torch and are loaded only
to measure. Nothing is imported here.
"""
