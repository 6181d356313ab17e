"""A tiny Redis client (RESP 2 over TCP): enough for the replay's SET/GET rounds.

The project's ``redis`` package would do, but a benchmark client should measure the server and
the network, not a client library's connection pool; this one sends a command and reads its
reply on one socket, nothing else. :func:`encode_command` and :func:`read_reply` are pure (any
binary stream with ``readline`` and ``read``); :class:`RespClient` owns the socket.
"""

from __future__ import annotations

import socket
from typing import BinaryIO, Protocol

from domain.errors import GreenSwarmError

RespValue = None | int | bytes | list["RespValue"]


class RespError(GreenSwarmError):
    """The server answered with an error reply (``-ERR ...``)."""


class RespProtocolError(GreenSwarmError):
    """The bytes read are not a RESP reply, or the connection closed mid-reply."""


class _Stream(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...
    def read(self, size: int = -1, /) -> bytes: ...


def encode_command(*args: str | bytes | int) -> bytes:
    """A command as a RESP array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, bool):
            raise TypeError("booleans are not Redis arguments")
        elif isinstance(arg, int):
            data = str(arg).encode()
        else:
            data = arg.encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _line(stream: _Stream) -> bytes:
    line = stream.readline()
    if not line.endswith(b"\r\n"):
        raise RespProtocolError("the connection closed in the middle of a reply")
    return line[:-2]


def read_reply(stream: _Stream) -> RespValue:
    """One reply: simple strings and bulk strings as bytes, integers as int, nil as None,
    arrays as lists; an error reply raises :class:`RespError`."""
    line = _line(stream)
    if not line:
        raise RespProtocolError("empty reply line")
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest
    if kind == b"-":
        raise RespError(rest.decode(errors="replace"))
    try:
        number = int(rest)
    except ValueError:
        raise RespProtocolError(f"not a RESP reply: {line[:40]!r}") from None
    if kind == b":":
        return number
    if kind == b"$":
        if number < 0:
            return None
        data = stream.read(number + 2)
        if len(data) != number + 2 or not data.endswith(b"\r\n"):
            raise RespProtocolError("the connection closed in the middle of a bulk string")
        return data[:-2]
    if kind == b"*":
        if number < 0:
            return None
        return [read_reply(stream) for _ in range(number)]
    raise RespProtocolError(f"unknown reply type {kind!r}")


class RespClient:
    """One connection to a Redis server; ``command`` sends and waits for the reply."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 5.0) -> None:
        self._sock = socket.create_connection((host, port), timeout=timeout_s)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._stream: BinaryIO = self._sock.makefile("rb")

    def command(self, *args: str | bytes | int) -> RespValue:
        try:
            self._sock.sendall(encode_command(*args))
            return read_reply(self._stream)
        except OSError as exc:
            raise RespProtocolError(f"connection failed: {exc}") from exc

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            self._sock.close()

    def __enter__(self) -> RespClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
