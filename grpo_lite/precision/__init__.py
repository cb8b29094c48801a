"""Stage 4c of the pipeline: updates that land on bf16 weights (:mod:`~grpo_lite.precision.rounding`), a monitor that
proves it (:mod:`~grpo_lite.precision.monitor`); its offline measure is tools/realized.py (tests and benchmarks)."""
