"""The Host and Task Registry over REST (messages 11, 12 and 13), and a dry-run stand-in.

Errors are translated to the project's exception root: unreachable or 5xx -> UnavailableError,
401/403 -> AuthError, 404 -> NotFoundError, 409 -> ConflictError, 400 -> ValidationError (with
the registry's field), as ``domain.errors.error_from_response`` maps every HTTP client's answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

import requests

from domain.errors import UnavailableError, ValidationError, error_from_response
from monitor.core import HostUpdate, TaskBatch

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
    """``requests`` against the registry REST API with the node's credential (DESIGN 9); one
    Session, bounded timeouts."""

    def __init__(
        self,
        base_url: str,
        credential: str,
        connect_timeout_s: float = 3.0,
        read_timeout_s: float = 5.0,
        session: requests.Session | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = (connect_timeout_s, read_timeout_s)
        self._session = session or requests.Session()
        self._session.headers["Accept"] = "application/json"
        if credential:
            self._session.headers["Authorization"] = f"Bearer {credential}"

    def close(self) -> None:
        self._session.close()

    def register_host(self, registration: HostRegistration) -> bool:
        response = self._call("POST", "/registry/hosts", registration.payload())
        return response.status_code == 201

    def update_host(self, host_id: str, update: HostUpdate) -> None:
        if update.empty:
            return
        path = f"/registry/hosts/{quote(host_id, safe='')}/utilization"
        self._call("PUT", path, update.payload())

    def update_tasks(self, host_id: str, batch: TaskBatch) -> TaskUpdateResult:
        if batch.empty:
            return TaskUpdateResult()
        response = self._call("PUT", "/registry/tasks/utilization", batch.payload(host_id))
        body = _json(response)
        updated = body.get("updated") if isinstance(body, dict) else None
        unknown = body.get("unknown") if isinstance(body, dict) else None
        return TaskUpdateResult(
            tuple(str(i) for i in updated) if isinstance(updated, list) else (),
            tuple(str(i) for i in unknown) if isinstance(unknown, list) else (),
        )

    def _call(self, method: str, path: str, body: Mapping[str, object]) -> requests.Response:
        url = self.base_url + path
        try:
            data = json.dumps(body, allow_nan=False)
        except ValueError as exc:  # NaN or infinity: a bug upstream, never "unreachable"
            raise ValidationError("body", f"cannot encode {dict(body)!r}: {exc}") from exc
        headers = {"Content-Type": "application/json"}
        try:
            response = self._session.request(
                method, url, data=data, headers=headers, timeout=self._timeout
            )
        except requests.RequestException as exc:
            raise UnavailableError(f"registry unreachable: {method} {url}: {exc}") from exc
        if 200 <= response.status_code < 300:
            return response
        raise error_from_response(response, f"{method} {path}")


def _json(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


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
