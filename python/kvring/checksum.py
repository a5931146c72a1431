"""CRC-32C (Castagnoli), the checksum of chunk bytes on the wire and in every node.

:func:`crc32c` uses the fastest implementation present, in this order: the ``crc32c`` package when it uses the
CPU's CRC instruction (``crc32c.hardware_based``), the SSE 4.2 ``crc32`` instruction called through ctypes
(:mod:`kvring._crc32c_hw`, x86-64 Linux: ~7 GB/s), the ``crc32c`` package's software path (Debian's
``python3-crc32c`` is built without its hardware path: ~2 GB/s), ``google_crc32c`` (C extension), numpy (a
vectorised table-driven CRC: chunks are cut in lanes computed side by side and combined), and pure Python (a
256-entry table; slow, about 10 MB/s). :data:`IMPLEMENTATION` names the one in use. All accept any C-contiguous
buffer-protocol object.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["crc32c", "crc32c_python", "IMPLEMENTATION"]

_POLY = 0x82F63B78  # reflected Castagnoli polynomial


def _make_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c_python(data: Any, crc: int = 0) -> int:
    """CRC-32C of ``data`` continuing from ``crc``, in pure Python (the reference; slow)."""
    c = crc ^ 0xFFFFFFFF
    t = _TABLE
    for b in memoryview(data).cast("B"):
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _gf2_matrix_times(mat: list[int], vec: int) -> int:
    s = 0
    i = 0
    while vec:
        if vec & 1:
            s ^= mat[i]
        vec >>= 1
        i += 1
    return s


def _shift_matrix(nbytes: int) -> list[int]:
    """The 32x32 GF(2) matrix (as 32 column ints) that advances a raw CRC register over ``nbytes`` zero bytes."""
    # One zero bit: c -> (c >> 1) ^ (POLY if c & 1)
    odd = [_POLY] + [1 << i for i in range(31)]

    def square(m: list[int]) -> list[int]:
        return [_gf2_matrix_times(m, m[i]) for i in range(32)]

    result = [1 << i for i in range(32)]  # identity
    m = odd
    bits = nbytes * 8
    while bits:
        if bits & 1:
            result = [_gf2_matrix_times(m, result[i]) for i in range(32)]
        bits >>= 1
        if bits:
            m = square(m)
    return result


def _numpy_impl() -> Callable[[Any, int], int] | None:
    try:
        import numpy as np  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        return None

    table = np.array(_TABLE, dtype=np.uint32)
    lane = 256  # bytes per lane: a 2 MiB chunk is 8192 lanes computed side by side
    shift_cache: dict[int, np.ndarray] = {}

    def byte_tables(nbytes: int) -> np.ndarray:
        """4 x 256 tables applying the shift over nbytes zero bytes to a 32-bit register, byte by byte."""
        t = shift_cache.get(nbytes)
        if t is None:
            mat = _shift_matrix(nbytes)
            t = np.zeros((4, 256), dtype=np.uint32)
            for k in range(4):
                for v in range(256):
                    t[k, v] = _gf2_matrix_times(mat, v << (8 * k))
            shift_cache[nbytes] = t
        return t

    def shift(regs: np.ndarray, nbytes: int) -> np.ndarray:
        t = byte_tables(nbytes)
        return t[0][regs & 0xFF] ^ t[1][(regs >> 8) & 0xFF] ^ t[2][(regs >> 16) & 0xFF] ^ t[3][regs >> 24]

    def impl(mv: memoryview, crc: int) -> int:
        """CRC of mv, whose length is lane * 2**k, k >= 3."""
        lanes = len(mv) // lane
        # Column j of cols holds byte j of every lane, contiguous, so each step below reads one row.
        cols = np.frombuffer(mv, dtype=np.uint8).reshape(lanes, lane).T.copy()
        # The raw register (no pre/post inversion) of every lane from 0; lane 0 starts from the running CRC.
        regs = np.zeros(lanes, dtype=np.uint32)
        regs[0] = crc ^ 0xFFFFFFFF
        for j in range(lane):
            regs = table[(regs ^ cols[j]) & 0xFF] ^ (regs >> 8)
        # Combine adjacent lanes: reg(A || B) = shift(reg(A), len(B)) ^ reg_from_0(B), pairwise up a tree.
        size = lane
        while regs.size > 1:
            regs = shift(regs[0::2], size) ^ regs[1::2]
            size *= 2
        return int(regs[0]) ^ 0xFFFFFFFF

    def impl_safe(data: Any, crc: int = 0) -> int:
        mv = memoryview(data).cast("B")
        n = len(mv)
        # The largest power-of-two number of lanes first, then the rest, so that every tree is balanced.
        pos = 0
        while n - pos >= 8 * lane:
            lanes = 1 << (((n - pos) // lane).bit_length() - 1)
            crc = impl(mv[pos : pos + lanes * lane], crc)
            pos += lanes * lane
        return crc32c_python(mv[pos:], crc) if pos < n else crc

    return impl_safe


def _pick() -> tuple[Callable[[Any, int], int], str]:
    pkg = None
    try:
        import crc32c as _c  # noqa: PLC0415  (Debian: python3-crc32c)

        if hasattr(_c, "crc32c"):
            fn = _c.crc32c
            pkg = lambda data, crc=0: fn(data, crc)  # noqa: E731
            if getattr(_c, "hardware_based", False):
                return pkg, "crc32c"
    except ImportError:
        pass
    from . import _crc32c_hw  # noqa: PLC0415

    hw = _crc32c_hw.load(pkg or crc32c_python)
    if hw is not None:
        return hw, "sse4.2"
    if pkg is not None:
        return pkg, "crc32c (software)"
    try:
        import google_crc32c as _g  # noqa: PLC0415

        return (lambda data, crc=0: _g.extend(crc, bytes(data) if not isinstance(data, bytes) else data)), "google_crc32c"
    except ImportError:
        pass
    np_impl = _numpy_impl()
    if np_impl is not None:
        return np_impl, "numpy"
    return crc32c_python, "python"


crc32c, IMPLEMENTATION = _pick()
crc32c.__doc__ = "CRC-32C of a buffer-protocol object, continuing from ``crc`` (0 to start). Never blocks on I/O."
