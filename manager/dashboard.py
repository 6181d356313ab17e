"""The dashboard (DESIGN 11): a page served by the manager, behind the shared token.

``GET /dashboard/login`` is a form; it posts the token (JSON ``{"token"}``) to ``POST
/dashboard/login``, which answers with a signed session cookie (HttpOnly, SameSite=Strict,
valid for ``SESSION_MAX_AGE_S``). With it, ``GET /dashboard`` serves the page, and the page's
reads (``GET /hosts``, ``/requests``, ``/events``, ``/power``) are let through by the shared edge
(web/edge.py: the cookie stands for the token on GET requests only; every change still needs
the bearer token). The page polls them every 2 s and redraws without reloading. Its script and
style ship in ``manager/static/`` and are served from here: nothing comes from elsewhere.

The cookie is signed with a key derived from the token (HMAC), so that every manager sharing the
token accepts it and a new token logs everyone out.
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from flask import Blueprint, Response, current_app, jsonify, redirect, request
from itsdangerous import BadSignature, URLSafeTimedSerializer
from werkzeug.wrappers import Response as WerkzeugResponse

from domain.errors import AuthError, NotFoundError, ValidationError
from web.edge import TOKEN_KEY, json_body

blueprint = Blueprint("dashboard", __name__)
STATIC_DIR = Path(__file__).resolve().parent / "static"
STATIC_FILES = {"dashboard.js": "text/javascript", "dashboard.css": "text/css",
                "warnings.js": "text/javascript"}
COOKIE = "greenswarm_session"
SESSION_MAX_AGE_S = 12 * 3600
# Served without the token: the login form, its answer, the page shell (which redirects to the
# form without a session) and its static files.
PUBLIC_RULES = frozenset({"/", "/dashboard", "/dashboard/login", "/dashboard/logout",
                          "/dashboard/static/<name>"})


def _serializer() -> URLSafeTimedSerializer:
    token: str = current_app.config[TOKEN_KEY]
    key = hmac.new(token.encode(), b"greenswarm dashboard session", hashlib.sha256).hexdigest()
    return URLSafeTimedSerializer(key, salt="greenswarm-dashboard")


def session_ok() -> bool:
    """The request carries a session cookie this manager signed, not older than its age."""
    value = request.cookies.get(COOKIE)
    if not value or not current_app.config[TOKEN_KEY]:
        return False
    try:
        _serializer().loads(value, max_age=SESSION_MAX_AGE_S)
    except BadSignature:
        return False
    return True


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
    response = jsonify({"ok": True, "next": "/dashboard"})
    response.set_cookie(COOKIE, _serializer().dumps("dashboard"), max_age=SESSION_MAX_AGE_S,
                        httponly=True, samesite="Strict", path="/",
                        secure=request.is_secure)
    return response


@blueprint.post("/dashboard/logout")
def logout() -> Response:
    response = jsonify({"ok": True, "next": "/dashboard/login"})
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="Strict")
    return response


@blueprint.get("/dashboard/static/<name>")
def static_file(name: str) -> Response:
    content_type = STATIC_FILES.get(name)
    if content_type is None:
        raise NotFoundError(f"no file {name!r}")
    return Response((STATIC_DIR / name).read_bytes(),
                    content_type=f"{content_type}; charset=utf-8",
                    headers={"Cache-Control": "no-cache"})
