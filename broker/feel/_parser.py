"""Recursive-descent parser: FEEL tokens to a small tuple-based syntax tree.

Nodes are tuples ``(tag, position, *fields)``; the compiler turns them into closures. Precedence, from
loosest to tightest: textual forms (if, for, some/every, function) > ``or`` > ``and`` > comparison
(``=``, ``<``, ``between``, ``in``, ``instance of``) > ``+ -`` > ``* /`` > ``**`` > unary ``-`` >
postfix (path ``.``, filter ``[]``, call ``()``) > primary.

Names may contain spaces (``order total``): adjacent name words are read as one name, since two
names can never stand next to each other otherwise.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from ._errors import FeelSyntaxError
from ._lexer import Token, tokenize
from ._temporal import parse_temporal_literal

Node = tuple[Any, ...]

_COMPARISON_OPS = frozenset({"=", "!=", "<", "<=", ">", ">="})
#: A context key of any characters but the reserved ones, up to the ``:`` that ends it.
_SYMBOLS_KEY_RE = re.compile(r'([^"{}:,\[\]`]+):')

_TEXTUAL_KEYWORDS = frozenset({"if", "for", "some", "every", "function"})
#: Type names of ``instance of`` that span several words.
_MULTI_WORD_TYPES = {
    "date": ("date", "and", "time"),
    "days": ("days", "and", "time", "duration"),
    "years": ("years", "and", "months", "duration"),
}
_MAX_DEPTH = 200


class Parser:
    """Parses one expression or unary-tests text; create one instance per text."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.index = 0
        self.input_refs = 0
        self.no_bracket_postfix = False
        self.depth = 0

    # -- token helpers -----------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.tokens[self.index]

    def peek(self, offset: int = 1) -> Token:
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        if token.kind != "EOF":
            self.index += 1
        return token

    def is_op(self, value: str) -> bool:
        token = self.tokens[self.index]
        return token.kind == "OP" and token.value == value

    def is_keyword(self, value: str) -> bool:
        token = self.tokens[self.index]
        return token.kind == "KEYWORD" and token.value == value

    def error(self, message: str, token: Token | None = None) -> FeelSyntaxError:
        token = token or self.tok
        if token.kind == "CHAR":
            return FeelSyntaxError(f"unexpected character {token.value!r}", self.source, token.pos)
        found = "end of input" if token.kind == "EOF" else repr(token.value)
        return FeelSyntaxError(f"{message}, found {found}", self.source, token.pos)

    def expect_op(self, value: str) -> Token:
        if not self.is_op(value):
            raise self.error(f"expected '{value}'")
        return self.advance()

    def expect_keyword(self, value: str) -> Token:
        if not self.is_keyword(value):
            raise self.error(f"expected '{value}'")
        return self.advance()

    def expect_end(self) -> None:
        if self.tok.kind != "EOF":
            raise self.error("unexpected token")

    # -- entry points ------------------------------------------------------------------------------

    def parse_expression_text(self) -> Node:
        if self.tok.kind == "EOF":
            raise self.error("expected an expression")
        node = self.expression()
        self.expect_end()
        return node

    def parse_unary_tests_text(self) -> Node:
        if self.tok.kind == "EOF":
            raise self.error("expected unary tests")
        start = self.tok
        if self.is_op("-") and self.peek().kind == "EOF":
            self.advance()
            return ("ut_any", start.pos)
        if start.kind == "NAME" and start.value == "not" and self.peek().kind == "OP" and self.peek().value == "(":
            saved = self.index
            self.advance()
            self.advance()
            tests = self.positive_unary_tests()
            if self.is_op(")") and self.peek().kind == "EOF":
                self.advance()
                return ("ut_not", start.pos, tests)
            self.index = saved
        tests = self.positive_unary_tests()
        self.expect_end()
        return ("ut_or", start.pos, tests)

    # -- unary tests -------------------------------------------------------------------------------

    def positive_unary_tests(self) -> list[Node]:
        tests = [self.positive_unary_test()]
        while self.is_op(","):
            self.advance()
            tests.append(self.positive_unary_test())
        return tests

    def positive_unary_test(self) -> Node:
        token = self.tok
        if token.kind == "OP" and token.value in _COMPARISON_OPS:
            self.advance()
            return ("ut_cmp", token.pos, token.value, self.additive())
        before = self.input_refs
        node = self.expression()
        return ("ut_expr", token.pos, node, self.input_refs > before)

    # -- expressions -------------------------------------------------------------------------------

    def expression(self) -> Node:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise self.error("expression is nested too deeply")
        try:
            token = self.tok
            if token.kind == "KEYWORD" and token.value in _TEXTUAL_KEYWORDS:
                return self.textual()
            return self.disjunction()
        finally:
            self.depth -= 1

    def textual(self) -> Node:
        token = self.advance()
        if token.value == "if":
            condition = self.expression()
            self.expect_keyword("then")
            then = self.expression()
            self.expect_keyword("else")
            return ("if", token.pos, condition, then, self.expression())
        if token.value == "for":
            iterators = self.iterators()
            self.expect_keyword("return")
            return ("for", token.pos, iterators, self.expression())
        if token.value in ("some", "every"):
            iterators = self.iterators()
            self.expect_keyword("satisfies")
            return (token.value, token.pos, iterators, self.expression())
        return self.function_definition(token)

    def iterators(self) -> list[tuple[str, Node, Node | None]]:
        result: list[tuple[str, Node, Node | None]] = []
        while True:
            name = self.name_words("expected an iteration variable name")
            self.expect_keyword("in")
            domain = self.expression()
            end = None
            if self.is_op(".."):  # for, some and every all iterate over a..b
                self.advance()
                end = self.expression()
            result.append((name, domain, end))
            if not self.is_op(","):
                return result
            self.advance()

    def function_definition(self, token: Token) -> Node:
        self.expect_op("(")
        params: list[str] = []
        while not self.is_op(")"):
            params.append(self.name_words("expected a parameter name"))
            if self.is_op(":"):
                self.advance()
                self.type_spec()
            if not self.is_op(","):
                break
            self.advance()
        self.expect_op(")")
        if self.is_keyword("external"):
            raise self.error("external functions are not supported")
        if len(set(params)) != len(params):
            raise FeelSyntaxError("duplicate parameter name", self.source, token.pos)
        return ("fndef", token.pos, tuple(params), self.expression())

    def disjunction(self) -> Node:
        node = self.conjunction()
        while self.is_keyword("or"):
            token = self.advance()
            node = ("or", token.pos, node, self.conjunction())
        return node

    def conjunction(self) -> Node:
        node = self.comparison()
        while self.is_keyword("and"):
            token = self.advance()
            node = ("and", token.pos, node, self.comparison())
        return node

    def comparison(self) -> Node:
        node = self.additive()
        while True:
            token = self.tok
            if token.kind == "OP" and token.value in _COMPARISON_OPS:
                self.advance()
                node = ("cmp", token.pos, token.value, node, self.additive())
            elif token.kind == "KEYWORD" and token.value == "between":
                self.advance()
                low = self.additive()
                self.expect_keyword("and")
                node = ("between", token.pos, node, low, self.additive())
            elif token.kind == "KEYWORD" and token.value == "in":
                self.advance()
                node = ("in", token.pos, node, self.in_tests())
            elif token.kind == "KEYWORD" and token.value == "instance":
                self.advance()
                self.expect_keyword("of")
                node = ("instance", token.pos, node, self.type_spec())
            else:
                return node

    def in_tests(self) -> list[Node]:
        token = self.tok
        if token.kind == "OP" and token.value in _COMPARISON_OPS:
            self.advance()
            return [("ut_cmp", token.pos, token.value, self.additive())]
        if not self.is_op("("):
            before = self.input_refs
            node = self.additive()
            return [("ut_expr", token.pos, node, self.input_refs > before)]
        self.advance()
        saved_flag = self.no_bracket_postfix
        self.no_bracket_postfix = False
        tests = [self.positive_unary_test()]
        if self.is_op("..") and tests[0][0] == "ut_expr":
            self.advance()
            end = self.range_end()
            closing = self.advance()
            if closing.value not in (")", "]", "["):
                raise self.error("expected ')' or ']' to close the range", closing)
            self.no_bracket_postfix = saved_flag
            return [
                (
                    "ut_expr",
                    token.pos,
                    ("range", token.pos, tests[0][2], end, False, closing.value == "]"),
                    False,
                )
            ]
        while self.is_op(","):
            self.advance()
            tests.append(self.positive_unary_test())
        self.expect_op(")")
        self.no_bracket_postfix = saved_flag
        return tests

    def additive(self) -> Node:
        node = self.multiplicative()
        while self.tok.kind == "OP" and self.tok.value in ("+", "-"):
            token = self.advance()
            node = ("arith", token.pos, token.value, node, self.multiplicative())
        return node

    def multiplicative(self) -> Node:
        node = self.exponentiation()
        while self.tok.kind == "OP" and self.tok.value in ("*", "/"):
            token = self.advance()
            node = ("arith", token.pos, token.value, node, self.exponentiation())
        return node

    def exponentiation(self) -> Node:
        node = self.unary()
        while self.is_op("**"):
            token = self.advance()
            node = ("arith", token.pos, "**", node, self.unary())
        return node

    def unary(self) -> Node:
        if self.is_op("-"):
            token = self.advance()
            operand = self.unary()
            if operand[0] == "lit" and type(operand[2]) in (int, Decimal):
                return ("lit", token.pos, -operand[2])
            return ("neg", token.pos, operand)
        return self.postfix()

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            token = self.tok
            if token.kind != "OP":
                return node
            if token.value == ".":
                self.advance()
                node = (
                    "path",
                    token.pos,
                    node,
                    self.name_words("expected a name after '.'", allow_quoted=True),
                )
            elif token.value == "[" and not self.no_bracket_postfix:
                self.advance()
                condition = self.nested(self.expression)
                self.expect_op("]")
                node = ("filter", token.pos, node, condition)
            elif token.value == "(":
                node = ("apply", token.pos, node, self.arguments())
            else:
                return node

    def nested(self, parse: Any) -> Node:
        """Parse inside brackets, where a '[' may again start a filter."""
        saved = self.no_bracket_postfix
        self.no_bracket_postfix = False
        try:
            return parse()
        finally:
            self.no_bracket_postfix = saved

    def range_end(self) -> Node:
        """A range's upper endpoint; a following '[' closes the range instead of filtering."""
        saved = self.no_bracket_postfix
        self.no_bracket_postfix = True
        try:
            return self.additive()
        finally:
            self.no_bracket_postfix = saved

    def primary(self) -> Node:
        token = self.tok
        kind = token.kind
        if kind == "NUMBER":
            self.advance()
            text = token.value
            value: Any = int(text) if text.isdigit() else Decimal(text)
            return ("lit", token.pos, value)
        if kind == "STRING":
            self.advance()
            return ("lit", token.pos, token.value)
        if kind == "TEMPORAL":
            self.advance()
            value = parse_temporal_literal(token.value)
            if value is None:
                raise FeelSyntaxError(f"invalid temporal literal @{token.value!r}", self.source, token.pos)
            return ("lit", token.pos, value)
        if kind == "KEYWORD":
            if token.value in ("true", "false"):
                self.advance()
                return ("lit", token.pos, token.value == "true")
            if token.value == "null":
                self.advance()
                return ("lit", token.pos, None)
            if token.value in _TEXTUAL_KEYWORDS:
                return self.expression()
            if token.value in ("and", "or") and self.peek().kind == "OP" and self.peek().value == "(":
                self.advance()  # the built-ins and() and or(): where an operand is expected, they are calls
                return ("call", token.pos, token.value, self.arguments())
            raise self.error("expected an expression")
        if kind in ("NAME", "QNAME"):
            name = self.name_words("expected a name", allow_quoted=True)
            if self.is_op("("):
                return ("call", token.pos, name, self.arguments())
            return ("name", token.pos, name)
        if kind == "OP":
            value = token.value
            if value == "?":
                self.advance()
                self.input_refs += 1
                return ("name", token.pos, "?")
            if value == "(":
                self.advance()
                node = self.nested(self.expression)
                if self.is_op(".."):
                    self.advance()
                    return self.range_tail(token, node, start_included=False)
                self.expect_op(")")
                return node
            if value == "[":
                self.advance()
                if self.is_op("]"):
                    self.advance()
                    return ("list", token.pos, [])
                first = self.nested(self.expression)
                if self.is_op(".."):
                    self.advance()
                    return self.range_tail(token, first, start_included=True)
                items = [first]
                while self.is_op(","):
                    self.advance()
                    items.append(self.nested(self.expression))
                self.expect_op("]")
                return ("list", token.pos, items)
            if value == "]":
                self.advance()
                start = self.nested(self.additive)
                self.expect_op("..")
                return self.range_tail(token, start, start_included=False)
            if value == "{":
                return self.context_literal()
        raise self.error("expected an expression")

    def range_tail(self, opening: Token, start: Node, start_included: bool) -> Node:
        end = self.range_end()
        closing = self.tok
        if not (closing.kind == "OP" and closing.value in (")", "]", "[")):
            raise self.error("expected ')' or ']' to close the range")
        self.advance()
        return ("range", opening.pos, start, end, start_included, closing.value == "]")

    def context_literal(self) -> Node:
        opening = self.expect_op("{")
        entries: list[tuple[str, Node]] = []
        keys: set[str] = set()
        while not self.is_op("}"):
            key_token = self.tok
            if key_token.kind == "STRING":
                self.advance()
                key = key_token.value
            elif (symbols_key := self.symbols_key()) is not None:
                key = symbols_key
            else:
                key = self.name_words("expected a context key", allow_quoted=True, allow_keywords=True)
            if key in keys:
                raise FeelSyntaxError(f"duplicate context key '{key}'", self.source, key_token.pos)
            keys.add(key)
            self.expect_op(":")
            entries.append((key, self.nested(self.expression)))
            if not self.is_op(","):
                break
            self.advance()
        self.expect_op("}")
        return ("ctx", opening.pos, entries)

    def symbols_key(self) -> str | None:
        """A context key written as any characters up to its ``:`` (``{foo+bar: 1}``, ``{how_are_you?: 2}``),
        as feel-scala allows: everything but ``"{}:,[]`` and backticks, kept as written (inner spaces too).
        Consumes the key and returns it, or returns None (consuming nothing) when the text is no such key."""
        start = self.tok
        if start.kind in ("QNAME", "EOF"):
            return None
        match = _SYMBOLS_KEY_RE.match(self.source, start.pos)
        if match is None:
            return None
        key = match.group(1).rstrip()
        if not key or "/*" in key or "//" in key:
            return None
        colon = match.end(1)
        index = self.index
        while self.tokens[index].pos < colon:
            index += 1
        token = self.tokens[index]
        if not (token.kind == "OP" and token.value == ":" and token.pos == colon):
            return None
        self.index = index
        return key

    def arguments(self) -> tuple[str, list[Any]]:
        self.expect_op("(")
        positional: list[Node] = []
        named: list[tuple[str, Node]] = []
        while not self.is_op(")"):
            name = self.named_argument_name()
            if name is not None:
                if positional:
                    raise self.error("positional and named arguments cannot be mixed")
                named.append((name, self.nested(self.expression)))
            else:
                if named:
                    raise self.error("positional and named arguments cannot be mixed")
                positional.append(self.nested(self.expression))
            if not self.is_op(","):
                break
            self.advance()
        self.expect_op(")")
        if named:
            return ("named", named)
        return ("positional", positional)

    def named_argument_name(self) -> str | None:
        """If the next tokens are ``name:``, consume them and return the name."""
        offset = 0
        words: list[str] = []
        while True:
            token = self.peek(offset)
            if token.kind == "NAME" or (token.kind == "QNAME" and not words):
                words.append(token.value)
                offset += 1
                if token.kind == "QNAME":
                    break
            else:
                break
        if not words:
            return None
        after = self.peek(offset)
        if after.kind == "OP" and after.value == ":":
            self.index += offset + 1
            return " ".join(words)
        return None

    def name_words(self, message: str, allow_quoted: bool = True, allow_keywords: bool = False) -> str:
        """Read a name: one backtick name, or adjacent plain words joined by single spaces."""
        token = self.tok
        if token.kind == "QNAME" and allow_quoted:
            self.advance()
            return token.value
        accepted = ("NAME", "KEYWORD") if allow_keywords else ("NAME",)
        if token.kind not in accepted:
            raise self.error(message)
        words = [self.advance().value]
        while self.tok.kind in accepted:
            words.append(self.advance().value)
        return " ".join(words)

    # -- types -------------------------------------------------------------------------------------

    def type_spec(self) -> Any:
        """A type name for ``instance of`` or typed parameters: a string, or a tuple for generics."""
        token = self.tok
        if token.kind == "QNAME":
            self.advance()
            return token.value
        if token.kind not in ("NAME", "KEYWORD"):
            raise self.error("expected a type name")
        first = self.advance().value
        words = _MULTI_WORD_TYPES.get(first)
        name = first
        if words is not None and self.is_keyword("and"):
            for word in words[1:]:
                if self.tok.value != word:
                    raise self.error(f"expected type '{' '.join(words)}'")
                self.advance()
            name = " ".join(words)
        if name in ("list", "range") and self.is_op("<"):
            self.advance()
            inner = self.type_spec()
            self.expect_op(">")
            return (name, inner)
        if name == "context" and self.is_op("<"):
            self.advance()
            fields: list[tuple[str, Any]] = []
            while not self.is_op(">"):
                key = self.name_words("expected a context key")
                self.expect_op(":")
                fields.append((key, self.type_spec()))
                if not self.is_op(","):
                    break
                self.advance()
            self.expect_op(">")
            return ("context", tuple(fields))
        if name == "function" and self.is_op("<"):
            self.advance()
            while not self.is_op(">"):
                self.type_spec()
                if not self.is_op(","):
                    break
                self.advance()
            self.expect_op(">")
            self.expect_op("->")
            self.type_spec()
            return "function"
        return name


def parse_expression_tree(source: str) -> Node:
    """Parse an expression into a syntax tree."""
    return Parser(source).parse_expression_text()


def parse_unary_tests_tree(source: str) -> Node:
    """Parse unary tests into a syntax tree."""
    return Parser(source).parse_unary_tests_text()
