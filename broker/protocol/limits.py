"""Ranges of the numeric fields of client commands, shared by the gateway (which validates requests) and the engine
(which checks commands that reach a partition by any other path).

A duration must leave every deadline computed from it (record time + duration) a valid epoch-millisecond int64, or
a job activated with it could never be sent to its worker (``ActivatedJob.deadline`` is an int64) nor time out.
"""

from __future__ import annotations

INT32_MAX = 2**31 - 1

MAX_DURATION_MS = 100 * 365 * 24 * 3600 * 1000
"""Longest job timeout, retry back-off, message time to live and request timeout: 100 years, in milliseconds."""


def duration_problem(name: str, value: int, *, minimum: int) -> str | None:
    """Why ``value`` is not a valid duration in milliseconds for field ``name``; None when it is."""
    if value < minimum:
        return f"Expected argument '{name}' to be at least {minimum} ms, but was {value}"
    if value > MAX_DURATION_MS:
        return f"Expected argument '{name}' to be at most {MAX_DURATION_MS} ms (100 years), but was {value}"
    return None
