"""A model on the meta device with a GPU's semantics: what the block tracer and the full-step simulation share.

The GPU architectures, the attention kernel, CUDA autocast, the GPU's other choices, the model built as training
loads it, one block traced (docs/internals.md). The planner (:mod:`grpo_lite.memory.blocks`) and the simulation import
these; nothing here imports them back. Nothing is imported here: torch loads when a block is traced or a step
simulated.
"""
