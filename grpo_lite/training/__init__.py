"""Stage 5 of the pipeline: a plan -> TRL's GRPOTrainer -> a run folder (model, run.json, curve).

``train()`` (:mod:`~grpo_lite.training.pipeline`) calls one module per stage; three packages hold one concern each:
:mod:`~grpo_lite.training.step`, the GRPO step (what ``LiteGRPOTrainer`` adds to TRL's);
:mod:`~grpo_lite.training.run`, the run's life (folder, lock, attempts, signals, checkpoints, resume); and
:mod:`~grpo_lite.training.report`, what the run says. The module map: docs/architecture.md.

torch, TRL and PEFT are imported inside functions. Nothing is imported here.
"""
