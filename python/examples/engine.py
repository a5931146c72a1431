#!/usr/bin/env python3
"""A small engine loop, as an inference engine would run it against kvring.

For each prompt: tokens -> chunk ids -> lookup (how many leading chunks the cluster holds) -> get the held chunks
straight into the KV tensor -> "compute" the missing chunks (random tensors stand in for the model's prefill) ->
put them. Prints what it reused and what it stored. Prompts share a system prefix, so later prompts reuse chunks
that earlier ones stored. With --socket (or $KVRING_SOCKET) naming a node's local socket on this host, chunk
bytes go through the node's shared memory instead of gRPC.

    /usr/bin/python3 python/examples/engine.py --seeds 127.0.0.1:9600 [--socket ./kvring-data/kvring.sock]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kvring  # noqa: E402

TOKENS_PER_CHUNK = 16
CHUNKS_PER_GROUP = 32
# The KV of one chunk: layers x (K, V) x tokens x kv_heads x head_dim, bf16 stored as uint16.
KV_SHAPE = (4, 2, TOKENS_PER_CHUNK, 8, 64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="127.0.0.1:9600", help="comma-separated gRPC addresses of kvring nodes")
    ap.add_argument("--namespace", default="example-llama/tp0of1")
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--socket", default=None, help="local socket of a node on this host (default: $KVRING_SOCKET)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    schema = kvring.Schema(model="example-llama", dtype="bf16", tokens_per_chunk=TOKENS_PER_CHUNK,
                           chunks_per_group=CHUNKS_PER_GROUP, layout="example:" + "x".join(map(str, KV_SHAPE)))
    rng = np.random.default_rng(0)
    system_prompt = rng.integers(0, 32000, size=40 * TOKENS_PER_CHUNK)  # shared by every request
    with kvring.Client(seeds=args.seeds.split(","), namespace=args.namespace, schema=schema,
                       socket=args.socket) as client:
        deadline = time.monotonic() + 10
        while client.state.status is not kvring.ConnStatus.CONNECTED:  # an engine would just start serving
            if time.monotonic() > deadline:
                sys.exit(f"kvring not reachable: {client.state.last_error}")
            time.sleep(0.05)
        for p in range(args.prompts):
            user = rng.integers(0, 32000, size=int(rng.integers(100, 400)))
            tokens = np.concatenate([system_prompt, user])
            ids = kvring.chunk_ids(tokens, TOKENS_PER_CHUNK)
            groups = kvring.group_keys(ids, CHUNKS_PER_GROUP)
            # The engine's KV tensor for the prompt; kvring fills the reused part in place.
            kv = np.zeros((len(ids), *KV_SHAPE), dtype=np.uint16)
            hit = client.lookup(ids, pin=30)  # pin what we are about to read
            reused = 0
            if hit.held:
                sizes = client.get_into(ids[: hit.held], [kv[i] for i in range(hit.held)])
                # a chunk evicted (or damaged) since the lookup is a miss: recompute from there
                reused = next((i for i, s in enumerate(sizes) if s is None), len(sizes))
                client.release_lease(hit.lease)
            # "Prefill" the rest: random tensors stand in for the model.
            kv[reused:] = rng.integers(0, 2**16, size=kv[reused:].shape, dtype=np.uint16)
            results = client.put([kvring.Chunk(ids[i], kv[i], groups[i]) for i in range(reused, len(ids))])
            stored = sum(r.status == kvring.PutStatus.STORED for r in results)
            held = sum(r.status == kvring.PutStatus.ALREADY_HELD for r in results)
            lost = [r for r in results if not r.held]
            print(f"prompt {p}: {len(tokens)} tokens, {len(ids)} chunks: reused {reused}, computed {len(ids) - reused}, "
                  f"stored {stored}, already held {held}, not stored {len(lost)}"
                  + (f" ({lost[0].status}: {lost[0].reason})" if lost else ""))
        print(f"transport: {client.stats.socket_calls} calls through the local socket; gRPC calls routed by a ring of "
              f"{len(client.routing.members)} members")


if __name__ == "__main__":
    main()
