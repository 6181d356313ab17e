"""Who this host is: the Swarm node id and address of the local engine, else the hostname."""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostIdentity:
    host_id: str
    address: str


def identity_from_info(
    info: Mapping[str, Any] | None,
    hostname: str,
    host_id_override: str | None = None,
    address_override: str | None = None,
) -> HostIdentity:
    """Pure: the overrides, else ``docker info``'s Swarm.NodeID / Swarm.NodeAddr when the engine
    is in a swarm, else the hostname."""
    swarm = (info or {}).get("Swarm") or {}
    node_id = str(swarm.get("NodeID") or "")
    node_addr = str(swarm.get("NodeAddr") or "")
    return HostIdentity(
        host_id=host_id_override or node_id or hostname,
        address=address_override or node_addr or hostname,
    )


def resolve_identity(
    docker_client: Any | None,
    host_id_override: str | None = None,
    address_override: str | None = None,
) -> HostIdentity:
    """Asks the engine only when an override is missing; an unreachable engine falls back to the
    hostname (logged, since lab nodes that share a hostname then need --host-id)."""
    info: Mapping[str, Any] | None = None
    if docker_client is not None and not (host_id_override and address_override):
        try:
            info = docker_client.info()
        except Exception as exc:  # any SDK or transport failure: fall back, never crash
            log.warning("cannot ask the Docker engine who this node is (%s); using the hostname",
                        exc)
    return identity_from_info(info, socket.gethostname(), host_id_override, address_override)
