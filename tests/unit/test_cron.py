"""Cron expressions (Spring's six fields, as Zeebe accepts in timeCycle): parsing and the next matching instant."""

from __future__ import annotations

import datetime as dt

import pytest

from broker.engine import timers
from broker.engine.cron import CronError, looks_like_cron, parse_cron


def ms(text: str) -> int:
    """Epoch ms of a UTC date-time written ``YYYY-MM-DDTHH:MM:SS`` (optionally with ``.fff``)."""
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


def iso(epoch_ms: int | None) -> str | None:
    if epoch_ms is None:
        return None
    return dt.datetime.fromtimestamp(epoch_ms / 1000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def firings(expression: str, start: str, count: int = 5) -> list[str | None]:
    """The next ``count`` firings after ``start``, each the next one strictly after the previous."""
    schedule = parse_cron(expression)
    at: int | None = ms(start)
    found: list[str | None] = []
    for _ in range(count):
        assert at is not None
        at = schedule.next_after(at)
        found.append(iso(at))
        if at is None:
            break
    return found


# --- the time fields ------------------------------------------------------------------------------------------


def test_every_ten_seconds() -> None:
    assert firings("*/10 * * * * *", "2024-01-01T00:00:00", 3) == [
        "2024-01-01T00:00:10",
        "2024-01-01T00:00:20",
        "2024-01-01T00:00:30",
    ]


def test_every_second_rolls_over_minutes_hours_days_and_years() -> None:
    assert firings("* * * * * *", "2024-12-31T23:59:58", 3) == [
        "2024-12-31T23:59:59",
        "2025-01-01T00:00:00",
        "2025-01-01T00:00:01",
    ]


def test_next_is_strictly_after_even_when_the_start_matches() -> None:
    schedule = parse_cron("0 0 12 * * *")
    noon = ms("2024-05-05T12:00:00")
    assert iso(schedule.next_after(noon)) == "2024-05-06T12:00:00"
    assert iso(schedule.next_after(noon - 1)) == "2024-05-05T12:00:00"
    assert iso(schedule.next_after(noon + 1)) == "2024-05-06T12:00:00"


def test_fractions_of_a_second_round_up_to_the_next_whole_second() -> None:
    schedule = parse_cron("* * * * * *")
    assert schedule.next_after(ms("2024-01-01T00:00:00.250")) == ms("2024-01-01T00:00:01")
    assert schedule.next_after(ms("2024-01-01T00:00:00.999")) == ms("2024-01-01T00:00:01")
    assert schedule.next_after(ms("2024-01-01T00:00:00")) == ms("2024-01-01T00:00:01")


def test_single_values_lists_and_ranges() -> None:
    assert firings("15,45 30 8 * * *", "2024-03-10T08:30:20", 3) == [
        "2024-03-10T08:30:45",
        "2024-03-11T08:30:15",
        "2024-03-11T08:30:45",
    ]
    assert firings("0 58-59,1 * * * *", "2024-03-10T10:57:00", 4) == [
        "2024-03-10T10:58:00",
        "2024-03-10T10:59:00",
        "2024-03-10T11:01:00",
        "2024-03-10T11:58:00",
    ]


def test_steps_with_ranges_and_starting_values() -> None:
    assert firings("5/20 * * * * *", "2024-01-01T00:00:00", 4) == [
        "2024-01-01T00:00:05",
        "2024-01-01T00:00:25",
        "2024-01-01T00:00:45",
        "2024-01-01T00:01:05",
    ]
    assert firings("0 0 9-17/4 * * *", "2024-01-01T00:00:00", 4) == [
        "2024-01-01T09:00:00",
        "2024-01-01T13:00:00",
        "2024-01-01T17:00:00",
        "2024-01-02T09:00:00",
    ]
    assert firings("0 */15 * * * *", "2024-01-01T00:50:00", 2) == ["2024-01-01T01:00:00", "2024-01-01T01:15:00"]


def test_a_later_hour_starts_at_the_first_minute_and_second() -> None:
    assert firings("10,20 5,35 3,4 * * *", "2024-01-01T03:35:20", 2) == [
        "2024-01-01T04:05:10",
        "2024-01-01T04:05:20",
    ]


# --- days, months and weekdays --------------------------------------------------------------------------------


def test_working_hours_on_weekdays() -> None:
    # 2024-01-05 is a Friday: after its last working hour comes Monday 9:00.
    assert firings("0 0 9-17 * * MON-FRI", "2024-01-05T16:30:00", 3) == [
        "2024-01-05T17:00:00",
        "2024-01-08T09:00:00",
        "2024-01-08T10:00:00",
    ]


def test_month_and_weekday_names_are_case_insensitive() -> None:
    assert firings("0 0 0 1 jan,Jul *", "2024-02-01T00:00:00", 2) == ["2024-07-01T00:00:00", "2025-01-01T00:00:00"]
    assert parse_cron("0 0 0 * * mon-fri") == parse_cron("0 0 0 * * 1-5")


def test_sunday_is_0_or_7_and_sun_sat_is_the_whole_week() -> None:
    sundays = ["2024-01-07T00:00:00", "2024-01-14T00:00:00"]
    assert firings("0 0 0 * * 0", "2024-01-01T00:00:00", 2) == sundays
    assert firings("0 0 0 * * 7", "2024-01-01T00:00:00", 2) == sundays
    assert firings("0 0 0 * * SUN", "2024-01-01T00:00:00", 2) == sundays
    assert parse_cron("0 0 0 * * SUN-SAT").days.weekdays == frozenset(range(1, 8))
    assert parse_cron("0 0 0 * * 0-2").days.weekdays == frozenset({7, 1, 2})


def test_weekday_steps_count_from_monday_like_spring() -> None:
    assert parse_cron("0 0 0 * * */2").days.weekdays == frozenset({1, 3, 5, 7})
    assert parse_cron("0 0 0 * * MON/3").days.weekdays == frozenset({1, 4, 7})


def test_question_mark_means_any_day() -> None:
    assert parse_cron("0 0 0 ? * MON") == parse_cron("0 0 0 * * MON")
    assert parse_cron("0 0 0 1 * ?") == parse_cron("0 0 0 1 * *")


def test_day_of_month_and_day_of_week_must_both_match() -> None:
    # Friday the 13th (Spring's rule; Unix cron would fire on every 13th and every Friday).
    assert firings("0 0 0 13 * FRI", "2024-01-01T00:00:00", 3) == [
        "2024-09-13T00:00:00",
        "2024-12-13T00:00:00",
        "2025-06-13T00:00:00",
    ]


def test_month_steps_and_skipped_short_months() -> None:
    assert firings("0 0 0 1 */3 *", "2024-01-01T00:00:00", 3) == [
        "2024-04-01T00:00:00",
        "2024-07-01T00:00:00",
        "2024-10-01T00:00:00",
    ]
    assert firings("0 0 0 31 * *", "2024-01-31T00:00:00", 3) == [
        "2024-03-31T00:00:00",
        "2024-05-31T00:00:00",
        "2024-07-31T00:00:00",
    ]


def test_february_29_only_in_leap_years() -> None:
    assert firings("0 0 0 29 2 *", "2023-01-01T00:00:00", 3) == [
        "2024-02-29T00:00:00",
        "2028-02-29T00:00:00",
        "2032-02-29T00:00:00",
    ]
    assert firings("0 0 0 29 2 *", "2096-03-01T00:00:00", 1) == ["2104-02-29T00:00:00"]  # 2100 is no leap year


def test_rare_combinations_are_found_years_ahead() -> None:
    assert firings("0 0 0 29 FEB MON", "2024-01-01T00:00:00", 2) == ["2044-02-29T00:00:00", "2072-02-29T00:00:00"]


def test_impossible_dates_never_match() -> None:
    assert parse_cron("0 0 0 30 2 *").next_after(0) is None
    assert parse_cron("0 0 0 31 4,6,9,11 *").next_after(ms("2024-01-01T00:00:00")) is None
    assert parse_cron("0 0 0 1W * SAT").next_after(0) is None  # the nearest weekday is never a Saturday


# --- Quartz extras: L, W, # -----------------------------------------------------------------------------------


def test_last_day_of_month() -> None:
    assert firings("0 0 0 L * *", "2024-01-15T00:00:00", 4) == [
        "2024-01-31T00:00:00",
        "2024-02-29T00:00:00",
        "2024-03-31T00:00:00",
        "2024-04-30T00:00:00",
    ]
    assert firings("0 0 0 L 2 *", "2025-01-01T00:00:00", 1) == ["2025-02-28T00:00:00"]


def test_days_before_the_last() -> None:
    assert firings("0 0 0 L-2 * *", "2024-01-01T00:00:00", 3) == [
        "2024-01-29T00:00:00",
        "2024-02-27T00:00:00",
        "2024-03-29T00:00:00",
    ]


def test_last_weekday_of_month() -> None:
    # March 2024 ends on a Sunday, June 2024 on a Sunday, August 2024 on a Saturday.
    assert firings("0 0 0 LW 3,6,8 *", "2024-01-01T00:00:00", 3) == [
        "2024-03-29T00:00:00",
        "2024-06-28T00:00:00",
        "2024-08-30T00:00:00",
    ]


def test_nearest_weekday_stays_in_the_month() -> None:
    # 2024-06-01 is a Saturday: the nearest weekday inside June is Monday the 3rd, not Friday May 31.
    assert firings("0 0 0 1W 6 *", "2024-01-01T00:00:00", 1) == ["2024-06-03T00:00:00"]
    # 2024-06-15 is a Saturday -> Friday 14th; 2024-09-15 is a Sunday -> Monday 16th.
    assert firings("0 0 0 15W 6,9 *", "2024-01-01T00:00:00", 2) == ["2024-06-14T00:00:00", "2024-09-16T00:00:00"]
    # 2024-03-31 is a Sunday at the month's end -> Friday 29th.
    assert firings("0 0 0 31W 3 *", "2024-01-01T00:00:00", 1) == ["2024-03-29T00:00:00"]


def test_last_given_weekday_of_month() -> None:
    assert firings("0 0 0 * * 5L", "2024-01-01T00:00:00", 3) == [
        "2024-01-26T00:00:00",
        "2024-02-23T00:00:00",
        "2024-03-29T00:00:00",
    ]
    assert parse_cron("0 0 0 * * FRIL") == parse_cron("0 0 0 * * 5L")
    assert firings("0 0 0 * * 0L", "2024-03-01T00:00:00", 1) == ["2024-03-31T00:00:00"]


def test_nth_weekday_of_month() -> None:
    assert firings("0 0 0 * * MON#2", "2024-01-01T00:00:00", 3) == [
        "2024-01-08T00:00:00",
        "2024-02-12T00:00:00",
        "2024-03-11T00:00:00",
    ]
    # A fifth Thursday exists only in some months.
    assert firings("0 0 0 * * 4#5", "2024-01-01T00:00:00", 3) == [
        "2024-02-29T00:00:00",
        "2024-05-30T00:00:00",
        "2024-08-29T00:00:00",
    ]


def test_quartz_extras_are_case_insensitive() -> None:
    assert parse_cron("0 0 0 l * *") == parse_cron("0 0 0 L * *")
    assert parse_cron("0 0 0 15w * *") == parse_cron("0 0 0 15W * *")
    assert parse_cron("0 0 0 lw * *") == parse_cron("0 0 0 LW * *")
    assert parse_cron("0 0 0 * * fril") == parse_cron("0 0 0 * * 5L")
    assert parse_cron("0 0 0 * * mon#2") == parse_cron("0 0 0 * * 1#2")


def test_lists_may_mix_plain_days_and_quartz_extras() -> None:
    assert firings("0 0 0 1,L * *", "2024-01-02T00:00:00", 3) == [
        "2024-01-31T00:00:00",
        "2024-02-01T00:00:00",
        "2024-02-29T00:00:00",
    ]


# --- macros ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("macro", "expected"),
    [
        ("@yearly", "2025-01-01T00:00:00"),
        ("@annually", "2025-01-01T00:00:00"),
        ("@monthly", "2024-06-01T00:00:00"),
        ("@weekly", "2024-05-19T00:00:00"),  # a Sunday
        ("@daily", "2024-05-16T00:00:00"),
        ("@midnight", "2024-05-16T00:00:00"),
        ("@hourly", "2024-05-15T11:00:00"),
        ("@DAILY", "2024-05-16T00:00:00"),
    ],
)
def test_macros(macro: str, expected: str) -> None:
    assert iso(parse_cron(macro).next_after(ms("2024-05-15T10:20:30"))) == expected


# --- invalid expressions --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            "0 0 * * *",
            "expected 6 fields (second minute hour day-of-month month day-of-week) or a macro such as "
            "@daily, but found 5",
        ),
        ("0 0 0 * * * 2024", "but found 7"),
        ("@often", "unknown macro '@often'; use one of @yearly"),
        ("60 * * * * *", "second field '60' has 60, outside 0-59"),
        ("0 60 * * * *", "minute field '60' has 60, outside 0-59"),
        ("0 0 24 * * *", "hour field '24' has 24, outside 0-23"),
        ("0 0 0 0 * *", "day-of-month field '0' has 0, outside 1-31"),
        ("0 0 0 32 * *", "day-of-month field '32' has 32, outside 1-31"),
        ("0 0 0 * 13 *", "month field '13' has 13, outside 1-12"),
        ("0 0 0 * * 8", "day-of-week field '8' has 8, outside 0-7"),
        ("0 0 0 * * FOO", "day-of-week field 'FOO' has 'FOO', which is not a number or a name (MON-SUN)"),
        ("0 0 0 * FOO *", "month field 'FOO' has 'FOO', which is not a number or a name (JAN-DEC)"),
        ("0 0 0 * * MON-FOO", "day-of-week field 'MON-FOO' has 'FOO'"),
        ("x * * * * *", "second field 'x' has 'x', which is not a number"),
        ("² * * * * *", "second field '²' has '²', which is not a number"),
        ("0 0 0 1 JULY *", "month field 'JULY' has 'JULY', which is not a number or a name (JAN-DEC)"),
        ("0 0 17-9 * * *", "hour field '17-9' has range '17-9' going backwards"),
        ("0 0 0 * * FRI-MON", "day-of-week field 'FRI-MON' has range 'FRI-MON' going backwards"),
        ("*/0 * * * * *", "second field '*/0' has step '0'; a step must be a whole number of 1 or more"),
        ("*/x * * * * *", "has step 'x'"),
        ("1,,2 * * * * *", "second field '1,,2' has an empty list item"),
        ("? * * * * *", "second field '?' uses '?', which is only allowed in day-of-month and day-of-week"),
        ("0 0 0 * L *", "month field 'L' has 'L', which is not a number; L, W and # are only allowed"),
        ("0 0 0 L-31 * *", "day-of-month field 'L-31' has 'L-31'; write L-n with n from 1 to 30"),
        ("0 0 0 L-x * *", "write L-n"),
        ("0 0 0 32W * *", "day-of-month field '32W' has '32W'; the day before W must be 1-31"),
        ("0 0 0 W * *", "day-of-month field 'W' has 'W'; use L, L-n, LW or nW"),
        ("0 0 0 1-5W * *", "use L, L-n, LW or nW"),
        ("0 0 0 * * MON#6", "day-of-week field 'MON#6' has 'MON#6'; write d#n with a day and n from 1 to 5"),
        ("0 0 0 * * #2", "write d#n"),
        ("0 0 0 * * L", "day-of-week field 'L' has 'L' without a day"),
        ("0 0 0 * * 9L", "day-of-week field '9L' has 9, outside 0-7"),
    ],
)
def test_invalid_expressions_name_the_field_and_the_problem(expression: str, message: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(expression)
    text = str(caught.value)
    assert text.startswith(f"Invalid cron expression '{expression}' for timer: ")
    assert message in text


def test_cron_errors_are_value_errors() -> None:
    assert issubclass(CronError, ValueError)


# --- the timer side: which cycles are cron, and determinism ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "is_cron"),
    [("0 0 * * * *", True), ("@daily", True), ("  */5 * * * * *  ", True), ("R5/PT10S", False), ("PT10S", False)],
)
def test_cron_is_told_apart_from_iso_cycles(text: str, is_cron: bool) -> None:
    assert looks_like_cron(text) is is_cron


def test_next_after_is_pure_and_deterministic() -> None:
    start = ms("2024-02-27T23:59:59")
    first = parse_cron("0 0 0 L * *")
    second = parse_cron("0 0 0 L * *")
    assert first == second
    assert [first.next_after(start) for _ in range(3)] == [second.next_after(start)] * 3
    assert iso(first.next_after(start)) == "2024-02-29T00:00:00"


def test_expressions_keep_their_text() -> None:
    assert parse_cron("  0 0 9-17 * * MON-FRI ").text == "0 0 9-17 * * MON-FRI"


def test_a_cron_cycle_through_the_timer_module() -> None:
    s = timers.schedule("cycle", "0 0 9-17 * * MON-FRI", ms("2024-01-05T17:00:00"))
    assert (iso(s.due_date), s.repetitions, s.cron) == ("2024-01-08T09:00:00", timers.INFINITE, "0 0 9-17 * * MON-FRI")
