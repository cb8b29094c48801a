"""The run's life: its folder from the first check to the last record, across failures, signals and resumes.

- :mod:`~grpo_lite.training.run.folder`: the run folder opened for every rank (checked, locked, guarded, a resume
  checked); room on its disk, and a full disk said as such.
- :mod:`~grpo_lite.training.run.lock`: one run per output folder (a filelock naming its PID; stale ones taken over).
- :mod:`~grpo_lite.training.run.attempts`: the training loop's attempts, the step down on out-of-memory, run.json.
- :mod:`~grpo_lite.training.run.replan`: the one re-plan path, and the next rung down.
- :mod:`~grpo_lite.training.run.resilience`: Ctrl-C, SIGTERM and SIGHUP save a checkpoint; the save at the end.
- :mod:`~grpo_lite.training.run.checkpoints`: a checkpoint counts when complete (marker written last).
- :mod:`~grpo_lite.training.run.resume`: what a resume takes over, and whether it may go on.
- :mod:`~grpo_lite.training.run.ranks`: per-rank records, checked after a launch; this process's rank.

Nothing is imported here (:mod:`~grpo_lite.training.run.lock` must stay importable with the standard library
and filelock only).
"""
