"""Real kvring nodes for the tests: the binary built from this repository (or $KVRING_BIN), started through kvnodes
(internal/launch/cmd/kvnodes, or $KVNODES_BIN), the launcher the Go tests and the loadtest tools use too: it picks
the ports, waits until the node is ready, stops, kills and restarts it, and removes its data and /dev/shm
directories. Only processes started here are ever killed, by their pid.

Nothing outlives the test run, however it ends: each kvnodes stops its node when its standard input closes (the
interpreter exited) or its parent dies (PR_SET_PDEATHSIG), and the run's files live in scratch directories (Scratch)
that are removed at exit, by a janitor process when the interpreter is killed, and by the next run's sweep when
even the janitor was. The scheme is internal/testutil's (scratch.go, process.go), which the Go tests use."""

from __future__ import annotations

import atexit
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Optional

REPO = Path(__file__).resolve().parents[2]


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
    """subprocess.Popen for a child that must die with the interpreter (DIE_WITH_PARENT): the go builds, a test's child
    run; kvnodes asks for its own signal. Its pid is the program's. The kernel's signal follows the forking *thread*, so children are started only from the main thread (pytest
    runs tests on it), which lives as long as the interpreter."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("start test processes from the main thread: a child dies with the thread that forked it")
    return subprocess.Popen([sys.executable, "-I", "-c", DIE_WITH_PARENT, str(os.getpid()), *args], **kw)


_built: dict[str, str] = {}


def go_binary(tmp_root: str, pkg: str, env_var: str) -> str:
    """$env_var, or the command at pkg (a path in the repository) built once per test session into tmp_root."""
    env_bin = os.environ.get(env_var)
    if env_bin:
        return env_bin
    if pkg not in _built:
        out = os.path.join(tmp_root, os.path.basename(pkg))
        build = popen(["go", "build", "-o", out, pkg], cwd=REPO)
        if build.wait() != 0:
            raise RuntimeError(f"go build {pkg} exited with {build.returncode}")
        _built[pkg] = out
    return _built[pkg]


def kvring_binary(tmp_root: str) -> str:
    """$KVRING_BIN, or the kvring binary built once per test session from the repository."""
    return go_binary(tmp_root, "./cmd/kvring", "KVRING_BIN")


def kvnodes_binary(tmp_root: str) -> str:
    """$KVNODES_BIN, or the launcher every test and tool starts real nodes with (internal/launch/cmd/kvnodes),
    built once per test session from the repository."""
    return go_binary(tmp_root, "./internal/launch/cmd/kvnodes", "KVNODES_BIN")


def read_env(path: str) -> dict[str, list[str]]:
    """The variables of a kvnodes env file (bash assignments of single-quoted words): each array's words, and a plain
    variable as a list of one."""
    out: dict[str, list[str]] = {}
    with open(path) as f:
        for line in f:
            name, eq, val = line.rstrip("\n").partition("=")
            if not eq or name.startswith("#"):
                continue
            if val.startswith("(") and val.endswith(")"):
                val = val[1:-1]
            out[name] = shlex.split(val)
    return out


class Node:
    """One `kvring serve` process, started, kept and cleaned up by a kvnodes process of its own (the launcher the Go
    tests and the loadtest tools use: ports the kernel picks, held while the node is down, a data and a segment
    directory removed at the end, ready once /readyz answers). start() returns once the node is ready; a later
    start() restarts it on the same addresses, directories and flags. kvnodes stops its node when its standard input
    closes, that is when this interpreter exits however it exits, and dies with it (its PR_SET_PDEATHSIG)."""

    def __init__(self, binary: str, root: str, name: str, extra: list[str] | None = None, join: str | None = None,
                 kvnodes: str | None = None):
        self.binary = binary
        self.kvnodes = kvnodes or kvnodes_binary(root)
        self.name = name
        self.dir = os.path.join(root, name)  # kvnodes' -dir: the node's own directory is dir/n1
        os.makedirs(self.dir, exist_ok=True)
        self.extra = list(extra or [])
        self.join = join
        self.launcher: Optional[subprocess.Popen] = None
        self.grpc = self.admin = self.gossip = self.id = ""
        self.pid = 0
        self._env = os.path.join(self.dir, "nodes.env")
        self._errors = os.path.join(self.dir, "kvnodes.txt")
        self._control = self._log_path = ""

    def start(self, timeout: float = 30.0) -> "Node":
        if self.launcher is not None:
            self._ctl("restart", timeout + 15)
            return self._read()
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("start nodes from the main thread: kvnodes dies with the thread that forked it")
        args = [self.kvnodes, "-n", "1", "-no-join", "-kvring", self.binary, "-env", self._env, "-dir", self.dir,
                "-memory-limit", "64MiB", f"-ready-timeout={timeout}s", "-stop-timeout=15s"]
        if current_scratch is not None:  # the segments go to the run's scratch directory (else /dev/shm)
            args += ["-shm-root", current_scratch.shm or current_scratch.tmp]
        args += ["--", "--rejoin-interval", "1s", *self.extra]
        if self.join:
            args += ["--join", self.join]
        with open(self._errors, "wb") as errors:
            self.launcher = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=errors, stderr=subprocess.STDOUT)

        def ready():
            if self.launcher.poll() is not None:
                raise Fatal(f"kvnodes for node {self.name} exited with {self.launcher.returncode}:\n{self._said()}")
            return os.path.exists(self._env)

        wait_for(ready, timeout + 15, f"node {self.name} to be ready")
        return self._read()

    def _read(self) -> "Node":
        env = read_env(self._env)
        self.id, self.grpc, self.admin, self.gossip = (env[k][0] for k in ("ids", "grpcs", "admins", "gossips"))
        self.pid = int(env["node_pids"][0])
        self._control, self._log_path = env["kv_control"][0], env["logs"][0]
        return self

    def _said(self) -> str:
        try:
            with open(self._errors, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def _ctl(self, command: str, timeout: float = 30.0) -> None:
        """Runs `kvnodes ctl` on this node; returns once kvnodes has done it."""
        r = subprocess.run([self.kvnodes, "ctl", self._control, command, "1"], capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"kvnodes ctl {command} (node {self.name}): {r.stderr.strip()}")

    def log(self) -> str:
        """What the node has logged, over all its starts."""
        try:
            with open(self._log_path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def _running(self) -> bool:
        return self.launcher is not None and self.launcher.poll() is None and bool(self._control)

    def kill(self) -> None:
        """SIGKILL the node and wait until it has exited; its ports stay held until start()."""
        if self._running():
            self._ctl("kill")

    def stop(self) -> None:
        """SIGTERM (clean shutdown), SIGKILL after 15 s; start() brings the node back."""
        if self._running():
            self._ctl("stop", 30)

    def cleanup(self) -> None:
        """Ends kvnodes: it stops the node (SIGTERM, SIGKILL after 15 s) and removes the node's directories."""
        if self.launcher is None or self.launcher.stdin.closed:
            return
        self.launcher.stdin.close()
        try:
            self.launcher.wait(30)
        except subprocess.TimeoutExpired:
            self.launcher.kill()  # its node dies with it (PR_SET_PDEATHSIG); the scratch janitor removes the rest
            self.launcher.wait()


def process_gone(pid: int) -> bool:
    """Whether process pid has exited: no entry in /proc, or a zombie nobody reaped yet."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return True
    i = stat.rfind(b")")
    return i < 0 or stat[i + 2:i + 3] in (b"Z", b"X", b"")
