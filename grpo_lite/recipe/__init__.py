"""Stage 4d of the pipeline: the plan as a recipe (:mod:`~grpo_lite.recipe.recipe`), the one object between the planner
and the trainer, with each setting's memory cost (:mod:`~grpo_lite.recipe.costs`). No torch / trl import here."""
