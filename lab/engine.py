"""The Docker engines of the lab, through the Docker SDK: the main engine (Swarm manager) and one
engine per node. ``docker.errors`` and connection errors are translated into lab errors here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests

from lab.errors import LabConflictError, LabUnavailableError
from lab.model import SwarmState
from lab.proc import wait_until

GATEWAY_PORT = 2377


@contextmanager
def translating(what: str) -> Iterator[None]:
    """Turn Docker SDK and HTTP failures into LabUnavailableError naming ``what``."""
    try:
        yield
    except docker.errors.APIError as exc:
        raise LabUnavailableError(f"{what}: {exc.explanation or exc}") from exc
    except (docker.errors.DockerException, requests.RequestException, OSError) as exc:
        raise LabUnavailableError(f"{what}: {exc}") from exc


def connect(url: str, timeout_s: float) -> Any:
    """A DockerClient for ``url`` (unix:///...); no request is made yet."""
    with translating(f"cannot create a Docker client for {url}"):
        return docker.DockerClient(base_url=url, timeout=int(max(1, timeout_s)))


def ping(url: str, timeout_s: float = 3.0) -> bool:
    """True when the engine at ``url`` answers ``/_ping``."""
    try:
        cli = docker.DockerClient(base_url=url, timeout=int(max(1, timeout_s)))
        try:
            return bool(cli.ping())
        finally:
            cli.close()
    except (docker.errors.DockerException, requests.RequestException, OSError):
        return False


def wait_engine(url: str, timeout_s: float, what: str) -> None:
    wait_until(lambda: True if ping(url) else None, what=what, timeout_s=timeout_s)


@dataclass(frozen=True)
class SwarmInfo:
    local_state: str  # inactive | pending | active | error | locked
    node_id: str
    node_addr: str
    is_manager: bool
    error: str = ""  # the engine's own words when local_state is "error"

    def is_stale_lab_swarm(self, gateway: str) -> bool:
        """The lab's own swarm, broken because its address left with the lab's bridge (after a
        reboot, the engine restarts before the lab does): safe to leave, nothing else uses it."""
        return self.local_state == "error" and f"{gateway}:" in self.error


def swarm_info(cli: Any) -> SwarmInfo:
    with translating("cannot read the engine's swarm state"):
        info = cli.info().get("Swarm", {})
    return SwarmInfo(
        local_state=str(info.get("LocalNodeState", "")),
        node_id=str(info.get("NodeID", "")),
        node_addr=str(info.get("NodeAddr", "")),
        is_manager=bool(info.get("ControlAvailable", False)),
        error=str(info.get("Error", "") or ""),
    )


def check_manager(cli: Any, gateway: str) -> SwarmInfo:
    """Refuse an engine the lab cannot use as its manager; changes nothing.

    Usable: no swarm yet, the manager of a swarm advertised on ``gateway``, or the lab's own
    swarm left broken by a reboot (:meth:`SwarmInfo.is_stale_lab_swarm`; ``ensure_manager``
    leaves it). Refused: another swarm's worker, a swarm advertised elsewhere (unreachable from
    the nodes), a locked or half-joined engine, any other broken swarm.
    """
    info = swarm_info(cli)
    if info.local_state == "inactive" or info.is_stale_lab_swarm(gateway):
        return info
    if info.local_state != "active":
        detail = f" ({info.error})" if info.error else ""
        raise LabConflictError(
            f"the main engine's swarm is {info.local_state!r}{detail}; fix it (e.g. `docker "
            "swarm leave --force`) before `greenswarm lab up`")
    if not info.is_manager:
        raise LabConflictError("the main engine is a worker of another swarm; the lab needs it "
                               "as the manager (`docker swarm leave` first)")
    if info.node_addr != gateway:
        raise LabConflictError(
            f"the main engine manages a swarm advertised on {info.node_addr}, which the lab's "
            f"nodes cannot reach; the lab needs {gateway} (`docker swarm leave --force` first)")
    return info


def ensure_manager(cli: Any, gateway: str) -> bool:
    """Make the main engine a Swarm manager advertising ``gateway``; True if it was inited now.

    ``gateway`` must already be an address of this host (the lab's bridge).
    """
    info = check_manager(cli, gateway)
    if info.local_state == "active":
        return False
    if info.is_stale_lab_swarm(gateway):
        with translating("docker swarm leave of the lab's stale swarm failed"):
            cli.swarm.leave(force=True)
    with translating("docker swarm init on the main engine failed"):
        cli.swarm.init(advertise_addr=gateway, listen_addr=f"{gateway}:{GATEWAY_PORT}")
    state = swarm_info(cli).local_state
    if state != "active":
        raise LabUnavailableError(f"docker swarm init left the main engine {state!r}")
    return True


def worker_token(cli: Any) -> str:
    with translating("cannot read the swarm's worker join token"):
        cli.swarm.reload()
        return str(cli.swarm.attrs["JoinTokens"]["Worker"])


@dataclass(frozen=True)
class SwarmNode:
    node_id: str
    hostname: str
    state: SwarmState
    address: str
    is_manager: bool
    labels: dict[str, str]
    engine_labels: dict[str, str]
    leader: bool = False  # the managers' raft leader

    @property
    def role(self) -> str:
        """``leader``, ``manager`` or ``worker``, as Swarm has it."""
        return "leader" if self.leader else "manager" if self.is_manager else "worker"


def manager_nodes(cli: Any) -> list[SwarmNode]:
    """The manager's node list (empty when the engine is in no swarm)."""
    if swarm_info(cli).local_state != "active":
        return []
    with translating("cannot list the swarm's nodes"):
        raw = cli.api.nodes()
    return [_swarm_node(n) for n in raw]


def _swarm_node(raw: dict[str, Any]) -> SwarmNode:
    description = raw.get("Description", {})
    return SwarmNode(
        node_id=str(raw.get("ID", "")),
        hostname=str(description.get("Hostname", "")),
        state=SwarmState.parse(str(raw.get("Status", {}).get("State", "unknown"))),
        address=str(raw.get("Status", {}).get("Addr", "")),
        is_manager=raw.get("Spec", {}).get("Role") == "manager",
        labels=dict(raw.get("Spec", {}).get("Labels") or {}),
        engine_labels=dict(description.get("Engine", {}).get("Labels") or {}),
        leader=(raw.get("ManagerStatus") or {}).get("Leader") is True,
    )


def wait_swarm_settled(node_cli: Any, timeout_s: float) -> SwarmInfo:
    """An engine started on its old swarm state reconnects to its manager by itself: wait
    while it is ``pending`` (a join now would make it a new node); its state afterwards, or
    still ``pending`` after ``timeout_s`` (the caller joins it anew then)."""
    def settled() -> SwarmInfo | None:
        info = swarm_info(node_cli)
        return None if info.local_state == "pending" else info

    try:
        return wait_until(settled, what="a restarted engine to reconnect to its swarm",
                          timeout_s=timeout_s, interval_s=0.5)
    except LabUnavailableError:
        return swarm_info(node_cli)


def ensure_joined(node_cli: Any, manager_ids: set[str], gateway: str, token: str,
                  address: str) -> tuple[str, bool]:
    """Join the node's engine to the swarm as a worker; (node id, joined now)."""
    info = swarm_info(node_cli)
    if info.local_state == "active" and info.node_id in manager_ids:
        return info.node_id, False
    with translating(f"cannot join {address} to the swarm"):
        if info.local_state != "inactive":
            node_cli.swarm.leave(force=True)
        node_cli.swarm.join(remote_addrs=[f"{gateway}:{GATEWAY_PORT}"], join_token=token,
                            advertise_addr=address, listen_addr=f"{address}:{GATEWAY_PORT}")
    node_id = swarm_info(node_cli).node_id
    if not node_id:
        raise LabUnavailableError(f"the engine at {address} joined but reports no node id")
    return node_id, True


def label_node(cli: Any, node_id: str, labels: dict[str, str]) -> bool:
    """Add ``labels`` to the Swarm node's spec; True if it changed."""
    with translating(f"cannot label swarm node {node_id}"):
        raw = cli.api.inspect_node(node_id)
        spec = dict(raw["Spec"])
        current = dict(spec.get("Labels") or {})
        if all(current.get(k) == v for k, v in labels.items()):
            return False
        spec["Labels"] = {**current, **labels}
        cli.api.update_node(node_id, raw["Version"]["Index"], spec)
    return True


def drain_node(cli: Any, node_id: str) -> bool:
    """Set the Swarm node's availability to ``drain`` (no tasks); True if it changed."""
    with translating(f"cannot drain swarm node {node_id}"):
        raw = cli.api.inspect_node(node_id)
        spec = dict(raw["Spec"])
        if spec.get("Availability") == "drain":
            return False
        spec["Availability"] = "drain"
        cli.api.update_node(node_id, raw["Version"]["Index"], spec)
    return True


def set_role(cli: Any, node_id: str, manager: bool) -> bool:
    """Promote the Swarm node to manager or demote it to worker; True if it changed."""
    role = "manager" if manager else "worker"
    with translating(f"cannot make swarm node {node_id} a {role}"):
        raw = cli.api.inspect_node(node_id)
        spec = dict(raw["Spec"])
        if spec.get("Role") == role:
            return False
        spec["Role"] = role
        cli.api.update_node(node_id, raw["Version"]["Index"], spec)
    return True


def manager_reachable(cli: Any, node_id: str) -> bool:
    """The Swarm node is a manager that raft reaches (``ManagerStatus.Reachability``)."""
    with translating(f"cannot inspect swarm node {node_id}"):
        raw = cli.api.inspect_node(node_id)
    status = raw.get("ManagerStatus") or {}
    return raw.get("Spec", {}).get("Role") == "manager" and \
        status.get("Reachability") == "reachable"


def is_raft_member(cli: Any, node_id: str) -> bool:
    """The Swarm node is still a manager in raft (after a demotion, until it has left)."""
    try:
        with translating(f"cannot inspect swarm node {node_id}"):
            raw = cli.api.inspect_node(node_id)
    except LabUnavailableError as exc:
        if isinstance(exc.__cause__, docker.errors.NotFound):
            return False
        raise
    return bool(raw.get("ManagerStatus"))


def swarm_id(cli: Any) -> str:
    """The id of the swarm the engine manages."""
    with translating("cannot read the swarm's id"):
        cli.swarm.reload()
        return str(cli.swarm.attrs["ID"])


def remove_node(cli: Any, node_id: str) -> bool:
    try:
        with translating(f"cannot remove swarm node {node_id}"):
            cli.api.remove_node(node_id, force=True)
    except LabUnavailableError as exc:
        if isinstance(exc.__cause__, docker.errors.NotFound):
            return False
        raise
    return True


def leave_swarm(cli: Any) -> bool:
    """`docker swarm leave --force`; True if the engine was in a swarm."""
    if swarm_info(cli).local_state == "inactive":
        return False
    with translating("docker swarm leave failed"):
        cli.swarm.leave(force=True)
    return True


def remove_all_containers(cli: Any) -> int:
    """Force-remove every container of a node's engine (the lab's nodes keep none)."""
    removed = 0
    with translating("cannot remove the node's containers"):
        for container in cli.api.containers(all=True):
            try:
                cli.api.remove_container(container["Id"], force=True, v=True)
                removed += 1
            except docker.errors.NotFound:
                continue
    return removed


def image_id(cli: Any, tag: str) -> str | None:
    try:
        with translating(f"cannot inspect image {tag}"):
            return str(cli.api.inspect_image(tag)["Id"])
    except LabUnavailableError as exc:
        if isinstance(exc.__cause__, docker.errors.ImageNotFound | docker.errors.NotFound):
            return None
        raise


def image_info(cli: Any, tag: str) -> dict[str, Any] | None:
    try:
        with translating(f"cannot inspect image {tag}"):
            data: dict[str, Any] = cli.api.inspect_image(tag)
            return data
    except LabUnavailableError as exc:
        if isinstance(exc.__cause__, docker.errors.NotFound):
            return None
        raise


def network_exists(cli: Any, name: str) -> bool:
    with translating("cannot list networks"):
        return bool(cli.api.networks(names=[name]))


def remove_network(cli: Any, name: str) -> bool:
    with translating(f"cannot remove network {name}"):
        for net in cli.api.networks(names=[name]):
            if net.get("Name") == name:
                cli.api.remove_network(net["Id"])
                return True
    return False


def prune_dangling(cli: Any, label: str) -> int:
    """Remove untagged images carrying ``label`` (old builds of ours); return how many."""
    with translating("cannot prune old images"):
        result = cli.api.prune_images(filters={"dangling": True, "label": label})
    return len((result or {}).get("ImagesDeleted") or [])
