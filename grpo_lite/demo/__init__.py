"""An optional part, above training and evaluation (the core never imports it): the offline CPU demo.

:mod:`~grpo_lite.demo.run` evaluates the demo model, trains it and evaluates it again (``grpo-lite demo``).
"""

from grpo_lite.demo.run import DemoConfig, DemoResult, demo_line, run_demo

__all__ = ["DemoConfig", "DemoResult", "demo_line", "run_demo"]
