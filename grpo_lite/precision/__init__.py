"""Stage 4c of the pipeline: updates that land on bf16 weights, and a monitor that proves it.

- :mod:`~grpo_lite.precision.rounding`: stochastic rounding around any optimizer (fp32 step, bf16 storage).
- :mod:`~grpo_lite.precision.monitor`: ``UpdateMonitor``, ``update/realized``: the share of the update that landed.
- :mod:`~grpo_lite.precision.realized`: the offline measure behind the tests and ``benchmarks/precision.py``.

torch and transformers are imported by the modules, not here.
"""
