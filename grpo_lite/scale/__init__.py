"""Past one device: sharding modes, their accelerate configs (``accelerate_configs/``), the launch command.

The relaunch under a launcher is :mod:`grpo_lite.cli.relaunch`; the records every rank writes are
:mod:`grpo_lite.training.run.ranks`. Nothing is imported here.
"""
