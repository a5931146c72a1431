"""Hand-encoded and hand-decoded data frames: chunk bytes cross the Python/gRPC boundary with one copy.

Protobuf would copy every 1 MiB frame into a message and again into its serialization; here a Put data frame is
a small header joined to a slice of the caller's buffer, and a Get data frame is decoded to a memoryview into the
bytes gRPC handed over. Headers and every other message go through the generated classes.
"""

from __future__ import annotations

from typing import Any, Union

from .v1 import cache_pb2

MAX_FRAME_BYTES = 1 << 20


def _varint(v: int) -> bytes:
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def put_data_frame(index: int, offset: int, data: memoryview) -> bytes:
    """A serialized PutRequest{data: DataFrame{index, offset, data}}."""
    inner = b"\x08" + _varint(index) + b"\x10" + _varint(offset) + b"\x1a" + _varint(len(data))
    return b"".join((b"\x12", _varint(len(inner) + len(data)), inner, data))


def serialize_put(msg: Union[bytes, cache_pb2.PutRequest]) -> bytes:
    """request_serializer for Cache.Put: pre-encoded frames pass through."""
    return msg if isinstance(msg, bytes) else msg.SerializeToString()


class DataFrame:
    """A Get data frame: ``data`` is a memoryview into the received message (valid as long as this object)."""

    __slots__ = ("epoch", "index", "offset", "data")

    def __init__(self, epoch: int, index: int, offset: int, data: memoryview) -> None:
        self.epoch, self.index, self.offset, self.data = epoch, index, offset, data


def _read_varint(buf: Any, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _skip(buf: Any, i: int, wt: int) -> int:
    if wt == 0:
        return _read_varint(buf, i)[1]
    if wt == 1:
        return i + 8
    if wt == 2:
        n, i = _read_varint(buf, i)
        return i + n
    if wt == 5:
        return i + 4
    raise ValueError(f"unsupported wire type {wt}")


def deserialize_get(raw: bytes) -> Union[DataFrame, cache_pb2.GetResponse]:
    """response_deserializer for Cache.Get: data frames as :class:`DataFrame` without copying their bytes,
    anything else as a GetResponse."""
    mv = memoryview(raw)
    epoch = 0
    frame = None
    i, n = 0, len(mv)
    try:
        while i < n:
            key, i = _read_varint(mv, i)
            num, wt = key >> 3, key & 7
            if num == 1 and wt == 0:
                epoch, i = _read_varint(mv, i)
            elif num == 3 and wt == 2:
                ln, i = _read_varint(mv, i)
                frame = (i, i + ln)
                i += ln
            elif num == 2:
                return cache_pb2.GetResponse.FromString(raw)
            else:
                i = _skip(mv, i, wt)
        if frame is None:
            return cache_pb2.GetResponse.FromString(raw)
        index = offset = 0
        data = mv[0:0]
        i, end = frame
        while i < end:
            key, i = _read_varint(mv, i)
            num, wt = key >> 3, key & 7
            if num == 1 and wt == 0:
                index, i = _read_varint(mv, i)
            elif num == 2 and wt == 0:
                offset, i = _read_varint(mv, i)
            elif num == 3 and wt == 2:
                ln, i = _read_varint(mv, i)
                data = mv[i : i + ln]
                i += ln
            else:
                i = _skip(mv, i, wt)
        if i != end:
            raise ValueError("data frame overruns its message")
        return DataFrame(epoch, index, offset, data)
    except (IndexError, ValueError) as exc:
        raise ValueError(f"malformed GetResponse: {exc}") from None
