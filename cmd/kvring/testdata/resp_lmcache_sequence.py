"""LMCache's exact command sequence against kvring's Redis-protocol port, with redis-py (Debian's python3-redis).

LMCache's Redis connector stores a chunk as `SET <k>kv_bytes` and then `SET <k>metadata` (28 bytes: its
RemoteMetadata, seven int32s); to find a prompt's cached prefix it asks `EXISTS <k>metadata` chunk by chunk until the
first miss; it retrieves a chunk with `GET <k>metadata` and then `GET <k>kv_bytes`, and when the bytes read nil it
deletes the metadata (`DEL <k>metadata`). This script runs that sequence for both of LMCache's key layouts:

    current  <model>@<world size>@<worker id>@<chunk hash hex>@<dtype>
    older    vllm@<model>@<world size>@<worker id>@<chunk hash hex>

Usage:
    resp_lmcache_sequence.py --mode plain|cluster --addr HOST:PORT --seed S --role writer --writer W
    resp_lmcache_sequence.py --mode plain|cluster --addr HOST:PORT --seed S --role reader --writer W [--writer W ...]

A writer stores writer W's chunks (its plan: per layout one model and worker, three 3 MiB chunks and one 32 MiB
chunk) and then retrieves them as LMCache does. A reader retrieves what the named writers stored, possibly from
another process and through another node: each value is derived from its key and the seed, so any process can check
what any writer wrote, byte by byte. Every prompt is the written chunks followed by two that were never written: the
EXISTS walk must find every written chunk and stop at the first unwritten one. `--mode cluster` uses
redis.cluster.RedisCluster with ADDR as its startup node (kvring serve --resp-cluster).

Prints one JSON line (what was written, found, read and verified; metadata_deletes counts the DELs LMCache would have
sent for metadata whose kv_bytes read nil) and exits non-zero on the first difference.
"""

import argparse
import hashlib
import json
import struct
import sys

import redis
import redis.cluster

MiB = 1 << 20

# Per writer, the (model, world size, worker id, dtype) of its current-layout chunks and the (model, world size,
# worker id) of its older-layout ones. Writers 1 and 2 are the two tensor-parallel ranks of one engine: their chunks
# share hashes and differ by worker id, as LMCache's do.
CURRENT = [
    ("Qwen/Qwen2.5-0.5B-Instruct", 1, 0, "bfloat16"),
    ("meta-llama/Llama-3.1-8B", 2, 0, "bfloat16"),
    ("meta-llama/Llama-3.1-8B", 2, 1, "bfloat16"),
]
OLDER = [
    ("meta-llama/Llama-3.1-8B", 1, 0),
    ("mistralai/Mistral-7B-Instruct-v0.3", 2, 0),
    ("mistralai/Mistral-7B-Instruct-v0.3", 2, 1),
]
SIZES = [3 * MiB, 3 * MiB, 3 * MiB, 32 * MiB]  # the prompt's chunks, in order
UNWRITTEN = 2  # chunks past the written ones in every prompt


def shake(seed, *parts, n):
    """n bytes derived from the seed and parts alone."""
    return hashlib.shake_256("\x00".join([str(seed), *map(str, parts)]).encode()).digest(n)


def chunk_hash(seed, model, i):
    """LMCache's chunk hash: a signed 64-bit Python hash, written as f"{h:x}" (a '-' when negative)."""
    h = int.from_bytes(shake(seed, "hash", model, i, n=8), "big", signed=True)
    return f"{h:x}"


def prompts(seed, writer):
    """Writer's prompts: [(layout, chunk key prefixes, sizes of the written ones)]."""
    out = []
    model, world, worker, dtype = CURRENT[writer % len(CURRENT)]
    keys = [f"{model}@{world}@{worker}@{chunk_hash(seed, model, i)}@{dtype}" for i in range(len(SIZES) + UNWRITTEN)]
    out.append(("current", keys, SIZES))
    model, world, worker = OLDER[writer % len(OLDER)]
    keys = [f"vllm@{model}@{world}@{worker}@{chunk_hash(seed, 'vllm' + model, i)}" for i in range(len(SIZES) + UNWRITTEN)]
    out.append(("older", keys, SIZES))
    return out


def kv_bytes(seed, key, size):
    return shake(seed, "kv", key, n=size)


def metadata(size):
    """LMCache's RemoteMetadata: length, a 4-dimension shape, dtype and format, seven int32s (28 bytes)."""
    return struct.pack("<7i", size, 2, 256, 8, size // (2 * 256 * 8 * 2), 1, 1)


class Failure(Exception):
    pass


def describe(got, want):
    if got is None:
        return "nil (a miss)"
    return f"{len(got)} other bytes (want {len(want)})"


def write(r, seed, keys, sizes, stats):
    """LMCache's put, chunk by chunk: kv_bytes first, then metadata."""
    for key, size in zip(keys, sizes):
        if r.set(key + "kv_bytes", kv_bytes(seed, key, size)) is not True:
            raise Failure(f"SET {key}kv_bytes was not OK")
        if r.set(key + "metadata", metadata(size)) is not True:
            raise Failure(f"SET {key}metadata was not OK")
        stats["chunks_written"] += 1
        stats["bytes_written"] += size


def lookup(r, keys):
    """LMCache's contains walk: EXISTS <k>metadata chunk by chunk until the first miss."""
    for i, key in enumerate(keys):
        if r.exists(key + "metadata") != 1:
            return i
    return len(keys)


def retrieve(r, seed, key, size, stats):
    """LMCache's get: metadata, then kv_bytes; metadata whose bytes read nil is deleted (and counted)."""
    meta = r.get(key + "metadata")
    if meta != metadata(size):
        raise Failure(f"GET {key}metadata: {describe(meta, metadata(size))}")
    got = r.get(key + "kv_bytes")
    if got is None:
        r.delete(key + "metadata")
        stats["metadata_deletes"] += 1
        return
    want = kv_bytes(seed, key, size)
    if got != want:
        raise Failure(f"GET {key}kv_bytes: {describe(got, want)}")
    stats["chunks_read"] += 1
    stats["bytes_verified"] += size


def check(r, seed, writer, stats):
    for layout, keys, sizes in prompts(seed, writer):
        found = lookup(r, keys)
        stats["chunks_found"] += found
        if found != len(sizes):
            raise Failure(f"writer {writer}, {layout} layout: the EXISTS walk found {found} chunks, want {len(sizes)} "
                          f"(stopping at {keys[min(found, len(keys) - 1)]}metadata)")
        for key, size in zip(keys, sizes):
            retrieve(r, seed, key, size, stats)
        for key in keys[len(sizes):]:
            for suffix in ("metadata", "kv_bytes"):
                if r.get(key + suffix) is not None:
                    raise Failure(f"GET {key}{suffix}, never written, returned bytes")


def connect(mode, addr):
    host, port = addr.rsplit(":", 1)
    if mode == "cluster":
        return redis.cluster.RedisCluster(host=host, port=int(port), socket_timeout=60)
    return redis.Redis(host=host, port=int(port), socket_timeout=60)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("plain", "cluster"), required=True)
    p.add_argument("--addr", required=True)
    p.add_argument("--seed", required=True)
    p.add_argument("--role", choices=("writer", "reader"), required=True)
    p.add_argument("--writer", type=int, action="append", required=True)
    a = p.parse_args()
    stats = dict(role=a.role, mode=a.mode, writers=a.writer, chunks_written=0, bytes_written=0, chunks_found=0,
                 chunks_read=0, bytes_verified=0, metadata_deletes=0)
    r = connect(a.mode, a.addr)
    try:
        if a.role == "writer":
            if len(a.writer) != 1:
                raise Failure("a writer writes one plan: give --writer once")
            for _, keys, sizes in prompts(a.seed, a.writer[0]):
                write(r, a.seed, keys, sizes, stats)
        for w in a.writer:
            check(r, a.seed, w, stats)
    except (Failure, redis.RedisError) as e:
        print(json.dumps(stats), file=sys.stderr)
        print(f"{a.role} through {a.addr} ({a.mode}): {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
