"""`lab up` and `lab images`: the recipe of DESIGN 6, idempotent, recorded step by step.

`up` reconciles the machine with the settings (nodes added, resized or removed) and writes the
state file after every step, so an interrupted `up` can be completed by another `up` or undone
by `down` (:mod:`lab.down`, whose teardown of a node `up` uses to remove one).

With ``clusters`` > 1 (DESIGN 12), cluster 1 is the lab as above and every further cluster gets
its own bridge and subnet, a manager engine (a lab node of index 0 that runs `swarm init` on its
own address and is drained) and its own worker nodes; the host routes between the bridges and
delays what crosses from one cluster to another (:func:`lab.network.ensure_delay`, or
:mod:`lab.delay` where the kernel has no netem).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lab import catalog, cgroups, daemons, engine, images, mounts, network
from lab.cgroups import CgroupLayout
from lab.down import GWBRIDGE, is_ours, stop_leftover_processes, teardown_nodes
from lab.errors import LabError, LabUnavailableError
from lab.model import (
    ClusterRecord,
    ImageSet,
    LabState,
    LatencyState,
    NodeRecord,
    SwarmState,
    empty_state,
    node_path_dirs,
)
from lab.plan import check_compatible, other_subnets, plan_clusters, plan_nodes
from lab.proc import wait_until
from lab.settings import LabSettings
from lab.store import lab_lock, load_state, require_root, save_state

Report = Callable[[str], None]


# ------------------------------------------------------------------------------------------
# up
# ------------------------------------------------------------------------------------------

@dataclass
class _Up:
    """One run of `lab up`: the settings, what it found, and the state it keeps writing."""

    settings: LabSettings
    report: Report
    layout: CgroupLayout
    state: LabState
    main: Any = None
    fresh: set[str] = field(default_factory=set)
    restarted: set[str] = field(default_factory=set)  # dead engines started on their old state
    changed: bool = False

    def change(self, line: str) -> None:
        """Report a change made to the machine."""
        self.changed = True
        self.report(line)

    def save(self, **changes: Any) -> None:
        self.state = replace(self.state, **changes)
        save_state(self.settings.paths, self.state)

    def set_node(self, node: NodeRecord) -> None:
        others = [n for n in self.state.nodes if n.name != node.name]
        self.save(nodes=tuple(sorted([*others, node], key=lambda n: n.index)))

    def set_cluster(self, cluster: ClusterRecord) -> None:
        others = [c for c in self.state.clusters if c.index != cluster.index]
        self.save(clusters=tuple(sorted([*others, cluster], key=lambda c: c.index)))

    def cluster(self, index: int) -> ClusterRecord:
        found = self.state.cluster(index)
        if found is None:
            raise LabError(f"cluster {index} is not in the state file")
        return found

    def set_cluster_node(self, index: int, node: NodeRecord) -> None:
        cluster = self.cluster(index)
        if node.index == 0:
            self.set_cluster(replace(cluster, manager=node))
            return
        others = [n for n in cluster.nodes if n.name != node.name]
        self.set_cluster(replace(cluster, nodes=tuple(sorted([*others, node],
                                                             key=lambda n: n.index))))


def up(settings: LabSettings, image_set: ImageSet, report: Report) -> LabState:
    """Bring the lab to ``settings``: main engine, bridge, swarm, nodes, images."""
    require_root()
    with lab_lock(settings.paths):
        layout = cgroups.read_layout()
        state = load_state(settings.paths)
        if state is None:
            state = empty_state(settings, layout.version)
        else:
            check_compatible(settings, state)
        run = _Up(settings, report, layout, state)
        _ensure_main_engine(run)
        engine.check_manager(run.main, settings.gateway)  # refuse before creating anything
        _make_dirs(settings)
        _ensure_bridge(run)
        _ensure_swarm(run)
        plan = plan_nodes(settings, run.state.nodes)
        for node in plan.remove:
            run.change(f"lab: removing {node.name} (the lab now has {settings.nodes} node(s))")
            problems = teardown_nodes(settings, layout, run.main, [node], report)
            if problems:
                raise LabError(f"could not remove {node.name}: " + "; ".join(problems))
            run.save(nodes=tuple(n for n in run.state.nodes if n.name != node.name))
        nodes = [_ensure_node(run, node) for node in plan.desired]
        _wait_engines(settings, nodes)
        nodes = _join_nodes(run, nodes)
        _wait_ready(run, run.main, nodes)
        _ensure_roles(run, nodes)
        _forget_stale_swarm_nodes(run, run.main, nodes)
        for cluster in plan_clusters(settings, run.state.clusters):
            nodes += _ensure_cluster(run, cluster)
        _ensure_routing(run)
        _ensure_latency(run)
        # each further cluster's manager engine too: its greenswarm manager runs there
        _ensure_images(run, [*nodes, *(c.manager for c in run.state.clusters)], image_set)
        if not run.changed:
            report("lab: already up, nothing changed")
        return run.state


def _make_dirs(settings: LabSettings) -> None:
    paths = settings.paths
    for directory in (paths.run_dir, paths.nodes_cache, paths.node_logs, paths.log_dir):
        directory.mkdir(parents=True, exist_ok=True)


def _ensure_main_engine(run: _Up) -> None:
    main = daemons.ensure_main_engine(run.settings)
    if main.started_by_lab and (main.pid, True) != (run.state.main_engine_pid,
                                                     run.state.main_engine_started_by_lab):
        run.change(f"lab: started the main Docker engine (pid {main.pid}, log "
                   f"{run.settings.paths.main_log})")
        run.save(main_engine_started_by_lab=True, main_engine_pid=main.pid)
    run.main = engine.connect(run.settings.engine.main_url, run.settings.timeouts.api_s)


def _ensure_bridge(run: _Up) -> None:
    settings = run.settings
    cidr = f"{settings.gateway}/{settings.network.prefixlen}"
    created = network.ensure_bridge(settings.bridge, cidr)
    rule = network.ensure_forward_rule(settings.bridge)
    if created:
        run.change(f"lab: bridge {settings.bridge} {cidr}")
    run.save(bridge_created_by_lab=run.state.bridge_created_by_lab or created,
             forward_rule_added=run.state.forward_rule_added or rule)


def _ensure_swarm(run: _Up) -> None:
    gw_existed = engine.network_exists(run.main, GWBRIDGE)
    if engine.ensure_manager(run.main, run.settings.gateway):
        run.change(f"lab: swarm initialised on the main engine, advertised on "
                   f"{run.settings.gateway}")
        run.save(swarm_initialised_by_lab=True, gwbridge_created_by_lab=not gw_existed)


def _ensure_node(run: _Up, wanted: NodeRecord) -> NodeRecord:
    """A node of cluster 1 (:func:`_ensure_engine`), recorded in the state."""
    node = _ensure_engine(run, wanted, run.settings.bridge, run.state.node(wanted.name))
    run.set_node(node)
    return node


def _ensure_engine(run: _Up, wanted: NodeRecord, bridge: str,
                   old: NodeRecord | None) -> NodeRecord:
    """Namespace, veth, cgroup with the node's size, UTS namespace, engine (started if down)."""
    settings = run.settings
    network.ensure_node_network(wanted, bridge, settings.network.prefixlen,
                                settings.paths.netns_dir)
    dirs = cgroups.ensure_node_cgroup(run.layout, wanted.cgroup_parent, wanted.cpus,
                                      wanted.memory_bytes)
    node = replace(wanted, cgroup_dirs=dirs)
    if old is not None and (old.cpus, old.memory_bytes) != (node.cpus, node.memory_bytes):
        run.change(f"lab: {node.name} resized to {node.cpus:g} cpu, {node.memory_bytes} bytes")
    daemons.ensure_uts_namespace(node)
    pid = daemons.node_daemon_pid(node)
    if pid is None and _can_restart(node):
        _prepare_start(run, node, keep_swarm=True)
        pid = daemons.start_node_daemon(settings, node)
        run.restarted.add(node.name)
        run.change(f"lab: {node.name} engine was dead: restarted on its old data root (pid "
                   f"{pid}), to rejoin as Swarm node {node.swarm_node_id}")
    elif pid is None:
        _prepare_start(run, node, keep_swarm=False)
        pid = daemons.start_node_daemon(settings, node)
        run.fresh.add(node.name)
        run.change(f"lab: {node.name} engine started (pid {pid}, {node.address}, "
                   f"{node.cpus:g} cpu, {node.memory_bytes // 2**20} MiB)")
    return replace(node, pid=pid)


def _can_restart(node: NodeRecord) -> bool:
    """A node of this lab whose engine died (the state file knows its Swarm id) and whose data
    root still holds its swarm state: started on it, it rejoins as the same Swarm node."""
    return bool(node.swarm_node_id) and (Path(node.data_root) / "swarm").is_dir()


def _prepare_start(run: _Up, node: NodeRecord, *, keep_swarm: bool) -> None:
    """Before an engine starts: nothing left of a dead predecessor (processes, mounts), its
    directories exist; without ``keep_swarm``, no old swarm state.

    Dropping ``<data-root>/swarm`` makes the node join as a new swarm node; `down` removed the
    old one from the manager's list. Keeping it (a dead engine restarted) keeps its node id.
    """
    stop_leftover_processes(run.settings, run.layout, node)
    for directory in node_path_dirs(node):
        directory.mkdir(parents=True, exist_ok=True)
    mounts.unmount_all([Path(node.exec_root), Path(node.data_root)])
    swarm_dir = Path(node.data_root) / "swarm"
    if swarm_dir.is_dir() and not keep_swarm:
        shutil.rmtree(swarm_dir)


def _wait_engines(settings: LabSettings, nodes: Sequence[NodeRecord]) -> None:
    for node in nodes:
        try:
            engine.wait_engine(node.socket_url, settings.timeouts.engine_start_s,
                               f"{node.name}'s engine on {node.socket}")
        except LabUnavailableError as exc:
            raise LabUnavailableError(f"{exc}; see {node.log_file}") from exc


def _join_nodes(run: _Up, nodes: Sequence[NodeRecord]) -> list[NodeRecord]:
    return _join(run, run.main, run.settings.gateway, nodes, run.set_node)


def _join(run: _Up, manager: Any, manager_address: str, nodes: Sequence[NodeRecord],
          record: Callable[[NodeRecord], None]) -> list[NodeRecord]:
    """Join ``nodes`` to the swarm of ``manager`` (advertised on ``manager_address``)."""
    settings = run.settings
    token = engine.worker_token(manager)
    manager_ids = {n.node_id for n in engine.manager_nodes(manager)}
    joined: list[NodeRecord] = []
    for node in nodes:
        node_cli = engine.connect(node.socket_url, settings.timeouts.api_s)
        if node.name in run.fresh:
            engine.remove_all_containers(node_cli)
        if node.name in run.restarted:  # it reconnects on its own: not a join to redo
            engine.wait_swarm_settled(node_cli, settings.timeouts.node_ready_s)
        node_id, now = engine.ensure_joined(node_cli, manager_ids, manager_address, token,
                                            node.address)
        engine.label_node(manager, node_id, node.labels())
        if node.name in run.restarted and node_id == node.swarm_node_id:
            run.change(f"lab: {node.name} is back in the swarm under its own id {node_id}")
        elif node.name in run.restarted:
            run.change(f"lab: {node.name} could not rejoin as {node.swarm_node_id}; it "
                       f"joined the swarm of {manager_address} as {node_id}")
        elif now:
            run.change(f"lab: {node.name} joined the swarm of {manager_address} as {node_id}")
        node = replace(node, swarm_node_id=node_id)
        record(node)
        joined.append(node)
    return joined


def _wait_ready(run: _Up, manager: Any, nodes: Sequence[NodeRecord]) -> None:
    ids = {n.swarm_node_id for n in nodes if n.swarm_node_id}

    def all_ready() -> bool | None:
        states = {n.node_id: n.state for n in engine.manager_nodes(manager)}
        return True if all(states.get(i) is SwarmState.READY for i in ids) else None

    wait_until(all_ready, what="every lab node to be Ready in the swarm",
               timeout_s=run.settings.timeouts.node_ready_s, interval_s=0.5)


def _ensure_roles(run: _Up, nodes: Sequence[NodeRecord]) -> None:
    """Nodes 1..managers Swarm managers (promoted one at a time, each reachable by raft before
    the next), the others workers (DESIGN 13: a Swarm that survives a manager node's loss)."""
    for node in nodes:
        node_id = node.swarm_node_id or ""
        if not engine.set_role(run.main, node_id, node.manager):
            continue
        if node.manager:
            wait_until(_reachable(run.main, node_id),
                       what=f"{node.name} to be a reachable Swarm manager",
                       timeout_s=run.settings.timeouts.node_ready_s, interval_s=0.5)
            run.change(f"lab: {node.name} is a Swarm manager")
        else:
            run.change(f"lab: {node.name} is a Swarm worker again")


def _reachable(main: Any, node_id: str) -> Callable[[], bool | None]:
    return lambda: True if engine.manager_reachable(main, node_id) else None


def _forget_stale_swarm_nodes(run: _Up, manager: Any, nodes: Sequence[NodeRecord]) -> None:
    """Remove swarm nodes of earlier incarnations of the lab's nodes (down, replaced)."""
    current = {n.swarm_node_id for n in nodes}
    for swarm_node in engine.manager_nodes(manager):
        if (swarm_node.node_id not in current and is_ours(swarm_node, run.settings)
                and swarm_node.state is not SwarmState.READY):
            engine.remove_node(manager, swarm_node.node_id)
            run.change(f"lab: removed stale swarm node {swarm_node.node_id} "
                       f"({swarm_node.hostname})")


def _ensure_cluster(run: _Up, cluster: ClusterRecord) -> list[NodeRecord]:
    """Cluster k >= 2: bridge, manager engine with its own swarm, worker nodes; the workers."""
    settings, k = run.settings, cluster.index
    prefixlen = settings.cluster_network(k).prefixlen
    cidr = f"{cluster.gateway}/{prefixlen}"
    created = network.ensure_bridge(cluster.bridge, cidr)
    rule = network.ensure_forward_rule(cluster.bridge)
    if created:
        run.change(f"lab: cluster {k}: bridge {cluster.bridge} {cidr}")
    run.set_cluster(replace(cluster, bridge_created_by_lab=cluster.bridge_created_by_lab
                            or created))
    run.save(forward_rule_added=run.state.forward_rule_added or rule)

    wanted = replace(cluster.manager, cpus=settings.node_cpus,
                     memory_bytes=settings.node_memory_bytes)
    manager = _ensure_engine(run, wanted, cluster.bridge, cluster.manager)
    run.set_cluster_node(k, manager)
    _wait_engines(settings, [manager])
    manager_cli = engine.connect(manager.socket_url, settings.timeouts.api_s)
    if manager.name in run.fresh:
        engine.remove_all_containers(manager_cli)
    if engine.ensure_manager(manager_cli, manager.address):
        run.change(f"lab: cluster {k}: swarm initialised on {manager.name}, advertised on "
                   f"{manager.address}")
    manager = replace(manager, swarm_node_id=engine.swarm_info(manager_cli).node_id)
    engine.drain_node(manager_cli, manager.swarm_node_id or "")
    run.set_cluster(replace(run.cluster(k), manager=manager,
                            swarm_id=engine.swarm_id(manager_cli)))

    plan = plan_nodes(settings, run.cluster(k).nodes, k)
    for node in plan.remove:
        run.change(f"lab: removing {node.name} (cluster {k} now has {settings.nodes} node(s))")
        problems = teardown_nodes(settings, run.layout, manager_cli, [node], run.report)
        if problems:
            raise LabError(f"could not remove {node.name}: " + "; ".join(problems))
        current = run.cluster(k)
        run.set_cluster(replace(current, nodes=tuple(n for n in current.nodes
                                                     if n.name != node.name)))
    nodes: list[NodeRecord] = []
    for node in plan.desired:
        node = _ensure_engine(run, node, cluster.bridge, run.cluster(k).node(node.name))
        run.set_cluster_node(k, node)
        nodes.append(node)
    _wait_engines(settings, nodes)
    nodes = _join(run, manager_cli, manager.address, nodes,
                  lambda node: run.set_cluster_node(k, node))
    _wait_ready(run, manager_cli, nodes)
    _forget_stale_swarm_nodes(run, manager_cli, [manager, *nodes])
    return nodes


def _ensure_routing(run: _Up) -> None:
    """Several clusters: the host forwards between their bridges, every namespace routes the
    other clusters' subnets through its own bridge's gateway."""
    settings = run.settings
    if settings.clusters < 2:
        return
    if network.ensure_ip_forward():
        run.change("lab: IPv4 forwarding turned on (the clusters route through this host)")
        run.save(ip_forward_enabled_by_lab=True)
    bridges = [settings.cluster_bridge(k) for k in range(1, settings.clusters + 1)]
    added = [network.ensure_forward_rule(a, b) for a in bridges for b in bridges if a != b]
    if any(added):
        run.change(f"lab: forwarding between {', '.join(bridges)}")
        run.save(forward_rule_added=True)
    members = [(1, n) for n in run.state.nodes] + [
        (c.index, n) for c in run.state.clusters for n in (c.manager, *c.nodes)]
    for k, node in members:
        network.ensure_routes(node, other_subnets(settings, k), settings.cluster_gateway(k))


def _ensure_latency(run: _Up) -> None:
    """The delay between clusters: netem on every cluster bridge for packets from the other
    clusters; where the kernel has no netem, the lab's userspace queue (lab/delay.py) on the
    packets routed between cluster bridges. Nothing for one cluster."""
    settings = run.settings
    if settings.clusters < 2:
        return
    delay_ms = settings.inter_cluster_latency_ms
    bridges = [settings.cluster_bridge(k) for k in range(1, settings.clusters + 1)]
    results = {network.ensure_delay(bridge, other_subnets(settings, k), delay_ms)
               for k, bridge in enumerate(bridges, start=1)}
    latency = LatencyState.NETEM if LatencyState.NETEM in results else LatencyState.NONE
    if LatencyState.UNAVAILABLE in results:
        for bridge in bridges:
            network.remove_delay(bridge)
        latency = _queue_delay(run, bridges, delay_ms)
    elif run.state.latency is LatencyState.NFQUEUE:
        network.remove_forward_rules(tables=("mangle",))
        daemons.stop_delay_daemon(settings)
    if (latency, delay_ms) != (run.state.latency, run.state.inter_cluster_latency_ms):
        if latency is LatencyState.UNAVAILABLE:
            run.change("lab: WARNING: this kernel has neither netem nor NFQUEUE; the "
                       f"{delay_ms:g} ms between clusters is NOT applied")
        elif latency.delayed:
            run.change(f"lab: {delay_ms:g} ms each way between clusters ({latency})")
        run.save(latency=latency, inter_cluster_latency_ms=delay_ms)


def _queue_delay(run: _Up, bridges: Sequence[str], delay_ms: float) -> LatencyState:
    """The userspace queue: its daemon first, then the rules that feed it."""
    settings = run.settings
    try:
        if daemons.ensure_delay_daemon(settings, delay_ms):
            run.report(f"lab: no netem in this kernel: lab/delay.py holds packets between "
                       f"clusters (pid {daemons.delay_daemon_pid(settings)}, log "
                       f"{settings.paths.delay_log})")
        network.ensure_queue_rules(bridges, settings.delay_queue)
    except LabError as exc:
        run.report(f"lab: WARNING: the userspace delay failed: {exc}")
        network.remove_forward_rules(tables=("mangle",))
        daemons.stop_delay_daemon(settings)
        return LatencyState.UNAVAILABLE
    return LatencyState.NFQUEUE


def _ensure_images(run: _Up, nodes: Sequence[NodeRecord], image_set: ImageSet) -> None:
    if image_set is ImageSet.NONE:
        return
    build_images(run.settings, image_set, force=False, report=run.change, strict=False)
    available = [tag for tag in images.node_tags(run.settings, image_set)
                 if engine.image_id(run.main, tag) is not None]
    images.load_into_nodes(run.settings, nodes, available, run.change)


def build_images(settings: LabSettings, image_set: ImageSet, force: bool, report: Report,
                 strict: bool = True) -> list[images.ImageResult]:
    """Build the images. With ``strict`` off (`lab up`), a failing project image is only a
    warning and an existing one is not rebuilt for a changed source tree."""
    if image_set is ImageSet.NONE:
        return []
    builder = images.Builder(settings, report, force=force)
    results = [builder.busybox()]
    if image_set is ImageSet.MINIMAL:
        return results
    results += [builder.rootfs(spec) for spec in catalog.ROOTFS_IMAGES]
    results += [builder.workload(spec) for spec in catalog.WORKLOADS]
    try:
        results.append(builder.project(refresh=strict))
    except LabError as exc:
        if strict:
            raise
        report(f"lab: WARNING: {catalog.GREENSWARM_TAG} was not built: {exc}")
    builder.prune()
    return results


def images_command(settings: LabSettings, force: bool, report: Report,
                   image_set: ImageSet = ImageSet.ALL) -> list[images.ImageResult]:
    """`lab images`: build ``image_set`` on the main engine, then load it into running nodes."""
    require_root()
    with lab_lock(settings.paths):
        if not engine.ping(settings.engine.main_url):
            raise LabUnavailableError(
                f"the main Docker engine does not answer on {settings.engine.main_url}; start "
                "it or run `greenswarm lab up`")
        results = build_images(settings, image_set, force, report)
        state = load_state(settings.paths)
        nodes = [n for n in (state.all_nodes() if state else ()) if engine.ping(n.socket_url)]
        if nodes:
            images.load_into_nodes(settings, nodes, images.node_tags(settings, image_set),
                                   report)
        return results
