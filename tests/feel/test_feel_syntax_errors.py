"""Unparsable FEEL raises FeelSyntaxError pointing at the offending place."""

from __future__ import annotations

import pytest

from broker.feel import FeelSyntaxError, evaluate, parse, parse_unary_tests

# (text, 0-based position of the reported token)
SYNTAX_ERRORS: list[tuple[str, int]] = [
    ("", 0),
    ("1 +", 3),
    ("1 + * 2", 4),
    ("(1 + 2", 6),
    ("[1, 2", 5),
    ("{a: 1", 5),
    ("{a 1}", 3),
    ('"unterminated', 0),
    ("if x then 1", 11),
    ("if x 1 else 2", 5),
    ("for x [1] return x", 6),
    ("some x in [1] x > 1", 14),
    ("a ++ b", 3),
    ("x instance of nothing", 2),
    ("1 2", 2),
    ("a.", 2),
    ("f(a: 1, 2)", 8),
    ("`unterminated", 0),
    ('@"not a date"', 0),
    ("{a: 1, a: 2}", 7),
    ("function(x) external {}", 12),
    ("#", 0),
    ("a = = b", 4),
    ("/* never closed", 0),
]


@pytest.mark.parametrize("text,position", SYNTAX_ERRORS, ids=[t for t, _ in SYNTAX_ERRORS])
def test_syntax_error_position(text: str, position: int) -> None:
    with pytest.raises(FeelSyntaxError) as raised:
        parse(text)
    assert raised.value.position == position, str(raised.value)
    assert raised.value.expression == text
    assert str(raised.value)


def test_line_and_column_are_one_based() -> None:
    with pytest.raises(FeelSyntaxError) as raised:
        parse("{\n  a: 1,\n  b: * 2\n}")
    error = raised.value
    assert (error.line, error.column) == (3, 6)
    assert error.position == 15
    assert "line 3, column 6" in str(error)


def test_evaluate_of_text_raises_syntax_errors() -> None:
    with pytest.raises(FeelSyntaxError):
        evaluate("1 +", {})


def test_message_names_what_was_found() -> None:
    with pytest.raises(FeelSyntaxError, match=r"found '\*'"):
        parse("1 + * 2")


@pytest.mark.parametrize("text", ["< ", "[1..", "not(1", "1,"])
def test_unary_test_syntax_errors(text: str) -> None:
    with pytest.raises(FeelSyntaxError):
        parse_unary_tests(text)


def test_syntax_error_is_a_value_error() -> None:
    """Callers validating models can catch ValueError without importing FEEL types."""
    with pytest.raises(ValueError):
        parse(")")
