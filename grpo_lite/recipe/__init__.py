"""Stage 4d of the pipeline: the plan as a recipe, the one object between the planner and the trainer.

- :mod:`~grpo_lite.recipe.recipe`: ``Recipe``: from a plan, to and from YAML, train()'s arguments, TRL's objects.
- :mod:`~grpo_lite.recipe.costs`: each setting's memory cost and trade-off, from the plan estimated without it.

No torch / trl import on this path (``grpo-lite plan --write`` stays fast). Nothing is imported here.
"""
