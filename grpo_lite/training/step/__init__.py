"""The GRPO step: TRL's GRPOTrainer and what grpo-lite adds to it (``grpo_trainer``), each through one of TRL's own
methods, checked against TRL's code when the trainer is built (``trl_seam``). Nothing is imported here.
"""
