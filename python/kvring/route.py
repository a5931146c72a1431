"""Routing to primary owners, as the Go SDK does (client/route.go, client/topology.go, client/lookup_route.go).

With a ring view, put and get split a batch by each chunk's primary owner (of its placement key: the group key, or
the id itself) and send every share straight to that owner, over one channel per owner, in parallel; the share of
the node the client is connected to goes over the main channel. A lookup goes whole to the primary owner of its
first key. When an owner cannot take its share (unreachable, no first answer within the answer timeout, the
namespace unknown there, Topology/Put/Get not implemented) the share is sent again over the main channel, where
any node coordinates it; get also asks the main channel again for the chunks an owner reported missing.

Hot groups (client/spread.go): a node that finds a placement group hot copies it to the members of the group key's
spread set (:meth:`Ring.spread_set`), and lookups report how wide each group is spread
(``LookupResponse.spread_width``) and how loaded the answering node is (``LookupResponse.load``). The client
remembers both for 15 s (:class:`SpreadHints`) and sends lookups and gets of a spread group to a member of its set
instead of always to its primary owner: the less loaded of two members drawn at random per call. The member answers
what it holds and asks the owners for the rest, so nothing counts as held that is not; puts still go to the owners.

The view comes from Cache.Topology on the connected node: after each connection, when a node's replies carry an
epoch that differs from its previous one, and every ~10 s. It is a hint: calls never wait for it, and a view the
client cannot use (a ring fingerprint this port does not compute) routes nothing.
"""

from __future__ import annotations

import dataclasses
import heapq
import logging
import random
import threading
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence

import grpc

from .conn import Conn, ConnState, ConnStatus
from .errors import (
    Cancelled,
    DeadlineExceeded,
    KvringError,
    Unavailable,
    UnknownNamespace,
    from_rpc_error,
)
from .ring import Member, Ring, RingConfig, RingError
from .v1 import cache_pb2, cache_pb2_grpc

__all__ = ["RoutingState", "Router", "Share", "SpreadHints", "owner_failed", "two_choices"]

log = logging.getLogger("kvring")

TOPOLOGY_INTERVAL = 10.0
"""Seconds between fetches of the view when nothing prompts one (jittered)."""
TOPOLOGY_MIN_GAP = 0.25
"""Fetches prompted by replies are at least this far apart."""
TOPOLOGY_TIMEOUT = 5.0
SPREAD_HINT_TTL = 15.0
"""Seconds the client believes a lookup's report that a group is spread, or a node's load figure."""
MAX_SPREAD_HINTS = 4096
"""The most groups (and, separately, node addresses) the client remembers hints for."""


@dataclasses.dataclass(frozen=True)
class RoutingState:
    """The ring view a client routes by (see ``Client(routing=...)``)."""

    enabled: bool
    """False when routing is disabled: every call goes through the connected node."""
    epoch: int = 0
    """Ring epoch of the node the view came from; 0 without a view."""
    source: Optional[Member] = None
    """The node that answered the Topology call (id, address)."""
    members: tuple[Member, ...] = ()
    """The ring's members sorted by id; empty without a view (then every call goes through the connected node)."""
    fetched: float = 0.0
    """``time.time()`` of the fetch; 0 without a view."""
    ring: Optional[Ring] = None
    """The placement the view gives (``ring.primary(namespace, key)``); None without a view."""


@dataclasses.dataclass(frozen=True)
class _View:
    ring: Optional[Ring]  # None: no members or an unusable view; route nothing
    self_id: str
    via: Any  # the main channel it answered on
    via_addr: str
    fetched: float


class Share(NamedTuple):
    """The part of a batch that goes to one node: positions in the caller's batch, ascending."""

    owner: Optional[Member]  # None for the main share
    idx: list[int]

    @property
    def main(self) -> bool:
        return self.owner is None


def owner_failed(err: KvringError, deadline: float) -> bool:
    """Whether a share's call failed because of the owner or the way to it, so that the main channel may still
    serve it; False once the caller's deadline has passed."""
    if time.monotonic() >= deadline:
        return False
    return (
        isinstance(err, (Unavailable, DeadlineExceeded, Cancelled, UnknownNamespace))
        or err.code == grpc.StatusCode.UNIMPLEMENTED
    )


class SpreadHints:
    """The spread widths lookups reported, per (namespace, group key), and the load figures nodes answered, per
    address, each believed for :data:`SPREAD_HINT_TTL` seconds (``now`` is ``time.monotonic()``). Safe for concurrent
    use; never blocks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._widths: dict[tuple[str, bytes], tuple[int, float]] = {}  # -> (width, until)
        self._loads: dict[str, tuple[int, float]] = {}  # addr -> (load, until)

    def note_load(self, addr: str, load: int, now: float) -> None:
        """Record the load (read calls/s lately) the node at addr answered."""
        with self._lock:
            if addr not in self._loads and len(self._loads) >= MAX_SPREAD_HINTS:
                return
            self._loads[addr] = (int(load), now + SPREAD_HINT_TTL)

    def load(self, addr: str, now: float) -> int:
        """The load the node at addr answered lately (0: unknown)."""
        with self._lock:
            v = self._loads.get(addr)
        if v is None or now >= v[1]:
            return 0
        return v[0]

    def learn(self, namespace: str, keys: Sequence[bytes], widths: Sequence[int], now: float) -> None:
        """Record the widths a lookup of namespace reported for its group runs (keys[i]: run i's group key). A width
        of 0 or 1 forgets the group; answers whose widths do not match the runs (nodes that spread nothing) teach
        nothing."""
        if len(widths) != len(keys):
            return
        with self._lock:
            m = self._widths
            for key, w in zip(keys, widths):
                key = bytes(key)
                if len(key) != 32:
                    continue
                k = (namespace, key)
                if w <= 1:
                    m.pop(k, None)
                    continue
                if k not in m and len(m) >= MAX_SPREAD_HINTS:
                    for old in [o for o, v in m.items() if now >= v[1]]:
                        del m[old]
                    if len(m) >= MAX_SPREAD_HINTS:
                        continue
                m[k] = (int(w), now + SPREAD_HINT_TTL)

    def width(self, namespace: str, key: bytes, now: float) -> int:
        """How wide the group key of namespace is spread as far as the client knows now (0: not known to be)."""
        if len(key) != 32:
            return 0
        with self._lock:
            v = self._widths.get((namespace, bytes(key)))
        if v is None or now >= v[1]:
            return 0
        return v[0]


def two_choices(n: int, load: Callable[[int], int]) -> int:
    """The index, among n >= 1 candidates, of the less loaded of two drawn at random (power of two choices; an
    unknown load counts as 0)."""
    if n == 1:
        return 0
    a = random.randrange(n)
    b = (a + 1 + random.randrange(n - 1)) % n
    return b if load(b) < load(a) else a


class Router:
    """Keeps the ring view fresh and one channel per owner. One thread fetches the view; :meth:`close` stops it and
    waits. Safe for concurrent use; only :meth:`refresh` and :meth:`close` block."""

    def __init__(self, conn: Conn, answer_timeout: float) -> None:
        self._conn = conn
        self.answer_timeout = answer_timeout
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._view: Optional[_View] = None
        self._epochs: dict[str, int] = {}
        self._unusable = ""
        self._pool: dict[str, Any] = {}
        self._stubs: dict[int, Any] = {}
        self._kick = threading.Event()
        self._kick.set()  # fetch at once if the connection is up already
        self._stop = threading.Event()
        self.hints = SpreadHints()
        self.watchdog = Watchdog()
        self._thread = threading.Thread(target=self._run, name="kvring-route", daemon=True)
        self._thread.start()

    # --- view -------------------------------------------------------------------------------------------------

    def state(self) -> RoutingState:
        v = self._view
        if v is None or v.ring is None:
            return RoutingState(enabled=True)
        return RoutingState(True, v.ring.epoch, Member(v.self_id, v.via_addr), v.ring.members, v.fetched, v.ring)

    def prompt(self) -> None:
        """Ask the loop to fetch the view soon. Never blocks."""
        self._kick.set()

    def on_state(self, s: ConnState) -> None:
        if s.status is ConnStatus.CONNECTED:
            self.prompt()

    def observe(self, addr: str, epoch: int) -> None:
        """Record the epoch of a reply from the node at addr; a change since that node's previous reply prompts a
        fetch. Epochs are local to each node, so only a node's own epochs are compared."""
        if not epoch:
            return
        with self._lock:
            prev = self._epochs.get(addr)
            self._epochs[addr] = epoch
        if prev is not None and prev != epoch:
            self.prompt()

    def _run(self) -> None:
        while not self._stop.is_set():
            j = self._conn.cfg.jitter
            self._kick.wait(TOPOLOGY_INTERVAL * (1 + j * (2 * random.random() - 1)))
            self._kick.clear()
            if self._stop.is_set():
                return
            if self._conn.state.status is ConnStatus.CONNECTED:
                try:
                    self.refresh()
                except Exception as exc:  # noqa: BLE001 - a hint: keep the previous view
                    log.debug("cannot fetch the kvring ring view; keeping the previous one: %s", exc)
            if self._stop.wait(TOPOLOGY_MIN_GAP):
                return

    def refresh(self) -> None:
        """Fetch the view from the connected node and publish it. Blocks for one call (at most 5 s). A failed call
        keeps the previous view and raises; a view the client cannot use replaces it with none."""
        with self._refresh_lock:
            ch, addr = self._conn.ready()
            stub = cache_pb2_grpc.CacheStub(ch)
            try:
                resp = stub.Topology(cache_pb2.TopologyRequest(), timeout=TOPOLOGY_TIMEOUT,
                                     metadata=self._conn.metadata or None)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                    self._publish(_View(None, "", ch, addr, time.time()), f"node {addr} does not serve Topology")
                    return
                raise from_rpc_error(exc, f"topology from {addr}") from None
            view, why = self._build(resp, ch, addr)
            self._publish(view, why)

    def _build(self, resp: Any, ch: Any, addr: str) -> tuple[_View, str]:
        t = time.time()
        self_id = resp.self.node_id
        if not resp.members:
            return _View(None, self_id, ch, addr, t), ""
        s = resp.ring
        cfg = RingConfig(s.partition_count, s.replication_factor, s.load, s.virtual_nodes, s.hasher)
        fp = cfg.fingerprint()
        if fp != s.fingerprint:
            return _View(None, self_id, ch, addr, t), (
                f"node {addr} places keys differently (ring fingerprint {s.fingerprint!r}, this client computes "
                f"{fp!r}): upgrade the client")
        members = tuple(sorted((Member(m.node_id, m.grpc_addr) for m in resp.members), key=lambda m: m.id.encode()))
        old = self._view
        if old is not None and old.ring is not None and old.ring.epoch == resp.epoch and \
                old.ring.config == cfg and old.ring.members == members:
            return _View(old.ring, self_id, ch, addr, t), ""
        try:
            r = Ring(members, resp.epoch, cfg)
        except RingError as exc:
            return _View(None, self_id, ch, addr, t), f"cannot rebuild the ring of node {addr}: {exc}"
        return _View(r, self_id, ch, addr, t), ""

    def _publish(self, v: _View, why: str) -> None:
        live = {m.addr for m in v.ring.members} if v.ring is not None else set()
        with self._lock:
            old, self._view = self._view, v
            for a in list(self._epochs):
                if a not in live and a != v.via_addr:
                    del self._epochs[a]
            if v.ring is not None:
                self._epochs[v.via_addr] = v.ring.epoch
            log_why = bool(why) and why != self._unusable
            self._unusable = why
            gone = [(a, ch) for a, ch in self._pool.items() if a not in live]
            for a, ch in gone:
                del self._pool[a]
                self._stubs.pop(id(ch), None)
        for _, ch in gone:
            ch.close()
        if log_why:
            log.warning("cannot route by the kvring ring view; every call goes through the connected node: %s", why)
        elif v.ring is not None and (old is None or old.ring is not v.ring):
            log.info("routing by kvring ring view from=%s epoch=%d members=%d", v.via_addr, v.ring.epoch, len(v.ring))

    # --- shares -----------------------------------------------------------------------------------------------

    def split(self, ch: Any, namespace: str, keys: Sequence[bytes], reads: bool = False) -> Optional[list[Share]]:
        """Group the positions of a batch (keys[i]: the ring key of position i) by primary owner, in order of first
        appearance; for a read (reads True) a position of a group known to be spread goes to a member of the
        group's spread set instead (:meth:`read_member`). The connected node's positions (or an owner without an
        address) form the main share. None when the whole batch goes over ch anyway: no view, or one share for
        ch."""
        v = self._view
        if v is None or v.ring is None or not len(v.ring):
            return None
        self_id = v.self_id if v.via is ch else ""
        r = v.ring
        pos: dict[str, int] = {}
        shares: list[Share] = []
        last_key: Optional[bytes] = None
        last_k = -1
        picked: dict[bytes, Member] = {}
        now = time.monotonic()
        for i, key in enumerate(keys):
            if key is last_key or key == last_key:  # runs of one group key: one hash per run
                shares[last_k].idx.append(i)
                continue
            p = self.read_member(r, namespace, key, picked, now) if reads else r.primary(namespace, key)
            name = "\x00main" if p.id == self_id or not p.addr else p.id
            k = pos.get(name)
            if k is None:
                k = pos[name] = len(shares)
                shares.append(Share(None if name == "\x00main" else p, []))
            shares[k].idx.append(i)
            last_key, last_k = key, k
        if len(shares) == 1 and shares[0].main:
            return None
        return shares

    def read_member(self, r: Ring, namespace: str, key: bytes, picked: dict[bytes, Member], now: float) -> Member:
        """The member a read of group key goes to: the less loaded of two random members of its spread set (by the
        loads they answered lately) when the group is known to be spread, else its primary owner. picked memoises
        the choice per key within one call."""
        key = bytes(key)
        m = picked.get(key)
        if m is not None:
            return m
        m = r.primary(namespace, key)
        w = self.hints.width(namespace, key, now)
        if w > 1:
            ss = r.spread_set(namespace, key, w)
            if ss:
                m = ss[two_choices(len(ss), lambda i: self.hints.load(ss[i].addr, now))]
        picked[key] = m
        return m

    def owner_channel(self, addr: str, make: Callable[[str], Any]) -> Any:
        """The pooled channel to the owner at addr (made with make(addr) the first time)."""
        with self._lock:
            ch = self._pool.get(addr)
            if ch is None:
                if self._stop.is_set():
                    raise Cancelled(f"kvring: owner {addr}: client is closed")
                ch = self._pool[addr] = make(addr)
            return ch

    def stubs(self, ch: Any, make: Callable[[Any], Any]) -> Any:
        with self._lock:
            s = self._stubs.get(id(ch))
            if s is None or s[0] is not ch:
                s = self._stubs[id(ch)] = (ch, make(ch))
            return s[1]

    def close(self) -> None:
        """Stop the loop, wait for it and close the owner channels. Idempotent."""
        self._stop.set()
        self._kick.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        with self._lock:
            pool, self._pool, self._stubs = self._pool, {}, {}
        for ch in pool.values():
            ch.close()
        self.watchdog.close()


class Watchdog:
    """One thread that runs callbacks at deadlines, for every call's answer timeout (a thread per call would cost
    more than many a call). Callbacks run on the watchdog's thread and must not block."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, list]] = []
        self._seq = 0
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="kvring-watchdog", daemon=True)
        self._thread.start()

    def schedule(self, delay: float, fn: Callable[[], None]) -> list:
        """Run fn after delay seconds unless the returned entry is cancelled first (``entry[0] = None``)."""
        entry: list = [fn]
        with self._cond:
            self._seq += 1
            heapq.heappush(self._heap, (time.monotonic() + delay, self._seq, entry))
            if self._heap[0][2] is entry:
                self._cond.notify()
        return entry

    def _run(self) -> None:
        with self._cond:
            while not self._stop:
                if not self._heap:
                    self._cond.wait()
                    continue
                at, _, entry = self._heap[0]
                left = at - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                heapq.heappop(self._heap)
                fn, entry[0] = entry[0], None
                if fn is not None:
                    try:
                        fn()
                    except Exception:  # noqa: BLE001 - a callback must not kill the watchdog
                        log.exception("kvring watchdog callback failed")

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._heap.clear()
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()


class AnswerTimer:
    """Cancels a call whose first message does not arrive within d seconds (a node that hangs is treated like one
    that is down): :meth:`answered` on the first message; :meth:`explain` turns the cancellation into Unavailable."""

    __slots__ = ("fired", "_entry", "_addr", "_d")

    def __init__(self, watchdog: Watchdog, call: Any, d: float, addr: str) -> None:
        self.fired = False
        self._addr, self._d = addr, d

        def fire() -> None:
            self.fired = True
            call.cancel()

        self._entry = watchdog.schedule(d, fire)

    def answered(self) -> None:
        self._entry[0] = None

    def explain(self, err: KvringError) -> KvringError:
        if self.fired and isinstance(err, Cancelled):
            return Unavailable(f"kvring: unavailable: {self._addr}: owner did not answer in time within {self._d:g}s")
        return err
