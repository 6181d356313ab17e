"""`lab status`: what the state file says, checked against the machine, as a table or JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from domain.units import format_bytes
from lab import cgroups, engine
from lab.errors import LabError
from lab.model import DaemonState, EngineState, LabState, NodeRecord, SwarmState
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
    cpus: float
    memory_bytes: int
    cgroup_parent: str
    cpu_used_s: float | None
    memory_used_bytes: int | None


@dataclass(frozen=True)
class LabStatus:
    up: bool
    main_engine: EngineState
    main_swarm: str
    state: LabState | None
    nodes: tuple[NodeStatus, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "up": self.up,
            "main_engine": str(self.main_engine),
            "main_swarm": self.main_swarm,
            "state": None if self.state is None else self.state.to_dict(),
            "nodes": [{k: (str(v) if isinstance(v, DaemonState | EngineState | SwarmState)
                           else v) for k, v in asdict(n).items()} for n in self.nodes],
        }


def collect(settings: LabSettings) -> LabStatus:
    state = load_state(settings.paths)
    main_ok = engine.ping(settings.engine.main_url)
    swarm_states: dict[str, SwarmState] = {}
    main_swarm = "unknown"
    if main_ok:
        main = engine.connect(settings.engine.main_url, settings.timeouts.api_s)
        try:
            main_swarm = engine.swarm_info(main).local_state
            swarm_states = {n.node_id: n.state for n in engine.manager_nodes(main)}
        except LabError:
            main_swarm = "unknown"
    layout = _layout()
    nodes = tuple(_node_status(n, swarm_states, layout) for n in (state.nodes if state else ()))
    up = bool(nodes) and all(n.swarm is SwarmState.READY for n in nodes)
    return LabStatus(up, EngineState.ANSWERING if main_ok else EngineState.SILENT, main_swarm,
                     state, nodes)


def _layout() -> cgroups.CgroupLayout | None:
    try:
        return cgroups.read_layout()
    except LabError:
        return None


def _node_status(node: NodeRecord, swarm_states: dict[str, SwarmState],
                 layout: cgroups.CgroupLayout | None) -> NodeStatus:
    pid = daemon_pid(Path(node.pidfile))
    answering = pid is not None and engine.ping(node.socket_url, timeout_s=2)
    usage = cgroups.read_usage(layout, node.cgroup_parent) if layout else None
    return NodeStatus(
        name=node.name,
        address=node.address,
        socket=node.socket,
        pid=pid,
        daemon=DaemonState.RUNNING if pid is not None else DaemonState.STOPPED,
        engine=EngineState.ANSWERING if answering else EngineState.SILENT,
        swarm=swarm_states.get(node.swarm_node_id or "", SwarmState.ABSENT),
        swarm_node_id=node.swarm_node_id,
        cpus=node.cpus,
        memory_bytes=node.memory_bytes,
        cgroup_parent=node.cgroup_parent,
        cpu_used_s=(usage.cpu_usage_ns / 1e9
                    if usage and usage.cpu_usage_ns is not None else None),
        memory_used_bytes=usage.memory_bytes if usage else None,
    )


def render(status: LabStatus) -> str:
    """A human table: one line per node, then the main engine."""
    if status.state is None:
        return (f"lab: not up (main engine {status.main_engine}, swarm {status.main_swarm})")
    head = ("NODE", "SWARM ID", "ADDRESS", "ENGINE", "SWARM", "CPUS", "MEMORY", "CPU USED",
            "MEM USED", "SOCKET")
    rows = [head] + [(
        n.name, (n.swarm_node_id or "-")[:12], n.address,
        str(n.engine) if n.daemon is DaemonState.RUNNING else "stopped",
        str(n.swarm), f"{n.cpus:g}", format_bytes(n.memory_bytes),
        "-" if n.cpu_used_s is None else f"{n.cpu_used_s:.1f}s",
        "-" if n.memory_used_bytes is None else format_bytes(n.memory_used_bytes),
        n.socket,
    ) for n in status.nodes]
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]
    state = status.state
    lines.append("")
    lines.append(f"lab {'up' if status.up else 'NOT READY'}: bridge {state.bridge} "
                 f"({state.gateway}), main engine {status.main_engine} on {state.main_socket}, "
                 f"swarm {status.main_swarm}, cgroups {state.cgroup_version} "
                 f"/{state.cgroup_name}/<node>")
    return "\n".join(lines)
