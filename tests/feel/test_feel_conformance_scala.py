"""Conformance: places where feel-scala's behaviour is taken from its own test suite.

Each row is (expression, variables, expected), taken from feel-scala's interpreter and built-in tests
(``src/test/scala/org/camunda/feel/impl``), so models written for Camunda evaluate alike here.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from feel_expect import NOW, YM, Case, case_id, check

from broker.feel import FeelSyntaxError, evaluate_unary_tests, evaluate_with_warnings, parse

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


# Every built-in takes its arguments by name too, under feel-scala's parameter names (``*BuiltinFunctions.scala``),
# also where they differ from the DMN specification's (``sublist(start)``, ``abs(number)``, ``extract(input)``,
# ``get value(keys)``). A name the built-in does not know yields null with a warning.
NAMED_CALLS: list[str] = [
    "not(negand: true)",
    "is defined(value: 1)",
    "get or else(value: null, default: 2)",
    "assert(value: 1, condition: true)",
    'assert(value: 1, condition: true, cause: "x")',
    'date(from: "2020-01-02")',
    "date(year: 2020, month: 1, day: 2)",
    'date and time(from: "2020-01-02T10:00:00")',
    'date and time(date: date("2020-01-02"), time: time("10:00:00"))',
    'date and time(date: @"2020-01-02T10:00:00", timezone: "Z")',
    'time(from: "10:00:00")',
    "time(hour: 10, minute: 0, second: 0)",
    'time(hour: 10, minute: 0, second: 0, offset: duration("PT1H"))',
    'number(from: "1")',
    'number(from: "1,000", grouping separator: ",")',
    'number(from: "1.000,5", grouping separator: ".", decimal separator: ",")',
    "string(from: 1)",
    'duration(from: "P1D")',
    'years and months duration(from: date("2020-01-01"), to: date("2021-02-01"))',
    "list contains(list: [1], element: 1)",
    "count(list: [1])",
    "min(list: [1,2])",
    "max(list: [1,2])",
    "sum(list: [1,2])",
    "product(list: [2,3])",
    "mean(list: [1,3])",
    "median(list: [1,3])",
    "stddev(list: [1,3])",
    "mode(list: [1,1])",
    "and(list: [true])",
    "all(list: [true])",
    "or(list: [true])",
    "any(list: [true])",
    "sublist(list: [1,2,3], start: 2)",
    "sublist(list: [1,2,3], start: 2, length: 1)",
    "sublist(list: [1,2,3], start position: 2, length: 1)",
    "append(list: [1], items: [2])",
    "concatenate(lists: [[1],[2]])",
    "insert before(list: [1,3], position: 2, newItem: 2)",
    "remove(list: [1,2], position: 2)",
    "reverse(list: [1,2])",
    "index of(list: [1,2], match: 2)",
    "union(lists: [[1],[2]])",
    "distinct values(list: [1,1])",
    "duplicate values(list: [1,1])",
    "flatten(list: [[1]])",
    "sort(list: [2,1], precedes: function(x,y) x < y)",
    'string join(list: ["a","b"])',
    'string join(list: ["a","b"], delimiter: ",")',
    'string join(list: ["a","b"], delimiter: ",", prefix: "[", suffix: "]")',
    "partition(list: [1,2,3], size: 2)",
    "is empty(list: [])",
    "decimal(n: 1.5, scale: 0)",
    'decimal(n: 1.5, scale: 0, mode: "up")',
    "floor(n: 1.5)",
    "floor(n: 1.55, scale: 1)",
    "ceiling(n: 1.5)",
    "ceiling(n: 1.55, scale: 1)",
    "abs(n: -1)",
    "abs(number: -1)",
    "modulo(dividend: 5, divisor: 3)",
    "sqrt(number: 4)",
    "log(number: 1)",
    "exp(number: 0)",
    "odd(number: 1)",
    "even(number: 2)",
    "round up(n: 1.5, scale: 0)",
    "round down(n: 1.5, scale: 0)",
    "round half up(n: 1.5, scale: 0)",
    "round half down(n: 1.5, scale: 0)",
    'substring(string: "abc", start position: 2)',
    'substring(string: "abc", start position: 2, length: 1)',
    'string length(string: "abc")',
    'upper case(string: "abc")',
    'lower case(string: "ABC")',
    'substring before(string: "abc", match: "b")',
    'substring after(string: "abc", match: "b")',
    'replace(input: "abc", pattern: "b", replacement: "x")',
    'replace(input: "abc", pattern: "B", replacement: "x", flags: "i")',
    'contains(string: "abc", match: "b")',
    'starts with(string: "abc", match: "a")',
    'ends with(string: "abc", match: "c")',
    'matches(input: "abc", pattern: "b")',
    'matches(input: "abc", pattern: "B", flags: "i")',
    'split(string: "a b", delimiter: " ")',
    'extract(input: "a1b2", pattern: "[0-9]")',
    'trim(string: " a ")',
    'to base64(value: "a")',
    'is blank(string: " ")',
    "get entries(context: {a:1})",
    "get entries(m: {a:1})",
    'get value(context: {a:1}, key: "a")',
    'get value(m: {a:1}, key: "a")',
    'get value(context: {a:{b:1}}, keys: ["a","b"])',
    'put(context: {}, key: "a", value: 1)',
    "put all(contexts: [{a:1},{b:2}])",
    'context(entries: [{key:"a", value:1}])',
    'context put(context: {}, key: "a", value: 1)',
    'context put(context: {}, keys: ["a","b"], value: 1)',
    "context merge(contexts: [{a:1},{b:2}])",
    'day of year(date: date("2020-01-02"))',
    'day of week(date: date("2020-01-02"))',
    'month of year(date: date("2020-01-02"))',
    'week of year(date: date("2020-01-02"))',
    'last day of month(date: date("2020-01-02"))',
    "before(point1: 1, point2: 2)",
    "before(point: 1, range: [2..3])",
    "before(range: [1..2], point: 3)",
    "before(range1: [1..2], range2: [3..4])",
    "after(point1: 2, point2: 1)",
    "meets(range1: [1..2], range2: [2..3])",
    "met by(range1: [2..3], range2: [1..2])",
    "overlaps(range1: [1..3], range2: [2..4])",
    "overlaps before(range1: [1..3], range2: [2..4])",
    "overlaps after(range1: [2..4], range2: [1..3])",
    "finishes(point: 3, range: [1..3])",
    "finishes(range1: [2..3], range2: [1..3])",
    "finished by(range: [1..3], point: 3)",
    "includes(range: [1..3], point: 2)",
    "includes(range1: [1..3], range2: [2..2])",
    "during(point: 2, range: [1..3])",
    "starts(point: 1, range: [1..3])",
    "started by(range: [1..3], point: 1)",
    "coincides(point1: 1, point2: 1)",
    "coincides(range1: [1..2], range2: [1..2])",
    "is(value1: 1, value2: 1)",
    'range(from: "[1..2]")',
    'from json(value: "1")',
    "to json(value: 1)",
]


@pytest.mark.parametrize("expression", NAMED_CALLS)
def test_builtins_take_named_parameters(expression: str) -> None:
    value, warnings = evaluate_with_warnings(expression, now=NOW)
    assert value is not None and not warnings, f"{expression}: {value!r} {warnings}"
