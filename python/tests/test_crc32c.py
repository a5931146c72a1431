"""Every CRC-32C implementation agrees with the reference and with the check value of the standard."""

import os

import numpy as np
import pytest

from kvring import checksum as mod


@pytest.mark.parametrize("size", [0, 1, 9, 255, 2047, 2048, 4096 * 3 + 7, 1 << 20, (2 << 20) + 5])
def test_implementations_agree(size):
    data = os.urandom(size)
    want = mod.crc32c_python(data) if size <= 1 << 16 else mod.crc32c(data)
    impl = mod._numpy_impl()
    assert impl(data) == want
    assert impl(data[size // 3 :], impl(data[: size // 3])) == want  # continuation
    assert mod.crc32c(data) == want
    assert mod.crc32c(np.frombuffer(data, dtype=np.uint8)) == want  # any buffer


def test_check_value():
    # The CRC-32C check value of "123456789" (RFC 3720 B.4 / the catalogue of CRC algorithms).
    assert mod.crc32c_python(b"123456789") == 0xE3069283
    assert mod.crc32c(b"123456789") == 0xE3069283
    assert mod._numpy_impl()(b"123456789" * 1000) == mod.crc32c_python(b"123456789" * 1000)


def test_hardware_instruction_path_matches_the_reference():
    from kvring import _crc32c_hw

    hw = _crc32c_hw.load(mod.crc32c_python)
    if hw is None:
        pytest.skip("no SSE 4.2 or no executable mapping here")
    for size in (0, 1, 7, 8, 9, 4095, 1 << 20, (2 << 20) + 3):
        data = os.urandom(size)
        want = mod.crc32c_python(data) if size < 1 << 16 else mod._numpy_impl()(data)
        assert hw(data) == want
        assert hw(memoryview(data)[size // 2 :], hw(memoryview(data)[: size // 2])) == want  # continuation
        assert hw(bytearray(data)) == want
        if size % 2 == 0:
            assert hw(np.frombuffer(data, dtype=np.uint16)) == want
    with pytest.raises(BufferError):
        hw(memoryview(os.urandom(64))[::2])  # not contiguous
