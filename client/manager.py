"""The manager's REST API as its callers use it: the CLI, the live replay, the lab demo, the
benchmarks and the peer clusters (manager/peering.py).

The calls go through the one HTTP client (web/client.py): the operator's bearer token on
every call, bounded, retried where that is safe, and every error answer as its family of
domain.errors (400 ValidationError naming the field, 401/403 AuthError with a hint on where the
token comes from, 404 NotFoundError, 409 ConflictError, 5xx UnavailableError); a manager that
cannot be reached is an UnavailableError. ``answer`` gives the raw answer for callers that
count statuses (the replay's submissions).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from domain.errors import GreenSwarmError, UnavailableError
from domain.settings import shared_token
from web.client import Answer, HttpClient, HttpSettings

DEFAULT_URL = "http://127.0.0.1:8080"
TOKEN_HINT = "give --token-file or GREENSWARM_TOKEN / GREENSWARM_TOKEN_FILE"
CONNECT_TIMEOUT_S = 5.0
# a probe is asked once: its callers poll it
PROBE = HttpSettings(connect_timeout_s=CONNECT_TIMEOUT_S, read_timeout_s=10.0, tries=1)


class ManagerClient:
    """``token`` None: the token as every process reads it (GREENSWARM_TOKEN, else the file
    GREENSWARM_TOKEN_FILE names). ``timeout_s``: a call's read timeout unless it says its own
    (the connect timeout is at most CONNECT_TIMEOUT_S); ``target`` names the manager in
    messages; ``tries``: attempts of a call that may be retried (web/client.py)."""

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, *,
                 timeout_s: float = 30.0, target: str = "manager", tries: int = 3) -> None:
        token = shared_token(os.environ) if token is None else token
        settings = HttpSettings(connect_timeout_s=min(CONNECT_TIMEOUT_S, timeout_s),
                                read_timeout_s=timeout_s, tries=tries)
        self.http = HttpClient(url, target, bearer=token, settings=settings,
                               auth_hint=TOKEN_HINT)
        self.url = self.http.base_url

    # -- raw -------------------------------------------------------------------------------

    def answer(self, method: str, path: str, body: object = None, *,
               timeout_s: float | None = None) -> Answer:
        """The answer whatever its status, except a refused token: no retry fixes that."""
        return self.http.answer(method, path, body, read_timeout_s=timeout_s)

    def call(self, method: str, path: str, body: object = None, *,
             timeout_s: float | None = None) -> Any:
        """A successful answer's JSON; an error answer as its family."""
        return self.http.call(method, path, body, read_timeout_s=timeout_s)

    def close(self) -> None:
        self.http.close()

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
        """``GET /healthz`` whatever its status (503 while degraded has the same body); asked
        once (a probe: its callers poll)."""
        answer = self.http.answer("GET", "/healthz", settings=PROBE)
        if not isinstance(answer.body, dict):
            raise UnavailableError(f"GET /healthz: HTTP {answer.status}, not a JSON object")
        return answer.body

    def hosts(self) -> list[dict[str, Any]]:
        hosts: list[dict[str, Any]] = self.call("GET", "/hosts", timeout_s=10.0)
        return hosts

    def request(self, request_id: str) -> dict[str, Any]:
        record: dict[str, Any] = self.call("GET", f"/requests/{request_id}", timeout_s=10.0)
        return record

    def submit(self, body: Mapping[str, Any]) -> tuple[int, Any]:
        """``POST /requests``: the status and the answer's JSON (its text when not JSON), for
        a caller that counts refusals and failures rather than raising them."""
        answer = self.answer("POST", "/requests", dict(body), timeout_s=60.0)
        if answer.is_json:
            return answer.status, answer.body
        return answer.status, {"error": str(answer.body or "")[:300]}

    def stop(self, request_id: str) -> dict[str, Any] | None:
        """``DELETE /requests/{id}``: the record afterwards, None when there is no such
        request."""
        answer = self.answer("DELETE", f"/requests/{request_id}", timeout_s=60.0)
        if answer.status == 404:
            return None
        record: dict[str, Any] = answer.json()
        return record
