"""Stage 5b of the pipeline: one GRPO step of a plan, simulated at full size on the meta device.

- :mod:`~grpo_lite.simulation.gpus`: the GPU architectures offered (pure data).
- :mod:`~grpo_lite.simulation.attention`: the attention kernel a GPU picks, called explicitly.
- :mod:`~grpo_lite.simulation.autocast`: CUDA autocast's op lists, emulated for meta tensors.
- :mod:`~grpo_lite.simulation.cuda`: every GPU choice meta does not make, put back and recorded.
- :mod:`~grpo_lite.simulation.build`: the plan's model, optimizer and monitor on meta, as training builds them.
- :mod:`~grpo_lite.simulation.data`: the batch's tokens and masks on meta, carrying their values.
- :mod:`~grpo_lite.simulation.trainer`: the trainer whose loss the step runs (``LiteGRPOTrainer``, a light instance).
- :mod:`~grpo_lite.simulation.step`: the phases of one step, counted by the memory stage's tensor tracker.
- :mod:`~grpo_lite.simulation.result`: ``Simulation``: simulated against planned, per phase and component.
- :mod:`~grpo_lite.simulation.run`: ``simulate()``.
- :mod:`~grpo_lite.simulation.report`: a simulation as tables (the CLI's, the docs' GPU table).

Nothing is imported here (torch, transformers, TRL load when :func:`~grpo_lite.simulation.run.simulate` runs).
"""
