"""Routing to primary owners against real nodes: the Python ring places chunks where the cluster does, puts and gets
go straight to the owner (the connected node forwards no bytes), lookups and their leases go to the owner of the
first key, and an owner that cannot take its share leaves it to the connected node."""

from __future__ import annotations

import os
import re
import signal
import time
import urllib.request

import pytest

import kvring
from cluster import wait_for
from conftest import connected

GROUPED = kvring.Schema(model="test-model", dtype="bf16", tokens_per_chunk=16, chunks_per_group=4)


def peer_bytes(node, direction: str) -> float:
    """kvring_peer_transfer_bytes_total{direction=...} of a node: chunk bytes it moved to or from its peers."""
    with urllib.request.urlopen(f"http://{node.admin}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r'^kvring_peer_transfer_bytes_total\{direction="%s"\} (\S+)$' % direction, text, re.M)
    return float(m.group(1)) if m else 0.0


def routed_client(client_for, seeds, namespace, members=2, **kw):
    c = client_for(seeds, namespace, **kw)
    wait_for(lambda: connected(c), 10, "client to connect")
    wait_for(lambda: len(c.refresh_routing().members) == members, 15, f"a ring view of {members} members")
    c.register()
    return c


def owned_by(ring, namespace, node_id, n, other=False):
    """n fresh random ids whose primary owner is (or, with other, is not) node_id."""
    out = []
    while len(out) < n:
        cid = os.urandom(32)
        if (ring.primary(namespace, cid).id == node_id) != other:
            out.append(cid)
    return out


def test_puts_and_gets_go_straight_to_the_primary_owner(cluster, client_for, namespace):
    a, b = cluster
    c = routed_client(client_for, [a.grpc], namespace)
    st = c.routing
    assert st.enabled and st.source.id == a.id and {m.id for m in st.members} == {a.id, b.id}
    ring = st.ring
    ids = owned_by(ring, namespace, b.id, 6) + owned_by(ring, namespace, a.id, 6)
    chunks = [kvring.Chunk(cid, os.urandom(64 << 10)) for cid in ids]
    sent, recv = peer_bytes(a, "sent"), peer_bytes(a, "received")
    res = c.put(chunks)
    assert [r.status for r in res] == [kvring.PutStatus.STORED] * len(ids)
    for cid, r in zip(ids, res):
        # replication 1: the one holder is the primary owner the Python port of the ring computes
        assert [h.id for h in r.holders] == [ring.primary(namespace, cid).id]
    assert peer_bytes(a, "sent") == sent, "the connected node forwarded chunk bytes: the put was not routed"
    got = c.get(ids)
    assert got == [bytes(ch.data) for ch in chunks]
    assert peer_bytes(a, "received") == recv, "the connected node fetched chunk bytes: the get was not routed"

    # Unrouted, the same kind of put makes the connected node forward b's chunks: the metric does see routing.
    u = client_for([a.grpc], namespace, routing=False)
    wait_for(lambda: connected(u), 10, "unrouted client to connect")
    assert not u.routing.enabled
    more = [kvring.Chunk(cid, os.urandom(64 << 10)) for cid in owned_by(ring, namespace, b.id, 4)]
    assert all(r.status == kvring.PutStatus.STORED for r in u.put(more))
    assert peer_bytes(a, "sent") >= sent + 4 * (64 << 10)


def test_grouped_chunks_are_routed_by_their_group_key(cluster, client_for, namespace):
    a, b = cluster
    c = routed_client(client_for, [a.grpc], namespace, schema=GROUPED)
    ids = [os.urandom(32) for _ in range(16)]
    groups = kvring.group_keys(ids, 4)
    data = [os.urandom(4096) for _ in ids]
    res = c.put([kvring.Chunk(i, d, g) for i, d, g in zip(ids, data, groups)])
    ring = c.routing.ring
    for g, r in zip(groups, res):
        assert r.status == kvring.PutStatus.STORED
        assert [h.id for h in r.holders] == [ring.primary(namespace, g).id]
    assert c.get(ids) == data
    bufs = [bytearray(4096) for _ in ids[4:]]
    assert c.get_into(ids[4:], bufs, groups=groups[4:]) == [4096] * 12
    assert [bytes(b) for b in bufs] == data[4:]
    assert c.lookup(ids).held == 16


def test_lookup_lease_lives_on_the_owner_and_is_released_there(cluster, client_for, namespace):
    a, b = cluster
    c = routed_client(client_for, [a.grpc], namespace)
    ids = owned_by(c.routing.ring, namespace, b.id, 1) + [os.urandom(32) for _ in range(3)]
    assert c.put([kvring.Chunk(cid, b"x" * 1000) for cid in ids])[0].held
    hit = c.lookup(ids, pin=30)
    assert hit.held == 4 and hit.lease != 0
    assert c.release_lease(hit.lease) is True  # released where it was granted (b), not on the connected node
    assert c.release_lease(hit.lease) is False


def test_an_owner_that_is_down_leaves_its_share_to_the_connected_node(make_node, client_for, namespace):
    x = make_node()
    y = make_node(join=x.gossip)
    c = routed_client(client_for, [x.grpc], namespace)
    ring = c.routing.ring
    mine = owned_by(ring, namespace, x.id, 3)
    theirs = owned_by(ring, namespace, y.id, 3)
    y.kill()
    res = c.put([kvring.Chunk(cid, b"v" * 2048) for cid in mine + theirs])  # no exception: y's share went to x
    assert all(r.status == kvring.PutStatus.STORED for r in res[:3])
    for r in res[3:]:
        assert r.status in (kvring.PutStatus.STORED, kvring.PutStatus.FAILED), r
        assert r.status == kvring.PutStatus.STORED or r.reason
    got = c.read(mine + theirs)
    assert [g.found for g in got[:3]] == [True] * 3
    assert all(g.data == b"v" * 2048 for g in got if g.found)
    assert all(g.reason for g in got if not g.found)


def test_routing_can_be_turned_off(cluster, client_for, namespace):
    a, _ = cluster
    c = client_for([a.grpc], namespace, routing=False)
    wait_for(lambda: connected(c), 10, "client to connect")
    assert c.routing == kvring.RoutingState(enabled=False)
    with pytest.raises(kvring.KvringError, match="routing is disabled"):
        c.refresh_routing()
    ids = [os.urandom(32) for _ in range(4)]
    assert all(r.held for r in c.put([(i, b"abc") for i in ids]))
    assert c.get(ids) == [b"abc"] * 4


def stopped(pid: int) -> bool:
    """Whether process pid is stopped now (state T in /proc/pid/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_an_owner_that_hangs_is_skipped_after_the_answer_timeout(make_node, client_for, namespace):
    x = make_node()
    y = make_node(join=x.gossip)
    # answer timeout = dial_timeout + probe_timeout = 1 s
    c = routed_client(client_for, [x.grpc], namespace, dial_timeout=0.5, probe_timeout=0.5, call_timeout=20)
    ring = c.routing.ring
    mine = owned_by(ring, namespace, x.id, 2)
    theirs = owned_by(ring, namespace, y.id, 2)
    assert all(r.held for r in c.put([kvring.Chunk(cid, b"h" * 512) for cid in mine + theirs]))
    os.kill(y.pid, signal.SIGSTOP)  # y keeps its connections but answers nothing
    # kill(2) returns before the stop takes effect: a request y is serving on its other core may still be answered
    wait_for(lambda: stopped(y.pid), 10, "the node to be stopped")
    try:
        t = time.monotonic()
        got = c.read(mine + theirs)
        took = time.monotonic() - t
    finally:
        os.kill(y.pid, signal.SIGCONT)
    assert took >= 1.0, "the owner's share cannot have been given up before the answer timeout"
    assert took < 20, "the call went on to its deadline"
    assert [g.found for g in got[:2]] == [True, True] and all(g.data == b"h" * 512 for g in got[:2])
    for g in got[2:]:  # y's chunks: x coordinated them (y silent), so a miss with a reason, or found elsewhere
        assert g.found or g.reason
