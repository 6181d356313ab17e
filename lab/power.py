"""The lab's out-of-band power control, like a machine's BMC (DESIGN 3.15, 6): a lab node is
"switched off" by stopping its engine and "switched on" by starting it again on the same data
root, so that it rejoins the Swarm as the same node (its ``<data-root>/swarm`` is kept).

Swarm-level steps are not done here: the caller drains the node before switching it off and
sets it active once it is Ready again (the manager's ``lab`` power backend,
manager/power_backends.py). The power endpoint (lab/power_server.py) serves these functions
to the manager, which runs in a container and never imports the lab.

What each node's power is: ``on`` (its engine runs and answers), ``booting`` (it runs, not
answering yet), ``off`` (stopped by :func:`power_off`: recorded in ``<run dir>/power.json``),
``stopped`` (not running, and nobody switched it off: it died). ``lab status`` shows it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from domain.errors import NotFoundError
from lab import cgroups, daemons, engine, mounts
from lab.down import stop_leftover_processes
from lab.errors import LabError, LabUnavailableError
from lab.model import LabState, NodeRecord, node_path_dirs
from lab.settings import LabPaths, LabSettings
from lab.store import lab_lock, load_state


class NodePower(StrEnum):
    ON = "on"
    BOOTING = "booting"
    OFF = "off"
    STOPPED = "stopped"


class UnknownNodeError(LabError, NotFoundError):
    """No lab node has that name, Swarm node id or address."""


@dataclass(frozen=True)
class PowerStatus:
    """A node's power, since when (epoch seconds; None: not known), its engine's pid, and how
    long the step that led here took (None for a status)."""

    name: str
    swarm_node_id: str | None
    address: str
    power: NodePower
    since: float | None
    pid: int | None
    changed: bool = False
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "swarm_node_id": self.swarm_node_id,
                "address": self.address, "power": self.power.value, "since": self.since,
                "pid": self.pid, "changed": self.changed, "seconds": self.seconds}


# -- the record of nodes switched off --------------------------------------------------------


def records_file(paths: LabPaths) -> Path:
    return paths.run_dir / "power.json"


def read_records(paths: LabPaths) -> dict[str, dict[str, Any]]:
    """node name -> {"state": "off", "since": epoch s}; empty when none was switched off."""
    try:
        data = json.loads(records_file(paths).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as exc:
        raise LabError(f"cannot read {records_file(paths)}: {exc}") from exc
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _write_records(paths: LabPaths, records: dict[str, dict[str, Any]]) -> None:
    target = records_file(paths)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".json.partial")
    partial.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
    partial.chmod(0o644)
    partial.replace(target)


def _record(paths: LabPaths, name: str, off_since: float | None) -> None:
    records = read_records(paths)
    if off_since is None:
        if records.pop(name, None) is None:
            return
    else:
        records[name] = {"state": NodePower.OFF.value, "since": off_since}
    _write_records(paths, records)


# -- what a node's power is ------------------------------------------------------------------


def power_of(node: NodeRecord, pid: int | None, records: dict[str, dict[str, Any]],
             answering: bool | None = None) -> tuple[NodePower, float | None]:
    """The node's power from its engine's pid (and whether it answers, asked when not given)
    and the records; a record counts only while the engine does not run."""
    if pid is not None:
        if answering is None:
            answering = engine.ping(node.socket_url, timeout_s=2)
        return (NodePower.ON if answering else NodePower.BOOTING), None
    record = records.get(node.name)
    if record is not None and record.get("state") == NodePower.OFF.value:
        since = record.get("since")
        return NodePower.OFF, float(since) if isinstance(since, int | float) else None
    return NodePower.STOPPED, None


def switchable_nodes(state: LabState) -> list[NodeRecord]:
    """The nodes that can be switched: every worker of every cluster (a further cluster's
    manager engine is that Swarm's manager: never)."""
    return [*state.nodes, *(n for c in state.clusters for n in c.nodes)]


def find_node(state: LabState, ref: str) -> NodeRecord:
    """The node named ``ref``, or whose Swarm node id or address it is."""
    for node in switchable_nodes(state):
        if ref in (node.name, node.swarm_node_id, node.address):
            return node
    raise UnknownNodeError(f"no lab node is called {ref!r} (name, Swarm node id or address)")


def _state(settings: LabSettings) -> LabState:
    state = load_state(settings.paths)
    if state is None:
        raise LabUnavailableError("no lab is up (no state file); run `greenswarm lab up`")
    return state


def status(settings: LabSettings, ref: str) -> PowerStatus:
    node = find_node(_state(settings), ref)
    pid = daemons.node_daemon_pid(node)
    power, since = power_of(node, pid, read_records(settings.paths))
    return PowerStatus(node.name, node.swarm_node_id, node.address, power, since, pid)


def statuses(settings: LabSettings) -> list[PowerStatus]:
    state = _state(settings)
    records = read_records(settings.paths)
    out = []
    for node in switchable_nodes(state):
        pid = daemons.node_daemon_pid(node)
        power, since = power_of(node, pid, records)
        out.append(PowerStatus(node.name, node.swarm_node_id, node.address, power, since, pid))
    return out


# -- switching -------------------------------------------------------------------------------


def power_off(settings: LabSettings, ref: str) -> PowerStatus:
    """Stop the node's engine (SIGTERM by its pid file, bounded, then SIGKILL) and what it
    leaves running, and record it off. A node already not running is recorded off as it is."""
    with lab_lock(settings.paths):
        node = find_node(_state(settings), ref)
        started = time.monotonic()
        pid = daemons.node_daemon_pid(node)
        changed = pid is not None
        if pid is not None:
            survivors = daemons.stop_daemons([Path(node.pidfile)],
                                             settings.timeouts.engine_stop_s)
            if survivors:
                raise LabUnavailableError(f"{node.name}'s engine (pid {survivors[0]}) did not "
                                          "stop")
        stop_leftover_processes(settings, cgroups.read_layout(), node)
        since = read_records(settings.paths).get(node.name, {}).get("since")
        if changed or not isinstance(since, int | float):
            since = time.time()
            _record(settings.paths, node.name, since)
        return PowerStatus(node.name, node.swarm_node_id, node.address, NodePower.OFF,
                           float(since), None, changed, time.monotonic() - started)


def power_on(settings: LabSettings, ref: str) -> PowerStatus:
    """Start the node's engine again on its own data root (the Swarm node it was) and wait
    until it answers; a node already running is left as it is."""
    with lab_lock(settings.paths):
        node = find_node(_state(settings), ref)
        started = time.monotonic()
        pid = daemons.node_daemon_pid(node)
        changed = pid is None
        if pid is None:
            netns = settings.paths.netns_dir / node.netns
            if not netns.exists():
                raise LabUnavailableError(f"{node.name}'s network namespace {netns} is gone; "
                                          "run `greenswarm lab up`")
            _prepare_start(settings, node)
            pid = daemons.start_node_daemon(settings, node)
        try:
            engine.wait_engine(node.socket_url, settings.timeouts.engine_start_s,
                               f"{node.name}'s engine on {node.socket}")
        except LabUnavailableError as exc:
            raise LabUnavailableError(f"{exc}; see {node.log_file}") from exc
        _record(settings.paths, node.name, None)
        return PowerStatus(node.name, node.swarm_node_id, node.address, NodePower.ON,
                           time.time(), daemons.node_daemon_pid(node) or pid, changed,
                           time.monotonic() - started)


def _prepare_start(settings: LabSettings, node: NodeRecord) -> None:
    """Before the engine starts again: nothing left of its last run (processes, mounts), its
    directories and UTS namespace there. Its data root, swarm state included, is kept."""
    layout = cgroups.read_layout()
    stop_leftover_processes(settings, layout, node)
    cgroups.ensure_node_cgroup(layout, node.cgroup_parent, node.cpus, node.memory_bytes)
    for directory in node_path_dirs(node):
        directory.mkdir(parents=True, exist_ok=True)
    mounts.unmount_all([Path(node.exec_root), Path(node.data_root)])
    daemons.ensure_uts_namespace(node)
