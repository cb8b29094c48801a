"""Stage 5 of the pipeline: a plan -> TRL's GRPOTrainer -> a run folder (model, run.json, curve).

``train()`` (:mod:`~grpo_lite.training.pipeline`) calls one module per stage (the attempt loop,
:mod:`~grpo_lite.training.attempts`, is one); three packages hold one concern each:
:mod:`~grpo_lite.training.step`, the GRPO step (what ``LiteGRPOTrainer`` adds to TRL's);
:mod:`~grpo_lite.training.run`, the run's leaf helpers (folder, lock, signals, checkpoints, resume, ranks); and
:mod:`~grpo_lite.training.report`, what the run says. Imports run one way, from the pipeline down to run/ (the
import-linter contract in pyproject.toml). The module map: docs/architecture.md.

torch, TRL and PEFT are imported inside functions. Nothing is imported here.
"""
