"""Stage 5 of the pipeline: a plan -> TRL's GRPOTrainer -> a run folder (model, run.json, curve).

- :mod:`~grpo_lite.training.trainer`: ``train()``, a short sequence of named steps, and ``TrainResult``.
- :mod:`~grpo_lite.training.attempts`: one attempt of the training loop, and the step down on out-of-memory.
- :mod:`~grpo_lite.training.build`: plan -> GRPOConfig, PEFT, the GRPOTrainer; saving and carrying weights.
- :mod:`~grpo_lite.training.loading`: model and tokenizer loading (GGUF converted once into a cache).
- :mod:`~grpo_lite.training.callbacks`: history and memory callbacks.
- :mod:`~grpo_lite.training.checks`: the output folder and free disk, before loading.
- :mod:`~grpo_lite.training.runlock`: one run per output folder (a filelock naming its PID; stale ones taken over).
- :mod:`~grpo_lite.training.resilience`: output-folder guard, Ctrl-C and SIGTERM checkpoint, the next rung down, a full disk.
- :mod:`~grpo_lite.training.checkpoints`: a checkpoint counts when complete (marker written last).
- :mod:`~grpo_lite.training.resume`: what a resume takes over: checkpoint, record, every completed step, crashes.
- :mod:`~grpo_lite.training.resume_checks`: whether a resume may go on: same model, preset, method; steps left.
- :mod:`~grpo_lite.training.ranks`: every rank writes ``ranks/rank<R>.json``; the launching command checks them.
- :mod:`~grpo_lite.training.report`: run.json writing, the summary table, the reward curve.

torch, TRL and PEFT are imported inside functions. Nothing is imported here.
"""
