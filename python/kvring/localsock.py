"""A connection to a kvring node's local Unix socket (docs/vineyard.md): Vineyard's IPC protocol (blobs in the node's
shared memory, written and read through this process's mappings of its segment files) and kvring's extensions
(publish sealed blobs as cluster chunks, look chunks up, get chunks as blobs).

Messages both ways are an 8-byte little-endian length and that much JSON, or, for creating blobs, publishing and
looking up, kvring's binary framing (docs/vineyard.md "Binary framing"; :meth:`LocalSocket.create_blobs`,
:meth:`LocalSocket.publish`, :meth:`LocalSocket.lookup`), which the client uses unless ``json_only`` is set or the
node answered a binary request with a JSON error (a node from before the framing: the connection then speaks JSON
for good, as the Go client does). After a reply that hands out blobs, the node sends the descriptor of each segment
this connection has not seen yet, one ``sendmsg`` each (one data byte, one ``SCM_RIGHTS`` descriptor); it is mapped
with ``mmap`` once and kept until :meth:`LocalSocket.close`.

:class:`LocalSocket` is safe for concurrent use: calls are serialised on the connection (one reply per request, in
turn) and each blocks until its reply arrives or ``timeout`` passes. Requests that hand out no blob can be sent
back to back and their replies read afterwards (:meth:`LocalSocket.call_many`).
"""

from __future__ import annotations

import array
import ctypes
import json
import mmap
import os
import socket
import struct
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Any, NamedTuple, Optional, Sequence

from ._crc32c_hw import _PyBUF_SIMPLE, _PyBUF_WRITABLE, _PyBuffer, _get_buffer, _release_buffer
from .errors import (
    FailedPrecondition,
    InvalidArgument,
    KvringError,
    NotFound,
    ResourceExhausted,
    SchemaMismatch,
    UnknownNamespace,
)

__all__ = ["LocalSocket", "LocalError", "Broken", "NoBinary", "Payload", "PublishReply", "ChunkOutcome",
           "error_for", "raise_for"]

_HDR = struct.Struct("<Q")
_MAX_REPLY = 256 << 20

# The binary framing (docs/vineyard.md "Binary framing").
BIN_MAGIC = 0xB1
BIN_CREATE = 0x01
BIN_PUBLISH = 0x02
BIN_LOOKUP = 0x03
BIN_REPLY = 0x80
BIN_ERROR = 0xFF
PUB_SEAL = 1 << 0
PUB_CONSUME = 1 << 1
PUB_GROUPS = 1 << 2
PUB_CODES = 1 << 3  # the reply carries each chunk's gRPC code
_BIN_STATUS = ("stored", "already_held", "rejected", "failed")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_BLOB = struct.Struct("<5Q")
_LOOKUP_REPLY = struct.Struct("<QIQI")
_MADV_POPULATE_READ = 22  # Linux 5.14+; Python 3.11's mmap does not name it
_POPULATE_MIN = 64 << 10
_PAGE = mmap.PAGESIZE
_PRESENT = 1 << 63  # /proc/self/pagemap: the page is in this process's page tables
_PARALLEL_MIN = 4 << 20  # a write of this many bytes or more is split with a helper thread (LocalSocket.write)

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


class NoBinary(Exception):
    """The node does not speak the binary framing (it answered a binary request with JSON error 1); the request had
    no effect and is to be sent again in JSON. The connection speaks JSON from then on."""


class ChunkOutcome(NamedTuple):
    """One chunk's result in a publish reply. ``code`` is the gRPC code number (PutChunkResult.code) of a rejected
    or failed chunk, 0 when the node did not send one (a node from before the codes)."""

    status: str
    degraded: bool
    reason: str
    holders: list[tuple[str, str]]
    code: int


class PublishReply(NamedTuple):
    """A publish's results, one per chunk in order, and, when it asked for blobs to be created, the new blobs (or
    the error that kept them from being created: the publish stands)."""

    epoch: int
    results: list[ChunkOutcome]
    created: Optional[list["Payload"]]
    create_error: Optional[KvringError]


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



def _wait_done(fut: "Future[None]") -> None:
    """Wait until fut (the helper's half of a write) is done, then raise its error, if any. An exception raised in
    this thread meanwhile (KeyboardInterrupt from a signal) does not cut the wait short: the helper copies through
    raw addresses of buffers this thread keeps exported, which must stay exported until it is done. The first
    such exception is raised once it is."""
    interrupted: Optional[BaseException] = None
    while not fut.done():
        try:
            futures_wait([fut])
        except BaseException as e:  # noqa: BLE001 - re-raised below, after the helper is done
            if interrupted is None:
                interrupted = e
    if interrupted is not None:
        raise interrupted
    fut.result()

class LocalSocket:
    """One registered connection to the socket at ``path``. Construction connects and registers (blocks up to
    ``timeout``); raises OSError or :class:`Broken` when the node is not there."""

    def __init__(self, path: str, timeout: float = 30.0, json_only: bool = False) -> None:
        self.path = path
        self.binary = not json_only  # binary framing for create, publish and lookup
        self.codes = True  # ask for per-chunk codes in binary publishes (a node from before them refuses the flag)
        self.spare: Optional[list[Payload]] = None  # unsealed blobs created for this connection's next put
        self._lock = threading.Lock()
        self._maps: dict[int, mmap.mmap] = {}
        self._views: dict[int, memoryview] = {}
        self._addrs: dict[int, int] = {}  # where each mapping starts in this process (for /proc/self/pagemap)
        self._pagemap = -1  # a descriptor of /proc/self/pagemap once connected; -1: none
        self._populate = True  # False once the kernel refused the advice (before 5.14)
        self._helper: Optional[ThreadPoolExecutor] = None  # copies half of a large write (write); ended by close
        self._closed = False
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(path)
        except BaseException:
            s.close()
            raise
        self._s = s
        self._pagemap = _open_pagemap()
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

    def _read_raw(self) -> bytearray:
        (n,) = _HDR.unpack(self._recv_exact(8))
        if n > _MAX_REPLY:
            raise Broken(f"{self.path}: a reply of {n} bytes: too long")
        return self._recv_exact(n)

    def _read(self) -> dict:
        r = json.loads(self._read_raw())
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

    def bin_call(self, body: bytes, op: int, pre: Sequence[dict] = (),
                 codes: bool = False) -> tuple[memoryview, list[Payload], Optional["PublishReply"]]:
        """Send the JSON requests pre (whose replies are read and ignored: drops of spare blobs) and the binary request
        body (op), and return the body of its binary reply after the op byte, with the blobs it hands out mapped
        (:func:`_blobs_of`), and for a publish the decoded reply. An error reply raises (:func:`error_for`); JSON
        error 1 from a node from before the framing raises :class:`NoBinary` and turns the framing off."""
        with self._lock:
            if self._closed:
                raise Broken(f"{self.path}: connection closed")
            try:
                parts = []
                for req in pre:
                    j = json.dumps(req, separators=(",", ":")).encode()
                    parts += [_HDR.pack(len(j)), j]
                self._s.sendall(b"".join(parts + [_HDR.pack(len(body)), body]))
                for _ in pre:
                    self._read_raw()
                raw = self._read_raw()
                if len(raw) >= 2 and raw[0] == BIN_MAGIC:
                    rest = memoryview(raw)[2:]
                    if raw[1] == BIN_ERROR:
                        code, msg = _error_of(rest)
                        err: Optional[Exception] = error_for(code, msg)
                    elif raw[1] != op | BIN_REPLY:
                        raise Broken(f"{self.path}: the reply to binary op {op:#04x} is op {raw[1]:#04x}")
                    else:
                        err = None
                else:
                    r = json.loads(raw)
                    if not isinstance(r, dict):
                        raise Broken(f"{self.path}: a reply that is not a JSON object")
                    code = int(r.get("code") or 0)
                    if code == CODE_INVALID and "type" not in r:
                        self.binary = False
                        err = NoBinary(str(r.get("message", "")))
                    elif code and "type" not in r:
                        err = error_for(code, str(r.get("message", "")))
                    else:
                        raise Broken(f"{self.path}: a JSON reply to binary op {op:#04x}")
                ps: list[Payload] = []
                decoded: Optional[PublishReply] = None
                if err is None:
                    ps, segs, decoded = _blobs_of(op, rest, codes)
                    if segs:
                        size = {p.store_fd: p.map_size for p in ps}
                        for seg in segs:
                            if seg not in size:
                                raise Broken(f"{self.path}: segment {seg} follows a reply that names no blob in it")
                            self._map(Payload(0, seg, 0, 0, size[seg]))
            except (OSError, ValueError, struct.error, Broken) as exc:
                raise self._fail(exc) from None
        if err is not None:
            raise err
        return rest, ps, decoded

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
        c = ctypes.c_char.from_buffer(m)  # an export of the mapping: released at once, so close() can unmap it
        self._addrs[p.store_fd] = ctypes.addressof(c)
        del c

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
        """Send exit_request, wait for the helper thread of :meth:`write` to end, then close the connection and unmap
        every segment (a mapping a write is copying into ends with that write). Idempotent."""
        with self._lock:
            if not self._closed:
                try:
                    self._send([{"type": "exit_request"}])
                except OSError:
                    pass
            self._closed = True  # no new helper from here (_helper_pool)
            helper, self._helper = self._helper, None
        if helper is not None:
            helper.shutdown(wait=True)  # a half being copied ends before the mappings go (the exports guard them too)
        with self._lock:
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
        self._addrs = {}
        if self._pagemap >= 0:
            os.close(self._pagemap)
        self._pagemap = -1
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

    # --- the binary framing ---------------------------------------------------------------------------------

    def create_blobs(self, sizes: Sequence[int], pre: Sequence[dict] = ()) -> list[Payload]:
        """Create unsealed blobs of sizes (all or none), writable through :meth:`view`; in the binary framing unless
        it is off. pre: JSON requests sent first, their replies ignored. Raises NoBinary (then send it again)."""
        if not self.binary:
            if pre:
                self.call_many(pre, check=False)
            r, ps = self.blob_call({"type": "create_buffers_request", "num": len(sizes), "sizes": list(sizes)})
        else:
            body = struct.pack(f"<BBI{len(sizes)}Q", BIN_MAGIC, BIN_CREATE, len(sizes), *sizes)
            _, ps, _ = self.bin_call(body, BIN_CREATE, pre)
        if len(ps) != len(sizes):
            self._fail_locked(f"create blobs: {len(ps)} payloads for {len(sizes)} sizes")
        return ps

    def swap_spare(self, ps: Optional[list[Payload]]) -> Optional[list[Payload]]:
        """Set the blobs kept for the next put (see :class:`kvring.local.LocalPath`) and return those kept before."""
        with self._lock:
            old, self.spare = self.spare, ps
        return old

    def write(self, ps: Sequence[Payload], datas: Sequence[Any]) -> None:
        """Copy each of datas (C-contiguous buffers) into the blob ps[i] of the same size, its pages populated first
        where they need it (:meth:`populate`). A write of 4 MiB or more is split in two halves of the bytes: a
        helper thread this connection owns populates and copies the second while the calling thread does the
        first, both outside the GIL (ctypes), so that on a machine with a core to spare the copy takes half as
        long (4 x 2 MiB: ~1.2 against ~1.7 ms in a new mapping; below 4 MiB the handoff costs more than it
        saves). The mappings and datas are held (buffer exports) until both halves are done: a :meth:`close`
        meanwhile leaves the mapping to end with them. Blocks until every byte is copied. ValueError when a
        buffer's size is not its blob's."""
        if len(ps) != len(datas):
            raise ValueError(f"{len(datas)} buffers for {len(ps)} blobs")
        for p, d in zip(ps, datas):
            if memoryview(d).nbytes != p.data_size:
                raise ValueError(f"blob {p.object_id:#x} has {p.data_size} bytes, the data {memoryview(d).nbytes}")
        total = sum(p.data_size for p in ps)
        helper = self._helper_pool() if total >= _PARALLEL_MIN else None
        if helper is None:
            for p, d in zip(ps, datas):
                v = self.view(p)  # an export: the mapping stays while it is populated and written
                self._populate_one(p)
                v[:] = d
                v.release()
            return
        views = [self.view(p) for p in ps]  # exports of the mappings while the copies run
        need = [self._needs_populate(p) for p in ps]
        bufs: list[_PyBuffer] = []
        try:
            parts: list[tuple[int, int, int, bool]] = []  # (to, from, bytes, populate first)
            for v, d, pop in zip(views, datas, need):
                dst, src = _PyBuffer(), _PyBuffer()
                _get_buffer(v, ctypes.byref(dst), _PyBUF_WRITABLE)
                bufs.append(dst)
                _get_buffer(d, ctypes.byref(src), _PyBUF_SIMPLE)
                bufs.append(src)
                parts.append((dst.buf, src.buf, dst.len, pop))
            first, second = _halves(parts, total // 2)
            try:
                fut = helper.submit(self._copy, second)
            except RuntimeError:  # close() ended the helper meanwhile: the mappings are held, copy it all here
                self._copy(parts)
                return
            try:
                self._copy(first)
            finally:
                _wait_done(fut)
        finally:
            for b in bufs:
                _release_buffer(ctypes.byref(b))
            for v in views:
                v.release()

    def _copy(self, parts: Sequence[tuple[int, int, int, bool]]) -> None:
        """Copy each part (to, from, bytes), populating its pages first when it says so. Runs without the GIL."""
        for dst, src, n, pop in parts:
            if pop and self._populate:
                start = dst - dst % _PAGE
                if _madvise(start, dst + n - start, _MADV_POPULATE_READ) != 0 and ctypes.get_errno() == _EINVAL:
                    self._populate = False
            ctypes.memmove(dst, src, n)

    def _helper_pool(self) -> Optional[ThreadPoolExecutor]:
        """The helper thread of :meth:`write`, started at the first large write; None when the connection is closed
        or ctypes cannot call madvise here."""
        if _madvise is None:
            return None
        with self._lock:
            if self._closed:
                return None
            if self._helper is None:
                self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kvring-localsock-copy")
            return self._helper

    def populate(self, ps: Sequence[Payload]) -> None:
        """Map the pages under new blobs of 64 KiB or more into this process's page tables, so that writing a blob
        takes no page fault per 4 KiB page: nothing for a blob whose pages are mapped already (a slot this
        connection wrote before, that the node reused; :meth:`_mapped`), else one madvise(MADV_POPULATE_READ).
        The read advice maps the node's pages (allocated when it created the blob) writable, since a shared tmpfs
        mapping needs no write notification, and the kernel maps 16 of them per fault (fault-around): ~0.45 ms
        per 8 MiB against ~1.3 ms for MADV_POPULATE_WRITE, a fault per page (2026-12-01, Linux 6.18, 2-vCPU VM;
        docs/benchmarks.md). Errors (an older kernel) are ignored: the writes fault the pages in."""
        for p in ps:
            try:
                v = self.view(p)  # an export: the mapping stays while it is populated
            except Broken:
                continue  # not mapped here (the connection closed): the writes would fail anyway
            self._populate_one(p)
            v.release()

    def _populate_one(self, p: Payload) -> None:
        """Populate blob p (see :meth:`populate`); the caller holds its mapping (a view of it)."""
        if not self._needs_populate(p):
            return
        start = p.data_offset - p.data_offset % _PAGE
        n = p.data_offset + p.data_size - start
        base, m = self._addrs.get(p.store_fd), self._maps.get(p.store_fd)
        if _madvise is not None and base is not None:
            if _madvise(base + start, n, _MADV_POPULATE_READ) != 0:
                self._populate = ctypes.get_errno() != _EINVAL
        elif m is not None:
            try:
                m.madvise(_MADV_POPULATE_READ, start, n)
            except (OSError, ValueError):
                self._populate = False

    def _needs_populate(self, p: Payload) -> bool:
        """Whether blob p is worth populating: 64 KiB or more, in a mapping of this connection, pages not mapped."""
        if p.data_size < _POPULATE_MIN or not self._populate:
            return False
        m = self._maps.get(p.store_fd)
        if m is None or p.data_offset < 0 or p.data_offset + p.data_size > len(m):
            return False
        start = p.data_offset - p.data_offset % _PAGE
        return not self._mapped(p.store_fd, start, p.data_offset + p.data_size)

    def _mapped(self, seg: int, start: int, end: int) -> bool:
        """Whether the pages of segment seg's mapping from start to end are in this process's page tables, as
        /proc/self/pagemap says: every page of a range of up to 64 pages (one read), else the first, the middle
        and the last (a slot's pages come and go together: the node gives a slot's pages back whole, and a blob
        is populated whole). False when pagemap cannot be read."""
        with self._lock:  # close() closes the pagemap fd, whose number could then name another file
            base = self._addrs.get(seg)
            if self._pagemap < 0 or base is None:
                return False
            first, last = (base + start) // _PAGE, (base + end - 1) // _PAGE
            try:
                if last - first < 64:
                    n = last - first + 1
                    b = os.pread(self._pagemap, 8 * n, 8 * first)
                    return len(b) == 8 * n and min(array.array("Q", b)) >= _PRESENT
                for pg in (first, (first + last) // 2, last):
                    (v,) = _U64.unpack(os.pread(self._pagemap, 8, pg * 8))
                    if not v & _PRESENT:
                        return False
            except (OSError, struct.error):
                return False
            return True

    def publish(self, ns: tuple[str, str], ids: Sequence[bytes], blobs: Sequence[int],
                keys: Optional[Sequence[bytes]], seal: bool = True, consume: bool = True,
                create_sizes: Sequence[int] = ()) -> PublishReply:
        """Publish blobs as the chunks ids (kvring_publish_request): with seal, the node seals this connection's
        unsealed blobs first; with consume, it deletes them afterwards whatever the results; with create_sizes, it
        then creates blobs for the next put. In the binary framing unless it is off; raises NoBinary (then send it
        again: it had no effect). Ids or keys that are not 32 bytes go in JSON, whose error names the field."""
        if not self.binary or not _all32(ids, keys):
            return self._publish_json(ns, ids, blobs, keys, seal, consume, create_sizes)
        flags = (PUB_SEAL if seal else 0) | (PUB_CONSUME if consume else 0) | (PUB_GROUPS if keys is not None else 0)
        if self.codes:
            flags |= PUB_CODES
        name, fp = ns[0].encode(), bytes.fromhex(ns[1])
        n = len(ids)
        parts = [struct.pack(f"<BBBI", BIN_MAGIC, BIN_PUBLISH, flags, len(name)), name, _U32.pack(len(fp)), fp,
                 _U32.pack(n), *ids, struct.pack(f"<{n}Q", *blobs)]
        if keys is not None:
            parts += keys
        parts.append(struct.pack(f"<I{len(create_sizes)}Q", len(create_sizes), *create_sizes))
        body = b"".join(parts)
        try:
            _, _, rep = self.bin_call(body, BIN_PUBLISH, codes=bool(flags & PUB_CODES))
        except InvalidArgument as exc:
            if flags & PUB_CODES and "unknown flags" in str(exc):
                # A node with the framing but from before the codes: it decoded nothing and did nothing.
                self.codes = False
                return self.publish(ns, ids, blobs, keys, seal, consume, create_sizes)
            raise
        assert rep is not None  # bin_call decodes every publish reply it returns
        return rep

    def _publish_json(self, ns: tuple[str, str], ids: Sequence[bytes], blobs: Sequence[int],
                      keys: Optional[Sequence[bytes]], seal: bool, consume: bool,
                      create_sizes: Sequence[int]) -> PublishReply:
        req: dict[str, Any] = {"type": "kvring_publish_request", "namespace": ns[0], "fingerprint": ns[1],
                               "ids": [i.hex() for i in ids], "blobs": list(blobs)}
        if keys is not None:
            req["groups"] = [k.hex() for k in keys]
        if seal:
            req["seal"] = True
        if consume:
            req["consume"] = True
        if create_sizes:
            req["create_sizes"] = list(create_sizes)
        r, ps = self.blob_call(req)
        results = []
        for res in r.get("results") or []:
            results.append(ChunkOutcome(str(res.get("status", "")), bool(res.get("degraded")),
                                        str(res.get("reason") or ""),
                                        [(str(h.get("node_id", "")), str(h.get("grpc_addr", "")))
                                         for h in res.get("holders") or []],
                                        int(res.get("code") or 0)))
        ce = r.get("create_error")
        cerr = error_for(int(ce.get("code") or CODE_UNKNOWN), str(ce.get("message", ""))) if ce else None
        created = ps if create_sizes and ce is None else None
        return PublishReply(int(r.get("epoch", 0)), results, created, cerr)

    def lookup(self, ns: tuple[str, str], ids: Sequence[bytes], keys: Optional[Sequence[bytes]],
               pin_ms: int) -> tuple[int, int, int, int]:
        """(epoch, held, lease_id, lease_ttl_ms) of kvring_lookup_request, in the binary framing unless it is off (or
        an id or key is not 32 bytes: JSON, whose error names the field)."""
        if not self.binary or not _all32(ids, keys):
            req: dict[str, Any] = {"type": "kvring_lookup_request", "namespace": ns[0], "fingerprint": ns[1],
                                   "ids": [i.hex() for i in ids], "pin_ttl_ms": pin_ms}
            if keys is not None:
                req["groups"] = [k.hex() for k in keys]
            r = self.call(req)
            return (int(r.get("epoch", 0)), int(r.get("held", 0)), int(r.get("lease_id", 0)),
                    int(r.get("lease_ttl_ms", 0)))
        name, fp = ns[0].encode(), bytes.fromhex(ns[1])
        parts = [struct.pack("<BBBI", BIN_MAGIC, BIN_LOOKUP, PUB_GROUPS if keys is not None else 0, len(name)), name,
                 _U32.pack(len(fp)), fp, _U32.pack(len(ids)), *ids]
        if keys is not None:
            parts += keys
        parts.append(_U32.pack(min(max(pin_ms, 0), 1 << 31)))
        rest, _, _ = self.bin_call(b"".join(parts), BIN_LOOKUP)
        if len(rest) != _LOOKUP_REPLY.size:
            self._fail_locked(f"a lookup reply of {len(rest)} bytes, want {_LOOKUP_REPLY.size}")
        return _LOOKUP_REPLY.unpack(rest)

    def _fail_locked(self, why: str) -> None:
        """Close a connection whose reply made no sense (descriptors may follow it) and raise Broken."""
        with self._lock:
            raise self._fail(Broken(f"{self.path}: {why}"))


def _libc_madvise() -> Any:
    """libc's madvise(addr, length, advice) through ctypes (called without the GIL), or None where it cannot be."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_madvise = _libc_madvise()
_EINVAL = 22


def _halves(parts: Sequence[tuple[int, int, int, bool]],
            cut: int) -> tuple[list[tuple[int, int, int, bool]], list[tuple[int, int, int, bool]]]:
    """parts (to, from, bytes, populate) split where cut bytes of them are behind: the first half and the rest."""
    first: list[tuple[int, int, int, bool]] = []
    second: list[tuple[int, int, int, bool]] = []
    done = 0
    for dst, src, n, pop in parts:
        if done >= cut:
            second.append((dst, src, n, pop))
        elif done + n <= cut:
            first.append((dst, src, n, pop))
        else:
            k = cut - done
            first.append((dst, src, k, pop))
            second.append((dst + k, src + k, n - k, pop))
        done += n
    return first, second


def _open_pagemap() -> int:
    """A descriptor of /proc/self/pagemap (which pages this process has mapped), or -1 where it cannot be read."""
    try:
        return os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1


def _all32(ids: Sequence[bytes], keys: Optional[Sequence[bytes]]) -> bool:
    return all(len(i) == 32 for i in ids) and (keys is None or all(len(k) == 32 for k in keys))


class _Reader:
    """Decodes a binary reply; a short read raises ValueError."""

    __slots__ = ("b", "o")

    def __init__(self, b: memoryview) -> None:
        self.b, self.o = b, 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.o + n > len(self.b):
            raise ValueError(f"the reply ends {self.o + n - len(self.b)} bytes short")
        v = self.b[self.o : self.o + n]
        self.o += n
        return v

    def u8(self) -> int:
        return self.take(1)[0]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def u64(self) -> int:
        return _U64.unpack(self.take(8))[0]

    def count(self, each: int) -> int:
        n = self.u32()
        if n * each > len(self.b) - self.o:
            raise ValueError(f"a count of {n} in a reply with {len(self.b) - self.o} bytes left")
        return n

    def str(self) -> str:
        return bytes(self.take(self.count(1))).decode("utf-8", "replace")

    def blobs(self) -> tuple[list[Payload], list[int]]:
        n = self.count(_BLOB.size)
        ps = [Payload(*_BLOB.unpack(self.take(_BLOB.size))) for _ in range(n)]
        k = self.count(8)
        segs = list(struct.unpack(f"<{k}Q", self.take(8 * k)))
        return ps, segs

    def done(self, what: str) -> None:
        if self.o != len(self.b):
            raise ValueError(f"{len(self.b) - self.o} bytes after the end of the {what}")


def _error_of(b: memoryview) -> tuple[int, str]:
    r = _Reader(b)
    return r.u32(), r.str()


_RESULT = struct.Struct("<BBI")  # status, degraded, length of the reason
_RESULT_CODE = struct.Struct("<BBII")  # status, degraded, code, length of the reason
_EPOCH_COUNT = struct.Struct("<QI")


def _blobs_of(op: int, rest: memoryview,
              codes: bool) -> tuple[list[Payload], list[int], Optional[PublishReply]]:
    """The blobs a binary reply hands out and the segments whose descriptors follow it (read before the caller does
    anything with the reply: the descriptors must be received whatever it makes of it), and a publish's decoded
    reply (:func:`_publish_reply`)."""
    if op == BIN_CREATE:
        r = _Reader(rest)
        ps, segs = r.blobs()
        r.done("create_blobs reply")
        return ps, segs, None
    if op != BIN_PUBLISH:
        return [], [], None
    rep, segs = _publish_reply(rest, codes)
    return rep.created or [], segs, rep


def _short(b: bytes, o: int, n: int) -> None:
    if n < 0 or o + n > len(b):
        raise ValueError(f"the reply ends {o + n - len(b)} bytes short")


def _publish_reply(rest: memoryview, codes: bool) -> tuple[PublishReply, list[int]]:
    """A binary publish reply decoded in one pass (docs/vineyard.md "Binary framing"), and the segments whose
    descriptors follow it. A short or malformed reply raises ValueError (or struct.error), as :class:`_Reader`."""
    b = bytes(rest)  # slices of bytes are bytes: decoded without a memoryview each
    epoch, n = _EPOCH_COUNT.unpack_from(b, 0)
    o = _EPOCH_COUNT.size
    if n * 10 > len(b) - o:
        raise ValueError(f"a count of {n} in a reply with {len(b) - o} bytes left")
    results = []
    res = _RESULT_CODE if codes else _RESULT
    nstatus = len(_BIN_STATUS)
    for _ in range(n):
        if codes:
            st, degraded, code, k = res.unpack_from(b, o)
        else:
            st, degraded, k = res.unpack_from(b, o)
            code = 0
        o += res.size
        _short(b, o, k)
        reason = b[o : o + k].decode("utf-8", "replace")
        o += k
        (h,) = _U32.unpack_from(b, o)
        o += 4
        if h * 8 > len(b) - o:
            raise ValueError(f"a count of {h} in a reply with {len(b) - o} bytes left")
        holders = []
        for _ in range(h):
            (k,) = _U32.unpack_from(b, o)
            o += 4
            _short(b, o, k)
            node = b[o : o + k].decode("utf-8", "replace")
            o += k
            (k,) = _U32.unpack_from(b, o)
            o += 4
            _short(b, o, k)
            holders.append((node, b[o : o + k].decode("utf-8", "replace")))
            o += k
        results.append(ChunkOutcome(_BIN_STATUS[st] if st < nstatus else "failed", bool(degraded), reason, holders,
                                    code))
    _short(b, o, 1)
    tag = b[o]
    created: Optional[list[Payload]] = None
    cerr: Optional[KvringError] = None
    segs: list[int] = []
    r = _Reader(memoryview(b)[o + 1 :])
    if tag == 1:
        created, segs = r.blobs()
    elif tag == 2:
        code = r.u32()
        cerr = error_for(code, r.str())
    elif tag != 0:
        raise ValueError(f"publish reply: create tag {tag}")
    r.done("publish reply")
    return PublishReply(epoch, results, created, cerr), segs
