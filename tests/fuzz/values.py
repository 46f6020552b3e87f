"""Strategies for the values a hostile caller sends: odd texts, extreme numbers, keys of this and other partitions,
JSON documents (and text that is almost JSON), and FEEL expressions including shared-reference bombs."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from broker.protocol.keys import PARTITION_BITS

#: Characters a careless or hostile client sends: controls, NUL, right-to-left marks, emoji, astral planes, the
#: BOM, combining marks; never a lone surrogate in a protobuf string (the client library cannot encode one; JSON
#: texts carry them as ``\ud800`` escapes instead).
ODD_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8", exclude_categories=("Cs",)),
        st.sampled_from(["\x00", "\u202e", "\ufeff", "\U0001f4a9", "\u0301", "\uffff", "\U0010ffff", "$", "{", "\\"]),
    ),
    max_size=40,
)
BIG_TEXT = st.builds(lambda c, n: c * n, st.sampled_from(["x", "{", "[", "é", "\U0001f4a9"]), st.integers(1, 70_000))


def keys(known: list[int]) -> st.SearchStrategy[int]:
    """Keys this partition issued (``known``), keys it could issue, keys of partitions that do not exist, and
    numbers that are no key at all."""
    partition = st.integers(0, 2**12)
    counter = st.integers(0, (1 << PARTITION_BITS) - 1)
    other = st.builds(lambda p, c: (p << PARTITION_BITS) | c, partition, counter)
    return st.one_of(st.sampled_from(known) if known else st.nothing(), other, st.integers(-(2**63), 2**63 - 1))


def _json_scalar() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),  # lone surrogates included: json.dumps writes them as \ud800 escapes
    )


JSON_VALUES = st.recursive(
    _json_scalar(),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=20,
)
JSON_OBJECTS = st.dictionaries(st.text(max_size=12), JSON_VALUES, max_size=5)


@st.composite
def variables_documents(draw: st.DrawFn) -> str:
    """What a client puts in a ``variables`` field: mostly a JSON object, else any JSON, deep nesting, NaN, huge
    numbers, or text that is not JSON."""
    kind = draw(st.integers(0, 9))
    if kind <= 4:
        return json.dumps(draw(JSON_OBJECTS))
    if kind == 5:
        return json.dumps(draw(JSON_VALUES))
    if kind == 6:
        depth = draw(st.integers(50, 5000))
        return '{"a":' * depth + "1" + "}" * depth
    if kind == 7:
        return draw(st.sampled_from(['{"a": NaN}', '{"a": Infinity}', '{"a": 1e999}', '{"a": 1' + "0" * 400 + "}"]))
    return draw(ODD_TEXT)


# -- FEEL ------------------------------------------------------------------------------------------------------

NAMES = ["x", "y", "items", "loop", "r0", "r1", "o0"]


def feel_string(text: str) -> str:
    """``text`` as a FEEL string literal; anything outside printable ASCII as ``\\u`` escapes (so lone surrogates,
    which XML cannot carry, reach the engine)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        elif ord(ch) > 0xFFFF:
            code = ord(ch) - 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{ord(ch):04x}")
    return '"' + "".join(out) + '"'


@st.composite
def shared_reference_bomb(draw: st.DrawFn) -> str:
    """``{l0: [1], l1: [l0, l0], ...}.lN``: cheap to write, 2^N items once expanded (the budget must see that)."""
    levels = draw(st.integers(1, 45))
    fan = draw(st.integers(2, 3))
    seed = draw(st.sampled_from(["[1]", '"xy"', "{a: 1}", "[x]"]))
    entries = [f"l0: {seed}"]
    for i in range(1, levels + 1):
        entries.append(f"l{i}: [{', '.join([f'l{i - 1}'] * fan)}]")
    tail = draw(st.sampled_from(["", "", "count(flatten(_))", "string(_)", "_ = _"]))
    value = "{" + ", ".join(entries) + f"}}.l{levels}"
    return tail.replace("_", value) if tail else value


@st.composite
def doubling_string(draw: st.DrawFn) -> str:
    levels = draw(st.integers(1, 40))
    entries = ['s0: "ab"'] + [f"s{i}: s{i - 1} + s{i - 1}" for i in range(1, levels + 1)]
    return "{" + ", ".join(entries) + f"}}.s{levels}"


FEEL_LEAVES = st.one_of(
    st.integers(-(10**40), 10**40).map(str),
    st.sampled_from(["1.5", "-0", "0.000000000000000000000000000001", "1e3", "null", "true", "false"]),
    ODD_TEXT.map(feel_string),
    st.text(st.characters(categories=("Cs",)), min_size=1, max_size=2).map(feel_string),
    st.sampled_from(NAMES),
    st.sampled_from(['date("2020-02-30")', 'duration("P999999999Y")', 'date and time("2020-01-01T00:00:00@Europe/X")']),
    st.sampled_from(["now()", "today()", '@"PT1S"', "[]", "{}"]),
)


def _composites(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    binary = st.sampled_from(["+", "-", "*", "/", "**", "=", "!=", "<", ">=", "and", "or", "in"])
    unary_fn = st.sampled_from(
        [
            "count",
            "sum",
            "string",
            "number",
            "flatten",
            "sort",
            "distinct values",
            "upper case",
            "string length",
            "is defined",
            "reverse",
            "abs",
            "floor",
            "not",
            "get entries",
            "list contains",
        ]
    )
    return st.one_of(
        st.tuples(inner, binary, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(unary_fn, inner).map(lambda t: f"{t[0]}({t[1]})"),
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
        st.lists(st.tuples(st.sampled_from([*NAMES, "k", "l"]), inner), max_size=3).map(
            lambda kvs: "{" + ", ".join(f"{k}: {v}" for k, v in kvs) + "}"
        ),
        st.tuples(inner, inner, inner).map(lambda t: f"(if {t[0]} then {t[1]} else {t[2]})"),
        st.tuples(st.integers(-5, 10**7), inner).map(lambda t: f"(for i in 1..{t[0]} return {t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"(some v in {t[0]} satisfies {t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        st.tuples(inner, st.sampled_from([*NAMES, "k"])).map(lambda t: f"({t[0]}).{t[1]}"),
        st.tuples(inner, inner, inner).map(lambda t: f"substring({t[0]}, {t[1]}, {t[2]})"),
        st.tuples(inner, inner).map(lambda t: f"string join({t[0]}, {t[1]})"),
        st.tuples(inner, st.sampled_from(["(a+)+$", "(.*)*x", "[", "\\\\p{L}+", "^(a|aa)*$", ""])).map(
            lambda t: f'matches({t[0]}, "{t[1]}")'
        ),
        st.tuples(inner, inner).map(lambda t: f"append({t[0]}, {t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"string({t[0]}) + string({t[1]})"),
        st.tuples(inner).map(lambda t: f"(for a in 1..1000, b in 1..1000 return {t[0]})"),
    )


#: Expressions that parse (mostly): nested operators, loops and built-ins over odd values, and the bombs.
FEEL_PARSED = st.one_of(
    st.recursive(FEEL_LEAVES, _composites, max_leaves=8), shared_reference_bomb(), doubling_string()
)
#: And whatever a person types, including what does not parse.
FEEL = st.one_of(FEEL_PARSED, FEEL_PARSED, FEEL_PARSED, ODD_TEXT)
