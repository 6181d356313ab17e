"""The Flask edge every greenswarm HTTP service shares: JSON errors, bearer auth, JSON bodies.

It lives in the lowest package that serves HTTP (the node agent's), so the registries and the
manager use it without importing upwards. Errors are produced in one handler: every
GreenSwarmError family maps to one status code and a JSON body (domain/errors.py holds the
mapping, and its inverse for the clients); nothing leaks a traceback.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import signal
from types import FrameType
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from domain.errors import AuthError, GreenSwarmError, ValidationError, error_body, http_status

log = logging.getLogger(__name__)
MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
TOKEN_KEY = "GREENSWARM_TOKEN"


def token_ok(header: str | None, token: str) -> bool:
    """Constant-time check of an ``Authorization: Bearer <token>`` header."""
    if not token or not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer ") :].encode(), token.encode())


def install(app: Flask, token: str) -> None:
    """JSON errors for the whole app, and the bearer token on every mutating request."""
    app.config[TOKEN_KEY] = token

    @app.before_request
    def require_token() -> None:
        if request.method in MUTATING_METHODS and not token_ok(
            request.headers.get("Authorization"), app.config[TOKEN_KEY]
        ):
            raise AuthError("a valid 'Authorization: Bearer <token>' header is required")

    @app.errorhandler(GreenSwarmError)
    def handle_ours(exc: GreenSwarmError) -> tuple[Response, int]:
        status = http_status(exc)
        if status >= 500:
            log.warning("%s %s failed: %s", request.method, request.path, exc)
        response = jsonify(error_body(exc))
        if status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        return response, status

    @app.errorhandler(HTTPException)
    def handle_http(exc: HTTPException) -> tuple[Response, int]:
        status = exc.code or 500
        return jsonify(
            {"error": exc.name.lower().replace(" ", "-"), "message": exc.description}
        ), status

    @app.errorhandler(Exception)
    def handle_unexpected(exc: Exception) -> tuple[Response, int]:
        log.exception("%s %s crashed", request.method, request.path)
        return jsonify({"error": "internal", "message": "internal error; see the server log"}), 500


def json_body() -> dict[str, Any]:
    """The request's JSON object, or a ValidationError naming the body."""
    if not request.data:
        raise ValidationError("body", "a JSON object is required")
    payload = request.get_json(silent=True)
    if not isinstance(payload, dict):
        raise ValidationError("body", "must be a JSON object (Content-Type: application/json)")
    return payload


def allow_only(payload: dict[str, Any], allowed: set[str], prefix: str = "") -> None:
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise ValidationError(f"{prefix}{unknown[0]}", "unknown field")


def required(payload: dict[str, Any], key: str, prefix: str = "") -> Any:
    if key not in payload:
        raise ValidationError(f"{prefix}{key}", "is required")
    return payload[key]


def serve(app: Flask, host: str, port: int, threads: int) -> None:
    """Serve with waitress (a production WSGI server) until SIGTERM or SIGINT."""
    from waitress.server import create_server

    server = create_server(app, host=host, port=port, threads=threads, ident="greenswarm")

    def stop(signum: int, frame: FrameType | None) -> None:
        log.info("signal %s: shutting down", signum)
        server.close()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("serving on http://%s:%s", host, port)
    with contextlib.suppress(OSError):  # the listening socket closes under the loop at exit
        server.run()
