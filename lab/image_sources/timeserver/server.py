"""Idle service: answers every GET with the current time as JSON, on PORT (default 8080)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType


class TimeHandler(BaseHTTPRequestHandler):
    server_version = "greenswarm-timeserver/1"

    def do_GET(self) -> None:
        now = time.time()
        body = json.dumps({
            "time": datetime.fromtimestamp(now, UTC).isoformat(),
            "epoch_s": now,
        }).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # idle means quiet: no log line per request


def main() -> int:
    port = int(os.environ.get("PORT", "8080"))
    server = ThreadingHTTPServer(("0.0.0.0", port), TimeHandler)
    server.daemon_threads = True

    def stop(_signum: int, _frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"timeserver: listening on port {port}", flush=True)
    server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
