"""The local socket against a real node started with --socket: puts, lookups and gets go through it (chunk bytes in
shared memory, descriptors over SCM_RIGHTS) with the same results as over gRPC, leave no blob behind, and the
client falls back to gRPC while the socket is missing and takes it up again when it comes back."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import urllib.request

import numpy as np
import pytest

import kvring
from cluster import wait_for
from conftest import SCHEMA, connected


@pytest.fixture
def sock_path():
    d = tempfile.mkdtemp(prefix="kvs-")  # short: a socket path has at most 107 bytes
    yield os.path.join(d, "kvring.sock")
    shutil.rmtree(d, ignore_errors=True)


def node_stats(node) -> dict:
    with urllib.request.urlopen(f"http://{node.admin}/v1/stats", timeout=5) as r:
        return json.load(r)


def test_socket_gives_the_same_results_as_grpc(make_node, client_for, namespace, sock_path):
    n = make_node(extra=["--socket", sock_path])
    assert os.path.exists(sock_path)
    c = client_for([n.grpc], namespace, socket=sock_path)
    g = client_for([n.grpc], namespace, socket="")  # the same namespace over gRPC only
    wait_for(lambda: connected(c) and connected(g), 10, "clients to connect")
    ids = [os.urandom(32) for _ in range(5)]
    data = [os.urandom(size) for size in (1, 4096, 300_000, 1 << 20, 3 << 20)]

    res = c.put(list(zip(ids, data)))
    assert c.stats.socket_calls == 1
    ls = c._local.socket()
    assert ls is not None and ls.binary and ls.codes, "the client speaks the binary framing, with codes, to the node"
    assert [r.status for r in res] == [kvring.PutStatus.STORED] * 5
    assert all([h.id for h in r.holders] == [n.id] for r in res)
    assert [r.status for r in c.put(list(zip(ids, data)))] == [kvring.PutStatus.ALREADY_HELD] * 5
    assert [r.status for r in g.put(list(zip(ids[:2], data[:2])))] == [kvring.PutStatus.ALREADY_HELD] * 2

    missing = os.urandom(32)
    assert c.get(ids + [missing]) == data + [None]
    assert g.get(ids) == data
    reads = c.read([missing])
    assert not reads[0].found and reads[0].reason

    hit = c.lookup(ids + [missing], pin=30)
    assert hit.held == 5 and hit.lease != 0
    assert g.lookup(ids + [missing]).held == 5
    assert c.release_lease(hit.lease) is True
    assert c.release_lease(hit.lease) is False

    # get_into: straight into caller buffers (one copy out of the mapping); a buffer too small is a miss
    out = np.zeros((5, 3 << 20), dtype=np.uint8)
    sizes = c.get_into(ids, [out[i] for i in range(5)])
    assert sizes == [len(d) for d in data]
    for i, d in enumerate(data):
        assert out[i, : len(d)].tobytes() == d
    small = bytearray(100)
    assert c.get_into(ids[1:3], [bytearray(4096), small]) == [4096, None]

    assert c.stats.socket_calls == 7  # 2 puts, get, read, lookup, 2 get_into: none went over gRPC
    st = node_stats(n)
    # only the blobs the last publish created for the next put (one of the same shape) are left, until the client
    # goes
    assert st["blobs"] == 5, "the client left blobs in the node's memory"
    assert st["chunks"] == 5
    c.close()
    wait_for(lambda: node_stats(n)["blobs"] == 0 and node_stats(n)["blob_bytes"] == 0, 10,
             "the closed client's spare blobs to be freed")


def test_socket_with_groups_and_bad_input(make_node, client_for, namespace, sock_path):
    n = make_node(extra=["--socket", sock_path])
    schema = kvring.Schema(model="test-model", dtype="bf16", tokens_per_chunk=16, chunks_per_group=4)
    c = client_for([n.grpc], namespace, schema=schema, socket=sock_path)
    ids = [os.urandom(32) for _ in range(10)]
    groups = kvring.group_keys(ids, 4)
    data = [bytes([i]) * 5000 for i in range(10)]
    assert all(r.held for r in c.put([kvring.Chunk(i, d, k) for i, d, k in zip(ids, data, groups)]))
    assert c.lookup(ids).held == 10
    assert c.get(ids) == data
    assert c.get_placed(ids[5:], groups[5:]) == data[5:]
    assert c.stats.socket_calls == 4
    with pytest.raises(kvring.InvalidArgument, match="ids"):
        c.put([kvring.Chunk(b"short", b"x", b"short")])
    other = client_for([n.grpc], namespace, schema=SCHEMA, socket=sock_path)
    with pytest.raises(kvring.SchemaMismatch):
        other.lookup(ids)


def test_without_the_socket_calls_go_over_grpc_and_take_it_up_when_it_returns(make_node, client_for, namespace,
                                                                                sock_path):
    n = make_node(extra=["--socket", sock_path])
    c = client_for([n.grpc], namespace, socket=sock_path + ".missing")
    wait_for(lambda: connected(c), 10, "client to connect")
    ids = [os.urandom(32) for _ in range(3)]
    assert all(r.held for r in c.put([(i, b"v" * 1000) for i in ids]))
    assert c.get(ids) == [b"v" * 1000] * 3
    assert c.stats.socket_calls == 0

    s = client_for([n.grpc], namespace, socket=sock_path)
    assert s.get(ids) == [b"v" * 1000] * 3 and s.stats.socket_calls == 1
    n.kill()  # the socket file stays behind, and nobody answers on it
    with pytest.raises(kvring.Unavailable):
        wait_for(lambda: not connected(s), 10, "the client to notice")
        s.get(ids)
    n.start()  # the same socket path
    wait_for(lambda: connected(s), 15, "the client to reconnect")
    calls = s.stats.socket_calls
    fresh = [os.urandom(32) for _ in range(3)]

    def through_socket():
        res = s.put([(i, b"w" * 1000) for i in fresh])
        return all(r.held for r in res) and s.stats.socket_calls > calls

    wait_for(through_socket, 10, "puts through the socket again")
    assert s.get(fresh) == [b"w" * 1000] * 3
    assert s.stats.socket_calls == calls + 2


def test_socket_puts_land_on_the_same_owners_as_routed_grpc_puts(make_node, client_for, namespace, sock_path):
    a = make_node(extra=["--socket", sock_path])
    b = make_node(join=a.gossip)
    g = client_for([a.grpc], namespace, socket="")
    wait_for(lambda: connected(g) and len(g.refresh_routing().members) == 2, 15, "a ring view of two members")
    ring = g.routing.ring
    s = client_for([a.grpc], namespace, socket=sock_path)
    ids: list[bytes] = []
    while len(ids) < 8:  # four chunks owned by each node
        i = os.urandom(32)
        if sum(ring.primary(namespace, j).id == ring.primary(namespace, i).id for j in ids) < 4:
            ids.append(i)
    res = s.put([(i, os.urandom(2000)) for i in ids])
    assert s.stats.socket_calls == 1
    for i, r in zip(ids, res):
        assert r.status == kvring.PutStatus.STORED
        assert [h.id for h in r.holders] == [ring.primary(namespace, i).id]
    assert [x.found for x in g.read(ids)] == [True] * 8  # routed gRPC reads find them at their owners
    assert s.get(ids) == g.get(ids)


def test_concurrent_socket_puts_keep_one_puts_blobs(make_node, client_for, namespace, sock_path):
    """Threads putting through one client's socket each get their results, and at most one put's worth of blobs
    (created for the next put) waits in the node's memory afterwards: none is leaked by a put that raced another."""
    import threading

    n = make_node(extra=["--socket", sock_path])
    c = client_for([n.grpc], namespace, socket=sock_path)
    wait_for(lambda: connected(c), 10, "client to connect")
    errors: list[BaseException] = []
    stored: list[bytes] = []

    def putter() -> None:
        try:
            for _ in range(10):
                ids = [os.urandom(32) for _ in range(2)]
                res = c.put([(i, os.urandom(70_000)) for i in ids])
                assert [r.status for r in res] == [kvring.PutStatus.STORED] * 2, res
                stored.extend(ids)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    ts = [threading.Thread(target=putter) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    assert c.stats.socket_calls == 40
    assert node_stats(n)["blobs"] <= 2
    assert c.lookup(stored[:1]).held == 1


def test_new_blobs_are_populated_once_with_the_read_advice(make_node, sock_path, monkeypatch):
    """A blob's pages are mapped into the client with MADV_POPULATE_READ when it is written (the kernel maps the
    node's pages 16 per fault, writable: a shared tmpfs mapping), and not again once they are mapped (a reused slot):
    pagemap says so."""
    import mmap

    import kvring.localsock as localsock

    calls: list[int] = []
    real = localsock._madvise
    assert real is not None, "libc's madvise through ctypes"

    def recording(addr, n, advice):  # noqa: ANN001, ANN202 - madvise's own signature
        calls.append(advice)
        return real(addr, n, advice)

    monkeypatch.setattr(localsock, "_madvise", recording)
    n = make_node(extra=["--socket", sock_path])
    ls = localsock.LocalSocket(sock_path, timeout=10)
    try:
        size = 256 << 10
        (p,) = ls.create_blobs([size])
        start = p.data_offset - p.data_offset % mmap.PAGESIZE
        assert not ls._mapped(p.store_fd, start, p.data_offset + p.data_size), "a new mapping maps no page yet"
        data = os.urandom(size)
        ls.write([p], [data])
        assert calls == [22], "one MADV_POPULATE_READ for the new blob"
        assert ls._mapped(p.store_fd, start, p.data_offset + p.data_size), "its pages are in the page tables"
        assert ls.view(p) == data, "written through the read-populated mapping"
        ls.write([p], [data[::-1]])
        assert calls == [22], "pages already mapped are not populated again"
        small = ls.create_blobs([4096])
        ls.write(small, [b"x" * 4096])
        assert calls == [22], "a blob below 64 KiB is left to fault"
        ls.call_many([{"type": "drop_buffer_request", "id": b.object_id} for b in [p] + small], check=False)
    finally:
        ls.close()
    assert node_stats(n)["blobs"] == 0


def test_large_writes_split_between_two_threads_copy_every_byte(make_node, sock_path):
    """A write of 4 MiB or more is copied in two halves (the calling thread and the connection's helper), cut
    anywhere, even inside a blob: every byte lands where it belongs, and close ends the helper."""
    import kvring.localsock as localsock

    make_node(extra=["--socket", sock_path, "--memory-limit", "128MiB"])
    ls = localsock.LocalSocket(sock_path, timeout=10)
    try:
        for sizes in ([2 << 20] * 4, [3 << 20, (1 << 20) + 123, 777], [5 << 20]):
            ps = ls.create_blobs(sizes)
            datas = [os.urandom(k) for k in sizes]
            ls.write(ps, [memoryview(d) for d in datas])
            assert [bytes(ls.view(p)) for p in ps] == datas, sizes
            ls.call_many([{"type": "drop_buffer_request", "id": p.object_id} for p in ps], check=False)
        assert ls._helper is not None, "the large writes used the helper thread"
        with pytest.raises(ValueError):
            ls.write(ls.create_blobs([8 << 20]), [b"short"])
    finally:
        helper = ls._helper
        ls.close()
    assert helper is not None and helper._shutdown and all(not t.is_alive() for t in helper._threads)


def test_halves_cut_the_parts_at_the_byte():
    from kvring.localsock import _halves

    parts = [(1000, 5000, 10, True), (2000, 6000, 6, False), (3000, 7000, 4, True)]
    assert _halves(parts, 10) == (parts[:1], parts[1:])
    assert _halves(parts, 13) == ([parts[0], (2000, 6000, 3, False)], [(2003, 6003, 3, False), parts[2]])
    assert _halves(parts, 0) == ([], parts)


def test_an_interrupted_large_write_keeps_its_buffers_until_the_helper_is_done(make_node, sock_path, monkeypatch):
    """A KeyboardInterrupt (a signal) that arrives while the calling thread waits for the helper to finish the
    second half of a large write must not release the buffers the helper copies through (their raw addresses):
    write keeps waiting, then raises the interrupt. Before, the exports went at once and a close() could unmap
    the segment under the helper's memmove (a crash). Also: a mismatch of blobs and buffers is refused."""
    import threading

    import kvring.localsock as localsock

    make_node(extra=["--socket", sock_path, "--memory-limit", "128MiB"])
    ls = localsock.LocalSocket(sock_path, timeout=10)
    try:
        sizes = [4 << 20, 4 << 20]
        ps = ls.create_blobs(sizes)
        datas = [os.urandom(k) for k in sizes]
        helper_started, helper_may_finish, helper_done = threading.Event(), threading.Event(), threading.Event()
        real_copy, real_wait = ls._copy, localsock.futures_wait

        def copy(parts):
            if threading.current_thread() is not threading.main_thread():
                helper_started.set()
                helper_may_finish.wait(30)
            real_copy(parts)
            if threading.current_thread() is not threading.main_thread():
                helper_done.set()

        waits = []

        def wait(fs):
            waits.append(1)
            if len(waits) == 1:
                helper_started.wait(30)
                raise KeyboardInterrupt  # the signal arrives while the helper still copies
            helper_may_finish.set()
            return real_wait(fs)

        monkeypatch.setattr(ls, "_copy", copy)
        monkeypatch.setattr(localsock, "futures_wait", wait)
        done_at_raise = []
        with pytest.raises(KeyboardInterrupt):
            try:
                ls.write(ps, [memoryview(d) for d in datas])
            except KeyboardInterrupt:
                done_at_raise.append(helper_done.is_set())
                raise
        assert done_at_raise == [True], "write let the interrupt through before the helper had finished its copy"
        assert len(waits) >= 2
        assert [bytes(ls.view(p)) for p in ps] == datas
        monkeypatch.undo()
        with pytest.raises(ValueError, match="1 buffers for 2 blobs"):
            ls.write(ps, [memoryview(datas[0])])
    finally:
        ls.close()
