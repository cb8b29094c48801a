"""Past one device: sharding modes, their accelerate configs (``accelerate_configs/``), the launch command."""
