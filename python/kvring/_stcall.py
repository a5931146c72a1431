"""Client-and-server-streaming calls driven on the calling thread, for Cache.Put.

grpcio's synchronous ``stream_stream`` starts a thread per call to consume the request iterator and hands every
sent and received message between that thread, the channel's polling thread and the caller: on a loaded machine
each handoff waits for a core, and a put of four 256 KiB chunks cost ~5 ms against ~3 ms for the Go SDK (a put
of one byte: ~2.5 ms against 0.5 ms). Here the call gets its own completion queue (grpcio's "segregated" call,
the mechanism behind its experimental ``SingleThreadedUnaryStream`` channel option, which the client's gets
already use) and the caller drives it: it sends each message, waits for its completion and reads the answers on
its own thread, with no other thread involved.

This uses grpcio internals (``grpc._channel``, ``grpc._cython.cygrpc``), stable from grpcio 1.2x to 1.6x but not
a public API. :func:`start` therefore checks for them and returns None when they are missing or refuse the call
(nothing has been sent then), and the client uses grpcio's ``stream_stream`` instead. Set ``ENABLED = False`` to
always do so.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterator, Optional, Sequence

import grpc

try:  # grpcio internals; absent or different in some versions
    from grpc import _channel as _gch
    from grpc._cython import cygrpc as _cy

    _OT = _cy.OperationType
    _OK = all(hasattr(_gch, n) for n in ("_RPCState", "_SingleThreadedRendezvous")) and all(
        hasattr(_cy, n) for n in ("SendInitialMetadataOperation", "SendMessageOperation",
                                  "SendCloseFromClientOperation", "ReceiveStatusOnClientOperation",
                                  "ReceiveInitialMetadataOperation", "build_census_context", "PropagationConstants"))
except Exception:  # noqa: BLE001 - the fallback is grpcio's public API
    _OK = False

__all__ = ["ENABLED", "StreamCall", "release", "start"]

log = logging.getLogger("kvring")

ENABLED = True
"""Drive Put streams on the calling thread when this grpcio allows it (see the module's docstring)."""

_broken = ""  # why segregated calls do not work with this grpcio; once set, start returns None
_E = 0  # no flags


class StreamCall:
    """One streaming call driven by the thread that uses it: :meth:`send` the requests, :meth:`close_send`, then
    iterate over the responses. A failed call raises a ``grpc.RpcError`` (``code()``, ``details()``,
    ``trailing_metadata()``) from the iteration, as grpcio's own calls do. :meth:`cancel` may be called from any
    thread; every other method from the one thread that drives the call."""

    __slots__ = ("_rv", "_call", "_state")

    def __init__(self, rv: Any, call: Any, state: Any) -> None:
        self._rv, self._call, self._state = rv, call, state

    def _wait_sent(self, typ: Any) -> bool:
        """Process the call's events until no operation of type typ is pending; False once the call has ended."""
        st = self._state
        while True:
            with st.condition:
                if st.code is not None:
                    return False
                if typ not in st.due:
                    return True
            self._rv._consume_next_event()

    def _operate(self, op: Any, typ: Any) -> bool:
        if not self._wait_sent(typ):
            return False
        st = self._state
        with st.condition:
            if st.code is not None:
                return False
            st.due.add(typ)
            if not self._call.operate((op,), None):
                st.due.discard(typ)
                return False
        return True

    def send(self, msg: bytes) -> bool:
        """Send one serialized request, once the previous one went out (gRPC takes one at a time). Blocks while
        the transport does not take it (flow control), until the deadline or a cancel. False when the call has
        ended: its responses (iteration) say how."""
        return self._operate(_cy.SendMessageOperation(msg, _E), _OT.send_message)

    def close_send(self) -> bool:
        """Half-close: no more requests."""
        return self._operate(_cy.SendCloseFromClientOperation(_E), _OT.send_close_from_client)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._rv)

    def cancel(self) -> bool:
        """Cancel the call (any thread); the driving thread's next step ends with CANCELLED."""
        return self._rv.cancel()

    def release(self) -> None:
        """Cancel the call unless it has ended and process its last events (see :func:`release`)."""
        release(self._rv)


def release(call: Any) -> None:
    """Cancel call unless it has ended and, for a call on its own completion queue (this module's, or a Get read
    with grpcio's ``SingleThreadedUnaryStream`` option), process its last events: gRPC frees such a call and its
    queue only once no operation is pending, and nothing else would take them (a call cancelled early leaked
    ~16 KiB). Blocks only while gRPC completes them, which the cancel makes prompt."""
    call.cancel()
    st = getattr(call, "_state", None)
    consume = getattr(call, "_consume_next_event", None)
    if st is None or consume is None or not _OK or not isinstance(call, _gch._SingleThreadedRendezvous):
        return  # grpcio's spin thread takes the events of its other calls
    for _ in range(64):  # a cancelled call completes each pending operation once
        with st.condition:
            if not st.due:
                return
        try:
            consume()
        except Exception:  # noqa: BLE001 - nothing more to free
            return


def start(channel: grpc.Channel, method: str, first: bytes, timeout: float,
          metadata: Optional[Sequence[tuple[str, str]]], deserializer: Callable[[bytes], Any]) -> Optional[StreamCall]:
    """Start a streaming call of method on channel, sending its initial metadata and first request; or None when
    this grpcio cannot (nothing was sent then: use ``channel.stream_stream``)."""
    global _broken
    if not ENABLED or not _OK or _broken:
        return None
    core = getattr(channel, "_channel", None)
    seg = getattr(core, "segregated_call", None)
    if seg is None:
        return None
    md = tuple(metadata) if metadata else None
    state = _gch._RPCState((_OT.send_initial_metadata, _OT.send_message, _OT.receive_status_on_client,
                            _OT.receive_initial_metadata), None, None, None, None)
    ops = ((_cy.SendInitialMetadataOperation(md, _E), _cy.SendMessageOperation(first, _E)),
           (_cy.ReceiveStatusOnClientOperation(_E),), (_cy.ReceiveInitialMetadataOperation(_E),))
    deadline = time.time() + timeout
    args = (_cy.PropagationConstants.GRPC_PROPAGATE_DEFAULTS, method.encode(), None, deadline, md, None,
            tuple((o, None) for o in ops), _cy.build_census_context())
    call = None
    try:
        try:
            call = seg(*args)
        except TypeError:
            call = seg(*args, None)  # grpcio >= 1.6x: a registered-method handle follows
        rv = _gch._SingleThreadedRendezvous(state, call, deserializer, deadline)
    except Exception as exc:  # noqa: BLE001 - the public API takes the call (and says what is wrong, if anything)
        if call is not None:
            try:
                call.cancel(_cy.StatusCode.cancelled, "kvring: abandoned")
            except Exception:  # noqa: BLE001
                pass
        if isinstance(exc, (TypeError, AttributeError)):  # this grpcio's internals differ: never try again
            _broken = f"{type(exc).__name__}: {exc}"
            log.debug("kvring: grpcio %s cannot drive a stream on the calling thread (%s); puts use its own "
                      "threads", getattr(grpc, "__version__", "?"), _broken)
        return None  # e.g. ValueError: the channel is closed
    return StreamCall(rv, call, state)
