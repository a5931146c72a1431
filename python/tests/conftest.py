from __future__ import annotations

import os
import sys
import tempfile
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from cluster import Node, Scratch, kvnodes_binary, kvring_binary  # noqa: E402

import kvring  # noqa: E402


def pytest_configure(config):
    """The run's files (pytest's tmp_path included) go to scratch directories removed at exit (cluster.Scratch)."""
    Scratch()


def pytest_collection_modifyitems(config, items):
    """Tests that start real nodes (they need the kvring binary) are marked `nodes`: `make test-short` runs the
    others (-m "not nodes"), the client against in-process fakes, without building the binary."""
    for item in items:
        if "binary" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.nodes)


@pytest.fixture(scope="session")
def tmp_root():
    with tempfile.TemporaryDirectory(prefix="kvring-pytest-") as d:
        yield d


@pytest.fixture(scope="session")
def binary(tmp_root):
    return kvring_binary(tmp_root)


@pytest.fixture(scope="session")
def kvnodes(tmp_root):
    """The launcher that starts, kills, restarts and cleans up every node (cluster.Node)."""
    return kvnodes_binary(tmp_root)


@pytest.fixture(scope="session")
def cluster(binary, kvnodes, tmp_root):
    """Two nodes that form one ring (shared by the tests; each test uses its own namespace)."""
    a = Node(binary, tmp_root, "a", extra=["--max-chunk-size", "48MiB"], kvnodes=kvnodes)
    b = Node(binary, tmp_root, "b", extra=["--max-chunk-size", "48MiB"], kvnodes=kvnodes)
    nodes = [a, b]
    try:
        a.start()
        b.join = a.gossip
        b.start()
        yield nodes
    finally:
        for n in nodes:
            n.cleanup()


@pytest.fixture
def make_node(binary, kvnodes, tmp_root):
    """Start extra single nodes for a test; they are stopped and their directories removed after it."""
    made = []

    def make(extra=None, join=None):
        n = Node(binary, tmp_root, f"n-{uuid.uuid4().hex[:8]}", extra=extra, join=join, kvnodes=kvnodes)
        made.append(n)  # cleaned up even if it fails to start
        return n.start()

    yield make
    for n in made:
        n.cleanup()


@pytest.fixture
def namespace():
    return f"pytest/{uuid.uuid4().hex[:12]}"


SCHEMA = kvring.Schema(model="test-model", dtype="bf16", tokens_per_chunk=16)


@pytest.fixture
def client_for():
    """Make clients (closed after the test) with fast reconnection settings."""
    made = []

    def make(seeds, namespace, schema=SCHEMA, **kw):
        kw.setdefault("backoff_base", 0.05)
        kw.setdefault("backoff_max", 0.5)
        kw.setdefault("probe_interval", 0.5)
        c = kvring.Client(seeds=seeds, namespace=namespace, schema=schema, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def connected(c: "kvring.Client") -> bool:
    return c.state.status is kvring.ConnStatus.CONNECTED
