"""The public API contract: result types, warnings, the clock, compiled expressions, failures."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest
from test_feel_conformance_builtins import CONTEXT, CONVERSION_AND_BOOLEAN, LIST, NUMERIC, STRING
from test_feel_conformance_core import ARITHMETIC, BOOLEAN, COMPARISON, CONTROL, LITERALS
from test_feel_conformance_data import CONTEXTS, FUNCTIONS, LISTS, NAMES
from test_feel_conformance_temporal import (
    RANGES,
    TEMPORAL_ARITHMETIC,
    TEMPORAL_FUNCTIONS_AND_PROPERTIES,
    TEMPORAL_VALUES,
)
from test_feel_unary_tests import UNARY

import broker.feel as feel
from broker.feel import (
    CompiledExpression,
    FeelEvaluationError,
    YearMonthDuration,
    evaluate,
    evaluate_with_warnings,
    parse,
)

CLOCK = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def test_conformance_suite_has_at_least_600_cases() -> None:
    tables = [
        LITERALS, ARITHMETIC, COMPARISON, BOOLEAN, CONTROL, LISTS, CONTEXTS, FUNCTIONS, NAMES,
        STRING, NUMERIC, LIST, CONTEXT, CONVERSION_AND_BOOLEAN,
        TEMPORAL_VALUES, TEMPORAL_ARITHMETIC, TEMPORAL_FUNCTIONS_AND_PROPERTIES, RANGES, UNARY,
    ]  # fmt: skip
    assert sum(len(t) for t in tables) >= 600


def test_public_surface_is_small() -> None:
    assert set(feel.__all__) == {
        "CompiledExpression",
        "CompiledUnaryTests",
        "DEFAULT_LIMITS",
        "FeelBudgetExceeded",
        "FeelEvaluationError",
        "Limits",
        "FeelFunction",
        "FeelRange",
        "FeelSyntaxError",
        "YearMonthDuration",
        "evaluate",
        "evaluate_unary_tests",
        "evaluate_with_warnings",
        "parse",
        "parse_unary_tests",
        "to_json_value",
    }


# -- numbers --------------------------------------------------------------------------------------


def test_whole_results_are_int_and_fractions_decimal() -> None:
    assert type(evaluate("1.5 * 2", {})) is int
    assert type(evaluate("1 / 4", {})) is Decimal
    assert evaluate("[0.5 * 2, 0.25]", {}) == [1, Decimal("0.25")]
    assert type(evaluate("{a: 2.0}", {})["a"]) is int


def test_float_inputs_are_decimal_numbers() -> None:
    assert evaluate("a + b", {"a": 0.1, "b": 0.2}) == Decimal("0.3")
    assert evaluate("a = 0.3", {"a": 0.3}) is True


def test_results_serialize_to_json_after_decimal_conversion() -> None:
    result = evaluate('{total: 10 / 4, count: 3, tags: ["a"], ok: true, none: null}', {})
    text = json.dumps(result, default=float)
    assert json.loads(text) == {"total": 2.5, "count": 3, "tags": ["a"], "ok": True, "none": None}


def test_years_months_duration_prints_iso() -> None:
    value = evaluate('duration("P1Y2M")', {})
    assert isinstance(value, YearMonthDuration)
    assert str(value) == "P1Y2M"
    assert str(evaluate('duration("P0M")', {})) == "P0Y"  # feel-scala writes the zero years-months duration so
    assert str(evaluate('-duration("P25M")', {})) == "-P2Y1M"


def test_days_time_duration_is_timedelta() -> None:
    assert evaluate('duration("P1DT2H")', {}) == dt.timedelta(days=1, hours=2)


def test_caller_context_is_not_mutated() -> None:
    context = {"items": [{"price": 1.5}], "ctx": {"a": 1}}
    evaluate('context put(ctx, "b", 2)', context)
    evaluate("items[price > 1]", context)
    assert context == {"items": [{"price": 1.5}], "ctx": {"a": 1}}


# -- warnings -------------------------------------------------------------------------------------


def test_missing_variable_warning() -> None:
    value, warnings = evaluate_with_warnings("x + 1", {})
    assert value is None
    assert warnings[0] == "No variable found with name 'x'"


def test_missing_context_entry_warning() -> None:
    value, warnings = evaluate_with_warnings("{x: 1}.y", {})
    assert value is None
    assert warnings == ["No context entry found with key 'y'"]


def test_type_mismatch_warning_names_the_types() -> None:
    value, warnings = evaluate_with_warnings("amount * 2", {"amount": "ten"})
    assert value is None
    assert "string" in warnings[0] and "number" in warnings[0]


def test_not_comparable_warning() -> None:
    value, warnings = evaluate_with_warnings("true < 2", {})
    assert value is None
    assert warnings == ["Can't compare true with 2"]


def test_unknown_function_warning() -> None:
    assert evaluate_with_warnings("f(1, 2)", {}) == (None, ["No function found with name 'f' and 2 parameters"])
    assert evaluate_with_warnings("f(x: 1, y: 2)", {}) == (
        None,
        ["No function found with name 'f' and parameters: x,y"],
    )


def test_failed_builtin_invocation_warning() -> None:
    value, warnings = evaluate_with_warnings("number(null)", {})
    assert value is None
    assert warnings[0].startswith("Failed to invoke function 'number'")


def test_non_boolean_condition_warning() -> None:
    value, warnings = evaluate_with_warnings("if 5 then 1 else 2", {})
    assert value == 2
    assert warnings == ["Expected boolean but found 5"]


def test_property_warning_lists_available_properties() -> None:
    _, warnings = evaluate_with_warnings('@"P1Y".days', {})
    assert warnings == ["No property found with name 'days' of value P1Y. Available properties: years,months"]


def test_successful_evaluation_has_no_warnings() -> None:
    assert evaluate_with_warnings('a > 1 and b = "x"', {"a": 2, "b": "x"}) == (True, [])


def test_warnings_are_bounded_and_distinct() -> None:
    _, warnings = evaluate_with_warnings("for i in 1..1000 return missing + i", {})
    assert warnings.count("No variable found with name 'missing'") == 1
    assert len(warnings) <= 50


# -- clock ----------------------------------------------------------------------------------------


def test_now_and_today_use_the_given_clock() -> None:
    assert evaluate("now()", {}, now=CLOCK) == CLOCK
    assert evaluate("today()", {}, now=CLOCK) == dt.date(2024, 5, 1)
    assert evaluate('now() + duration("P1D")', {}, now=CLOCK) == CLOCK + dt.timedelta(days=1)


def test_now_without_clock_is_null_with_warning() -> None:
    value, warnings = evaluate_with_warnings("now()", {})
    assert value is None
    assert warnings and "now()" in warnings[0]
    assert evaluate_with_warnings("today()", {})[0] is None


# -- compiled expressions -------------------------------------------------------------------------


def test_compiled_expression_fast_path_and_reuse() -> None:
    compiled = parse("amount > limit")
    assert isinstance(compiled, CompiledExpression)
    assert compiled.evaluate({"amount": 5, "limit": 3}) is True
    assert compiled.evaluate({"amount": 1, "limit": 3}) is False
    assert evaluate(compiled, {"amount": 4, "limit": 3}) is True
    assert compiled.evaluate_with_warnings({"amount": 1}) == (
        None,
        [
            "No variable found with name 'limit'",
            "Can't compare 1 with null",
        ],
    )
    assert compiled.text == "amount > limit"


def test_parse_caches_compiled_expressions() -> None:
    assert parse("1 + 1") is parse("1 + 1")


def test_context_may_be_any_mapping_or_none() -> None:
    from types import MappingProxyType

    assert evaluate("a", MappingProxyType({"a": 1})) == 1
    assert evaluate("1 + 1", None) == 2


# -- hard failures --------------------------------------------------------------------------------


def test_failed_assert_raises() -> None:
    with pytest.raises(FeelEvaluationError, match="'x' should be positive"):
        evaluate("assert(x, x >= 0, \"'x' should be positive\")", {"x": -1})
    with pytest.raises(FeelEvaluationError):
        evaluate("assert(x, x != null)", {})


def test_runaway_recursion_raises_evaluation_error() -> None:
    with pytest.raises(FeelEvaluationError):
        evaluate("{f: function(n) f(n + 1), r: f(0)}.r", {})


def test_uuid_and_random_are_not_available() -> None:
    """Nondeterministic functions would break replay; they are unknown functions here."""
    assert evaluate_with_warnings("uuid()", {})[0] is None
    assert evaluate_with_warnings("random number()", {})[0] is None
