"""The run's leaf helpers: its folder, disk and lock, signals, checkpoints, resume, per-rank records
(docs/architecture.md). They import nothing of training/ above them (the attempt loop and the re-plan are
:mod:`~grpo_lite.training.attempts` and :mod:`~grpo_lite.training.replan`). Nothing is imported here: ``lock`` must
stay importable with the standard library and filelock only.
"""
