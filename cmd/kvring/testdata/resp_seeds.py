"""An engine that hashes token prefixes as LMCache does, against kvring's Redis-protocol port (redis-py).

Usage: resp_seeds.py HOST:PORT CHUNKS. For CHUNKS chunks of one fixed prompt it computes LMCache's chained chunk
hashes, then for each chunk in order asks EXISTS <key>metadata: on a hit it GETs both keys and checks them, on the
first miss it stores that chunk and every later one (SET kv_bytes, SET metadata), as LMCache's lookup then store
does. Prints "hits H misses M stored S".

The chain starts from a hash of PYTHONHASHSEED, as vLLM's NONE_HASH does when the variable is set (without it vLLM
draws random bytes, so every process starts its own chain). Engines started with different seeds compute different
keys for the same prompt: they write, and never find each other's chunks. The chunk hash is Python's builtin hash of
(parent hash, tokens), LMCache's default "builtin" algorithm (LMCache also hashes an extra_keys field, None by
default, whose hash before Python 3.12 is its address: another per-process difference this script leaves out).
"""

import os
import sys

import redis

addr, chunks = sys.argv[1], int(sys.argv[2])
host, port = addr.rsplit(":", 1)
r = redis.Redis(host=host, port=int(port), socket_timeout=60)

seed = os.environ["PYTHONHASHSEED"]
parent = hash(seed)
keys = []
for i in range(chunks):
    tokens = tuple(range(i * 256, (i + 1) * 256))
    parent = hash((parent, tokens))
    keys.append(f"Qwen/Qwen2.5-0.5B-Instruct@1@0@{parent:x}@bfloat16")


def value(i):
    return bytes([i % 251]) * 4096


hits = misses = stored = 0
missed = False
for i, key in enumerate(keys):
    if not missed and r.exists(key + "metadata") == 1:
        assert r.get(key + "kv_bytes") == value(i), f"GET {key}kv_bytes: other bytes"
        assert r.get(key + "metadata") == b"meta%d" % i, f"GET {key}metadata: other bytes"
        hits += 1
        continue
    if not missed:
        misses += 1  # the lookup stops at its first miss
    missed = True
    assert r.set(key + "kv_bytes", value(i)) is True, "SET kv_bytes"
    assert r.set(key + "metadata", b"meta%d" % i) is True, "SET metadata"
    stored += 1
print(f"hits {hits} misses {misses} stored {stored}")
