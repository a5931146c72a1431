#!/usr/bin/env python3
"""How long the Python client takes to build its ring (kvring.ring.Ring) with the default settings: the work it does
on every membership change it learns of. Prints, per member count, the best and median of --runs builds in
milliseconds, and the process CPU time per build (which the best of several runs approaches on a busy host).

    /usr/bin/python3 python/bench/ring_build.py [--members 64,128,256] [--runs 7] [--replication 1] [--pure]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kvring import ring  # noqa: E402
from kvring.ring import Member, Ring, RingConfig, xxh64  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", default="64,128,256")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--replication", type=int, default=1, help="replication factor (owners walked for every partition)")
    ap.add_argument("--pure", action="store_true", help="build the circle without numpy even when it is installed")
    args = ap.parse_args()
    if args.pure:
        ring._circle = ring._circle_py
    cfg = RingConfig(replication_factor=args.replication)
    impl = "C (xxhash module)" if xxh64.__name__ == "<lambda>" else "pure Python"
    circle = "numpy" if ring._circle is ring._circle_numpy else "pure Python"
    print(f"python {sys.version.split()[0]}, xxh64 {impl}, circle {circle}; {cfg.partition_count} partitions, "
          f"{cfg.virtual_nodes} virtual nodes, load {cfg.load}, replication {cfg.replication_factor}")
    print("| members | best ms | median ms | CPU ms per build |")
    print("|---:|---:|---:|---:|")
    for n in (int(x) for x in args.members.split(",")):
        members = [Member(f"node-{i}") for i in range(n)]
        wall = []
        cpu0 = time.process_time()
        for _ in range(args.runs):
            t0 = time.perf_counter()
            r = Ring(members, 1, cfg)
            if args.replication > 1:
                for p in range(cfg.partition_count):
                    r.partition_owners(p, args.replication)
            wall.append((time.perf_counter() - t0) * 1e3)
        cpu = (time.process_time() - cpu0) * 1e3 / args.runs
        print(f"| {n} | {min(wall):.1f} | {statistics.median(wall):.1f} | {cpu:.1f} |")


if __name__ == "__main__":
    main()
