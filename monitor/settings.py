"""The monitor's settings: one typed, frozen dataclass, read from the environment (and the command
line, which wins) at the edge only.

Environment: GREENSWARM_REGISTRY_URL, GREENSWARM_NODE_SECRET or GREENSWARM_NODE_CREDENTIAL (or
their _FILE; never the operator's token), DOCKER_HOST, and GREENSWARM_MONITOR_<NAME> for every
other field (e.g. GREENSWARM_MONITOR_HOST_WINDOW_S=30).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from domain.errors import ValidationError
from domain.settings import parse_setting, secret_setting

ENV_PREFIX = "GREENSWARM_MONITOR_"
DEFAULT_REGISTRY_URL = "http://127.0.0.1:8080"
DEFAULT_DOCKER_URL = "unix:///var/run/docker.sock"


class HostSourceKind(StrEnum):
    PSUTIL = "psutil"
    CGROUP = "cgroup"


class LogLevel(StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


@dataclass(frozen=True)
class MonitorSettings:
    registry_url: str = DEFAULT_REGISTRY_URL
    # Node identity (DESIGN 9): the nodes' shared secret, from which the monitor derives its
    # host's credential, or that credential itself (domain/credentials.py).
    node_secret: str = dataclasses.field(default="", repr=False)
    node_credential: str = dataclasses.field(default="", repr=False)
    insecure_no_token: bool = False
    host_id: str | None = None
    address: str | None = None
    source: HostSourceKind = HostSourceKind.PSUTIL
    cgroup: str | None = None
    cgroup_root: str = "/sys/fs/cgroup"
    container_cgroup_parent: str = "docker"
    host_interval_s: float = 3.0
    host_window_s: float = 30.0
    task_interval_s: float = 3.0
    task_window_s: float = 45.0
    threshold_pp: float = 10.0
    # The current values are sent again at the first window that closes this long after the
    # last values sent, moved or not (DESIGN 9): a wrong value in the registry cannot stand.
    resend_s: float = 60.0
    docker_socket: str = DEFAULT_DOCKER_URL
    powercap_root: str = "/sys/class/powercap"
    connect_timeout_s: float = 3.0
    read_timeout_s: float = 5.0
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0
    log_level: LogLevel = LogLevel.INFO

    def __post_init__(self) -> None:
        for name in ("host_interval_s", "host_window_s", "task_interval_s", "task_window_s",
                     "connect_timeout_s", "read_timeout_s", "backoff_base_s", "backoff_cap_s",
                     "resend_s"):
            if not getattr(self, name) > 0:
                raise ValidationError(name, "must be positive")
        if self.host_window_s < self.host_interval_s:
            raise ValidationError("host_window_s", "must be at least host_interval_s")
        if self.task_window_s < self.task_interval_s:
            raise ValidationError("task_window_s", "must be at least task_interval_s")
        if not 0 < self.threshold_pp <= 100:
            raise ValidationError("threshold_pp", "must be in (0, 100] percentage points")
        if self.backoff_cap_s < self.backoff_base_s:
            raise ValidationError("backoff_cap_s", "must be at least backoff_base_s")
        if self.source is HostSourceKind.CGROUP and not self.cgroup:
            raise ValidationError("cgroup", "--source cgroup needs --cgroup PATH")
        if not self.registry_url.startswith(("http://", "https://")):
            raise ValidationError("registry_url", "must be an http:// or https:// URL")

    @property
    def docker_url(self) -> str:
        """The Docker endpoint as the SDK wants it (a bare socket path becomes unix://)."""
        if self.docker_socket.startswith("/"):
            return "unix://" + self.docker_socket
        return self.docker_socket

    def require_credential(self) -> None:
        """Refuse to talk to the registry without a node secret or credential, unless told it
        is fine."""
        if not self.node_secret and not self.node_credential and not self.insecure_no_token:
            raise ValidationError(
                "node_secret",
                "GREENSWARM_NODE_SECRET is empty: set it to the nodes' secret (`greenswarm "
                "node-secret` on the manager prints it), or GREENSWARM_NODE_CREDENTIAL to this "
                "node's own credential (or pass --insecure-no-token for a registry without "
                "authentication)",
            )


def _convert(name: str, raw: object) -> object:
    field_types = {f.name: f.type for f in fields(MonitorSettings)}
    kind = field_types[name]
    if not isinstance(raw, str):
        return raw
    try:
        if kind == "HostSourceKind":
            return HostSourceKind(raw.strip().lower())
        if kind == "LogLevel":
            return LogLevel(raw.strip().upper())
    except ValueError:
        raise ValidationError(name, f"cannot read {raw!r}") from None
    return parse_setting(name, raw.strip(), kind)


def load_settings(
    environ: Mapping[str, str], overrides: Mapping[str, Any] | None = None
) -> MonitorSettings:
    """Defaults, then the environment, then ``overrides`` (the command line; None = not given)."""
    values: dict[str, object] = {}
    names = {f.name for f in fields(MonitorSettings)}
    if environ.get("GREENSWARM_REGISTRY_URL"):
        values["registry_url"] = environ["GREENSWARM_REGISTRY_URL"]
    secrets = {"node_secret": "GREENSWARM_NODE_SECRET",
               "node_credential": "GREENSWARM_NODE_CREDENTIAL"}
    for name, variable in secrets.items():
        values[name] = secret_setting(environ, variable)
    if environ.get("DOCKER_HOST"):
        values["docker_socket"] = environ["DOCKER_HOST"]
    for name in names - secrets.keys():
        raw = environ.get(ENV_PREFIX + name.upper())
        if raw:
            values[name] = _convert(name, raw)
    for name, value in (overrides or {}).items():
        if name in names and name not in secrets and value is not None:
            values[name] = _convert(name, value)
    return MonitorSettings(**values)  # type: ignore[arg-type]
