"""kvring.ring (the client's port of the Go ring's placement) against vectors generated from the Go ring
(testdata/ring_vectors.json, written by ring/pyvectors_test.go: `go generate ./ring/`; `go test ./ring/` fails
when the file no longer matches the Go ring)."""

import hashlib
import json
import pathlib
import struct

import pytest

from kvring import ring

VECTORS = json.loads((pathlib.Path(__file__).parent / "testdata" / "ring_vectors.json").read_text())


def _cfg(c: dict) -> ring.RingConfig:
    return ring.RingConfig(c["partition_count"], c["replication_factor"], c["load"], c["virtual_nodes"], c["hasher"])


@pytest.mark.parametrize("impl", [ring._xxh64_py, ring.xxh64], ids=["pure-python", "selected"])
def test_xxh64_matches_go(impl):
    for v in VECTORS["xxhash64"]:
        assert impl(bytes.fromhex(v["input"])) == int(v["sum"]), v["input"]


@pytest.mark.parametrize("c", VECTORS["fingerprints"], ids=lambda c: f"{c['partition_count']}/{c['load']}/{c['hasher']}")
def test_config_fingerprint_and_validation_match_go(c):
    cfg = _cfg(c)
    assert cfg.fingerprint() == c["fingerprint"]
    if c["valid"]:
        cfg.validate()
    else:
        with pytest.raises(ring.RingError):
            cfg.validate()


@pytest.fixture(params=["pure-python", "numpy"])
def circle(request, monkeypatch):
    """Runs a test with each way of building the circle (kvring.ring uses numpy when it can)."""
    if request.param == "numpy":
        pytest.importorskip("numpy")
        monkeypatch.setattr(ring, "_circle", ring._circle_numpy)
    else:
        monkeypatch.setattr(ring, "_circle", ring._circle_py)
    return request.param


@pytest.mark.parametrize("v", VECTORS["rings"], ids=lambda v: v["name"])
def test_placement_matches_go(v, circle):
    cfg = _cfg(v["config"])
    members = [ring.Member(m, f"addr-of-{m}") for m in v["members"]]
    if v.get("error"):
        with pytest.raises(ring.RingError):
            ring.Ring(members, 1, cfg)
        return
    r = ring.Ring(members, 7, cfg)
    assert r.epoch == 7 and len(r) == len(set(v["members"]))
    ids = [m.id for m in r.members]
    assert ids == sorted(v["members"])
    assert r.max_load() == v["max_load"]
    assert r.load_distribution() == v["loads"]
    width = min(cfg.replication_factor, len(ids))
    pos = {m: i for i, m in enumerate(ids)}
    for p, *want in v["owners"]:
        got = [pos[m.id] for m in r.partition_owners(p, cfg.replication_factor)]
        assert got == want, f"partition {p}"
        assert len(got) == width
    table = hashlib.sha256()
    for p in range(cfg.partition_count):
        for m in r.partition_owners(p, cfg.replication_factor):
            table.update(struct.pack("<H", pos[m.id]))
    assert table.hexdigest() == v["owners_sha256"], "owner table differs from the Go ring's"
    for k in v["keys"]:
        cid = bytes.fromhex(k["id"])
        assert ring.key_hash(k["namespace"], cid) == int(k["hash"])
        assert r.partition(k["namespace"], cid) == k["partition"]
        assert [m.id for m in r.owners(k["namespace"], cid, cfg.replication_factor)] == k["owners"]
        prim = r.primary(k["namespace"], cid)
        assert prim.id == k["owners"][0] and prim.addr == f"addr-of-{prim.id}"


@pytest.mark.parametrize("v", [v for v in VECTORS["rings"] if not v.get("error")], ids=lambda v: v["name"])
def test_spread_set_matches_go(v):
    assert v["spread"], "no spread-set vectors: regenerate testdata (go generate ./ring/)"
    r = ring.Ring([ring.Member(m, f"addr-of-{m}") for m in v["members"]], 1, _cfg(v["config"]))
    for s in v["spread"]:
        got = r.spread_set(s["namespace"], bytes.fromhex(s["key"]), s["width"])
        assert [m.id for m in got] == s["members"], s
        assert all(m.addr == f"addr-of-{m.id}" for m in got)
        if got:
            assert got[0] == r.primary(s["namespace"], bytes.fromhex(s["key"]))


def test_empty_ring_has_no_spread_set():
    assert ring.Ring([], 1, ring.RingConfig()).spread_set("ns", b"\0" * 32, 4) == []


def test_member_order_does_not_matter():
    cfg = ring.RingConfig()
    a = ring.Ring([ring.Member("n2"), ring.Member("n1"), ring.Member("n3")], 1, cfg)
    b = ring.Ring([ring.Member("n3"), ring.Member("n2"), ring.Member("n1")], 1, cfg)
    assert [a.partition_owners(p, 1) for p in range(cfg.partition_count)] == [
        b.partition_owners(p, 1) for p in range(cfg.partition_count)
    ]


def test_empty_ring_has_no_primary():
    r = ring.Ring([], 1, ring.RingConfig())
    assert len(r) == 0 and r.owners("ns", b"\0" * 32, 1) == []
    with pytest.raises(ring.RingError, match="no members"):
        r.primary("ns", b"\0" * 32)


@pytest.mark.parametrize("impl", [ring._circle_py, ring._circle_numpy], ids=["pure-python", "numpy"])
def test_shared_points_are_reported(impl):
    if impl is ring._circle_numpy:
        pytest.importorskip("numpy")
    # The same ID twice shares every point (Ring refuses duplicate IDs before it gets here).
    with pytest.raises(ring.RingError, match="'a' and 'a' share point"):
        impl(["a", "a"], 2, 7)
