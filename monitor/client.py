"""The Host and Task Registry over REST (messages 11, 12 and 13), and a dry-run stand-in.

The calls go through the one HTTP client (web/client.py), with the node's credential (DESIGN
9), bounded by the monitor's connect and read timeouts, and asked once: the monitor's loop
backs off and sends again (monitor/core.py's BackoffPolicy), and it re-sends its values every
``resend_s`` anyway. Errors are the exception root's families: unreachable or 5xx
UnavailableError, 401 AuthError, 403 ForbiddenError, 404 NotFoundError, 409 ConflictError, 400
ValidationError with the registry's field.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import quote

from monitor.core import HostUpdate, TaskBatch
from web.client import HttpClient, HttpSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostRegistration:
    """Message 11: the host, its capacity and its utilization when it registers."""

    host_id: str
    address: str
    cpu_capacity_shares: int
    memory_capacity_bytes: int
    cpu_util: float
    memory_util: float
    measured_at: float | None = None  # wall-clock epoch seconds

    def payload(self) -> dict[str, object]:
        body: dict[str, object] = {
            "id": self.host_id,
            "address": self.address,
            "cpu_capacity": self.cpu_capacity_shares,
            "memory_capacity": self.memory_capacity_bytes,
            "cpu_util": round(self.cpu_util, 4),
            "memory_util": round(self.memory_util, 4),
        }
        if self.measured_at is not None:
            body["measured_at"] = round(self.measured_at, 3)
        return body


@dataclass(frozen=True)
class TaskUpdateResult:
    updated: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()


class RegistryPort(Protocol):
    """What the monitor needs from the registries; ``register_host`` answers True if created."""

    def register_host(self, registration: HostRegistration) -> bool: ...

    def update_host(self, host_id: str, update: HostUpdate) -> None: ...

    def update_tasks(self, host_id: str, batch: TaskBatch) -> TaskUpdateResult: ...


class RegistryClient:
    """The registry REST API with the node's credential (DESIGN 9): one session, bounded
    timeouts, no retry of its own (the monitor's loop retries)."""

    def __init__(
        self,
        base_url: str,
        credential: str,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 5.0,
    ) -> None:
        settings = HttpSettings(connect_timeout_s=connect_timeout_s,
                                read_timeout_s=read_timeout_s, tries=1)
        self._http = HttpClient(base_url, "registry", bearer=credential, settings=settings,
                                context="registry")
        self.base_url = self._http.base_url

    def close(self) -> None:
        self._http.close()

    def register_host(self, registration: HostRegistration) -> bool:
        answer = self._http.answer("POST", "/registry/hosts", registration.payload())
        return answer.raise_for_error().status == 201

    def update_host(self, host_id: str, update: HostUpdate) -> None:
        if update.empty:
            return
        path = f"/registry/hosts/{quote(host_id, safe='')}/utilization"
        self._http.answer("PUT", path, update.payload()).raise_for_error()

    def update_tasks(self, host_id: str, batch: TaskBatch) -> TaskUpdateResult:
        if batch.empty:
            return TaskUpdateResult()
        body = self._http.answer("PUT", "/registry/tasks/utilization",
                                 batch.payload(host_id)).raise_for_error().body
        updated = body.get("updated") if isinstance(body, dict) else None
        unknown = body.get("unknown") if isinstance(body, dict) else None
        return TaskUpdateResult(
            tuple(str(i) for i in updated) if isinstance(updated, list) else (),
            tuple(str(i) for i in unknown) if isinstance(unknown, list) else (),
        )


@dataclass
class DryRunRegistry:
    """Records what would be sent (message number, method, path, body) and answers like a
    healthy registry that knows every task (``--once``)."""

    messages: list[dict[str, object]] = field(default_factory=list)

    def register_host(self, registration: HostRegistration) -> bool:
        self._record(11, "POST", "/registry/hosts", registration.payload())
        return True

    def update_host(self, host_id: str, update: HostUpdate) -> None:
        path = f"/registry/hosts/{quote(host_id, safe='')}/utilization"
        self._record(12, "PUT", path, update.payload())

    def update_tasks(self, host_id: str, batch: TaskBatch) -> TaskUpdateResult:
        self._record(13, "PUT", "/registry/tasks/utilization", batch.payload(host_id))
        return TaskUpdateResult(updated=tuple(t.task_id for t in batch.tasks))

    def _record(self, message: int, method: str, path: str, body: Mapping[str, object]) -> None:
        self.messages.append(
            {"message": message, "method": method, "path": path, "body": dict(body)}
        )
