"""Stage 3 of the pipeline: a model and settings -> the peak memory of a GRPO step, in named components.

- :mod:`~grpo_lite.memory.architectures`: the table of known architectures (shapes, no download).
- :mod:`~grpo_lite.memory.models`: a name, folder or .gguf -> ``ModelSpec`` (table, config.json, meta device).
- :mod:`~grpo_lite.memory.optimizers`: optimizer registry: state bytes per parameter, GaLore arguments.
- :mod:`~grpo_lite.memory.settings`: ``StepSettings``, the checked settings of one step (TRL's batch rules).
- :mod:`~grpo_lite.memory.terms`: the byte formula of each component.
- :mod:`~grpo_lite.memory.tokens`: the formulas that grow with tokens: activations, the fused LM head, packing.
- :mod:`~grpo_lite.memory.estimate`: ``estimate()``: phases of a step, each a sum of components; the peak.
- :mod:`~grpo_lite.memory.heap`: the CPU heap: glibc's mmap threshold (set by ``train()``), RSS readings.
- :mod:`~grpo_lite.memory.tracker`: live tensor bytes per phase: the phase clock, tensor and CUDA backends.
- :mod:`~grpo_lite.memory.measure`: ``measure_training()``: phase hooks on a real GRPOTrainer.
- :mod:`~grpo_lite.memory.calibration`: planned against measured, the docs' calibration table.

The model (architectures ... calibration) is pure arithmetic: no torch import on the ``grpo-lite plan``
path. tracker and measure import torch and are loaded only to measure. Nothing is imported here.
"""
