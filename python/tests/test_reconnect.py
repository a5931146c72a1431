"""The seed failure reversed: a node killed makes the next call fail at once with the reason; the same node restarted
on the same address makes the same client work again, without being recreated."""

import logging
import os
import time

import pytest

import kvring
from cluster import wait_for
from conftest import connected


def test_node_killed_then_restarted_same_client_recovers(make_node, client_for, namespace, caplog):
    caplog.set_level(logging.INFO, logger="kvring")
    n = make_node()
    states = []
    c = client_for([n.grpc], namespace, on_state_change=states.append)
    wait_for(lambda: connected(c), what="connected")
    ids = kvring.chunk_ids(list(range(64)), 16)
    assert c.put([(ids[0], b"before")])[0].status == kvring.PutStatus.STORED

    n.kill()
    t = time.monotonic()
    with pytest.raises(kvring.Unavailable) as ei:
        c.lookup(ids)
    assert time.monotonic() - t < 2.0, "the first call after the kill must fail at once"
    assert n.grpc in str(ei.value) and "unavailable" in str(ei.value), str(ei.value)
    # the loop notices, says why, and keeps failing calls fast, naming the cause
    wait_for(lambda: c.state.status is kvring.ConnStatus.RECONNECTING, what="reconnecting")
    t = time.monotonic()
    with pytest.raises(kvring.Unavailable, match="not connected to any kvring node") as ei:
        c.put([(ids[1], b"while down")])
    assert time.monotonic() - t < 0.5
    assert n.grpc in str(ei.value)

    n.start()  # same --grpc-addr, same data directory
    wait_for(lambda: connected(c), 20, "connected again")
    assert c.put([(ids[1], b"after")])[0].status == kvring.PutStatus.STORED
    assert c.get([ids[1]]) == [b"after"]

    seen = [s.status for s in states]
    assert seen[0] is kvring.ConnStatus.CONNECTING
    assert kvring.ConnStatus.CONNECTED in seen and kvring.ConnStatus.RECONNECTING in seen
    assert seen[-1] is kvring.ConnStatus.CONNECTED
    lines = [r.getMessage() for r in caplog.records if r.name == "kvring"]
    assert any(m.startswith("lost connection to kvring node") for m in lines)
    assert sum(m.startswith("connected again") for m in lines) == 1


def test_close_is_idempotent_and_later_calls_say_closed(cluster, client_for, namespace):
    c = client_for([cluster[0].grpc], namespace)
    wait_for(lambda: connected(c))
    c.close()
    c.close()
    assert c.state.status is kvring.ConnStatus.CLOSED
    with pytest.raises(kvring.ClientClosed):
        c.lookup([os.urandom(32)])
