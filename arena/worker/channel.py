"""The one channel between the trusted parent and the worker: a Unix socket carrying length-prefixed JSON,
with file descriptors (shared-memory buffers) passed alongside.

Nothing on it is ever unpickled: a message is JSON (numbers, strings, lists, dicts), so a hostile worker can
send wrong data but never code. Tensors travel outside the JSON (arena/worker/tensorwire.py), in sealed shared-memory
files whose descriptors ride with the message.
Used by arena/worker/client.py (parent) and arena/worker/server.py (worker).
"""
from __future__ import annotations

import array
import json
import re
import socket
import struct
import time

MAX_MESSAGE = 8 << 20           # bytes of JSON in one message; tensor data never travels in the JSON
MAX_ENTRIES = 200_000           # values, keys and containers in one message
MAX_DEPTH = 80                  # containers inside containers (a data tree of depth 32 is 2 per level)
MAX_FDS = 16                    # descriptors attached to one message
_HEADER = struct.Struct("!I")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(rb"[\[\]{}]")


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


def receive(sock: socket.socket, timeout: float | None = None) -> tuple[object, list[int]]:
    """(message, received descriptors). `timeout`: seconds for the whole message, however it trickles in
    (socket.timeout past it). Raises EOFError when the other end closed, ChannelError when what arrived is
    not a message within the bounds above (checked before parsing)."""
    fds: list[int] = []
    deadline = None if timeout is None else time.monotonic() + timeout
    header = _read_exactly(sock, _HEADER.size, fds, deadline)
    (size,) = _HEADER.unpack(header)
    if size > MAX_MESSAGE:
        _close_all(fds)
        raise ChannelError(f"announced a message of {size} bytes (the limit is {MAX_MESSAGE})")
    body = _read_exactly(sock, size, fds, deadline)
    problem = _shape_problem(body)
    if problem:
        _close_all(fds)
        raise ChannelError(problem)
    try:
        return json.loads(body.decode()), fds
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        _close_all(fds)
        raise ChannelError(f"not JSON: {str(error)[:200]}") from None


def _shape_problem(body: bytes) -> str:
    """Too many entries or containers nested too deeply, found without parsing (strings left out)."""
    if body.count(b",") + body.count(b":") > MAX_ENTRIES:
        return f"a message of more than {MAX_ENTRIES} entries"
    if body.count(b"[") + body.count(b"{") <= MAX_DEPTH:
        return ""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub(b'""', body)):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return f"a message nested more than {MAX_DEPTH} levels deep"
    return ""


def _read_exactly(sock: socket.socket, size: int, fds: list[int], deadline: float | None = None) -> bytes:
    chunks, got = [], 0
    room = socket.CMSG_SPACE(MAX_FDS * array.array("i").itemsize)
    while got < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                _close_all(fds)
                raise socket.timeout("the message did not arrive in time")
            sock.settimeout(left)
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
