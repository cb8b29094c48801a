"""An optional part, above training and evaluation (the core never imports it): the offline CPU demo.

:mod:`~grpo_lite.demo.run` evaluates the demo model, trains it and evaluates it again (``grpo-lite demo``).
"""

from grpo_lite.demo.run import DemoConfig as DemoConfig
from grpo_lite.demo.run import DemoResult as DemoResult
from grpo_lite.demo.run import demo_line as demo_line
from grpo_lite.demo.run import run_demo as run_demo
