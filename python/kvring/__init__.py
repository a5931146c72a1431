"""kvring: the Python client of a kvring cluster, a distributed KV cache for LLM inference engines.

Quick tour::

    import kvring
    c = kvring.Client(seeds=["127.0.0.1:9600"], namespace="llama-8b/tp0of1",
                      schema=kvring.Schema(model="llama-8b", dtype="bf16", tokens_per_chunk=16, chunks_per_group=32))
    ids = kvring.chunk_ids(tokens, 16)
    groups = kvring.group_keys(ids, 32)
    hit = c.lookup(ids)                                   # leading chunks held now
    c.put([kvring.Chunk(ids[i], kv[i], groups[i]) for i in range(hit.held, len(ids))])
    c.get_into(ids[:hit.held], buffers)                   # verified bytes into the caller's buffers

See python/README.md.
"""

from .chunkid import CHUNK_ID_SIZE, ROOT, chunk_ids, group_keys, next_chunk_id
from .client import Chunk, Client, GetResult, LookupResult, Node, PutResult, PutStatus, Schema, Stats
from .conn import ConnConfig, ConnState, ConnStatus, TLS
from .route import RoutingState
from .checksum import crc32c
from .errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    ClientClosed,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    KvringError,
    NotFound,
    PermissionDenied,
    ProtocolError,
    ResourceExhausted,
    SchemaMismatch,
    Unauthenticated,
    Unavailable,
    UnknownNamespace,
)

__version__ = "0.1.0"

__all__ = [
    "CHUNK_ID_SIZE",
    "ROOT",
    "chunk_ids",
    "group_keys",
    "next_chunk_id",
    "crc32c",
    "Chunk",
    "Client",
    "GetResult",
    "LookupResult",
    "Node",
    "PutResult",
    "PutStatus",
    "Schema",
    "Stats",
    "ConnConfig",
    "ConnState",
    "ConnStatus",
    "TLS",
    "RoutingState",
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
]
