"""Adaptive admission control for a partition leader: how many user commands may be in flight at once.

A command counts from the moment the partition accepts it until its response is sent. Above the limit a new command
is refused at once (RESOURCE_EXHAUSTED), so an overloaded broker keeps a bounded queue and a bounded latency for what it
accepted instead of falling over. Responses, internal commands (checkers, distributions), inter-partition commands and
commands that finish admitted work (job complete, fail, throw error) never pass through the limiter.

Algorithms (as offered by Zeebe and the Netflix concurrency-limits family):
- ``fixed``: a constant limit.
- ``aimd``: additive increase while round trips stay under ``expected_rtt``; multiplicative decrease when one does not.
- ``vegas``: estimates the queue from the ratio of the best round trip seen to the current one; grows while the queue
  is short (< alpha), shrinks when it is long (> beta).
- ``gradient``: scales the limit by the gradient best-rtt / current-rtt, plus headroom of sqrt(limit).
Round trips come from a monotonic clock on the leader: admission control is not part of processing, so it may read
time (it never influences what a processor writes).

The default is ``gradient``: where the partition was the bottleneck (3 brokers, replication 3, 1,000 instances in
flight; tests/bench/cluster_bench.py) it kept the most throughput with the fewest refusals (750-785/s, ~1,600 refused
against AIMD's 709-731/s, ~3,200 refused; Vegas collapsed to 218/s), and at half the sustainable rate it refused
nothing. On a single node the algorithms measured alike: there the gateway's gRPC work, not the partition, limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


class Limiter(Protocol):
    @property
    def limit(self) -> int: ...

    @property
    def in_flight(self) -> int: ...

    def try_acquire(self) -> bool: ...

    def release(self, rtt_s: float, *, dropped: bool = False) -> None: ...


class _Base:
    def __init__(self, initial: int, min_limit: int, max_limit: int) -> None:
        self._limit = float(initial)
        self._min = min_limit
        self._max = max_limit
        self._in_flight = 0

    @property
    def limit(self) -> int:
        return max(self._min, min(self._max, int(self._limit)))

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def try_acquire(self) -> bool:
        if self._in_flight >= self.limit:
            return False
        self._in_flight += 1
        return True

    def release(self, rtt_s: float, *, dropped: bool = False) -> None:
        self._in_flight = max(0, self._in_flight - 1)
        self._update(rtt_s, dropped)
        self._limit = max(float(self._min), min(float(self._max), self._limit))

    def _update(self, rtt_s: float, dropped: bool) -> None:
        raise NotImplementedError


class FixedLimit(_Base):
    def __init__(self, limit: int = 1000) -> None:
        super().__init__(limit, limit, limit)

    def _update(self, rtt_s: float, dropped: bool) -> None:
        return


class AimdLimit(_Base):
    """Grow by one per fast response while the limit is used; back off by ``backoff_ratio`` on a slow or dropped one.

    One back-off per window, as TCP does per congestion event: the commands already in flight when the limit was cut
    were admitted under the old limit, so their slow answers say nothing new. Cutting again for each of them turned
    one pause (a large round, a snapshot) into a collapse to the minimum and refusals at half the sustainable rate.
    """

    def __init__(
        self,
        initial: int = 100,
        min_limit: int = 10,
        max_limit: int = 5000,
        expected_rtt_s: float = 0.2,
        backoff_ratio: float = 0.9,
    ) -> None:
        super().__init__(initial, min_limit, max_limit)
        self._expected = expected_rtt_s
        self._backoff = backoff_ratio
        self._window = 0  # answers still due from commands admitted before the last back-off

    def _update(self, rtt_s: float, dropped: bool) -> None:
        if (dropped or rtt_s > self._expected) and self._window == 0:
            self._limit *= self._backoff
            self._window = self._in_flight
            return
        if self._window > 0:
            self._window -= 1
        elif self._in_flight * 2 >= self._limit:  # only grow while the limit is actually used
            self._limit += 1.0


class VegasLimit(_Base):
    """TCP Vegas: queue ≈ limit × (1 − best_rtt / rtt); keep it between alpha and beta (log-scaled)."""

    def __init__(self, initial: int = 100, min_limit: int = 10, max_limit: int = 5000, smoothing: float = 1.0) -> None:
        super().__init__(initial, min_limit, max_limit)
        self._best_rtt = math.inf
        self._smoothing = smoothing
        self._samples = 0

    def _update(self, rtt_s: float, dropped: bool) -> None:
        self._samples += 1
        if rtt_s > 0:
            self._best_rtt = min(self._best_rtt, rtt_s)
            if self._samples % 1000 == 0:  # forget an old best so a permanently slower path is accepted
                self._best_rtt = rtt_s
        if dropped:
            new = self._limit * 0.9
        else:
            queue = self._limit * (1 - self._best_rtt / max(rtt_s, self._best_rtt))
            log_limit = max(1.0, math.log10(max(self._limit, 1.0)))
            alpha, beta = 3 * log_limit, 6 * log_limit
            if queue < alpha:
                new = self._limit + log_limit
            elif queue > beta:
                new = self._limit - log_limit
            else:
                return
        self._limit = (1 - self._smoothing) * self._limit + self._smoothing * new


class GradientLimit(_Base):
    """Gradient2-style: limit ← limit × clamp(best_rtt / rtt, 0.5, 1) + sqrt(limit), smoothed."""

    def __init__(self, initial: int = 100, min_limit: int = 10, max_limit: int = 5000, smoothing: float = 0.2) -> None:
        super().__init__(initial, min_limit, max_limit)
        self._long_rtt = 0.0
        self._smoothing = smoothing

    def _update(self, rtt_s: float, dropped: bool) -> None:
        if rtt_s <= 0:
            return
        self._long_rtt = rtt_s if self._long_rtt == 0 else 0.95 * self._long_rtt + 0.05 * rtt_s
        gradient = max(0.5, min(1.0, self._long_rtt / rtt_s))
        if dropped:
            gradient = 0.5
        new = self._limit * gradient + math.sqrt(max(self._limit, 1.0))
        self._limit = (1 - self._smoothing) * self._limit + self._smoothing * new


@dataclass(frozen=True, slots=True)
class BackpressureConfig:
    algorithm: str = "gradient"
    initial_limit: int = 100
    min_limit: int = 10
    max_limit: int = 5000
    expected_rtt_s: float = 0.2

    def build(self) -> Limiter:
        if self.algorithm == "fixed":
            return FixedLimit(self.initial_limit)
        if self.algorithm == "aimd":
            return AimdLimit(self.initial_limit, self.min_limit, self.max_limit, self.expected_rtt_s)
        if self.algorithm == "vegas":
            return VegasLimit(self.initial_limit, self.min_limit, self.max_limit)
        if self.algorithm == "gradient":
            return GradientLimit(self.initial_limit, self.min_limit, self.max_limit)
        raise ValueError(f"backpressure algorithm '{self.algorithm}' is not one of fixed, aimd, vegas, gradient")
