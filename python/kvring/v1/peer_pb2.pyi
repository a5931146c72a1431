from kvring.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

COMMIT_STATUS_FAILED: CommitStatus
COMMIT_STATUS_SEALED: CommitStatus
COMMIT_STATUS_UNSPECIFIED: CommitStatus
DESCRIPTOR: _descriptor.FileDescriptor
VOTE_ALREADY_HELD: Vote
VOTE_FAILED: Vote
VOTE_READY: Vote
VOTE_REJECTED: Vote
VOTE_UNSPECIFIED: Vote

class AbortRequest(_message.Message):
    __slots__ = ["caller", "stage_tokens"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    STAGE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    stage_tokens: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., stage_tokens: _Optional[_Iterable[int]] = ...) -> None: ...

class AbortResponse(_message.Message):
    __slots__ = ["epoch"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    def __init__(self, epoch: _Optional[int] = ...) -> None: ...

class ChunkVote(_message.Message):
    __slots__ = ["code", "held_crc32c", "index", "reason", "stage_token", "vote"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    HELD_CRC32C_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VOTE_FIELD_NUMBER: _ClassVar[int]
    code: int
    held_crc32c: int
    index: int
    reason: str
    stage_token: int
    vote: Vote
    def __init__(self, index: _Optional[int] = ..., vote: _Optional[_Union[Vote, str]] = ..., stage_token: _Optional[int] = ..., reason: _Optional[str] = ..., code: _Optional[int] = ..., held_crc32c: _Optional[int] = ...) -> None: ...

class CommitRequest(_message.Message):
    __slots__ = ["caller", "chunks", "namespace"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    chunks: _containers.RepeatedCompositeFieldContainer[StagedChunk]
    namespace: _common_pb2.NamespaceRef
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., namespace: _Optional[_Union[_common_pb2.NamespaceRef, _Mapping]] = ..., chunks: _Optional[_Iterable[_Union[StagedChunk, _Mapping]]] = ...) -> None: ...

class CommitResponse(_message.Message):
    __slots__ = ["epoch", "results"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    results: _containers.RepeatedCompositeFieldContainer[CommitResult]
    def __init__(self, epoch: _Optional[int] = ..., results: _Optional[_Iterable[_Union[CommitResult, _Mapping]]] = ...) -> None: ...

class CommitResult(_message.Message):
    __slots__ = ["code", "reason", "status"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    code: int
    reason: str
    status: CommitStatus
    def __init__(self, status: _Optional[_Union[CommitStatus, str]] = ..., reason: _Optional[str] = ..., code: _Optional[int] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ["caller", "ids", "namespace"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    ids: _containers.RepeatedScalarFieldContainer[bytes]
    namespace: _common_pb2.NamespaceRef
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., namespace: _Optional[_Union[_common_pb2.NamespaceRef, _Mapping]] = ..., ids: _Optional[_Iterable[bytes]] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ["data", "epoch", "header"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    data: _common_pb2.DataFrame
    epoch: int
    header: _common_pb2.ChunkHeader
    def __init__(self, epoch: _Optional[int] = ..., header: _Optional[_Union[_common_pb2.ChunkHeader, _Mapping]] = ..., data: _Optional[_Union[_common_pb2.DataFrame, _Mapping]] = ...) -> None: ...

class HasRequest(_message.Message):
    __slots__ = ["caller", "groups", "ids", "namespace", "pin", "report_staging"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PIN_FIELD_NUMBER: _ClassVar[int]
    REPORT_STAGING_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    groups: _containers.RepeatedCompositeFieldContainer[_common_pb2.GroupRun]
    ids: _containers.RepeatedScalarFieldContainer[bytes]
    namespace: _common_pb2.NamespaceRef
    pin: LeasePin
    report_staging: bool
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., namespace: _Optional[_Union[_common_pb2.NamespaceRef, _Mapping]] = ..., ids: _Optional[_Iterable[bytes]] = ..., pin: _Optional[_Union[LeasePin, _Mapping]] = ..., report_staging: bool = ..., groups: _Optional[_Iterable[_Union[_common_pb2.GroupRun, _Mapping]]] = ...) -> None: ...

class HasResponse(_message.Message):
    __slots__ = ["epoch", "held", "lease_ttl_ms", "load", "spread_width", "staging"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    SPREAD_WIDTH_FIELD_NUMBER: _ClassVar[int]
    STAGING_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    held: _containers.RepeatedScalarFieldContainer[bool]
    lease_ttl_ms: int
    load: int
    spread_width: _containers.RepeatedScalarFieldContainer[int]
    staging: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, epoch: _Optional[int] = ..., held: _Optional[_Iterable[bool]] = ..., lease_ttl_ms: _Optional[int] = ..., staging: _Optional[_Iterable[bool]] = ..., spread_width: _Optional[_Iterable[int]] = ..., load: _Optional[int] = ...) -> None: ...

class LeasePin(_message.Message):
    __slots__ = ["lease_id", "ttl_ms"]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    lease_id: int
    ttl_ms: int
    def __init__(self, lease_id: _Optional[int] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class ListKeysRequest(_message.Message):
    __slots__ = ["caller", "count", "namespace_prefix"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PREFIX_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    count: int
    namespace_prefix: str
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., namespace_prefix: _Optional[str] = ..., count: _Optional[int] = ..., **kwargs) -> None: ...

class ListKeysResponse(_message.Message):
    __slots__ = ["epoch", "names", "next"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    names: _containers.RepeatedScalarFieldContainer[bytes]
    next: bytes
    def __init__(self, epoch: _Optional[int] = ..., names: _Optional[_Iterable[bytes]] = ..., next: _Optional[bytes] = ...) -> None: ...

class ListNamespacesRequest(_message.Message):
    __slots__ = ["caller", "names"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., names: _Optional[_Iterable[str]] = ...) -> None: ...

class ListNamespacesResponse(_message.Message):
    __slots__ = ["epoch", "namespaces"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    namespaces: _containers.RepeatedCompositeFieldContainer[_common_pb2.NamespaceRecord]
    def __init__(self, epoch: _Optional[int] = ..., namespaces: _Optional[_Iterable[_Union[_common_pb2.NamespaceRecord, _Mapping]]] = ...) -> None: ...

class PrepareBegin(_message.Message):
    __slots__ = ["caller", "chunks", "groups", "namespace", "spread_ttl_ms", "spread_width", "stage_ttl_ms"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SPREAD_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    SPREAD_WIDTH_FIELD_NUMBER: _ClassVar[int]
    STAGE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    chunks: _containers.RepeatedCompositeFieldContainer[_common_pb2.ChunkRef]
    groups: _containers.RepeatedCompositeFieldContainer[_common_pb2.GroupRun]
    namespace: _common_pb2.NamespaceRef
    spread_ttl_ms: int
    spread_width: int
    stage_ttl_ms: int
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., namespace: _Optional[_Union[_common_pb2.NamespaceRef, _Mapping]] = ..., chunks: _Optional[_Iterable[_Union[_common_pb2.ChunkRef, _Mapping]]] = ..., stage_ttl_ms: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[_common_pb2.GroupRun, _Mapping]]] = ..., spread_width: _Optional[int] = ..., spread_ttl_ms: _Optional[int] = ...) -> None: ...

class PrepareEnd(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class PrepareNeed(_message.Message):
    __slots__ = ["need", "votes"]
    NEED_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    need: _containers.RepeatedScalarFieldContainer[int]
    votes: _containers.RepeatedCompositeFieldContainer[ChunkVote]
    def __init__(self, need: _Optional[_Iterable[int]] = ..., votes: _Optional[_Iterable[_Union[ChunkVote, _Mapping]]] = ...) -> None: ...

class PrepareRequest(_message.Message):
    __slots__ = ["begin", "data", "end"]
    BEGIN_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    begin: PrepareBegin
    data: _common_pb2.DataFrame
    end: PrepareEnd
    def __init__(self, begin: _Optional[_Union[PrepareBegin, _Mapping]] = ..., data: _Optional[_Union[_common_pb2.DataFrame, _Mapping]] = ..., end: _Optional[_Union[PrepareEnd, _Mapping]] = ...) -> None: ...

class PrepareResponse(_message.Message):
    __slots__ = ["epoch", "need", "votes"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEED_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    need: PrepareNeed
    votes: PrepareVotes
    def __init__(self, epoch: _Optional[int] = ..., need: _Optional[_Union[PrepareNeed, _Mapping]] = ..., votes: _Optional[_Union[PrepareVotes, _Mapping]] = ...) -> None: ...

class PrepareVotes(_message.Message):
    __slots__ = ["votes"]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    votes: _containers.RepeatedCompositeFieldContainer[ChunkVote]
    def __init__(self, votes: _Optional[_Iterable[_Union[ChunkVote, _Mapping]]] = ...) -> None: ...

class PutNamespaceRequest(_message.Message):
    __slots__ = ["caller", "namespace"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    namespace: _common_pb2.NamespaceRecord
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., namespace: _Optional[_Union[_common_pb2.NamespaceRecord, _Mapping]] = ...) -> None: ...

class PutNamespaceResponse(_message.Message):
    __slots__ = ["accepted", "epoch", "namespace"]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    epoch: int
    namespace: _common_pb2.NamespaceRecord
    def __init__(self, epoch: _Optional[int] = ..., namespace: _Optional[_Union[_common_pb2.NamespaceRecord, _Mapping]] = ..., accepted: bool = ...) -> None: ...

class RemoveRequest(_message.Message):
    __slots__ = ["caller", "drop_namespace", "ids", "namespace", "unpin"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    DROP_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    UNPIN_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    drop_namespace: bool
    ids: _containers.RepeatedScalarFieldContainer[bytes]
    namespace: _common_pb2.NamespaceRef
    unpin: bool
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., namespace: _Optional[_Union[_common_pb2.NamespaceRef, _Mapping]] = ..., ids: _Optional[_Iterable[bytes]] = ..., drop_namespace: bool = ..., unpin: bool = ...) -> None: ...

class RemoveResponse(_message.Message):
    __slots__ = ["chunks", "epoch", "pinned", "removed"]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    chunks: int
    epoch: int
    pinned: _containers.RepeatedScalarFieldContainer[bool]
    removed: _containers.RepeatedScalarFieldContainer[bool]
    def __init__(self, epoch: _Optional[int] = ..., removed: _Optional[_Iterable[bool]] = ..., pinned: _Optional[_Iterable[bool]] = ..., chunks: _Optional[int] = ...) -> None: ...

class StagedChunk(_message.Message):
    __slots__ = ["id", "stage_token"]
    ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    id: bytes
    stage_token: int
    def __init__(self, stage_token: _Optional[int] = ..., id: _Optional[bytes] = ...) -> None: ...

class UnpinRequest(_message.Message):
    __slots__ = ["caller", "lease_ids"]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    LEASE_IDS_FIELD_NUMBER: _ClassVar[int]
    caller: _common_pb2.PeerCaller
    lease_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, caller: _Optional[_Union[_common_pb2.PeerCaller, _Mapping]] = ..., lease_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class UnpinResponse(_message.Message):
    __slots__ = ["epoch"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    def __init__(self, epoch: _Optional[int] = ...) -> None: ...

class Vote(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class CommitStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
