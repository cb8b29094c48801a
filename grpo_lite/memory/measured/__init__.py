"""Memory measured, to check the plan against: live tensor bytes per phase (:mod:`~grpo_lite.memory.measured.tracker`,
also what the block tracer and the simulation count with), the phases of real GRPO steps
(:mod:`~grpo_lite.memory.measured.measure`) and measured rows set beside the plan
(:mod:`~grpo_lite.memory.measured.calibration`). Nothing is imported here.
"""
