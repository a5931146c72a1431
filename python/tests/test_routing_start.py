"""Routing starts at once even when the connection comes up while the client is still building its router: the
CONNECTED callback that fires then finds no router to prompt, and the client once waited for the router's periodic
fetch (~10 s), sending every call through the connected node meanwhile."""

from __future__ import annotations

import threading

import kvring
from kvring import client as client_mod
from kvring import conn as conn_mod
from kvring import route
from cluster import wait_for


def test_routing_starts_when_the_connection_comes_up_before_the_router_is_set(cluster, client_for, namespace, monkeypatch):
    a, b = cluster
    may_dial = threading.Event()  # set once the router's thread took its first look at the connection
    called_back = threading.Event()  # set once the CONNECTED callback has returned

    dial, watch = conn_mod.Conn._dial, conn_mod.Conn._watch

    def gated_dial(self, addr):
        assert may_dial.wait(10), "the router never started"
        return dial(self, addr)

    def noting_watch(self, ch, addr):
        called_back.set()  # _run calls _watch right after publishing CONNECTED and running the callbacks
        return watch(self, ch, addr)

    class LateRouter(route.Router):
        """A router whose construction ends only after the connection is up and has told the client so: the order
        a slow thread start or a busy machine can produce."""

        def __init__(self, c, answer_timeout):
            super().__init__(c, answer_timeout)
            # Its thread looks at the connection at once (still connecting: the dial waits for may_dial) ...
            wait_for(lambda: not self._kick.is_set(), 10, "the router's first look at the connection")
            may_dial.set()
            # ... and the connection comes up, its callback finding no router on the client yet.
            assert called_back.wait(10), "the connection did not come up"

    monkeypatch.setattr(conn_mod.Conn, "_dial", gated_dial)
    monkeypatch.setattr(conn_mod.Conn, "_watch", noting_watch)
    monkeypatch.setattr(client_mod, "Router", LateRouter)
    c = client_for([a.grpc], namespace)
    assert c.state.status is kvring.ConnStatus.CONNECTED
    # The periodic fetch comes after route.TOPOLOGY_INTERVAL (10 s); the prompt after connecting within a moment.
    wait_for(lambda: len(c.routing.members) == 2, 3, "the ring view, well before the periodic fetch")
