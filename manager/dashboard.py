"""The dashboard (DESIGN 11): a page served by the manager, behind the shared token.

``GET /dashboard/login`` is a form; it posts the token (JSON ``{"token"}``) to ``POST
/dashboard/login``, which opens a server-side session (manager/sessions.py: a random id in
Redis with an expiry, ``GREENSWARM_SESSION_MAX_AGE_S``) and answers with its id in a cookie
(HttpOnly, SameSite=Strict, Secure when the page is served over TLS, directly or behind a
proxy that says so with ``X-Forwarded-Proto: https`` or ``Forwarded: proto=https``). With it,
``GET /dashboard`` serves the page, and the page's reads (``GET /hosts``, ``/requests``,
``/events``, ``/power``, ``/slo``, ``/history``) are let through by the shared edge (web/edge.py:
the session stands for the token on GET requests only; every change still needs the bearer
token). ``POST /dashboard/logout`` ends the session in Redis, so its cookie is worth nothing
from then on; a new token ends every session. The page polls the reads every 2 s and redraws
without reloading. Its scripts and styles (and the charting library it vendors, uPlot, MIT)
ship in ``manager/static/`` and are served from here: nothing comes from elsewhere.
"""

from __future__ import annotations

import hmac
from pathlib import Path

from flask import Blueprint, Response, current_app, jsonify, redirect, request
from werkzeug.wrappers import Response as WerkzeugResponse

from domain.errors import AuthError, NotFoundError, ValidationError
from manager.sessions import DashboardSessions
from web.edge import TOKEN_KEY, json_body

blueprint = Blueprint("dashboard", __name__)
STATIC_DIR = Path(__file__).resolve().parent / "static"
# what the page loads, by suffix: any such file shipped in static/ (never a path: names only)
CONTENT_TYPES = {".js": "text/javascript", ".css": "text/css"}
STATIC_FILES = {path.name: CONTENT_TYPES[path.suffix] for path in STATIC_DIR.iterdir()
                if path.suffix in CONTENT_TYPES}
COOKIE = "greenswarm_session"
SESSIONS_KEY = "greenswarm.sessions"
# Served without the token: the login form, its answer, the page shell (which redirects to the
# form without a session) and its static files.
PUBLIC_RULES = frozenset({"/", "/dashboard", "/dashboard/login", "/dashboard/logout",
                          "/dashboard/static/<name>"})


def sessions() -> DashboardSessions:
    found: DashboardSessions = current_app.extensions[SESSIONS_KEY]
    return found


def session_ok() -> bool:
    """The request carries the id of an open session (the edge's ``read_cookie``)."""
    return sessions().valid(request.cookies.get(COOKIE))


def served_over_tls() -> bool:
    """TLS to the browser: this server's own, or a proxy's in front that says so. Trusting
    the proxy's word here can only make the cookie stricter (Secure), never weaker."""
    if request.is_secure:
        return True
    forwarded_proto = request.headers.get("X-Forwarded-Proto", "")
    if forwarded_proto.split(",")[0].strip().lower() == "https":
        return True
    first = request.headers.get("Forwarded", "").split(",")[0]
    return any(part.strip().lower() == "proto=https" for part in first.split(";"))


def _page(name: str) -> Response:
    return Response((STATIC_DIR / name).read_bytes(), content_type="text/html; charset=utf-8",
                    headers={"Cache-Control": "no-store"})


@blueprint.get("/")
def root() -> WerkzeugResponse:
    return redirect("/dashboard", code=303)


@blueprint.get("/dashboard")
def page() -> WerkzeugResponse:
    if not session_ok():
        return redirect("/dashboard/login", code=303)
    return _page("dashboard.html")


@blueprint.get("/dashboard/login")
def login_form() -> Response:
    return _page("login.html")


@blueprint.post("/dashboard/login")
def login() -> Response:
    body = json_body()
    token = body.get("token")
    if not isinstance(token, str) or not token:
        raise ValidationError("token", "the manager's token is required")
    expected: str = current_app.config[TOKEN_KEY]
    if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
        raise AuthError("that is not the manager's token")
    store = sessions()
    response = jsonify({"ok": True, "next": "/dashboard"})
    response.set_cookie(COOKIE, store.open(), max_age=int(store.max_age_s), httponly=True,
                        samesite="Strict", path="/", secure=served_over_tls())
    return response


@blueprint.post("/dashboard/logout")
def logout() -> Response:
    """End the session in Redis (its cookie is worth nothing from now on) and drop the
    cookie."""
    sessions().close(request.cookies.get(COOKIE))
    response = jsonify({"ok": True, "next": "/dashboard/login"})
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="Strict",
                           secure=served_over_tls())
    return response


@blueprint.get("/dashboard/static/<name>")
def static_file(name: str) -> Response:
    content_type = STATIC_FILES.get(name)
    if content_type is None:
        raise NotFoundError(f"no file {name!r}")
    return Response((STATIC_DIR / name).read_bytes(),
                    content_type=f"{content_type}; charset=utf-8",
                    headers={"Cache-Control": "no-cache"})
