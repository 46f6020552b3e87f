"""Conformance: places where feel-scala's behaviour is taken from its own test suite.

Each row is (expression, variables, expected), taken from feel-scala's interpreter and built-in tests
(``src/test/scala/org/camunda/feel/impl``), so models written for Camunda evaluate alike here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from feel_expect import YM, Case, case_id, check

from broker.feel import FeelSyntaxError, evaluate_unary_tests, parse

# InterpreterListExpressionTest: "A context filter" (a context's own entries shadow ``item``).
CONTEXT_FILTERS: list[Case] = [
    ("[ {a:1, b:2}, {a:3, b:4} ][a > 2]", {}, [{"a": 3, "b": 4}]),
    ("[ {item:1}, {item:2}, {item:3} ][item >= 2]", {}, [{"item": 2}, {"item": 3}]),
    ("[{a: 1}, {a: 2}, {a: 3}][item.a >= 2]", {}, [{"a": 2}, {"a": 3}]),
    ("[{a: 1}, {a: 2}, {a: 3}][a >= 2]", {}, [{"a": 2}, {"a": 3}]),
    ("[ { x: 1, y: 2 }, { x: null, y: 3 } ][ x < 2 ]", {}, [{"x": 1, "y": 2}]),
    ("xs[item > 1]", {"xs": [{"item": 1}, {"item": 5}]}, [{"item": 5}]),
    ("[1, 2, 3][item >= 2]", {}, [2, 3]),
]

# BuiltinListFunctionsTest: "A and() / all() function", "A or() / any() function".
AND_OR: list[Case] = [
    ("and([])", {}, True),
    ("and([false,null,true])", {}, False),
    ("and(false,null,true)", {}, False),
    ("and([true,true])", {}, True),
    ("and(true,true)", {}, True),
    ("and(0)", {}, None),
    ("and(true, null, true)", {}, None),
    ("or([])", {}, False),
    ("or([false,null,true])", {}, True),
    ("or(false,null,true)", {}, True),
    ("or([false,false])", {}, False),
    ("or(false,false)", {}, False),
    ("or(0)", {}, None),
    ("or(false, null, false)", {}, None),
    ("and(list: [true, false])", {}, False),
    ("or(list: [true, false])", {}, True),
    ("true and and([true, true])", {}, True),
    ("not(or([false]))", {}, True),
]


@pytest.mark.parametrize("case", CONTEXT_FILTERS, ids=case_id)
def test_context_filters(case: Case) -> None:
    check(*case)


@pytest.mark.parametrize("case", AND_OR, ids=case_id)
def test_and_or_functions(case: Case) -> None:
    check(*case)


# InterpreterListExpressionTest: "A some-expression" / "An every-expression" over a range.
QUANTIFIED_RANGES: list[Case] = [
    ("some x in 1..5 satisfies x > 3", {}, True),
    ("some x in 1..5 satisfies x > 10", {}, False),
    ("every x in 1..5 satisfies x < 10", {}, True),
    ("every x in 1..10 satisfies x < 5", {}, False),
    ("some x in 1..n satisfies x = 3", {"n": 3}, True),
    ("every x in n..1 satisfies x > 0", {"n": 3}, True),
    ("some x in [1,2], y in 2..3 satisfies x < y", {}, True),
    ("every x in [1,2], y in 3..4 satisfies x < y", {}, True),
    ("every x in [1,2], y in 2..3 satisfies x < y", {}, False),
    ("some x in 1..x satisfies true", {}, None),
]


@pytest.mark.parametrize("case", QUANTIFIED_RANGES, ids=case_id)
def test_quantifiers_over_ranges(case: Case) -> None:
    check(*case)


# InterpreterContextExpressionTest: "return the value of a key with whitespaces / with special symbols".
SYMBOL_KEYS: list[Case] = [
    ("{foo bar:1}.`foo bar`", {}, 1),
    ("{foo   bar:2}.`foo   bar`", {}, 2),
    ("{foo bar:3, fizz buzz: 4}.`fizz buzz`", {}, 4),
    ("{foo+bar:1}.`foo+bar`", {}, 1),
    ("{foo+bar:1, simple_special++char:4}.`simple_special++char`", {}, 4),
    ('{\U0001f40e:"\U0001f600"}.`\U0001f40e`', {}, "\U0001f600"),
    (
        "{ friend+of+mine:2, hello_there:{ how_are_you?:2, are_you_happy?:`friend+of+mine`+3 } }"
        ".hello_there.`are_you_happy?`",
        {},
        5,
    ),
    ("{a-b: 1, a*b: 2, a/b: 3, a.b: 4}", {}, {"a-b": 1, "a*b": 2, "a/b": 3, "a.b": 4}),
    ("{a : 1, b:a+1}", {}, {"a": 1, "b": 2}),
]

# "fail when special symbols violate context syntax"
SYMBOL_KEY_ERRORS = ["{foo{bar:1}.`foo{bar` = 1", "{foo,bar:1}.`foo,bar` = 1", "{foo:bar:1}.`foo:bar` = 1", "{a#b}"]


@pytest.mark.parametrize("case", SYMBOL_KEYS, ids=case_id)
def test_context_keys_with_symbols(case: Case) -> None:
    check(*case)


@pytest.mark.parametrize("text", SYMBOL_KEY_ERRORS)
def test_context_keys_with_reserved_symbols_fail(text: str) -> None:
    with pytest.raises(FeelSyntaxError):
        parse(text)


# BuiltinConversionFunctionsTest: "A duration() function" with negative components, and the string() forms.
DURATIONS: list[Case] = [
    ('duration("-PT5M")', {}, -dt.timedelta(minutes=5)),
    ('duration("PT-5M")', {}, -dt.timedelta(minutes=5)),
    ('duration("P-1D")', {}, -dt.timedelta(days=1)),
    ('duration("PT-2H")', {}, -dt.timedelta(hours=2)),
    ('duration("PT-3M-4S")', {}, -dt.timedelta(minutes=3, seconds=4)),
    ('duration("-P1Y2M")', {}, YM(-14)),
    ('duration("P-1Y")', {}, YM(-12)),
    ('duration("P-2M")', {}, YM(-2)),
    ('duration("P-1Y-2M")', {}, YM(-14)),
    ('duration(x) = @"-PT5M"', {"x": "PT-5M"}, True),
    ('string(@"-PT0S")', {}, "P0D"),
    ('string(@"P0D")', {}, "P0D"),
    ('string(@"PT0H")', {}, "P0D"),
    ('string(@"PT0H0M")', {}, "P0D"),
    ('string(@"PT0H0M0S")', {}, "P0D"),
    ('string(@"P0DT0H0M0S")', {}, "P0D"),
    ('string(@"-PT1S")', {}, "-PT1S"),
    ('string(@"-PT2M30S")', {}, "-PT2M30S"),
    ('string(@"-P1DT2H3M4S")', {}, "-P1DT2H3M4S"),
    ('string(@"P0Y")', {}, "P0Y"),
    ('string(@"-P0M")', {}, "P0Y"),
    ('string(@"P0Y0M")', {}, "P0Y"),
    ('string(@"-P1Y")', {}, "-P1Y"),
    ('string(@"-P5M")', {}, "-P5M"),
    ('string(@"-P3Y1M")', {}, "-P3Y1M"),
    ('string(@"P1Y2M")', {}, "P1Y2M"),
]


@pytest.mark.parametrize("case", DURATIONS, ids=case_id)
def test_durations_from_strings_and_to_strings(case: Case) -> None:
    check(*case)


_BERLIN = ZoneInfo("Europe/Berlin")

# BuiltinConversionFunctionsTest: "convert (DateTime, Timezone)"; feel-scala's data types guide: a date-time in
# Java's zoned form (``+02:00[Europe/Berlin]``) is the date-time ``@Europe/Berlin``.
NAMED_ZONES: list[Case] = [
    (
        'date and time(@"2020-07-31T14:27:30@Europe/Berlin", "Z")',
        {},
        dt.datetime(2020, 7, 31, 12, 27, 30, tzinfo=dt.UTC),
    ),
    (
        'string(date and time(@"2020-07-31T14:27:30@Europe/Berlin", "America/Los_Angeles"))',
        {},
        "2020-07-31T05:27:30@America/Los_Angeles",
    ),
    ('date and time(@"2020-07-31T14:27:30", "Z")', {}, dt.datetime(2020, 7, 31, 14, 27, 30, tzinfo=dt.UTC)),
    (
        'date and time("2018-04-29T09:30:00+02:00[Europe/Berlin]")',
        {},
        dt.datetime(2018, 4, 29, 9, 30, tzinfo=_BERLIN),
    ),
    (
        'date and time("2018-04-29T09:30:00+02:00[Europe/Berlin]") = @"2018-04-29T09:30:00@Europe/Berlin"',
        {},
        True,
    ),
    ('string(date and time("2018-04-29T09:30:00+02:00[Europe/Berlin]"))', {}, "2018-04-29T09:30:00@Europe/Berlin"),
    ('string(@"2019-08-12T22:22:22[Europe/Berlin]")', {}, "2019-08-12T22:22:22@Europe/Berlin"),
    ('@"2019-08-12T22:22:22+02:00[Europe/Berlin]".timezone', {}, "Europe/Berlin"),
    ('@"2019-08-12T20:22:22Z[Europe/Berlin]" = @"2019-08-12T22:22:22@Europe/Berlin"', {}, True),
    ("date and time(x).timezone", {"x": "2019-08-12T22:22:22+02:00[Europe/Berlin]"}, "Europe/Berlin"),
    ('string(@"2019-08-12T22:22:22@Europe/Berlin")', {}, "2019-08-12T22:22:22@Europe/Berlin"),
    ('date and time("2018-04-29T09:30:00+02:00[Not/AZone]")', {}, None),
    ('date and time("2018-04-29[Europe/Berlin]")', {}, None),
]


@pytest.mark.parametrize("case", NAMED_ZONES, ids=case_id)
def test_date_times_with_named_zones(case: Case) -> None:
    check(*case)


# StringBuiltinFunctions: ``is blank`` is Java's ``String.isBlank`` (``Character.isWhitespace``: no-break spaces
# are not blank) and ``trim`` is Java's ``String.trim`` (every character up to U+0020); ``from base64`` undoes
# ``to base64``.
STRINGS: list[Case] = [
    ('is blank("")', {}, True),
    ('is blank("  ")', {}, True),
    ('is blank("\\t\\n\\r\\u000B\\u000C ")', {}, True),
    ('is blank("\\u001C\\u001D\\u001E\\u001F")', {}, True),
    ('is blank("\\u1680\\u2000\\u2003\\u200A\\u205F\\u3000")', {}, True),
    ('is blank("\\u2028\\u2029")', {}, True),
    ('is blank("\\u00A0")', {}, False),
    ('is blank("\\u2007")', {}, False),
    ('is blank("\\u202F")', {}, False),
    ('is blank("\\u0085")', {}, False),
    ('is blank(" a ")', {}, False),
    ('is blank(string: " ")', {}, True),
    ('trim("  a b \\t\\n")', {}, "a b"),
    ('trim("\\u0000\\u0001a\\u001F")', {}, "a"),
    ('trim("\\u00A0a\\u2003")', {}, "\u00a0a\u2003"),
    ('from base64("SGVsbG8=")', {}, "Hello"),
    ('from base64("")', {}, ""),
    ('from base64(to base64("ünïcödé €"))', {}, "ünïcödé €"),
    ('from base64(value: "Zm9v")', {}, "foo"),
    ('from base64("SGVsbG8")', {}, None),
    ('from base64("not base64!")', {}, None),
    ('from base64("/w==")', {}, None),
    ("from base64(1)", {}, None),
]


@pytest.mark.parametrize("case", STRINGS, ids=case_id)
def test_string_functions(case: Case) -> None:
    check(*case)


# ComparisonTypeTest ("An unary-test equal operator" / "An unary-test operator") and InterpreterUnaryTest: null is
# unequal to a value but cannot be ordered (``< 2``, ranges): null; values of different types compare to null.
UnaryCase = tuple[str, Any, Any]

UNARY_TESTS: list[UnaryCase] = [
    ("1", 1, True),
    ("1", 2, False),
    ("1", None, False),
    ('"a"', None, False),
    ("null", None, True),
    ("null", 1, False),
    ("1", True, None),
    ("1", "a", None),
    ("< 2", 1, True),
    ("> 3", 1, False),
    ("< 2", None, None),
    ("> 3", None, None),
    ("< 1", True, None),
    ("> 1", "a", None),
    ("(0..10)", None, None),
    ("[1..5], [6..10]", None, None),
    ("not(< 2)", None, None),
    ("-", None, True),
    ("(5 < 4)", False, True),
    ("(5 < 4)", True, False),
    ("[1,2,3]", 2, True),
    ("[1,2,3]", 4, False),
    # ``?`` is the input value
    ('starts with(?, "f")', "foo", True),
    ('starts with(?, "b")', "foo", False),
    ("every x in ? satisfies x > 3", [1, 2, 3], False),
    ("every x in ? satisfies x > 3", [4, 5, 6], True),
    ("some x in ? satisfies x > 4", [1, 2, 3], False),
    ("some x in ? satisfies x > 4", [4, 5, 6], True),
    ("? > 2", 3, True),
    ("?.a = 1", {"a": 1}, True),
    ("count(?) > 1", [1, 2], True),
    ("< 5, ? > 10", 12, True),
    ("< max(1,2,3)", 2, True),
    ("< min(1,2,3)", 2, False),
]

# The same tests written with ``in`` in an expression.
IN_NULL: list[Case] = [
    ("null in < 2", {}, None),
    ("null in [1..5]", {}, None),
    ("null in (1, 2)", {}, False),
    ("null in (< 2, 3)", {}, None),
    ("null in (null, 1)", {}, True),
    ("x in [1..5]", {"x": None}, None),
    ("5 in (< 2, 5)", {}, True),
]


@pytest.mark.parametrize("case", UNARY_TESTS, ids=lambda c: f"{c[0]} <- {c[1]!r}")
def test_unary_tests_with_null_and_input_value(case: UnaryCase) -> None:
    tests, value, expected = case
    assert evaluate_unary_tests(tests, value) is expected


@pytest.mark.parametrize("case", IN_NULL, ids=case_id)
def test_null_in_unary_tests(case: Case) -> None:
    check(*case)
