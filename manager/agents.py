"""The manager's client of the node agents: live cuts, cuts given back, and kills (DESIGN 4)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import requests

from domain.errors import UnavailableError, error_from_response

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CutResult:
    cpu_shares: int
    memory: int  # what the container really has: above the target when usage prevented it


class AgentClient:
    def __init__(self, token: str, timeout_s: float = 5.0) -> None:
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"Bearer {token}"
        self._timeout_s = timeout_s

    def cut(self, agent_url: str, task_id: str, cpu_shares: int, memory: int) -> CutResult:
        """Set a task's resources live (a cut, or a cut given back: the same update); the
        answer is what the node really applied."""
        body = self._send(
            "PUT",
            f"{agent_url}/agent/tasks/{task_id}/resources",
            {"cpu_shares": cpu_shares, "memory": memory},
        )
        return CutResult(int(body["cpu_shares"]), int(body["memory"]))

    def _send(self, method: str, url: str, payload: dict[str, object]) -> dict[str, Any]:
        try:
            response = self._session.request(method, url, json=payload, timeout=self._timeout_s)
        except requests.RequestException as exc:
            raise UnavailableError(f"agent at {url} is unreachable: {exc}") from exc
        if response.status_code >= 300:
            # 404: the node runs no container of the task; 400: the agent refused the values
            raise error_from_response(response, f"agent {method} {url}")
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise UnavailableError(f"agent at {url} answered something that is not an object")
        return body

    def close(self) -> None:
        self._session.close()
