"""The lab's power endpoint: lab/power.py over HTTP, for the manager's ``lab`` power backend,
which runs in a container (host network) and never imports the lab (DESIGN 3.15).

    python -m lab power serve [--listen 127.0.0.1:8089] [--token-file F] [--detach]
    python -m lab power stop                 # a detached server, by its pid file
    python -m lab power on|off|status NODE   # the same switches, here, without a server

Endpoints (JSON; every one but ``/healthz`` needs ``Authorization: Bearer <token>``)::

    GET  /healthz              {"ok": true}
    GET  /nodes                [{name, swarm_node_id, address, power, since, pid, ...}]
    GET  /nodes/<node>         one node; <node>: its name, Swarm node id or address
    POST /nodes/<node>/off     stop its engine (the caller drained it first)
    POST /nodes/<node>/on      start its engine again; answers once the engine answers

Errors answer the project's JSON bodies with their family's status (400, 401, 404, 409 while a
`lab up`/`down` runs, 503). The token: ``--token-file``, else the shared ``GREENSWARM_TOKEN``
(or ``GREENSWARM_TOKEN_FILE``), else one generated into ``<run dir>/power.token`` (mode 0600).
It listens on a loopback address or the lab's bridge address only; one switch at a time.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import json
import os
import secrets
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from domain.errors import (
    AuthError,
    GreenSwarmError,
    NotFoundError,
    ValidationError,
    error_body,
    http_status,
)
from domain.settings import shared_token
from lab.errors import LabUnavailableError
from lab.proc import daemon_pid, pid_alive, spawn_daemon, stop_pids, wait_until
from lab.settings import LabPaths, LabSettings
from web.stopping import stopped_by_signals

DEFAULT_LISTEN = "127.0.0.1:8089"
MAX_BODY_BYTES = 4096  # no endpoint takes a body


def pidfile(paths: LabPaths) -> Path:
    return paths.run_dir / "power.pid"


def log_file(paths: LabPaths) -> Path:
    return paths.log_dir / "lab" / "power.log"


def token_file(paths: LabPaths) -> Path:
    return paths.run_dir / "power.token"


def server_pid(settings: LabSettings) -> int | None:
    return daemon_pid(pidfile(settings.paths))


def stop_server(settings: LabSettings) -> bool:
    """Stop a detached power server through its pid file; True if one was running."""
    pid = server_pid(settings)
    if pid is None:
        return False
    if stop_pids([pid], settings.timeouts.engine_stop_s):
        raise LabUnavailableError(f"the lab's power server (pid {pid}) did not stop")
    pidfile(settings.paths).unlink(missing_ok=True)
    return True


def parse_listen(text: str, settings: LabSettings) -> tuple[str, int]:
    """``HOST:PORT`` on a loopback address or the lab's bridge address (the manager runs on
    the host network), nothing else: this endpoint stops engines."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValidationError("listen", f"{text!r} is not HOST:PORT")
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ValidationError("listen", f"{host!r} is not an IP address") from None
    if not address.is_loopback and str(address) != settings.gateway:
        raise ValidationError("listen", f"{host} is neither a loopback address nor the lab's "
                              f"bridge address {settings.gateway}")
    return str(address), int(port_text)


def read_token(settings: LabSettings, path: str | None) -> tuple[str, str]:
    """The token and where it came from (see the module)."""
    if path:
        token = Path(path).read_text().strip()
        if not token:
            raise ValidationError("token_file", f"{path} is empty")
        return token, path
    shared = shared_token(os.environ)
    if shared:
        return shared, "GREENSWARM_TOKEN"
    generated = token_file(settings.paths)
    if not generated.exists() or not generated.read_text().strip():
        generated.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(generated, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
    return generated.read_text().strip(), str(generated)


class _Handler(BaseHTTPRequestHandler):
    server: PowerServer

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"power: {self.address_string()} {format % args}\n")

    def do_GET(self) -> None:
        self._answer("GET")

    def do_POST(self) -> None:
        self._answer("POST")

    def _answer(self, method: str) -> None:
        try:
            status, payload = self._route(method)
        except GreenSwarmError as exc:
            status, payload = http_status(exc), error_body(exc)
        except OSError as exc:
            status, payload = 503, {"error": "unavailable", "message": str(exc)}
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, method: str) -> tuple[int, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            return 413, {"error": "invalid", "field": "body", "message": "too large"}
        if length:
            self.rfile.read(length)
        parts = [unquote(p) for p in self.path.split("?", 1)[0].strip("/").split("/") if p]
        if parts == ["healthz"] and method == "GET":
            return 200, {"ok": True}
        self._check_token()
        from lab import power  # the engines' SDK only where a node is asked about

        settings = self.server.settings
        if parts == ["nodes"] and method == "GET":
            return 200, [s.to_json() for s in power.statuses(settings)]
        if len(parts) == 2 and parts[0] == "nodes" and method == "GET":
            return 200, power.status(settings, parts[1]).to_json()
        if len(parts) == 3 and parts[0] == "nodes" and method == "POST" and parts[2] in (
                "on", "off"):
            switch = power.power_on if parts[2] == "on" else power.power_off
            with self.server.switching:
                return 200, switch(settings, parts[1]).to_json()
        raise NotFoundError(f"no endpoint {method} {self.path}")

    def _check_token(self) -> None:
        given = self.headers.get("Authorization", "")
        expected = f"Bearer {self.server.token}"
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise AuthError("a valid bearer token is required")


class PowerServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], settings: LabSettings, token: str) -> None:
        super().__init__(address, _Handler)
        self.settings = settings
        self.token = token
        self.switching = threading.Lock()  # one switch at a time


def make_server(settings: LabSettings, host: str, port: int, token: str) -> PowerServer:
    """The server, bound (port 0: any free port); ``serve_forever`` serves it."""
    return PowerServer((host, port), settings, token)


def serve(settings: LabSettings, host: str, port: int, token: str,
          pid_path: Path | None = None, ready: Callable[[int], None] | None = None) -> None:
    """Serve until SIGTERM/SIGINT (``power stop`` and ``lab down`` send SIGTERM); ``pid_path``
    is written once the port is bound and removed on the way out. Called from the main
    thread."""
    server = make_server(settings, host, port, token)
    try:
        with stopped_by_signals():  # ends serve_forever as Ctrl-C does (web.stopping)
            if pid_path is not None:
                pid_path.parent.mkdir(parents=True, exist_ok=True)
                pid_path.write_text(f"{os.getpid()}\n")
            if ready is not None:
                ready(server.server_address[1])
            server.serve_forever()
    finally:
        server.server_close()
        if pid_path is not None and pid_path.exists() and pid_path.read_text().strip() == str(
                os.getpid()):
            pid_path.unlink()


# -- command line (``python -m lab power ...``, registered by lab/cli.py) -----------------------


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("power", help="switch lab nodes off and on (their engines), "
                                               "or serve that to the manager")
    actions = parser.add_subparsers(dest="power_command", metavar="POWER_COMMAND",
                                    required=True)
    serve_cmd = actions.add_parser("serve", help="serve the power endpoint (a node's BMC)")
    serve_cmd.add_argument("--listen", default=DEFAULT_LISTEN,
                           help=f"HOST:PORT, loopback or the lab's bridge (default "
                                f"{DEFAULT_LISTEN})")
    serve_cmd.add_argument("--token-file", help="the bearer token (default: GREENSWARM_TOKEN, "
                                                "else a generated <run dir>/power.token)")
    serve_cmd.add_argument("--detach", action="store_true",
                           help="run in the background (pid file <run dir>/power.pid; stopped "
                                "by `power stop` and by `lab down`)")
    serve_cmd.add_argument("--pidfile", help=argparse.SUPPRESS)
    serve_cmd.set_defaults(handler=_serve)
    stop_cmd = actions.add_parser("stop", help="stop a detached power server")
    stop_cmd.set_defaults(handler=_stop)
    for name, what in (("on", "start the node's engine again (same Swarm node)"),
                       ("off", "stop the node's engine (drain it in Swarm first)"),
                       ("status", "the node's power (all nodes without NODE)")):
        action = actions.add_parser(name, help=what)
        action.add_argument("node", nargs="?" if name == "status" else None,
                            help="name, Swarm node id or address")
        action.set_defaults(handler=_switch, action=name)


def _settings() -> LabSettings:
    from lab.settings import settings_from_env

    return settings_from_env()


def _serve(args: argparse.Namespace) -> int:
    from lab.store import require_root

    require_root()
    settings = _settings()
    host, port = parse_listen(args.listen, settings)
    token, source = read_token(settings, args.token_file)
    if args.detach:
        return _detach(settings, args.listen, args.token_file)
    pid_path = Path(args.pidfile) if args.pidfile else None
    serve(settings, host, port, token, pid_path,
          ready=lambda bound: print(f"lab power: serving on {host}:{bound} (token: {source})",
                                    flush=True))
    return 0


def _detach(settings: LabSettings, listen: str, token_path: str | None) -> int:
    if server_pid(settings) is not None:
        print(f"lab power: already serving (pid {server_pid(settings)})")
        return 0
    argv = [sys.executable, "-m", "lab", "power", "serve", "--listen", listen,
            "--pidfile", str(pidfile(settings.paths))]
    if token_path:
        argv += ["--token-file", token_path]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = spawn_daemon(argv, log_file(settings.paths), env)

    def bound() -> bool | None:
        if server_pid(settings) is not None:
            return True
        if not pid_alive(child):
            raise LabUnavailableError(f"the power server did not start; see "
                                      f"{log_file(settings.paths)}")
        return None

    wait_until(bound, what="the lab's power server to listen",
               timeout_s=settings.timeouts.engine_start_s)
    print(f"lab power: serving on {listen} (pid {server_pid(settings)}, log "
          f"{log_file(settings.paths)})")
    return 0


def _stop(args: argparse.Namespace) -> int:
    print("lab power: stopped" if stop_server(_settings()) else "lab power: not running")
    return 0


def _switch(args: argparse.Namespace) -> int:
    from lab import power
    from lab.store import require_root

    settings = _settings()
    if args.action == "status":
        found = ([power.status(settings, args.node)] if args.node
                 else power.statuses(settings))
        for item in found:
            print(json.dumps(item.to_json(), sort_keys=True))
        return 0
    require_root()
    switch = power.power_on if args.action == "on" else power.power_off
    print(json.dumps(switch(settings, args.node).to_json(), sort_keys=True))
    return 0
