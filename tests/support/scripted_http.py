"""A real HTTP server on 127.0.0.1 that plays a script: each call gets the next part, which
answers a status (a JSON body, or text as it is, with headers) after a pause, or drops the
connection unanswered. A stand-in for servers that fail in ways ours cannot be made to on demand
(Redis down behind a registry, a proxy's 502 page, a connection reset), so that the HTTP
clients are tested over real sockets, HTTP and JSON.

It can start bound but not listening (``listening=False``): connections to it are refused, a
real "nothing listens", until :meth:`ScriptedServer.listen`.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Part:
    """What the server does with one call: answer ``status`` (``body`` as JSON, or ``text``
    as it is, as text/html), after ``delay_s``; or, with ``drop``, close the connection
    unanswered."""

    status: int = 200
    body: object = None
    text: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    drop: bool = False


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    authorization: str | None
    body: bytes


@dataclass
class ScriptedServer:
    """Plays ``parts`` in order; past the last, the last again (or, ``strict``, a 500 and a
    test failure at :meth:`close`). ``seen`` keeps every call in order."""

    parts: list[Part]
    listening: bool = True
    strict: bool = False
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        script = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _play(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                script.seen.append(Seen(self.command, self.path,
                                        self.headers.get("Authorization"),
                                        self.rfile.read(length)))
                part = script.next_part()
                if part.drop:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                time.sleep(part.delay_s)
                if part.text is not None:
                    data, kind = part.text.encode(), "text/html"
                else:
                    data = b"" if part.body is None else json.dumps(part.body).encode()
                    kind = "application/json"
                self.send_response(part.status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                for name, value in part.headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _play

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler, bind_and_activate=False)
        self.server.daemon_threads = True
        self.server.server_bind()  # the port is ours; connections are refused until listen()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,),
                                       daemon=True)
        if self.listening:
            self.listen()

    @property
    def calls(self) -> list[tuple[str, str]]:
        return [(seen.method, seen.path) for seen in self.seen]

    @property
    def authorizations(self) -> list[str | None]:
        return [seen.authorization for seen in self.seen]

    def next_part(self) -> Part:
        if len(self.seen) <= len(self.parts):
            return self.parts[len(self.seen) - 1]
        if self.strict:
            return Part(500, {"message": "the script has no part for this call"})
        return self.parts[-1]

    def listen(self) -> None:
        if not self.thread.is_alive():
            self.server.server_activate()
            self.thread.start()

    def close(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join(timeout=5)
        self.server.server_close()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self.strict:
            assert len(self.seen) == len(self.parts), (
                f"{len(self.parts)} parts scripted, {len(self.seen)} calls seen")
