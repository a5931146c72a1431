"""python/examples/engine.py runs against a real node and reuses the shared prefix."""

import os
import shutil
import subprocess
import sys
import tempfile


def test_engine_example_reuses_the_shared_prefix(make_node):
    n = make_node()
    script = os.path.join(os.path.dirname(__file__), "..", "examples", "engine.py")
    out = subprocess.run([sys.executable, script, "--seeds", n.grpc, "--prompts", "3"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if l.startswith("prompt ")]
    assert len(lines) == 3
    assert "reused 0," in lines[0] and "not stored 0" in lines[0]
    assert "reused 40," in lines[1] and "reused 40," in lines[2], out.stdout


def test_engine_example_through_the_local_socket(make_node):
    sock = tempfile.mkdtemp(prefix="kvs-")
    try:
        path = os.path.join(sock, "kvring.sock")
        n = make_node(extra=["--socket", path])
        script = os.path.join(os.path.dirname(__file__), "..", "examples", "engine.py")
        out = subprocess.run([sys.executable, script, "--seeds", n.grpc, "--prompts", "2", "--socket", path],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "reused 40," in out.stdout.splitlines()[1], out.stdout
        # prompt 0: lookup, put; prompt 1: lookup, get_into, put (release_lease is not counted)
        assert "transport: 5 calls through the local socket" in out.stdout, out.stdout
    finally:
        shutil.rmtree(sock, ignore_errors=True)
