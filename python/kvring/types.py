"""The values the client takes and returns: schemas, chunks and per-chunk results. Plain data, safe to keep."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, NamedTuple, Optional, Union

import grpc

from .v1 import common_pb2

__all__ = ["Schema", "Chunk", "PutStatus", "PutResult", "Node", "LookupResult", "GetResult", "Stats", "ChunkLike", "Buffer"]

Buffer = Any  # any object with the buffer protocol: bytes, bytearray, memoryview, numpy arrays...

_DEFAULT_MAX_CHUNK = 64 << 20


def _hex(b: Any) -> str:
    """A chunk id (or group key) as hex; None as None."""
    if b is None:
        return "None"
    try:
        return bytes(b).hex()
    except TypeError:
        return repr(b)


def _size(data: Any) -> str:
    """A payload as its length, never its bytes: a chunk is often 32 KiB or more."""
    if data is None:
        return "None"
    try:
        return f"<{memoryview(data).nbytes} bytes>"
    except TypeError:
        return f"<{type(data).__name__}>"


@dataclasses.dataclass(frozen=True)
class Schema:
    """The KV layout of a namespace. Two clients with different schemas under one namespace name are refused
    (:class:`~kvring.SchemaMismatch` naming the differing fields) instead of silently missing each other's chunks.

    The defaults are the Go SDK's zero values, so a Go and a Python engine that set the same fields agree.
    ``chunks_per_group`` K above 1 places a prompt's chunks K at a time (see :func:`kvring.group_keys`); then every
    put chunk needs its group key, and :meth:`Client.lookup` / :meth:`Client.get` take ids that start at a prompt's
    first chunk. 32 suits engines (docs/placement.md).
    """

    model: str
    dtype: str
    tokens_per_chunk: int = 16
    chunks_per_group: int = 0
    layout: str = ""
    hash_scheme: str = ""
    tp_rank: int = 0
    tp_size: int = 0
    extra: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_proto(self) -> common_pb2.NamespaceSchema:
        return common_pb2.NamespaceSchema(
            model=self.model,
            dtype=self.dtype,
            tokens_per_chunk=self.tokens_per_chunk,
            layout=self.layout,
            hash_scheme=self.hash_scheme,
            tp_rank=self.tp_rank,
            tp_size=self.tp_size,
            extra=dict(self.extra),
            chunks_per_group=self.chunks_per_group,
        )


@dataclasses.dataclass(repr=False)
class Chunk:
    """One chunk to store. ``data`` is any C-contiguous buffer-protocol object; it is only read, and only during
    :meth:`Client.put` (the client keeps no reference afterwards). ``group`` is the chunk's group key, required
    when the namespace groups chunks. Its repr shows the id and group in hex and the payload's length."""

    id: bytes
    data: Buffer
    group: Optional[bytes] = None

    def __repr__(self) -> str:
        group = "" if self.group is None else f", group={_hex(self.group)}"
        return f"Chunk(id={_hex(self.id)}, data={_size(self.data)}{group})"


class PutStatus:
    """A chunk's fate, as a string constant."""

    STORED = "stored"
    """At least min_replicas nodes hold the chunk now (holders)."""
    ALREADY_HELD = "already_held"
    """The cluster held it before; no bytes were needed."""
    REJECTED = "rejected"
    """No node holds it: the owners' admission policy or memory budget declined it. Not a system error."""
    FAILED = "failed"
    """No node (or fewer than min_replicas) holds it; reason says why."""


_STATUS = {1: PutStatus.STORED, 2: PutStatus.ALREADY_HELD, 3: PutStatus.REJECTED, 4: PutStatus.FAILED}


class Node(NamedTuple):
    """A kvring node: its id and gRPC address."""

    id: str
    addr: str


@dataclasses.dataclass(repr=False)
class PutResult:
    """The cluster's answer for one chunk of a put. Its repr shows the id in hex, and the reason and code only
    when there is one."""

    id: bytes
    status: str
    holders: list[Node] = dataclasses.field(default_factory=list)
    degraded: bool = False
    """Held by fewer nodes than the replication factor."""
    reason: str = ""
    code: Optional[grpc.StatusCode] = None
    """For rejected and failed: the gRPC code classifying the cause (RESOURCE_EXHAUSTED, UNAVAILABLE...)."""

    @property
    def held(self) -> bool:
        """Whether the cluster holds the chunk after the put."""
        return self.status in (PutStatus.STORED, PutStatus.ALREADY_HELD)

    def __repr__(self) -> str:
        out = f"PutResult(id={_hex(self.id)}, status={self.status!r}, holders={self.holders!r}"
        if self.degraded:
            out += ", degraded=True"
        if self.reason:
            out += f", reason={self.reason!r}"
        if self.code is not None:
            out += f", code={self.code.name}"
        return out + ")"


class LookupResult(NamedTuple):
    """How much of a prefix the cluster holds now. ``lease`` pins ``ids[:held]`` until ``lease_ttl`` seconds pass
    or :meth:`Client.release_lease`; 0 when nothing was pinned."""

    held: int
    lease: int = 0
    lease_ttl: float = 0.0
    epoch: int = 0


@dataclasses.dataclass(repr=False)
class GetResult:
    """One chunk read back: ``data`` (checksum verified) when found, else None and a reason. Its repr shows the id
    in hex and the payload's length, not its bytes."""

    id: bytes
    found: bool = False
    data: Optional[bytes] = None
    size: int = 0
    holder: Optional[Node] = None
    reason: str = "the node sent no answer for this chunk"

    def __repr__(self) -> str:
        if self.found:
            return f"GetResult(id={_hex(self.id)}, found=True, data={_size(self.data)}, size={self.size}, holder={self.holder!r})"
        return f"GetResult(id={_hex(self.id)}, found=False, reason={self.reason!r})"


@dataclasses.dataclass
class Stats:
    """Counters of one client. Read without locking; approximate under concurrency."""

    checksum_mismatches: int = 0
    """Chunks whose bytes failed their CRC-32C on read (each was reported a miss)."""
    degraded_puts: int = 0
    """Chunks stored or already held with fewer holders than the replication factor."""
    socket_calls: int = 0
    """Calls served through the node's local socket (the rest went over gRPC)."""
    busy_resends: int = 0
    """Chunks put once more because a node answered them failed with code ABORTED (another write of the chunk,
    usually this client's own earlier attempt, ended without storing it); their second result is the one
    returned."""


ChunkLike = Union[Chunk, tuple]


