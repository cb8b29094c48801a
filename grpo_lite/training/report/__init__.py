"""What a run says while it trains and leaves behind when it ends.

- :mod:`~grpo_lite.training.report.progress`: one compact progress line per logged step.
- :mod:`~grpo_lite.training.report.summary`: run.json writing, the summary table, the reward curve.
- :mod:`~grpo_lite.training.report.callbacks`: per-step history of TRL's logs and measured CUDA memory.
- :mod:`~grpo_lite.training.report.health`: the learning-health monitor: why a run is not learning, and a remedy.
- :mod:`~grpo_lite.training.report.advice`: the remedies' numbers, asked of the planner; ``on_stall="adapt"``.
- :mod:`~grpo_lite.training.report.quiet`: the libraries' console noise, filtered around grpo-lite's calls.

Nothing is imported here.
"""
