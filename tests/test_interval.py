"""The demo's accuracy interval: Wilson's score interval, checked against its definition."""

from __future__ import annotations

import math

import pytest

from grpo_lite.evaluation import EvalResult, _rewards_result, mean_interval, wilson_interval


def _score_test_bounds(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The shares p that a score test does not reject: |k/n - p| <= z sqrt(p(1-p)/n), found by bisection
    (Wilson's interval is this set; the closed form is not used here)."""
    inside = lambda p: abs(k / n - p) <= z * math.sqrt(p * (1 - p) / n)  # noqa: E731

    def edge(lo: float, hi: float) -> float:  # lo is outside, hi inside (or the reverse)
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if inside(mid) != inside(hi) else (lo, mid)
        return (lo + hi) / 2

    return (edge(0.0, k / n) if k > 0 else 0.0), (edge(1.0, k / n) if k < n else 1.0)


@pytest.mark.parametrize(
    ("k", "n"), [(0, 1), (1, 1), (1, 2), (0, 10), (1, 10), (16, 100), (29, 100), (35, 100), (100, 100), (3, 7)]
)
def test_the_interval_is_the_score_tests_acceptance_set(k, n):
    low, high = wilson_interval(k, n)
    want = _score_test_bounds(k, n)
    assert low == pytest.approx(want[0], abs=1e-9) and high == pytest.approx(want[1], abs=1e-9)
    assert low <= k / n <= high


def test_the_demo_line_carries_both_intervals_and_n():
    from grpo_lite.demo import demo_line

    before = EvalResult(accuracy=0.16, format_rate=0.87, mean_reward=2.08, n=100, formatted_accuracy=0.17)
    after = EvalResult(accuracy=0.29, format_rate=1.0, mean_reward=2.58, n=100, formatted_accuracy=0.29)
    line = demo_line(before, after)
    assert "accuracy 16% -> 29% (95% Wilson interval 10-24% -> 21-39%)" in line and line.endswith("(n=100)")


def test_a_bad_share_is_refused():
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        wilson_interval(3, 2)


@pytest.mark.parametrize(
    ("values", "want"),
    [
        ([2.0], (-math.inf, math.inf)),  # one correctness reward: no spread seen, no finite interval
        ([0.5], (-math.inf, math.inf)),
        ([1.0], (0.2065, 1.0)),  # one share: Wilson's, which is not zero-width at n=1
        ([0.0], (0.0, 0.7935)),
        ([2.0, 0.0], (1 - 1.96 * 2**0.5 / 2**0.5, 1 + 1.96)),  # two values: the normal interval, finite
    ],
)
def test_an_interval_over_one_value_is_never_zero_width(values, want):
    low, high = mean_interval(values)
    assert (low, high) == pytest.approx(want, abs=1e-3) and high > low


def test_evaluate_at_n_1_reports_no_zero_width_interval():
    """evaluate()'s scores of a task at n=1: each reward's interval spans more than its one value."""
    result = _rewards_result([{"rewards": {"correctness": 2.0, "format": 1.0}, "reward": 3.0}])
    assert result.reward_intervals["correctness"] == (-math.inf, math.inf)
    assert result.reward_intervals["format"][0] < 1.0 == result.reward_intervals["format"][1]
