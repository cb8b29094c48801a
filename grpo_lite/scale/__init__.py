"""Past one device: accelerate and torchrun launches, sharding modes, per-rank records.

- :mod:`~grpo_lite.scale.distributed`: sharding modes, their accelerate configs, the launch command.
- ``accelerate_configs/``: the shipped DDP, ZeRO-2, ZeRO-3 and FSDP configs.

The command that relaunches itself under a launcher is :mod:`grpo_lite.cli.relaunch`; the records
every rank writes are :mod:`grpo_lite.training.run.ranks`. Nothing is imported here.
"""
