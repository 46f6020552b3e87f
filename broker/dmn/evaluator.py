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
- Boxed expressions nest: a context (entries in order, each seeing those before; its last entry without a name is
  the result, else the context of all entries), a relation (a context per row), a list, an invocation of a BKM.
- Business knowledge models a decision requires are FEEL functions bound under their names: each call checks the
  arguments against the parameters' typeRefs and evaluates the BKM's logic inside the calling evaluation.
- A decision's result must be of its variable's typeRef (values are checked, never converted; null always fits).
- Missing variables are null, as in FEEL; what fails an evaluation is a hit policy violated, an aggregation over
  values that are not numbers, a value not of its typeRef, an invocation missing a parameter, or an expression over
  its budget. The failure names the decision.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from broker import feel
from broker.dmn import model as m
from broker.feel._runtime import Env, Scope
from broker.feel._values import from_host, to_host


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
    def __init__(self, drg: m.Drg, now: dt.datetime | None, limits: feel.Limits | None) -> None:
        self.drg = drg
        self.now = now
        self.limits = limits
        self.call_env: Env | None = None  # the FEEL evaluation that called the BKM now being evaluated

    def expression(self, text: str, context: dict[str, Any]) -> Any:
        """The value of FEEL ``text`` (a FEEL host value: numbers, temporals and durations as FEEL gives them)."""
        if not text:
            return None
        try:
            function = feel.parse(text)._function
            return to_host(self.run(context, function))
        except feel.FeelBudgetExceeded as e:
            raise _Failure(f"failed to evaluate expression '{text}': it {e.reason}") from None
        except Exception as e:  # syntax, assertion, recursion, anything else: a failure, never a crash
            raise _Failure(f"failed to evaluate expression '{text}': {e}") from None

    def matches(self, entry: str, value: Any, context: dict[str, Any]) -> bool:
        if not entry or entry == "-":
            return True
        try:
            test = feel.parse_unary_tests(entry)._test
            result = self.run(context, lambda env: test(env, from_host(value)))
        except feel.FeelBudgetExceeded as e:
            raise _Failure(f"failed to evaluate unary tests '{entry}': it {e.reason}") from None
        except Exception as e:  # syntax, assertion, recursion, anything else: a failure, never a crash
            raise _Failure(f"failed to evaluate unary tests '{entry}': {e}") from None
        return result is True

    def run(self, context: dict[str, Any], function: Callable[[Env], Any]) -> Any:
        """Run a compiled FEEL closure against ``context``.

        The functions in ``context`` (business knowledge models, boxed functions) are bound in a scope of their own
        above the variables, where FEEL looks up the functions it calls by name. Inside a BKM call the closure runs
        in the calling evaluation, so the BKM spends that evaluation's budget: nested calls can never multiply the
        work one expression may do.
        """
        functions = {k: v for k, v in context.items() if isinstance(v, feel.FeelFunction)}
        variables = Scope(context, None, host=True)
        scope = Scope(functions, variables) if functions else variables
        env = self.call_env
        if env is None:
            env = Env(scope, self.now, self.limits or feel.DEFAULT_LIMITS)
            return env.admit(function(env))  # written out in full next (see ``Env.admit``)
        saved = env.scope, env.converted
        env.scope, env.converted = scope, None
        try:
            return env.admit(function(env))
        finally:
            env.scope, env.converted = saved

    def decision(self, decision: m.Decision, context: dict[str, Any], evaluated: EvaluatedDecision) -> None:
        """Fill ``evaluated`` in; on a failure it keeps what was evaluated before (inputs, matched rules)."""
        scope = dict(context)
        for bkm_id in decision.required_bkms:
            bkm = self.drg.bkm(bkm_id)
            if bkm is not None:
                scope[bkm.name] = self.bkm_function(bkm, context)
        value = self.logic(decision.logic, scope, evaluated)
        if decision.type_ref:
            check_type(value, decision.type_ref)
        evaluated.output = value

    def logic(self, logic: m.Logic, context: dict[str, Any], evaluated: EvaluatedDecision | None = None) -> Any:
        """The value of a boxed expression; ``evaluated`` (a decision's top-level table) records inputs and rules."""
        if isinstance(logic, m.LiteralExpression):
            return self.expression(logic.expression, context)
        if isinstance(logic, m.DecisionTable):
            return self.table(logic, context, evaluated or EvaluatedDecision(_NESTED))
        if isinstance(logic, m.ContextLogic):
            entries: dict[str, Any] = {}
            for name, entry in logic.entries:
                entries[name] = self.logic(entry, {**context, **entries})
            if logic.result is not None:
                return self.logic(logic.result, {**context, **entries})
            return entries
        if isinstance(logic, m.RelationLogic):
            return [
                {column: self.logic(cell, context) for column, cell in zip(logic.columns, row, strict=True)}
                for row in logic.rows
            ]
        if isinstance(logic, m.ListLogic):
            return [self.logic(item, context) for item in logic.items]
        if isinstance(logic, m.FunctionDefinition):
            return self.expression(f"function({', '.join(logic.parameters)}) {logic.body}", context)
        return self.invocation(logic, context)

    def invocation(self, invocation: m.Invocation, context: dict[str, Any]) -> Any:
        """Evaluate the invoked BKM's logic with its parameters bound (every parameter must have a value)."""
        bkm = next((b for b in self.drg.bkms if b.name == invocation.bkm_name), None)
        if bkm is None:
            raise _Failure(f"no BKM found with name '{invocation.bkm_name}'")
        scope = dict(context)
        for name, text in invocation.bindings:
            scope[name] = self.expression(text, context)
        for parameter in bkm.parameters:
            if parameter.name not in scope:
                raise _Failure(f"no parameter found with name '{parameter.name}'")
            check_type(scope[parameter.name], parameter.type_ref)
        return self.bkm_body(bkm, scope)

    def bkm_body(self, bkm: m.BusinessKnowledgeModel, scope: dict[str, Any]) -> Any:
        if bkm.logic is None:
            return None
        scope = dict(scope)
        for required_id in bkm.required_bkms:
            required = self.drg.bkm(required_id)
            if required is not None:
                scope[required.name] = self.bkm_function(required, scope)
        return self.logic(bkm.logic, scope)

    def bkm_function(self, bkm: m.BusinessKnowledgeModel, context: dict[str, Any]) -> feel.FeelFunction:
        """The BKM as a FEEL function: each call checks its arguments' types, then evaluates the BKM's logic."""
        names = [p.name for p in bkm.parameters]

        def call(env: Env, args: list[Any]) -> Any:
            for parameter, arg in zip(bkm.parameters, args, strict=False):
                check_type(to_host(env.admit(arg)), parameter.type_ref)
            env.spend(_CALL_COST)
            outer = self.call_env
            self.call_env = env  # the BKM's expressions spend the budget of the expression calling it
            try:
                return from_host(self.bkm_body(bkm, {**context, **dict(zip(names, args, strict=False))}))
            finally:
                self.call_env = outer

        return feel.FeelFunction(names, call, bkm.name)

    def table(self, table: m.DecisionTable, context: dict[str, Any], evaluated: EvaluatedDecision) -> Any:
        values = []
        for inp in table.inputs:
            value = self.expression(inp.expression, context)
            values.append(value)
            evaluated.inputs.append((inp.id, inp.name, feel.to_json_value(value)))
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
            return self.default_output(table, context)
        return _apply_hit_policy(table, matched)

    def default_output(self, table: m.DecisionTable, context: dict[str, Any]) -> Any:
        """Without a matching rule: the outputs' default output entries (null when there are none)."""
        defaults = {out.result_name: self.expression(out.default, context) for out in table.outputs if out.default}
        if not defaults:
            return None
        if len(defaults) == 1:
            return next(iter(defaults.values()))
        return defaults


_CALL_COST = 10
"""Steps one BKM call costs its caller, besides the steps of the BKM's own expressions."""


_NESTED = m.Decision("", "", m.ListLogic(()))
"""Stands for the decision of a table nested in another expression, whose inputs and rules are not reported."""

_TYPE_CHECKS: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | Decimal) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "time": lambda v: isinstance(v, dt.time),
    "date": lambda v: isinstance(v, dt.date) and not isinstance(v, dt.datetime),
    "dateTime": lambda v: isinstance(v, dt.datetime),
    "dayTimeDuration": lambda v: isinstance(v, dt.timedelta),
    "yearMonthDuration": lambda v: isinstance(v, feel.YearMonthDuration),
}


def check_type(value: Any, type_ref: str) -> None:
    """Fail unless ``value`` is of ``type_ref`` (null always is; unknown type names, e.g. item definitions, pass)."""
    name = type_ref.replace("feel:", "")
    check = _TYPE_CHECKS.get(name)
    if value is None or check is None or check(value):
        return
    raise _Failure(f"expected '{name}' but found '{_described(value)}'")


def _described(value: Any) -> str:
    """A value as the FEEL engine of Zeebe names it in type failures (e.g. ``ValNumber(3)``)."""
    if isinstance(value, bool):
        return f"ValBoolean({str(value).lower()})"
    if isinstance(value, int | Decimal):
        return f"ValNumber({value})"
    if isinstance(value, str):
        return f"ValString({value})"
    kinds = [
        (dt.datetime, "ValDateTime"),
        (dt.date, "ValDate"),
        (dt.time, "ValTime"),
        (dt.timedelta, "ValDayTimeDuration"),
        (feel.YearMonthDuration, "ValYearMonthDuration"),
        (list, "ValList"),
        (dict, "ValContext"),
        (feel.FeelFunction, "ValFunction"),
    ]
    kind = next((name for t, name in kinds if isinstance(value, t)), "Val")
    shown = _shown([value])[1:-1] if isinstance(value, list | dict) else str(feel.to_json_value(value))
    return f"{kind}({shown})"


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
    return feel.to_json_value(total)


def _shown(values: list[Any]) -> str:
    return json.dumps(feel.to_json_value(values), separators=(",", ":"), ensure_ascii=False, default=str)[:500]


def _to_json(evaluated: EvaluatedDecision) -> None:
    """Turn what a decision gave (FEEL values) into the JSON values results and records carry."""
    try:
        evaluated.output = feel.to_json_value(evaluated.output)
        for rule in evaluated.matched_rules:
            rule.outputs = [(i, n, feel.to_json_value(v)) for i, n, v in rule.outputs]
    except RecursionError:
        raise _Failure("the result is nested too deeply") from None


def _json_or_none(value: Any) -> Any:
    try:
        return feel.to_json_value(value)
    except RecursionError:
        return None


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
    evaluation = _Evaluation(drg, now, limits)
    context = dict(variables)
    for decision in order:
        evaluated = EvaluatedDecision(decision)
        result.evaluated.append(evaluated)  # a failed decision is listed too (the last one), as Zeebe does
        try:
            evaluation.decision(decision, context, evaluated)
            _to_json(evaluated)
        except (_Failure, RecursionError) as e:
            reason = str(e) if isinstance(e, _Failure) else "it recursed too deeply"
            evaluated.output = None
            evaluated.matched_rules = [
                EvaluatedRule(r.rule_id, r.rule_index, [(i, n, _json_or_none(v)) for i, n, v in r.outputs])
                for r in evaluated.matched_rules
            ]
            result.failed_decision_id = decision.id
            result.failure_message = f"Expected to evaluate decision '{decision_id}', but {reason}"
            result.output = None
            return result
        context[decision.result_name] = evaluated.output
        result.output = evaluated.output
    return result
