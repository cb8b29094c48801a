"""A model on the meta device with a GPU's semantics: what the block tracer and the full-step simulation share.

- :mod:`~grpo_lite.memory.meta.gpus`: the GPU architectures offered (pure data).
- :mod:`~grpo_lite.memory.meta.attention`: the attention kernel a GPU picks, called explicitly.
- :mod:`~grpo_lite.memory.meta.autocast`: CUDA autocast's op lists, emulated for meta tensors.
- :mod:`~grpo_lite.memory.meta.cuda`: every GPU choice meta does not make, put back and recorded.
- :mod:`~grpo_lite.memory.meta.model`: a model from its config on meta, loaded and adapted as training does it.
- :mod:`~grpo_lite.memory.meta.block`: one decoder block traced there, the planner's bytes per token and layer.

The planner (:mod:`grpo_lite.memory.blocks`) and the simulation (:mod:`grpo_lite.simulation`, above training) import
these; nothing here imports them back. Nothing is imported here: torch loads when a block is traced or a step
simulated.
"""
