"""kvring.chunk_ids and group_keys against the Go SDK's vectors (client/testdata/chunkid_vectors.json)."""

import json

import numpy as np
import pytest

import kvring
from cluster import REPO

VECTORS = json.loads((REPO / "client" / "testdata" / "chunkid_vectors.json").read_text())


@pytest.mark.parametrize("case", VECTORS["next_chunk_id"], ids=lambda c: c["name"])
def test_next_chunk_id_matches_go_vectors(case):
    got = kvring.next_chunk_id(bytes.fromhex(case["parent"]), case["tokens"])
    assert got.hex() == case["id"]


@pytest.mark.parametrize("case", VECTORS["chunk_ids"], ids=lambda c: c["name"])
def test_chunk_ids_match_go_vectors(case):
    for tokens in (case["tokens"], np.array(case["tokens"], dtype=np.uint32), np.array(case["tokens"], dtype=np.int64)):
        ids = kvring.chunk_ids(tokens, case["tokens_per_chunk"])
        assert len(ids) == case["num_chunks"]
        for want in case["ids"]:
            assert ids[want["index"]].hex() == want["id"]


def test_chunk_ids_refuse_bad_input():
    with pytest.raises(ValueError, match="tokens_per_chunk"):
        kvring.chunk_ids([1, 2], 0)
    with pytest.raises(ValueError, match="outside"):
        kvring.chunk_ids([2**32] * 16, 16)
    with pytest.raises(ValueError, match="outside"):
        kvring.chunk_ids(np.array([-1] * 16), 16)


def test_group_keys_are_first_id_of_each_group():
    ids = kvring.chunk_ids(list(range(16 * 70)), 16)
    keys = kvring.group_keys(ids, 32)
    assert keys[0] == keys[31] == ids[0]
    assert keys[32] == keys[63] == ids[32]
    assert keys[69] == ids[64]
    assert kvring.group_keys(ids, 0) == ids == kvring.group_keys(ids, 1)
