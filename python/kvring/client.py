"""The kvring client: put, lookup and get prefix chunks with the same promises as the Go SDK (client/*.go).

Calls go to the node the background connection loop (:mod:`kvring.conn`) is connected to, or, with a ring view
(:mod:`kvring.route`), straight to each chunk's primary owner, as the Go SDK routes them. The namespace is
registered on first use and again whenever a node says it does not know it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional, Sequence, Union

import grpc

from . import _stcall, _wire
from .chunkid import group_keys
from .conn import ConnConfig, Conn, ConnState, ConnStatus, TLS
from .checksum import crc32c
from .errors import (
    Cancelled,
    InvalidArgument,
    KvringError,
    ProtocolError,
    ResourceExhausted,
    Unavailable,
    UnknownNamespace,
    from_rpc_error,
)
from .local import LocalPath
from .localsock import Broken
from .route import AnswerTimer, Router, RoutingState, Share, owner_failed
from .types import (  # re-exported
    _DEFAULT_MAX_CHUNK,
    _STATUS,
    Buffer,
    Chunk,
    ChunkLike,
    GetResult,
    LookupResult,
    Node,
    PutResult,
    PutStatus,
    Schema,
    Stats,
)
from .v1 import cache_pb2, cache_pb2_grpc, common_pb2

__all__ = [
    "Schema",
    "Chunk",
    "PutStatus",
    "PutResult",
    "Node",
    "LookupResult",
    "GetResult",
    "Stats",
    "Client",
]

log = logging.getLogger("kvring")

_LOCAL = "\x00local"  # the lease table's name for leases granted through the local socket
# Metadata a read sends with RegisterNamespace: check the namespace, never create it (the node answers
# UnknownNamespace for a name it does not know).
_REGISTER_EXISTING_KEY = "kvring-register-existing"


class Client:
    """A client of a kvring cluster. Safe for concurrent use from many threads.

    Construction validates the arguments and starts connecting in the background; it never blocks and never fails
    because the cluster is unreachable. While no node is connected, every call raises :class:`~kvring.Unavailable`
    at once, naming the cause; calls work again by themselves once a node is back. Each call blocks until the node
    answers or ``call_timeout`` seconds pass (:class:`~kvring.DeadlineExceeded`).

    Args:
        seeds: gRPC addresses (host:port) of kvring nodes, tried in turn.
        namespace: the namespace of this engine's chunks (e.g. ``"llama-8b/tp0of1"``).
        schema: the KV layout; see :class:`Schema`.
        replication: replication factor, used when this client is first to register the namespace (0: the
            cluster's default).
        min_replicas: fewest holders for a write to count, on first registration (0: the cluster's default).
        token: bearer token sent with every call.
        tls: TLS settings (:class:`~kvring.TLS`); None for plaintext.
        call_timeout: seconds a call may take. Default 10.
        eager_put_bytes: a put whose chunks add up to at most this many bytes sends them without first asking which
            the cluster needs (one round trip instead of two). Default 1 MiB; negative: never.
        routing: send each chunk's put and get straight to its primary owner, and a lookup to the owner of its first
            key, by the ring view fetched from the cluster (Cache.Topology), falling back to the connected node when
            an owner cannot take it; False sends every call through the connected node. Default True, as the Go SDK.
        socket: path of the local socket of a kvring node on this host (docs/vineyard.md). While it exists and
            answers, put, lookup and get go through it (chunk bytes through shared memory) instead of gRPC, with the
            same results; when it is missing or breaks, over gRPC. Default: ``$KVRING_SOCKET``, else none; ``""``
            turns it off.
        conn: further connection settings (:class:`~kvring.ConnConfig` fields: backoff, probes, callbacks).
    """

    def __init__(
        self,
        seeds: Sequence[str],
        namespace: str,
        schema: Schema,
        *,
        replication: int = 0,
        min_replicas: int = 0,
        token: Optional[str] = None,
        tls: Optional[TLS] = None,
        call_timeout: float = 10.0,
        eager_put_bytes: int = 1 << 20,
        routing: bool = True,
        socket: Optional[str] = None,
        **conn: Any,
    ) -> None:
        if not namespace:
            raise ValueError("namespace is required")
        if not schema.model or schema.tokens_per_chunk <= 0:
            raise ValueError("schema needs at least model and a positive tokens_per_chunk")
        if isinstance(seeds, str):
            seeds = [seeds]
        self.namespace = namespace
        self.schema = schema
        self.replication = replication
        self.min_replicas = min_replicas
        self.call_timeout = call_timeout
        self.eager_put_bytes = eager_put_bytes
        self.stats = Stats()
        self._lock = threading.Lock()
        self._ref: Optional[common_pb2.NamespaceRef] = None
        self._max_chunk = _DEFAULT_MAX_CHUNK
        self._stubs: dict[int, tuple[grpc.Channel, Any]] = {}
        self._leases: dict[int, tuple[str, float]] = {}  # lease -> (owner addr, expiry) for leases owners granted
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._router: Optional[Router] = None
        if socket is None:
            socket = os.environ.get("KVRING_SOCKET", "")
        self._local: Optional[LocalPath] = (
            LocalPath(socket, namespace, schema, replication, min_replicas, call_timeout) if socket else None
        )
        if routing:
            user = conn.get("on_state_change")

            def on_state(st: ConnState) -> None:
                if user is not None:
                    user(st)
                r = self._router
                if r is not None:
                    r.on_state(st)

            conn["on_state_change"] = on_state
        cfg = ConnConfig(seeds=list(seeds), tls=tls, token=token, **conn)
        self._conn = Conn(cfg)
        if routing:
            # An owner gets as long to answer as a node gets to connect and pass a health check.
            router = Router(self._conn, cfg.dial_timeout + cfg.probe_timeout)
            self._router = router
            # The connection's thread runs already: a CONNECTED callback that fired before the line above found no
            # router to prompt, and the router's own first look may have come before the connection was up; then
            # the view would wait for the periodic fetch (~10 s). The state was published before its callback ran,
            # so a connection up by now is seen here.
            if self._conn.state.status is ConnStatus.CONNECTED:
                router.prompt()

    # --- lifecycle ------------------------------------------------------------------------------------------

    @property
    def state(self) -> ConnState:
        """The connection state now (status, addr, attempt, last_error, since). Never blocks."""
        return self._conn.state

    @property
    def routing(self) -> RoutingState:
        """The ring view the client routes by now. Never blocks."""
        if self._router is None:
            return RoutingState(enabled=False)
        return self._router.state()

    def refresh_routing(self) -> RoutingState:
        """Fetch the ring view from the connected node now and return it once in use. The client does this by
        itself after connecting, when a node's replies carry a new epoch and every ~10 s. Blocks for one call."""
        if self._router is None:
            raise KvringError("kvring: routing is disabled (Client(routing=False))")
        self._router.refresh()
        return self._router.state()

    def close(self) -> None:
        """Stop the background threads and close the channels. Idempotent; blocks briefly."""
        if self._router is not None:
            self._router.close()
        if self._local is not None:
            self._local.close()
        self._conn.close()
        with self._lock:
            ex, self._executor = self._executor, None
        if ex is not None:
            ex.shutdown(wait=False)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- plumbing -------------------------------------------------------------------------------------------

    def _stub(self) -> tuple[Any, Any, Any, str]:
        """(cache stub, Put and Get callables with the fast frame codecs, addr) of the connected node, or raise
        Unavailable at once."""
        t = self._target()
        return t.stub, t.put, t.get, t.addr

    def _target(self) -> "_Target":
        """The connected node's channel and callables, or raise Unavailable at once."""
        ch, addr = self._conn.ready()
        with self._lock:
            hit = self._stubs.get(id(ch))
            if hit is None or hit[0] is not ch:
                self._stubs = {id(ch): (ch, _Target.make(ch, addr))}
                hit = self._stubs[id(ch)]
        return hit[1]

    def _owner_target(self, addr: str) -> "_Target":
        assert self._router is not None
        ch = self._router.owner_channel(addr, self._conn.new_channel)
        return self._router.stubs(ch, lambda c: _Target.make(c, addr))

    def _observe(self, addr: str, epoch: int) -> None:
        if self._router is not None and epoch:
            self._router.observe(addr, epoch)

    def _run_shares(self, main: "_Target", shares: list[Share], deadline: float,
                    call: Callable[["_Target", Share, Optional[float]], None]) -> None:
        """Run call for every share in parallel, each on its owner's channel (main for the main share) and, when the
        owner cannot take it, once more on main. call publishes its results only when it returns. The first error
        of a share that failed for good is raised once every share has ended."""
        router = self._router

        def run(s: Share) -> None:
            if s.main or router is None:
                return call(main, s, None)
            try:
                return call(self._owner_target(s.owner.addr), s, router.answer_timeout)
            except KvringError as err:
                if not owner_failed(err, deadline):
                    raise
                log.debug("kvring owner cannot take its share; sending it through the connected node owner=%s "
                          "addr=%s chunks=%d err=%s", s.owner.id, s.owner.addr, len(s.idx), err)
            return call(main, s, None)

        futures = [self._pool().submit(run, s) for s in shares[1:]]
        first: Optional[BaseException] = None
        try:
            run(shares[0])
        except BaseException as exc:  # noqa: BLE001 - raised below, after the other shares end
            first = exc
        for f in futures:
            try:
                f.result()
            except BaseException as exc:  # noqa: BLE001
                first = first or exc
        if first is not None:
            raise first

    def _answer_timer(self, call: Any, answer: Optional[float], addr: str) -> Optional[AnswerTimer]:
        """A timer that gives up call when no first message came within answer seconds (owners), or None."""
        if answer is None or self._router is None:
            return None
        return AnswerTimer(self._router.watchdog, call, answer, addr)

    def _pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(16, thread_name_prefix="kvring-share")
            return self._executor

    def _call_err(self, exc: grpc.RpcError, addr: str, what: str) -> KvringError:
        err = from_rpc_error(exc, what)
        if isinstance(err, Unavailable):
            self._conn.report_failure(addr)
            if not err.reason:  # gRPC's own transport errors ("Socket closed"): say which node, and what it means
                err = Unavailable(f"kvring {what}: node {addr} unavailable: {exc.details()}", code=err.code,
                                  reason=err.reason)
        elif isinstance(err, Cancelled) and self._conn.state.addr == addr:
            # the channel was closed under the call (node declared lost): that is unavailability
            self._conn.report_failure(addr)
            err = Unavailable(f"kvring {what}: connection to the kvring node was lost during the call: {err.message}")
        return err

    def register(self) -> bytes:
        """Register the namespace (or check this client's schema against the registered one) and return the
        schema fingerprint. Calls register by themselves when needed. Blocks for one round trip."""
        stub, _, _, addr = self._stub()
        return self._register(stub, addr).fingerprint

    def _register(self, stub: Any, addr: str, create: bool = True) -> common_pb2.NamespaceRef:
        """Register the namespace (create), or only check it: reads never create a namespace, and a name the
        cluster does not know is then UnknownNamespace."""
        req = cache_pb2.RegisterNamespaceRequest(
            name=self.namespace,
            schema=self.schema.to_proto(),
            replication_factor=self.replication,
            min_replicas=self.min_replicas,
        )
        try:
            metadata = list(self._conn.metadata or [])
            if not create:
                metadata.append((_REGISTER_EXISTING_KEY, "true"))
            resp = stub.RegisterNamespace(req, timeout=self.call_timeout, metadata=metadata or None)
        except grpc.RpcError as exc:
            raise self._call_err(exc, addr, "register namespace") from None
        ref = common_pb2.NamespaceRef(name=resp.namespace.name, fingerprint=resp.namespace.fingerprint)
        with self._lock:
            self._ref = ref
            if resp.limits.max_chunk_bytes:
                self._max_chunk = resp.limits.max_chunk_bytes
        return ref

    def _retry_unregistered(self, stub: Any, addr: str, call: Any, create: bool = True) -> Any:
        """Run call(ref) once more after re-registering when the node says the namespace is unknown. create is
        False for reads: they never register a namespace, and a name the cluster does not know raises
        UnknownNamespace (the caller answers a miss)."""
        with self._lock:
            ref = self._ref
        if ref is None:
            ref = self._register(stub, addr, create)
        try:
            return call(ref)
        except UnknownNamespace:
            pass
        return call(self._register(stub, addr, create))

    def _not_registered(self) -> str:
        """The reason of a read's misses when the cluster does not know the namespace."""
        return f"namespace {self.namespace!r} is not registered: nothing was written to it"

    def _group_size(self) -> int:
        return max(1, int(self.schema.chunks_per_group))

    def _prefix_keys(self, ids: Sequence[bytes]) -> Optional[list[bytes]]:
        """The placement keys of ids that start at a prompt's first chunk, or None when each id is its own key."""
        if self._group_size() == 1:
            return None
        return [bytes(k) for k in group_keys(ids, self._group_size())]

    def _placed_keys(self, ids: Sequence[bytes], groups: Sequence[bytes]) -> Optional[list[bytes]]:
        if len(groups) != len(ids):
            raise InvalidArgument(f"kvring: invalid argument: {len(groups)} group keys for {len(ids)} ids")
        if self._group_size() == 1:
            return None
        return [bytes(g) for g in groups]

    # --- lookup ---------------------------------------------------------------------------------------------

    def lookup(self, ids: Sequence[bytes], pin: Optional[float] = None) -> LookupResult:
        """How many leading ``ids`` the cluster holds now. With ``pin`` (seconds) the held chunks are pinned against
        eviction for that long under a lease (the node caps it). When the namespace groups chunks, ``ids`` must
        start at a prompt's first chunk; :meth:`lookup_placed` takes ids from anywhere. Goes to the primary owner
        of the first id's placement key, or to a member of its spread set when lookups reported that group spread
        (the connected node when that node cannot take it). Blocks for one round trip."""
        ids = [bytes(i) for i in ids]
        return self._lookup(ids, self._prefix_keys(ids), pin)

    def lookup_placed(self, ids: Sequence[bytes], groups: Sequence[bytes], pin: Optional[float] = None) -> LookupResult:
        """:meth:`lookup` for ids anywhere in their prompt: ``groups[i]`` is the group key of ``ids[i]``."""
        ids = [bytes(i) for i in ids]
        return self._lookup(ids, self._placed_keys(ids, groups), pin)

    def _lookup(self, ids: list[bytes], keys: Optional[list[bytes]], pin: Optional[float]) -> LookupResult:
        pin_ms = int(pin * 1000) if pin else 0
        if self._local is not None and ids:
            try:
                res = self._local.lookup(ids, keys, pin_ms)
                self.stats.socket_calls += 1
                if res.lease:
                    self._lease_at(res.lease, _LOCAL, res.lease_ttl)
                return res
            except Broken:
                pass
        main = self._target()
        deadline = time.monotonic() + self.call_timeout
        runs = _runs(keys) if keys is not None else []

        def call(ref: common_pb2.NamespaceRef) -> LookupResult:
            req = cache_pb2.LookupRequest(namespace=ref, ids=ids, pin_ttl_ms=pin_ms, groups=runs)
            r = None
            via = main
            owner = self._lookup_owner(main, ref.name, (keys or ids)[0]) if ids else None
            if owner is not None:
                try:
                    r = owner.stub.Lookup(req, timeout=_left(deadline), metadata=self._conn.metadata or None)
                    via = owner
                except grpc.RpcError as exc:
                    err = self._call_err(exc, owner.addr, "lookup")
                    if not owner_failed(err, deadline):
                        raise err from None
            if r is None:
                try:
                    r = main.stub.Lookup(req, timeout=_left(deadline), metadata=self._conn.metadata or None)
                except grpc.RpcError as exc:
                    raise self._call_err(exc, main.addr, "lookup") from None
            self._observe(via.addr, r.epoch)
            if self._router is not None and runs:
                now = time.monotonic()
                self._router.hints.learn(ref.name, [g.key for g in runs], r.spread_width, now)
                self._router.hints.note_load(via.addr, r.load, now)
            if r.lease_id and via is not main:
                self._lease_at(r.lease_id, via.addr, r.lease_ttl_ms / 1000.0)
            if r.held > len(ids):
                raise ProtocolError(f"kvring lookup: the node reported {r.held} of {len(ids)} ids held")
            return LookupResult(r.held, r.lease_id, r.lease_ttl_ms / 1000.0, r.epoch)

        try:
            return self._retry_unregistered(main.stub, main.addr, call, create=False)
        except UnknownNamespace:
            return LookupResult(0)

    def _lookup_owner(self, main: "_Target", namespace: str, key: bytes) -> Optional["_Target"]:
        """The primary owner of key (or a member of its spread set when that group is known to be spread) when a
        lookup should go there rather than over main."""
        if self._router is None:
            return None
        shares = self._router.split(main.channel, namespace, [key], reads=True)
        if not shares or shares[0].main:
            return None
        try:
            return self._owner_target(shares[0].owner.addr)
        except KvringError:
            return None

    def _lease_at(self, lease: int, addr: str, ttl: float) -> None:
        now = time.monotonic()
        with self._lock:
            for k in [k for k, (_, exp) in self._leases.items() if exp < now]:
                del self._leases[k]
            self._leases[lease] = (addr, now + ttl)

    def release_lease(self, lease: int) -> bool:
        """End a lookup's pins early; returns whether the lease was live. The release goes to the node that granted
        the lease. A lease already expired is left alone (False). Blocks for one round trip."""
        with self._lock:
            addr = self._leases.pop(lease, ("", 0.0))[0]
        if addr == _LOCAL:
            assert self._local is not None
            try:
                return self._local.release_lease(lease)
            except Broken:
                return False  # the connection that held the lease is gone, and with it the lease
        main = self._target()
        t = main
        if addr and self._router is not None:
            try:
                t = self._owner_target(addr)
            except KvringError:
                t = main
        try:
            r = t.stub.ReleaseLease(
                cache_pb2.ReleaseLeaseRequest(lease_id=lease), timeout=self.call_timeout, metadata=self._conn.metadata or None
            )
        except grpc.RpcError as exc:
            raise self._call_err(exc, t.addr, "release lease") from None
        return r.released

    # --- put ------------------------------------------------------------------------------------------------

    def put(self, chunks: Sequence[ChunkLike]) -> list[PutResult]:
        """Store chunks with a two-phase confirmed write; one result per chunk, in order.

        Each chunk is a :class:`Chunk` or a tuple ``(id, data)`` / ``(id, data, group)``; ``data`` is any
        C-contiguous buffer-protocol object (bytes, memoryview, numpy array, ``tensor.numpy()``), sent from where it
        lies and not kept after the call returns. Raises only when the call as a whole failed (not connected, bad
        input, schema mismatch, timeout); then some chunks may be stored, and retrying is safe (a stored chunk then
        answers already_held). Blocks for one or two round trips plus the transfer.
        """
        if not chunks:
            return []
        norm: list[tuple[bytes, memoryview, Optional[bytes]]] = []
        for i, c in enumerate(chunks):
            if isinstance(c, Chunk):
                cid, data, group = c.id, c.data, c.group
            else:
                cid, data, group = (tuple(c) + (None,))[:3]
            try:
                mv = memoryview(data)
            except TypeError:
                raise TypeError(f"chunks[{i}].data: want a buffer-protocol object, got {type(data).__name__}") from None
            if not mv.c_contiguous:
                raise ValueError(f"chunks[{i}].data: the buffer is not C-contiguous (use numpy.ascontiguousarray)")
            norm.append((bytes(cid), mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv, group))
        keys: Optional[list[bytes]] = None
        if self._group_size() > 1:
            keys = []
            for i, (_, _, g) in enumerate(norm):
                if not g:
                    raise InvalidArgument(
                        f"kvring: invalid argument: chunk {i} has no group key: namespace {self.namespace!r} places "
                        f"chunks in groups of {self._group_size()} (see kvring.group_keys)"
                    )
                keys.append(bytes(g))
        if self._local is not None:
            try:
                out = self._local.put(norm, keys, self.stats)
                self.stats.socket_calls += 1
                self.stats.degraded_puts += sum(1 for r in out if r.degraded and r.held)
                return out
            except (Broken, ResourceExhausted):
                pass  # no socket, or no room for the blobs on this node: the cluster decides over gRPC
        main = self._target()
        deadline = time.monotonic() + self.call_timeout
        refs = _Refs(norm)

        def call(ref: common_pb2.NamespaceRef) -> list[PutResult]:
            out = self._put_routed(main, ref, norm, refs, keys, deadline)
            self._resend_busy(main, ref, norm, refs, keys, deadline, out)
            return out

        return self._retry_unregistered(main.stub, main.addr, call)

    def _resend_busy(self, main: "_Target", ref: common_pb2.NamespaceRef,
                     norm: list[tuple[bytes, memoryview, Optional[bytes]]], refs: "_Refs",
                     keys: Optional[list[bytes]], deadline: float, out: list[PutResult]) -> None:
        """Put once more the chunks whose result is failed because another write of the chunk was under way on an
        owner and ended without storing it or did not end in time (code ABORTED: typically this client's own
        earlier attempt, given up on an owner that answered late, whose abort reached the owners after this put
        asked), as the Go SDK does (client/put.go resendBusy). Their new results replace the old ones in out; a
        resend that fails as a whole leaves them as they were."""
        idx = [i for i, r in enumerate(out) if r.status == PutStatus.FAILED and r.code == grpc.StatusCode.ABORTED]
        if not idx or time.monotonic() >= deadline:
            return
        sub_keys = [keys[i] for i in idx] if keys is not None else None
        try:
            again = self._put_routed(main, ref, [norm[i] for i in idx], refs.sub(idx), sub_keys, deadline)
        except KvringError as err:
            log.debug("kvring put: resending %d chunks another write held up failed: %s", len(idx), err)
            return
        if len(again) != len(idx):
            return
        self.stats.busy_resends += len(idx)
        for k, i in enumerate(idx):
            out[i] = again[k]

    def _put_routed(self, main: "_Target", ref: common_pb2.NamespaceRef,
                    norm: list[tuple[bytes, memoryview, Optional[bytes]]], refs: "_Refs",
                    keys: Optional[list[bytes]], deadline: float) -> list[PutResult]:
        """Put each chunk through its primary owner (module route), or all through main without a view."""
        n = len(norm)
        shares = None
        if self._router is not None:
            shares = self._router.split(main.channel, ref.name, keys if keys is not None else [c[0] for c in norm])
        if shares is None:
            return self._put(main, ref, norm, refs.of(range(n)), _runs(keys) if keys else [], deadline, None)
        out: list[Optional[PutResult]] = [None] * n

        def call(t: _Target, s: Share, answer: Optional[float]) -> None:
            sub_keys = [keys[i] for i in s.idx] if keys is not None else None
            res = self._put(t, ref, [norm[i] for i in s.idx], refs.of(s.idx),
                            _runs(sub_keys) if sub_keys else [], deadline, answer)
            for k, i in enumerate(s.idx):
                out[i] = res[k]

        try:
            self._run_shares(main, shares, deadline, call)
        except InvalidArgument:
            # A node named the bad field by its position in a share: let one node name it by the caller's.
            # Resending is safe (chunks other shares stored answer already_held), and bad input is rare.
            return self._put(main, ref, norm, refs.of(range(n)), _runs(keys) if keys else [], deadline, None)
        return out  # type: ignore[return-value]

    def _eager(self, norm: list[tuple[bytes, memoryview, Optional[bytes]]]) -> bool:
        if self.eager_put_bytes < 0:
            return False
        total = 0
        for _, mv, _ in norm:
            total += len(mv)
            if total > self.eager_put_bytes:
                return False
        return True

    def _put(
        self,
        t: "_Target",
        ref: common_pb2.NamespaceRef,
        norm: list[tuple[bytes, memoryview, Optional[bytes]]],
        refs: list[common_pb2.ChunkRef],
        runs: list[common_pb2.GroupRun],
        deadline: float,
        answer: Optional[float],
    ) -> list[PutResult]:
        """One Put call on t's channel. answer: seconds the first reply may take (owners), or None."""
        n = len(norm)
        addr = t.addr
        eager = self._eager(norm)
        begin = cache_pb2.PutRequest(begin=cache_pb2.PutBegin(namespace=ref, chunks=refs, groups=runs, eager=eager))
        out = [PutResult(id=norm[i][0], status="") for i in range(n)]
        seen = [False] * n

        def frames(need: Sequence[int]) -> Iterator[bytes]:
            for idx in need:
                mv = norm[idx][1]
                size = len(mv)
                off = 0
                while off < size:
                    end = min(off + _wire.MAX_FRAME_BYTES, size)
                    yield _wire.put_data_frame(idx, off, mv[off:end])
                    off = end

        def take(r: cache_pb2.PutChunkResult) -> None:
            i = r.index
            if i >= n:
                return
            seen[i] = True
            res = out[i]
            res.status = _STATUS.get(r.status, "")
            res.degraded = r.degraded
            res.reason = r.reason
            res.code = _code(r.code)
            res.holders = [Node(h.node_id, h.grpc_addr) for h in r.holders]

        def asked(need: cache_pb2.PutNeed) -> list[int]:
            for r in need.settled:
                take(r)
            for idx in need.need:
                if idx >= n:
                    raise ProtocolError(f"kvring put: the node asked for chunk {idx} of {n}")
            return list(need.need)

        md = self._conn.metadata or None
        st = _stcall.start(t.channel, "/kvring.v1.Cache/Put", begin.SerializeToString(), _left(deadline), md,
                           cache_pb2.PutResponse.FromString)
        if st is not None:
            result = self._put_driven(st, addr, eager, n, frames, asked, answer)
        else:
            result = self._put_threaded(t, addr, begin, eager, frames, asked, md, deadline, answer)
        for r in result.results:
            take(r)
        for i, ok in enumerate(seen):
            res = out[i]
            if not ok or not res.status:
                res.status, res.holders, res.reason = PutStatus.FAILED, [], "the node sent no result for this chunk"
            if res.degraded and res.held:
                self.stats.degraded_puts += 1
        return out

    def _put_driven(self, st: "_stcall.StreamCall", addr: str, eager: bool, n: int,
                    frames: Callable[[Sequence[int]], Iterator[bytes]],
                    asked: Callable[[cache_pb2.PutNeed], list[int]], answer: Optional[float]) -> cache_pb2.PutResult:
        """A Put stream (begin already sent) driven on this thread (module _stcall): the frames, the end, the
        answers. Returns the result message."""

        def send(need: Sequence[int]) -> None:
            for f in frames(need):
                if not st.send(f):
                    return  # the call ended: its status comes with the answers
            if st.send(_PUT_END):
                st.close_send()

        timer = self._answer_timer(st, answer, addr)
        try:
            if eager:
                send(range(n))
            result = None
            for m in st:  # read to the end: the status follows the result at once, and frees the call
                if timer is not None:
                    timer.answered()
                self._observe(addr, m.epoch)
                which = m.WhichOneof("msg")
                if which == "need":
                    need = asked(m.need)
                    if not eager:
                        send(need)
                elif which == "result" and result is None:
                    result = m.result
            if result is None:
                raise ProtocolError("kvring put: the node ended the call without a result")
            return result
        except grpc.RpcError as exc:
            err = self._call_err(exc, addr, "put")
            raise (timer.explain(err) if timer is not None else err) from None
        finally:
            if timer is not None:
                timer.answered()
            st.release()

    def _put_threaded(self, t: "_Target", addr: str, begin: cache_pb2.PutRequest, eager: bool,
                      frames: Callable[[Sequence[int]], Iterator[bytes]],
                      asked: Callable[[cache_pb2.PutNeed], list[int]], md: Any, deadline: float,
                      answer: Optional[float]) -> cache_pb2.PutResult:
        """A Put stream through grpcio's stream_stream, whose own thread consumes the requests. Returns the result
        message."""
        n = len(begin.begin.chunks)
        need_box: list[Optional[Sequence[int]]] = [None]
        need_ready = threading.Event()
        done = threading.Event()

        def requests() -> Iterator[Union[bytes, cache_pb2.PutRequest]]:
            yield begin
            if eager:
                need: Sequence[int] = range(n)
            else:
                need_ready.wait()
                if done.is_set() or need_box[0] is None:
                    return
                need = need_box[0]
            for f in frames(need):
                if done.is_set():
                    return
                yield f
            yield _PUT_END

        responses = t.put(requests(), timeout=_left(deadline), metadata=md)
        timer = self._answer_timer(responses, answer, addr)
        try:
            result = None
            for m in responses:
                if timer is not None:
                    timer.answered()
                self._observe(addr, m.epoch)
                which = m.WhichOneof("msg")
                if which == "need":
                    need = asked(m.need)
                    if not eager:
                        need_box[0] = need
                        need_ready.set()
                elif which == "result":
                    result = m.result
                    break
            if result is None:
                raise ProtocolError("kvring put: the node ended the call without a result")
            return result
        except grpc.RpcError as exc:
            err = self._call_err(exc, addr, "put")
            raise (timer.explain(err) if timer is not None else err) from None
        finally:
            if timer is not None:
                timer.answered()
            done.set()
            need_ready.set()
            responses.cancel()

    # --- get ------------------------------------------------------------------------------------------------

    def read(self, ids: Sequence[bytes]) -> list[GetResult]:
        """Read chunks with their holder and miss reasons. A chunk that is not held, or whose bytes fail their
        checksum, comes back with ``found`` False and a reason, never as data. ``ids`` start at a prompt's first
        chunk when the namespace groups chunks (:meth:`read_placed` otherwise). Blocks until every chunk is in."""
        ids = [bytes(i) for i in ids]
        return self._read(ids, self._prefix_keys(ids), None)

    def read_placed(self, ids: Sequence[bytes], groups: Sequence[bytes]) -> list[GetResult]:
        """:meth:`read` for ids anywhere in their prompt: ``groups[i]`` is the group key of ``ids[i]``."""
        ids = [bytes(i) for i in ids]
        return self._read(ids, self._placed_keys(ids, groups), None)

    def get(self, ids: Sequence[bytes]) -> list[Optional[bytes]]:
        """The bytes of each chunk (checksum verified), or None for a miss. The bytes are new objects the caller
        owns. See :meth:`read` for reasons and :meth:`get_into` to fill buffers the caller owns."""
        return [r.data if r.found else None for r in self.read(ids)]

    def get_placed(self, ids: Sequence[bytes], groups: Sequence[bytes]) -> list[Optional[bytes]]:
        """:meth:`get` for ids anywhere in their prompt: ``groups[i]`` is the group key of ``ids[i]``."""
        return [r.data if r.found else None for r in self.read_placed(ids, groups)]

    def get_into(self, ids: Sequence[bytes], buffers: Sequence[Buffer], groups: Optional[Sequence[bytes]] = None) -> list[Optional[int]]:
        """Read chunks straight into buffers the caller owns: ``buffers[i]`` (any writable C-contiguous
        buffer-protocol object, e.g. a numpy array or ``tensor.numpy()``) receives chunk ``ids[i]``.

        Returns per chunk the number of bytes written, or None for a miss (not held, failed its checksum, or larger
        than its buffer). A buffer of a miss may hold partial or damaged bytes: only the returned sizes count. The
        client keeps no reference to the buffers after the call. ``groups`` as in :meth:`read_placed`.
        """
        if len(buffers) != len(ids):
            raise ValueError(f"{len(buffers)} buffers for {len(ids)} ids")
        views = []
        for i, b in enumerate(buffers):
            mv = memoryview(b)
            if mv.readonly:
                raise ValueError(f"buffers[{i}] is read-only")
            if not mv.c_contiguous:
                raise ValueError(f"buffers[{i}] is not C-contiguous")
            views.append(mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv)
        ids = [bytes(i) for i in ids]
        keys = self._placed_keys(ids, groups) if groups is not None else self._prefix_keys(ids)
        res = self._read(ids, keys, views)
        return [r.size if r.found else None for r in res]

    def _read(self, ids: list[bytes], keys: Optional[list[bytes]], views: Optional[list[memoryview]]) -> list[GetResult]:
        if not ids:
            return []
        if self._local is not None:
            try:
                out = self._local.read(ids, keys, views)
                self.stats.socket_calls += 1
                return out
            except Broken:
                pass
        main = self._target()
        deadline = time.monotonic() + self.call_timeout
        try:
            return self._retry_unregistered(main.stub, main.addr,
                                            lambda ref: self._get_routed(main, ref, ids, keys, views, deadline),
                                            create=False)
        except UnknownNamespace:
            return [GetResult(i, reason=self._not_registered()) for i in ids]

    def _get_routed(self, main: "_Target", ref: common_pb2.NamespaceRef, ids: list[bytes], keys: Optional[list[bytes]],
                    views: Optional[list[memoryview]], deadline: float) -> list[GetResult]:
        """Read each chunk from its primary owner (module route; a chunk of a group known to be spread from a member
        of its spread set), or all through main without a view; the chunks an owner misses are asked of main
        again."""
        shares = self._router.split(main.channel, ref.name, keys if keys is not None else ids, reads=True) \
            if self._router else None
        if shares is None:
            return self._get(main, ref, ids, keys, views, deadline, None)
        out: list[Optional[GetResult]] = [None] * len(ids)

        def pick(xs: Optional[list], idx: list[int]) -> Optional[list]:
            return [xs[i] for i in idx] if xs is not None else None

        def call(t: _Target, s: Share, answer: Optional[float]) -> None:
            res = self._get(t, ref, pick(ids, s.idx), pick(keys, s.idx), pick(views, s.idx), deadline, answer)
            if t is not main:
                miss = [k for k, r in enumerate(res) if not r.found]
                if miss:
                    at = [s.idx[k] for k in miss]
                    try:
                        again = self._get(main, ref, pick(ids, at), pick(keys, at), pick(views, at), deadline, None)
                    except KvringError:
                        again = []  # the owner's misses stay: they are true answers
                    for j, r in enumerate(again):
                        if r.found:
                            res[miss[j]] = r
            for k, i in enumerate(s.idx):
                out[i] = res[k]

        self._run_shares(main, shares, deadline, call)
        return out  # type: ignore[return-value]

    def _get(
        self,
        t: "_Target",
        ref: common_pb2.NamespaceRef,
        ids: list[bytes],
        keys: Optional[list[bytes]],
        views: Optional[list[memoryview]],
        deadline: float,
        answer: Optional[float],
    ) -> list[GetResult]:
        """One Get call on t's channel. answer: seconds the first reply may take (owners), or None."""
        n = len(ids)
        addr = t.addr
        runs = _runs(keys) if keys else []
        out = [GetResult(id=ids[i]) for i in range(n)]
        with self._lock:
            bound = self._max_chunk
        stream = t.get(
            cache_pb2.GetRequest(namespace=ref, ids=ids, groups=runs), timeout=_left(deadline),
            metadata=self._conn.metadata or None,
        )
        timer = self._answer_timer(stream, answer, addr)
        first = True
        cur: Optional[GetResult] = None
        cur_i = 0
        want = got = 0
        crc = 0
        frames: list[memoryview] = []
        dst: Optional[memoryview] = None
        try:
            for m in stream:
                if first:
                    first = False
                    if timer is not None:
                        timer.answered()
                    self._observe(addr, m.epoch)
                if isinstance(m, _wire.DataFrame):
                    if cur is None or m.index != cur_i or m.offset != got or got + len(m.data) > want or not len(m.data):
                        raise ProtocolError("kvring get: malformed frame from the node")
                    data = m.data
                    crc = crc32c(data, crc)
                    if dst is not None:
                        dst[got : got + len(data)] = data
                    elif views is None:
                        frames.append(data)
                    got += len(data)
                    if got == want:
                        self._finish(cur, crc, frames, dst, views)
                        cur, frames = None, []
                    continue
                h = m.header
                if m.WhichOneof("msg") != "header":
                    raise ProtocolError("kvring get: the node sent a message without header or data")
                if cur is not None:
                    raise ProtocolError(f"kvring get: the node started chunk {h.index} before finishing the previous one")
                i = h.index
                if i >= n:
                    raise ProtocolError(f"kvring get: the node answered for chunk {i} of {n}")
                r = out[i]
                if h.HasField("holder"):
                    r.holder = Node(h.holder.node_id, h.holder.grpc_addr)
                if h.status != common_pb2.READ_STATUS_FOUND:
                    r.reason = h.reason or "not held"
                    continue
                want, got, crc = h.chunk.size, 0, h.chunk.crc32c
                if want > bound:
                    raise ProtocolError(
                        f"kvring get: the node declared chunk {i} of {want} bytes, above the cluster's largest chunk {bound}"
                    )
                r.size = want
                r._crc = h.chunk.crc32c  # type: ignore[attr-defined]
                crc = 0
                cur, cur_i, dst = r, i, None
                if views is not None:
                    if want > len(views[i]):
                        r.reason = f"chunk of {want} bytes does not fit its buffer of {len(views[i])} bytes"
                        raise _TooSmall(i)
                    dst = views[i]
                if want == 0:
                    self._finish(cur, crc, frames, dst, views)
                    cur = None
        except _TooSmall:
            _stcall.release(stream)
            # The rest of the stream is lost with the cancel: read the others again without the small buffer.
            return self._refill_after_small(ids, keys, views, out)
        except grpc.RpcError as exc:
            err = self._call_err(exc, addr, "get")
            raise (timer.explain(err) if timer is not None else err) from None
        finally:
            if timer is not None:
                timer.answered()
            _stcall.release(stream)
        if cur is not None:
            cur.reason = "the stream ended inside the chunk"
        return out

    def _finish(self, r: GetResult, crc: int, frames: list[memoryview], dst: Optional[memoryview], views: Any) -> None:
        if crc != r._crc:  # type: ignore[attr-defined]
            self.stats.checksum_mismatches += 1
            log.warning("kvring get: chunk %s failed its checksum (declared %#010x, computed %#010x): reported a miss",
                        r.id.hex(), r._crc, crc)  # type: ignore[attr-defined]
            r.found, r.data, r.reason = False, None, "bytes failed their checksum"
            return
        r.found, r.reason = True, ""
        if views is None:
            r.data = b"".join(frames) if len(frames) != 1 else bytes(frames[0])

    def _refill_after_small(self, ids: list[bytes], keys: Optional[list[bytes]], views: Any, out: list[GetResult]) -> list[GetResult]:
        # Rare path: a buffer too small. Read every chunk not yet complete again, one at a time, skipping the
        # ones that do not fit (their reason stays).
        for i, r in enumerate(out):
            if r.found or r.reason.startswith("chunk of "):
                continue
            one = self._read([ids[i]], [keys[i]] if keys else None, [views[i]])[0]
            one.id = ids[i]
            out[i] = one
        return out


class _TooSmall(Exception):
    pass


class _Refs:
    """The ChunkRefs of a put's chunks, each checksum computed once, when a stream first needs it (the CRC-32C
    releases the GIL, so streams running side by side compute theirs in parallel)."""

    __slots__ = ("_norm", "_refs")

    def __init__(self, norm: Sequence[tuple[bytes, memoryview, Any]]) -> None:
        self._norm = norm
        self._refs: list[Optional[common_pb2.ChunkRef]] = [None] * len(norm)

    def sub(self, idx: Sequence[int]) -> "_Refs":
        """The refs of the chunks at idx, in that order, sharing the checksums computed so far."""
        r = _Refs([self._norm[i] for i in idx])
        r._refs = [self._refs[i] for i in idx]
        return r

    def of(self, idx: Iterable[int]) -> list[common_pb2.ChunkRef]:
        out = []
        for i in idx:
            r = self._refs[i]
            if r is None:
                cid, mv, _ = self._norm[i]
                r = self._refs[i] = common_pb2.ChunkRef(id=cid, size=len(mv), crc32c=crc32c(mv))
            out.append(r)
        return out


class _Target(NamedTuple):
    """A node's channel and the callables the client calls it with."""

    channel: Any
    addr: str
    stub: Any
    put: Any  # Cache.Put with pre-encoded data frames
    get: Any  # Cache.Get with data frames decoded in place

    @staticmethod
    def make(ch: Any, addr: str) -> "_Target":
        put = ch.stream_stream(
            "/kvring.v1.Cache/Put",
            request_serializer=_wire.serialize_put,
            response_deserializer=cache_pb2.PutResponse.FromString,
        )
        get = ch.unary_stream(
            "/kvring.v1.Cache/Get",
            request_serializer=cache_pb2.GetRequest.SerializeToString,
            response_deserializer=_wire.deserialize_get,
        )
        return _Target(ch, addr, cache_pb2_grpc.CacheStub(ch), put, get)


_PUT_END = cache_pb2.PutRequest(end=cache_pb2.PutEnd()).SerializeToString()


def _left(deadline: float) -> float:
    """Seconds left until deadline (time.monotonic()), at least 1 ms so that gRPC reports the deadline itself."""
    return max(deadline - time.monotonic(), 0.001)


def _runs(keys: Sequence[bytes]) -> list[common_pb2.GroupRun]:
    runs: list[common_pb2.GroupRun] = []
    last = None
    for k in keys:
        k = bytes(k)
        if runs and k == last:
            runs[-1].count += 1
            continue
        runs.append(common_pb2.GroupRun(key=k, count=1))
        last = k
    return runs


def _code(v: int) -> Optional[grpc.StatusCode]:
    if not v:
        return None
    from .errors import CODE_BY_NUMBER  # noqa: PLC0415

    return CODE_BY_NUMBER.get(v)
