"""Bearer tokens reach the node on every call, puts driven on the calling thread included (docs/security.md,
--auth-tokens-file): with a token that allows the namespace every call works; without one, or outside its
prefixes, the node's refusal surfaces as Unauthenticated / PermissionDenied."""

import os

import pytest

import kvring
from kvring import _stcall
from cluster import wait_for
from conftest import connected

TOKEN = "pytest-token-0123456789abcdef"


@pytest.fixture
def secured(make_node, tmp_path):
    path = tmp_path / "tokens"
    path.write_text(f"{TOKEN} pytest/,shared/\n")
    return make_node(extra=["--auth-tokens-file", str(path)])


@pytest.mark.parametrize("driven", [True, False])
def test_a_token_allows_every_call_and_its_absence_is_refused(secured, client_for, namespace, monkeypatch, driven):
    monkeypatch.setattr(_stcall, "ENABLED", driven)
    c = client_for([secured.grpc], namespace, token=TOKEN)
    wait_for(lambda: connected(c), what="connected")
    ids = [os.urandom(32) for _ in range(3)]
    res = c.put([kvring.Chunk(i, os.urandom(3000)) for i in ids])
    assert all(r.status == kvring.PutStatus.STORED for r in res), res
    assert c.lookup(ids).held == 3
    assert all(g is not None for g in c.get(ids))

    anon = client_for([secured.grpc], namespace)
    wait_for(lambda: connected(anon), what="connected without a token (health is open)")
    with pytest.raises(kvring.Unauthenticated):
        anon.put([kvring.Chunk(os.urandom(32), b"x")])
    other = client_for([secured.grpc], "team-b/ns", token=TOKEN)
    wait_for(lambda: connected(other))
    with pytest.raises(kvring.PermissionDenied, match="team-b/ns"):
        other.put([kvring.Chunk(os.urandom(32), b"x")])
