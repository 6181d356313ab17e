"""The manager's client of the node agents: live cuts, cuts given back, pauses and resumes
(DESIGN 4, 3.14).

Each agent takes only the manager's word for its own node (DESIGN 9), derived from the node
secret and the node id (domain/credentials.py). The calls go through the one HTTP client
(web/client.py), one per agent, with that word attached; a cut is asked once: one the agent
cannot take now is booked, not yet applied, and the agent's reconciliation applies the booking
(manager/effects.py), so no retry holds up the decision that made the cut."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from domain.credentials import manager_word, node_credential
from web.client import HttpClient, HttpSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CutResult:
    cpu_shares: int
    memory: int  # what the container really has: above the target when usage prevented it


class AgentClient:
    def __init__(self, node_secret: str, timeout_s: float = 5.0) -> None:
        self._node_secret = node_secret
        self._settings = HttpSettings(connect_timeout_s=timeout_s, read_timeout_s=timeout_s,
                                      tries=1)
        self._clients: dict[tuple[str, str], HttpClient] = {}  # (node id, its agent's URL)
        self._lock = threading.Lock()

    def word(self, host_id: str) -> str:
        """The bearer token the agent of ``host_id`` takes."""
        return manager_word(node_credential(self._node_secret, host_id))

    def _client(self, host_id: str, agent_url: str) -> HttpClient:
        with self._lock:
            found = self._clients.get((host_id, agent_url))
            if found is None:
                found = HttpClient(agent_url, f"agent of node {host_id}",
                                   bearer=self.word(host_id), settings=self._settings,
                                   context="agent")
                self._clients[(host_id, agent_url)] = found
            return found

    def cut(self, host_id: str, agent_url: str, task_id: str, cpu_shares: int,
            memory: int) -> CutResult:
        """Set a task's resources live (a cut, or a cut given back: the same update) through
        the agent of ``host_id``; the answer is what the node really applied (404: the node
        runs no container of the task; 400: the agent refused the values)."""
        body = self._client(host_id, agent_url).call_object(
            "PUT", f"/agent/tasks/{task_id}/resources",
            {"cpu_shares": cpu_shares, "memory": memory})
        return CutResult(int(body["cpu_shares"]), int(body["memory"]))

    def pause(self, host_id: str, agent_url: str, task_id: str, *, paused: bool) -> bool:
        """Suspend (``paused``) or resume a task on its node through the agent of ``host_id``
        (``docker pause``/``unpause``, DESIGN 3.14); whether its container is paused now
        (404: the node runs no container of the task)."""
        action = "pause" if paused else "unpause"
        body = self._client(host_id, agent_url).call_object(
            "POST", f"/agent/tasks/{task_id}/{action}", {})
        return bool(body["paused"])

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()
