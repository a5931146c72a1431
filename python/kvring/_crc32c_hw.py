"""CRC-32C with the x86-64 SSE 4.2 ``crc32`` instruction, for interpreters without a hardware-backed CRC package.

Debian's ``python3-crc32c`` is built without its hardware path (``crc32c.hardware_based`` is False: ~2.6 GB/s), and
a put spends most of its Python time there. This module maps 51 bytes of machine code (below, with its assembly)
into an executable page and calls it through ctypes, which releases the GIL during the call: ~3x faster, and other
threads run meanwhile. :func:`load` returns None (the caller keeps its other implementations) unless the machine is
x86-64 Linux with SSE 4.2, an executable mapping can be made, and the function agrees with the reference on test
inputs.
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import sys
from typing import Any, Callable, Optional

__all__ = ["load"]

# uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)  (System V: edi, rsi, rdx)
_CODE = bytes.fromhex(
    "89f8"            # mov eax, edi
    "f7d0"            # not eax
    "4883fa08"        # cmp rdx, 8
    "7214"            # jb tail
    "f2480f38f106"    # loop8: crc32 rax, qword [rsi]
    "4883c608"        # add rsi, 8
    "4883ea08"        # sub rdx, 8
    "4883fa08"        # cmp rdx, 8
    "73ec"            # jae loop8
    "4885d2"          # tail: test rdx, rdx
    "740d"            # je done
    "f20f38f006"      # loop1: crc32 eax, byte [rsi]
    "48ffc6"          # inc rsi
    "48ffca"          # dec rdx
    "75f3"            # jne loop1
    "f7d0"            # done: not eax
    "c3"              # ret
)


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


# The buffer protocol through ctypes (a Py_buffer export of any object; release it once done), shared with
# localsock's copies outside the GIL.
_PyBUF_SIMPLE, _PyBUF_WRITABLE = 0, 1
_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


def _has_sse42() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "sse4_2" in line.split()
    except OSError:
        pass
    return False


_keep: list[Any] = []  # the mapping lives as long as the process


def load(reference: Callable[[Any, int], int]) -> Optional[Callable[..., int]]:
    """The hardware CRC-32C as ``crc32c(data, crc=0)``, or None when it cannot be used here. reference (a known
    good implementation) checks it on test inputs first."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64") or not _has_sse42():
        return None
    try:
        m = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    except (OSError, ValueError, AttributeError):  # W^X policies refuse writable executable mappings
        return None
    m.write(_CODE)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    proto = ctypes.CFUNCTYPE(ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t)
    fn = proto(addr)

    def crc32c(data: Any, crc: int = 0) -> int:
        if type(data) is bytes:
            return fn(crc, data, len(data))  # ctypes passes a bytes object's own storage: no copy
        view = _PyBuffer()
        _get_buffer(data, ctypes.byref(view), _PyBUF_SIMPLE)  # raises BufferError for non-contiguous buffers
        try:
            return fn(crc, view.buf, view.len)
        finally:
            _release_buffer(ctypes.byref(view))

    try:
        import os  # noqa: PLC0415

        for sample in (b"", b"a", b"123456789", os.urandom(1000), os.urandom(4097)):
            for seed in (0, 0xE3069283):
                if crc32c(sample, seed) != reference(sample, seed):
                    return None
            if crc32c(memoryview(bytearray(sample))[1:], 7) != reference(sample[1:], 7):
                return None
    except Exception:  # noqa: BLE001 - any surprise: do not use it
        return None
    _keep.append((m, fn))
    return crc32c
