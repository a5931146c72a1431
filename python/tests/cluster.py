"""Real kvring nodes for the tests: the binary built from this repository (or $KVRING_BIN), ports picked at run
time, temporary data and /dev/shm directories removed afterwards. Only processes started here are ever killed, by
their pid.

Nothing outlives the test run, however it ends: every process started here dies with the interpreter
(PR_SET_PDEATHSIG, see popen), and the run's files live in scratch directories (Scratch) that are removed at exit, by a janitor
process when the interpreter is killed, and by the next run's sweep when even the janitor was. The scheme is
internal/testutil's (scratch.go, process.go), which the Go tests use."""

from __future__ import annotations

import atexit
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
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


# The scratch directories: internal/testutil's ScratchPrefix and owner lock file.
SCRATCH_PREFIX = "kvring-run-"
OWNER_LOCK = "owner.lock"
STALE_AFTER = 60.0  # seconds: a scratch directory without its lock older than this is a dead run's

# The janitor waits until its stdin closes (the interpreter exited, however), then removes the directories it was
# given; it ignores the signals a terminal or make sends the process group. Same script as internal/testutil's.
JANITOR = """trap '' HUP INT QUIT TERM PIPE
cat >/dev/null
for i in 1 2 3 4 5; do rm -rf -- "$@" 2>/dev/null && exit 0; sleep 1; done"""


def sweep(parent: str) -> None:
    """Remove the scratch directories in parent whose owner is dead: their owner lock can be taken (the kernel drops
    a flock when its holder dies), or they have none and are old. Touches nothing else."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        d = os.path.join(parent, name)
        if name.startswith(SCRATCH_PREFIX) and os.path.isdir(d) and _owner_dead(d):
            shutil.rmtree(d, ignore_errors=True)


def _owner_dead(d: str) -> bool:
    try:
        fd = os.open(os.path.join(d, OWNER_LOCK), os.O_RDONLY)
    except FileNotFoundError:
        try:
            return time.time() - os.stat(d).st_mtime > STALE_AFTER
        except OSError:
            return False
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


class Scratch:
    """This run's files: a directory in the temporary directory, which becomes $TMPDIR and tempfile's (so pytest's
    tmp_path, tempfile.mkdtemp and the nodes' temporary files land in it), and one in /dev/shm for the nodes'
    segments. Both are removed at exit (close), by a janitor process when the interpreter is killed first."""

    def __init__(self) -> None:
        global current_scratch
        base = tempfile.gettempdir()
        sweep(base)
        sweep("/dev/shm")
        self._locks: list[int] = []
        self.tmp = self._make(base)
        try:
            self.shm = self._make("/dev/shm")
        except OSError:
            self.shm = ""  # no /dev/shm: segments go to the temporary directory
        dirs = [d for d in (self.tmp, self.shm) if d]
        self._janitor = subprocess.Popen(["/bin/sh", "-c", JANITOR, "kvring-test-janitor", *dirs], cwd="/",
                                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.environ["TMPDIR"] = self.tmp
        tempfile.tempdir = self.tmp
        current_scratch = self
        # At exit, after what registers later (pytest's cleanup of its tmp_path directories) has run.
        atexit.register(self.close)

    def _make(self, parent: str) -> str:
        d = tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=parent)
        fd = os.open(os.path.join(d, OWNER_LOCK), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._locks.append(fd)
        return d

    def shm_dir(self, prefix: str) -> str:
        """A fresh directory for a node's segments in this run's /dev/shm directory."""
        return tempfile.mkdtemp(prefix=prefix, dir=self.shm or self.tmp)

    def close(self) -> None:
        if self._janitor.stdin.closed:
            return
        for d in (self.tmp, self.shm):
            if d:
                shutil.rmtree(d, ignore_errors=True)
        self._janitor.stdin.close()
        self._janitor.wait()


current_scratch: Optional[Scratch] = None

# Runs as `python3 -I -c DIE_WITH_PARENT <parent pid> <program> <args>...`: asks the kernel for SIGKILL when the
# thread that forked it ends (PR_SET_PDEATHSIG = 1), exits if that parent is already gone, then becomes the program
# (exec keeps the setting). Not a preexec_fn: with one, subprocess runs the interpreter's at-fork handlers, and
# grpcio's blocks while a client's threads run (a test that started a node after using a client hung on it).
DIE_WITH_PARENT = """import ctypes, os, signal, sys
prctl = ctypes.CDLL(None, use_errno=True).prctl
prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
if prctl(1, signal.SIGKILL, 0, 0, 0) != 0:
    sys.exit("cannot set PR_SET_PDEATHSIG: " + os.strerror(ctypes.get_errno()))
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def popen(args: list[str], **kw) -> subprocess.Popen:
    """subprocess.Popen for a child that must die with the interpreter (DIE_WITH_PARENT); its pid is the program's.
    The kernel's signal follows the forking *thread*, so children are started only from the main thread (pytest
    runs tests on it), which lives as long as the interpreter."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("start test processes from the main thread: a child dies with the thread that forked it")
    return subprocess.Popen([sys.executable, "-I", "-c", DIE_WITH_PARENT, str(os.getpid()), *args], **kw)


_built: Optional[str] = None


def kvring_binary(tmp_root: str) -> str:
    """$KVRING_BIN, or the kvring binary built once per test session from the repository."""
    global _built
    env_bin = os.environ.get("KVRING_BIN")
    if env_bin:
        return env_bin
    if _built is None:
        out = os.path.join(tmp_root, "kvring")
        build = popen(["go", "build", "-o", out, "./cmd/kvring"], cwd=REPO)
        if build.wait() != 0:
            raise RuntimeError(f"go build ./cmd/kvring exited with {build.returncode}")
        _built = out
    return _built


class Node:
    """One `kvring serve` process. start() waits for its ready line; kill() sends SIGKILL to its pid."""

    def __init__(self, binary: str, root: str, name: str, extra: list[str] | None = None, join: str | None = None):
        self.binary = binary
        self.name = name
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir, exist_ok=True)
        if current_scratch is None:
            raise RuntimeError("BUG: make a cluster.Scratch before the first Node (conftest.py does)")
        self.shm = current_scratch.shm_dir(f"{name}-")
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
        self.proc = popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
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


def process_gone(pid: int) -> bool:
    """Whether process pid has exited: no entry in /proc, or a zombie nobody reaped yet."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    i = stat.rfind(b")")
    return i < 0 or stat[i + 2:i + 3] in (b"Z", b"X", b"")
