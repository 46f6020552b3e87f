"""Timers: ISO 8601 schedules, the due-date index, and timer events run by a partition on a controlled clock."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from broker.engine import timers
from broker.protocol.enums import RecordType, TimerIntent, ValueType
from broker.state.db import StateDb
from broker.state.repositories import PartitionState
from broker.stream.partition import PartitionConfig
from broker.tools.inspect import iter_records
from tests.unit.test_replay import Driver, accepted, check_replay_equals_live

NOW = 1_700_000_000_000


def test_durations_dates_and_cycles_become_schedules() -> None:
    assert timers.schedule("duration", "PT10S", NOW) == timers.Schedule(NOW + 10_000)
    assert timers.schedule("duration", "P1DT1.5S", NOW).due_date == NOW + 86_400_000 + 1_500
    assert timers.schedule("duration", dt.timedelta(milliseconds=250), NOW).due_date == NOW + 250
    assert timers.schedule("date", "2024-01-01T00:00:00Z", NOW).due_date == 1_704_067_200_000
    assert timers.schedule("date", "2024-01-01T01:00:00+01:00", NOW).due_date == 1_704_067_200_000
    five = timers.schedule("cycle", "R5/PT10S", NOW)
    assert (five.due_date, five.repetitions) == (NOW + 10_000, 5)
    forever = timers.schedule("cycle", "R/PT1M", NOW)
    assert forever.repetitions == timers.INFINITE
    start = timers.schedule("cycle", "R2/2100-01-01T00:00:00Z/PT1H", NOW)
    assert start.due_date == timers.parse_date("2100-01-01T00:00:00Z")


def test_calendar_months_are_added_to_the_date() -> None:
    jan31 = timers.parse_date("2024-01-31T12:00:00Z")
    assert timers.schedule("duration", "P1M", jan31).due_date == timers.parse_date("2024-02-29T12:00:00Z")


def test_cycles_count_down_and_stop() -> None:
    s: timers.Schedule | None = timers.schedule("cycle", "R3/PT1S", NOW)
    fired = []
    while s is not None:
        fired.append(s.due_date)
        s = s.next(s.due_date)
    assert fired == [NOW + 1000, NOW + 2000, NOW + 3000]
    forever = timers.schedule("cycle", "R/PT1S", NOW)
    again = forever.next(NOW + 1000)
    assert again is not None and again.repetitions == timers.INFINITE
    restored = timers.from_record({"dueDate": NOW, "repetitions": 2, **timers.serialize(forever)})
    assert restored.next(NOW) == timers.Schedule(NOW + 1000, 1, forever.interval)


@pytest.mark.parametrize(
    ("kind", "text"),
    [("duration", "10 seconds"), ("duration", "PT0S"), ("date", "tomorrow"), ("cycle", "PT10S"), ("cycle", "Rx/PT1S")],
)
def test_invalid_timer_values_are_refused_with_a_reason(kind: str, text: str) -> None:
    with pytest.raises(timers.TimerError, match=r"timer|cycle|duration"):
        timers.schedule(kind, text, NOW)


def test_due_date_index_returns_due_timers_earliest_first(tmp_path: Path) -> None:
    db = StateDb(tmp_path / "state")
    state = PartitionState(db)
    with db.begin(write=True) as txn:
        state.bind(txn)
        for key, due in [(11, 3000), (12, 1000), (13, 2000), (14, 9000)]:
            state.timers.put(key, {"dueDate": due, "elementInstanceKey": 100, "processDefinitionKey": 5})
        assert state.timers.due_before(2500, 10) == [(1000, 12), (2000, 13)]
        assert state.timers.due_before(2500, 1) == [(1000, 12)]
        assert sorted(state.timers.of_owner(100)) == [11, 12, 13, 14]
        state.timers.remove(12)
        assert state.timers.due_before(2500, 10) == [(2000, 13)]
        assert state.timers.get(12) is None
        state.bind(None)
    db.close()


# -- timer events on a partition ------------------------------------------------------------------------------


def _timer_events(directory: Path, intent: TimerIntent) -> list:
    return [
        r
        for r in iter_records(directory)
        if r.value_type == ValueType.TIMER and r.intent == intent and r.record_type == RecordType.EVENT
    ]


async def _tick(d: Driver, ms: int) -> None:
    """Advance the clock, then wait until the checker has fired every timer now due (however busy the machine)."""
    d.clock.now += ms
    for _ in range(1000):
        await asyncio.sleep(0.01)
        await d.settle()
        if not d.read(lambda s: s.timers.due_before(d.clock.now, 1)):
            return
    raise AssertionError(f"timers still due at {d.clock.now} after 10 s")


async def test_intermediate_timer_fires_at_its_due_date_never_before(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("timer-catch.bpmn"))
    accepted(await d.create("timer-catch", {"delay": "PT10S"}))
    await d.settle()
    await _tick(d, 9_999)
    assert await d.activate("after-wait") == []
    await _tick(d, 1)
    assert len(await d.activate("after-wait")) == 1
    await d.close()
    assert len(_timer_events(d.directory, TimerIntent.TRIGGERED)) == 1
    check_replay_equals_live(d.directory, tmp_path)


async def test_a_leader_is_idle_only_for_a_span_that_ends_before_its_next_timer(tmp_path: Path) -> None:
    """What the simulator's drain asks before it stops early: nothing due within the span, nothing to send."""
    d = Driver(tmp_path / "p" / "1")
    partition = d.open()
    accepted(await d.deploy("timer-catch.bpmn"))
    assert partition.idle_for(3_600_000)
    accepted(await d.create("timer-catch", {"delay": "PT10S"}))
    await d.settle()
    assert partition.idle_for(9_999)
    assert not partition.idle_for(10_001)
    assert not partition.overdue_by(0)
    await d.close()


async def test_a_timer_the_leader_did_not_write_in_time_is_overdue(tmp_path: Path) -> None:
    """The simulator's liveness check: due work still waiting well after its time (here no checker runs)."""
    d = Driver(tmp_path / "p" / "1", PartitionConfig(checker_interval_s=3600))
    partition = d.open()
    accepted(await d.deploy("timer-catch.bpmn"))
    accepted(await d.create("timer-catch", {"delay": "PT10S"}))
    await d.settle()
    d.clock.now += 25_000
    assert partition.overdue_by(10_000)
    assert not partition.overdue_by(20_000)
    await d.close(snapshot=False)


async def test_a_bad_timer_expression_raises_an_incident(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("timer-catch.bpmn"))
    accepted(await d.create("timer-catch", {"delay": "soon"}))
    await d.settle()
    incidents = d.incidents()
    assert len(incidents) == 1 and "soon" in incidents[0][1]["errorMessage"]
    await d.close()


async def test_non_interrupting_cycle_fires_while_the_task_runs_and_stops_with_it(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("timer-reminder.bpmn"))
    accepted(await d.create("timer-reminder", {}))
    await d.settle()
    work = await d.activate("long-work")
    for _ in range(3):
        await _tick(d, 1_000)
    assert len(await d.activate("send-reminder")) == 3
    accepted(await d.complete(work[0]))
    await d.settle()
    await _tick(d, 5_000)
    assert await d.activate("send-reminder") == []
    assert d.read(lambda s: list(s.iter_all("timers"))) == []
    await d.close()
    assert len(_timer_events(d.directory, TimerIntent.CANCELED)) == 1
    check_replay_equals_live(d.directory, tmp_path)


async def test_interrupting_timer_boundary_cancels_the_receive_task(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("order-payment.bpmn"))
    accepted(await d.create("order-payment", {"orderId": "o-1", "paymentTimeout": "PT30S"}))
    await d.settle()
    await _tick(d, 30_000)
    assert len(await d.activate("cancel-order")) == 1
    for _ in range(100):  # the deletion travels through the (resending) outbox
        await asyncio.sleep(0.02)
        if not d.read(lambda s: list(s.iter_all("process_message_subscriptions"))):
            break
    assert d.read(lambda s: list(s.iter_all("process_message_subscriptions"))) == []
    assert d.read(lambda s: list(s.iter_all("message_subscriptions"))) == []
    assert d.read(lambda s: list(s.iter_all("subscription_outbox"))) == []
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_timer_start_event_creates_instances_and_a_new_version_replaces_it(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("start-events/timer-start.bpmn"))
    for _ in range(5):
        await _tick(d, 1_000)
    assert len(await d.activate("scheduled-work")) == 3  # R3: three instances, then no more
    assert d.read(lambda s: list(s.iter_all("timers"))) == []
    await d.close()
    check_replay_equals_live(d.directory, tmp_path)


async def test_redeploying_cancels_the_old_versions_start_timer(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("start-events/timer-start.bpmn"))
    changed = (Path(__file__).parent.parent / "fixtures" / "bpmn" / "start-events/timer-start.bpmn").read_text()
    resource = changed.replace("R3/PT1S", "R1/PT5S").encode()
    from broker.protocol.enums import DeploymentIntent

    accepted(
        await d.send(
            ValueType.DEPLOYMENT,
            DeploymentIntent.CREATE,
            {"resources": [{"resourceName": "start-events/timer-start.bpmn", "resource": resource}]},
        )
    )
    pending = d.read(lambda s: [s.timers.get(int.from_bytes(k, "big")) for k, _ in s.iter_all("timers")])
    assert len(pending) == 1 and pending[0]["repetitions"] == 1
    await _tick(d, 5_000)
    assert len(await d.activate("scheduled-work")) == 1
    await d.close()


async def test_after_a_restart_every_pending_timer_fires_once(tmp_path: Path) -> None:
    d = Driver(tmp_path / "p" / "1")
    d.open()
    accepted(await d.deploy("timer-catch.bpmn"))
    for _ in range(3):
        accepted(await d.create("timer-catch", {"delay": "PT5S"}))
    await d.settle()
    await d.close(snapshot=False)
    d.open()
    await _tick(d, 4_000)
    assert await d.activate("after-wait") == []
    await _tick(d, 60_000)
    await _tick(d, 1_000)
    assert len(await d.activate("after-wait")) == 3
    await d.close()
    assert len(_timer_events(d.directory, TimerIntent.TRIGGERED)) == 3
    check_replay_equals_live(d.directory, tmp_path)


# -- cron cycles ------------------------------------------------------------------------------------------------

MONDAY_9 = timers.parse_date("2024-01-08T09:00:00Z")


def test_cron_cycles_repeat_forever_at_their_next_match() -> None:
    s = timers.schedule("cycle", "0 0 9-17 * * MON-FRI", timers.parse_date("2024-01-05T17:00:00Z"))
    assert s == timers.Schedule(MONDAY_9, timers.INFINITE, None, "0 0 9-17 * * MON-FRI")
    following = s.next(s.due_date)
    assert following == timers.Schedule(MONDAY_9 + 3_600_000, timers.INFINITE, None, "0 0 9-17 * * MON-FRI")
    assert timers.schedule("cycle", "@daily", NOW).due_date == timers.parse_date("2023-11-15T00:00:00Z")
    every_ten = timers.schedule("cycle", " */10 * * * * * ", NOW)  # NOW is 22:13:20, a match: the next one comes
    assert (every_ten.due_date, every_ten.cron) == (NOW + 10_000, "*/10 * * * * *")


def test_a_late_cron_firing_skips_to_the_next_match_after_it() -> None:
    s = timers.schedule("cycle", "*/10 * * * * *", NOW)
    late = s.next(s.due_date + 25_000)  # fired 25 s late: the matches in between are not made up
    assert late is not None and late.due_date == NOW + 40_000


def test_a_cron_cycle_is_stored_as_its_text_and_restored() -> None:
    s = timers.schedule("cycle", "0 0 9-17 * * MON-FRI", timers.parse_date("2024-01-05T17:00:00Z"))
    stored = timers.serialize(s)
    assert stored == {"cron": "0 0 9-17 * * MON-FRI"}
    record = {"dueDate": s.due_date, "repetitions": s.repetitions, "elementInstanceKey": 7, **stored}
    restored = timers.from_record(record)
    assert restored == s
    assert restored.next(s.due_date) == s.next(s.due_date)


def test_iso_cycles_keep_their_stored_keys() -> None:
    s = timers.schedule("cycle", "R3/PT1S", NOW)
    assert timers.serialize(s) == {"intervalMonths": 0, "intervalMs": 1000}
    assert timers.from_record({"dueDate": NOW + 1000, "repetitions": 3, "intervalMonths": 0, "intervalMs": 1000}) == s
    assert timers.from_record({"dueDate": NOW}) == timers.Schedule(NOW)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 0 * * *", "Invalid cron expression '0 0 * * *' for timer: expected 6 fields"),
        ("0 0 0 * * FOO", "day-of-week field 'FOO' has 'FOO', which is not a number or a name (MON-SUN)"),
        ("@sometimes", "unknown macro '@sometimes'"),
        ("0 0 0 30 2 *", "Invalid cron expression '0 0 0 30 2 *' for timer: it never matches a date"),
        ("PT10S", "expected e.g. 'R5/PT10S' or a cron expression such as '0 0 9-17 * * MON-FRI'"),
    ],
)
def test_invalid_cron_cycles_are_timer_errors(text: str, message: str) -> None:
    with pytest.raises(timers.TimerError) as caught:
        timers.schedule("cycle", text, NOW)
    assert message in str(caught.value)


def _cron_reminder() -> bytes:
    fixture = Path(__file__).parent.parent / "fixtures" / "bpmn" / "timer-reminder.bpmn"
    return fixture.read_text().replace("R/PT1S", "*/5 * * * * *").encode()


async def test_a_cron_boundary_timer_repeats_across_a_restart_and_stops_with_the_task(tmp_path: Path) -> None:
    from broker.protocol.enums import DeploymentIntent

    d = Driver(tmp_path / "p" / "1")
    d.open()  # the clock stands at 22:13:20, a multiple of five seconds
    resources = [{"resourceName": "timer-reminder.bpmn", "resource": _cron_reminder()}]
    accepted(await d.send(ValueType.DEPLOYMENT, DeploymentIntent.CREATE, {"resources": resources}))
    accepted(await d.create("timer-reminder", {}))
    await d.settle()
    work = await d.activate("long-work")
    await _tick(d, 4_999)
    assert await d.activate("send-reminder") == []
    await _tick(d, 1)
    assert len(await d.activate("send-reminder")) == 1
    await d.close(snapshot=False)
    d.open()  # the next due date was written with the firing; the cron text comes back from the timer record
    pending = d.read(lambda s: [s.timers.get(int.from_bytes(k, "big")) for k, _ in s.iter_all("timers")])
    assert [(t["dueDate"], t["repetitions"], t["cron"]) for t in pending] == [
        (NOW + 10_000, timers.INFINITE, "*/5 * * * * *")
    ]
    await _tick(d, 5_000)
    await _tick(d, 12_000)  # late: one firing now, the missed matches are not made up
    assert len(await d.activate("send-reminder")) == 2
    accepted(await d.complete(work[0]))
    await d.settle()
    await _tick(d, 10_000)
    assert await d.activate("send-reminder") == []
    assert d.read(lambda s: list(s.iter_all("timers"))) == []
    await d.close()
    assert len(_timer_events(d.directory, TimerIntent.TRIGGERED)) == 3
    check_replay_equals_live(d.directory, tmp_path)
