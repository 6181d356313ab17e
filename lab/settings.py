"""Typed settings of the local lab (DESIGN 6); read from the environment at the edge only.

Everything the lab creates is named from these values, so ``down`` can find it again even when the
state file is gone.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from domain.errors import ValidationError
from domain.units import parse_memory

GIB = 1024**3
MAX_NODES = 50
MAX_CLUSTERS = 8
MAX_LATENCY_MS = 1000.0
MIN_NODE_MEMORY_BYTES = 64 * 1024**2
DEFAULT_MIRROR = "http://deb.debian.org/debian"
# Linux interface names are at most 15 characters; "<prefix><n>" must also be a hostname.
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,10}$")


@dataclass(frozen=True)
class LabPaths:
    """Where the lab keeps runtime files (tmpfs), caches (survive `down`) and logs."""

    run_dir: Path = Path("/run/greenswarm/lab")
    cache_dir: Path = Path("/var/cache/greenswarm")
    log_dir: Path = Path("/var/log/greenswarm")
    netns_dir: Path = Path("/var/run/netns")

    @property
    def state_file(self) -> Path:
        return self.run_dir / "state.json"

    @property
    def lock_file(self) -> Path:
        return self.run_dir.parent / "lab.lock"

    @property
    def main_pidfile(self) -> Path:
        """Pid file of a main engine that the lab started itself."""
        return self.run_dir.parent / "dockerd.pid"

    @property
    def main_log(self) -> Path:
        return self.log_dir / "dockerd.log"

    @property
    def delay_pidfile(self) -> Path:
        """Pid file of the delay between clusters where there is no netem (lab/delay.py)."""
        return self.run_dir / "delay.pid"

    @property
    def delay_log(self) -> Path:
        return self.log_dir / "lab" / "delay.log"

    @property
    def nodes_cache(self) -> Path:
        """Node data roots: a cache of loaded images, kept by `down`, removed by `down --purge`."""
        return self.cache_dir / "lab"

    @property
    def node_logs(self) -> Path:
        return self.log_dir / "lab"

    @property
    def rootfs_cache(self) -> Path:
        return self.cache_dir / "rootfs"

    @property
    def debs_cache(self) -> Path:
        return self.cache_dir / "debs"

    @property
    def wheels_cache(self) -> Path:
        return self.cache_dir / "wheels"

    @property
    def build_dir(self) -> Path:
        return self.cache_dir / "build"


@dataclass(frozen=True)
class EngineSettings:
    """The Docker binaries and the main engine (the Swarm manager)."""

    dockerd: str = "/usr/sbin/dockerd"
    docker_cli: str = "/usr/bin/docker"
    main_socket: Path = Path("/var/run/docker.sock")
    # Pid file of a main engine started by someone else: if its process lives, we wait for it.
    system_pidfile: Path = Path("/var/run/docker.pid")
    node_shutdown_timeout_s: int = 5
    # Only for a main engine the lab starts itself; None keeps dockerd's defaults.
    main_data_root: Path | None = None
    main_exec_root: Path | None = None

    @property
    def main_url(self) -> str:
        return f"unix://{self.main_socket}"


@dataclass(frozen=True)
class Timeouts:
    """Every wait of the lab is bounded by one of these (seconds)."""

    command_s: float = 120.0
    engine_start_s: float = 60.0
    engine_stop_s: float = 30.0
    node_ready_s: float = 90.0
    api_s: float = 30.0
    debootstrap_s: float = 1800.0
    build_s: float = 1800.0
    load_s: float = 1200.0
    poll_interval_s: float = 0.25


@dataclass(frozen=True)
class LabSettings:
    """What the lab should look like; `up` reconciles the machine towards it."""

    nodes: int = 3
    # Nodes 1..managers of cluster 1 are Swarm managers too (DESIGN 13: raft's quorum), besides
    # the main engine; 0 (the default) keeps every node a worker.
    managers: int = 0
    node_cpus: float = 1.0
    node_memory_bytes: int = 2 * GIB
    bridge: str = "gsbr0"
    subnet: str = "10.123.0.0/24"
    first_node_host: int = 10  # node i (1-based) gets host number first_node_host + i
    node_prefix: str = "gs-node"
    cgroup_name: str = "greenswarm-lab"
    # Several Swarms (DESIGN 12): cluster 1 is the lab above; cluster k >= 2 gets its own bridge,
    # subnet (``cluster_subnets[k - 2]``, else the (k-1)-th block of ``subnet``'s size after it),
    # manager engine and ``nodes`` workers. Traffic between clusters is delayed this long each way.
    clusters: int = 1
    cluster_subnets: tuple[str, ...] = ()
    inter_cluster_latency_ms: float = 10.0
    delay_queue: int = 123  # the NFQUEUE number of lab/delay.py (kernels without netem)
    suite: str = "bookworm"
    mirror: str = DEFAULT_MIRROR
    paths: LabPaths = field(default_factory=LabPaths)
    engine: EngineSettings = field(default_factory=EngineSettings)
    timeouts: Timeouts = field(default_factory=Timeouts)

    def __post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise ValidationError("nodes", f"must be between 1 and {MAX_NODES}")
        if not (math.isfinite(self.node_cpus) and 0.01 <= self.node_cpus <= 256):
            raise ValidationError("node_cpus", "must be a number of cores between 0.01 and 256")
        if self.node_memory_bytes < MIN_NODE_MEMORY_BYTES:
            raise ValidationError("node_memory", "must be at least 64m")
        if not _NAME_RE.match(self.node_prefix) or not _NAME_RE.match(self.bridge):
            raise ValidationError("node_prefix", "names must be short lower-case identifiers")
        if not 0 <= self.managers <= self.nodes:
            raise ValidationError("managers", f"must be between 0 and the number of nodes "
                                              f"({self.nodes})")
        network = self.network
        if self.first_node_host + self.nodes >= network.num_addresses - 1:
            raise ValidationError("nodes", f"too many nodes for subnet {self.subnet}")
        self._check_clusters()

    def _check_clusters(self) -> None:
        if not 1 <= self.clusters <= MAX_CLUSTERS:
            raise ValidationError("clusters", f"must be between 1 and {MAX_CLUSTERS}")
        if not (math.isfinite(self.inter_cluster_latency_ms)
                and 0 <= self.inter_cluster_latency_ms <= MAX_LATENCY_MS):
            raise ValidationError("inter_cluster_latency_ms",
                                  f"must be between 0 and {MAX_LATENCY_MS:g} ms")
        networks: list[ipaddress.IPv4Network] = []
        for cluster in range(1, self.clusters + 1):
            net = self.cluster_network(cluster)
            if cluster > 1 and not net.is_private:
                raise ValidationError("cluster_subnets", f"{net} is not a private subnet")
            if self.first_node_host + self.nodes >= net.num_addresses - 1:
                raise ValidationError("nodes", f"too many nodes for subnet {net}")
            if any(net.overlaps(other) for other in networks):
                raise ValidationError("cluster_subnets", f"{net} overlaps another cluster's")
            networks.append(net)

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet, strict=True)

    @property
    def gateway(self) -> str:
        """The bridge's address on the host: the main engine advertises the swarm here."""
        return str(self.network.network_address + 1)

    def node_address(self, index: int, cluster: int = 1) -> str:
        """Node ``index`` (1-based) of ``cluster``; index 0 is a further cluster's manager."""
        net = self.cluster_network(cluster)
        return str(net.network_address + self.first_node_host + index)

    def cluster_network(self, cluster: int) -> ipaddress.IPv4Network:
        """Cluster 1's subnet is ``subnet``; cluster k's the next free blocks of the same size."""
        if cluster == 1:
            return self.network
        if cluster - 2 < len(self.cluster_subnets):
            try:
                return ipaddress.IPv4Network(self.cluster_subnets[cluster - 2], strict=True)
            except ValueError as exc:
                raise ValidationError("cluster_subnets", str(exc)) from exc
        base = self.network
        start = int(base.network_address) + (cluster - 1) * base.num_addresses
        if start + base.num_addresses > 2**32:
            raise ValidationError("clusters", f"no room after {self.subnet} for cluster {cluster}")
        return ipaddress.IPv4Network((start, base.prefixlen))

    def cluster_gateway(self, cluster: int) -> str:
        """The host's address on the cluster's bridge."""
        return str(self.cluster_network(cluster).network_address + 1)

    def cluster_bridge(self, cluster: int) -> str:
        """``gsbr0`` for cluster 1, then ``gsbr1``, ``gsbr2``...: the bridge's trailing number
        (0 when it has none) plus cluster - 1."""
        if cluster == 1:
            return self.bridge
        stem = self.bridge.rstrip("0123456789")
        number = int(self.bridge[len(stem):] or "0")
        return f"{stem}{number + cluster - 1}"

    def cluster_node_prefix(self, cluster: int) -> str:
        """Names of cluster k's nodes: ``gs-node-c2-1``...; cluster 1 keeps ``gs-node1``."""
        return self.node_prefix if cluster == 1 else f"{self.node_prefix}-c{cluster}-"

    def with_clusters(self, clusters: int, latency_ms: float) -> LabSettings:
        return replace(self, clusters=clusters, inter_cluster_latency_ms=latency_ms)

    def with_size(self, nodes: int, cpus: float, memory_bytes: int) -> LabSettings:
        return replace(self, nodes=nodes, node_cpus=cpus, node_memory_bytes=memory_bytes)

    def with_managers(self, managers: int) -> LabSettings:
        return replace(self, managers=managers)

    def is_manager(self, index: int, cluster: int = 1) -> bool:
        """Whether node ``index`` of ``cluster`` is to be a Swarm manager (cluster 1 only)."""
        return cluster == 1 and 1 <= index <= self.managers


def parse_cpus(value: str) -> float:
    try:
        cpus = float(value)
    except ValueError as exc:
        raise ValidationError("node_cpus", f"cannot read {value!r} as a number of cores") from exc
    return cpus


def parse_node_memory(value: str) -> int:
    return parse_memory(value, "node_memory")


def mirror_from_apt_sources(texts: Mapping[str, str], suite: str) -> str | None:
    """The Debian mirror apt uses for ``suite``, from sources.list (one-line or deb822) texts."""
    for text in texts.values():
        found = _mirror_one_line(text, suite) or _mirror_deb822(text, suite)
        if found:
            return found
    return None


def _mirror_one_line(text: str, suite: str) -> str | None:
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 3 and words[0] == "deb":
            rest = [w for w in words[1:] if not w.startswith("[")]
            if len(rest) >= 2 and rest[1] == suite and rest[0].startswith("http"):
                return rest[0].rstrip("/")
    return None


def _mirror_deb822(text: str, suite: str) -> str | None:
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if ":" in line and not line.lstrip().startswith("#"):
                key, value = line.split(":", 1)
                fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if suite not in fields.get("suites", "").split():
            continue
        for uri in fields.get("uris", "").split():
            if uri.startswith("http"):
                return uri.rstrip("/")
    return None


def read_apt_sources(root: Path = Path("/etc/apt")) -> dict[str, str]:
    """Texts of apt's enabled source files (I/O edge)."""
    files = [root / "sources.list"]
    sources_d = root / "sources.list.d"
    if sources_d.is_dir():
        files += sorted(p for p in sources_d.iterdir() if p.suffix in (".list", ".sources"))
    texts: dict[str, str] = {}
    for path in files:
        try:
            texts[str(path)] = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return texts


def settings_from_env(env: Mapping[str, str] | None = None) -> LabSettings:
    """Settings from ``GREENSWARM_*`` variables; unset ones keep their defaults."""
    env = os.environ if env is None else env
    paths = LabPaths(
        run_dir=Path(env.get("GREENSWARM_LAB_RUN_DIR", str(LabPaths.run_dir))),
        cache_dir=Path(env.get("GREENSWARM_CACHE_DIR", str(LabPaths.cache_dir))),
        log_dir=Path(env.get("GREENSWARM_LOG_DIR", str(LabPaths.log_dir))),
    )
    engine = EngineSettings(
        dockerd=env.get("GREENSWARM_DOCKERD", EngineSettings.dockerd),
        docker_cli=env.get("GREENSWARM_DOCKER_CLI", EngineSettings.docker_cli),
        main_socket=Path(env.get("GREENSWARM_MAIN_SOCKET", str(EngineSettings.main_socket))),
        system_pidfile=Path(env.get("GREENSWARM_MAIN_SYSTEM_PIDFILE",
                                    str(EngineSettings.system_pidfile))),
        main_data_root=_optional_path(env.get("GREENSWARM_MAIN_DATA_ROOT")),
        main_exec_root=_optional_path(env.get("GREENSWARM_MAIN_EXEC_ROOT")),
    )
    suite = env.get("GREENSWARM_DEBIAN_SUITE", LabSettings.suite)
    mirror = env.get("GREENSWARM_DEBIAN_MIRROR") or (
        mirror_from_apt_sources(read_apt_sources(), suite) or DEFAULT_MIRROR
    )
    return LabSettings(
        bridge=env.get("GREENSWARM_LAB_BRIDGE", LabSettings.bridge),
        subnet=env.get("GREENSWARM_LAB_SUBNET", LabSettings.subnet),
        node_prefix=env.get("GREENSWARM_LAB_NODE_PREFIX", LabSettings.node_prefix),
        cgroup_name=env.get("GREENSWARM_LAB_CGROUP", LabSettings.cgroup_name),
        cluster_subnets=tuple(s.strip() for s in
                              env.get("GREENSWARM_LAB_CLUSTER_SUBNETS", "").split(",")
                              if s.strip()),
        suite=suite, mirror=mirror, paths=paths, engine=engine,
    )


def _optional_path(value: str | None) -> Path | None:
    return Path(value) if value else None
