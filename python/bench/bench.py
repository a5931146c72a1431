#!/usr/bin/env python3
"""Python client vs Go SDK: put and get throughput on the same cluster, in one run.

Starts a cluster of real nodes (the kvring binary built from this repository, or $KVRING_BIN, through kvnodes as the
tests do: tests/cluster.py; the first node serves its local socket), then for each chunk size runs the Go SDK
(python/bench/gosdk, built here), this package over gRPC and this package over the first node's local socket on the
same workload: `--bytes` of random chunks put in batches of `--batch`, then read back `--rounds` times. Prints a markdown table of GB/s with the Python/Go ratio
over gRPC and the socket/gRPC ratio of the Python client (docs/benchmarks.md records them).

    /usr/bin/python3 python/bench/bench.py [--nodes 1] [--sizes 2097152,262144]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "tests")]

import kvring  # noqa: E402
import kvring._stcall  # noqa: E402
from cluster import REPO, Node, kvring_binary, wait_for  # noqa: E402


def py_bench(seeds: list[str], ns: str, size: int, count: int, batch: int, rounds: int, socket: str = "",
             routing: bool = True, nodes: int = 1, socket_json: bool = False) -> list[dict]:
    c = kvring.Client(seeds, ns, kvring.Schema(model="bench", dtype="bf16", tokens_per_chunk=16), socket=socket,
                      routing=routing)
    if socket_json and c._local is not None:
        c._local.json_only = True  # as a node from before the binary framing is spoken to
    try:
        wait_for(lambda: c.state.status is kvring.ConnStatus.CONNECTED, 10, "python client to connect")
        c.register()
        if routing:  # the ring view a long-running engine has
            wait_for(lambda: len(c.refresh_routing().members) == nodes, 10, "the ring view")
        chunks = [kvring.Chunk(os.urandom(32), os.urandom(size)) for _ in range(count)]
        ids = [ch.id for ch in chunks]
        t = time.perf_counter()
        for i in range(0, count, batch):
            for r in c.put(chunks[i : i + batch]):
                if r.status != kvring.PutStatus.STORED:
                    raise RuntimeError(f"put: {r.status} {r.reason}")
        put_s = time.perf_counter() - t
        # get: fresh bytes objects; get_into: reused caller buffers (what an engine does)
        out = []
        for op in ("get", "get_into"):
            bufs = [bytearray(size) for _ in range(batch)]
            t = time.perf_counter()
            for _ in range(rounds):
                for i in range(0, count, batch):
                    part = ids[i : i + batch]
                    if op == "get":
                        got = c.get(part)
                        ok = all(g is not None for g in got)
                    else:
                        ok = all(n == size for n in c.get_into(part, bufs[: len(part)]))
                    if not ok:
                        raise RuntimeError(f"{op}: a chunk was missing")
            s = time.perf_counter() - t
            out.append({"op": op, "size": size, "secs": s, "gbps": size * count * rounds / s / 1e9})
        if socket and c.stats.socket_calls != count // batch * (1 + 2 * rounds):
            raise RuntimeError(f"only {c.stats.socket_calls} calls went through the socket")
        return [{"op": "put", "size": size, "secs": put_s, "gbps": size * count / put_s / 1e9}] + out
    finally:
        c.close()


def warm(seeds: list[str], limit: str, nodes: int) -> None:
    """Puts limit bytes (e.g. "768MiB") per node in 2 MiB chunks, so every slot the budget allows has been used."""
    units = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    total = next(int(float(limit[: -len(u)]) * m) for u, m in units.items() if limit.endswith(u)) * nodes
    size = 2 << 20
    py_bench(seeds, f"bench/warm/{os.getpid()}", size, total // size, 4, 0, nodes=nodes)


def go_bench(gobin: str, seeds: list[str], ns: str, size: int, count: int, batch: int, rounds: int, no_routing: bool) -> list[dict]:
    args = [gobin, "-seeds", ",".join(seeds), "-namespace", ns, "-size", str(size), "-chunks", str(count),
            "-batch", str(batch), "-rounds", str(rounds)]
    if no_routing:
        args.append("-no-routing")
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--sizes", default=f"{2 << 20},{256 << 10}")
    ap.add_argument("--bytes", type=int, default=256 << 20, help="bytes put per size and client")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="runs per client; the best is kept")
    ap.add_argument("--no-socket", action="store_true", help="skip the Python client over the local socket")
    ap.add_argument("--socket-json", action="store_true",
                    help="also run the Python client over the socket in JSON only, without the binary framing (A/B)")
    ap.add_argument("--software-crc", action="store_true",
                    help="also run the Python client over gRPC with the crc32c package's software CRC (A/B)")
    ap.add_argument("--threaded-puts", action="store_true",
                    help="also run the Python client over gRPC with puts through grpcio's stream_stream and its "
                         "threads instead of driven on the calling thread (kvring._stcall; A/B)")
    ap.add_argument("--memory-limit", default="6GiB",
                    help="each node's --memory-limit; with --warm, a budget below what a run puts makes the puts "
                         "reuse slots whose pages exist, as on a node that has been running (evicting)")
    ap.add_argument("--warm", action="store_true",
                    help="before measuring, put the node's whole --memory-limit once (Python over gRPC, a namespace of "
                         "its own), so no client's puts land on never-touched shared memory")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvring-pybench-") as root:
        binary = kvring_binary(root)
        gobin = os.path.join(root, "gosdk")
        subprocess.run(["go", "build", "-o", gobin, "./python/bench/gosdk"], cwd=REPO, check=True)
        nodes = []
        try:
            sock = os.path.join(root, "kvring.sock")
            for i in range(a.nodes):
                extra = ["--memory-limit", a.memory_limit] + (["--socket", sock] if i == 0 else [])
                n = Node(binary, root, f"b{i}", extra=extra, join=nodes[0].gossip if nodes else None)
                nodes.append(n)
                n.start()
            seeds = [nodes[0].grpc]
            if a.warm:
                warm(seeds, a.memory_limit, a.nodes)
            rows = []
            for size in [int(s) for s in a.sizes.split(",")]:
                count = max(a.batch, a.bytes // size)
                best: dict[tuple[str, str], float] = {}
                for rep in range(a.repeat):
                    runs = [("go", False), ("python", None)] + ([("go-unrouted", True)] if a.nodes > 1 else [])
                    runs += [] if a.no_socket else [("python-socket", None)]
                    runs += [("python-socket-json", None)] if a.socket_json and not a.no_socket else []
                    runs += [("python-swcrc", None)] if a.software_crc else []
                    runs += [("python-threaded", None)] if a.threaded_puts else []
                    runs += [("python-unrouted", None)] if a.nodes > 1 else []
                    for who, no_route in runs:
                        ns = f"bench/{who}/{size}/{rep}/{os.getpid()}"
                        if who == "python":
                            res = py_bench(seeds, ns, size, count, a.batch, a.rounds, nodes=a.nodes)
                        elif who == "python-unrouted":
                            res = py_bench(seeds, ns, size, count, a.batch, a.rounds, routing=False)
                        elif who == "python-socket":
                            res = py_bench(seeds, ns, size, count, a.batch, a.rounds, socket=sock, nodes=a.nodes)
                        elif who == "python-socket-json":
                            res = py_bench(seeds, ns, size, count, a.batch, a.rounds, socket=sock, nodes=a.nodes,
                                           socket_json=True)
                        elif who == "python-swcrc":
                            import crc32c as pkg  # noqa: PLC0415 - python3-crc32c

                            hw, kvring.client.crc32c = kvring.client.crc32c, lambda d, c=0: pkg.crc32c(d, c)
                            try:
                                res = py_bench(seeds, ns, size, count, a.batch, a.rounds, nodes=a.nodes)
                            finally:
                                kvring.client.crc32c = hw
                        elif who == "python-threaded":
                            kvring._stcall.ENABLED = False
                            try:
                                res = py_bench(seeds, ns, size, count, a.batch, a.rounds, nodes=a.nodes)
                            finally:
                                kvring._stcall.ENABLED = True
                        else:
                            res = go_bench(gobin, seeds, ns, size, count, a.batch, a.rounds, bool(no_route))
                        for r in res:
                            k = (who, r["op"])
                            best[k] = max(best.get(k, 0.0), r["gbps"])
                rows.append((size, count, best))
        finally:
            for n in nodes:
                n.cleanup()
    print(f"nodes={a.nodes} batch={a.batch} rounds={a.rounds} repeat={a.repeat} (best of) "
          f"crc32c={kvring.checksum.IMPLEMENTATION}")
    print("| chunk | op | Go SDK GB/s | Python gRPC GB/s | Python / Go | Python socket GB/s | socket / gRPC |")
    print("|---|---|---|---|---|---|---|")
    for size, count, best in rows:
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        for op, pyop in (("put", "put"), ("get", "get"), ("get", "get_into")):
            g, p = best[("go", op)], best[("python", pyop)]
            name = op if pyop == op else "get (Python get_into)"
            sk = best.get(("python-socket", pyop))
            tail = f" {sk:.2f} | {sk / p:.2f}x |" if sk else " - | - |"
            print(f"| {label} | {name} | {g:.2f} | {p:.2f} | {p / g:.2f}x |{tail}")
        if ("python-socket-json", "put") in best:
            p = best[("python", "put")]
            sk = best[("python-socket-json", "put")]
            print(f"| {label} | put, Python socket in JSON | {best[('go', 'put')]:.2f} | {p:.2f} | "
                  f"{p / best[('go', 'put')]:.2f}x | {sk:.2f} | {sk / p:.2f}x |")
        if ("python-swcrc", "put") in best:
            for op in ("put", "get"):
                p = best[("python-swcrc", op)]
                print(f"| {label} | {op}, Python with the software CRC | {best[('go', op)]:.2f} | {p:.2f} | "
                      f"{p / best[('go', op)]:.2f}x | - | - |")
        if ("python-threaded", "put") in best:
            p = best[("python-threaded", "put")]
            print(f"| {label} | put, Python through grpcio's stream_stream threads | {best[('go', 'put')]:.2f} | "
                  f"{p:.2f} | {p / best[('go', 'put')]:.2f}x | - | - |")
        if ("go-unrouted", "put") in best:
            for op in ("put", "get"):
                g, p = best[("go-unrouted", op)], best[("python-unrouted", op)]
                print(f"| {label} | {op}, both unrouted | {g:.2f} | {p:.2f} | {p / g:.2f}x | - | - |")


if __name__ == "__main__":
    main()
