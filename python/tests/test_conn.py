"""The connection loop against fake nodes, as the Go SDK's client/conn_test.go: the first round of attempts over
the seeds goes without backoff, a node that says it does not serve is left for the next seed at once, and a call
made during the first round of attempts after a loss waits for that round instead of failing."""

import logging
import os
import re
import socket

import pytest

import kvring
from cluster import wait_for
from conftest import connected

from test_fake_server import fake_node  # noqa: F401 - the fixture


def dead_addr() -> str:
    """An address on which nothing listens (connections are refused at once)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def attempt_delays(caplog) -> dict[int, float]:
    out = {}
    for r in caplog.records:
        m = re.match(r"(connecting to kvring node|reconnecting) addr=\S+ attempt=(\d+) delay=([\d.]+)s", r.getMessage())
        if m and r.name == "kvring":
            out.setdefault(int(m.group(2)), float(m.group(3)))
    return out


def test_the_first_round_over_the_seeds_goes_without_backoff(fake_node, client_for, caplog):
    caplog.set_level(logging.INFO, logger="kvring")
    _, _, live = fake_node()
    # A backoff this long would keep the client from the third seed for a minute.
    c = client_for([dead_addr(), dead_addr(), live], "fake/ns", backoff_base=30.0, backoff_max=30.0)
    wait_for(lambda: connected(c), 5, "connected to the third seed within the first round")
    assert c.state.addr == live
    assert attempt_delays(caplog) == {1: 0.0, 2: 0.0, 3: 0.0}


def test_backoff_grows_per_round_over_the_seeds(client_for, caplog):
    caplog.set_level(logging.INFO, logger="kvring")
    c = client_for([dead_addr(), dead_addr()], "fake/ns", backoff_base=0.01, backoff_max=0.01, jitter=0)
    wait_for(lambda: c.state.attempt >= 6, 5, "three rounds of attempts")
    d = attempt_delays(caplog)
    assert d[1] == d[2] == 0.0 and all(d[a] > 0 for a in (3, 4, 5)), d


def test_a_node_that_stops_serving_is_left_for_the_next_seed_at_once(fake_node, client_for, namespace):
    _, health_a, a = fake_node()
    _, _, b = fake_node()
    states = []
    c = client_for([a, b], "fake/ns", on_state_change=states.append)
    wait_for(lambda: connected(c) and c.state.addr == a, what="connected to a")
    start = len(states)
    health_a.serving = False  # a drains before it stops
    wait_for(lambda: connected(c) and c.state.addr == b, 5, "connected to b")
    after = [(s.status, s.addr, s.attempt) for s in states[start:]]
    R = kvring.ConnStatus.RECONNECTING
    assert after == [(R, a, 1), (R, b, 1), (kvring.ConnStatus.CONNECTED, b, 0)], after
    assert "NOT_SERVING" in states[start].last_error


def test_a_call_during_the_first_reconnect_waits_for_it(fake_node, client_for):
    _, health_a, a = fake_node()
    svc_b, health_b, b = fake_node(health_delay=1.0)  # slow to accept: the first attempt takes a second
    c = client_for([a, b], "fake/ns", dial_timeout=5.0)  # the wait's bound: room for the slow attempt under load
    wait_for(lambda: connected(c) and c.state.addr == a, what="connected to a")
    health_a.serving = False
    wait_for(lambda: c.state.status is kvring.ConnStatus.RECONNECTING, 5, "the loss")
    assert c.state.attempt == 1, c.state
    # a call now waits for the attempt under way (to b) and gets its connection instead of failing
    assert c.lookup([os.urandom(32)]).held == 0
    assert c.state.addr == b and svc_b.registrations == 1


def test_an_attempt_to_a_node_just_lost_is_not_held_back_by_grpcs_own_backoff(client_for, caplog):
    """Every attempt is a fresh channel with its own subchannels: grpcio's shared subchannel of the lost connection,
    waiting out its own reconnect backoff, must not hold the attempt back (it did, by a second or more)."""
    from concurrent import futures

    import grpc

    from test_fake_server import FakeHealth

    caplog.set_level(logging.INFO, logger="kvring")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(FakeHealth().check)}),))
    addr = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    c = client_for([addr], "fake/ns", backoff_base=0.01, backoff_max=0.01)
    wait_for(lambda: connected(c), what="connected")
    server.stop(None)
    wait_for(lambda: c.state.attempt >= 3, 10, "two attempts after the loss")
    at = {}
    for r in caplog.records:
        m = re.match(r"reconnecting addr=\S+ attempt=(\d+) ", r.getMessage())
        if m:
            at.setdefault(int(m.group(1)), r.created)
    # grpcio's own backoff starts at 1 s ± 20 %
    assert at[2] - at[1] < 0.75, f"the first attempt after the loss took {at[2] - at[1]:.3f}s"


@pytest.mark.parametrize("kw,match", [
    ({"seeds": []}, "seeds"),
    ({"seeds": ["localhost"]}, r"seeds\[0\]: want host:port"),
    ({"dial_timeout": -1}, "dial_timeout: want a positive duration"),
    ({"probe_timeout": -0.5}, "probe_timeout"),
    ({"backoff_base": 2.0, "backoff_max": 1.0}, "exceeds backoff_max"),
    ({"jitter": 1.5}, "jitter"),
])
def test_invalid_connection_settings_are_refused_at_construction(kw, match):
    args = {"seeds": ["127.0.0.1:1"], **kw}
    seeds = args.pop("seeds")
    with pytest.raises(ValueError, match=match):
        kvring.Client(seeds, "fake/ns", kvring.Schema(model="m", dtype="bf16"), **args)
