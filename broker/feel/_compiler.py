"""Compile syntax trees into trees of Python closures, each ``fn(env) -> value``.

Compiling once and calling closures avoids re-dispatching on node types at every evaluation; the
engine keeps compiled expressions per deployed model.

The evaluation budget (``Env.spend`` / ``Env.grow``) is charged where work can repeat or data can grow
without bound: each loop iteration and filtered item costs the number of syntax nodes in its body (counted
once at compile time), each function call its body or the items a built-in reads, and every string, list
or context built is charged by its size. Straight-line code needs no charge: its cost is bounded by the
length of the text. Values share their parts by reference, so a value is also measured written out in full
(``Env.admit``) before anything writes it out: the result, and what ``flatten``, ``string`` and ``to json`` expand.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from . import _lib_core, _lib_numeric, _lib_string, _lib_temporal  # noqa: F401  (register built-ins)
from ._errors import FeelSyntaxError
from ._ops import ARITHMETIC, negate
from ._parser import Node
from ._registry import Builtin, find_named, find_positional
from ._runtime import ITEM_SIZE, Env, Scope
from ._temporal import temporal_properties
from ._values import (
    KIND_NAMES,
    MISSING,
    READ_STEPS,
    FeelFunction,
    FeelRange,
    compare,
    describe,
    is_number,
    type_name,
    values_equal,
)

Compiled = Callable[[Env], Any]
UnaryTest = Callable[[Env, Any], Any]

_KNOWN_TYPES = frozenset(set(KIND_NAMES.values()) - {"null", "unknown"}) | {"Any", "Null"}


def _is_bool(value: Any) -> bool:
    return value is True or value is False


class Compiler:
    """Turns one syntax tree into closures; ``source`` is kept for error positions."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.nodes = 0  # syntax nodes compiled so far: the step cost of a loop body is the difference
        self.partial_uses = 0  # references to the name ``partial`` compiled so far

    def compile(self, node: Node) -> Compiled:
        self.nodes += 1
        method = getattr(self, "c_" + node[0])
        result: Compiled = method(node)
        return result

    # -- literals and names ------------------------------------------------------------------------

    def c_lit(self, node: Node) -> Compiled:
        value = node[2]
        return lambda env: value

    def c_name(self, node: Node) -> Compiled:
        name = node[2]
        message = f"No variable found with name '{name}'"
        if name == "partial":
            self.partial_uses += 1

        def variable(env: Env) -> Any:
            scope: Scope | None = env.scope
            while scope is not None:
                value = scope.vars.get(name, MISSING)
                if value is not MISSING:
                    return env.host_value(value) if scope.host else value
                scope = scope.parent
            env.warn(message)
            return None

        return variable

    def c_list(self, node: Node) -> Compiled:
        items = [self.compile(item) for item in node[2]]
        self.nodes += len(items)  # each slot filled costs about a node more in a loop body
        size = len(items) * ITEM_SIZE

        def make_list(env: Env) -> list[Any]:
            env.grow(size)
            return [item(env) for item in items]

        return make_list

    def c_ctx(self, node: Node) -> Compiled:
        entries = [(key, self.compile(value)) for key, value in node[2]]
        self.nodes += len(entries)  # each entry stored costs about a node more in a loop body
        size = len(entries) * ITEM_SIZE

        def context(env: Env) -> dict[str, Any]:
            env.grow(size)
            result: dict[str, Any] = {}
            previous = env.scope
            env.scope = Scope(result, previous)
            try:
                for key, value in entries:
                    result[key] = value(env)
            finally:
                env.scope = previous
            return result

        return context

    def c_range(self, node: Node) -> Compiled:
        start = self.compile(node[2]) if node[2] is not None else None
        end = self.compile(node[3]) if node[3] is not None else None
        start_included, end_included = node[4], node[5]

        def make_range(env: Env) -> FeelRange | None:
            low = start(env) if start is not None else None
            high = end(env) if end is not None else None
            if low is not None and high is not None and compare(low, high) is None:
                env.warn(f"Invalid range: {describe(low)} and {describe(high)} are not comparable")
                return None
            return FeelRange(low, high, start_included, end_included)

        return make_range

    # -- arithmetic --------------------------------------------------------------------------------

    def c_neg(self, node: Node) -> Compiled:
        operand = self.compile(node[2])
        return lambda env: negate(env, operand(env))

    def c_arith(self, node: Node) -> Compiled:
        op = ARITHMETIC[node[2]]
        left, right = self.compile(node[3]), self.compile(node[4])
        return lambda env: op(env, left(env), right(env))

    # -- comparison --------------------------------------------------------------------------------

    def c_cmp(self, node: Node) -> Compiled:
        op = node[2]
        left, right = self.compile(node[3]), self.compile(node[4])
        if op == "=":
            return lambda env: values_equal(left(env), right(env), env)
        if op == "!=":

            def not_equal(env: Env) -> bool | None:
                result = values_equal(left(env), right(env), env)
                return None if result is None else not result

            return not_equal
        test = _ORDER_TESTS[op]

        def ordered(env: Env) -> bool | None:
            a = left(env)
            b = right(env)
            ta, tb = type(a), type(b)
            if (ta is int or ta is Decimal) and (tb is int or tb is Decimal):
                return test(a, b)
            if ta is str and tb is str:
                return test(a, b)
            order = compare(a, b, env)
            return None if order is None else test(order, 0)

        return ordered

    def c_between(self, node: Node) -> Compiled:
        value, low, high = self.compile(node[2]), self.compile(node[3]), self.compile(node[4])

        def between(env: Env) -> bool | None:
            x = value(env)
            lower = compare(x, low(env), env)
            upper = compare(x, high(env), env)
            if (lower is not None and lower < 0) or (upper is not None and upper > 0):
                return False
            if lower is None or upper is None:
                return None
            return True

        return between

    def c_in(self, node: Node) -> Compiled:
        value = self.compile(node[2])
        tests = [self.unary_test(test) for test in node[3]]

        def in_tests(env: Env) -> bool | None:
            return _any_test(env, tests, value(env))

        return in_tests

    def c_instance(self, node: Node) -> Compiled:
        value = self.compile(node[2])
        spec = node[3]
        self._check_type(spec, node[1])

        def instance_of(env: Env) -> bool:
            return _instance_of(env, value(env), spec)

        return instance_of

    def _check_type(self, spec: Any, position: int) -> None:
        if isinstance(spec, tuple):
            if spec[0] == "context":
                for _, inner in spec[1]:
                    self._check_type(inner, position)
            else:
                self._check_type(spec[1], position)
            return
        if spec not in _KNOWN_TYPES:
            raise FeelSyntaxError(f"unknown type '{spec}'", self.source, position)

    # -- logic and control -------------------------------------------------------------------------

    def c_and(self, node: Node) -> Compiled:
        left, right = self.compile(node[2]), self.compile(node[3])

        def conjunction(env: Env) -> bool | None:
            a = left(env)
            if a is False:
                return False
            b = right(env)
            if b is False:
                return False
            if a is True and b is True:
                return True
            _warn_not_boolean(env, a, b)
            return None

        return conjunction

    def c_or(self, node: Node) -> Compiled:
        left, right = self.compile(node[2]), self.compile(node[3])

        def disjunction(env: Env) -> bool | None:
            a = left(env)
            if a is True:
                return True
            b = right(env)
            if b is True:
                return True
            if a is False and b is False:
                return False
            _warn_not_boolean(env, a, b)
            return None

        return disjunction

    def c_if(self, node: Node) -> Compiled:
        condition, then, otherwise = (self.compile(n) for n in node[2:5])

        def if_then_else(env: Env) -> Any:
            value = condition(env)
            if value is True:
                return then(env)
            if value is not False and value is not None:
                env.warn(f"Expected boolean but found {describe(value)}")
            return otherwise(env)

        return if_then_else

    def _iterators(self, iterators: list[tuple[str, Node, Node | None]]) -> list[tuple[str, Compiled, Any]]:
        return [
            (name, self.compile(domain), self.compile(end) if end is not None else None)
            for name, domain, end in iterators
        ]

    def c_for(self, node: Node) -> Compiled:
        iterators = self._iterators(node[2])
        before = self.nodes
        partial_uses = self.partial_uses
        body = self.compile(node[3])
        cost = self.nodes - before + 1  # the body, plus the iteration itself
        depth = len(iterators)
        if self.partial_uses > partial_uses:
            body = _copying_partial(body)

        def loop(env: Env) -> list[Any] | None:
            results: list[Any] = []
            bindings: dict[str, Any] = {"partial": results}
            previous = env.scope
            env.scope = Scope(bindings, previous)
            try:

                def iterate(level: int) -> bool:
                    name, domain, end = iterators[level]
                    values = _domain(env, domain, end)
                    if values is None:
                        return False
                    for item in values:
                        bindings[name] = item
                        if level + 1 < depth:
                            env.spend(1)
                            if not iterate(level + 1):
                                return False
                        else:
                            env.steps_left -= cost  # env.spend(cost), inlined: this is the hottest loop
                            if env.steps_left < 0:
                                env.out_of_steps()
                            results.append(body(env))
                    return True

                complete = iterate(0)
            finally:
                env.scope = previous
            env.grow(len(results) * ITEM_SIZE)  # the step budget already bounds how long the list got
            return results if complete else None

        return loop

    def _quantifier(self, node: Node, every: bool) -> Compiled:
        iterators = self._iterators(node[2])
        before = self.nodes
        condition = self.compile(node[3])
        cost = self.nodes - before + 1  # the condition, plus the iteration itself
        depth = len(iterators)
        decisive = not every  # some stops at the first true, every at the first false

        def quantified(env: Env) -> bool | None:
            bindings: dict[str, Any] = {}
            previous = env.scope
            env.scope = Scope(bindings, previous)
            unknown = False
            try:

                def iterate(level: int) -> bool | None:
                    nonlocal unknown
                    name, domain, end = iterators[level]
                    values = _domain(env, domain, end)
                    if values is None:
                        return None
                    for item in values:
                        bindings[name] = item
                        if level + 1 < depth:
                            env.spend(1)
                            found = iterate(level + 1)
                            if found is None or found is decisive:
                                return found
                        else:
                            env.steps_left -= cost  # env.spend(cost), inlined
                            if env.steps_left < 0:
                                env.out_of_steps()
                            result = condition(env)
                            if result is decisive:
                                return decisive
                            if result is not (not decisive):
                                if result is not None:
                                    env.warn(f"Expected boolean but found {describe(result)}")
                                unknown = True
                    return not decisive

                outcome = iterate(0)
            finally:
                env.scope = previous
            if outcome is None or outcome is decisive:
                return outcome
            return None if unknown else outcome

        return quantified

    def c_some(self, node: Node) -> Compiled:
        return self._quantifier(node, every=False)

    def c_every(self, node: Node) -> Compiled:
        return self._quantifier(node, every=True)

    # -- paths and filters -------------------------------------------------------------------------

    def c_path(self, node: Node) -> Compiled:
        source = self.compile(node[2])
        key = node[3]
        return lambda env: _path(env, source(env), key)

    def c_filter(self, node: Node) -> Compiled:
        source = self.compile(node[2])
        condition_node = node[3]
        if condition_node[0] == "lit" and is_number(condition_node[2]):
            index = condition_node[2]

            def constant_index(env: Env) -> Any:
                value = source(env)
                if value is None:
                    return None
                return _index(value if type(value) is list else [value], index)

            return constant_index
        before = self.nodes
        condition = self.compile(condition_node)
        cost = self.nodes - before + 1  # the condition, plus the item itself
        # A boolean-shaped condition always filters; anything else may be a computed index, which is
        # recognised by evaluating it once outside the items (as the reference engine does).
        may_be_index = condition_node[0] not in _BOOLEAN_NODES

        def filtered(env: Env) -> Any:
            value = source(env)
            if value is None:
                env.warn("Can't filter null: expected a list")
                return None
            items = value if type(value) is list else [value]
            if may_be_index:
                saved_warnings = env.warnings
                env.warnings = []
                try:
                    probe = condition(env)
                finally:
                    env.warnings = saved_warnings
                if is_number(probe):
                    return _index(items, probe)
            env.spend(cost * len(items))
            previous = env.scope
            # A context's own entries come first, so an entry named ``item`` shadows the item itself.
            item_vars: dict[str, Any] = {"item": None}
            item_scope = Scope(item_vars, previous)
            env.scope = item_scope
            try:
                selected = []
                for item in items:
                    item_vars["item"] = item
                    env.scope = Scope(item, item_scope) if type(item) is dict else item_scope
                    if condition(env) is True:
                        selected.append(item)
                env.grow(len(selected) * ITEM_SIZE)
                return selected
            finally:
                env.scope = previous

        return filtered

    # -- functions ---------------------------------------------------------------------------------

    def c_fndef(self, node: Node) -> Compiled:
        params: tuple[str, ...] = node[2]
        before = self.nodes
        body = self.compile(node[3])
        cost = self.nodes - before + 3  # the body, plus the call itself (arguments bound, scope entered)

        def define(env: Env) -> FeelFunction:
            captured = env.scope

            def impl(call_env: Env, args: list[Any]) -> Any:
                call_env.spend(cost)
                bindings = dict(zip(params, args, strict=False))
                for param in params[len(args) :]:
                    bindings[param] = None
                previous = call_env.scope
                call_env.scope = Scope(bindings, captured)
                try:
                    return body(call_env)
                finally:
                    call_env.scope = previous

            return FeelFunction(params, impl)

        return define

    def _arguments(self, args: tuple[str, list[Any]]) -> tuple[str, list[Any]]:
        kind, items = args
        if kind == "named":
            return kind, [(name, self.compile(value)) for name, value in items]
        return kind, [self.compile(value) for value in items]

    def c_call(self, node: Node) -> Compiled:
        name = node[2]
        kind, args = self._arguments(node[3])
        if kind == "positional":
            builtin = find_positional(name, len(args))
            missing = f"No function found with name '{name}' and {len(args)} parameters"
        else:
            builtin = find_named(name, {n for n, _ in args})
            missing = f"No function found with name '{name}' and parameters: {','.join(n for n, _ in args)}"

        def call(env: Env) -> Any:
            scope: Scope | None = env.scope
            while scope is not None and not scope.host:
                candidate = scope.vars.get(name)
                if type(candidate) is FeelFunction:
                    return _invoke(env, candidate, kind, args)
                scope = scope.parent
            if builtin is None:
                env.warn(missing)
                return None
            return _invoke_builtin(env, builtin, kind, args)

        return call

    def c_apply(self, node: Node) -> Compiled:
        target = self.compile(node[2])
        kind, args = self._arguments(node[3])

        def apply(env: Env) -> Any:
            function = target(env)
            if type(function) is not FeelFunction:
                env.warn(f"Expected a function but found {describe(function)}")
                return None
            return _invoke(env, function, kind, args)

        return apply

    # -- unary tests -------------------------------------------------------------------------------

    def unary_test(self, node: Node) -> UnaryTest:
        tag = node[0]
        if tag == "ut_any":
            return lambda env, value: True
        if tag == "ut_not":
            tests = [self.unary_test(t) for t in node[2]]

            def negated(env: Env, value: Any) -> bool | None:
                result = _any_test(env, tests, value)
                return None if result is None else not result

            return negated
        if tag == "ut_or":
            tests = [self.unary_test(t) for t in node[2]]
            return lambda env, value: _any_test(env, tests, value)
        if tag == "ut_cmp":
            return self._unary_comparison(node[2], self.compile(node[3]))
        return self._unary_expression(self.compile(node[2]), node[3])

    def _unary_comparison(self, op: str, endpoint: Compiled) -> UnaryTest:
        if op in ("=", "!="):

            def equality(env: Env, value: Any) -> bool | None:
                result = values_equal(value, endpoint(env), env)
                if result is None or op == "=":
                    return result
                return not result

            return equality
        test = _ORDER_TESTS[op]

        def ordered(env: Env, value: Any) -> bool | None:
            bound = endpoint(env)
            if value is None or bound is None:
                return None  # null is not ordered: ``< 2`` cannot decide for null (feel-scala alike)
            order = compare(value, bound, env)
            return None if order is None else test(order, 0)

        return ordered

    def _unary_expression(self, expression: Compiled, uses_input: bool) -> UnaryTest:
        def matches(env: Env, value: Any) -> bool | None:
            if uses_input:
                previous = env.scope
                env.scope = Scope({"?": value}, previous)
                try:
                    result = expression(env)
                finally:
                    env.scope = previous
                # feel-scala: an expression of the input decides only by a boolean; anything else (``? > 3``
                # for a null input is null) is null, never compared with the input
                return result if result is True or result is False else None
            return _unary_match(env, value, expression(env))

        return matches


#: Node kinds whose value is a boolean (or null), so a filter using them can never be an index.
_BOOLEAN_NODES = frozenset({"cmp", "and", "or", "between", "in", "instance", "some", "every"})

_ORDER_TESTS: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _copying_partial(body: Compiled) -> Compiled:
    """A loop body that returns ``partial`` itself adds the list as it is now, not the list it is filling
    (which would come to hold itself)."""

    def copying(env: Env) -> Any:
        value = body(env)
        scope = env.scope  # the loop's bindings again, now that the body is done
        if type(value) is list and scope is not None:
            partial: object = scope.vars.get("partial")  # not Any: an ``is`` test against Any drops the list type
            if value is partial:
                env.grow(len(value) * ITEM_SIZE)
                return list(value)
        return value

    return copying


def _warn_not_boolean(env: Env, a: Any, b: Any) -> None:
    for value in (a, b):
        if value is not None and not _is_bool(value):
            env.warn(f"Expected boolean but found {describe(value)}")


def _spend_on_items(env: Env, value: Any) -> None:
    """Charge for the items of a list or context about to be walked in Python."""
    t = type(value)
    if t is list or t is dict:
        env.spend(READ_STEPS * len(value))


#: Steps of a built-in call itself (arguments arranged, signature checked): about four syntax nodes' worth.
BUILTIN_CALL_STEPS = 4


def _builtin_cost(values: Any) -> int:
    """Steps a built-in call costs: the call, plus the items it may read and one per 64 characters of strings."""
    cost = BUILTIN_CALL_STEPS
    for value in values:
        t = type(value)
        if t is list or t is dict:
            cost += READ_STEPS * len(value)
        elif t is str:
            cost += len(value) >> 6
    return cost


def _charge_result(env: Env, result: Any, inputs: Any) -> Any:
    """Charge the size of a string, list or context a call produced (not of an argument handed back)."""
    t = type(result)
    if t is str or t is list or t is dict:
        for value in inputs:
            if value is result:
                return result
        env.grow(len(result) if t is str else len(result) * ITEM_SIZE)
    return result


def _any_test(env: Env, tests: list[UnaryTest], value: Any) -> bool | None:
    """True if one test holds, false if all fail, null when some test could not decide."""
    unknown = False
    for test in tests:
        result = test(env, value)
        if result is True:
            return True
        if result is not False:
            unknown = True
    return None if unknown else False


def range_contains(env: Env | None, feel_range: FeelRange, value: Any) -> bool | None:
    """Whether ``value`` lies within ``feel_range``; null when it cannot be compared with the endpoints (or is
    null itself)."""
    if value is None:
        return None
    if feel_range.start is not None:
        order = compare(value, feel_range.start, env)
        if order is None:
            return None
        if order < 0 or (order == 0 and not feel_range.start_included):
            return False
    if feel_range.end is not None:
        order = compare(value, feel_range.end, env)
        if order is None:
            return None
        if order > 0 or (order == 0 and not feel_range.end_included):
            return False
    return True


def _unary_match(env: Env, value: Any, result: Any) -> bool | None:
    """A unary test's value matches the input if it equals it, contains it, or (for an input that is not a
    boolean) is true; null when the input cannot be compared with it (``1`` tested against ``true``)."""
    t = type(result)
    if t is FeelRange:
        return range_contains(env, result, value)
    equal = values_equal(value, result, None, env)
    if equal is True:
        return True
    if t is list:
        env.spend(READ_STEPS * len(result))
        return any(values_equal(value, item, None, env) is True for item in result)
    if t is bool and type(value) is not bool:
        return result
    if equal is None:
        env.warn(f"Can't compare {describe(value)} with {describe(result)}")
    return equal


def _domain(env: Env, domain: Compiled, end: Compiled | None) -> list[Any] | range | None:
    """The values an iteration runs over: a list, a numeric range, or ``a..b``."""
    start = domain(env)
    if end is not None:
        return _integer_range(env, start, end(env), True, True)
    if type(start) is list:
        return start
    if type(start) is FeelRange:
        return _integer_range(env, start.start, start.end, start.start_included, start.end_included)
    env.warn(f"Expected a list to iterate over but found {describe(start)}")
    return None


def _integer_range(env: Env, low: Any, high: Any, low_in: bool, high_in: bool) -> range | None:
    if not (is_number(low) and is_number(high)) or low != int(low) or high != int(high):
        env.warn(f"Expected whole numbers as range bounds but found {describe(low)} and {describe(high)}")
        return None
    a, b = int(low), int(high)
    step = 1 if b >= a else -1
    if not low_in:
        a += step
    if not high_in:
        b -= step
    if (b - a) * step < 0:
        return range(0)
    if abs(b - a) > 1_000_000:
        env.warn("Range is too large to iterate")
        return None
    return range(a, b + step, step)


def _index(items: list[Any], index: Any) -> Any:
    if index != int(index):
        return None
    position = int(index)
    if position > 0 and position <= len(items):
        return items[position - 1]
    if position < 0 and -position <= len(items):
        return items[position]
    return None


_RANGE_PROPERTIES = ("start", "end", "start included", "end included")


def _path(env: Env, value: Any, key: str) -> Any:
    t = type(value)
    if t is dict:
        found = value.get(key, MISSING)
        if found is MISSING:
            env.warn(f"No context entry found with key '{key}'")
            return None
        return found
    if t is list:
        env.spend(READ_STEPS * len(value))
        env.grow(len(value) * ITEM_SIZE)
        return [item.get(key) if type(item) is dict else _path(env, item, key) for item in value]
    if value is None:
        return None
    if t is FeelRange:
        if key in _RANGE_PROPERTIES:
            return {
                "start": value.start,
                "end": value.end,
                "start included": value.start_included,
                "end included": value.end_included,
            }[key]
        properties: dict[str, Any] | None = dict.fromkeys(_RANGE_PROPERTIES)
    else:
        properties = temporal_properties(value)
        if properties is not None and key in properties:
            return properties[key]
    available = ",".join(properties) if properties else ""
    env.warn(f"No property found with name '{key}' of value {describe(value)}. Available properties: {available}")
    return None


def _evaluate_args(env: Env, kind: str, args: list[Any]) -> Any:
    if kind == "named":
        return {name: value(env) for name, value in args}
    return [value(env) for value in args]


def _invoke(env: Env, function: FeelFunction, kind: str, args: list[Any]) -> Any:
    values = _evaluate_args(env, kind, args)
    if kind == "named":
        unknown = set(values) - set(function.params)
        if unknown:
            env.warn(f"Function has no parameters named {','.join(sorted(unknown))}")
            return None
        ordered = [values.get(param) for param in function.params]
        return function.impl(env, ordered)
    if len(values) != len(function.params):
        env.warn(f"Function expects {len(function.params)} arguments but got {len(values)}")
        return None
    return function.impl(env, values)


def _invoke_builtin(env: Env, builtin: Builtin, kind: str, args: list[Any]) -> Any:
    values = _evaluate_args(env, kind, args)
    inputs = values.values() if kind == "named" else values
    env.spend(_builtin_cost(inputs))
    if kind == "named":
        result = builtin.invoke(env, builtin.arrange_named(values))
    else:
        result = builtin.invoke(env, builtin.arrange_positional(values))
    return _charge_result(env, result, inputs)


def _instance_of(env: Env, value: Any, spec: Any) -> bool:
    """Whether ``value`` has the type ``spec``; the items of every list and context looked at are charged
    (a nested type reads each level, where a shared part is read once per reference)."""
    _spend_on_items(env, value)
    if spec == "Any":
        return value is not None
    if spec == "Null":
        return value is None
    if isinstance(spec, tuple):
        kind, inner = spec
        if kind == "list":
            return type(value) is list and all(_instance_of(env, v, inner) for v in value)
        if kind == "range":
            return type(value) is FeelRange and all(
                v is None or _instance_of(env, v, inner) for v in (value.start, value.end)
            )
        return type(value) is dict and all(k in value and _instance_of(env, value[k], t) for k, t in inner)
    return value is not None and type_name(value) == spec
