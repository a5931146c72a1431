"""LMCache's access pattern against kvring's Redis-protocol port, with redis-py (Debian's python3-redis).

Usage: resp_lmcache.py ADDR [ADDR ...], each HOST:PORT or unix:///path (a Redis-protocol socket, as LMCache's
remote_url names one: redis.from_url). RESP_LMCACHE_SIZES (comma-separated bytes) replaces the sizes. Each chunk is written through one node and read back through
the next, byte-exact, for 256 KiB, 2 MiB and 8 MiB values: SET kv_bytes, SET metadata, EXISTS metadata, GET both;
the same through a pipeline, and MGET. Prints one line per size; exits non-zero on the first difference.
"""

import os
import sys

import redis

def describe(got, want):
    """What a read returned, against what it should have: a miss and other bytes are different failures."""
    if got == want:
        return "ok"
    if got is None:
        return "nil (a miss)"
    if want is None:
        return f"{len(got)} bytes where nil was expected"
    return f"{len(got)} other bytes (want {len(want)})"


clients = []
for addr in sys.argv[1:]:
    if addr.startswith("unix://"):
        clients.append(redis.from_url(addr, socket_timeout=60))
        continue
    host, port = addr.rsplit(":", 1)
    clients.append(redis.Redis(host=host, port=int(port), socket_timeout=60))

sizes = [int(s) for s in os.environ.get("RESP_LMCACHE_SIZES", "%d,%d,%d" % (256 << 10, 2 << 20, 8 << 20)).split(",")]
for n, size in enumerate(sizes):
    for i in range(4):
        w, r = clients[i % len(clients)], clients[(i + 1) % len(clients)]
        key = f"vllm@meta-llama/Llama-3.1-8B@1@0@{size:x}{i:04x}"
        kv = os.urandom(size)
        meta = b'{"fmt":"vllm","shape":[32,2,256,8,128],"dtype":"bfloat16","length":%d}' % size
        assert w.set(key + "kv_bytes", kv) is True, "SET kv_bytes"
        assert w.set(key + "metadata", meta) is True, "SET metadata"
        assert r.exists(key + "metadata") == 1, "EXISTS metadata"
        assert r.get(key + "metadata") == meta, "GET metadata"
        got = r.get(key + "kv_bytes")
        assert got == kv, f"GET kv_bytes: {describe(got, kv)}"

        p = w.pipeline(transaction=False)
        pk = key + "-pipelined"
        p.set(pk + "kv_bytes", kv)
        p.set(pk + "metadata", meta)
        p.exists(pk + "metadata")
        p.get(pk + "kv_bytes")
        p.get(pk + "metadata")
        out = p.execute()
        assert out[:3] == [True, True, 1], f"pipeline replies {out[:3]}"
        assert out[3] == kv and out[4] == meta, f"pipelined GET: kv_bytes {describe(out[3], kv)}, metadata {describe(out[4], meta)}"

        got = r.mget([key + "kv_bytes", key + "metadata", key + "absent", pk + "kv_bytes"])
        want = [kv, meta, None, kv]
        assert got == want, "MGET: " + "; ".join(describe(g, w) for g, w in zip(got, want))
        assert r.get(key + "absent") is None, "GET of an absent key"
    print(f"{size} bytes: ok")
