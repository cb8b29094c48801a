"""Stage 5 of the pipeline: a plan -> TRL's GRPOTrainer -> a run folder (model, run.json, curve).

At the top, ``train()`` and what it builds from:

- :mod:`~grpo_lite.training.trainer`: ``train()``, the pipeline: one call per stage (the core: ``grpo_lite.train``,
  :mod:`grpo_lite.api`, adds the optional export around it).
- :mod:`~grpo_lite.training.arguments`: train()'s arguments checked before anything loads, as one ``Request``; a
  recipe's device and processes.
- :mod:`~grpo_lite.training.prepare`: the inputs: tokenizer, dataset, every prompt and the model's context measured.
- :mod:`~grpo_lite.training.fit`: the plan (or the recipe's fit) and the Recipe the run trains, checked.
- :mod:`~grpo_lite.training.result`: the final model saved, run.json written, the summary; ``TrainResult``.
- :mod:`~grpo_lite.training.checks`: the output folder, free disk and the model's context, before loading.
- :mod:`~grpo_lite.training.build`: plan -> GRPOConfig, PEFT, the GRPOTrainer; saving and carrying weights.
- :mod:`~grpo_lite.training.loading`: model and tokenizer loading (GGUF converted once into a cache).

Three packages, one concern each:

- :mod:`~grpo_lite.training.step`: the GRPO step, what ``LiteGRPOTrainer`` adds to TRL's (shared prefix,
  the sampling check, the zero-advantage skip, the TRL seam they rely on).
- :mod:`~grpo_lite.training.run`: the run's life (its folder opened, lock, attempts and the step down on out-of-memory,
  the one re-plan path, signals, checkpoints, resume and its checks, per-rank records).
- :mod:`~grpo_lite.training.report`: what the run says (progress line, run.json and the summary, history and
  memory callbacks, the learning-health monitor and its advice, the libraries' noise filtered).

torch, TRL and PEFT are imported inside functions. Nothing is imported here.
"""
