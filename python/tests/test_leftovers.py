"""A test run killed outright (SIGKILL, as a CI timeout or an OOM kill would end it) leaves nothing behind: the nodes
it started are stopped by their launcher (kvnodes), which dies with it, and its scratch directories are removed by its
janitor."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from cluster import popen, process_gone, wait_for

CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
from cluster import Node, Scratch
s = Scratch()
n = Node(sys.argv[2], s.tmp, "orphan", kvnodes=sys.argv[3]).start()
print("node", n.pid, s.tmp, s.shm, flush=True)
time.sleep(300)  # killed long before
"""


def test_a_killed_test_run_takes_its_nodes_and_files_with_it(binary, kvnodes, tmp_path):
    out = tmp_path / "child.txt"
    with open(out, "wb") as f:
        child = popen([sys.executable, "-c", CHILD, os.path.dirname(__file__), binary, kvnodes], stdout=f,
                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        line = wait_for(lambda: next((l for l in out.read_text().splitlines() if l.startswith("node ")), None)
                        or (child.poll() is not None and _fail(out)), 60, "the child run to start its node")
    except BaseException:
        child.kill()
        child.wait()
        raise
    _, pid, *dirs = line.split()
    pid = int(pid)
    assert not process_gone(pid)
    assert all(os.path.isdir(d) for d in dirs if d)

    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    wait_for(lambda: process_gone(pid), 30, f"node {pid} to die with the run that started it")
    wait_for(lambda: not any(os.path.exists(d) for d in dirs if d), 30, f"the janitor to remove {dirs}")


def _fail(out):
    raise AssertionError(f"the child run exited before starting its node:\n{out.read_text()}")
