"""Admission limiters: bounded in-flight work; limits grow with fast round trips and shrink with slow ones."""

from __future__ import annotations

import pytest

from broker.stream.backpressure import AimdLimit, BackpressureConfig, FixedLimit, GradientLimit, VegasLimit


def drive(limiter, rtt_s: float, rounds: int) -> None:
    """Keep the limiter full and complete one command per step with the given round trip."""
    for _ in range(rounds):
        while limiter.try_acquire():
            pass
        limiter.release(rtt_s)


def test_fixed_limit_bounds_in_flight() -> None:
    limiter = FixedLimit(3)
    assert [limiter.try_acquire() for _ in range(4)] == [True, True, True, False]
    limiter.release(0.001)
    assert limiter.in_flight == 2 and limiter.try_acquire()
    drive(limiter, 5.0, 50)
    assert limiter.limit == 3


@pytest.mark.parametrize(
    "make", [lambda: AimdLimit(20, 5, 500, 0.05), lambda: VegasLimit(20, 5, 500), lambda: GradientLimit(20, 5, 500)]
)
def test_limits_grow_when_fast_and_shrink_when_slow(make) -> None:
    limiter = make()
    drive(limiter, 0.002, 300)
    grown = limiter.limit
    assert grown > 20
    drive(limiter, 0.5, 30)  # a latency rise: gradient reacts to the change, not to a steady level
    assert 5 <= limiter.limit < grown
    # Commands accepted under the old limit finish; no new one is admitted until in-flight is under the new limit.
    assert limiter.in_flight > limiter.limit and not limiter.try_acquire()


def test_aimd_backs_off_once_per_window_not_once_per_slow_answer() -> None:
    limiter = AimdLimit(100, 10, 1000, expected_rtt_s=0.2)
    for _ in range(100):
        assert limiter.try_acquire()
    for _ in range(100):  # one pause made every command in flight slow
        limiter.release(0.5)
    assert limiter.limit == 90
    drive(limiter, 0.5, 200)  # still slow a window later: it keeps backing off, one step per window
    assert limiter.limit < 90


def test_aimd_backs_off_on_drops() -> None:
    limiter = AimdLimit(100, 10, 1000, expected_rtt_s=1.0)
    limiter.try_acquire()
    limiter.release(0.001, dropped=True)
    assert limiter.limit == 90


def test_config_builds_each_algorithm_and_names_bad_ones() -> None:
    for name in ("fixed", "aimd", "vegas", "gradient"):
        assert BackpressureConfig(algorithm=name).build().limit > 0
    with pytest.raises(ValueError, match="not one of"):
        BackpressureConfig(algorithm="magic").build()
