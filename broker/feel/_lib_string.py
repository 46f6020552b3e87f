"""String built-ins.

Patterns (``matches``, ``replace``, ``split``, ``extract``) run on RE2, whose matching time is linear in the
input: a pattern such as ``^(a+)+$`` cannot backtrack for seconds as it does with ``re`` or Java. RE2's
syntax covers the forms people write (classes, groups, quantifiers, anchors, ``\\p{L}``); what it lacks,
back-references and look-around, cannot be matched in linear time, so such a pattern fails the call (null
and a warning) instead. ``\\d``, ``\\w`` and ``\\s`` are ASCII classes, as in Java (which Zeebe uses).
Flags follow XPath: ``s`` (dot matches newlines), ``m`` (``^``/``$`` at lines), ``i`` (ignore case), ``x``
(whitespace and ``#`` comments outside classes are ignored) and ``q`` (the pattern is a literal string).
"""

from __future__ import annotations

import base64
import unicodedata
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type hints

from ._registry import ArgumentError, arg_int, arg_list, arg_str, builtin, present
from ._runtime import Env
from ._values import describe

#: Memory RE2 may use per pattern (program and matching caches; RE2's default): a pattern needing more, such
#: as ``\p{L}{1,1000}``, fails to compile. Patterns are cached, so a few hundred KB is typical.
_REGEX_MAX_MEM = 8 * 1024 * 1024
#: RE2's reasons for syntax it lacks on purpose (no linear-time matching exists for it).
_UNSUPPORTED = ("invalid escape sequence", "invalid perl operator")


def _strip_extended(pattern: str) -> str:
    """The ``x`` flag: drop whitespace and ``#`` comments outside character classes (escapes kept)."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern.startswith("^]", i + 1) or pattern.startswith("]", i + 1):
                skip = 3 if pattern[i + 1] == "^" else 2
                out.append(pattern[i : i + skip])
                i += skip
                continue
        elif ch in " \t\n\r\f\v":
            i += 1
            continue
        elif ch == "#":
            end = pattern.find("\n", i)
            i = len(pattern) if end < 0 else end + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@lru_cache(maxsize=64)
def _compile(pattern: str, flags: str = "", groups: bool = False) -> Any:
    """A compiled RE2 pattern for XPath-style ``flags``; ``ArgumentError`` for bad patterns or flags.

    Without ``groups`` only whole matches are reported, which lets RE2 skip its slower submatch engines
    (several times faster on long inputs); ``replace`` asks for groups because ``$1`` needs them.
    """
    options = re2.Options()
    options.max_mem = _REGEX_MAX_MEM
    options.log_errors = False
    options.never_capture = not groups
    multiline = False
    for flag in flags:
        if flag == "q":
            options.literal = True
        elif flag == "s":
            options.dot_nl = True
        elif flag == "i":
            options.case_sensitive = False
        elif flag == "m":
            multiline = True
        elif flag == "x":
            pass
        else:
            raise ArgumentError(f"unknown regular expression flag '{flag}'")
    if not options.literal:
        if "x" in flags:
            pattern = _strip_extended(pattern)
        if multiline:
            pattern = "(?m)" + pattern
    try:
        return re2.compile(pattern, options)
    except re2.error as error:
        reason = error.args[0].decode() if error.args and isinstance(error.args[0], bytes) else str(error)
        if reason.startswith(_UNSUPPORTED):
            reason += " (back-references and look-around are not supported)"
        raise ArgumentError(f"invalid regular expression '{pattern}': {reason}") from error


def _flags(value: Any) -> str:
    return arg_str(value) if present(value) and value is not None else ""


@builtin("substring", "string, start position, length?")
def _substring(env: Env, text: Any, start: Any, length: Any = None) -> str:
    text = arg_str(text)
    begin = arg_int(start)
    index = begin - 1 if begin > 0 else max(len(text) + begin, 0)
    if present(length) and length is not None:
        count = arg_int(length)
        if count < 0:
            raise ArgumentError("length must not be negative")
        return text[index : index + count]
    return text[index:]


@builtin("string length", "string")
def _string_length(env: Env, text: Any) -> int:
    return len(arg_str(text))


@builtin("upper case", "string")
def _upper_case(env: Env, text: Any) -> str:
    return arg_str(text).upper()


@builtin("lower case", "string")
def _lower_case(env: Env, text: Any) -> str:
    return arg_str(text).lower()


@builtin("substring before", "string, match")
def _substring_before(env: Env, text: Any, match: Any) -> str:
    text, match = arg_str(text), arg_str(match)
    index = text.find(match)
    return text[:index] if index >= 0 and match else ""


@builtin("substring after", "string, match")
def _substring_after(env: Env, text: Any, match: Any) -> str:
    text, match = arg_str(text), arg_str(match)
    if not match:
        return text
    index = text.find(match)
    return text[index + len(match) :] if index >= 0 else ""


@builtin("contains", "string, match")
def _contains(env: Env, text: Any, match: Any) -> bool:
    return arg_str(match) in arg_str(text)


@builtin("starts with", "string, match")
def _starts_with(env: Env, text: Any, match: Any) -> bool:
    return arg_str(text).startswith(arg_str(match))


@builtin("ends with", "string, match")
def _ends_with(env: Env, text: Any, match: Any) -> bool:
    return arg_str(text).endswith(arg_str(match))


@builtin("matches", "input, pattern, flags?")
def _matches(env: Env, text: Any, pattern: Any, flags: Any = None) -> bool:
    return _compile(arg_str(pattern), _flags(flags)).search(arg_str(text)) is not None


def _replacement(template: str) -> Any:
    """Translate a ``$1``-style replacement into a function over the match (``\\$`` is a literal $)."""
    parts: list[str | int] = []
    i = 0
    literal: list[str] = []
    while i < len(template):
        ch = template[i]
        if ch == "\\" and i + 1 < len(template):
            literal.append(template[i + 1])
            i += 2
        elif ch == "$" and i + 1 < len(template) and template[i + 1].isdigit():
            j = i + 1
            while j < len(template) and template[j].isdigit():
                j += 1
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(int(template[i + 1 : j]))
            i = j
        else:
            literal.append(ch)
            i += 1
    if literal:
        parts.append("".join(literal))

    def expand(match: Any) -> str:
        out = []
        for part in parts:
            if isinstance(part, int):
                if part > (match.re.groups or 0):
                    raise ArgumentError(f"no group {part} in the pattern")
                out.append(match.group(part) or "")
            else:
                out.append(part)
        return "".join(out)

    return expand


@builtin("replace", "input, pattern, replacement, flags?")
def _replace(env: Env, text: Any, pattern: Any, replacement: Any, flags: Any = None) -> str:
    regex = _compile(arg_str(pattern), _flags(flags), groups=True)
    expand = _replacement(arg_str(replacement))

    def charged(match: Any) -> str:  # each replacement may be long and there may be one per character
        out: str = expand(match)
        env.grow(len(out))
        return out

    return regex.sub(charged, arg_str(text))


@builtin("split", "string, delimiter")
def _split(env: Env, text: Any, delimiter: Any) -> list[str]:
    text = arg_str(text)
    regex = _compile(arg_str(delimiter))
    parts: list[str] = []
    last = 0
    for match in regex.finditer(text):
        if match.end() == match.start():
            continue
        parts.append(text[last : match.start()])
        last = match.end()
    parts.append(text[last:])
    return parts


@builtin("extract", "string, pattern")
@builtin("extract", "input, pattern")  # feel-scala's parameter names
def _extract(env: Env, text: Any, pattern: Any) -> list[str]:
    return [m.group(0) for m in _compile(arg_str(pattern)).finditer(arg_str(text))]


#: What feel-scala's ``trim`` removes (Java's ``String.trim``): every character up to and including the space.
_TRIMMED = "".join(chr(code) for code in range(0x21))


@builtin("trim", "string")
def _trim(env: Env, text: Any) -> str:
    return arg_str(text).strip(_TRIMMED)


def _is_java_whitespace(ch: str) -> bool:
    """Java's ``Character.isWhitespace`` (what feel-scala's ``is blank`` tests): the Unicode space, line and
    paragraph separators except the no-break spaces, plus tab, line feed, vertical tab, form feed, carriage
    return and the four information separators U+001C..U+001F."""
    if ch in "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f":
        return True
    return unicodedata.category(ch) in ("Zs", "Zl", "Zp") and ch not in "\u00a0\u2007\u202f"


@builtin("is blank", "string")
def _is_blank(env: Env, text: Any) -> bool:
    return all(_is_java_whitespace(ch) for ch in arg_str(text))


@builtin("to base64", "value")
def _to_base64(env: Env, text: Any) -> str:
    return base64.b64encode(arg_str(text).encode("utf-8")).decode("ascii")


@builtin("from base64", "value")
def _from_base64(env: Env, text: Any) -> str:
    """The inverse of ``to base64``: standard Base64 (padding required) of UTF-8 text."""
    try:
        return base64.b64decode(arg_str(text), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError) as error:  # binascii.Error is a ValueError
        raise ArgumentError(f"'{arg_str(text)}' is not Base64 of UTF-8 text") from error


@builtin("string join", "list, delimiter?, prefix?, suffix?")
def _string_join(env: Env, values: Any, delimiter: Any = None, prefix: Any = None, suffix: Any = None) -> str:
    items = arg_list(values)
    for item in items:
        if item is not None and type(item) is not str:
            raise ArgumentError(f"expected a list of strings but found {describe(values)}")
    sep = arg_str(delimiter) if present(delimiter) and delimiter is not None else ""
    head = arg_str(prefix) if present(prefix) and prefix is not None else ""
    tail = arg_str(suffix) if present(suffix) and suffix is not None else ""
    parts = [item for item in items if item is not None]
    # the delimiter repeats once per item: check the length before joining
    env.ensure_room(len(head) + len(tail) + len(sep) * max(len(parts) - 1, 0) + sum(map(len, parts)))
    return head + sep.join(parts) + tail
