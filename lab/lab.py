"""`lab up` and `lab down`: the recipe of DESIGN 6, idempotent, recorded step by step.

`up` reconciles the machine with the settings (nodes added, resized or removed) and writes the
state file after every step, so an interrupted `up` can be completed by another `up` or undone
by `down`. `down` undoes everything the state file (or the lab's naming conventions, when the file
is gone) points at, and reports anything it could not remove.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lab import catalog, cgroups, daemons, engine, images, mounts, network
from lab.cgroups import CgroupLayout
from lab.errors import LabError, LabUnavailableError
from lab.model import (
    LABEL_NODE,
    ImageSet,
    LabState,
    NodeRecord,
    SwarmState,
    empty_state,
    node_path_dirs,
    node_record,
)
from lab.plan import check_compatible, plan_nodes
from lab.proc import daemon_pid, pids_mentioning, stop_pids, wait_until
from lab.settings import LabSettings
from lab.store import lab_lock, load_state, remove_state, require_root, save_state

Report = Callable[[str], None]
GWBRIDGE = "docker_gwbridge"
LEFTOVER_STOP_S = 3.0  # orphans of a dead engine get SIGTERM, then SIGKILL after this


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
            problems = _teardown_nodes(settings, layout, run.main, [node], report)
            if problems:
                raise LabError(f"could not remove {node.name}: " + "; ".join(problems))
            run.save(nodes=tuple(n for n in run.state.nodes if n.name != node.name))
        nodes = [_ensure_node(run, node) for node in plan.desired]
        _wait_engines(settings, nodes)
        nodes = _join_nodes(run, nodes)
        _wait_ready(run, nodes)
        _forget_stale_swarm_nodes(run, nodes)
        _ensure_images(run, nodes, image_set)
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
    """Namespace, veth, cgroup with the node's size, UTS namespace, engine (started if down)."""
    settings = run.settings
    network.ensure_node_network(wanted, settings.bridge, settings.network.prefixlen,
                                settings.paths.netns_dir)
    dirs = cgroups.ensure_node_cgroup(run.layout, wanted.cgroup_parent, wanted.cpus,
                                      wanted.memory_bytes)
    node = replace(wanted, cgroup_dirs=dirs)
    old = run.state.node(node.name)
    if old is not None and (old.cpus, old.memory_bytes) != (node.cpus, node.memory_bytes):
        run.change(f"lab: {node.name} resized to {node.cpus:g} cpu, {node.memory_bytes} bytes")
    daemons.ensure_uts_namespace(node)
    pid = daemons.node_daemon_pid(node)
    if pid is None:
        _prepare_fresh_start(run, node)
        pid = daemons.start_node_daemon(settings, node)
        run.fresh.add(node.name)
        run.change(f"lab: {node.name} engine started (pid {pid}, {node.address}, "
                   f"{node.cpus:g} cpu, {node.memory_bytes // 2**20} MiB)")
    node = replace(node, pid=pid)
    run.set_node(node)
    return node


def _prepare_fresh_start(run: _Up, node: NodeRecord) -> None:
    """Before an engine starts: nothing left of a dead predecessor (processes, mounts), its
    directories exist, no old swarm state.

    Dropping ``<data-root>/swarm`` makes the node join as a new swarm node; `down` removed the
    old one from the manager's list.
    """
    _stop_leftover_processes(run.settings, run.layout, node)
    for directory in node_path_dirs(node):
        directory.mkdir(parents=True, exist_ok=True)
    mounts.unmount_all([Path(node.exec_root), Path(node.data_root)])
    swarm_dir = Path(node.data_root) / "swarm"
    if swarm_dir.is_dir():
        shutil.rmtree(swarm_dir)


def _wait_engines(settings: LabSettings, nodes: Sequence[NodeRecord]) -> None:
    for node in nodes:
        try:
            engine.wait_engine(node.socket_url, settings.timeouts.engine_start_s,
                               f"{node.name}'s engine on {node.socket}")
        except LabUnavailableError as exc:
            raise LabUnavailableError(f"{exc}; see {node.log_file}") from exc


def _join_nodes(run: _Up, nodes: Sequence[NodeRecord]) -> list[NodeRecord]:
    settings = run.settings
    token = engine.worker_token(run.main)
    manager_ids = {n.node_id for n in engine.manager_nodes(run.main)}
    joined: list[NodeRecord] = []
    for node in nodes:
        node_cli = engine.connect(node.socket_url, settings.timeouts.api_s)
        if node.name in run.fresh:
            engine.remove_all_containers(node_cli)
        node_id, now = engine.ensure_joined(node_cli, manager_ids, settings.gateway, token,
                                            node.address)
        engine.label_node(run.main, node_id, node.labels())
        if now:
            run.change(f"lab: {node.name} joined the swarm as {node_id}")
        node = replace(node, swarm_node_id=node_id)
        run.set_node(node)
        joined.append(node)
    return joined


def _wait_ready(run: _Up, nodes: Sequence[NodeRecord]) -> None:
    ids = {n.swarm_node_id for n in nodes if n.swarm_node_id}

    def all_ready() -> bool | None:
        states = {n.node_id: n.state for n in engine.manager_nodes(run.main)}
        return True if all(states.get(i) is SwarmState.READY for i in ids) else None

    wait_until(all_ready, what="every lab node to be Ready in the swarm",
               timeout_s=run.settings.timeouts.node_ready_s, interval_s=0.5)


def _is_ours(swarm_node: engine.SwarmNode, settings: LabSettings) -> bool:
    return LABEL_NODE in swarm_node.engine_labels or LABEL_NODE in swarm_node.labels or (
        swarm_node.hostname.startswith(settings.node_prefix) and not swarm_node.is_manager)


def _forget_stale_swarm_nodes(run: _Up, nodes: Sequence[NodeRecord]) -> None:
    """Remove swarm nodes of earlier incarnations of the lab's nodes (down, replaced)."""
    current = {n.swarm_node_id for n in nodes}
    for swarm_node in engine.manager_nodes(run.main):
        if (swarm_node.node_id not in current and _is_ours(swarm_node, run.settings)
                and swarm_node.state is not SwarmState.READY):
            engine.remove_node(run.main, swarm_node.node_id)
            run.change(f"lab: removed stale swarm node {swarm_node.node_id} "
                       f"({swarm_node.hostname})")


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
        nodes = [n for n in (state.nodes if state else ()) if engine.ping(n.socket_url)]
        if nodes:
            images.load_into_nodes(settings, nodes, images.node_tags(settings, image_set),
                                   report)
        return results


# ------------------------------------------------------------------------------------------
# down
# ------------------------------------------------------------------------------------------

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
        problems = _teardown_nodes(settings, layout, main, nodes, report) if nodes else []

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

        steps: list[Callable[[], object]] = [
            swarm,
            lambda: removed.extend(_down_network(settings)),
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
    """Nodes from the state file plus any the naming conventions reveal (netns, run dirs)."""
    known = {n.name: n for n in (state.nodes if state else ())}
    names = set(network.list_netns(settings.paths.netns_dir))
    if settings.paths.run_dir.is_dir():
        names |= {p.name for p in settings.paths.run_dir.iterdir() if p.is_dir()}
    for name in sorted(names):
        suffix = name.removeprefix(settings.node_prefix)
        if name != suffix and suffix.isdigit() and name not in known:
            known[name] = node_record(settings, int(suffix))
    return sorted(known.values(), key=lambda n: n.index)


def _teardown_nodes(settings: LabSettings, layout: CgroupLayout, main: Any,
                    nodes: Sequence[NodeRecord], report: Report) -> list[str]:
    """Leave the swarm, stop the engines (together), then clean each node's traces.

    Best effort: every step runs even when an earlier one failed; failures are returned.
    """
    problems: list[str] = []
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
        lambda: _stop_leftover_processes(settings, layout, node),
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


def _stop_leftover_processes(settings: LabSettings, layout: CgroupLayout,
                             node: NodeRecord) -> None:
    """What a dead or killed engine leaves running: its containerd and container shims (their
    command lines name the node's own exec root) and container processes still in the node's
    cgroup subtree. All belong to the node by construction; they are stopped by pid."""
    pids = set(pids_mentioning(f"{node.exec_root}/"))
    pids |= cgroups.tree_pids(layout, node.cgroup_parent)
    if pids:
        stop_pids(sorted(pids), LEFTOVER_STOP_S)


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
        if _is_ours(swarm_node, settings):
            engine.remove_node(main, swarm_node.node_id)
    if state is not None and state.swarm_initialised_by_lab and engine.leave_swarm(main):
        removed.append("swarm")
        report("lab: the main engine left the swarm the lab had initialised")
        if state.gwbridge_created_by_lab and engine.remove_network(main, GWBRIDGE):
            removed.append(GWBRIDGE)
    return removed


def _down_network(settings: LabSettings) -> list[str]:
    removed: list[str] = []
    if network.remove_forward_rules():
        removed.append("forward rule")
    if network.delete_link(settings.bridge):
        removed.append(f"bridge {settings.bridge}")
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
    if network.link_exists(settings.bridge):
        found.append(f"bridge {settings.bridge}")
    found += [f"mount {p}" for p in mounts.mounts_under([settings.paths.run_dir,
                                                         settings.paths.nodes_cache])]
    found += [f"cgroup {d}" for d in cgroups.tree_dirs(layout, f"/{settings.cgroup_name}")]
    if network.lab_rules_present():
        found.append("iptables rule")
    run_dir = settings.paths.run_dir
    if run_dir.is_dir():
        found += [f"daemon pid {pid}" for pid in
                  (daemon_pid(p / "dockerd.pid") for p in run_dir.iterdir() if p.is_dir())
                  if pid is not None]
    return found
