"""The stream clock's controls (CLOCK PIN and RESET), as Zeebe's: pinning makes processing time stand still at a
given time on every partition, resetting makes it follow the leader's clock again.

A pin is a CLOCK PINNED event: its applier keeps the time in the partition's state, so replay, a restart and a new
leader all find the clock where the log left it. The partition stamps each round's commands with the pinned time
instead of its clock, and its checkers look for due timers, job deadlines and message expiries at that time. The
partition that takes the command answers at once and hands the command to every other partition through command
distribution (delivered until acknowledged, in no particular order relative to other distributions).
"""

from __future__ import annotations

from broker.engine import behaviors as b
from broker.engine.context import ProcessingContext
from broker.protocol.enums import ClockIntent, RejectionType, ValueType
from broker.protocol.record import Record

_MAX_TIME = 2**63 - 1  # epoch milliseconds as a signed 64-bit integer, as every record time
_EVENT_OF = {ClockIntent.PIN: ClockIntent.PINNED, ClockIntent.RESET: ClockIntent.RESETTED}


def pin(ctx: ProcessingContext, cmd: Record) -> None:
    """CLOCK PIN: stand the clock still at ``time`` (epoch milliseconds, not negative)."""
    time = cmd.value.get("time")
    if not isinstance(time, int) or isinstance(time, bool) or time < 0:
        ctx.reject(RejectionType.INVALID_ARGUMENT, f"Expected pin time to be not negative but it was {time}")
        return
    if time > _MAX_TIME:
        ctx.reject(RejectionType.INVALID_ARGUMENT, f"Expected pin time to be at most {_MAX_TIME} but it was {time}")
        return
    _modify(ctx, cmd, ClockIntent.PIN, {"time": time})


def reset(ctx: ProcessingContext, cmd: Record) -> None:
    """CLOCK RESET: let the clock follow the leader's clock again."""
    _modify(ctx, cmd, ClockIntent.RESET, {"time": 0})


def _modify(ctx: ProcessingContext, cmd: Record, intent: ClockIntent, value: dict) -> None:
    if not b.authorized(ctx, "SYSTEM", "UPDATE"):  # the clock is every partition's: the system's to change
        return
    key = ctx.keys.next_key()
    ctx.respond(ctx.event(ValueType.CLOCK, _EVENT_OF[intent], key, value))
    if not cmd.value.get("distributedFrom"):
        b.distribute(ctx, key, ValueType.CLOCK, intent, {**value, "distributedFrom": ctx.partition_id})
