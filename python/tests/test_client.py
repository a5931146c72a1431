"""The client against real kvring nodes: every put outcome, reads, leases, groups, bad input."""

import json
import os
import time
import urllib.request

import numpy as np
import pytest

import kvring
from cluster import wait_for
from conftest import SCHEMA, connected


def prompt_ids(n, seed=0, tpc=16):
    rng = np.random.default_rng(seed)
    return kvring.chunk_ids(rng.integers(0, 2**32, size=n * tpc, dtype=np.uint64), tpc)


@pytest.fixture
def client(cluster, client_for, namespace):
    c = client_for([cluster[0].grpc], namespace)
    wait_for(lambda: connected(c), what="client to connect")
    return c


def test_construction_never_blocks_and_calls_fail_fast_while_unreachable(client_for, namespace):
    t = time.monotonic()
    c = client_for(["127.0.0.1:1"], namespace)  # nothing listens on port 1
    assert time.monotonic() - t < 0.5
    assert c.state.status in (kvring.ConnStatus.CONNECTING,)
    wait_for(lambda: c.state.last_error, what="a failed attempt")
    t = time.monotonic()
    with pytest.raises(kvring.Unavailable) as ei:
        c.lookup(prompt_ids(2))
    assert time.monotonic() - t < 0.5
    assert "not connected to any kvring node" in str(ei.value)
    assert "127.0.0.1:1" in str(ei.value) and "refused" in str(ei.value).lower()


def test_put_stored_then_already_held_with_holders(client, cluster):
    ids = prompt_ids(3, seed=1)
    data = [os.urandom(1000), np.arange(4096, dtype=np.float32), memoryview(os.urandom(3 << 20))]
    res = client.put(list(zip(ids, data)))
    assert [r.status for r in res] == [kvring.PutStatus.STORED] * 3
    node_ids = {n.id for n in cluster}
    for r, i in zip(res, ids):
        assert r.id == i and r.held and r.holders and r.holders[0].id in node_ids and not r.degraded
    again = client.put([kvring.Chunk(ids[0], data[0])])  # eager (small)
    assert again[0].status == kvring.PutStatus.ALREADY_HELD and again[0].holders
    again = client.put([kvring.Chunk(ids[2], data[2])])  # two-phase (large): no bytes needed
    assert again[0].status == kvring.PutStatus.ALREADY_HELD


def test_get_returns_verified_bytes_and_misses(client):
    ids = prompt_ids(4, seed=2)
    blobs = [os.urandom(5), os.urandom((1 << 20) + 17), os.urandom(2 << 20)]
    assert all(r.status == kvring.PutStatus.STORED for r in client.put(list(zip(ids, blobs))))
    got = client.get(ids)
    assert got[:3] == blobs and got[3] is None
    res = client.read(ids)
    assert res[3].found is False and res[3].reason
    assert res[0].holder is not None and res[0].holder.id


def test_get_into_fills_caller_buffers(client):
    ids = prompt_ids(3, seed=3)
    tensors = [np.random.default_rng(i).standard_normal((16, 128), dtype=np.float32) for i in range(2)]
    client.put(list(zip(ids, tensors)))
    out = [np.zeros((16, 128), dtype=np.float32) for _ in range(3)]
    sizes = client.get_into(ids, out)
    assert sizes == [tensors[0].nbytes, tensors[1].nbytes, None]
    np.testing.assert_array_equal(out[0], tensors[0])
    np.testing.assert_array_equal(out[1], tensors[1])
    # one big buffer, filled slice by slice
    big = bytearray(2 * tensors[0].nbytes)
    mv = memoryview(big)
    n = tensors[0].nbytes
    assert client.get_into(ids[:2], [mv[:n], mv[n:]]) == [n, n]
    assert bytes(big) == tensors[0].tobytes() + tensors[1].tobytes()
    # a buffer too small is a miss, the others are still read
    small = [bytearray(10), np.zeros((16, 128), dtype=np.float32)]
    assert client.get_into(ids[:2], small) == [None, n]
    np.testing.assert_array_equal(small[1], tensors[1])


def test_lookup_counts_leading_held_and_pins_under_a_lease(client):
    ids = prompt_ids(6, seed=4)
    assert client.lookup(ids).held == 0
    client.put([(i, os.urandom(100)) for i in ids[:3]] + [(ids[4], b"x")])
    r = client.lookup(ids)
    assert r.held == 3 and r.lease == 0
    r = client.lookup(ids, pin=30)
    assert r.held == 3 and r.lease != 0 and 0 < r.lease_ttl <= 30
    assert client.release_lease(r.lease) is True
    assert client.release_lease(r.lease) is False


def test_grouped_namespace_carries_group_keys(cluster, client_for, namespace):
    schema = kvring.Schema(model="test-model", dtype="bf16", tokens_per_chunk=16, chunks_per_group=4)
    c = client_for([cluster[1].grpc], namespace, schema)
    wait_for(lambda: connected(c))
    ids = prompt_ids(10, seed=5)
    keys = kvring.group_keys(ids, 4)
    with pytest.raises(kvring.InvalidArgument, match="group key"):
        c.put([(ids[0], b"a")])
    res = c.put([kvring.Chunk(i, os.urandom(64), k) for i, k in zip(ids, keys)])
    assert all(r.status == kvring.PutStatus.STORED for r in res)
    assert c.lookup(ids).held == 10
    assert c.lookup_placed(ids[5:], keys[5:]).held == 5
    assert all(x is not None for x in c.get(ids))
    assert all(x is not None for x in c.get_placed(ids[6:], keys[6:]))
    # a second client through the other node sees the same chunks
    c2 = client_for([cluster[0].grpc], namespace, schema)
    wait_for(lambda: connected(c2))
    assert c2.lookup(ids).held == 10


def test_bad_input_surfaces_the_servers_message_naming_the_field(client, client_for, cluster, namespace):
    with pytest.raises(kvring.InvalidArgument) as ei:
        client.put([(b"short", b"data")])
    assert "id" in ei.value.message and "32 bytes" in ei.value.message, ei.value.message
    with pytest.raises(kvring.InvalidArgument) as ei:
        client.lookup([bytes(31)])
    assert "ids[0]" in ei.value.message, ei.value.message
    # oversize chunk: the nodes take at most 48 MiB
    with pytest.raises(kvring.InvalidArgument) as ei:
        client.put([(prompt_ids(1, seed=6)[0], bytes((48 << 20) + 1))])
    assert "size" in ei.value.message, ei.value.message
    # another schema under the same namespace name
    client.register()
    other = client_for([cluster[0].grpc], namespace, kvring.Schema(model="test-model", dtype="bf16", tokens_per_chunk=32))
    wait_for(lambda: connected(other))
    with pytest.raises(kvring.SchemaMismatch) as ei:
        other.lookup(prompt_ids(1))
    assert "tokens_per_chunk" in ei.value.message and ei.value.reason == "SCHEMA_MISMATCH", ei.value.message
    assert isinstance(ei.value, kvring.FailedPrecondition)


def test_rejected_when_the_owners_have_no_space(make_node, client_for, namespace):
    n = make_node(extra=["--memory-limit", "16MiB", "--max-chunk-size", "16MiB"])
    c = client_for([n.grpc], namespace)
    wait_for(lambda: connected(c))
    ids = prompt_ids(2, seed=7)
    # 12 MiB is more than --max-staged (half the memory limit) allows
    res = c.put([(ids[0], os.urandom(12 << 20)), (ids[1], b"small")])
    assert res[0].status == kvring.PutStatus.REJECTED and not res[0].held and res[0].reason, res[0]
    # the node classifies the cause (PutChunkResult.code): no space is RESOURCE_EXHAUSTED
    assert res[0].code == kvring.ResourceExhausted.default_code, res[0]
    assert "no space" in res[0].reason
    assert res[1].status == kvring.PutStatus.STORED


def test_degraded_and_failed_when_an_owner_is_down(make_node, client_for, namespace):
    a = make_node()
    b = make_node(join=a.gossip)
    c = client_for([a.grpc], namespace, replication=2, min_replicas=2)
    wait_for(lambda: connected(c))
    ids = prompt_ids(8, seed=8)

    def both_hold():
        return all(len(r.holders) == 2 for r in c.put([(ids[0], b"x")]))

    wait_for(both_hold, 30, "both nodes in the ring")
    b.kill()
    res = c.put([(i, os.urandom(1000)) for i in ids[1:]])
    for r in res:  # min_replicas 2 and one of two nodes down: never reported stored
        assert r.status == kvring.PutStatus.FAILED and r.reason, r
    # a namespace that needs one holder of two: stored, degraded
    c1 = client_for([a.grpc], namespace + "-r1", replication=2, min_replicas=1)
    wait_for(lambda: connected(c1))
    res = c1.put([(i, os.urandom(1000)) for i in ids[1:]])
    for r in res:
        assert r.status == kvring.PutStatus.STORED and r.degraded and len(r.holders) == 1, r
    assert c1.stats.degraded_puts == len(res)


def test_reads_of_an_unwritten_namespace_miss_without_registering_it(cluster, client_for, namespace):
    c = client_for([cluster[0].grpc], namespace + "-never-written")
    wait_for(lambda: connected(c), what="client to connect")
    ids = prompt_ids(2, seed=7)
    assert c.lookup(ids).held == 0
    got = c.read(ids)
    assert [r.found for r in got] == [False, False]
    assert "is not registered" in got[0].reason
    with urllib.request.urlopen(f"http://{cluster[0].admin}/v1/namespaces", timeout=5) as r:
        names = [n.get("name") for n in json.load(r).get("namespaces") or []]
    assert namespace + "-never-written" not in names, names
