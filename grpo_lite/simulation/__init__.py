"""An optional part, above training (the core never imports it): one GRPO step of a plan, simulated on meta.

The model on meta and the GPU's semantics (attention kernel, autocast, optimizer paths) live below the planner, in
:mod:`grpo_lite.memory.meta`, which the block tracer shares; this package adds the rest of a step:

- :mod:`~grpo_lite.simulation.build`: the plan's model, optimizer and monitor on meta, as training builds them.
- :mod:`~grpo_lite.simulation.data`: the batch's tokens and masks on meta, carrying their values.
- :mod:`~grpo_lite.simulation.trainer`: the trainer whose loss the step runs (``LiteGRPOTrainer``, a light instance).
- :mod:`~grpo_lite.simulation.step`: the phases of one step, counted by the memory stage's tensor tracker.
- :mod:`~grpo_lite.simulation.result`: ``Simulation``: simulated against planned, per phase and component.
- :mod:`~grpo_lite.simulation.run`: ``simulate()``.
- :mod:`~grpo_lite.simulation.report`: a simulation as tables (the CLI's, the docs' GPU table).

Nothing is imported here (torch, transformers, TRL load when :func:`~grpo_lite.simulation.run.simulate` runs).
"""
