"""The values the client returns print readably: ids in hex, payloads as their length, never their bytes (a chunk is
often 32 KiB or more, and a list of results is printed in a log line or a debugger)."""

from __future__ import annotations

import os

import grpc
import numpy as np

import kvring
from kvring.types import GetResult, Node, PutResult

PAYLOAD = 32 << 10


def test_a_put_results_repr_names_the_id_in_hex_and_the_holders():
    cid = os.urandom(32)
    r = repr(PutResult(cid, kvring.PutStatus.STORED, [Node("n1", "127.0.0.1:9600")]))
    assert r == f"PutResult(id={cid.hex()}, status='stored', holders=[Node(id='n1', addr='127.0.0.1:9600')])"
    failed = repr(PutResult(cid, kvring.PutStatus.FAILED, reason="no space", code=grpc.StatusCode.RESOURCE_EXHAUSTED))
    assert failed.endswith("reason='no space', code=RESOURCE_EXHAUSTED)")
    assert repr(PutResult(cid, kvring.PutStatus.STORED, degraded=True)).endswith("degraded=True)")


def test_a_get_results_repr_gives_the_payloads_length_not_its_bytes():
    cid, data = os.urandom(32), os.urandom(PAYLOAD)
    for payload in (data, memoryview(bytearray(data)), bytearray(data)):
        r = repr(GetResult(cid, True, payload, PAYLOAD, Node("n1", "127.0.0.1:9600")))
        assert r == (f"GetResult(id={cid.hex()}, found=True, data=<{PAYLOAD} bytes>, size={PAYLOAD}, "
                     "holder=Node(id='n1', addr='127.0.0.1:9600'))")
    miss = GetResult(cid, reason="not held by any node")
    assert repr(miss) == f"GetResult(id={cid.hex()}, found=False, reason='not held by any node')"


def test_a_chunks_repr_gives_the_payloads_length_whatever_its_type():
    cid, key = os.urandom(32), os.urandom(32)
    assert repr(kvring.Chunk(cid, os.urandom(PAYLOAD))) == f"Chunk(id={cid.hex()}, data=<{PAYLOAD} bytes>)"
    arr = np.zeros((2, PAYLOAD // 4), dtype=np.float16)  # a KV tensor: 2 bytes an element
    assert repr(kvring.Chunk(cid, arr, key)) == f"Chunk(id={cid.hex()}, data=<{PAYLOAD} bytes>, group={key.hex()})"


def test_reprs_of_many_results_stay_short():
    results = [GetResult(os.urandom(32), True, os.urandom(PAYLOAD), PAYLOAD, Node("n1", "a:1")) for _ in range(8)]
    assert len(repr(results)) < 8 * 200
