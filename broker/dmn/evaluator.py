"""Evaluate a decision of a DRG: its required decisions first (each once, in dependency order), then itself.

Semantics follow DMN 1.3 as Zeebe evaluates it:

- A decision sees the given variables plus the result of each required decision under that decision's variable
  name (its ``variable`` element), or its id when it has none.
- Decision tables: each input expression is evaluated once; a rule matches when every input entry (FEEL unary tests,
  ``-`` or empty for "any") accepts its input's value. A rule's result is its single output entry's value, or a
  context of output name to value when the table has several outputs.
- Hit policies: UNIQUE (more than one match fails), FIRST (first in table order), PRIORITY (the rule whose outputs
  rank first in the outputs' output values), ANY (every match must give the same result), COLLECT (a list, or its
  SUM/MIN/MAX/COUNT), RULE ORDER (a list in table order), OUTPUT ORDER (a list ranked by output values).
- Without a matching rule, whatever the hit policy, the output is the outputs' default output entries, else null.
- The matched rules reported are every rule that matched, in table order (only the first one for FIRST).
- Missing variables are null, as in FEEL; what fails an evaluation is a hit policy violated, an aggregation over
  values that are not numbers, or an expression over its budget. The failure names the decision.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from broker import feel
from broker.dmn import model as m
from broker.engine.expressions import to_json_value


@dataclass(slots=True)
class EvaluatedRule:
    rule_id: str
    rule_index: int
    outputs: list[tuple[str, str, Any]]  # (output id, output name, value)


@dataclass(slots=True)
class EvaluatedDecision:
    decision: m.Decision
    output: Any = None
    inputs: list[tuple[str, str, Any]] = field(default_factory=list)  # (input id, input name, value)
    matched_rules: list[EvaluatedRule] = field(default_factory=list)


@dataclass(slots=True)
class DecisionResult:
    """What evaluating a decision gave: its output, every decision evaluated (required ones first), or the failure
    (then the failed decision is the last one evaluated)."""

    output: Any = None
    evaluated: list[EvaluatedDecision] = field(default_factory=list)
    failed_decision_id: str = ""
    failure_message: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.failure_message)


class _Failure(Exception):
    pass


class _Evaluation:
    def __init__(self, now: dt.datetime | None, limits: feel.Limits | None) -> None:
        self.now = now
        self.limits = limits

    def expression(self, text: str, context: dict[str, Any]) -> Any:
        if not text:
            return None
        try:
            value, _warnings = feel.evaluate_with_warnings(text, context, now=self.now, limits=self.limits)
        except feel.FeelBudgetExceeded as e:
            raise _Failure(f"failed to evaluate expression '{text}': it {e.reason}") from None
        except Exception as e:  # syntax, assertion, recursion, anything else: a failure, never a crash
            raise _Failure(f"failed to evaluate expression '{text}': {e}") from None
        try:
            return to_json_value(value)
        except RecursionError:
            raise _Failure(f"failed to evaluate expression '{text}': the result is nested too deeply") from None

    def matches(self, entry: str, value: Any, context: dict[str, Any]) -> bool:
        if not entry or entry == "-":
            return True
        try:
            compiled = feel.parse_unary_tests(entry)
            result, _warnings = compiled.evaluate_with_warnings(value, context, self.now, self.limits)
        except feel.FeelBudgetExceeded as e:
            raise _Failure(f"failed to evaluate unary tests '{entry}': it {e.reason}") from None
        except Exception as e:  # syntax, assertion, recursion, anything else: a failure, never a crash
            raise _Failure(f"failed to evaluate unary tests '{entry}': {e}") from None
        return result is True

    def decision(self, decision: m.Decision, context: dict[str, Any], evaluated: EvaluatedDecision) -> None:
        """Fill ``evaluated`` in; on a failure it keeps what was evaluated before (inputs, matched rules)."""
        if isinstance(decision.logic, m.LiteralExpression):
            evaluated.output = self.expression(decision.logic.expression, context)
            return
        self.table(decision.logic, context, evaluated)

    def table(self, table: m.DecisionTable, context: dict[str, Any], evaluated: EvaluatedDecision) -> None:
        values = []
        for inp in table.inputs:
            value = self.expression(inp.expression, context)
            values.append(value)
            evaluated.inputs.append((inp.id, inp.name, value))
        matched = evaluated.matched_rules
        for rule in table.rules:
            if all(self.matches(e, v, context) for e, v in zip(rule.input_entries, values, strict=True)):
                outputs = [
                    (out.id, out.result_name, self.expression(entry, context))
                    for out, entry in zip(table.outputs, rule.output_entries, strict=True)
                ]
                matched.append(EvaluatedRule(rule.id, rule.index, outputs))
                if table.hit_policy == m.FIRST:
                    break
        if not matched:
            evaluated.output = self.default_output(table, context)
            return
        evaluated.output = _apply_hit_policy(table, matched)

    def default_output(self, table: m.DecisionTable, context: dict[str, Any]) -> Any:
        """Without a matching rule: the outputs' default output entries (null when there are none)."""
        defaults = {out.result_name: self.expression(out.default, context) for out in table.outputs if out.default}
        if not defaults:
            return None
        if len(defaults) == 1:
            return next(iter(defaults.values()))
        return defaults


def _rule_result(table: m.DecisionTable, rule: EvaluatedRule) -> Any:
    if len(table.outputs) == 1:
        return rule.outputs[0][2]
    return {name: value for _id, name, value in rule.outputs}


def _rank(table: m.DecisionTable, rule: EvaluatedRule) -> tuple[int, ...]:
    """Where the rule's outputs stand in the outputs' output values (lower first; unlisted values last)."""
    ranks = []
    for out, (_id, _name, value) in zip(table.outputs, rule.outputs, strict=True):
        if not out.values:
            continue
        ranks.append(next((i for i, v in enumerate(out.values) if v == value), len(out.values)))
    return tuple(ranks)


def _number(value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise _Failure(f"expected number but found '{_shown([value])[1:-1]}'")
    return Decimal(str(value)) if isinstance(value, float) else Decimal(value)


def _apply_hit_policy(table: m.DecisionTable, matched: list[EvaluatedRule]) -> Any:
    """The table's output from its matching rules (at least one; only the first one for FIRST)."""
    policy = table.hit_policy
    results = [_rule_result(table, r) for r in matched]
    if policy == m.UNIQUE and len(matched) > 1:
        ids = ", ".join(f"'{r.rule_id}'" for r in matched)
        raise _Failure(
            f"multiple values aren't allowed for UNIQUE hit policy, but rules {ids} matched. found: '{_shown(results)}'"
        )
    if policy == m.ANY:
        distinct = [r for i, r in enumerate(results) if r not in results[:i]]
        if len(distinct) > 1:
            raise _Failure(f"different values aren't allowed for ANY hit policy. found: '{_shown(distinct)}'")
    if policy == m.PRIORITY:
        return _rule_result(table, min(matched, key=lambda r: _rank(table, r)))
    if policy in m.SINGLE_RESULT_POLICIES:
        return results[0]
    if policy == m.OUTPUT_ORDER:
        return [_rule_result(table, r) for r in sorted(matched, key=lambda r: _rank(table, r))]
    if policy != m.COLLECT or table.aggregation is None:
        return results
    if table.aggregation == "COUNT":
        return len(results)
    numbers = [_number(v) for v in results]
    if table.aggregation == "SUM":
        total: Decimal = sum(numbers, Decimal(0))
    elif table.aggregation == "MIN":
        total = min(numbers)
    else:
        total = max(numbers)
    return to_json_value(total)


def _shown(values: list[Any]) -> str:
    return json.dumps(values, separators=(",", ":"), ensure_ascii=False, default=str)[:500]


def evaluation_order(drg: m.Drg, decision_id: str) -> list[m.Decision]:
    """The decision and its required decisions, each once, every decision after those it requires."""
    order: list[m.Decision] = []
    done: set[str] = set()
    target = drg.decision(decision_id)
    if target is None:
        return order
    stack: list[tuple[m.Decision, int]] = [(target, 0)]
    while stack:
        decision, next_req = stack.pop()
        if decision.id in done:
            continue
        if next_req < len(decision.required):
            stack.append((decision, next_req + 1))
            required = drg.decision(decision.required[next_req])
            if required is not None and required.id not in done:
                stack.append((required, 0))
            continue
        done.add(decision.id)
        order.append(decision)
    return order


def evaluate_decision(
    drg: m.Drg,
    decision_id: str,
    variables: dict[str, Any],
    *,
    now: dt.datetime | None = None,
    limits: feel.Limits | None = None,
) -> DecisionResult:
    """Evaluate ``decision_id`` of ``drg`` against ``variables``; never raises for a failed evaluation."""
    result = DecisionResult()
    order = evaluation_order(drg, decision_id)
    if not order:
        result.failed_decision_id = decision_id
        result.failure_message = (
            f"Expected to evaluate decision '{decision_id}', but no decision found for id '{decision_id}'"
        )
        return result
    evaluation = _Evaluation(now, limits)
    context = dict(variables)
    for decision in order:
        evaluated = EvaluatedDecision(decision)
        result.evaluated.append(evaluated)  # a failed decision is listed too (the last one), as Zeebe does
        try:
            evaluation.decision(decision, context, evaluated)
        except _Failure as e:
            evaluated.output = None
            result.failed_decision_id = decision.id
            result.failure_message = f"Expected to evaluate decision '{decision_id}', but {e}"
            result.output = None
            return result
        context[decision.result_name] = evaluated.output
        result.output = evaluated.output
    return result
