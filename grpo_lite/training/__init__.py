"""Stage 5 of the pipeline: a plan -> TRL's GRPOTrainer -> a run folder (model, run.json, curve).

At the top, ``train()`` and what it builds from:

- :mod:`~grpo_lite.training.trainer`: ``train()``, a short sequence of named steps, and ``TrainResult``.
- :mod:`~grpo_lite.training.arguments`: train()'s arguments checked before anything loads; a recipe's device
  and processes.
- :mod:`~grpo_lite.training.prepare`: the inputs loaded and measured, the plan (or the recipe's fit), the context.
- :mod:`~grpo_lite.training.checks`: settings typed and range-checked, the output folder and free disk, before loading.
- :mod:`~grpo_lite.training.build`: plan -> GRPOConfig, PEFT, the GRPOTrainer; saving and carrying weights.
- :mod:`~grpo_lite.training.loading`: model and tokenizer loading (GGUF converted once into a cache).

Three packages, one concern each:

- :mod:`~grpo_lite.training.step`: the GRPO step, what ``LiteGRPOTrainer`` adds to TRL's (shared prefix,
  the sampling check, the zero-advantage skip, the TRL seam they rely on).
- :mod:`~grpo_lite.training.run`: the run's life (its folder opened, lock, attempts and the step down on out-of-memory, signals,
  checkpoints, resume and its checks, per-rank records).
- :mod:`~grpo_lite.training.report`: what the run says (progress line, run.json and the summary, history and
  memory callbacks, the learning-health monitor and its advice, the libraries' noise filtered).

torch, TRL and PEFT are imported inside functions. Nothing is imported here.
"""
