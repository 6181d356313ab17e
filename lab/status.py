"""`lab status`: what the state file says, checked against the machine, as a table or JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from domain.units import format_bytes
from lab import cgroups, engine
from lab.engine import SwarmNode
from lab.errors import LabError
from lab.model import (
    ClusterRecord,
    DaemonState,
    EngineState,
    LabState,
    LatencyState,
    NodeRecord,
    SwarmState,
)
from lab.power import read_records
from lab.proc import daemon_pid
from lab.settings import LabSettings
from lab.store import load_state


@dataclass(frozen=True)
class NodeStatus:
    name: str
    address: str
    socket: str
    pid: int | None
    daemon: DaemonState
    engine: EngineState
    swarm: SwarmState
    swarm_node_id: str | None
    role: str  # leader, manager or worker as Swarm has it; "-" when it does not know the node
    cpus: float
    memory_bytes: int
    cgroup_parent: str
    cpu_used_s: float | None
    memory_used_bytes: int | None


def _node_dict(node: NodeStatus) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, DaemonState | EngineState | SwarmState) else v)
            for k, v in asdict(node).items()}


@dataclass(frozen=True)
class ClusterStatus:
    """A further Swarm (cluster 2...): its manager engine, as a node, and its workers."""

    index: int
    bridge: str
    gateway: str
    swarm: str  # the manager engine's swarm state: active, inactive, unknown...
    swarm_id: str | None
    manager: NodeStatus
    nodes: tuple[NodeStatus, ...]

    @property
    def up(self) -> bool:
        return (self.manager.engine is EngineState.ANSWERING and bool(self.nodes)
                and all(n.swarm is SwarmState.READY for n in self.nodes))

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.index, "bridge": self.bridge, "gateway": self.gateway,
                "swarm": self.swarm, "swarm_id": self.swarm_id, "up": self.up,
                "manager": _node_dict(self.manager),
                "nodes": [_node_dict(n) for n in self.nodes]}


@dataclass(frozen=True)
class LabStatus:
    up: bool
    main_engine: EngineState
    main_swarm: str
    state: LabState | None
    nodes: tuple[NodeStatus, ...]
    clusters: tuple[ClusterStatus, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "up": self.up,
            "main_engine": str(self.main_engine),
            "main_swarm": self.main_swarm,
            "state": None if self.state is None else self.state.to_dict(),
            "nodes": [_node_dict(n) for n in self.nodes],
            "clusters": [c.to_dict() for c in self.clusters],
        }


def collect(settings: LabSettings) -> LabStatus:
    state = load_state(settings.paths)
    main_ok = engine.ping(settings.engine.main_url)
    main_swarm, swarm_nodes = (_swarm_view(settings, settings.engine.main_url) if main_ok
                                else ("unknown", {}))
    layout = _layout()
    off = _switched_off(settings)
    nodes = tuple(_node_status(n, swarm_nodes, layout, off)
                  for n in (state.nodes if state else ()))
    clusters = tuple(_cluster_status(settings, c, layout, off)
                     for c in (state.clusters if state else ()))
    # a node switched off (lab/power.py) is off, not broken
    running = [n for n in nodes if n.daemon is not DaemonState.OFF]
    up = (bool(running) and all(n.swarm is SwarmState.READY for n in running)
          and all(c.up for c in clusters))
    return LabStatus(up, EngineState.ANSWERING if main_ok else EngineState.SILENT, main_swarm,
                     state, nodes, clusters)


def _switched_off(settings: LabSettings) -> set[str]:
    """The nodes the power manager switched off (lab/power.py's records)."""
    try:
        return {name for name, r in read_records(settings.paths).items()
                if r.get("state") == "off"}
    except LabError:
        return set()


def _cluster_status(settings: LabSettings, cluster: ClusterRecord,
                    layout: cgroups.CgroupLayout | None, off: set[str]) -> ClusterStatus:
    swarm, swarm_nodes = (_swarm_view(settings, cluster.manager.socket_url)
                           if engine.ping(cluster.manager.socket_url, timeout_s=2)
                           else ("unknown", {}))
    return ClusterStatus(
        index=cluster.index, bridge=cluster.bridge, gateway=cluster.gateway, swarm=swarm,
        swarm_id=cluster.swarm_id,
        manager=_node_status(cluster.manager, swarm_nodes, layout, set()),
        nodes=tuple(_node_status(n, swarm_nodes, layout, off) for n in cluster.nodes))


def _swarm_view(settings: LabSettings, url: str) -> tuple[str, dict[str, SwarmNode]]:
    """A Swarm manager engine's swarm state and its nodes by id ("unknown" and none when it
    cannot tell)."""
    client = engine.connect(url, settings.timeouts.api_s)
    try:
        return (engine.swarm_info(client).local_state,
                {n.node_id: n for n in engine.manager_nodes(client)})
    except LabError:
        return "unknown", {}
    finally:
        client.close()


def _layout() -> cgroups.CgroupLayout | None:
    try:
        return cgroups.read_layout()
    except LabError:
        return None


def _node_status(node: NodeRecord, swarm_nodes: dict[str, SwarmNode],
                 layout: cgroups.CgroupLayout | None, off: set[str]) -> NodeStatus:
    pid = daemon_pid(Path(node.pidfile))
    stopped = DaemonState.OFF if node.name in off else DaemonState.STOPPED
    answering = pid is not None and engine.ping(node.socket_url, timeout_s=2)
    usage = cgroups.read_usage(layout, node.cgroup_parent) if layout else None
    seen = swarm_nodes.get(node.swarm_node_id or "")
    return NodeStatus(
        name=node.name,
        address=node.address,
        socket=node.socket,
        pid=pid,
        daemon=DaemonState.RUNNING if pid is not None else stopped,
        engine=EngineState.ANSWERING if answering else EngineState.SILENT,
        swarm=SwarmState.ABSENT if seen is None else seen.state,
        swarm_node_id=node.swarm_node_id,
        role="-" if seen is None else seen.role,
        cpus=node.cpus,
        memory_bytes=node.memory_bytes,
        cgroup_parent=node.cgroup_parent,
        cpu_used_s=(usage.cpu_usage_ns / 1e9
                    if usage and usage.cpu_usage_ns is not None else None),
        memory_used_bytes=usage.memory_bytes if usage else None,
    )


def _table(nodes: tuple[NodeStatus, ...]) -> list[str]:
    head = ("NODE", "SWARM ID", "ADDRESS", "ENGINE", "SWARM", "ROLE", "CPUS", "MEMORY",
            "CPU USED", "MEM USED", "SOCKET")
    rows = [head] + [(
        n.name, (n.swarm_node_id or "-")[:12], n.address,
        str(n.engine) if n.daemon is DaemonState.RUNNING else str(n.daemon),
        str(n.swarm), n.role, f"{n.cpus:g}", format_bytes(n.memory_bytes),
        "-" if n.cpu_used_s is None else f"{n.cpu_used_s:.1f}s",
        "-" if n.memory_used_bytes is None else format_bytes(n.memory_used_bytes),
        n.socket,
    ) for n in nodes]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
            for row in rows]


def render(status: LabStatus) -> str:
    """A human table: one line per node, then the main engine; then each further cluster."""
    if status.state is None:
        return (f"lab: not up (main engine {status.main_engine}, swarm {status.main_swarm})")
    lines = _table(status.nodes)
    state = status.state
    lines.append("")
    off = sum(1 for n in status.nodes if n.daemon is DaemonState.OFF)
    lines.append(f"lab {'up' if status.up else 'NOT READY'}"
                 f"{f' ({off} node(s) switched off)' if off else ''}: bridge {state.bridge} "
                 f"({state.gateway}), main engine {status.main_engine} on {state.main_socket}, "
                 f"swarm {status.main_swarm}, cgroups {state.cgroup_version} "
                 f"/{state.cgroup_name}/<node>")
    for cluster in status.clusters:
        lines.append("")
        lines += _table(cluster.nodes)
        manager = cluster.manager
        lines.append(f"cluster {cluster.index} {'up' if cluster.up else 'NOT READY'}: bridge "
                     f"{cluster.bridge} ({cluster.gateway}), manager {manager.name} "
                     f"{manager.engine} at {manager.address} on {manager.socket}, swarm "
                     f"{cluster.swarm} {(cluster.swarm_id or '-')[:12]}")
    if status.clusters:
        lines.append("")
        lines.append(_latency_line(state))
    return "\n".join(lines)


def _latency_line(state: LabState) -> str:
    ms = f"{state.inter_cluster_latency_ms:g} ms"
    if state.latency.delayed:
        return f"between clusters: {ms} each way ({state.latency}), routed through this host"
    if state.latency is LatencyState.UNAVAILABLE:
        return f"between clusters: routed through this host WITHOUT the {ms} delay"
    return "between clusters: routed through this host, no delay"
