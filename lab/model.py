"""Values of the lab: the nodes it runs and the state file that records what it created.

Pure: no I/O here. The state file (``/run/greenswarm/lab/state.json``) is the contract with the
manager service and the tests: per node its name, Swarm node id, address, engine socket, pid,
cgroup parent and cgroup directories, CPUs and memory.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from domain.labels import CAPACITY_CPU_LABEL, CAPACITY_MEMORY_LABEL
from lab.errors import LabError
from lab.settings import LabSettings
from monitor.cgroups import CgroupVersion  # the lab's nodes use v1 or v2

STATE_VERSION = 1

# Labels the lab puts on every node's engine and on its Swarm node (see README of the lab).
LABEL_NODE = "greenswarm.lab.node"
LABEL_SOCKET = "greenswarm.lab.socket"
LABEL_ADDRESS = "greenswarm.lab.address"
LABEL_CGROUP = "greenswarm.lab.cgroup"
# On the Swarm node only: "manager" for the nodes `up --managers N` made Swarm managers (the
# HA stack places greenswarm's managers there, never on the main engine), else "worker".
LABEL_ROLE = "greenswarm.lab.role"


class DaemonState(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"
    OFF = "off"  # stopped on purpose: switched off by the power manager (lab/power.py)


class EngineState(StrEnum):
    ANSWERING = "answering"
    SILENT = "silent"


class SwarmState(StrEnum):
    """A node as the manager sees it (Docker's node status, plus ``absent``)."""

    READY = "ready"
    DOWN = "down"
    UNKNOWN = "unknown"
    DISCONNECTED = "disconnected"
    ABSENT = "absent"

    @classmethod
    def parse(cls, value: str) -> SwarmState:
        try:
            return cls(value.lower())
        except ValueError:
            return cls.UNKNOWN


class LatencyState(StrEnum):
    """Whether the delay between clusters is in place (DESIGN 12)."""

    NONE = "none"  # one cluster, or 0 ms asked for
    NETEM = "netem"  # a netem qdisc on every cluster bridge
    NFQUEUE = "nfqueue"  # no netem: the lab's userspace queue (lab/delay.py) holds the packets
    UNAVAILABLE = "unavailable"  # neither works here: clusters talk without delay

    @property
    def delayed(self) -> bool:
        return self in (LatencyState.NETEM, LatencyState.NFQUEUE)


class ImageSet(StrEnum):
    """Which images `lab up` builds and loads into the nodes."""

    ALL = "all"
    MINIMAL = "minimal"  # greenswarm/busybox only
    NONE = "none"


@dataclass(frozen=True)
class NodeRecord:
    """One lab node: every name and path derived from its index, plus its size and ids."""

    index: int
    name: str
    address: str
    netns: str
    veth_host: str
    socket: str
    run_dir: str
    pidfile: str
    exec_root: str
    data_root: str
    uts_file: str
    log_file: str
    cgroup_parent: str
    cpus: float
    memory_bytes: int
    pid: int | None = None
    swarm_node_id: str | None = None
    cgroup_dirs: dict[str, str] = field(default_factory=dict)
    manager: bool = False  # a Swarm manager as well as a worker (`up --managers`)

    @property
    def socket_url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def cpu_shares(self) -> int:
        return round(self.cpus * 1024)

    def engine_labels(self) -> dict[str, str]:
        """Fixed labels of the node's engine (``dockerd --label``): who it is, where it listens."""
        return {
            LABEL_NODE: self.name,
            LABEL_SOCKET: self.socket,
            LABEL_ADDRESS: self.address,
            LABEL_CGROUP: self.cgroup_parent,
        }

    def labels(self) -> dict[str, str]:
        """Labels of the Swarm node: the engine's plus its capacity (updated on resize)."""
        return {
            **self.engine_labels(),
            LABEL_ROLE: "manager" if self.manager else "worker",
            CAPACITY_CPU_LABEL: str(self.cpu_shares),
            CAPACITY_MEMORY_LABEL: str(self.memory_bytes),
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeRecord:
        try:
            return cls(**data)
        except TypeError as exc:
            raise LabError(f"state file: bad node record: {exc}") from exc


def node_record(settings: LabSettings, index: int, cluster: int = 1) -> NodeRecord:
    """The node of 1-based ``index`` of ``cluster`` with the size of ``settings``.

    Cluster 1's nodes are ``gs-node1``... on ``gsbr0`` (veth ``gsbr0v1``); cluster k's are
    ``gs-node-c<k>-1``... on its own bridge (veth ``gsbr0c<k>v1``).
    """
    return _record(settings, f"{settings.cluster_node_prefix(cluster)}{index}", index, cluster)


def manager_record(settings: LabSettings, cluster: int) -> NodeRecord:
    """The Swarm manager engine of cluster ``cluster`` >= 2: a node of index 0 named
    ``gs-node-c<k>-mgr`` (cluster 1's manager is the machine's main engine)."""
    if cluster < 2:
        raise LabError("cluster 1's manager is the main engine, not a lab node")
    return _record(settings, f"{settings.cluster_node_prefix(cluster)}mgr", 0, cluster)


def _record(settings: LabSettings, name: str, index: int, cluster: int) -> NodeRecord:
    veth = (f"{settings.bridge[:6]}v{index}" if cluster == 1
            else f"{settings.bridge[:5]}c{cluster}v{index}")
    paths = settings.paths
    run_dir = paths.run_dir / name
    return NodeRecord(
        index=index,
        name=name,
        address=settings.node_address(index, cluster),
        netns=name,
        veth_host=veth,
        socket=str(paths.run_dir / f"{name}.sock"),
        run_dir=str(run_dir),
        pidfile=str(run_dir / "dockerd.pid"),
        exec_root=str(run_dir / "exec"),
        data_root=str(paths.nodes_cache / name / "data-root"),
        uts_file=str(run_dir / "uts"),
        log_file=str(paths.node_logs / f"{name}.log"),
        cgroup_parent=f"/{settings.cgroup_name}/{name}",
        cpus=settings.node_cpus,
        memory_bytes=settings.node_memory_bytes,
        manager=settings.is_manager(index, cluster),
    )


@dataclass(frozen=True)
class ClusterRecord:
    """A further Swarm of the lab (cluster 2, 3...): its bridge and subnet, its manager engine
    (a lab node of its own, index 0) and its worker nodes."""

    index: int
    bridge: str
    subnet: str
    gateway: str
    manager: NodeRecord
    nodes: tuple[NodeRecord, ...] = ()
    swarm_id: str | None = None
    bridge_created_by_lab: bool = False

    @property
    def name(self) -> str:
        return f"c{self.index}"

    def node(self, name: str) -> NodeRecord | None:
        return next((n for n in self.nodes if n.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["manager"] = self.manager.to_dict()
        data["nodes"] = [n.to_dict() for n in self.nodes]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterRecord:
        values = dict(data)
        try:
            values["manager"] = NodeRecord.from_dict(data["manager"])
            values["nodes"] = tuple(NodeRecord.from_dict(n) for n in data.get("nodes", []))
            return cls(**values)
        except (KeyError, TypeError) as exc:
            raise LabError(f"state file: bad cluster record: {exc}") from exc


def cluster_record(settings: LabSettings, cluster: int) -> ClusterRecord:
    """Cluster ``cluster`` >= 2 as the settings want it (no nodes yet)."""
    net = settings.cluster_network(cluster)
    return ClusterRecord(index=cluster, bridge=settings.cluster_bridge(cluster), subnet=str(net),
                         gateway=settings.cluster_gateway(cluster),
                         manager=manager_record(settings, cluster))


@dataclass(frozen=True)
class LabState:
    """What the lab created, written after every step of `up` and read by `down`/`status`."""

    bridge: str
    subnet: str
    gateway: str
    cgroup_name: str
    cgroup_version: CgroupVersion
    main_socket: str
    main_engine_started_by_lab: bool = False
    main_engine_pid: int | None = None
    swarm_initialised_by_lab: bool = False
    gwbridge_created_by_lab: bool = False
    bridge_created_by_lab: bool = False
    forward_rule_added: bool = False
    nodes: tuple[NodeRecord, ...] = ()
    version: int = STATE_VERSION
    # Clusters 2.. (DESIGN 12); empty for the one-Swarm lab, whose files have no such keys.
    clusters: tuple[ClusterRecord, ...] = ()
    inter_cluster_latency_ms: float = 0.0
    latency: LatencyState = LatencyState.NONE
    ip_forward_enabled_by_lab: bool = False

    def node(self, name: str) -> NodeRecord | None:
        return next((n for n in self.nodes if n.name == name), None)

    def cluster(self, index: int) -> ClusterRecord | None:
        return next((c for c in self.clusters if c.index == index), None)

    def all_nodes(self) -> tuple[NodeRecord, ...]:
        """Every lab engine: cluster 1's nodes, then each further cluster's manager and nodes."""
        return self.nodes + tuple(n for c in self.clusters for n in (c.manager, *c.nodes))

    def swarms(self) -> list[dict[str, Any]]:
        """One entry per Swarm, cluster 1 first, in one shape (``swarms`` in the state file):
        what a greenswarm manager per cluster needs (its manager engine's socket and address,
        the bridge and the host's address on it, the worker nodes)."""
        def entry(index: int, socket: str, address: str, bridge: str, subnet: str,
                  gateway: str, nodes: tuple[NodeRecord, ...]) -> dict[str, Any]:
            return {
                "cluster": index, "name": f"c{index}", "manager_socket": socket,
                "manager_address": address, "bridge": bridge, "subnet": subnet,
                "gateway": gateway,
                "nodes": [{"name": n.name, "address": n.address, "socket": n.socket,
                           "swarm_node_id": n.swarm_node_id} for n in nodes],
            }

        first = entry(1, self.main_socket, self.gateway, self.bridge, self.subnet, self.gateway,
                      self.nodes)
        return [first] + [entry(c.index, c.manager.socket, c.manager.address, c.bridge,
                                c.subnet, c.gateway, c.nodes) for c in self.clusters]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cgroup_version"] = str(self.cgroup_version)
        data["nodes"] = [n.to_dict() for n in self.nodes]
        data["clusters"] = [c.to_dict() for c in self.clusters]
        data["latency"] = str(self.latency)
        data["swarms"] = self.swarms()  # derived, for readers; ignored when read back
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabState:
        if data.get("version") != STATE_VERSION:
            raise LabError(f"state file: unsupported version {data.get('version')!r}")
        values = dict(data)
        values.pop("swarms", None)
        values["nodes"] = tuple(NodeRecord.from_dict(n) for n in data.get("nodes", []))
        values["clusters"] = tuple(ClusterRecord.from_dict(c) for c in data.get("clusters", []))
        try:
            values["cgroup_version"] = CgroupVersion(data["cgroup_version"])
            values["latency"] = LatencyState(data.get("latency", LatencyState.NONE))
            return cls(**values)
        except (KeyError, TypeError, ValueError) as exc:
            raise LabError(f"state file: {exc}") from exc


def empty_state(settings: LabSettings, cgroup_version: CgroupVersion) -> LabState:
    return LabState(
        bridge=settings.bridge,
        subnet=settings.subnet,
        gateway=settings.gateway,
        cgroup_name=settings.cgroup_name,
        cgroup_version=cgroup_version,
        main_socket=str(settings.engine.main_socket),
    )


def node_path_dirs(node: NodeRecord) -> list[Path]:
    """Directories that must exist before a node's engine starts."""
    return [Path(node.run_dir), Path(node.exec_root), Path(node.data_root),
            Path(node.log_file).parent]
