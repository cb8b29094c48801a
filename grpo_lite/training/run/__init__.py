"""The run's life: its folder and lock, the attempts and the step down on out-of-memory, the one re-plan path,
signals, checkpoints, resume, per-rank records (docs/architecture.md). Nothing is imported here: ``lock`` must stay
importable with the standard library and filelock only.
"""
