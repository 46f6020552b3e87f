"""Tokenizer for FEEL expressions and unary tests."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._errors import FeelSyntaxError

KEYWORDS = frozenset(
    {
        "true",
        "false",
        "null",
        "and",
        "or",
        "if",
        "then",
        "else",
        "for",
        "in",
        "return",
        "some",
        "every",
        "satisfies",
        "between",
        "instance",
        "of",
        "function",
        "external",
    }
)

#: Built-in function names that contain keywords; they are read as one name when followed by "(".
_KEYWORD_FUNCTION_NAMES = (
    "years and months duration",
    "date and time",
    "last day of month",
    "day of week",
    "day of year",
    "week of year",
    "month of year",
    "index of",
    "get or else",
)
_KEYWORD_FUNCTION_RE = re.compile(
    r"(?:" + "|".join(r"\s+".join(n.split()) for n in _KEYWORD_FUNCTION_NAMES) + r")(?=\s*\()"
)

_NAME_RE = re.compile(r"[^\W\d]\w*")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?|\.\d+")
_SPACE_RE = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)+", re.S)
#: Longest operators first, so ``..`` is not read as two dots.
_OPERATORS = tuple(
    [
        "..",
        "**",
        "<=",
        ">=",
        "!=",
        "->",
        "=",
        "<",
        ">",
        "+",
        "-",
        "*",
        "/",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        ".",
        "?",
    ]
)


@dataclass(frozen=True, slots=True)
class Token:
    """One token: ``kind`` is NAME, QNAME (backtick name), NUMBER, STRING, TEMPORAL, KEYWORD, OP, EOF or CHAR
    (any other character: valid only inside a context key, an error anywhere else)."""

    kind: str
    value: str
    pos: int
    end: int


#: The low half of a UTF-16 surrogate pair, as the ``\\u`` escape that follows a high half.
_LOW_SURROGATE_RE = re.compile(r"\\u(d[c-f][0-9a-f]{2})", re.IGNORECASE)


def _unescape(text: str, start: int, source: str) -> str:
    """Resolve FEEL string escapes; unknown escapes keep their backslash (regex patterns rely on it)."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    simple = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "'": "'", "\\": "\\"}
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt in simple:
            out.append(simple[nxt])
            i += 2
        elif nxt in "uU":
            width = 4 if nxt == "u" else 6
            digits = re.match(f"[0-9a-fA-F]{{1,{width}}}", text[i + 2 : i + 2 + width])
            if not digits:
                raise FeelSyntaxError("invalid unicode escape in string", source, start + i)
            code = int(digits.group(0), 16)
            i += 2 + len(digits.group(0))
            if 0xD800 <= code < 0xDC00:  # a UTF-16 pair written as two escapes is one character, as in Java
                low = _LOW_SURROGATE_RE.match(text, i)
                if low:
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low.group(1), 16) - 0xDC00)
                    i = low.end()
            out.append(chr(code))
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens, raising :class:`FeelSyntaxError` at the first bad character."""
    tokens: list[Token] = []
    pos = 0
    length = len(source)
    while True:
        space = _SPACE_RE.match(source, pos)
        if space:
            pos = space.end()
        if pos >= length:
            tokens.append(Token("EOF", "", pos, pos))
            return tokens
        if source.startswith("/*", pos):
            raise FeelSyntaxError("unterminated comment", source, pos)
        ch = source[pos]
        if ch == '"' or (ch == "@" and source.startswith('"', pos + 1)):
            quote_start = pos if ch == '"' else pos + 1
            end = quote_start + 1
            while end < length and source[end] != '"':
                end += 2 if source[end] == "\\" else 1
            if end >= length:
                raise FeelSyntaxError("unterminated string literal", source, pos)
            text = _unescape(source[quote_start + 1 : end], quote_start + 1, source)
            tokens.append(Token("STRING" if ch == '"' else "TEMPORAL", text, pos, end + 1))
            pos = end + 1
            continue
        if ch == "`":
            end = source.find("`", pos + 1)
            if end < 0:
                raise FeelSyntaxError("unterminated backtick name", source, pos)
            tokens.append(Token("QNAME", source[pos + 1 : end], pos, end + 1))
            pos = end + 1
            continue
        starts_number = ch.isdigit() or (ch == "." and pos + 1 < length and source[pos + 1].isdigit())
        if starts_number and not (ch == "." and tokens and _is_path_dot(tokens)):
            match = _NUMBER_RE.match(source, pos)
            if match:
                tokens.append(Token("NUMBER", match.group(0), pos, match.end()))
                pos = match.end()
                continue
        if ch.isalpha() or ch == "_":
            special = _KEYWORD_FUNCTION_RE.match(source, pos)
            if special and (special.end() >= length or not _is_name_char(source[special.end()])):
                tokens.append(Token("NAME", " ".join(special.group(0).split()), pos, special.end()))
                pos = special.end()
                continue
            match = _NAME_RE.match(source, pos)
            if match:
                word = match.group(0)
                kind = "KEYWORD" if word in KEYWORDS else "NAME"
                tokens.append(Token(kind, word, pos, match.end()))
                pos = match.end()
                continue
        for op in _OPERATORS:
            if source.startswith(op, pos):
                tokens.append(Token("OP", op, pos, pos + len(op)))
                pos += len(op)
                break
        else:  # not FEEL syntax, but it may be part of a context key such as ``{how_are_you?: 1}``
            tokens.append(Token("CHAR", ch, pos, pos + 1))
            pos += 1


def _is_name_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _is_path_dot(tokens: list[Token]) -> bool:
    """After a name or a closing bracket, ``.5`` cannot start a number (``a.5`` is not valid anyway)."""
    last = tokens[-1]
    return last.kind in ("NAME", "QNAME") or last.value in (")", "]", "}")
