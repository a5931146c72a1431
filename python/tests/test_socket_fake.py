"""The socket client against a fake node in this process (tests/fake_socket.py style: no kvring binary): the binary
framing with the per-chunk codes, the fallback to JSON for a node from before the framing, the fallback without
the codes for a node from before them, and the resend of chunks failed with code ABORTED in every case."""

from __future__ import annotations

import json
import mmap
import os
import shutil
import socket
import struct
import tempfile
import threading

import pytest

from kvring import PutStatus, Schema, Stats
from kvring.local import LocalPath

ABORTED = 10


class FakeNode:
    """Serves one connection at a time on a Unix socket. mode: "binary" (the framing with codes), "nocodes" (the
    framing from before the codes: the codes flag is refused) or "old" (JSON only). Each chunk id is failed with
    code ABORTED the first time it is published, stored after; what was published is recorded."""

    def __init__(self, path: str, mode: str) -> None:
        self.path, self.mode = path, mode
        self.fd = os.memfd_create("kvring-fake")
        self.size = 16 << 20
        os.ftruncate(self.fd, self.size)
        self.mem = mmap.mmap(self.fd, self.size)
        self.next_off = 0
        self.blobs: dict[int, tuple[int, int]] = {}  # id -> (offset, size)
        self.next_id = (1 << 63) + 1
        self.seen: set[bytes] = set()
        self.published: dict[bytes, bytes] = {}
        self.requests: list[str] = []  # "json:<type>" or "bin:<op>:<flags>"
        self.l = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.l.bind(path)
        self.l.listen(1)
        self.t = threading.Thread(target=self.serve, daemon=True)
        self.t.start()

    def close(self) -> None:
        self.l.close()
        self.t.join(5)
        self.mem.close()
        os.close(self.fd)

    def create(self, sizes):
        out = []
        for s in sizes:
            off = self.next_off
            self.next_off += (s + 4095) // 4096 * 4096
            bid, self.next_id = self.next_id, self.next_id + 1
            self.blobs[bid] = (off, s)
            out.append((bid, off, s))
        return out

    def results(self, ids, blob_ids):
        out = []
        for cid, b in zip(ids, blob_ids):
            off, size = self.blobs.pop(b)
            if cid in self.seen:
                self.published[cid] = bytes(self.mem[off : off + size])
                out.append(("stored", 0, "", [("fake", "127.0.0.1:1")]))
            else:
                self.seen.add(cid)
                out.append(("failed", ABORTED, "another write of this chunk is under way", []))
        return out

    def serve(self) -> None:
        try:
            c, _ = self.l.accept()
        except OSError:
            return
        self.sent_fd = False
        with c:
            while True:
                hdr = self.recv(c, 8)
                if hdr is None:
                    return
                body = self.recv(c, struct.unpack("<Q", hdr)[0])
                fds = False
                if body[0] == 0xB1:
                    self.requests.append(f"bin:{body[1]}:{body[2] if len(body) > 2 else 0}")
                    if self.mode == "old":
                        rep = json.dumps({"code": 1, "message": "the request is not a JSON object"}).encode()
                    else:
                        rep, fds = self.binary(body)
                else:
                    req = json.loads(body)
                    self.requests.append("json:" + req["type"])
                    if req["type"] == "exit_request":
                        return
                    r, fds = self.json(req)
                    rep = json.dumps(r).encode()
                c.sendall(struct.pack("<Q", len(rep)) + rep)
                if fds and not self.sent_fd:
                    socket.send_fds(c, [b"\0"], [self.fd])
                    self.sent_fd = True

    @staticmethod
    def recv(c, n):
        buf = b""
        while len(buf) < n:
            k = c.recv(n - len(buf))
            if not k:
                return None
            buf += k
        return buf

    def payload(self, bid, off, size):
        return {"object_id": bid, "store_fd": 1, "data_offset": off, "data_size": size, "map_size": self.size,
                "pointer": 0, "is_sealed": False, "is_owner": True, "is_gpu": False}

    def json(self, req):
        t = req["type"]
        if t == "register_request":
            return {"type": "register_reply", "instance_id": 1, "store_match": True, "rpc_endpoint": ""}, False
        if t == "kvring_register_namespace_request":
            return {"type": "kvring_register_namespace_reply", "name": req["name"], "fingerprint": "abcd"}, False
        if t == "create_buffers_request":
            bs = self.create(req["sizes"])
            return {"type": "create_buffers_reply", "ids": [b[0] for b in bs], "fds": [] if self.sent_fd else [1],
                    "payloads": [self.payload(*b) for b in bs]}, True
        if t == "drop_buffer_request":
            self.blobs.pop(req["id"], None)
            return {"type": "drop_buffer_reply"}, False
        if t == "kvring_publish_request":
            ids = [bytes.fromhex(i) for i in req["ids"]]
            res = self.results(ids, req["blobs"])
            r = {"type": "kvring_publish_reply", "epoch": 1, "results": [
                {"id": i.hex(), "status": st, "code": code, "reason": reason, "degraded": False,
                 "holders": [{"node_id": a, "grpc_addr": b} for a, b in hs]}
                for i, (st, code, reason, hs) in zip(ids, res)]}
            if req.get("create_sizes"):
                bs = self.create(req["create_sizes"])
                r.update(ids=[b[0] for b in bs], fds=[1], payloads=[self.payload(*b) for b in bs])
                return r, True
            return r, False
        return {"code": 6, "message": f"{t} is not implemented by the fake"}, False

    def binary(self, body):
        op = body[1]
        if op == 0x01:
            (n,) = struct.unpack_from("<I", body, 2)
            bs = self.create(struct.unpack_from(f"<{n}Q", body, 6))
            return bytes([0xB1, 0x81]) + self.blob_list(bs), True
        if op != 0x02:
            return struct.pack("<BBI", 0xB1, 0xFF, 6) + struct.pack("<I", 2) + b"no", False
        flags = body[2]
        if flags & 8 and self.mode == "nocodes":
            msg = b"binary publish: unknown flags 0x0b"
            return struct.pack("<BBII", 0xB1, 0xFF, 1, len(msg)) + msg, False
        o = 3
        for _ in range(2):  # namespace, fingerprint
            (k,) = struct.unpack_from("<I", body, o)
            o += 4 + k
        (n,) = struct.unpack_from("<I", body, o)
        o += 4
        ids = [body[o + 32 * i : o + 32 * i + 32] for i in range(n)]
        o += 32 * n
        blob_ids = struct.unpack_from(f"<{n}Q", body, o)
        o += 8 * n + (32 * n if flags & 4 else 0)
        (m,) = struct.unpack_from("<I", body, o)
        sizes = struct.unpack_from(f"<{m}Q", body, o + 4)
        out = bytearray([0xB1, 0x82]) + struct.pack("<QI", 1, n)
        for st, code, reason, hs in self.results(ids, blob_ids):
            out += bytes([["stored", "already_held", "rejected", "failed"].index(st), 0])
            if flags & 8:
                out += struct.pack("<I", code)
            out += struct.pack("<I", len(reason)) + reason.encode() + struct.pack("<I", len(hs))
            for a, b in hs:
                out += struct.pack("<I", len(a)) + a.encode() + struct.pack("<I", len(b)) + b.encode()
        if not sizes:
            return bytes(out + b"\0"), False
        return bytes(out + b"\1" + self.blob_list(self.create(sizes))), True

    def blob_list(self, bs):
        out = struct.pack("<I", len(bs))
        for bid, off, size in bs:
            out += struct.pack("<5Q", bid, 1, off, size, self.size)
        if self.sent_fd:
            return out + struct.pack("<I", 0)
        return out + struct.pack("<IQ", 1, 1)  # the one segment, whose descriptor follows (once per connection)


@pytest.fixture
def fake_dir():
    d = tempfile.mkdtemp(prefix="kvf-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.mark.parametrize("mode", ["binary", "nocodes", "old"])
def test_socket_put_resends_busy_chunks_once_in_every_framing(fake_dir, mode):
    node = FakeNode(os.path.join(fake_dir, "s.sock"), mode)
    lp = LocalPath(node.path, "ns", Schema(model="m", dtype="bf16", tokens_per_chunk=16), 1, 1, 10.0)
    try:
        stats = Stats()
        for rnd in range(2):  # the second put reuses the blobs the first publish created
            ids = [os.urandom(32) for _ in range(3)]
            data = [os.urandom(100 + 1000 * i) for i in range(3)]
            res = lp.put([(i, memoryview(d), None) for i, d in zip(ids, data)], None, stats)
            if mode == "nocodes":
                # without the codes a busy chunk cannot be told apart: it is returned failed, with its reason
                assert [(r.status, r.code) for r in res] == [(PutStatus.FAILED, None)] * 3, res
                assert all("another write" in r.reason for r in res)
                continue
            assert [r.status for r in res] == [PutStatus.STORED] * 3, res
            assert all(r.code is None and [h.id for h in r.holders] == ["fake"] for r in res)
            assert [node.published[i] for i in ids] == data  # the resend carried the bytes
        ls = lp.socket()
        assert ls is not None
        if mode == "old":
            assert stats.busy_resends == 6
            assert not ls.binary
        elif mode == "nocodes":
            assert stats.busy_resends == 0
            assert ls.binary and not ls.codes
        else:
            assert stats.busy_resends == 6
            assert ls.binary and ls.codes
    finally:
        lp.close()
        node.close()
    if mode == "old":
        # one binary request only, answered with JSON error 1: the same create again in JSON, then JSON only
        assert [r for r in node.requests if r.startswith("bin:")] == ["bin:1:3"]
        assert "json:create_buffers_request" in node.requests
    elif mode == "nocodes":
        # the codes flag refused once, the publish sent again without it, and without it from then on
        assert [r for r in node.requests if r.startswith("bin:2:")] == ["bin:2:11", "bin:2:3", "bin:2:3"]
    else:
        assert {r for r in node.requests if r.startswith("bin:2:")} == {"bin:2:11"}
        assert not [r for r in node.requests if r.startswith("json:") and "publish" in r]


def _publish_reply_bytes(codes: bool, results, tail: bytes) -> bytes:
    out = bytearray(struct.pack("<QI", 7, len(results)))
    for st, degraded, code, reason, holders in results:
        out += struct.pack("<BB", st, degraded)
        if codes:
            out += struct.pack("<I", code)
        r = reason.encode()
        out += struct.pack("<I", len(r)) + r + struct.pack("<I", len(holders))
        for a, b in holders:
            out += struct.pack("<I", len(a)) + a.encode() + struct.pack("<I", len(b)) + b.encode()
    return bytes(out + tail)


@pytest.mark.parametrize("codes", [True, False])
def test_publish_replies_decode_in_one_pass_and_refuse_every_truncation(codes):
    """The one-pass decoder of binary publish replies reads every field, and a reply cut anywhere is a ValueError or
    struct.error (the connection is then closed as Broken), never another exception."""
    from kvring.localsock import BIN_PUBLISH, ChunkOutcome, Payload, _blobs_of, _publish_reply

    results = [(0, 0, 0, "", [("n1", "127.0.0.1:1"), ("n2", "h:2")]), (2, 1, 8, "full é", []), (9, 0, 13, "x", [])]
    blobs = struct.pack("<I", 2) + struct.pack("<5Q", 11, 3, 0, 100, 4096) + struct.pack("<5Q", 12, 4, 64, 5, 8192)
    segs = struct.pack("<I", 2) + struct.pack("<2Q", 3, 4)
    raw = _publish_reply_bytes(codes, results, b"\x01" + blobs + segs)
    rep, got_segs = _publish_reply(memoryview(raw), codes)
    assert rep.epoch == 7 and got_segs == [3, 4]
    assert rep.results == [
        ChunkOutcome("stored", False, "", [("n1", "127.0.0.1:1"), ("n2", "h:2")], 0),
        ChunkOutcome("rejected", True, "full é", [], 8 if codes else 0),
        ChunkOutcome("failed", False, "x", [], 13 if codes else 0),
    ]
    assert rep.created == [Payload(11, 3, 0, 100, 4096), Payload(12, 4, 64, 5, 8192)] and rep.create_error is None
    ps, segs_of, decoded = _blobs_of(BIN_PUBLISH, memoryview(raw), codes)
    assert ps == rep.created and segs_of == [3, 4] and decoded == rep

    err = _publish_reply_bytes(codes, results[:1], b"\x02" + struct.pack("<I", 41) + struct.pack("<I", 4) + b"full")
    rep, got_segs = _publish_reply(memoryview(err), codes)
    assert rep.created is None and got_segs == [] and "full" in str(rep.create_error)
    none = _publish_reply_bytes(codes, results[:1], b"\x00")
    assert _publish_reply(memoryview(none), codes)[0].created is None

    for bad in [raw[:k] for k in range(len(raw))] + [raw + b"\x00", none[:-1] + b"\x03"]:
        with pytest.raises((ValueError, struct.error)):
            _publish_reply(memoryview(bad), codes)
    huge = struct.pack("<QI", 1, 1 << 30) + b"\x00" * 16
    with pytest.raises(ValueError):
        _publish_reply(memoryview(huge), codes)
