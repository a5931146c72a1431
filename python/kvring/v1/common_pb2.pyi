from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
READ_STATUS_FOUND: ReadStatus
READ_STATUS_NOT_FOUND: ReadStatus
READ_STATUS_UNAVAILABLE: ReadStatus
READ_STATUS_UNSPECIFIED: ReadStatus

class ChunkHeader(_message.Message):
    __slots__ = ["chunk", "holder", "index", "reason", "status"]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    HOLDER_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    chunk: ChunkRef
    holder: NodeRef
    index: int
    reason: str
    status: ReadStatus
    def __init__(self, index: _Optional[int] = ..., status: _Optional[_Union[ReadStatus, str]] = ..., chunk: _Optional[_Union[ChunkRef, _Mapping]] = ..., holder: _Optional[_Union[NodeRef, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class ChunkRef(_message.Message):
    __slots__ = ["crc32c", "id", "name", "size"]
    CRC32C_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    crc32c: int
    id: bytes
    name: bytes
    size: int
    def __init__(self, id: _Optional[bytes] = ..., size: _Optional[int] = ..., crc32c: _Optional[int] = ..., name: _Optional[bytes] = ...) -> None: ...

class DataFrame(_message.Message):
    __slots__ = ["data", "index", "offset"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    index: int
    offset: int
    def __init__(self, index: _Optional[int] = ..., offset: _Optional[int] = ..., data: _Optional[bytes] = ...) -> None: ...

class GroupRun(_message.Message):
    __slots__ = ["count", "key"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    count: int
    key: bytes
    def __init__(self, key: _Optional[bytes] = ..., count: _Optional[int] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ["max_batch_chunks", "max_chunk_bytes", "max_frame_bytes", "max_lease_ttl_ms"]
    MAX_BATCH_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    MAX_CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    max_batch_chunks: int
    max_chunk_bytes: int
    max_frame_bytes: int
    max_lease_ttl_ms: int
    def __init__(self, max_frame_bytes: _Optional[int] = ..., max_chunk_bytes: _Optional[int] = ..., max_batch_chunks: _Optional[int] = ..., max_lease_ttl_ms: _Optional[int] = ...) -> None: ...

class NamespaceRecord(_message.Message):
    __slots__ = ["created_by", "created_unix_ms", "fingerprint", "min_replicas", "name", "replication_factor", "schema", "share"]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    MIN_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    created_by: str
    created_unix_ms: int
    fingerprint: bytes
    min_replicas: int
    name: str
    replication_factor: int
    schema: NamespaceSchema
    share: NamespaceShare
    def __init__(self, name: _Optional[str] = ..., schema: _Optional[_Union[NamespaceSchema, _Mapping]] = ..., fingerprint: _Optional[bytes] = ..., replication_factor: _Optional[int] = ..., min_replicas: _Optional[int] = ..., created_unix_ms: _Optional[int] = ..., created_by: _Optional[str] = ..., share: _Optional[_Union[NamespaceShare, _Mapping]] = ...) -> None: ...

class NamespaceRef(_message.Message):
    __slots__ = ["fingerprint", "name"]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    fingerprint: bytes
    name: str
    def __init__(self, name: _Optional[str] = ..., fingerprint: _Optional[bytes] = ...) -> None: ...

class NamespaceSchema(_message.Message):
    __slots__ = ["chunks_per_group", "dtype", "extra", "hash_scheme", "layout", "model", "tokens_per_chunk", "tp_rank", "tp_size"]
    class ExtraEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CHUNKS_PER_GROUP_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    HASH_SCHEME_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_CHUNK_FIELD_NUMBER: _ClassVar[int]
    TP_RANK_FIELD_NUMBER: _ClassVar[int]
    TP_SIZE_FIELD_NUMBER: _ClassVar[int]
    chunks_per_group: int
    dtype: str
    extra: _containers.ScalarMap[str, str]
    hash_scheme: str
    layout: str
    model: str
    tokens_per_chunk: int
    tp_rank: int
    tp_size: int
    def __init__(self, model: _Optional[str] = ..., dtype: _Optional[str] = ..., tokens_per_chunk: _Optional[int] = ..., layout: _Optional[str] = ..., hash_scheme: _Optional[str] = ..., tp_rank: _Optional[int] = ..., tp_size: _Optional[int] = ..., extra: _Optional[_Mapping[str, str]] = ..., chunks_per_group: _Optional[int] = ...) -> None: ...

class NamespaceShare(_message.Message):
    __slots__ = ["cap", "guarantee", "set_by", "set_unix_ms"]
    CAP_FIELD_NUMBER: _ClassVar[int]
    GUARANTEE_FIELD_NUMBER: _ClassVar[int]
    SET_BY_FIELD_NUMBER: _ClassVar[int]
    SET_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    cap: ShareAmount
    guarantee: ShareAmount
    set_by: str
    set_unix_ms: int
    def __init__(self, guarantee: _Optional[_Union[ShareAmount, _Mapping]] = ..., cap: _Optional[_Union[ShareAmount, _Mapping]] = ..., set_unix_ms: _Optional[int] = ..., set_by: _Optional[str] = ...) -> None: ...

class NodeRef(_message.Message):
    __slots__ = ["grpc_addr", "node_id"]
    GRPC_ADDR_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    grpc_addr: str
    node_id: str
    def __init__(self, node_id: _Optional[str] = ..., grpc_addr: _Optional[str] = ...) -> None: ...

class PeerCaller(_message.Message):
    __slots__ = ["epoch", "node_id"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    node_id: str
    def __init__(self, node_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class ShareAmount(_message.Message):
    __slots__ = ["bytes", "percent"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    percent: float
    def __init__(self, bytes: _Optional[int] = ..., percent: _Optional[float] = ...) -> None: ...

class ReadStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
