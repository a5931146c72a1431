"""A connection to a kvring node's local Unix socket (docs/vineyard.md): Vineyard's IPC protocol (blobs in the node's
shared memory, written and read through this process's mappings of its segment files) and kvring's extensions
(publish sealed blobs as cluster chunks, look chunks up, get chunks as blobs).

Messages both ways are an 8-byte little-endian length and that much JSON. After a reply that hands out blobs, the
node sends the descriptor of each segment this connection has not seen yet, one ``sendmsg`` each (one data byte,
one ``SCM_RIGHTS`` descriptor); it is mapped with ``mmap`` once and kept until :meth:`LocalSocket.close`.

:class:`LocalSocket` is safe for concurrent use: calls are serialised on the connection (one reply per request, in
turn) and each blocks until its reply arrives or ``timeout`` passes. Requests that hand out no blob can be sent
back to back and their replies read afterwards (:meth:`LocalSocket.call_many`).
"""

from __future__ import annotations

import array
import json
import mmap
import os
import socket
import struct
import threading
from typing import Any, NamedTuple, Optional, Sequence

from .errors import (
    FailedPrecondition,
    InvalidArgument,
    KvringError,
    NotFound,
    ResourceExhausted,
    SchemaMismatch,
    UnknownNamespace,
)

__all__ = ["LocalSocket", "LocalError", "Broken", "Payload", "error_for", "raise_for"]

_HDR = struct.Struct("<Q")
_MAX_REPLY = 256 << 20

# Vineyard's codes the node answers with (docs/vineyard.md).
CODE_INVALID = 1
CODE_NOT_IMPLEMENTED = 6
CODE_USER_INPUT = 8
CODE_OBJECT_NOT_EXISTS = 12
CODE_NOT_ENOUGH_MEMORY = 41
CODE_UNKNOWN = 255


class LocalError(KvringError):
    """An error reply of the node on its local socket: ``vineyard_code`` and the node's message."""

    def __init__(self, message: str, vineyard_code: int, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.vineyard_code = vineyard_code


class Broken(Exception):
    """The socket connection failed (closed, timed out, a malformed reply): it is closed and must be dialled again.
    Whatever the call did on the node is unknown."""


def error_for(code: int, message: str) -> KvringError:
    """The client's exception for an error reply, chosen like the gRPC table (errors.py) from the node's message."""
    msg = f"kvring local socket: {message} (code {code})"
    low = message.lower()
    if "unknown namespace" in low:
        return UnknownNamespace(msg)
    if "schema mismatch" in low:
        return SchemaMismatch(msg)
    if code in (CODE_INVALID, CODE_USER_INPUT) or "invalid argument" in low:
        return InvalidArgument(msg)
    if code == CODE_NOT_ENOUGH_MEMORY:
        return ResourceExhausted(msg)
    if code == CODE_OBJECT_NOT_EXISTS:
        return NotFound(msg)
    if code == CODE_NOT_IMPLEMENTED:
        return FailedPrecondition(msg)
    return LocalError(msg, code)


def raise_for(r: dict) -> dict:
    """r itself, or raise the exception of an error reply."""
    code = r.get("code")
    if code and "type" not in r:
        raise error_for(int(code), str(r.get("message", "")))
    return r


class Payload(NamedTuple):
    """Where a blob's bytes are: its segment (``store_fd``) and the range of the segment file."""

    object_id: int
    store_fd: int
    data_offset: int
    data_size: int
    map_size: int

    @staticmethod
    def of(p: dict) -> "Payload":
        return Payload(int(p["object_id"]), int(p["store_fd"]), int(p["data_offset"]), int(p["data_size"]),
                       int(p["map_size"]))


class LocalSocket:
    """One registered connection to the socket at ``path``. Construction connects and registers (blocks up to
    ``timeout``); raises OSError or :class:`Broken` when the node is not there."""

    def __init__(self, path: str, timeout: float = 30.0) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._maps: dict[int, mmap.mmap] = {}
        self._views: dict[int, memoryview] = {}
        self._closed = False
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(path)
        except BaseException:
            s.close()
            raise
        self._s = s
        self._hdr = bytearray(8)
        try:
            r = self.call({"type": "register_request", "version": "0.24.4", "store_type": "Normal"})
        except BaseException:
            self.close()
            raise
        if not r.get("store_match"):
            self.close()
            raise Broken(f"cannot register on {path}: the node's store does not match")
        self.instance_id = int(r.get("instance_id", 0))
        self.rpc_endpoint = str(r.get("rpc_endpoint", ""))
        self.namespace: Optional[tuple[str, str]] = None  # (name, fingerprint hex) registered on this connection

    # --- plumbing -------------------------------------------------------------------------------------------

    def _send(self, reqs: Sequence[dict]) -> None:
        parts = []
        for req in reqs:
            body = json.dumps(req, separators=(",", ":")).encode()
            parts.append(_HDR.pack(len(body)))
            parts.append(body)
        self._s.sendall(b"".join(parts))

    def _recv_exact(self, n: int) -> bytearray:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._s.recv_into(view[got:], n - got)
            if k == 0:
                raise Broken(f"{self.path}: the node closed the connection")
            got += k
        return buf

    def _read(self) -> dict:
        (n,) = _HDR.unpack(self._recv_exact(8))
        if n > _MAX_REPLY:
            raise Broken(f"{self.path}: a reply of {n} bytes: too long")
        r = json.loads(self._recv_exact(n))
        if not isinstance(r, dict):
            raise Broken(f"{self.path}: a reply that is not a JSON object")
        return r

    def _fail(self, exc: BaseException) -> Broken:
        self._close_locked()
        if isinstance(exc, Broken):
            return exc
        return Broken(f"{self.path}: {exc}")

    @staticmethod
    def _check(r: dict) -> dict:
        return raise_for(r)

    def call(self, req: dict) -> dict:
        """Send req and return its reply; an error reply raises (see :func:`error_for`). For requests whose reply
        describes no blob."""
        return self.call_many([req])[0]

    def call_many(self, reqs: Sequence[dict], check: bool = True) -> list[dict]:
        """Send reqs back to back, then read their replies in order. With check, the first error reply is raised
        after every reply was read (the connection stays usable); without, error replies are returned as they are
        (``{"code": N, "message": ...}``, see :func:`raise_for`)."""
        with self._lock:
            if self._closed:
                raise Broken(f"{self.path}: connection closed")
            try:
                self._send(reqs)
                out = [self._read() for _ in reqs]
            except (OSError, ValueError, Broken) as exc:
                raise self._fail(exc) from None
        if check:
            for r in out:
                self._check(r)
        return out

    def blob_call(self, req: dict) -> tuple[dict, list[Payload]]:
        """Send req whose reply hands out blobs ("created" or "payloads"); receive and map the new segments."""
        with self._lock:
            if self._closed:
                raise Broken(f"{self.path}: connection closed")
            try:
                self._send([req])
                r = self._check(self._read())
                raw = [r["created"]] if "created" in r else r.get("payloads") or []
                ps = [Payload.of(p) for p in raw]
                for p in ps:
                    if p.data_size and p.store_fd not in self._maps:
                        self._map(p)
            except (OSError, ValueError, KeyError, TypeError, Broken) as exc:
                raise self._fail(exc) from None
        return r, ps

    def _map(self, p: Payload) -> None:
        fds = array.array("i")
        msg, anc, _, _ = self._s.recvmsg(1, socket.CMSG_SPACE(fds.itemsize))
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
        try:
            if len(msg) != 1 or len(fds) != 1:
                raise Broken(f"{self.path}: want one data byte and one descriptor, got {len(msg)} and {len(fds)}")
            m = mmap.mmap(fds[0], p.map_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            for fd in fds:
                os.close(fd)
        self._maps[p.store_fd] = m
        self._views[p.store_fd] = memoryview(m)

    def view(self, p: Payload) -> memoryview:
        """The bytes of a blob in this connection's mapping: writable until sealed, readable until released. Valid
        until :meth:`close`."""
        if not p.data_size:
            return memoryview(b"")
        v = self._views.get(p.store_fd)
        if v is None or p.data_offset < 0 or p.data_offset + p.data_size > len(v):
            raise Broken(f"{self.path}: blob {p.object_id:#x}: segment {p.store_fd} is not mapped or too short")
        return v[p.data_offset : p.data_offset + p.data_size]

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Send exit_request, close the connection and unmap every segment. Idempotent."""
        with self._lock:
            if not self._closed:
                try:
                    self._send([{"type": "exit_request"}])
                except OSError:
                    pass
            self._close_locked()

    def _close_locked(self) -> None:
        self._closed = True
        try:
            self._s.close()
        except OSError:
            pass
        views, self._views = self._views, {}
        for v in views.values():
            try:
                v.release()
            except BufferError:
                pass
        maps, self._maps = self._maps, {}
        for m in maps.values():
            try:
                m.close()
            except BufferError:  # a view handed out is still alive: the mapping ends with it
                pass

    # --- kvring's extensions --------------------------------------------------------------------------------

    def register_namespace(self, name: str, schema: dict, replication: int, min_replicas: int) -> tuple[str, str]:
        r = self.call({"type": "kvring_register_namespace_request", "name": name, "schema": schema,
                       "replication_factor": replication, "min_replicas": min_replicas})
        self.namespace = (str(r["name"]), str(r["fingerprint"]))
        return self.namespace
