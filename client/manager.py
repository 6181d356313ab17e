"""The one client of the manager's REST API: the CLI, the live replay, the lab demo and the
benchmarks use it.

Every call sends the bearer token. An error answer becomes its family of domain.errors (400
ValidationError naming the field, 401/403 AuthError with a hint on where the token comes from,
404 NotFoundError, 409 ConflictError, 5xx UnavailableError); a manager that cannot be reached is
an UnavailableError. ``answer`` gives the raw answer for callers that count statuses (the
replay's submissions).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import requests

from domain.errors import (
    AuthError,
    GreenSwarmError,
    UnavailableError,
    error_from_response,
)
from domain.settings import shared_token

DEFAULT_URL = "http://127.0.0.1:8080"
TOKEN_HINT = "give --token-file or GREENSWARM_TOKEN / GREENSWARM_TOKEN_FILE"


class ManagerClient:
    """``token`` None: the token as every process reads it (GREENSWARM_TOKEN, else the file
    GREENSWARM_TOKEN_FILE names)."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *,
                 timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.session = requests.Session()
        token = shared_token(os.environ) if token is None else token
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"

    # -- raw -------------------------------------------------------------------------------

    def answer(self, method: str, path: str, body: object = None, *,
               timeout_s: float | None = None) -> requests.Response:
        """The answer whatever its status, except a refused token: no retry fixes that."""
        try:
            response = self.session.request(
                method, self.url + path, json=body,
                timeout=self.timeout_s if timeout_s is None else timeout_s)
        except requests.RequestException as exc:
            raise UnavailableError(
                f"cannot reach the manager at {self.url} ({method} {path}): {exc}") from None
        if response.status_code in (401, 403):
            error = error_from_response(response, f"{method} {path}")
            raise AuthError(f"{error}; {TOKEN_HINT}")
        return response

    def call(self, method: str, path: str, body: object = None, *,
             timeout_s: float | None = None) -> Any:
        """A successful answer's JSON; an error answer as its family."""
        return self._decode(method, path, self.answer(method, path, body, timeout_s=timeout_s))

    @staticmethod
    def _decode(method: str, path: str, response: requests.Response) -> Any:
        if response.status_code >= 300:
            raise error_from_response(response, f"{method} {path}")
        try:
            return response.json()
        except ValueError:
            raise UnavailableError(f"{method} {path}: the answer is not JSON") from None

    # -- the API ---------------------------------------------------------------------------

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path, timeout_s=60.0)

    def answers(self) -> bool:
        """The manager answers /healthz with status ok."""
        try:
            return bool(self.healthz().get("status") == "ok")
        except GreenSwarmError:
            return False

    def healthz(self) -> dict[str, Any]:
        """``GET /healthz`` whatever its status (503 while degraded has the same body)."""
        response = self.answer("GET", "/healthz", timeout_s=10.0)
        try:
            body: dict[str, Any] = response.json()
        except ValueError:
            raise UnavailableError(
                f"GET /healthz: HTTP {response.status_code}, not JSON") from None
        return body

    def hosts(self) -> list[dict[str, Any]]:
        hosts: list[dict[str, Any]] = self.call("GET", "/hosts", timeout_s=10.0)
        return hosts

    def request(self, request_id: str) -> dict[str, Any]:
        record: dict[str, Any] = self.call("GET", f"/requests/{request_id}", timeout_s=10.0)
        return record

    def submit(self, body: Mapping[str, Any]) -> tuple[int, Any]:
        """``POST /requests``: the status and the answer's JSON (its text when not JSON), for
        a caller that counts refusals and failures rather than raising them."""
        response = self.answer("POST", "/requests", dict(body), timeout_s=60.0)
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, {"error": response.text[:300]}

    def stop(self, request_id: str) -> dict[str, Any] | None:
        """``DELETE /requests/{id}``: the record afterwards, None when there is no such
        request."""
        response = self.answer("DELETE", f"/requests/{request_id}", timeout_s=60.0)
        if response.status_code == 404:
            return None
        record: dict[str, Any] = self._decode("DELETE", f"/requests/{request_id}", response)
        return record
