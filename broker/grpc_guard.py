"""The gRPC side of admission, shared by the gateway's client API and the broker's command API.

A server interceptor runs a credentials check on every call (outside the services left open) before the handler
does; a refused call ends with UNAUTHENTICATED and the check's message, bounded in size. What the check accepts is
each server's business: bearer tokens and basic credentials for the gateway (``gateway.auth``), a shared secret for
the command API (``broker.command_api``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from broker.error_messages import bounded_message

log = logging.getLogger("weir.grpc_guard")


class SecurityConfigError(ValueError):
    """TLS or authentication settings that cannot work (missing file, no JWKS, unknown method…)."""


class Unauthenticated(Exception):
    """Credentials missing or invalid; the message tells the caller what to fix."""


def _metadata_value(metadata: Sequence[tuple[str, Any]] | None, name: str) -> str | None:
    for key, value in metadata or ():
        if key == name:
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


def _guarded(
    handler: grpc.RpcMethodHandler, check: Callable[[grpc.aio.ServicerContext], Awaitable[None]]
) -> grpc.RpcMethodHandler:
    """``handler`` behind ``check``: when it raises :class:`Unauthenticated`, the call ends with UNAUTHENTICATED
    before the handler runs. (The check runs in the call, not the interceptor, because only the call's context
    knows the client's address.)"""

    async def admit(context: grpc.aio.ServicerContext) -> None:
        try:
            await check(context)
        except Unauthenticated as e:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, bounded_message(str(e)))

    kw = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}
    if handler.request_streaming and handler.response_streaming:
        behaviour, make = handler.stream_stream, grpc.stream_stream_rpc_method_handler
    elif handler.request_streaming:
        behaviour, make = handler.stream_unary, grpc.stream_unary_rpc_method_handler
    elif handler.response_streaming:
        behaviour, make = handler.unary_stream, grpc.unary_stream_rpc_method_handler
    else:
        behaviour, make = handler.unary_unary, grpc.unary_unary_rpc_method_handler
    if inspect.isasyncgenfunction(behaviour):

        async def generated(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await admit(context)
            async for response in behaviour(request, context):
                yield response

        return make(generated, **kw)

    async def called(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await admit(context)
        return await behaviour(request, context)

    return make(called, **kw)


class MetadataCheckInterceptor(grpc.aio.ServerInterceptor):
    """Runs ``check(metadata value)`` at the start of every call outside ``open_prefixes``; a refusal ends the call.

    ``check`` (a function or a coroutine function) raises :class:`Unauthenticated` with the text the caller gets;
    with ``with_peer`` it is called as ``check(value, peer)`` with the client's gRPC peer string.
    """

    def __init__(
        self,
        header: str,
        check: Callable[..., Any],
        open_prefixes: Sequence[str] = (),
        *,
        with_peer: bool = False,
    ) -> None:
        self._header = header
        self._check = check
        self._open = tuple(open_prefixes)
        self._with_peer = with_peer

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(self._open):
            return handler
        value = _metadata_value(handler_call_details.invocation_metadata, self._header)

        async def check(context: grpc.aio.ServicerContext) -> None:
            try:
                checked = self._check(value, context.peer()) if self._with_peer else self._check(value)
                if inspect.isawaitable(checked):
                    await checked
            except Unauthenticated as e:
                log.debug("refused %s: %s", method, e)
                raise

        return _guarded(handler, check)
