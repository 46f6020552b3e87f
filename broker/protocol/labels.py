"""What a process instance may be named and labelled by on creation (Camunda 8.9): its business id and tags.

The gateway checks both so a caller gets a clear INVALID_ARGUMENT / 400; the engine checks again, since any client of
the command API may send a creation.
"""

from __future__ import annotations

import re
from typing import Final

MAX_TAGS: Final = 10
MAX_TAG_LENGTH: Final = 100
MAX_BUSINESS_ID_LENGTH: Final = 256

_TAG: Final = re.compile(r"[A-Za-z][A-Za-z0-9_\-:.]*")


def tags_problem(tags: object) -> str | None:
    """Why these tags cannot be attached to an instance, or None: at most 10 distinct tags, each starting with a letter
    followed by letters, digits, '_', '-', ':' or '.', at most 100 characters."""
    if not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags):
        return "Expected tags to be a list of strings"
    if len(set(tags)) > MAX_TAGS:
        return f"Expected at most {MAX_TAGS} tags, but got {len(set(tags))}"
    for tag in tags:
        if len(tag) > MAX_TAG_LENGTH:
            return f"Expected each tag to have at most {MAX_TAG_LENGTH} characters, but '{tag[:40]}...' has {len(tag)}"
        if not _TAG.fullmatch(tag):
            return (
                f"Expected each tag to start with a letter, followed by letters, digits, '_', '-', ':' or '.', "
                f"but got '{tag}'"
            )
    return None


def normal_tags(tags: list[str] | tuple[str, ...]) -> list[str]:
    """Tags as an instance keeps them: each once, in the order first given."""
    return list(dict.fromkeys(tags))


def business_id_problem(business_id: object) -> str | None:
    """Why this cannot be a business id, or None (empty means none)."""
    if not isinstance(business_id, str):
        return "Expected businessId to be a string"
    if len(business_id) > MAX_BUSINESS_ID_LENGTH:
        return f"Expected businessId to have at most {MAX_BUSINESS_ID_LENGTH} characters, but it has {len(business_id)}"
    return None
