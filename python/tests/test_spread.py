"""Hot-group spreading (client/spread.go): once lookups report a group spread, the client sends its lookups and gets to
members of the group's spread set (the less loaded of two random ones) instead of always to its primary owner; puts
still go to the primary. Unit tests of the routing decisions, then real nodes that spread a hot prompt."""

from __future__ import annotations

import hashlib
import os
import re
import time
import urllib.request

import kvring
from cluster import wait_for
from conftest import connected
from kvring import route
from kvring.ring import Member, Ring, RingConfig


class _IdleConn:
    """Just enough of a Conn for a Router whose loop never fetches a view (never connected)."""

    class cfg:
        jitter = 0.0

    class state:
        status = kvring.ConnStatus.CONNECTING


def _router(members: list[str], self_id: str = "zz"):
    r = route.Router(_IdleConn(), 1.0)
    ring = Ring([Member(m, f"127.0.0.1:{19001 + i}") for i, m in enumerate(members)], 1, RingConfig())
    main = object()
    r._publish(route._View(ring, self_id, main, "127.0.0.1:19000", time.time()), "")
    return r, ring, main


KEY = hashlib.sha256(b"a spread group").digest()


def test_reads_of_a_spread_group_go_to_every_member_of_its_spread_set():
    r, ring, main = _router(["a", "b", "c", "d", "e", "f"])  # the connected node is none of them: no main share
    try:
        keys = [KEY] * 3
        primary = ring.primary("ns", KEY)
        spread = ring.spread_set("ns", KEY, 4)
        assert len(spread) == 4 and spread[0] == primary
        in_set = {m.id for m in spread}
        now = time.monotonic()
        r.hints.learn("ns", [KEY], [4], now)
        seen: dict[str, int] = {}
        for _ in range(400):
            shares = r.split(main, "ns", keys, reads=True)
            assert shares is not None and len(shares) == 1 and shares[0].idx == [0, 1, 2], shares
            assert shares[0].owner.id in in_set, f"read sent to {shares[0].owner}, outside the spread set {spread}"
            seen[shares[0].owner.id] = seen.get(shares[0].owner.id, 0) + 1
            w = r.split(main, "ns", keys)
            assert w[0].owner == primary, "a put went elsewhere than the primary"
        assert set(seen) == in_set, f"reads reached {seen}, want every member of {spread}"

        r.hints.learn("ns", [KEY], [0], now)
        assert r.split(main, "ns", keys, reads=True)[0].owner == primary, "a group reported no longer spread"
        r.hints.learn("ns", [KEY], [4], now - 2 * route.SPREAD_HINT_TTL)
        assert r.split(main, "ns", keys, reads=True)[0].owner == primary, "an ended report still routes reads"
        r.hints.learn("ns", [KEY], [4, 4], now)  # widths that do not match the runs teach nothing
        assert r.split(main, "ns", keys, reads=True)[0].owner == primary
        r.hints.learn("other-ns", [KEY], [4], now)  # hints are per namespace
        assert r.split(main, "ns", keys, reads=True)[0].owner == primary
    finally:
        r.close()


def test_the_less_loaded_of_two_members_is_asked_and_other_groups_keep_their_owner():
    r, ring, main = _router(["a", "b", "c", "d", "e", "f"])
    try:
        spread = ring.spread_set("ns", KEY, 4)
        now = time.monotonic()
        r.hints.learn("ns", [KEY], [4], now)
        busy = spread[1]
        for m in spread:
            r.hints.note_load(m.addr, 5000 if m == busy else 10, now)
        plain = hashlib.sha256(b"a group nobody spread").digest()
        seen = set()
        for _ in range(300):
            shares = r.split(main, "ns", [KEY, KEY, plain, plain], reads=True)
            by = {i: s.owner for s in shares for i in s.idx}
            assert by[0] == by[1] and by[2] == by[3] == ring.primary("ns", plain)
            seen.add(by[0].id)
        # the busiest member loses every draw it is in; the others share the reads
        assert seen == {m.id for m in spread} - {busy.id}
        assert r.hints.load(busy.addr, now) == 5000
        assert r.hints.load(busy.addr, now + route.SPREAD_HINT_TTL) == 0, "a load figure outlives its time"
    finally:
        r.close()


def test_a_read_that_picks_the_connected_node_goes_over_the_main_channel():
    members = ["a", "b", "c", "d", "e", "f"]
    ring = Ring([Member(m, f"127.0.0.1:{19001 + i}") for i, m in enumerate(members)], 1, RingConfig())
    spread = ring.spread_set("ns", KEY, 4)
    r, _, main = _router(members, self_id=spread[2].id)
    try:
        r.hints.learn("ns", [KEY], [4], time.monotonic())
        mains = 0
        for _ in range(200):
            shares = r.split(main, "ns", [KEY], reads=True)
            if shares is None:  # one share, for the connected node: the batch goes over main whole
                mains += 1
            else:
                assert shares[0].owner.id in {m.id for m in spread} - {spread[2].id}
        assert 0 < mains < 200
    finally:
        r.close()


def test_two_choices_picks_the_lower_load():
    assert route.two_choices(1, lambda i: 0) == 0
    loads = [3, 1, 2]
    got = {route.two_choices(3, loads.__getitem__) for _ in range(200)}
    assert got == {1, 2}  # 0 is the most loaded: it loses every draw


# --- real nodes ----------------------------------------------------------------------------------------------------

SPREAD_GROUP = kvring.Schema(model="test-model", dtype="bf16", tokens_per_chunk=16, chunks_per_group=8)


def metric(node, name: str) -> float:
    with urllib.request.urlopen(f"http://{node.admin}/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else 0.0


def test_a_hot_prompt_is_served_by_its_spread_set(make_node, client_for, namespace):
    spread = ["--spread-threshold", "4", "--spread-width", "4", "--spread-ttl", "1m"]
    first = make_node(extra=spread)
    nodes = [first] + [make_node(extra=spread, join=first.gossip) for _ in range(4)]
    c = client_for([n.grpc for n in nodes], namespace, schema=SPREAD_GROUP, call_timeout=10)
    wait_for(lambda: connected(c), 10, "client to connect")
    wait_for(lambda: len(c.refresh_routing().members) == len(nodes), 20, f"a ring view of {len(nodes)} members")
    c.register()
    ids = [hashlib.sha256(b"hot system prompt %d" % i).digest() for i in range(8)]
    groups = kvring.group_keys(ids, 8)
    data = [os.urandom(32 << 10) for _ in ids]
    assert all(r.held for r in c.put([kvring.Chunk(i, d, g) for i, d, g in zip(ids, data, groups)]))

    def lookup_all(n: int) -> None:
        for _ in range(n):
            held = c.lookup(ids).held
            assert held == len(ids), f"lookup counted {held} of {len(ids)} chunks"

    lookup_all(4)  # the group is hot now
    wait_for(lambda: sum(metric(n, "kvring_spread_copied_chunks_total") for n in nodes) > 0, 20,
             "the hot group to be copied to its spread set")

    def learned():
        lookup_all(1)
        return c._router.hints.width(namespace, groups[0], time.monotonic()) > 1

    wait_for(learned, 20, "a lookup to report the group spread")
    width = c._router.hints.width(namespace, groups[0], time.monotonic())
    members = {m.id for m in c.routing.ring.spread_set(namespace, groups[0], width)}
    assert len(members) >= 3

    before = [metric(n, "kvring_lookups_total") for n in nodes]
    matched = sum(metric(n, "kvring_lookup_ids_matched_total") for n in nodes)
    lookups = 100
    lookup_all(lookups)
    after = [metric(n, "kvring_lookups_total") for n in nodes]
    coordinators = {n.id for n, b, a in zip(nodes, before, after) if a > b}
    assert len(coordinators) >= 3, (
        f"{lookups} lookups of the hot group were coordinated by {sorted(coordinators)} (before {before}, after "
        f"{after}), want the spread set's {sorted(members)} sharing them")
    assert coordinators <= members, f"lookups coordinated by {sorted(coordinators - members)}, outside the spread set"
    assert sum(after) - sum(before) == lookups, "a routed lookup was coordinated more than once (or not at all)"
    got_matched = sum(metric(n, "kvring_lookup_ids_matched_total") for n in nodes) - matched
    assert got_matched == lookups * len(ids), f"the lookups matched {got_matched} ids, want {lookups * len(ids)}"

    hit, miss = 'kvring_get_chunks_total{result="hit"}', 'kvring_get_chunks_total{result="miss"}'
    hits = [metric(n, hit) for n in nodes]
    misses = sum(metric(n, miss) for n in nodes)
    gets = 20
    for _ in range(gets):
        assert c.get(ids) == data
    bufs = [bytearray(32 << 10) for _ in ids]
    assert c.get_into(ids, bufs) == [32 << 10] * len(ids)
    assert [bytes(b) for b in bufs] == data
    after = [metric(n, hit) for n in nodes]
    served = {n.id for n, b, a in zip(nodes, hits, after) if a > b}
    assert len(served) >= 2 and served <= members, f"gets of the hot group coordinated by {sorted(served)}"
    assert sum(after) - sum(hits) == (gets + 1) * len(ids), "a get of the hot group was not one hit per chunk"
    assert sum(metric(n, miss) for n in nodes) == misses
