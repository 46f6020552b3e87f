"""Conformance: lists, filters, paths, contexts, user-defined functions and names."""

from __future__ import annotations

import pytest
from feel_expect import Case, D, case_id, check

from broker.feel import FeelRange

ORDER = {
    "order": {
        "id": "o-1",
        "customer": {"name": "Ada", "vip": True},
        "items": [
            {"sku": "a", "price": 5, "qty": 2},
            {"sku": "b", "price": 12.5, "qty": 1},
            {"sku": "c", "price": 30, "qty": 4},
        ],
    }
}

LISTS: list[Case] = [
    ("[1,2,3,4][1]", {}, 1),
    ("[1,2,3,4][2]", {}, 2),
    ("[1,2,3,4][4]", {}, 4),
    ("[1,2,3,4][5]", {}, None),
    ("[1,2,3,4][0]", {}, None),
    ("[1,2,3,4][-1]", {}, 4),
    ("[1,2,3,4][-2]", {}, 3),
    ("[1,2,3,4][-5]", {}, None),
    ("[1,2,3,4][i]", {"i": 3}, 3),
    ("[1,2,3,4][i]", {"i": -1}, 4),
    ("xs[1]", {"xs": ["a", "b"]}, "a"),
    ("xs[-1]", {"xs": ["a", "b"]}, "b"),
    ("[1,2,3,4][item > 2]", {}, [3, 4]),
    ("[1,2,3,4][item > 10]", {}, []),
    ("[1,2,3,4][even(item)]", {}, [2, 4]),
    ("[1,2,3,4][item != 2]", {}, [1, 3, 4]),
    ("[][item > 1]", {}, []),
    ('[{a: "p1", b: 5}, {a: "p2", b: 10}][b > 7]', {}, [{"a": "p2", "b": 10}]),
    ("[{a: 1}, {b: 2}][a < 10]", {}, [{"a": 1}]),
    ("[{a: 1}, {a: 2}][item.a = 2]", {}, [{"a": 2}]),
    ('[{a: "p1", b: 5}, {a: "p2", b: 10}].a', {}, ["p1", "p2"]),
    ("[{a: 1}, {b: 2}].a", {}, [1, None]),
    ("[1, null, 3][item = null]", {}, [None]),
    ("[[1,2],[3,4]][1][2]", {}, 2),
    ("[[1,2],[3,4]][-1]", {}, [3, 4]),
    ("order.items[price > 10].sku", ORDER, ["b", "c"]),
    ("order.items[1].sku", ORDER, "a"),
    ("order.items[-1].qty", ORDER, 4),
    ("sum(order.items[price > 10].price)", ORDER, D("42.5")),
    ("sum(for i in order.items return i.price * i.qty)", ORDER, D("142.5")),
    ("count(order.items[qty >= 2])", ORDER, 2),
    ('order.items[sku = "b"][1].price', ORDER, D("12.5")),
    ("order.items.sku", ORDER, ["a", "b", "c"]),
    ("items[price > limit]", {"items": [{"price": 1}, {"price": 9}], "limit": 5}, [{"price": 9}]),
    ("items[item > limit]", {"items": [1, 9], "limit": 5}, [9]),
    ("(for x in [1,2,3] return x * 10)[2]", {}, 20),
    ("[1,2,3][item > 1][1]", {}, 2),
    ("null[1]", {}, None),
    ("5[1]", {}, 5),
    ("[1,2,3][1.5]", {}, None),
    ("[true, false, true][item]", {}, [True, True]),
    ('["a", "bb", "ccc"][string length(item) > 1]', {}, ["bb", "ccc"]),
    ("[1..3]", {}, FeelRange(1, 3, True, True)),
    ("(1..3]", {}, FeelRange(1, 3, False, True)),
    ("]1..3[", {}, FeelRange(1, 3, False, False)),
]

CONTEXTS: list[Case] = [
    ("{a: 2}.a", {}, 2),
    ("{a: {b: 3}}.a", {}, {"b": 3}),
    ("{a: {b: 3}}.a.b", {}, 3),
    ("{x: 1}.y", {}, None),
    ("a.b", {"a": {"b": 1}}, 1),
    ("a.b.c", {"a": {"b": {"c": "deep"}}}, "deep"),
    ("a.b", {"a": {}}, None),
    ("a.b", {}, None),
    ("a.b.c", {"a": None}, None),
    ("a != null and a.b > 10", {"a": {"b": 11}}, True),
    ("a != null and a.b > 10", {}, False),
    ("order.customer.name", ORDER, "Ada"),
    ("order.customer.vip", ORDER, True),
    ("{a: 1, b: a + 1, c: b * 2}.c", {}, 4),
    ("{a: x, b: a}", {"x": 5}, {"a": 5, "b": 5}),
    ("{a: 1}.a + {b: 2}.b", {}, 3),
    ('{"first name": "Ada"}.`first name`', {}, "Ada"),
    ("{`tracking-id`: 7}.`tracking-id`", {}, 7),
    ("{a: [1,2,3]}.a[2]", {}, 2),
    ("{a: {b: [{c: 1}, {c: 2}]}}.a.b.c", {}, [1, 2]),
    ("{result: x * 2}", {"x": 0.5}, {"result": 1}),
    ("{inner: {x: 1}, outer: inner.x}", {}, {"inner": {"x": 1}, "outer": 1}),
    ("{a: null}.a", {}, None),
    ("{a: 1, b: {a: 2, c: a}}.b.c", {}, 2),
    ("{id: order.id, total: 10}", ORDER, {"id": "o-1", "total": 10}),
    ("{if: 1}", {}, {"if": 1}),
]

FUNCTIONS: list[Case] = [
    ("(function(a, b) a + b)(1, 2)", {}, 3),
    ("{f: function(a, b) a + b}.f(1, 2)", {}, 3),
    ("{f: function(a, b) a - b, r: f(b: 1, a: 5)}.r", {}, 4),
    ("{f: function(x) x * x, r: f(4)}.r", {}, 16),
    ("{fac: function(n) if n <= 1 then 1 else n * fac(n - 1), r: fac(5)}.r", {}, 120),
    ("{fib: function(n) if n < 2 then n else fib(n - 1) + fib(n - 2), r: fib(10)}.r", {}, 55),
    ("{add: function(x) function(y) x + y, r: add(2)(3)}.r", {}, 5),
    ("{k: 10, f: function(x) x + k, r: f(1)}.r", {}, 11),
    ("{f: function(x, y) if y = null then x else x + y, r: f(x: 1)}.r", {}, 1),
    ("{f: function(a: number, b: number) a * b, r: f(3, 4)}.r", {}, 12),
    ("{f: function() 42, r: f()}.r", {}, 42),
    ("{f: function(x) x, r: f(1, 2)}.r", {}, None),
    ("{f: function(x) x, r: f(y: 1)}.r", {}, None),
    ("{f: 1, r: f(2)}.r", {}, None),
    ("unknownFunction(1, 2)", {}, None),
    ('contains("me@camunda.com", ".com")', {}, True),
    ('contains(string: "me@camunda.com", match: ".de")', {}, False),
    ('substring(string: "foobar", start position: 3)', {}, "obar"),
    ('substring(start position: 2, string: "foobar", length: 3)', {}, "oob"),
    ("round up(n: 1.121, scale: 2)", {}, D("1.13")),
    ("sort(list: [3,1,4,5,2], precedes: function(x,y) x < y)", {}, [1, 2, 3, 4, 5]),
    ('sort(["b", "c", "a"], function(x, y) x > y)', {}, ["c", "b", "a"]),
    ("for f in [function(x) x + 1, function(x) x * 2] return f(10)", {}, [11, 20]),
    ("{count: 5, r: count([1,2])}.r", {}, 2),
    ("{apply: function(f, v) f(v), r: apply(function(x) x * 3, 2)}.r", {}, 6),
]

NAMES: list[Case] = [
    ("order total > 100", {"order total": 150}, True),
    ("order total * 2", {"order total": 2.5}, 5),
    ("{order total: 5}.order total", {}, 5),
    ("`first name`", {"first name": "Ada"}, "Ada"),
    ("`tracking-id`", {"tracking-id": "t-1"}, "t-1"),
    ("order.`total price`", {"order": {"total price": 12}}, 12),
    ("`a.b` + 1", {"a.b": 1}, 2),
    ("_private", {"_private": 3}, 3),
    ("camelCase + snake_case", {"camelCase": 1, "snake_case": 2}, 3),
    ("x1 + x2", {"x1": 1, "x2": 2}, 3),
    ("ünïcode", {"ünïcode": "ok"}, "ok"),
    ('date and time("2020-01-01T00:00:00") = d', {"d": None}, False),
    ("item", {"item": 1}, 1),
    ("partial", {"partial": 2}, 2),
    ("x", {"x": [1.5, {"y": 2.25}]}, [D("1.5"), {"y": D("2.25")}]),
    ("x", {"x": (1, 2)}, [1, 2]),
    ("x", {"x": float("nan")}, None),
]


@pytest.mark.parametrize("case", LISTS, ids=case_id)
def test_lists_and_filters(case: Case) -> None:
    check(*case)


@pytest.mark.parametrize("case", CONTEXTS, ids=case_id)
def test_contexts_and_paths(case: Case) -> None:
    check(*case)


@pytest.mark.parametrize("case", FUNCTIONS, ids=case_id)
def test_functions(case: Case) -> None:
    check(*case)


@pytest.mark.parametrize("case", NAMES, ids=case_id)
def test_names(case: Case) -> None:
    check(*case)


INDEX_OR_FILTER: list[Case] = [
    ("[10, 20, 30][i + 1]", {"i": 1}, 20),
    ("[{price: 2}, {price: 1}][price]", {}, []),
    ("[{a: true}, {a: false}][a]", {}, [{"a": True}]),
    ("[1, 2, 3][count([1, 2])]", {}, 2),
    ("[][1]", {}, None),
    ("[][item > 0]", {}, []),
]


@pytest.mark.parametrize("case", INDEX_OR_FILTER, ids=case_id)
def test_computed_index_or_filter(case: Case) -> None:
    check(*case)
