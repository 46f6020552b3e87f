"""The authenticated caller of the request being served, for the commands it sends.

The gRPC interceptor and the REST middleware set it within the call once the credentials are checked
(``Authenticator.remember``); ``GatewayCommands.execute`` hands it to the broker with each command, and the engine
decides from it and the identity it keeps what the caller may do. None: authentication is off (everyone may do all).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

CALLER: ContextVar[dict[str, Any] | None] = ContextVar("weir_caller", default=None)
"""``{"username", "clientId", "claims"}`` (any may be missing) of the caller, or None."""
