"""LMCache's batched pattern through redis-py, timed: kvring's Redis-protocol port against redis-server.

LMCache's Redis connector stores a batch of chunks as concurrent `SET <k>kv_bytes` and `SET <k>metadata` (28 bytes:
its RemoteMetadata, seven int32s) and reads them back as concurrent `GET <k>metadata` and `GET <k>kv_bytes`, keys in
its current layout `<model>@<world size>@<worker id>@<chunk hash hex>@<dtype>` (cmd/kvring/testdata/
resp_lmcache_sequence.py runs the same commands one by one, for correctness). This script times that pattern: per
value size and round, every target in turn (alternating, so a busy host slows them alike) is emptied (FLUSHDB), sent
BYTES of kv_bytes in chunks of SIZE with a pool of THREADS threads (each chunk: SET kv_bytes then SET metadata), then
read back the same way (GET metadata then GET kv_bytes). Put GB/s counts the kv_bytes of acknowledged SETs, get GB/s
the kv_bytes read back exact.

Every GET is checked against the bytes SET, outside the timed part: a nil for a chunk whose SET was acknowledged,
other bytes, wrong metadata or an error reply (e.g. -TRYAGAIN) is a failure; the script prints each loudly and exits
1 after the table. A refused SET is counted (refused), not a failure.

Usage:
    resp_lmcache_bench.py --target NAME=HOST:PORT [--target ...] --peer NAME [--sizes 3145728,33554432]
                          [--bytes 1073741824] [--threads 16] [--reps 3] [--parser default|hiredis|python]

redis-py parses replies with hiredis when the hiredis module is installed (`pip install redis[hiredis]`, Debian's
python3-hiredis), else with its pure-Python parser, which reads a 3 MiB reply about ten times slower (every 64 KiB
piece copied through a BytesIO): with it the client, not the server, sets the get rate. The script prints which one
runs; --parser picks one.

Prints one line per target and round, then per size and target the median put and get GB/s and, for every target
but the peer, the ratio of its medians to the peer's (and the range of its per-round ratios).
"""

import argparse
import concurrent.futures
import hashlib
import os
import statistics
import struct
import sys
import time

import redis

MODEL = "meta-llama/Llama-3.1-8B"


def chunk_key(size, i):
    """A current-layout LMCache key prefix: <model>@<world>@<worker>@<hash hex>@<dtype>."""
    h = int.from_bytes(hashlib.sha256(b"%d/%d" % (size, i)).digest()[:8], "big", signed=True)
    return f"{MODEL}@1@0@{h:x}@bfloat16"


def metadata(size):
    """LMCache's RemoteMetadata: length, a 4-dimension shape, dtype and format, seven int32s (28 bytes)."""
    return struct.pack("<7i", size, 2, 256, 8, size // (2 * 256 * 8 * 2), 1, 1)


def parser_class(name):
    """redis-py's reply parser: hiredis (redis-py's default when the hiredis module is installed, as `pip install
    redis[hiredis]` does) or its pure-Python parser; "default" is whichever redis-py picks."""
    import redis.connection as rc
    classes = {"python": rc.PythonParser, "hiredis": getattr(rc, "HiredisParser", None), "default": rc.DefaultParser}
    if classes.get(name) is None or (name == "hiredis" and not redis.utils.HIREDIS_AVAILABLE):
        raise SystemExit(f"parser {name!r} is not available (hiredis: apt-get install python3-hiredis)")
    return classes[name]


class Target:
    def __init__(self, name, addr, threads, parser):
        self.name = name
        host, port = addr.rsplit(":", 1)
        pool = redis.ConnectionPool(host=host, port=int(port), max_connections=threads, socket_timeout=120,
                                    parser_class=parser)
        self.r = redis.Redis(connection_pool=pool)


def put_one(r, key, kv, meta):
    """One chunk as LMCache puts it: kv_bytes first, then metadata. True when both were acknowledged."""
    try:
        return r.set(key + "kv_bytes", kv) is True and r.set(key + "metadata", meta) is True
    except redis.RedisError as e:
        return e


def get_one(r, key):
    """One chunk as LMCache gets it: metadata, then kv_bytes. An error reply stands in for a value."""
    out = []
    for suffix in ("metadata", "kv_bytes"):
        try:
            out.append(r.get(key + suffix))
        except redis.RedisError as e:
            out.append(e)
    return tuple(out)


def put_phase(pool, t, keys, payloads, meta):
    start = time.perf_counter()
    acks = list(pool.map(lambda kp: put_one(t.r, kp[0], kp[1], meta), zip(keys, payloads)))
    return time.perf_counter() - start, acks


def get_phase(pool, t, keys):
    start = time.perf_counter()
    got = list(pool.map(lambda k: get_one(t.r, k), keys))
    return time.perf_counter() - start, got


def verify(t, keys, payloads, meta, acks, got):
    """Counts of what came back: ok, nil for an acknowledged chunk, other bytes, refused puts. Prints failures."""
    c = dict(ok=0, nil_acked=0, nil_refused=0, mismatch=0, get_error=0, refused=0)
    for i, (key, want, ack, (gm, gk)) in enumerate(zip(keys, payloads, acks, got)):
        if ack is not True:
            c["refused"] += 1
            if c["refused"] <= 3:
                print(f"  {t.name}: SET {key} not acknowledged: {ack!r}", file=sys.stderr)
        err = next((v for v in (gm, gk) if isinstance(v, Exception)), None)
        if err is not None:
            c["get_error"] += 1
            print(f"FAIL {t.name}: chunk {i} ({key}): GET answered an error: {err}", file=sys.stderr)
            continue
        if gk is None or gm is None:
            c["nil_acked" if ack is True else "nil_refused"] += 1
            if ack is True:
                print(f"FAIL {t.name}: chunk {i} ({key}) was acknowledged and reads nil "
                      f"(metadata {'nil' if gm is None else 'ok'}, kv_bytes {'nil' if gk is None else 'ok'})",
                      file=sys.stderr)
            continue
        if gk != want or gm != meta:
            c["mismatch"] += 1
            print(f"FAIL {t.name}: chunk {i} ({key}) reads other bytes ({len(gk)} kv_bytes, want {len(want)}; "
                  f"metadata {'ok' if gm == meta else 'differs'})", file=sys.stderr)
            continue
        c["ok"] += 1
    return c


def run_round(pool, t, size, keys, payloads):
    """One put phase and one get phase against t, emptied first. Returns (put GB/s, get GB/s, counts): put counts the
    acknowledged chunks' bytes, get the bytes read back exact."""
    t.r.flushdb()
    meta = metadata(size)
    put_s, acks = put_phase(pool, t, keys, payloads, meta)
    get_s, got = get_phase(pool, t, keys)
    counts = verify(t, keys, payloads, meta, acks, got)
    del got
    acked = sum(1 for a in acks if a is True)
    return size * acked / put_s / 1e9, size * counts["ok"] / get_s / 1e9, counts


def summarize(size, targets, peer, res):
    """Median GB/s per target and the ratios of every other target to the peer."""
    print(f"# {size >> 20} MiB chunks: medians over {len(res[peer])} rounds")
    print(f"{'size':>6} {'target':<12} {'put GB/s':>9} {'get GB/s':>9} {'put ratio':>10} {'get ratio':>10}"
          f"  per-round ratios put / get")
    pp = statistics.median(r[0] for r in res[peer])
    pg = statistics.median(r[1] for r in res[peer])
    for t in targets:
        mp = statistics.median(r[0] for r in res[t.name])
        mg = statistics.median(r[1] for r in res[t.name])
        if t.name == peer:
            print(f"{size >> 20:>4}Mi {t.name:<12} {mp:9.3f} {mg:9.3f} {'(peer)':>10} {'':>10}")
            continue
        rp = [a[0] / b[0] for a, b in zip(res[t.name], res[peer])]
        rg = [a[1] / b[1] for a, b in zip(res[t.name], res[peer])]
        print(f"{size >> 20:>4}Mi {t.name:<12} {mp:9.3f} {mg:9.3f} {mp / pp:9.2f}x {mg / pg:9.2f}x"
              f"  {min(rp):.2f}-{max(rp):.2f} / {min(rg):.2f}-{max(rg):.2f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--target", action="append", required=True, help="NAME=HOST:PORT, in the order they run")
    p.add_argument("--peer", required=True, help="the target the others are divided by")
    p.add_argument("--sizes", default="%d,%d" % (3 << 20, 32 << 20))
    p.add_argument("--bytes", type=int, default=1 << 30, help="kv_bytes each way per round and target")
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--parser", default="default", choices=["default", "hiredis", "python"],
                   help="redis-py's reply parser (default: hiredis when installed, else the pure-Python one)")
    a = p.parse_args()
    parser = parser_class(a.parser)
    print(f"# redis-py {redis.__version__}, reply parser {parser.__name__}", flush=True)
    targets = [Target(*spec.split("=", 1), a.threads, parser) for spec in a.target]
    if a.peer not in [t.name for t in targets]:
        p.error(f"--peer {a.peer} is not a --target")
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.threads) as pool:
        for size in (int(s) for s in a.sizes.split(",")):
            n = max(1, a.bytes // size)
            keys = [chunk_key(size, i) for i in range(n)]
            payloads = [os.urandom(size) for _ in range(n)]
            res = {t.name: [] for t in targets}
            for rep in range(a.reps):
                for t in targets:
                    put, get, c = run_round(pool, t, size, keys, payloads)
                    res[t.name].append((put, get))
                    failed += c["nil_acked"] + c["mismatch"] + c["get_error"]
                    print(f"round {rep + 1} {size >> 20:>3} MiB x {n} {t.name:<12} put {put:6.3f} GB/s "
                          f"get {get:6.3f} GB/s  " + " ".join(f"{k}={v}" for k, v in c.items()), flush=True)
            summarize(size, targets, a.peer, res)
            del payloads
    for t in targets:
        t.r.flushdb()
    if failed:
        print(f"FAIL: {failed} chunks read back nil after an acknowledged SET, other bytes, or an error", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
