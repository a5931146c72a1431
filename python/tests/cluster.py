"""Real kvring nodes for the tests: the binary built from this repository (or $KVRING_BIN), ports picked at run
time, temporary data and /dev/shm directories removed afterwards. Only processes started here are ever killed, by
their pid."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r'msg="node ready" node=(\S+) grpc=(\S+) admin=(\S+) gossip=(\S+)')


class Fatal(Exception):
    """Raised by a wait_for condition that can never become true: wait_for lets it through at once."""


def wait_for(cond: Callable[[], object], timeout: float = 10.0, what: str = "condition", interval: float = 0.02):
    """Poll cond until it returns a truthy value (returned) or timeout seconds pass (AssertionError)."""
    deadline = time.monotonic() + timeout
    last_exc: Optional[BaseException] = None
    while True:
        try:
            v = cond()
            if v:
                return v
        except Fatal:
            raise
        except Exception as exc:  # noqa: BLE001 - keep polling; report the last error
            last_exc = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f": {last_exc!r}" if last_exc else ""))
        time.sleep(interval)


_built: Optional[str] = None


def kvring_binary(tmp_root: str) -> str:
    """$KVRING_BIN, or the kvring binary built once per test session from the repository."""
    global _built
    env_bin = os.environ.get("KVRING_BIN")
    if env_bin:
        return env_bin
    if _built is None:
        out = os.path.join(tmp_root, "kvring")
        subprocess.run(["go", "build", "-o", out, "./cmd/kvring"], cwd=REPO, check=True)
        _built = out
    return _built


class Node:
    """One `kvring serve` process. start() waits for its ready line; kill() sends SIGKILL to its pid."""

    def __init__(self, binary: str, root: str, name: str, extra: list[str] | None = None, join: str | None = None):
        self.binary = binary
        self.name = name
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir, exist_ok=True)
        self.shm = tempfile.mkdtemp(prefix=f"kvring-pytest-{name}-", dir="/dev/shm")
        self.extra = list(extra or [])
        self.join = join
        self.proc: Optional[subprocess.Popen] = None
        self.grpc = self.admin = self.gossip = self.id = ""
        self._grpc_addr = "127.0.0.1:0"
        self._log_path = ""
        self._runs = 0

    def start(self, timeout: float = 30.0) -> "Node":
        self._runs += 1
        self._log_path = os.path.join(self.dir, f"log{self._runs}.txt")
        args = [
            self.binary, "serve",
            "--data-dir", os.path.join(self.dir, "data"),
            "--shm-dir", self.shm,
            "--socket", "",
            "--resp-addr", "",
            "--memory-limit", "64MiB",
            "--grpc-addr", self._grpc_addr,
            "--gossip-addr", "127.0.0.1:0",
            "--admin-addr", "127.0.0.1:0",
            "--rejoin-interval", "1s",
            *self.extra,
        ]
        if self.join:
            args += ["--join", self.join]
        log = open(self._log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()

        def ready():
            if self.proc.poll() is not None:
                raise Fatal(f"node {self.name} exited with {self.proc.returncode}:\n{self.log()}")
            return READY.search(self.log())

        m = wait_for(ready, timeout, f"node {self.name} to be ready")
        self.id, self.grpc, self.admin, self.gossip = m.groups()
        self._grpc_addr = self.grpc  # a restart keeps the address
        return self

    def log(self) -> str:
        try:
            with open(self._log_path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """SIGKILL this node's process (by pid) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        """SIGTERM (clean shutdown), SIGKILL after 15 s."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.shm, ignore_errors=True)
