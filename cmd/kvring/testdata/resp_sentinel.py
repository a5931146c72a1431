"""redis-py's Sentinel clients (sync and asyncio, Debian's python3-redis) against kvring nodes acting as sentinels.

Usage: resp_sentinel.py MASTER_NAME HOST:PORT HOST:PORT HOST:PORT

As LMCache's redis-sentinel:// connector does, each client writes through master_for(MASTER_NAME) and reads
through both master_for and slave_for. Both clients write chunks (kv_bytes, then metadata) and read them back, then
print the node they were given:

    MASTER sync HOST:PORT
    MASTER async HOST:PORT

and wait for a line on stdin: the test kills that node (SIGKILL) and writes "killed". Then each client reads every
chunk written before the kill and writes and reads new ones; a ConnectionError (or a timeout) is retried up to
ATTEMPTS times, as a sentinel client does, each retry asking the sentinels again for the master. It prints the node
it now uses and one line per client:

    AFTER sync HOST:PORT
    sync: ok (N connection errors retried)

and exits non-zero on the first wrong read or a call still failing after ATTEMPTS tries.
"""

import asyncio
import os
import sys

import redis
import redis.asyncio.sentinel
import redis.sentinel
from redis.exceptions import ConnectionError, TimeoutError

# ATTEMPTS bounds the tries of one call: after a node dies, the first call on its connection fails, and the next
# one reconnects through the sentinels (a dead sentinel is skipped), so two suffice; five leave room for a replica
# the sentinels still list before the ring drops the dead node (slave_for then tries the next replica itself).
ATTEMPTS = 5
SIZE = 64 << 10
CHUNKS = 6
TIMEOUT = 20  # seconds a call may take on a loaded machine

NAME = sys.argv[1]
SENTINELS = [(a.rsplit(":", 1)[0], int(a.rsplit(":", 1)[1])) for a in sys.argv[2:]]


def chunk(tag, i):
    """Chunk i's key (LMCache's layout) and bytes."""
    key = f"vllm@meta-llama/Llama-3.1-8B@1@0@{tag}{i:04x}"
    kv = os.urandom(SIZE)
    meta = b'{"fmt":"vllm","shape":[2,256,8,128],"dtype":"bfloat16","length":%d}' % SIZE
    return key, kv, meta


def laddr(info):
    """The node address a CLIENT INFO reply says the connection reached."""
    return info["laddr"]


class Counter:
    errors = 0


def retry(what, call):
    for _ in range(ATTEMPTS):
        try:
            return call()
        except (ConnectionError, TimeoutError) as e:
            Counter.errors += 1
            last = e
    sys.exit(f"{what}: still failing after {ATTEMPTS} attempts: {last!r}")


async def aretry(what, call):
    for _ in range(ATTEMPTS):
        try:
            return await call()
        except (ConnectionError, TimeoutError) as e:
            Counter.errors += 1
            last = e
    sys.exit(f"{what}: still failing after {ATTEMPTS} attempts: {last!r}")


def check(what, got, want):
    if got != want:
        desc = "nil" if got is None else f"{len(got)} bytes"
        sys.exit(f"{what}: read {desc}, want {len(want)} bytes")


def sync_write(master, chunks):
    for key, kv, meta in chunks:
        assert retry("SET kv_bytes", lambda: master.set(key + "kv_bytes", kv)) is True, "SET kv_bytes"
        assert retry("SET metadata", lambda: master.set(key + "metadata", meta)) is True, "SET metadata"


def sync_read(master, slave, chunks, who):
    for key, kv, meta in chunks:
        for name, c in (("master", master), ("slave", slave)):
            assert retry("EXISTS", lambda: c.exists(key + "metadata")) == 1, f"{who} {name} EXISTS {key}metadata"
            check(f"{who} {name} GET {key}metadata", retry("GET", lambda: c.get(key + "metadata")), meta)
            check(f"{who} {name} GET {key}kv_bytes", retry("GET", lambda: c.get(key + "kv_bytes")), kv)


async def async_write(master, chunks):
    for key, kv, meta in chunks:
        assert await aretry("SET kv_bytes", lambda: master.set(key + "kv_bytes", kv)) is True, "SET kv_bytes"
        assert await aretry("SET metadata", lambda: master.set(key + "metadata", meta)) is True, "SET metadata"


async def async_read(master, slave, chunks, who):
    for key, kv, meta in chunks:
        for name, c in (("master", master), ("slave", slave)):
            assert await aretry("EXISTS", lambda: c.exists(key + "metadata")) == 1, f"{who} {name} EXISTS {key}metadata"
            check(f"{who} {name} GET {key}metadata", await aretry("GET", lambda: c.get(key + "metadata")), meta)
            check(f"{who} {name} GET {key}kv_bytes", await aretry("GET", lambda: c.get(key + "kv_bytes")), kv)


async def main():
    s = redis.sentinel.Sentinel(SENTINELS, socket_timeout=TIMEOUT)
    m, sl = s.master_for(NAME, socket_timeout=TIMEOUT), s.slave_for(NAME, socket_timeout=TIMEOUT)
    a = redis.asyncio.sentinel.Sentinel(SENTINELS, socket_timeout=TIMEOUT)
    am, asl = a.master_for(NAME, socket_timeout=TIMEOUT), a.slave_for(NAME, socket_timeout=TIMEOUT)

    before_sync = [chunk("a1", i) for i in range(CHUNKS)]
    before_async = [chunk("b1", i) for i in range(CHUNKS)]
    sync_write(m, before_sync)
    sync_read(m, sl, before_sync, "sync")
    await async_write(am, before_async)
    await async_read(am, asl, before_async, "async")
    print("MASTER sync", laddr(m.client_info()), flush=True)
    print("MASTER async", laddr(await am.client_info()), flush=True)
    if sys.stdin.readline().strip() != "killed":
        sys.exit("stdin did not say killed")

    after_sync = [chunk("a2", i) for i in range(CHUNKS)]
    after_async = [chunk("b2", i) for i in range(CHUNKS)]
    sync_read(m, sl, before_sync, "sync")
    sync_write(m, after_sync)
    sync_read(m, sl, after_sync, "sync")
    print("AFTER sync", laddr(retry("CLIENT INFO", m.client_info)), flush=True)
    print(f"sync: ok ({Counter.errors} connection errors retried)", flush=True)
    Counter.errors = 0
    await async_read(am, asl, before_async, "async")
    await async_write(am, after_async)
    await async_read(am, asl, after_async, "async")
    print("AFTER async", laddr(await aretry("CLIENT INFO", am.client_info)), flush=True)
    print(f"async: ok ({Counter.errors} connection errors retried)", flush=True)


asyncio.run(main())
