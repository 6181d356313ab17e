"""`lab down`: undo everything the state file (or the lab's naming conventions, when the file
is gone) points at, and report anything that could not be removed.

Also the teardown `up` shares: a node's removal (:func:`teardown_nodes`), what a dead engine left
running (:func:`stop_leftover_processes`), and which swarm nodes are the lab's (:func:`is_ours`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab import cgroups, daemons, engine, mounts, network, power_server
from lab.cgroups import CgroupLayout
from lab.errors import LabError, LabUnavailableError
from lab.model import LABEL_NODE, LabState, NodeRecord, manager_record, node_record
from lab.proc import daemon_pid, pids_mentioning, stop_pids, wait_until
from lab.settings import MAX_CLUSTERS, LabSettings
from lab.store import lab_lock, load_state, remove_state, require_root

Report = Callable[[str], None]
GWBRIDGE = "docker_gwbridge"
LEFTOVER_STOP_S = 3.0  # orphans of a dead engine get SIGTERM, then SIGKILL after this


@dataclass(frozen=True)
class DownSummary:
    removed: tuple[str, ...]
    leftovers: tuple[str, ...]


def down(settings: LabSettings, purge: bool, report: Report) -> DownSummary:
    """Remove everything the lab created; harmless when nothing is there.

    Best effort: every step runs; what could not be removed is listed in one error at the end.
    """
    require_root()
    with lab_lock(settings.paths):
        layout = cgroups.read_layout()
        state = load_state(settings.paths)
        nodes = _known_nodes(settings, state)
        main_url = settings.engine.main_url
        main = (engine.connect(main_url, settings.timeouts.api_s)
                if engine.ping(main_url) else None)
        removed: list[str] = [n.name for n in nodes]
        problems = teardown_nodes(settings, layout, main, nodes, report) if nodes else []

        def swarm() -> None:
            if main is not None:
                removed.extend(_down_swarm(settings, state, main, report))

        def main_engine() -> None:
            if daemons.stop_main_engine(settings):
                removed.append("main engine")
                report("lab: stopped the main Docker engine the lab had started")

        def state_file() -> None:
            if remove_state(settings.paths):
                removed.append("state file")

        def purge_caches() -> None:
            if purge:
                removed.extend(_purge(settings, report))

        def delay() -> None:
            if daemons.stop_delay_daemon(settings):
                removed.append("delay between clusters")

        def stop_power_server() -> None:
            if power_server.stop_server(settings):
                removed.append("power server")

        steps: list[Callable[[], object]] = [
            stop_power_server,
            swarm,
            delay,
            lambda: removed.extend(_down_network(settings, state)),
            lambda: _remove_lab_cgroups(layout, settings),
            main_engine,
            lambda: mounts.unmount_all([settings.paths.run_dir, settings.paths.nodes_cache]),
            state_file,
            lambda: _remove_run_dir(settings),
            purge_caches,
        ]
        problems += _run_steps(steps)
        leftovers = tuple(problems + leftovers_of(settings, layout))
        if leftovers:
            raise LabError("lab down left behind: " + "; ".join(leftovers))
        report("lab: down" if removed else "lab: nothing to take down")
        return DownSummary(tuple(removed), leftovers)


def _remove_lab_cgroups(layout: CgroupLayout, settings: LabSettings) -> None:
    busy = cgroups.remove_tree(layout, f"/{settings.cgroup_name}")
    if busy:
        raise LabUnavailableError(f"cgroups still busy: {', '.join(busy)}")


def _known_nodes(settings: LabSettings, state: LabState | None) -> list[NodeRecord]:
    """Engines from the state file (every cluster's nodes and managers) plus any the naming
    conventions reveal (netns, run dirs)."""
    known = {n.name: n for n in (state.all_nodes() if state else ())}
    names = set(network.list_netns(settings.paths.netns_dir))
    if settings.paths.run_dir.is_dir():
        names |= {p.name for p in settings.paths.run_dir.iterdir() if p.is_dir()}
    for name in sorted(names - known.keys()):
        record = record_of_name(settings, name)
        if record is not None:
            known[name] = record
    return sorted(known.values(), key=lambda n: n.index)


def record_of_name(settings: LabSettings, name: str) -> NodeRecord | None:
    """The lab engine a name stands for: ``gs-node<i>`` (cluster 1), ``gs-node-c<k>-<i>`` and
    ``gs-node-c<k>-mgr`` (cluster k); None for any other name."""
    suffix = name.removeprefix(settings.node_prefix)
    if name != suffix and suffix.isdigit():
        return node_record(settings, int(suffix))
    for cluster in range(2, MAX_CLUSTERS + 1):
        rest = name.removeprefix(settings.cluster_node_prefix(cluster))
        if rest == name:
            continue
        if rest == "mgr":
            return manager_record(settings, cluster)
        if rest.isdigit():
            return node_record(settings, int(rest), cluster)
    return None


def lab_bridges(settings: LabSettings, state: LabState | None) -> list[str]:
    """Every bridge the lab may have made: cluster 1's, the state's, and those of clusters
    2..MAX_CLUSTERS by their names (a lab whose state file is gone)."""
    names = [settings.cluster_bridge(k) for k in range(1, MAX_CLUSTERS + 1)]
    names += [c.bridge for c in (state.clusters if state else ())]
    return list(dict.fromkeys(names))


def teardown_nodes(settings: LabSettings, layout: CgroupLayout, main: Any,
                   nodes: Sequence[NodeRecord], report: Report) -> list[str]:
    """Leave the swarm, stop the engines (together), then clean each node's traces.

    Best effort: every step runs even when an earlier one failed; failures are returned.
    """
    problems: list[str] = []
    problems += _demote(settings, main, nodes)
    for node in nodes:
        _quiesce_node(settings, node)
    survivors = daemons.stop_daemons([Path(n.pidfile) for n in nodes],
                                     settings.timeouts.engine_stop_s)
    if survivors:
        problems.append(f"node engines did not stop: pids {survivors}")
    for node in nodes:
        failed = _run_steps(_node_cleanup_steps(settings, layout, main, node))
        problems += [f"{node.name}: {p}" for p in failed]
        report(f"lab: {node.name} removed" if not failed else f"lab: {node.name} partly removed")
    return problems


def _node_cleanup_steps(settings: LabSettings, layout: CgroupLayout, main: Any,
                        node: NodeRecord) -> list[Callable[[], object]]:
    return [
        lambda: stop_leftover_processes(settings, layout, node),
        lambda: _remove_swarm_entries(main, node),
        lambda: mounts.unmount_all([Path(node.run_dir), Path(node.data_root)]),
        lambda: network.delete_node_network(node, settings.paths.netns_dir),
        lambda: _remove_node_cgroups(layout, node),
        lambda: _remove_node_run_files(node),
    ]


def _run_steps(steps: Sequence[Callable[[], object]]) -> list[str]:
    problems: list[str] = []
    for step in steps:
        try:
            step()
        except LabError as exc:
            problems.append(str(exc))
    return problems


def _remove_node_cgroups(layout: CgroupLayout, node: NodeRecord) -> None:
    busy = cgroups.remove_tree(layout, node.cgroup_parent)
    if busy:
        raise LabUnavailableError(f"cgroups still busy: {', '.join(busy)}")


def _demote(settings: LabSettings, main: Any, nodes: Sequence[NodeRecord]) -> list[str]:
    """Swarm managers among ``nodes`` (`up --managers`) demoted first, one at a time, while
    raft still has its quorum: a manager that merely left would stay a missing raft member."""
    problems: list[str] = []
    for node in nodes:
        node_id = node.swarm_node_id
        if main is None or not node.manager or not node_id:
            continue
        try:
            engine.set_role(main, node_id, manager=False)
            wait_until(_left_raft(main, node_id), what=f"{node.name} to leave raft",
                       timeout_s=settings.timeouts.api_s, interval_s=0.5)
        except LabError as exc:
            problems.append(f"{node.name}: not demoted: {exc}")
    return problems


def _left_raft(main: Any, node_id: str) -> Callable[[], bool | None]:
    return lambda: None if engine.is_raft_member(main, node_id) else True


def _quiesce_node(settings: LabSettings, node: NodeRecord) -> None:
    """Remove the node's containers and leave the swarm, if its engine still answers."""
    if not engine.ping(node.socket_url):
        return
    node_cli = engine.connect(node.socket_url, settings.timeouts.api_s)
    try:
        engine.leave_swarm(node_cli)
        engine.remove_all_containers(node_cli)
    except LabUnavailableError:
        pass  # the engine is stopped next anyway


def stop_leftover_processes(settings: LabSettings, layout: CgroupLayout,
                            node: NodeRecord) -> None:
    """What a dead or killed engine leaves running: its containerd and container shims (their
    command lines name the node's own exec root) and container processes still in the node's
    cgroup subtree. All belong to the node by construction; they are stopped by pid."""
    pids = set(pids_mentioning(f"{node.exec_root}/"))
    pids |= cgroups.tree_pids(layout, node.cgroup_parent)
    if pids:
        stop_pids(sorted(pids), LEFTOVER_STOP_S)


def is_ours(swarm_node: engine.SwarmNode, settings: LabSettings) -> bool:
    return LABEL_NODE in swarm_node.engine_labels or LABEL_NODE in swarm_node.labels or (
        swarm_node.hostname.startswith(settings.node_prefix) and not swarm_node.is_manager)


def _remove_swarm_entries(main: Any, node: NodeRecord) -> None:
    if main is None:
        return
    ids = {node.swarm_node_id} if node.swarm_node_id else set()
    for swarm_node in engine.manager_nodes(main):
        if not swarm_node.is_manager and node.name in (
                swarm_node.labels.get(LABEL_NODE), swarm_node.engine_labels.get(LABEL_NODE),
                swarm_node.hostname):
            ids.add(swarm_node.node_id)
    for node_id in sorted(i for i in ids if i):
        engine.remove_node(main, node_id)


def _remove_node_run_files(node: NodeRecord) -> None:
    Path(node.socket).unlink(missing_ok=True)
    run_dir = Path(node.run_dir)
    if run_dir.is_dir() and not mounts.mounts_under([run_dir]):
        shutil.rmtree(run_dir)


def _down_swarm(settings: LabSettings, state: LabState | None, main: Any,
                report: Report) -> list[str]:
    removed: list[str] = []
    for swarm_node in engine.manager_nodes(main):
        if is_ours(swarm_node, settings):
            engine.remove_node(main, swarm_node.node_id)
    if state is not None and state.swarm_initialised_by_lab and engine.leave_swarm(main):
        removed.append("swarm")
        report("lab: the main engine left the swarm the lab had initialised")
        if state.gwbridge_created_by_lab and engine.remove_network(main, GWBRIDGE):
            removed.append(GWBRIDGE)
    return removed


def _down_network(settings: LabSettings, state: LabState | None) -> list[str]:
    """Forward rules, bridges (their delay qdiscs go with them), IPv4 forwarding if the lab
    turned it on."""
    removed: list[str] = []
    if network.remove_forward_rules():
        removed.append("forward rule")
    for bridge in lab_bridges(settings, state):
        if network.delete_link(bridge):
            removed.append(f"bridge {bridge}")
    if state is not None and state.ip_forward_enabled_by_lab:
        network.disable_ip_forward()
        removed.append("ip forwarding")
    return removed


def _remove_run_dir(settings: LabSettings) -> None:
    run_dir = settings.paths.run_dir
    if run_dir.is_dir() and not mounts.mounts_under([run_dir]):
        shutil.rmtree(run_dir)


def _purge(settings: LabSettings, report: Report) -> list[str]:
    """Delete the node data roots (the image cache) and the node logs; never through a mount."""
    removed: list[str] = []
    for path in (settings.paths.nodes_cache, settings.paths.node_logs):
        if not path.exists():
            continue
        if mounts.mounts_under([path]):
            raise LabError(f"refusing to purge {path}: something is still mounted under it")
        shutil.rmtree(path)
        removed.append(str(path))
        report(f"lab: purged {path}")
    return removed


def leftovers_of(settings: LabSettings, layout: CgroupLayout) -> list[str]:
    """What of the lab still exists on the machine (empty after a clean `down`)."""
    found: list[str] = []
    prefix = settings.node_prefix
    found += [f"netns {n}" for n in network.list_netns(settings.paths.netns_dir)
              if n.startswith(prefix)]
    found += [f"bridge {b}" for b in lab_bridges(settings, None) if network.link_exists(b)]
    found += [f"mount {p}" for p in mounts.mounts_under([settings.paths.run_dir,
                                                         settings.paths.nodes_cache])]
    found += [f"cgroup {d}" for d in cgroups.tree_dirs(layout, f"/{settings.cgroup_name}")]
    if network.lab_rules_present():
        found.append("iptables rule")
    delay_pid = daemons.delay_daemon_pid(settings)
    if delay_pid is not None:
        found.append(f"delay daemon pid {delay_pid}")
    power_pid = power_server.server_pid(settings)
    if power_pid is not None:
        found.append(f"power server pid {power_pid}")
    run_dir = settings.paths.run_dir
    if run_dir.is_dir():
        found += [f"daemon pid {pid}" for pid in
                  (daemon_pid(p / "dockerd.pid") for p in run_dir.iterdir() if p.is_dir())
                  if pid is not None]
    return found
