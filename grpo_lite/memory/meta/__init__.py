"""A model on the meta device with a GPU's semantics: what the block tracer and the full-step simulation share
(docs/internals.md). Nothing is imported here: torch loads when a block is traced or a step simulated.
"""
