"""Fair taking of commands: how many client commands a round admits behind queued follow-ups, and whose requests a
queued client command still answers."""

from __future__ import annotations

from broker.protocol.enums import RecordType, SignalIntent, ValueType
from broker.protocol.record import Record, RequestMetadata
from broker.stream.scheduling import FairTake


def client_command(position: int, request_id: int) -> Record:
    return Record(
        position,
        -1,
        RecordType.COMMAND,
        ValueType.SIGNAL,
        int(SignalIntent.BROADCAST),
        0,
        {"signalName": "s"},
        request=RequestMetadata(0, request_id),
    )


def test_a_round_admits_a_share_of_the_waiting_commands_only_while_follow_ups_are_queued() -> None:
    scheduler = FairTake(max_commands_per_round=500)
    assert scheduler.admissions(queued=0, waiting=1000) == 0, "nothing queued: admitted one by one as the round goes"
    assert scheduler.admissions(queued=3, waiting=1000) == 125
    assert scheduler.admissions(queued=3, waiting=2) == 2
    assert FairTake(max_commands_per_round=1).admissions(queued=1, waiting=5) == 1


def test_only_commands_admitted_here_keep_their_requester() -> None:
    scheduler = FairTake(500)
    mine = client_command(10, request_id=3)
    scheduler.admitted(mine)
    assert scheduler.taken(mine).request == RequestMetadata(0, 3)
    # the same position and request id, read back from the log after a restart or written by another leader
    recovered = client_command(11, request_id=3)
    assert scheduler.taken(recovered).request is None


def test_admissions_the_log_moved_past_are_forgotten() -> None:
    scheduler = FairTake(500)
    first, second = client_command(10, 1), client_command(20, 2)
    scheduler.admitted(first)
    scheduler.admitted(second)
    scheduler.forget_until(15)  # another leader processed position 10: nothing is kept for it
    assert scheduler.taken(first).request is None
    assert scheduler.taken(second).request is not None
