"""Stage 2 of the pipeline: completions -> rewards.

Public (``from grpo_lite import rewards``): exports the reward functions (:mod:`~grpo_lite.rewards.functions`),
the registry of names (:mod:`~grpo_lite.rewards.registry`) and the check of every reward's output at TRL's door
(:mod:`~grpo_lite.rewards.checked`). Answers are parsed by :mod:`grpo_lite.data.answers`. Standard library only.

>>> from grpo_lite.rewards import DEFAULT_REWARDS, REWARDS
>>> done = "<reasoning>\\n6 * 3 = 18\\n</reasoning>\\n<answer>\\n18\\n</answer>"
>>> [REWARDS[n].func(None, [done], answer=["18"])[0] for n in DEFAULT_REWARDS]
[2.0, 0.5, 0.5, 0.5, 0.5]
"""

from grpo_lite.rewards.checked import NoRewardWarning, check_rewards
from grpo_lite.rewards.functions import (
    MIN_REASONING_CHARS,
    CorrectnessReward,
    IntegerReward,
    LengthReward,
    RewardFunc,
    SoftFormatReward,
    StrictFormatReward,
    XmlCountReward,
    completion_text,
    correctness_reward,
    has_real_reasoning,
    integer_reward,
    length_reward,
    soft_format_reward,
    strict_format_reward,
    xml_count_reward,
)
from grpo_lite.rewards.registry import (
    DEFAULT_REWARDS,
    REWARDS,
    RewardName,
    RewardSpec,
    get_reward,
    resolve_rewards,
    rewards_table_markdown,
)

__all__ = [
    "RewardFunc",
    "RewardName",
    "RewardSpec",
    "REWARDS",
    "DEFAULT_REWARDS",
    "MIN_REASONING_CHARS",
    "CorrectnessReward",
    "IntegerReward",
    "StrictFormatReward",
    "SoftFormatReward",
    "XmlCountReward",
    "LengthReward",
    "correctness_reward",
    "integer_reward",
    "strict_format_reward",
    "soft_format_reward",
    "xml_count_reward",
    "length_reward",
    "completion_text",
    "has_real_reasoning",
    "get_reward",
    "resolve_rewards",
    "rewards_table_markdown",
    "check_rewards",
    "NoRewardWarning",
]
