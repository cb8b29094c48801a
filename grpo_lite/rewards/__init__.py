"""Stage 2 of the pipeline: completions -> rewards.

Public (``from grpo_lite import rewards``): the reward functions (:mod:`~grpo_lite.rewards.functions`), the registry
of names (:mod:`~grpo_lite.rewards.registry`) and the check of every reward's output at TRL's door
(:mod:`~grpo_lite.rewards.checked`), rewards named from TRL or the user's code (:mod:`~grpo_lite.rewards.named`),
each module's ``__all__``. Standard library only (TRL's rewards are imported when named).

>>> from grpo_lite.rewards import DEFAULT_REWARDS, REWARDS
>>> done = "<reasoning>\\n6 * 3 = 18\\n</reasoning>\\n<answer>\\n18\\n</answer>"
>>> [REWARDS[n].func(None, [done], answer=["18"])[0] for n in DEFAULT_REWARDS]
[2.0, 0.5, 0.5, 0.5, 0.5]
"""

from grpo_lite.rewards import checked, functions, named, registry
from grpo_lite.rewards.checked import *  # noqa: F403 (each module's __all__ says what it exports)
from grpo_lite.rewards.functions import *  # noqa: F403
from grpo_lite.rewards.named import *  # noqa: F403
from grpo_lite.rewards.registry import *  # noqa: F403

__all__ = [*functions.__all__, *registry.__all__, *checked.__all__, *named.__all__]
