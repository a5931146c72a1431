#!/usr/bin/python3
"""A Vineyard IPC client written with Python's standard library only, sharing
no code with kvring: it proves the local socket's protocol from the outside.

Usage: vineyard_check.py SOCKET_PATH
Register, create a blob, receive its segment's descriptor (recvmsg with
SCM_RIGHTS), write through an mmap of the segment, seal, read it back on a
second connection through that connection's own mapping, check the error
replies of an unknown seal and an unimplemented request, release, delete.
Prints "ok" and exits 0 on success; exits 1 with the reason otherwise."""
import array
import json
import mmap
import os
import socket
import struct
import sys


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.maps = {}

    def _recv_exact(self, n):
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                fail("connection closed")
            out += chunk
        return out

    def call(self, req):
        body = json.dumps(req).encode()
        self.s.sendall(struct.pack("<Q", len(body)) + body)
        (n,) = struct.unpack("<Q", self._recv_exact(8))
        return json.loads(self._recv_exact(n))

    def recv_fd(self):
        fds = array.array("i")
        msg, anc, _, _ = self.s.recvmsg(1, socket.CMSG_LEN(fds.itemsize))
        for level, typ, data in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
        if len(msg) != 1 or len(fds) != 1:
            fail("expected one data byte and one descriptor, got %r and %d" % (msg, len(fds)))
        return fds[0]

    def take(self, payloads):
        """Receive the descriptor of each new segment, in payload order."""
        for p in payloads:
            if p["data_size"] == 0 or p["store_fd"] in self.maps:
                continue
            fd = self.recv_fd()
            self.maps[p["store_fd"]] = mmap.mmap(fd, p["map_size"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            os.close(fd)

    def view(self, p):
        m = self.maps[p["store_fd"]]
        return memoryview(m)[p["data_offset"] : p["data_offset"] + p["data_size"]]


def register(c):
    r = c.call({"type": "register_request", "version": "0.7.2", "store_type": "Normal"})
    if r.get("type") != "register_reply" or r.get("store_match") is not True:
        fail("register: %r" % r)
    return r


def main():
    path = sys.argv[1]
    w = Conn(path)
    reg = register(w)
    size = 200000
    r = w.call({"type": "create_buffer_request", "size": size})
    if r.get("type") != "create_buffer_reply":
        fail("create_buffer: %r" % r)
    p = r["created"]
    if p["data_offset"] + p["data_size"] + 8 > p["map_size"]:
        fail("segment too short for the mmap rule: %r" % p)
    w.take([p])
    data = bytes((i * 13 + 5) % 251 for i in range(size))
    w.view(p)[:] = data
    blob = r["id"]
    if blob & (1 << 63) == 0:
        fail("blob id without bit 63: %d" % blob)
    r = w.call({"type": "seal_request", "object_id": blob})
    if r.get("type") != "seal_reply":
        fail("seal: %r" % r)

    rd = Conn(path)
    register(rd)
    r = rd.call({"type": "get_buffers_request", "num": 1, "0": blob, "unsafe": False})
    if r.get("type") != "get_buffers_reply" or len(r["payloads"]) != 1:
        fail("get_buffers: %r" % r)
    rd.take(r["payloads"])
    if bytes(rd.view(r["payloads"][0])) != data:
        fail("the bytes read through the second mapping differ")
    r = rd.call({"type": "get_data_request", "id": [blob], "sync_remote": False, "wait": False})
    tree = r["content"].get("o%016x" % blob)
    if not tree or tree["typename"] != "vineyard::Blob" or tree["length"] != size or tree["instance_id"] != reg["instance_id"]:
        fail("get_data of the blob: %r" % r)
    r = rd.call({"type": "seal_request", "object_id": (1 << 63) | 0xDEAD})
    if r.get("code") != 12:
        fail("seal of an unknown id: %r" % r)
    r = rd.call({"type": "create_stream_request", "object_id": 1})
    if r.get("code") != 6:
        fail("an unimplemented request: %r" % r)
    r = rd.call({"type": "instance_status_request"})
    if r["meta"]["memory_usage"] < size:
        fail("memory_usage does not count the blob: %r" % r)
    for c in (rd, w):
        r = c.call({"type": "release_request", "object_id": blob})
        if r.get("type") != "release_reply":
            fail("release: %r" % r)
    r = w.call({"type": "del_data_request", "id": [blob], "fastpath": False})
    if r.get("type") != "del_data_reply":
        fail("del_data: %r" % r)
    r = w.call({"type": "exists_request", "id": blob})
    if r.get("exists") is not False:
        fail("exists after delete: %r" % r)
    for c in (rd, w):
        body = json.dumps({"type": "exit_request"}).encode()
        c.s.sendall(struct.pack("<Q", len(body)) + body)
        for m in c.maps.values():
            m.close()
        c.s.close()
    print("ok")


if __name__ == "__main__":
    main()
