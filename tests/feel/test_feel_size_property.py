"""Property: whatever FEEL builds from literals, contexts, lists, references to earlier entries and built-in calls,
an evaluation returns a value that fits the size budget written out, or raises the FEEL error; nothing else, and
quickly. References to earlier context entries make values share their parts, the way a size bomb does."""

from __future__ import annotations

import json
import time
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.feel import FeelEvaluationError, Limits, evaluate

LIMITS = Limits(max_steps=200_000, max_size=200_000)
SECONDS = 2.0  # generous per evaluation; a budget this small is spent in milliseconds

LITERALS = st.one_of(
    st.integers(-999, 999).map(str),
    st.sampled_from(["null", "true", "false", '""', '"x"', '"abcdefghij"', "1.5", '"é😀"']),
)

#: Built-ins that build lists, contexts or strings from their arguments (``{0}``, ``{1}``: sub-expressions).
CALLS = [
    "append({0}, {1})",
    "concatenate({0}, {1})",
    "[{0}, {1}]",
    "insert before({0}, 1, {1})",
    'context put({0}, "k", {1})',
    "context merge([{0}, {1}])",
    "put all({0}, {1})",
    "{{a: {0}, b: {1}}}",
    "get entries({0})",
    "reverse({0})",
    "sublist({0}, 1, 2)",
    "partition({0}, 1)",
    "flatten([{0}, {1}])",
    "string({0})",
    "to json({0})",
    "string join({0}, {1})",
    "{0} + {1}",
    "count({0})",
    "distinct values({0})",
    "for x in {0} return [x, {1}]",
    "for i in 1..20 return {0}",
    "if {0} = {1} then {0} else {1}",
    "{0}[item != null]",
]


@st.composite
def expressions(draw: Any, names: tuple[str, ...] = (), depth: int = 0) -> str:
    """A FEEL expression over the context entry ``names`` defined before it."""
    kinds = ["literal"] + (["name", "name"] if names else []) + (["list", "context", "call"] if depth < 4 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "literal":
        return str(draw(LITERALS))
    if kind == "name":
        return str(draw(st.sampled_from(names)))
    if kind == "list":
        items = draw(st.lists(expressions(names, depth + 1), max_size=4))
        return "[" + ", ".join(items) + "]"
    if kind == "context":
        entries: list[str] = []
        defined = names
        for index in range(draw(st.integers(1, 8))):
            name = f"e{depth}x{index}"
            entries.append(f"{name}: {draw(expressions(defined, depth + 1))}")
            defined = (*defined, name)
        return "{" + ", ".join(entries) + "}"
    template = draw(st.sampled_from(CALLS))
    return template.format(draw(expressions(names, depth + 1)), draw(expressions(names, depth + 1)))


def written_size(value: Any) -> int:
    return len(json.dumps(value, default=str, ensure_ascii=False))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions())
def test_an_evaluation_fits_the_budget_written_out_or_fails_on_it(expression: str) -> None:
    start = time.process_time()
    try:
        value = evaluate(expression, limits=LIMITS)
    except FeelEvaluationError:  # the budgets (FeelBudgetExceeded), or a list holding itself
        pass
    else:
        assert written_size(value) <= LIMITS.max_size + 100
    elapsed = time.process_time() - start
    assert elapsed < SECONDS, f"took {elapsed:.2f}s"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 40), st.sampled_from(CALLS))
def test_doubling_through_any_built_in_stays_within_the_budget(levels: int, template: str) -> None:
    """Each entry applies the built-in to the one before, twice: sharing doubles the written size per level."""
    entries = ['v0: [1, "ab"]']
    for i in range(1, levels + 1):
        entries.append(f"v{i}: " + template.format(f"v{i - 1}", f"v{i - 1}"))
    expression = "{" + ", ".join(entries) + "}"
    start = time.process_time()
    try:
        value = evaluate(expression, limits=LIMITS)
    except FeelEvaluationError:
        pass
    else:
        assert written_size(value) <= LIMITS.max_size + 100
    assert time.process_time() - start < SECONDS
