"""The one channel between the trusted parent and the worker: a Unix socket carrying length-prefixed JSON,
with file descriptors (shared-memory buffers) passed alongside.

Nothing on it is ever unpickled: a message is JSON (numbers, strings, lists, dicts), so a hostile worker can
send wrong data but never code. Tensors travel outside the JSON (arena/tensorwire.py), in sealed shared-memory
files whose descriptors ride with the message.
Used by arena/runner.py (parent) and arena/worker.py (worker).
"""
from __future__ import annotations

import array
import json
import socket
import struct

MAX_MESSAGE = 64 << 20          # bytes of JSON in one message; tensor data never travels in the JSON
MAX_FDS = 16                    # descriptors attached to one message
_HEADER = struct.Struct("!I")


class ChannelError(RuntimeError):
    """The other end sent something that is not a well-formed message (or went away)."""


def send(sock: socket.socket, message, fds: list[int] = ()) -> None:
    body = json.dumps(message, separators=(",", ":"), allow_nan=True).encode()
    if len(body) > MAX_MESSAGE:
        raise ChannelError(f"message of {len(body)} bytes exceeds the channel's {MAX_MESSAGE} byte limit")
    data = _HEADER.pack(len(body)) + body
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sent = sock.sendmsg([data], ancillary)
    if sent < len(data):
        sock.sendall(data[sent:])


def receive(sock: socket.socket) -> tuple[object, list[int]]:
    """(message, received descriptors). Raises EOFError when the other end closed, ChannelError when what
    arrived is not a message."""
    fds: list[int] = []
    header = _read_exactly(sock, _HEADER.size, fds)
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE:
        _close_all(fds)
        raise ChannelError(f"announced a message of {size} bytes (the limit is {MAX_MESSAGE})")
    body = _read_exactly(sock, size, fds)
    try:
        return json.loads(body.decode()), fds
    except (UnicodeDecodeError, ValueError) as error:
        _close_all(fds)
        raise ChannelError(f"not JSON: {error}") from None


def _read_exactly(sock: socket.socket, size: int, fds: list[int]) -> bytes:
    chunks, got = [], 0
    room = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
    while got < size:
        data, ancillary, flags, _ = sock.recvmsg(min(size - got, 1 << 20), room)
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                received = array.array("i")
                received.frombytes(payload[:len(payload) - len(payload) % received.itemsize])
                fds.extend(received)
        if flags & socket.MSG_CTRUNC:
            _close_all(fds)
            raise ChannelError("too many file descriptors attached to one message")
        if len(fds) > MAX_FDS:
            _close_all(fds)
            raise ChannelError("too many file descriptors attached to one message")
        if not data:
            _close_all(fds)
            raise EOFError("the channel was closed")
        chunks.append(data)
        got += len(data)
    return b"".join(chunks)


def _close_all(fds: list[int]):
    import os
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()
