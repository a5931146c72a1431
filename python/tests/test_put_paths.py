"""Both ways a put stream runs: driven on the calling thread (kvring._stcall, the default where this grpcio allows
it) and through grpcio's stream_stream with its own threads (the fallback). Same results either way."""

import os

import pytest

import kvring
from kvring import _stcall
from cluster import wait_for
from conftest import connected


@pytest.fixture(params=["driven", "threaded"])
def path(request, monkeypatch):
    started = []
    real = _stcall.start

    def counting(*a, **kw):
        call = real(*a, **kw)
        started.append(call is not None)
        return call

    monkeypatch.setattr(_stcall, "ENABLED", request.param == "driven")
    monkeypatch.setattr(_stcall, "start", counting)
    return request.param, started


@pytest.mark.parametrize("eager", [True, False])
def test_put_results_are_the_same_on_both_paths(cluster, client_for, namespace, path, eager):
    which, started = path
    c = client_for([cluster[0].grpc], namespace, eager_put_bytes=64 << 20 if eager else -1)
    wait_for(lambda: connected(c))
    big = os.urandom((2 << 20) + 12345)  # three frames
    chunks = [kvring.Chunk(os.urandom(32), d) for d in (b"a", big, os.urandom(1000))]
    res = c.put(chunks)
    assert [r.status for r in res] == [kvring.PutStatus.STORED] * 3, res
    assert all(r.holders for r in res)
    again = c.put(chunks + [kvring.Chunk(os.urandom(32), b"new")])
    assert [r.status for r in again] == [kvring.PutStatus.ALREADY_HELD] * 3 + [kvring.PutStatus.STORED], again
    assert c.get([ch.id for ch in chunks]) == [bytes(ch.data) for ch in chunks]
    assert started and all(s == (which == "driven") for s in started), started


def test_a_put_the_node_refuses_raises_its_error_on_both_paths(cluster, client_for, namespace, path):
    which, started = path
    c = client_for([cluster[0].grpc], namespace)
    wait_for(lambda: connected(c))
    with pytest.raises(kvring.InvalidArgument, match="chunks") as ei:
        c.put([kvring.Chunk(os.urandom(32), os.urandom(49 << 20))])  # above the nodes' --max-chunk-size 48MiB
    assert ei.value.message.startswith("kvring put: "), ei.value.message
    assert c.put([kvring.Chunk(os.urandom(32), b"ok")])[0].status == kvring.PutStatus.STORED  # the client goes on
    assert started and all(s == (which == "driven") for s in started), started


def test_calls_given_up_early_leave_nothing_pending(cluster, client_for, namespace, monkeypatch):
    """A call on its own completion queue (a driven put, a get read on the calling thread) that the client gives up
    early (a buffer too small, the node's error) has its last events processed, so that gRPC frees it: before,
    each such get leaked ~16 KiB."""
    released = []
    real = _stcall.release

    def recording(call):
        real(call)
        released.append(call)

    monkeypatch.setattr(_stcall, "release", recording)
    c = client_for([cluster[0].grpc], namespace)
    wait_for(lambda: connected(c))
    chunks = [kvring.Chunk(os.urandom(32), os.urandom(n)) for n in (3000, 5000, 3000)]
    assert all(r.held for r in c.put(chunks))
    got = c.get_into([ch.id for ch in chunks], [bytearray(3000), bytearray(10), bytearray(3000)])
    assert got == [3000, None, 3000]
    with pytest.raises(kvring.InvalidArgument):
        c.put([kvring.Chunk(os.urandom(32), os.urandom(49 << 20))])
    st = [getattr(x, "_state", None) for x in released]
    assert any(s is not None for s in st), "no call on its own completion queue was released"
    assert all(not s.due for s in st if s is not None), [s.due for s in st if s is not None]
