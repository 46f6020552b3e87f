"""How the gateway reports a rejected command: the gRPC status of each rejection type.

Kept apart from the gRPC service so that code sending commands without the generated stubs (the user task commands,
an HTTP API) maps rejections the same way.
"""

from __future__ import annotations

import grpc

from broker.protocol.enums import RejectionType

REJECTION_STATUS = {
    RejectionType.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    RejectionType.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    RejectionType.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    RejectionType.INVALID_STATE: grpc.StatusCode.FAILED_PRECONDITION,
    RejectionType.PROCESSING_ERROR: grpc.StatusCode.INTERNAL,
}
