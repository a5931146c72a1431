"""python/examples/engine.py runs against a real node and reuses the shared prefix."""

import os
import subprocess
import sys


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
