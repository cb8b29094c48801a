"""The ends of every range check() applies (grpo_lite.settings), written out by hand: each end a setting includes is
accepted and the nearest value past it refused, each end it excludes refused and the nearest value inside accepted;
whole numbers refuse a float of the same value, numbers refuse a bool, and every message's example passes."""

from __future__ import annotations

import math

import pytest

from grpo_lite.errors import ConfigError
from grpo_lite.settings import check, check_written, settings

TINY = math.nextafter(0.0, 1.0)  # the smallest float above 0
BELOW_ONE, ABOVE_ONE = math.nextafter(1.0, 0.0), math.nextafter(1.0, 2.0)

POSITIVE_WHOLE = ([1, 2], [0, -1])
ABOVE_ZERO = ([TINY, 1], [0, 0.0, -0.0, -TINY])
AT_LEAST_ZERO = ([0, 0.0, -0.0, TINY], [-TINY, -1])
ZERO_TO_BELOW_ONE = ([0, 0.0, BELOW_ONE], [1, 1.0, -TINY])  # [0, 1)
ABOVE_ZERO_TO_ONE = ([TINY, 1, 1.0], [0, 0.0, ABOVE_ONE])  # (0, 1]
ZERO_TO_ONE = ([0, 0.0, 1, 1.0], [-TINY, ABOVE_ONE])  # [0, 1]

# setting -> (values at or just inside its ends, values at or just past them), from each row's documented range
BOUNDS: dict[str, tuple[list, list]] = {
    "seed": ([0, 2**32 - 1], [-1, 2**32]),
    "max_steps": ([1, 10**8], [0, 10**8 + 1]),
    "num_processes": POSITIVE_WHOLE,
    "lora_r": POSITIVE_WHOLE,
    "lora_alpha": ABOVE_ZERO,
    "lora_dropout": ZERO_TO_BELOW_ONE,
    "learning_rate": ABOVE_ZERO,
    "weight_decay": AT_LEAST_ZERO,
    "adam_beta1": ZERO_TO_BELOW_ONE,
    "adam_beta2": ZERO_TO_BELOW_ONE,
    "adam_epsilon": ABOVE_ZERO,
    "max_grad_norm": AT_LEAST_ZERO,
    "warmup_steps": AT_LEAST_ZERO,
    "num_train_epochs": ABOVE_ZERO,
    "logging_steps": ABOVE_ZERO,
    "save_steps": ABOVE_ZERO,
    "save_total_limit": AT_LEAST_ZERO,
    "temperature": ABOVE_ZERO,
    "top_p": ABOVE_ZERO_TO_ONE,
    "top_k": ([0, 50], [-1]),
    "min_p": ZERO_TO_ONE,
    "repetition_penalty": ABOVE_ZERO,
    "beta": AT_LEAST_ZERO,
    "epsilon": ABOVE_ZERO,
    "epsilon_high": ABOVE_ZERO,
    "num_iterations": POSITIVE_WHOLE,
    "num_generations": ([2, 3], [1, 0]),
    "vllm_gpu_memory_utilization": ABOVE_ZERO_TO_ONE,
    "per_device_train_batch_size": POSITIVE_WHOLE,
    "gradient_accumulation_steps": POSITIVE_WHOLE,
    "max_prompt_length": POSITIVE_WHOLE,
    "max_completion_length": POSITIVE_WHOLE,
    "oom_window_steps": ([0, 1], [-1]),
    "batch_size": POSITIVE_WHOLE,
    "max_new_tokens": POSITIVE_WHOLE,
}
WHOLE = {name for name, s in settings().items() if s.range is not None and s.range.whole}


def test_every_bounded_setting_has_its_ends_written_here() -> None:
    bounded = {name for name, s in settings().items() if s.range is not None}
    assert bounded == set(BOUNDS), f"add the ends of {sorted(bounded - set(BOUNDS))} to BOUNDS (tests/)"
    assert WHOLE == {
        "seed", "max_steps", "num_processes", "lora_r", "num_iterations", "num_generations",
        "per_device_train_batch_size", "gradient_accumulation_steps", "max_prompt_length", "max_completion_length",
        "oom_window_steps", "batch_size", "max_new_tokens",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("key", "value"), [(key, value) for key, (inside, _) in BOUNDS.items() for value in inside], ids=repr
)
def test_a_value_at_or_just_inside_an_end_is_accepted(key: str, value: object) -> None:
    assert check(key, value) is value


@pytest.mark.parametrize(
    ("key", "value"), [(key, value) for key, (_, outside) in BOUNDS.items() for value in outside], ids=repr
)
def test_a_value_at_an_excluded_end_or_just_past_an_included_one_is_refused(key: str, value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        check(key, value)
    rule = settings()[key].range
    assert rule is not None
    assert str(caught.value) == f"{key}={value!r} must be {rule.what}; e.g. {key}={rule.example!r}"
    assert check(key, rule.example) == rule.example  # the example it gives works


@pytest.mark.parametrize("key", sorted(WHOLE))
def test_a_whole_number_refuses_a_float_or_a_bool_of_an_accepted_value(key: str) -> None:
    value = BOUNDS[key][0][0]
    assert check(key, value) == value
    for written in (float(value), bool(value) if value in (0, 1) else True):
        with pytest.raises(ConfigError, match=f"^{key}={written!r} must be "):
            check(key, written)


@pytest.mark.parametrize("key", sorted(set(BOUNDS) - WHOLE))
def test_a_number_takes_an_int_and_refuses_a_bool_or_a_value_that_is_not_finite(key: str) -> None:
    inside = BOUNDS[key][0]
    whole = next(v for v in (1, 0, 50) if v in inside)
    assert check(key, whole) == whole  # an int where a float goes: TRL's parser makes it a float
    for refused in (True, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match=f"^{key}={refused!r} must be "):
            check(key, refused)


def test_none_is_not_set_except_where_the_planner_needs_a_number() -> None:
    assert all(check(key, None) is None for key in BOUNDS)
    needs = {key for key in BOUNDS if not getattr(settings()[key].range, "takes_none", True)}
    assert needs == {"num_generations", "max_completion_length"}
    for key in BOUNDS:
        if key in needs:
            with pytest.raises(ConfigError, match=f"^{key}=None: {key} must be a number; leave it out"):
                check_written(key, None)
        else:
            assert check_written(key, None) is None
