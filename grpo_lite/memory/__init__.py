"""Stage 3 of the pipeline: a model and settings -> the peak memory of a GRPO step, in named components.

- :mod:`~grpo_lite.memory.architectures`: the table of known architectures (shapes, no download).
- :mod:`~grpo_lite.memory.models`: a name, folder or .gguf -> ``ModelSpec`` (table, config.json, meta device).
- :mod:`~grpo_lite.memory.optimizers`: optimizer registry: state bytes per parameter, GaLore arguments.
- :mod:`~grpo_lite.memory.settings`: ``StepSettings``, the checked settings of one step (TRL's batch rules).
- :mod:`~grpo_lite.memory.terms`: the byte formula of each component.
- :mod:`~grpo_lite.memory.estimate`: ``estimate()``: phases of a step, each a sum of components; the peak.

Pure arithmetic: no torch import on this path. Nothing is imported here.
"""
