"""The cluster's chunk placement, ported from the Go ring (``ring/``), so the client can send each chunk to its primary
owner like the Go SDK.

A chunk key (namespace, id) hashes to one of ``partition_count`` partitions with xxHash64. Each member has
``virtual_nodes`` points on a 64-bit circle (a splitmix64 sequence seeded with xxHash64 of its id); partition p sits at
floor(p * 2**64 / P). Partitions are assigned to members by consistent hashing with bounded loads, greedy in partition
order: the member of the first point clockwise whose member has room, no member being primary for more than
max(ceil(P/M), floor(P * load / M)) partitions. Further owners come from a clockwise walk over the points.
:func:`RingConfig.fingerprint` names the algorithm and settings: a node whose fingerprint differs places keys
differently, and the client then routes nothing.

Everything here is pure computation: no I/O, clock or threads. :class:`Ring` is immutable once built and safe to
share between threads. python/tests/test_ring.py checks it against vectors generated from the Go ring
(python/tests/testdata/ring_vectors.json, ``go generate ./ring/``).
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import math
import struct
from typing import NamedTuple, Sequence

__all__ = ["xxh64", "RingConfig", "Member", "Ring", "RingError"]

_M64 = 0xFFFFFFFFFFFFFFFF
_P1 = 11400714785074694791
_P2 = 14029467366897019727
_P3 = 1609587929392839161
_P4 = 9650029242287828579
_P5 = 2870177450012600261


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M64
    return (_rotl(acc, 31) * _P1) & _M64


def _merge(acc: int, val: int) -> int:
    acc ^= _round(0, val)
    return (acc * _P1 + _P4) & _M64


def _xxh64_py(data: bytes, seed: int = 0) -> int:
    """xxHash64 of data (pure Python; ~3 µs for a short key)."""
    n = len(data)
    i = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _M64
        v2 = (seed + _P2) & _M64
        v3 = seed
        v4 = (seed - _P1) & _M64
        lanes = struct.unpack_from(f"<{(n // 32) * 4}Q", data)
        for j in range(0, len(lanes), 4):
            v1 = _round(v1, lanes[j])
            v2 = _round(v2, lanes[j + 1])
            v3 = _round(v3, lanes[j + 2])
            v4 = _round(v4, lanes[j + 3])
        i = (n // 32) * 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M64
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, i)
        h ^= _round(0, k)
        h = (_rotl(h, 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h ^= (k * _P1) & _M64
        h = (_rotl(h, 23) * _P2 + _P3) & _M64
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M64
        h = (_rotl(h, 11) * _P1) & _M64
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    h ^= h >> 32
    return h


def _pick_xxh64():
    try:
        import xxhash  # noqa: PLC0415 - optional (Debian: python3-xxhash)

        f = xxhash.xxh64_intdigest
        return lambda data: f(data)
    except ImportError:
        return _xxh64_py


xxh64 = _pick_xxh64()
xxh64.__doc__ = "xxHash64 (seed 0) of a bytes-like object, as an int."

HASHER_XXHASH64 = "xxhash64"
_PLACEMENT_VERSION = "kvring-ring-v2"  # ring/config.go placementVersion
MAX_PARTITION_COUNT = 1 << 16
MAX_REPLICATION_FACTOR = 64
MAX_VIRTUAL_NODES = 1024


class RingError(ValueError):
    """The settings or members cannot make a ring (the Go ring's New or Validate would refuse them)."""


def _go_float_g(x: float) -> str:
    """strconv.FormatFloat(x, 'g', -1, 64): the shortest representation, %e when the exponent is < -4 or >= 6."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if math.copysign(1, x) < 0 else "0"
    sign = "-" if x < 0 else ""
    r = repr(abs(x))
    # shortest digits and decimal exponent from repr (the same shortest round-trip digits Go uses)
    if "e" in r:
        m, _, e = r.partition("e")
        digits = m.replace(".", "")
        point = (m.index(".") if "." in m else len(m)) + int(e)
    else:
        ip, _, fp = r.partition(".")
        if fp == "0":
            fp = ""
        digits = ip + fp
        point = len(ip)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0") or "0"
    exp = point - 1
    if exp < -4 or exp >= 6:
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{m}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


@dataclasses.dataclass(frozen=True)
class RingConfig:
    """The cluster-wide ring settings (the Topology call's RingSettings). Defaults are the Go ring's."""

    partition_count: int = 65521
    replication_factor: int = 1
    load: float = 1.15
    virtual_nodes: int = 256
    hasher: str = HASHER_XXHASH64

    def validate(self) -> None:
        """Raise :class:`RingError` for the first setting out of range (ring/config.go Validate)."""
        if not 0 < self.partition_count <= MAX_PARTITION_COUNT:
            raise RingError(f"partition count {self.partition_count} not in [1, {MAX_PARTITION_COUNT}]")
        if not 0 < self.replication_factor <= MAX_REPLICATION_FACTOR:
            raise RingError(f"replication factor {self.replication_factor} not in [1, {MAX_REPLICATION_FACTOR}]")
        if not math.isfinite(self.load) or self.load <= 1:
            raise RingError(f"load {self.load} must be a finite number > 1")
        if not 2 <= self.virtual_nodes <= MAX_VIRTUAL_NODES:
            raise RingError(f"virtual nodes {self.virtual_nodes} not in [2, {MAX_VIRTUAL_NODES}]")
        if self.hasher != HASHER_XXHASH64:
            raise RingError(f"unknown hasher {self.hasher!r} (want {HASHER_XXHASH64!r})")

    def max_load(self, members: int) -> int:
        """The most partitions one of ``members`` members may be primary for: max(ceil(P/M), floor(P * load / M)), at
        most P (ring/config.go maxLoad)."""
        if members <= 0:
            return 0
        p = self.partition_count
        bound = float(p) * self.load / float(members)
        if not bound < p:
            return p
        return max(-(-p // members), math.floor(bound))

    def fingerprint(self) -> str:
        """The Go ring's Config.Fingerprint: equal fingerprints place every key identically."""
        s = (
            f"{_PLACEMENT_VERSION} partitions={self.partition_count} replication={self.replication_factor} "
            f"load={_go_float_g(self.load)} vnodes={self.virtual_nodes} hasher={self.hasher}"
        )
        return hashlib.sha256(s.encode()).hexdigest()[:16]


class Member(NamedTuple):
    """A ring member: its id (placement depends on it alone) and gRPC address."""

    id: str
    addr: str = ""


def key_hash(namespace: str, cid: bytes) -> int:
    """xxHash64(len(namespace) as 8 little-endian bytes || namespace || id): the chunk key's hash."""
    ns = namespace.encode()
    return xxh64(struct.pack("<Q", len(ns)) + ns + bytes(cid))


_VNODE_STEP = 0x9E3779B97F4A7C15  # ring/hash.go vnodeStep
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def _circle_py(ids: Sequence[str], virtual_nodes: int, parts: int) -> tuple[list[int], list[int]]:
    """The circle (ring/placement.go buildVnodes): every member's points in order, as two lists, the member index
    of each point and its end, the partitions at or before it (partition p sits at floor(p * 2**64 / P), so end =
    ceil((point + 1) * P / 2**64) <= P). A member's points are mix64(seed + i * step) for i = 1..virtual_nodes,
    seed = xxh64(id): the splitmix64 sequence. Raises :class:`RingError` when two points coincide."""
    keys: list[int] = []  # point << 33 | end << 16 | member: ends <= P <= 2**16, members < P
    ap = keys.append
    add = parts + _M64
    for mi, mid in enumerate(ids):
        s = xxh64(mid.encode())
        for _ in range(virtual_nodes):
            s = (s + _VNODE_STEP) & _M64
            z = ((s ^ (s >> 30)) * _MIX1) & _M64
            z = ((z ^ (z >> 27)) * _MIX2) & _M64
            z ^= z >> 31
            ap((z << 33) | (((z * parts + add) >> 64) << 16) | mi)
    keys.sort()
    points = [k >> 33 for k in keys]
    if any(map(int.__eq__, points, points[1:])):
        i = next(i for i in range(1, len(points)) if points[i] == points[i - 1])
        raise RingError(f"members {ids[keys[i - 1] & 0xFFFF]!r} and {ids[keys[i] & 0xFFFF]!r} share point {points[i]:#x}")
    return [k & 0xFFFF for k in keys], [(k >> 16) & 0x1FFFF for k in keys]


def _circle_numpy(ids: Sequence[str], virtual_nodes: int, parts: int) -> tuple[list[int], list[int]]:
    """_circle_py with numpy's wrapping uint64 arithmetic: the same lists, several times faster."""
    import numpy as np  # noqa: PLC0415 - optional

    u = np.uint64
    seeds = np.array([xxh64(i.encode()) for i in ids], dtype=u)
    steps = np.arange(1, virtual_nodes + 1, dtype=u) * u(_VNODE_STEP)
    z = (seeds[:, None] + steps[None, :]).ravel()
    z = (z ^ (z >> u(30))) * u(_MIX1)
    z = (z ^ (z >> u(27))) * u(_MIX2)
    z ^= z >> u(31)
    order = np.argsort(z, kind="stable")
    points = z[order]
    member = order // virtual_nodes
    same = np.flatnonzero(points[1:] == points[:-1])
    if len(same):
        i = int(same[0]) + 1
        raise RingError(f"members {ids[int(member[i - 1])]!r} and {ids[int(member[i])]!r} share point {int(points[i]):#x}")
    # end = ceil((v + 1) * P / 2**64) = floor(((v + 1) * P - 1) / 2**64) + 1, in 64-bit pieces: v = hi * 2**32 + lo
    hi, lo = points >> u(32), points & u(0xFFFFFFFF)
    p = u(parts)
    ends = ((hi * p + (((lo + u(1)) * p - u(1)) >> u(32))) >> u(32)) + u(1)
    return member.tolist(), ends.tolist()


def _pick_circle():
    try:
        import numpy  # noqa: F401, PLC0415 - optional (Debian: python3-numpy)

        return _circle_numpy
    except ImportError:
        return _circle_py


_circle = _pick_circle()


class Ring:
    """An immutable placement snapshot: (namespace, id) -> partition -> owners, primary first. Building one costs
    members x virtual_nodes points, one sort and one pass over the points: with the defaults at 256 members about
    30 ms of CPU with numpy, 125 ms without (python/bench/ring_build.py). Owners beyond the primary are walked on
    first use of a partition and remembered; lookups do one hash. Safe for concurrent use."""

    def __init__(self, members: Sequence[Member], epoch: int, cfg: RingConfig) -> None:
        cfg.validate()
        ms = sorted(members, key=lambda m: m.id.encode())
        for i, m in enumerate(ms):
            if not m.id:
                raise RingError(f"member with address {m.addr!r} has an empty ID")
            if i and ms[i - 1].id == m.id:
                raise RingError(f"duplicate member ID {m.id!r}")
        if len(ms) > cfg.partition_count:
            raise RingError(f"{len(ms)} members cannot share {cfg.partition_count} partitions "
                            f"(at most {cfg.partition_count} members)")
        self.epoch = epoch
        self.config = cfg
        self.members: tuple[Member, ...] = tuple(ms)
        self._width = min(cfg.replication_factor, len(ms))
        self._primary: list[int] = []
        self._loads = [0] * len(ms)
        self._owner_of: list[int] = []  # member index of each point, in circle order
        self._ends: list[int] = []  # per point: partitions at or before it (its arc ends there)
        self._replicas: dict[int, tuple[int, ...]] = {}  # partition -> owners, filled on first use
        if ms:
            self._place()

    def _place(self) -> None:
        cfg, ms = self.config, self.members
        parts = cfg.partition_count
        owner_of, ends = _circle([m.id for m in ms], cfg.virtual_nodes, parts)
        self._owner_of, self._ends = owner_of, ends
        # The bounded-load sweep (ring/placement.go place): every partition below nxt has its primary; those from
        # nxt to the end of the current point's arc wait for a member with room; past the last point, a second lap
        # in which everything left waits.
        bound = cfg.max_load(len(ms))
        loads = self._loads
        prim = self._primary
        nxt = 0
        for end, m in zip(ends, owner_of):
            room = bound - loads[m]
            if room > 0 and end > nxt:
                take = room if room < end - nxt else end - nxt
                prim += [m] * take
                loads[m] += take
                nxt += take
        for m in owner_of:
            if nxt == parts:
                break
            room = bound - loads[m]
            if room > 0:
                take = room if room < parts - nxt else parts - nxt
                prim += [m] * take
                loads[m] += take
                nxt += take
        if nxt < parts:
            raise RingError(f"BUG: no member has room for partition {nxt}")

    def _owners(self, part: int) -> tuple[int, ...]:
        """Partition part's owners as member indices, primary first: the primary, then distinct members walking
        clockwise from the partition's point."""
        got = self._replicas.get(part)
        if got is not None:
            return got
        owners = [self._primary[part]]
        owner_of = self._owner_of
        n = len(owner_of)
        j = bisect.bisect_right(self._ends, part)  # the first point whose arc ends past part
        k = 0
        while len(owners) < self._width:
            if k == n:
                raise RingError("BUG: replica walk went round the circle without finding enough members")
            m = owner_of[(j + k) % n]
            if m not in owners:
                owners.append(m)
            k += 1
        got = tuple(owners)
        self._replicas[part] = got
        return got

    def __len__(self) -> int:
        return len(self.members)

    def partition(self, namespace: str, cid: bytes) -> int:
        """The partition of a chunk key, in [0, partition_count)."""
        return key_hash(namespace, cid) % self.config.partition_count

    def partition_owners(self, part: int, n: int) -> list[Member]:
        """The first n owners of a partition, primary first (at most min(replication_factor, members))."""
        if not self.members or not 0 <= part < self.config.partition_count or n <= 0:
            return []
        if n == 1 or self._width == 1:
            return [self.members[self._primary[part]]]
        return [self.members[i] for i in self._owners(part)[:n]]

    def owners(self, namespace: str, cid: bytes, n: int) -> list[Member]:
        """The first n owners of the chunk's partition, primary first."""
        return self.partition_owners(self.partition(namespace, cid), n)

    def primary(self, namespace: str, cid: bytes) -> Member:
        """The primary owner of the chunk's partition. Raises :class:`RingError` when the ring has no members."""
        if not self.members:
            raise RingError("ring has no members")
        return self.members[self._primary[self.partition(namespace, cid)]]

    def spread_set(self, namespace: str, key: bytes, width: int) -> list[Member]:
        """The members that hold a group spread to ``width`` members because it is hot (the Go ring's SpreadSet):
        the primary owner of key, then the primaries of keys derived from key (its last four bytes, a little-endian
        uint32, XORed with 1, 2, 3, ...), skipping members already in the set, until it has width members or
        4 x width keys were tried. At most min(width, members) members, the primary first; [] for an empty ring or
        width <= 0. A key shorter than 4 bytes gives the primary alone."""
        width = min(width, len(self.members))
        if width <= 0:
            return []
        key = bytes(key)
        first = self.primary(namespace, key)
        out = [first]
        if len(key) < 4:
            return out
        seen = {first.id}
        head = key[:-4]
        (tail,) = struct.unpack_from("<I", key, len(key) - 4)
        i = 1
        while len(out) < width and i <= 4 * width:
            m = self.primary(namespace, head + struct.pack("<I", tail ^ i))
            if m.id not in seen:
                seen.add(m.id)
                out.append(m)
            i += 1
        return out

    def load_distribution(self) -> dict[str, int]:
        """For each member id, the partitions it is primary for."""
        return {m.id: self._loads[i] for i, m in enumerate(self.members)}

    def max_load(self) -> int:
        return self.config.max_load(len(self.members))
