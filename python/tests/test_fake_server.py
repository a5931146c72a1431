"""The client against a fake node written here: damaged bytes are never returned, ErrorInfo reasons map to the
right exceptions, and a node that forgot the namespace gets it registered again."""

from concurrent import futures
import os
import threading

import grpc
import pytest

import kvring
from cluster import wait_for
from conftest import connected
from kvring.v1 import cache_pb2, cache_pb2_grpc, common_pb2

FINGERPRINT = bytes(range(32))


def status_details(code: grpc.StatusCode, message: str, reason: str) -> bytes:
    """A serialized google.rpc.Status with a kvring ErrorInfo, as the Go node sends (built by hand: no googleapis
    protos needed)."""

    def ld(num, payload):
        return bytes([num << 3 | 2]) + _varint(len(payload)) + payload

    info = ld(1, reason.encode()) + ld(2, b"kvring")
    any_ = ld(1, b"type.googleapis.com/google.rpc.ErrorInfo") + ld(2, info)
    return bytes([0x08]) + _varint(code.value[0]) + ld(2, message.encode()) + ld(3, any_)


def _varint(v):
    out = bytearray()
    while v > 0x7F:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


class FakeCache(cache_pb2_grpc.CacheServicer):
    def __init__(self):
        self.registrations = 0
        self.forget_once = False
        self.fail_lookup = None  # (code, message, reason)
        self.chunks = {}  # id -> (bytes, declared crc)
        self.busy_once = set()  # ids the next put carrying them answers failed with code ABORTED
        self.busy_always = set()  # ids every put answers failed with code ABORTED
        self.puts = []  # the chunk ids of each put, in turn
        self.lock = threading.Lock()

    def RegisterNamespace(self, request, context):
        with self.lock:
            self.registrations += 1
        rec = common_pb2.NamespaceRecord(name=request.name, schema=request.schema, fingerprint=FINGERPRINT)
        return cache_pb2.RegisterNamespaceResponse(epoch=1, namespace=rec, limits=common_pb2.Limits(max_chunk_bytes=1 << 26))

    def Lookup(self, request, context):
        if self.forget_once:
            self.forget_once = False
            self._abort(context, grpc.StatusCode.FAILED_PRECONDITION, f'unknown namespace "{request.namespace.name}"',
                        "UNKNOWN_NAMESPACE")
        if self.fail_lookup:
            self._abort(context, *self.fail_lookup)
        held = 0
        for i in request.ids:
            if i not in self.chunks:
                break
            held += 1
        return cache_pb2.LookupResponse(epoch=1, held=held)

    def Get(self, request, context):
        for idx, i in enumerate(request.ids):
            if i not in self.chunks:
                yield cache_pb2.GetResponse(epoch=1, header=common_pb2.ChunkHeader(
                    index=idx, status=common_pb2.READ_STATUS_NOT_FOUND, chunk=common_pb2.ChunkRef(id=i), reason="not held here"))
                continue
            data, crc = self.chunks[i]
            yield cache_pb2.GetResponse(epoch=1, header=common_pb2.ChunkHeader(
                index=idx, status=common_pb2.READ_STATUS_FOUND, chunk=common_pb2.ChunkRef(id=i, size=len(data), crc32c=crc),
                holder=common_pb2.NodeRef(node_id="fake", grpc_addr="fake:1")))
            for off in range(0, len(data), 1 << 20):
                yield cache_pb2.GetResponse(epoch=1, data=common_pb2.DataFrame(index=idx, offset=off, data=data[off:off + (1 << 20)]))

    def Put(self, request_iterator, context):
        """Stores every chunk, except that the ids in busy_once are answered failed with code ABORTED by the first
        put that carries them (those in busy_always by every put), as an owner answers a chunk another write held up (node/internal/coord
        busy.go). Records each put's chunk ids."""
        begin = next(request_iterator).begin
        ids = [c.id for c in begin.chunks]
        if not begin.eager:
            yield cache_pb2.PutResponse(epoch=1, need=cache_pb2.PutNeed(need=list(range(len(ids)))))
        got = {}
        for m in request_iterator:
            if m.WhichOneof("msg") == "end":
                break
            got.setdefault(m.data.index, bytearray()).extend(m.data.data)
        res = cache_pb2.PutResult()
        with self.lock:
            self.puts.append(ids)
            for i, cid in enumerate(ids):
                if cid in self.busy_once or cid in self.busy_always:
                    self.busy_once.discard(cid)
                    res.results.add(index=i, status=cache_pb2.PUT_STATUS_FAILED, code=grpc.StatusCode.ABORTED.value[0],
                                    reason="node fake: another write of this chunk ended without storing it "
                                           "(declined or aborted); retry")
                    continue
                data = bytes(got.get(i, b""))
                self.chunks[cid] = (data, kvring.crc32c(data))
                res.results.add(index=i, status=cache_pb2.PUT_STATUS_STORED,
                                holders=[common_pb2.NodeRef(node_id="fake", grpc_addr="fake:1")])
        yield cache_pb2.PutResponse(epoch=1, result=res)

    @staticmethod
    def _abort(context, code, message, reason):
        context.set_trailing_metadata((("grpc-status-details-bin", status_details(code, message, reason)),))
        context.abort(code, message)


class FakeHealth:
    """grpc.health.v1.Health/Check answering ``serving`` (SERVING or NOT_SERVING), each answer held back by
    ``delay`` seconds (a node slow to accept, as the Go SDK's slowHealth). Counts the checks."""

    def __init__(self, delay: float = 0.0):
        self.serving = True
        self.delay = delay
        self.checks = 0

    def check(self, request, context):
        self.checks += 1
        if self.delay:
            threading.Event().wait(self.delay)  # the node's own slowness, not a test waiting for a condition
        return b"\x08\x01" if self.serving else b"\x08\x02"  # SERVING / NOT_SERVING


@pytest.fixture
def fake_node():
    """Start fake nodes for a test: fake_node(health_delay=0) -> (FakeCache, FakeHealth, addr); stopped after it."""
    servers = []

    def make(health_delay: float = 0.0):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        svc, health = FakeCache(), FakeHealth(health_delay)
        cache_pb2_grpc.add_CacheServicer_to_server(svc, server)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
            "Check": grpc.unary_unary_rpc_method_handler(health.check),
        }),))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return svc, health, f"127.0.0.1:{port}"

    yield make
    for server in servers:
        server.stop(None)


@pytest.fixture
def fake(fake_node):
    svc, _, addr = fake_node()
    return svc, addr


def test_checksum_damage_is_a_counted_miss_never_data(fake, client_for):
    svc, addr = fake
    good, bad, big_bad = os.urandom(32), os.urandom(32), os.urandom(32)
    svc.chunks[good] = (b"intact bytes", kvring.crc32c(b"intact bytes"))
    svc.chunks[bad] = (b"damaged bytes", kvring.crc32c(b"damaged bytez"))
    payload = os.urandom((2 << 20) + 3)
    svc.chunks[big_bad] = (payload, kvring.crc32c(payload) ^ 1)
    c = client_for([addr], "fake/ns")
    wait_for(lambda: connected(c))
    assert c.get([good, bad, big_bad, os.urandom(32)]) == [b"intact bytes", None, None, None]
    assert c.stats.checksum_mismatches == 2
    res = c.read([bad])
    assert not res[0].found and res[0].data is None and "checksum" in res[0].reason
    buf = bytearray(len(payload))
    assert c.get_into([big_bad, good], [buf, bytearray(100)]) == [None, len(b"intact bytes")]
    assert c.stats.checksum_mismatches == 4


def test_forgotten_namespace_is_registered_again(fake, client_for):
    svc, addr = fake
    c = client_for([addr], "fake/ns")
    wait_for(lambda: connected(c))
    assert c.lookup([os.urandom(32)]).held == 0
    assert svc.registrations == 1
    svc.forget_once = True
    assert c.lookup([os.urandom(32)]).held == 0
    assert svc.registrations == 2


@pytest.mark.parametrize("code,reason,exc", [
    (grpc.StatusCode.FAILED_PRECONDITION, "SCHEMA_MISMATCH", kvring.SchemaMismatch),
    (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT", kvring.InvalidArgument),
    (grpc.StatusCode.INVALID_ARGUMENT, "BAD_FRAME", kvring.InvalidArgument),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "PIN_LIMIT", kvring.ResourceExhausted),
    (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", kvring.PermissionDenied),
    (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", kvring.Unauthenticated),
    (grpc.StatusCode.ABORTED, "BUSY", kvring.Aborted),
    (grpc.StatusCode.FAILED_PRECONDITION, "", kvring.FailedPrecondition),  # no ErrorInfo: by code alone
    (grpc.StatusCode.INTERNAL, "", kvring.Internal),
])
def test_error_reasons_map_to_exceptions_keeping_the_message(fake, client_for, code, reason, exc):
    svc, addr = fake
    c = client_for([addr], "fake/ns")
    wait_for(lambda: connected(c))
    msg = "lookup.ids[3]: the server's own words"
    svc.fail_lookup = (code, msg, reason or "SOMETHING_NEW")
    with pytest.raises(exc) as ei:
        c.lookup([os.urandom(32)])
    assert ei.value.message == "kvring lookup: " + msg
    assert ei.value.code == code
    if reason:
        assert ei.value.reason == reason


@pytest.mark.parametrize("eager", [True, False])
def test_a_chunk_another_write_held_up_is_put_again(fake, client_for, eager):
    """A chunk a node answered failed because another write of it ended without storing it (code ABORTED: usually
    this client's own earlier attempt) is put once more, and its second result is what the caller sees; the other
    chunks are not sent again (client/busy_test.go TestAChunkAnotherWriteHeldUpIsPutAgain)."""
    svc, addr = fake
    c = client_for([addr], "fake/ns", eager_put_bytes=1 << 20 if eager else -1)
    wait_for(lambda: connected(c))
    chunks = [kvring.Chunk(os.urandom(32), os.urandom(n)) for n in (10, 20, 30)]
    svc.busy_once.add(chunks[1].id)
    res = c.put(chunks)
    assert [(r.id, r.status) for r in res] == [(ch.id, kvring.PutStatus.STORED) for ch in chunks], res
    assert res[1].code is None and res[1].reason == "" and res[1].holders
    assert svc.puts == [[ch.id for ch in chunks], [chunks[1].id]]  # the batch, then the held-up chunk alone
    assert c.stats.busy_resends == 1
    assert c.get([ch.id for ch in chunks]) == [bytes(ch.data) for ch in chunks]


def test_a_chunk_held_up_twice_stays_failed_after_one_resend(fake, client_for):
    """The resend happens once: a chunk held up again keeps its failed result and its code, for the caller."""
    svc, addr = fake
    c = client_for([addr], "fake/ns")
    wait_for(lambda: connected(c))
    cid = os.urandom(32)
    svc.busy_always.add(cid)
    res = c.put([kvring.Chunk(cid, b"x"), kvring.Chunk(os.urandom(32), b"y")])
    assert res[0].status == kvring.PutStatus.FAILED and res[0].code == grpc.StatusCode.ABORTED
    assert "another write" in res[0].reason
    assert res[1].status == kvring.PutStatus.STORED
    assert len(svc.puts) == 2 and svc.puts[1] == [cid]
