"""Error messages that echo what a caller sent stay small.

A gRPC status message travels in the response trailers, percent-encoded, and clients refuse trailers over their
metadata limit (8 KiB by default): a NOT_FOUND that repeated a 3 MB process id would reach the client as
RESOURCE_EXHAUSTED or INTERNAL instead of the real answer. REST problem details would grow the same way. Every
gateway error message therefore passes through :func:`bounded_message`, and code that quotes a caller's value
quotes it through :func:`shown`.
"""

from __future__ import annotations

import re

#: Characters of a caller's value an error message repeats; the rest is summarised by its length.
MAX_ECHO = 100
#: Bytes a whole message may take in grpc-message form (percent-encoded): half the clients' default metadata limit.
MAX_WIRE_BYTES = 4096
# A run of this many characters without a space or quote is an echoed value (no sentence has such words).
_LONG_RUN = re.compile(rf"[^\s'\"]{{{2 * MAX_ECHO + 1},}}")


def shown(value: object, limit: int = MAX_ECHO) -> str:
    """``value`` as text, cut to its first ``limit`` characters with its length when longer."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} characters)"


def _wire_size(text: str) -> int:
    """The length of ``text`` as a grpc-message: UTF-8, every byte outside printable ASCII (and '%') as %XX."""
    return sum(1 if 0x20 <= b < 0x7F and b != 0x25 else 3 for b in text.encode())


def bounded_message(message: str) -> str:
    """``message`` with overlong echoed values shortened (:func:`shown`), then cut in the middle if still too long.

    Lone surrogates (a broker's rejection may quote a string decoded with ``surrogatepass``) become '?', since gRPC
    cannot encode them.
    """
    if len(message) <= MAX_ECHO and message.isascii():
        return message
    message = message.encode("utf-8", "replace").decode("utf-8") if _has_surrogate(message) else message
    message = _LONG_RUN.sub(lambda m: shown(m.group()), message)
    keep = min(len(message), MAX_WIRE_BYTES)
    total = len(message)
    while _wire_size(_cut(message, keep)) > MAX_WIRE_BYTES:
        keep = keep * 3 // 4
    return _cut(message, keep) if keep < total else message


def _cut(message: str, keep: int) -> str:
    if keep >= len(message):
        return message
    half = keep // 2
    return f"{message[:half]} … ({len(message)} characters in all) … {message[len(message) - half :]}"


def _has_surrogate(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return False
