"""Requests that are not valid protobuf end with INVALID_ARGUMENT, not UNKNOWN and a logged traceback.

grpc decodes a request before the servicer sees it; a decoding error (bytes that are no message of the method's
type, a string field that is not UTF-8 — a lone surrogate sent as CESU-8, say) would end the call with UNKNOWN
and log an ERROR with a traceback for every such request, so anyone could fill the gateway's log. This interceptor
makes the decoder return a marker instead, and the handler answer INVALID_ARGUMENT naming the request type.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from broker.error_messages import bounded_message

log = logging.getLogger("weir.gateway")


class _Undecodable:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _tolerant(decode: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def decoded(raw: bytes) -> Any:
        try:
            return decode(raw)
        except Exception as e:
            return _Undecodable(str(e) or type(e).__name__)

    return decoded


def _message(method: str, request: _Undecodable) -> str:
    return bounded_message(
        f"Expected a valid request for {method}, but it could not be decoded ({request.reason}); "
        "string fields must be valid UTF-8"
    )


class RequestDecodingInterceptor(grpc.aio.ServerInterceptor):
    """Answers INVALID_ARGUMENT to a unary request that cannot be decoded (see the module docstring)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        method = details.method
        kw = {
            "request_deserializer": _tolerant(handler.request_deserializer),
            "response_serializer": handler.response_serializer,
        }

        async def refuse(request: _Undecodable, context: grpc.aio.ServicerContext) -> None:
            log.debug("refused an undecodable %s request: %s", method, request.reason)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(method, request))

        if not handler.response_streaming:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if isinstance(request, _Undecodable):
                    await refuse(request, context)
                return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(unary, **kw)
        inner_stream = handler.unary_stream
        if inspect.isasyncgenfunction(inner_stream):

            async def generated(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if isinstance(request, _Undecodable):
                    await refuse(request, context)
                async for response in inner_stream(request, context):
                    yield response

            return grpc.unary_stream_rpc_method_handler(generated, **kw)

        async def written(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(request, _Undecodable):
                await refuse(request, context)
            return await inner_stream(request, context)

        return grpc.unary_stream_rpc_method_handler(written, **kw)
