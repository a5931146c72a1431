"""kvring's exceptions and the one table that maps a gRPC status to them.

A node answers a failed call with a gRPC status whose ``google.rpc.ErrorInfo`` detail (domain ``kvring``) names
the cause (``SCHEMA_MISMATCH``, ``UNKNOWN_NAMESPACE``...); transfer/codes.go is the Go side of the same table.
:func:`from_rpc_error` picks the exception class by that reason, or by the code when there is none, and keeps
the server's message unchanged.
"""

from __future__ import annotations

from typing import Any

import grpc

__all__ = [
    "KvringError",
    "Unavailable",
    "InvalidArgument",
    "FailedPrecondition",
    "SchemaMismatch",
    "UnknownNamespace",
    "NotFound",
    "AlreadyExists",
    "ResourceExhausted",
    "Aborted",
    "DataLoss",
    "DeadlineExceeded",
    "Cancelled",
    "ClientClosed",
    "Unauthenticated",
    "PermissionDenied",
    "ProtocolError",
    "Internal",
    "from_rpc_error",
]

ERROR_DOMAIN = "kvring"


class KvringError(Exception):
    """Base of every error the client raises for a failed call.

    ``code`` is the gRPC status code (``grpc.StatusCode``) the node answered with, or the one the client chose for
    an error it made itself; ``reason`` is the ErrorInfo reason (``"SCHEMA_MISMATCH"``...) or ``""``; ``message``
    is the server's message, unchanged.
    """

    default_code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, code: grpc.StatusCode | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.reason = reason


class Unavailable(KvringError):
    """No node that could answer was reachable (not connected, node lost, every owner down). Retry later."""

    default_code = grpc.StatusCode.UNAVAILABLE


class InvalidArgument(KvringError):
    """Bad input; the message names the field (e.g. ``begin.chunks[0].id: want 32 bytes, got 31``)."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class FailedPrecondition(KvringError):
    """The call cannot succeed in the cluster's current state."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class SchemaMismatch(FailedPrecondition):
    """The namespace is registered with another schema; the message names each differing field."""


class UnknownNamespace(FailedPrecondition):
    """The node does not know the namespace (the client re-registers it by itself once)."""


class NotFound(KvringError):
    default_code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(KvringError):
    default_code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(KvringError):
    """The node holds as much of something as it allows (space, pins, namespaces)."""

    default_code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Aborted(KvringError):
    """The operation was aborted (busy, stage lease expired); retrying the whole call may succeed."""

    default_code = grpc.StatusCode.ABORTED


class DataLoss(KvringError):
    """Bytes were damaged (checksum mismatch)."""

    default_code = grpc.StatusCode.DATA_LOSS


class DeadlineExceeded(KvringError):
    """The call did not finish within its timeout."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(KvringError):
    default_code = grpc.StatusCode.CANCELLED


class ClientClosed(Cancelled):
    """The client was closed; every call fails with it from then on."""


class Unauthenticated(KvringError):
    """No credential, or one the node does not accept (see ``token``)."""

    default_code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(KvringError):
    """The token is valid but does not allow this namespace."""

    default_code = grpc.StatusCode.PERMISSION_DENIED


class ProtocolError(KvringError):
    """The node sent something the protocol does not allow (a malformed stream)."""

    default_code = grpc.StatusCode.INTERNAL


class Internal(KvringError):
    default_code = grpc.StatusCode.INTERNAL


# ErrorInfo reason -> class: transfer/codes.go's wireErrors, by the sentinel each reason names.
_REASONS: dict[str, type[KvringError]] = {
    "CHUNK_NOT_FOUND": NotFound,
    "ALREADY_HELD": AlreadyExists,
    "BUSY": Aborted,
    "STAGE_LEASE_EXPIRED": Aborted,
    "REJECTED": ResourceExhausted,
    "NO_SPACE": ResourceExhausted,
    "NOT_STAGED": FailedPrecondition,
    "CHECKSUM_MISMATCH": DataLoss,
    "PIN_LIMIT": ResourceExhausted,
    "SEGMENT_LOST": Aborted,
    "CHUNK_INCOMPLETE": InvalidArgument,
    "STORE_INVALID": InvalidArgument,
    "STORE_CLOSED": Unavailable,
    "BAD_FRAME": InvalidArgument,
    "INCOMPLETE_STREAM": InvalidArgument,
    "SCHEMA_MISMATCH": SchemaMismatch,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "UNKNOWN_NAMESPACE": UnknownNamespace,
    "INVALID_ARGUMENT": InvalidArgument,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
    "UNAVAILABLE": Unavailable,
    "CLIENT_CLOSED": ClientClosed,
    "DEADLINE_EXCEEDED": DeadlineExceeded,
    "CANCELED": Cancelled,
}

# gRPC code -> class, for statuses without kvring's ErrorInfo (from gRPC itself, a proxy, another implementation).
_CODES: dict[grpc.StatusCode, type[KvringError]] = {
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.INTERNAL: Internal,
}

# Numeric gRPC codes, for PutChunkResult.code.
CODE_BY_NUMBER: dict[int, grpc.StatusCode] = {c.value[0]: c for c in grpc.StatusCode}


def _fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """Decode one level of protobuf wire format: (field number, wire type, int or bytes)."""
    out = []
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 2:
            ln, i = _varint(buf, i)
            v, i = bytes(buf[i : i + ln]), i + ln
        elif wt == 1:
            v, i = bytes(buf[i : i + 8]), i + 8
        elif wt == 5:
            v, i = bytes(buf[i : i + 4]), i + 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        out.append((num, wt, v))
    return out


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def error_info_reason(details_bin: bytes) -> str:
    """The kvring ErrorInfo reason in a serialized google.rpc.Status (grpc-status-details-bin), or ""."""
    try:
        for num, wt, v in _fields(details_bin):
            if num != 3 or wt != 2:  # Status.details: repeated Any
                continue
            any_fields = {n: val for n, _, val in _fields(v)}
            if not bytes(any_fields.get(1, b"")).endswith(b"google.rpc.ErrorInfo"):
                continue
            info = {n: val for n, _, val in _fields(any_fields.get(2, b""))}
            if bytes(info.get(2, b"")).decode() == ERROR_DOMAIN:
                return bytes(info.get(1, b"")).decode()
    except (ValueError, IndexError, UnicodeDecodeError):
        pass
    return ""


def from_rpc_error(exc: grpc.RpcError, what: str = "") -> KvringError:
    """Turn a failed gRPC call into a :class:`KvringError`, keeping the server's message.

    ``what`` (e.g. ``"put"``) prefixes the message as ``kvring put: ...``.
    """
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = exc.details() if hasattr(exc, "details") else str(exc)
    reason = ""
    md = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in md or ():
        if key == "grpc-status-details-bin":
            reason = error_info_reason(value)
    cls = _REASONS.get(reason) or _CODES.get(code, KvringError)
    msg = details or (code.name if code else "error")
    if what:
        msg = f"kvring {what}: {msg}"
    return cls(msg, code=code, reason=reason)
