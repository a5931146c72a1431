from kvring.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
PUT_STATUS_ALREADY_HELD: PutStatus
PUT_STATUS_FAILED: PutStatus
PUT_STATUS_REJECTED: PutStatus
PUT_STATUS_STORED: PutStatus
PUT_STATUS_UNSPECIFIED: PutStatus

class GetRequest(_message.Message):
    __slots__ = ["groups", "ids", "namespace"]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[_common_pb2.GroupRun]
    ids: _containers.RepeatedScalarFieldContainer[bytes]
    namespace: _common_pb2.NamespaceRef
    def __init__(self, namespace: _Optional[_Union[_common_pb2.NamespaceRef, _Mapping]] = ..., ids: _Optional[_Iterable[bytes]] = ..., groups: _Optional[_Iterable[_Union[_common_pb2.GroupRun, _Mapping]]] = ...) -> None: ...

class GetResponse(_message.Message):
    __slots__ = ["data", "epoch", "header"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    data: _common_pb2.DataFrame
    epoch: int
    header: _common_pb2.ChunkHeader
    def __init__(self, epoch: _Optional[int] = ..., header: _Optional[_Union[_common_pb2.ChunkHeader, _Mapping]] = ..., data: _Optional[_Union[_common_pb2.DataFrame, _Mapping]] = ...) -> None: ...

class LookupRequest(_message.Message):
    __slots__ = ["groups", "ids", "namespace", "pin_ttl_ms"]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PIN_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[_common_pb2.GroupRun]
    ids: _containers.RepeatedScalarFieldContainer[bytes]
    namespace: _common_pb2.NamespaceRef
    pin_ttl_ms: int
    def __init__(self, namespace: _Optional[_Union[_common_pb2.NamespaceRef, _Mapping]] = ..., ids: _Optional[_Iterable[bytes]] = ..., pin_ttl_ms: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[_common_pb2.GroupRun, _Mapping]]] = ...) -> None: ...

class LookupResponse(_message.Message):
    __slots__ = ["epoch", "held", "lease_id", "lease_ttl_ms", "load", "spread_width"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    SPREAD_WIDTH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    held: int
    lease_id: int
    lease_ttl_ms: int
    load: int
    spread_width: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, epoch: _Optional[int] = ..., held: _Optional[int] = ..., lease_id: _Optional[int] = ..., lease_ttl_ms: _Optional[int] = ..., spread_width: _Optional[_Iterable[int]] = ..., load: _Optional[int] = ...) -> None: ...

class PutBegin(_message.Message):
    __slots__ = ["chunks", "eager", "groups", "namespace"]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    EAGER_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    chunks: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChunkRef]
    eager: bool
    groups: _containers.RepeatedCompositeFieldContainer[_common_pb2.GroupRun]
    namespace: _common_pb2.NamespaceRef
    def __init__(self, namespace: _Optional[_Union[_common_pb2.NamespaceRef, _Mapping]] = ..., chunks: _Optional[_Iterable[_Union[_common_pb2.ChunkRef, _Mapping]]] = ..., groups: _Optional[_Iterable[_Union[_common_pb2.GroupRun, _Mapping]]] = ..., eager: bool = ...) -> None: ...

class PutChunkResult(_message.Message):
    __slots__ = ["code", "degraded", "held_crc32c", "holders", "index", "reason", "status"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    HELD_CRC32C_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    code: int
    degraded: bool
    held_crc32c: int
    holders: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeRef]
    index: int
    reason: str
    status: PutStatus
    def __init__(self, index: _Optional[int] = ..., status: _Optional[_Union[PutStatus, str]] = ..., holders: _Optional[_Iterable[_Union[_common_pb2.NodeRef, _Mapping]]] = ..., degraded: bool = ..., reason: _Optional[str] = ..., code: _Optional[int] = ..., held_crc32c: _Optional[int] = ...) -> None: ...

class PutEnd(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class PutNeed(_message.Message):
    __slots__ = ["need", "settled"]
    NEED_FIELD_NUMBER: _ClassVar[int]
    SETTLED_FIELD_NUMBER: _ClassVar[int]
    need: _containers.RepeatedScalarFieldContainer[int]
    settled: _containers.RepeatedCompositeFieldContainer[PutChunkResult]
    def __init__(self, need: _Optional[_Iterable[int]] = ..., settled: _Optional[_Iterable[_Union[PutChunkResult, _Mapping]]] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ["begin", "data", "end"]
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    begin: PutBegin
    data: _common_pb2.DataFrame
    end: PutEnd
    def __init__(self, begin: _Optional[_Union[PutBegin, _Mapping]] = ..., data: _Optional[_Union[_common_pb2.DataFrame, _Mapping]] = ..., end: _Optional[_Union[PutEnd, _Mapping]] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ["epoch", "need", "result"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    need: PutNeed
    result: PutResult
    def __init__(self, epoch: _Optional[int] = ..., need: _Optional[_Union[PutNeed, _Mapping]] = ..., result: _Optional[_Union[PutResult, _Mapping]] = ...) -> None: ...

class PutResult(_message.Message):
    __slots__ = ["results"]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[PutChunkResult]
    def __init__(self, results: _Optional[_Iterable[_Union[PutChunkResult, _Mapping]]] = ...) -> None: ...

class RegisterNamespaceRequest(_message.Message):
    __slots__ = ["min_replicas", "name", "replication_factor", "schema"]
    MIN_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    min_replicas: int
    name: str
    replication_factor: int
    schema: _common_pb2.NamespaceSchema
    def __init__(self, name: _Optional[str] = ..., schema: _Optional[_Union[_common_pb2.NamespaceSchema, _Mapping]] = ..., replication_factor: _Optional[int] = ..., min_replicas: _Optional[int] = ...) -> None: ...

class RegisterNamespaceResponse(_message.Message):
    __slots__ = ["created", "epoch", "limits", "namespace"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    created: bool
    epoch: int
    limits: _common_pb2.Limits
    namespace: _common_pb2.NamespaceRecord
    def __init__(self, epoch: _Optional[int] = ..., namespace: _Optional[_Union[_common_pb2.NamespaceRecord, _Mapping]] = ..., created: bool = ..., limits: _Optional[_Union[_common_pb2.Limits, _Mapping]] = ...) -> None: ...

class ReleaseLeaseRequest(_message.Message):
    __slots__ = ["lease_id"]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    lease_id: int
    def __init__(self, lease_id: _Optional[int] = ...) -> None: ...

class ReleaseLeaseResponse(_message.Message):
    __slots__ = ["epoch", "released"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    released: bool
    def __init__(self, epoch: _Optional[int] = ..., released: bool = ...) -> None: ...

class RingSettings(_message.Message):
    __slots__ = ["fingerprint", "hasher", "load", "partition_count", "replication_factor", "virtual_nodes"]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    HASHER_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    PARTITION_COUNT_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    VIRTUAL_NODES_FIELD_NUMBER: _ClassVar[int]
    fingerprint: str
    hasher: str
    load: float
    partition_count: int
    replication_factor: int
    virtual_nodes: int
    def __init__(self, partition_count: _Optional[int] = ..., replication_factor: _Optional[int] = ..., load: _Optional[float] = ..., virtual_nodes: _Optional[int] = ..., hasher: _Optional[str] = ..., fingerprint: _Optional[str] = ...) -> None: ...

class TopologyRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class TopologyResponse(_message.Message):
    __slots__ = ["epoch", "members", "ring", "self"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    RING_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    members: _containers.RepeatedCompositeFieldContainer[_common_pb2.NodeRef]
    ring: RingSettings
    self: _common_pb2.NodeRef
    def __init__(self, epoch: _Optional[int] = ..., self: _Optional[_Union[_common_pb2.NodeRef, _Mapping]] = ..., members: _Optional[_Iterable[_Union[_common_pb2.NodeRef, _Mapping]]] = ..., ring: _Optional[_Union[RingSettings, _Mapping]] = ...) -> None: ...

class PutStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
