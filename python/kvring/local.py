"""The client's way through a node's local socket (:mod:`kvring.localsock`), used instead of gRPC when the socket
exists: put copies each chunk once, into a blob of the node's shared memory mapped in this process, and publishes
the blobs as cluster chunks; get reads chunks as blobs the node fills (checksum verified by the node) and copies
each once, out of the mapping into the caller's buffer or a new ``bytes``. The node coordinates both with the
cluster exactly as a gRPC put or get, so the results are the same.

:class:`LocalPath` dials the socket when it appears, and again after the connection breaks (at most once a second
while it fails); a call whose connection breaks raises :class:`~kvring.localsock.Broken` and the client sends it
over gRPC instead. Safe for concurrent use (calls are serialised on the one connection).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Optional, Sequence

import grpc

from .errors import CODE_BY_NUMBER, KvringError, ProtocolError, UnknownNamespace
from .localsock import Broken, LocalSocket, NoBinary, PublishReply
from .types import GetResult, LookupResult, Node, PutResult, PutStatus, Schema, Stats

__all__ = ["LocalPath"]

log = logging.getLogger("kvring")

_REDIAL = 1.0  # seconds between dial attempts while the socket is missing or refuses
_STATUSES = {PutStatus.STORED, PutStatus.ALREADY_HELD, PutStatus.REJECTED, PutStatus.FAILED}


def _schema_json(s: Schema) -> dict:
    return {"model": s.model, "dtype": s.dtype, "tokens_per_chunk": s.tokens_per_chunk, "layout": s.layout,
            "hash_scheme": s.hash_scheme, "tp_rank": s.tp_rank, "tp_size": s.tp_size,
            "chunks_per_group": s.chunks_per_group, "extra": dict(s.extra)}


class LocalPath:
    """The local socket at ``path`` for one client's namespace."""

    def __init__(self, path: str, namespace: str, schema: Schema, replication: int, min_replicas: int,
                 timeout: float, json_only: bool = False) -> None:
        self.path = path
        self.json_only = json_only  # speak JSON only (the binary framing off), as a node from before it is spoken to
        self._ns = namespace
        self._schema = _schema_json(schema)
        self._replication, self._min_replicas = replication, min_replicas
        self._timeout = timeout
        self._lock = threading.Lock()
        self._ls: Optional[LocalSocket] = None
        self._next_try = 0.0
        self._last_err = ""
        self._closed = False

    # --- connection -----------------------------------------------------------------------------------------

    def socket(self) -> Optional[LocalSocket]:
        """The connection, dialling it when due; None while the socket is missing or refuses. Blocks only while
        dialling (a missing socket costs one stat every second)."""
        ls = self._ls
        if ls is not None and not ls.closed:
            return ls
        with self._lock:
            ls = self._ls
            if ls is not None and not ls.closed:
                return ls
            now = time.monotonic()
            if self._closed or now < self._next_try:
                return None
            self._next_try = now + _REDIAL
            if not os.path.exists(self.path):
                return None
            try:
                ls = LocalSocket(self.path, self._timeout, json_only=self.json_only)
            except (OSError, Broken, KvringError) as exc:
                msg = str(exc)
                if msg != self._last_err:
                    log.warning("cannot use the kvring local socket, using gRPC path=%s err=%s", self.path, msg)
                    self._last_err = msg
                return None
            self._last_err = ""
            log.info("using the kvring local socket path=%s node=%s", self.path, ls.rpc_endpoint)
            self._ls = ls
            return ls

    def broken(self, ls: LocalSocket, exc: BaseException) -> None:
        """Forget a connection that failed; the next call dials again at once."""
        ls.close()
        with self._lock:
            if self._ls is ls:
                self._ls = None
                self._next_try = 0.0
        log.warning("kvring local socket connection failed, this call goes over gRPC path=%s err=%s", self.path, exc)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            ls, self._ls = self._ls, None
        if ls is not None:
            ls.close()

    def _run(self, call: Callable[[LocalSocket, dict], Any]) -> Any:
        """call(ls, ns) on the connection with the namespace registered on it, once more after re-registering when
        the node does not know the namespace. Raises Broken (the caller goes over gRPC) when there is no socket."""
        ls = self.socket()
        if ls is None:
            raise Broken("no local socket")
        try:
            ns = ls.namespace or ls.register_namespace(self._ns, self._schema, self._replication, self._min_replicas)
            try:
                return call(ls, {"namespace": ns[0], "fingerprint": ns[1]})
            except UnknownNamespace:
                ns = ls.register_namespace(self._ns, self._schema, self._replication, self._min_replicas)
                return call(ls, {"namespace": ns[0], "fingerprint": ns[1]})
        except Broken as exc:
            self.broken(ls, exc)
            raise

    # --- calls ----------------------------------------------------------------------------------------------

    def put(self, norm: Sequence[tuple[bytes, memoryview, Any]], keys: Optional[Sequence[bytes]],
            stats: Optional[Stats] = None) -> list[PutResult]:
        """Copy each chunk into a blob, then publish the blobs with seal and consume (the node seals them, publishes
        them and deletes them, in one request) and ask for blobs of the same sizes for the next put: a stream of puts
        of one shape costs one round trip each (the first, or one of another shape, two: the blobs are created
        first). A chunk failed with code ABORTED (another write of it held it up) is published once more, as the
        gRPC put resends it (counted in stats.busy_resends). Empty chunks cannot be blobs: the caller sends such a put over gRPC (Broken)."""
        if any(len(mv) == 0 for _, mv, _ in norm):
            raise Broken("an empty chunk cannot be published through the local socket")

        def call(ls: LocalSocket, ns: dict) -> list[PutResult]:
            ref = (ns["namespace"], ns["fingerprint"])
            out = self._publish(ls, ref, norm, keys)
            busy = [i for i, r in enumerate(out) if r.status == PutStatus.FAILED and r.code == grpc.StatusCode.ABORTED]
            if busy:
                sub = [norm[i] for i in busy]
                try:
                    again = self._publish(ls, ref, sub, [keys[i] for i in busy] if keys is not None else None)
                except KvringError as err:
                    log.debug("kvring local socket put: resending %d chunks another write held up failed: %s",
                              len(busy), err)
                    return out
                if stats is not None:
                    stats.busy_resends += len(busy)
                for k, i in enumerate(busy):
                    out[i] = again[k]
            return out

        return self._run(call)

    def _publish(self, ls: LocalSocket, ref: tuple[str, str], norm: Sequence[tuple[bytes, memoryview, Any]],
                 keys: Optional[Sequence[bytes]]) -> list[PutResult]:
        sizes = [len(mv) for _, mv, _ in norm]
        while True:
            try:
                return self._publish_once(ls, ref, norm, keys, sizes)
            except NoBinary:
                continue  # the connection speaks JSON now: the same again

    def _publish_once(self, ls: LocalSocket, ref: tuple[str, str], norm: Sequence[tuple[bytes, memoryview, Any]],
                      keys: Optional[Sequence[bytes]], sizes: list[int]) -> list[PutResult]:
        spare = ls.swap_spare(None)
        if spare is not None and [p.data_size for p in spare] == sizes:
            ps = spare
        else:
            drop = [{"type": "drop_buffer_request", "id": p.object_id} for p in spare or []]
            ps = ls.create_blobs(sizes, pre=drop)
        ls.write(ps, [mv for _, mv, _ in norm])
        blobs = [p.object_id for p in ps]
        try:
            rep = ls.publish(ref, [cid for cid, _, _ in norm], blobs, keys, seal=True, consume=True,
                             create_sizes=sizes)
        except NoBinary:
            self._keep_spare(ls, ps)  # the blobs are there still, unsealed: the JSON publish uses them
            raise
        except KvringError:
            # The call failed as a whole; blobs it did not reach are still this connection's: drop them (the
            # others are gone: consumed, error 12, ignored).
            ls.call_many([{"type": "drop_buffer_request", "id": b} for b in blobs], check=False)
            raise
        if rep.created is not None and len(rep.created) == len(sizes):
            self._keep_spare(ls, rep.created)
        elif rep.create_error is not None:
            log.debug("kvring local socket: no blobs for the next put: %s", rep.create_error)
        return _put_results(norm, rep)

    @staticmethod
    def _keep_spare(ls: LocalSocket, ps: list) -> None:
        """Keep ps for the next put; blobs kept before (by a put on another thread meanwhile) are dropped, so that
        at most one put's worth of unsealed blobs waits per connection."""
        old = ls.swap_spare(ps)
        if old:
            ls.call_many([{"type": "drop_buffer_request", "id": p.object_id} for p in old], check=False)

    def lookup(self, ids: Sequence[bytes], keys: Optional[Sequence[bytes]], pin_ms: int) -> LookupResult:
        def call(ls: LocalSocket, ns: dict) -> LookupResult:
            ref = (ns["namespace"], ns["fingerprint"])
            try:
                epoch, held, lease, ttl = ls.lookup(ref, ids, keys, pin_ms)
            except NoBinary:
                epoch, held, lease, ttl = ls.lookup(ref, ids, keys, pin_ms)
            if held > len(ids):
                raise ProtocolError(f"kvring lookup: the node reported {held} of {len(ids)} ids held")
            return LookupResult(held, lease, ttl / 1000.0, epoch)

        return self._run(call)

    def release_lease(self, lease: int) -> bool:
        def call(ls: LocalSocket, ns: dict) -> bool:
            return bool(ls.call({"type": "kvring_release_lease_request", "lease_id": lease}).get("released"))

        return self._run(call)

    def read(self, ids: Sequence[bytes], keys: Optional[Sequence[bytes]],
             views: Optional[Sequence[memoryview]]) -> list[GetResult]:
        """Read chunks as blobs and copy each out of the mapping once (into views[i], or a new bytes), then
        release the blobs."""

        def call(ls: LocalSocket, ns: dict) -> list[GetResult]:
            req = {"type": "kvring_get_request", **ns, "ids": [i.hex() for i in ids]}
            if keys is not None:
                req["groups"] = [k.hex() for k in keys]
            r, ps = ls.blob_call(req)
            by_id = {p.object_id: p for p in ps}
            results = r.get("results") or []
            out = [GetResult(id=bytes(i)) for i in ids]
            held: list[int] = list(by_id)
            try:
                for i, res in enumerate(results[: len(ids)]):
                    g = out[i]
                    if not res.get("found"):
                        g.reason = str(res.get("reason") or "not held")
                        continue
                    p = by_id.get(int(res.get("blob_id", 0)))
                    if p is None:
                        raise Broken(f"kvring_get_reply: chunk {i} found but its blob was not described")
                    src = ls.view(p)
                    g.size = p.data_size
                    if views is not None:
                        dst = views[i]
                        if p.data_size > len(dst):
                            g.reason = f"chunk of {p.data_size} bytes does not fit its buffer of {len(dst)} bytes"
                            continue
                        dst[: p.data_size] = src
                    else:
                        g.data = bytes(src)
                    g.found, g.reason = True, ""
            finally:
                if held:
                    ls.call_many([{"type": "release_request", "object_id": b} for b in held], check=False)
            return out

        return self._run(call)


def _put_results(norm: Sequence[tuple[bytes, memoryview, Any]], pub: PublishReply) -> list[PutResult]:
    out = [PutResult(id=cid, status=PutStatus.FAILED, reason="the node sent no result for this chunk")
           for cid, _, _ in norm]
    for i, res in enumerate(pub.results[: len(norm)]):
        status = res.status if res.status in _STATUSES else PutStatus.FAILED
        out[i] = PutResult(
            id=norm[i][0],
            status=status,
            holders=[Node(nid, addr) for nid, addr in res.holders],
            degraded=res.degraded,
            reason=res.reason,
            code=CODE_BY_NUMBER.get(res.code) if res.code else None,
        )
    return out
