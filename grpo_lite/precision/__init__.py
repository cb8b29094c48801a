"""Stage 4c of the pipeline: updates that land on bf16 weights, and a monitor that proves it.

- :mod:`~grpo_lite.precision.rounding`: ``install_update_rounding`` steps each bf16 parameter on an
  fp32 copy and rounds it back stochastically, around any optimizer (torch, bitsandbytes, GaLore).
- :mod:`~grpo_lite.precision.monitor`: ``UpdateMonitor`` logs ``update/realized``, the share of the
  intended update the weights received, and warns once when it falls below 0.5; with its shadow replay's
  plumbing (owner optimizer, fp32 shadow clone, the live optimizer state mapped onto it, sampling).
- :mod:`~grpo_lite.precision.realized`: the offline measure behind the tests and
  ``benchmarks/precision.py``: an optimizer's displacement against an fp32 copy's.

torch and transformers are imported by the modules, not here.
"""
