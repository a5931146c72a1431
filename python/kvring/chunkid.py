"""Chunk ids and group keys, as defined by docs/chunk-id.md.

A chunk id names one prefix chunk: ``id_i = SHA-256(id_(i-1) || LE32(t) for each token t of chunk i)``, the parent
of a prompt's first chunk being 32 zero bytes. Every client language computes exactly the same ids; the vectors
in ``client/testdata/chunkid_vectors.json`` check it.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Iterable, Sequence

__all__ = ["ROOT", "CHUNK_ID_SIZE", "next_chunk_id", "chunk_ids", "group_keys"]

CHUNK_ID_SIZE = 32
ROOT = bytes(CHUNK_ID_SIZE)
"""The parent of a prompt's first chunk: 32 zero bytes."""

_MAX_TOKEN = 0xFFFFFFFF


def _pack_tokens(tokens: Sequence[int]) -> bytes:
    try:
        return struct.pack(f"<{len(tokens)}I", *tokens)
    except struct.error as exc:
        bad = next((t for t in tokens if not (0 <= int(t) <= _MAX_TOKEN)), None)
        raise ValueError(f"token {bad!r} is outside [0, 2**32)") from exc


def next_chunk_id(parent: bytes, tokens: Sequence[int]) -> bytes:
    """Return the id of the chunk holding ``tokens`` whose parent chunk has id ``parent`` (``ROOT`` for the first).

    Tokens are hashed as little-endian unsigned 32-bit integers; each must be in ``[0, 2**32)``.
    """
    if len(parent) != CHUNK_ID_SIZE:
        raise ValueError(f"parent: want {CHUNK_ID_SIZE} bytes, got {len(parent)}")
    h = hashlib.sha256(parent)
    h.update(_pack_tokens(tokens))
    return h.digest()


def chunk_ids(tokens: Sequence[int] | Iterable[int], tokens_per_chunk: int) -> list[bytes]:
    """Return the ids of every full chunk of a prompt, in order; a trailing partial chunk gets no id.

    ``tokens`` may be any sequence of ints (a list, a tuple, a 1-D numpy array of an integer type). A prompt of
    ``L`` tokens has ``L // tokens_per_chunk`` ids. Pure computation; never blocks.
    """
    if tokens_per_chunk <= 0:
        raise ValueError(f"tokens_per_chunk must be positive, got {tokens_per_chunk}")
    try:  # numpy arrays: one conversion to little-endian uint32 bytes
        import numpy as np  # noqa: PLC0415

        if isinstance(tokens, np.ndarray):
            if tokens.size and (tokens.min() < 0 or tokens.max() > _MAX_TOKEN):
                raise ValueError("token outside [0, 2**32)")
            raw = tokens.astype("<u4", copy=False).tobytes()
            return _ids_from_raw(raw, tokens_per_chunk)
    except ImportError:  # pragma: no cover - numpy is optional
        pass
    toks = tokens if isinstance(tokens, (list, tuple)) else list(tokens)
    n = len(toks) // tokens_per_chunk * tokens_per_chunk
    return _ids_from_raw(_pack_tokens(toks[:n]), tokens_per_chunk)


def _ids_from_raw(raw: bytes, tokens_per_chunk: int) -> list[bytes]:
    step = 4 * tokens_per_chunk
    ids: list[bytes] = []
    parent = ROOT
    mv = memoryview(raw)
    for start in range(0, len(raw) - step + 1, step):
        h = hashlib.sha256(parent)
        h.update(mv[start : start + step])
        parent = h.digest()
        ids.append(parent)
    return ids


def group_keys(ids: Sequence[bytes], k: int) -> list[bytes]:
    """Return the group key of every chunk of a prompt for placement groups of ``k`` chunks.

    ``ids`` must start at the prompt's first chunk (as :func:`chunk_ids` returns them). The key of chunk ``i`` is
    ``ids[i - i % k]``; ``k <= 1`` makes every chunk its own key. Keys decide where a chunk lives, never what it is.
    """
    k = max(int(k), 1)
    return [ids[i - i % k] for i in range(len(ids))]
