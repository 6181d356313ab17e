"""The manager's client of the node agents: live cuts, cuts given back, and kills (DESIGN 4).

Each agent takes only the manager's word for its own node (DESIGN 9), derived from the node
secret and the node id (domain/credentials.py): the client derives it per call."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import requests

from domain.credentials import manager_word, node_credential
from domain.errors import UnavailableError, error_from_response

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CutResult:
    cpu_shares: int
    memory: int  # what the container really has: above the target when usage prevented it


class AgentClient:
    def __init__(self, node_secret: str, timeout_s: float = 5.0) -> None:
        self._node_secret = node_secret
        self._words: dict[str, str] = {}  # node id -> the manager's word to its agent
        self._session = requests.Session()
        self._timeout_s = timeout_s

    def word(self, host_id: str) -> str:
        """The bearer token the agent of ``host_id`` takes."""
        found = self._words.get(host_id)
        if found is None:
            found = manager_word(node_credential(self._node_secret, host_id))
            self._words[host_id] = found
        return found

    def cut(self, host_id: str, agent_url: str, task_id: str, cpu_shares: int,
            memory: int) -> CutResult:
        """Set a task's resources live (a cut, or a cut given back: the same update) through
        the agent of ``host_id``; the answer is what the node really applied."""
        body = self._send(
            host_id,
            "PUT",
            f"{agent_url}/agent/tasks/{task_id}/resources",
            {"cpu_shares": cpu_shares, "memory": memory},
        )
        return CutResult(int(body["cpu_shares"]), int(body["memory"]))

    def _send(self, host_id: str, method: str, url: str,
              payload: dict[str, object]) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.word(host_id)}"}
        try:
            response = self._session.request(method, url, json=payload, headers=headers,
                                             timeout=self._timeout_s)
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
