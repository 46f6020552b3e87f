"""What one caller may read from the history: a condition the reader adds to every query's WHERE clause, so counts,
pages and lookups by key see only the caller's rows (nothing is filtered after a page is read).

A :class:`Scope` names the tenants the caller sees and, when permissions decide too, the grants it holds; each
searchable entity says which of its columns is its tenant and which resource id a permission is checked on
(:class:`Guard`, e.g. a process instance's process definition id for ``PROCESS_DEFINITION`` /
``READ_PROCESS_INSTANCE``). User tasks are also readable by whom they are assigned or offered to (:class:`Offer`).
The history knows nothing of callers: the gateway builds the scope (``gateway/directory.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

Grant = tuple[str, str, str]
"""(resource type, resource id or "*", permission)."""


@dataclass(frozen=True, slots=True)
class Guard:
    """The permission a row needs: ``permission`` on the resource of ``resource_type`` whose id is ``sql``."""

    resource_type: str
    permission: str
    sql: str


@dataclass(frozen=True, slots=True)
class Offer:
    """The columns naming whom a user task is assigned (text) and offered to (JSON arrays of users and groups)."""

    assignee: str
    candidate_users: str
    candidate_groups: str


@dataclass(frozen=True, slots=True)
class Scope:
    """The rows a caller may read:

    - ``tenants``: rows of these tenants only (None: of every tenant);
    - ``grants``: rows whose guard the grants cover (a grant on "*" covers every id); None: no permission is checked;
    - ``username`` and ``groups``: user tasks assigned to the user, or offered to it or to one of its groups, are
      readable without a grant (still only in its tenants).
    """

    tenants: frozenset[str] | None = None
    grants: frozenset[Grant] | None = None
    username: str = ""
    groups: frozenset[str] = frozenset()

    @property
    def unrestricted(self) -> bool:
        return self.tenants is None and self.grants is None

    def ids(self, resource_type: str, permission: str) -> frozenset[str] | None:
        """The resource ids the grants cover (None: every one)."""
        if self.grants is None:
            return None
        ids = {rid for rt, rid, p in self.grants if rt == resource_type and p == permission}
        return None if "*" in ids else frozenset(ids)

    def allows(self, resource_type: str, resource_id: str, permission: str) -> bool:
        ids = self.ids(resource_type, permission)
        return ids is None or resource_id in ids

    def condition(
        self, tenant: str | None = None, guard: Guard | None = None, offer: Offer | None = None
    ) -> tuple[str, list[Any]]:
        """SQL (``?`` placeholders) and its parameters keeping rows to this scope: ``tenant`` names the rows' tenant
        column (None: the rows have none), ``guard`` their permission, ``offer`` (user tasks) their assignee and
        candidates. ``1=1`` when nothing is restricted."""
        clauses: list[str] = []
        params: list[Any] = []
        if tenant is not None and self.tenants is not None:
            clauses.append(_in(tenant, sorted(self.tenants), params))
        ids = self.ids(guard.resource_type, guard.permission) if guard is not None else None
        if guard is not None and ids is not None:
            allowed = [_in(guard.sql, sorted(ids), params)]
            if offer is not None and self.username:
                allowed.append(f"{offer.assignee} = ?")
                params.append(self.username)
                allowed.append(_contains(offer.candidate_users, self.username, params))
                allowed += [_contains(offer.candidate_groups, g, params) for g in sorted(self.groups)]
            clauses.append(" OR ".join(f"({a})" for a in allowed))
        return " AND ".join(f"({c})" for c in clauses) or "1=1", params


EVERYTHING: Final = Scope()
"""The scope of a reader's own use, and of every caller when authentication is off."""


def _in(column: str, values: list[str], params: list[Any]) -> str:
    if not values:
        return "1=0"
    params.extend(values)
    return f"{column} IN ({', '.join('?' for _ in values)})"


def _contains(column: str, value: str, params: list[Any]) -> str:
    """Whether the JSON array of strings in ``column`` holds ``value`` (as the writer stores them: json.dumps)."""
    escaped = json.dumps(value).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    params.append(f"%{escaped}%")
    return f"{column} LIKE ? ESCAPE '\\'"
