"""The run's life: its folder from the first check to the last record, across failures, signals and resumes.

- :mod:`~grpo_lite.training.run.folder`: the run folder opened for every rank (checked, locked, guarded, a resume
  checked); room on its disk, and a full disk said as such.
- :mod:`~grpo_lite.training.run.lock`: one run per output folder (a filelock naming its PID; stale ones taken over).
- :mod:`~grpo_lite.training.run.attempts`: the training loop's attempts, and the step down on out-of-memory.
- :mod:`~grpo_lite.training.run.resilience`: output-folder guard, Ctrl-C and SIGTERM checkpoint, the next rung
  down, a full disk.
- :mod:`~grpo_lite.training.run.checkpoints`: a checkpoint counts when complete (marker written last).
- :mod:`~grpo_lite.training.run.resume`: what a resume takes over: checkpoint, record, every completed step, crashes.
- :mod:`~grpo_lite.training.run.resume_checks`: whether a resume may go on: same model, preset, method; steps left.
- :mod:`~grpo_lite.training.run.ranks`: every rank writes ``ranks/rank<R>.json``; the launching command checks them; this process's rank.

Nothing is imported here (:mod:`~grpo_lite.training.run.lock` must stay importable with the standard library
and filelock only).
"""
