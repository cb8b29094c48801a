"""An optional part, above training (the core never imports it): one GRPO step of a plan, simulated on meta.

The model on meta and the GPU's semantics live below the planner, in :mod:`grpo_lite.memory.meta`; this package adds
the rest of a step: the build, the batch's data, the trainer, the step's phases, the result, ``simulate()``, the
report (docs/internals.md says how). Nothing is imported here (torch, transformers, TRL load when
:func:`~grpo_lite.simulation.run.simulate` runs).
"""
