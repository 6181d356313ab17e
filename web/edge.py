"""The Flask edge every greenswarm HTTP service shares: JSON errors, bearer auth, JSON bodies.

It lives in the lowest package that serves HTTP (the node agent's), so the registries and the
manager use it without importing upwards. Errors are produced in one handler: every
GreenSwarmError family maps to one status code and a JSON body (domain/errors.py holds the
mapping, and its inverse for the clients); nothing leaks a traceback.

Bodies are bounded here, before any handler sees them (DESIGN 9): a body larger than
``BodyLimits.max_body_bytes`` is refused with 413 before it is read, and any body of a mutating
request is decoded once, then checked for nesting depth and string lengths (400 naming the
field, or "body"). Handlers take the decoded object from :func:`json_body`.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from flask import Flask, Response, current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from domain.errors import (
    AdmissionRefused,
    AuthError,
    GreenSwarmError,
    ValidationError,
    error_body,
    http_status,
)
from web import access
from web.stopping import stopped_by_signals

log = logging.getLogger(__name__)
MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# The only routes served without the token (DESIGN 9): reads are authenticated too, since a
# request's env may hold secrets; health checks and load balancers carry none.
PUBLIC_RULES = frozenset({"/healthz"})
TOKEN_KEY = "GREENSWARM_TOKEN"
LIMITS_KEY = "GREENSWARM_BODY_LIMITS"
CALLER_KEY = "greenswarm.caller_known"
# The WSGI server refuses (413, plain text, unread) a body this many times over the limit, so
# that nothing buffers gigabytes; between the limit and that, the app answers the JSON 413.
SERVER_BODY_FACTOR = 4


@dataclass(frozen=True)
class BodyLimits:
    """Bounds on every request body (DESIGN 9); settings of each service (README, Settings).

    1 MiB holds the largest legitimate body (a placement or a utilization batch of a few
    hundred tasks is some tens of KiB); no body of ours nests deeper than 4 levels; no string
    (an env value, the longest) needs more than 64 Ki characters."""

    max_body_bytes: int = 1_048_576
    max_json_depth: int = 32
    max_json_string_chars: int = 65_536

    def validate(self) -> None:
        for name in ("max_body_bytes", "max_json_depth", "max_json_string_chars"):
            if getattr(self, name) < 1:
                raise ValidationError(name, "must be at least 1")


def token_ok(header: str | None, token: str) -> bool:
    """Constant-time check of an ``Authorization: Bearer <token>`` header."""
    if not token or not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer ") :].encode(), token.encode())


def caller_known() -> bool:
    """Whether the current request showed the token (or, on a GET, a valid dashboard session):
    always so past the edge on a route that needs it; on a public route (``/healthz``), what
    decides whether it sees more than anyone may. A session that cannot be checked now
    (Redis does not answer) counts as none."""
    check: Callable[[], bool] | None = current_app.extensions.get(CALLER_KEY)
    if check is None:
        return False
    try:
        return check()
    except GreenSwarmError:
        return False


def _caller_check(app: Flask, read_cookie: Callable[[], bool] | None) -> Callable[[], bool]:
    """Whether the current request carries the token, or is a GET without one that carries a
    valid session (``read_cookie``): the operator, as ``install``'s ``require_token`` admits
    them."""

    def check() -> bool:
        header = request.headers.get("Authorization")
        if token_ok(header, app.config[TOKEN_KEY]):
            return True
        return (read_cookie is not None and header is None and request.method == "GET"
                and read_cookie())

    return check


def install(app: Flask, token: str, limits: BodyLimits | None = None,
            route_tokens: Mapping[str, str] | None = None,
            public_rules: frozenset[str] = frozenset(),
            read_cookie: Callable[[], bool] | None = None, node_secret: str = "") -> None:
    """JSON errors for the whole app, the bearer token on every request but PUBLIC_RULES (an
    unknown path or method included: 401 first), and the bounds on request bodies.
    ``route_tokens``: a rule that also takes a token of its own (e.g. a read-only one for
    ``/metrics``); an empty one adds nothing. ``public_rules``: more rules served without
    the token (a login page). ``read_cookie``: True when the request carries a valid session
    (the dashboard's), which then stands for the token on GET requests only. ``node_secret``:
    nodes' credentials are taken too, on the routes that take them (web/access.py), and the
    token is refused where only nodes report."""
    limits = limits or BodyLimits()
    limits.validate()
    extra = {rule: value for rule, value in (route_tokens or {}).items() if value}
    public = PUBLIC_RULES | public_rules
    app.config[TOKEN_KEY] = token
    app.config[access.NODE_SECRET_KEY] = node_secret
    app.config[LIMITS_KEY] = limits
    app.config["MAX_CONTENT_LENGTH"] = limits.max_body_bytes  # werkzeug: 413 before reading

    @app.before_request
    def require_token() -> None:
        rule = request.url_rule
        if rule is not None and rule.rule in public:
            return
        header = request.headers.get("Authorization")
        if _node_admitted(app, header):
            return
        if rule is not None and rule.rule in extra and token_ok(header, extra[rule.rule]):
            return
        if (read_cookie is not None and header is None and request.method == "GET"
                and read_cookie()):
            return
        if not token_ok(header, app.config[TOKEN_KEY]):
            raise AuthError("a valid 'Authorization: Bearer <token>' header is required")
        access.admit_operator(app)  # 403 where only nodes report

    @app.before_request
    def read_body() -> None:
        """Any body of a mutating request, decoded and bounded before a handler runs."""
        if request.method in MUTATING_METHODS:
            g.greenswarm_body = _decode_body(app.config[LIMITS_KEY])

    # what a public route (/healthz) asks to tell more to the operator (caller_known)
    app.extensions[CALLER_KEY] = _caller_check(app, read_cookie)

    _install_errors(app)


def _install_errors(app: Flask) -> None:
    """Every error as JSON: ours by the exception root's status, HTTP's with their headers,
    anything else a logged 500 that says no more."""

    @app.errorhandler(GreenSwarmError)
    def handle_ours(exc: GreenSwarmError) -> tuple[Response, int]:
        status = http_status(exc)
        if status >= 500:
            log.warning("%s %s failed: %s", request.method, request.path, exc)
        response = jsonify(error_body(exc))
        if status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        # when to ask again (RFC 9110: whole seconds)
        if isinstance(exc, AdmissionRefused) and exc.retry_after_s is not None:
            response.headers["Retry-After"] = str(math.ceil(exc.retry_after_s))
        return response, status

    @app.errorhandler(HTTPException)
    def handle_http(exc: HTTPException) -> tuple[Response, int]:
        status = exc.code or 500
        if isinstance(exc, RequestEntityTooLarge):
            limit = app.config[LIMITS_KEY].max_body_bytes
            return jsonify(
                {
                    "error": "too-large",
                    "field": "body",
                    "message": f"the body is larger than {limit} bytes",
                }
            ), status
        response = jsonify(
            {"error": exc.name.lower().replace(" ", "-"), "message": exc.description}
        )
        for name, value in exc.get_headers():  # e.g. Allow on a 405 (RFC 9110)
            if name.lower() != "content-type":
                response.headers[name] = value
        return response, status

    @app.errorhandler(Exception)
    def handle_unexpected(exc: Exception) -> tuple[Response, int]:
        log.exception("%s %s crashed", request.method, request.path)
        return jsonify({"error": "internal", "message": "internal error; see the server log"}), 500


def _node_admitted(app: Flask, header: str | None) -> bool:
    """True when ``header`` carries a node's credential and the route takes it (403 when it
    does not); False when it is no node's credential (the operator's checks follow)."""
    node = access.node_caller(header, app.config[access.NODE_SECRET_KEY])
    if node is None:
        return False
    access.admit_node(app, node)
    return True


def _decode_body(limits: BodyLimits) -> dict[str, Any] | None:
    """The body as a JSON object within ``limits``; None when there is no body."""
    data = request.get_data(cache=True)  # 413 (RequestEntityTooLarge) past max_body_bytes
    if not data:
        return None
    if not request.is_json:
        raise ValidationError("body", "must be a JSON object (Content-Type: application/json)")
    try:
        payload = json.loads(data)
    except RecursionError:  # nested past the interpreter's own limit, far past ours
        raise ValidationError(
            "body", f"is nested deeper than {limits.max_json_depth} levels"
        ) from None
    except ValueError:  # not JSON, not UTF-8, or an integer of more digits than Python reads
        raise ValidationError("body", "is not valid JSON") from None
    if not isinstance(payload, dict):
        raise ValidationError("body", "must be a JSON object (Content-Type: application/json)")
    check_bounds(payload, limits)
    return payload


def check_bounds(payload: dict[str, Any], limits: BodyLimits) -> None:
    """Depth and string lengths of a decoded body, walked without recursion. A too long string
    is named by its path (``env.NAME``, ``tasks[3].id``); depth and too long keys by "body".
    Paths are spelt only for the error: a body of many small items costs one pass."""
    max_chars, max_depth = limits.max_json_string_chars, limits.max_json_depth
    # (container, its depth, its path as (parent entry, key or index) links)
    stack: list[tuple[dict[str, Any] | list[Any], int, tuple[Any, ...]]] = [(payload, 1, ())]
    while stack:
        container, depth, trail = stack.pop()
        if depth > max_depth:
            raise ValidationError("body", f"is nested deeper than {max_depth} levels")
        items = container.items() if isinstance(container, dict) else enumerate(container)
        for key, item in items:
            if isinstance(key, str) and len(key) > max_chars:
                raise ValidationError("body", f"has a key longer than {max_chars} characters")
            if isinstance(item, dict | list):
                stack.append((item, depth + 1, (trail, key)))
            elif isinstance(item, str) and len(item) > max_chars:
                raise ValidationError(
                    _spell((trail, key)), f"is longer than {max_chars} characters"
                )


def _spell(trail: tuple[Any, ...]) -> str:
    """``(((), "tasks"), 3), "id")`` as ``tasks[3].id``."""
    keys: list[str | int] = []
    while trail:
        trail, key = trail
        keys.append(key)
    path = ""
    for key in reversed(keys):
        path += f"[{key}]" if isinstance(key, int) else (f".{key}" if path else key)
    return path


def json_body() -> dict[str, Any]:
    """The request's JSON object (decoded and bounded by the edge), or a ValidationError
    naming the body."""
    payload: dict[str, Any] | None = g.get("greenswarm_body")
    if payload is None:
        raise ValidationError("body", "a JSON object is required")
    return payload


def allow_only(payload: dict[str, Any], allowed: set[str], prefix: str = "") -> None:
    unknown = sorted(set(payload) - allowed)
    if unknown:
        raise ValidationError(f"{prefix}{unknown[0]}", "unknown field")


def required(payload: dict[str, Any], key: str, prefix: str = "") -> Any:
    if key not in payload:
        raise ValidationError(f"{prefix}{key}", "is required")
    return payload[key]


def listen_addresses(hosts: str, port: int) -> str:
    """waitress's ``listen`` for a comma-separated list of addresses on one port, e.g.
    "127.0.0.1,10.123.0.1" (the local lab: this machine and the lab's bridge); IPv6 in
    brackets."""
    parts = [host.strip() for host in hosts.split(",") if host.strip()]
    if not parts:
        raise ValidationError("listen_host", "names no address")
    return " ".join(
        f"[{h}]:{port}" if ":" in h and not h.startswith("[") else f"{h}:{port}" for h in parts
    )


def serve(app: Flask, host: str, port: int, threads: int) -> None:
    """Serve with waitress (a production WSGI server) until SIGTERM or SIGINT; ``host`` may
    name several addresses, comma-separated."""
    from waitress.server import create_server

    limits: BodyLimits = app.config.get(LIMITS_KEY) or BodyLimits()
    server = create_server(
        app,
        listen=listen_addresses(host, port),
        threads=threads,
        ident="greenswarm",
        max_request_body_size=SERVER_BODY_FACTOR * limits.max_body_bytes,
    )

    log.info("serving on %s", listen_addresses(host, port))
    try:
        # ends on SIGTERM as on Ctrl-C: the requests under way finish first (web.stopping)
        with stopped_by_signals(lambda signum: log.info("signal %s: shutting down", signum)):
            server.run()
    finally:  # the caller's handlers are back: a second signal acts as it had it
        with contextlib.suppress(OSError):
            server.close()
