"""Pure decisions of the lab: what `up` must add, keep, resize or remove."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from lab.errors import LabConflictError
from lab.model import ClusterRecord, LabState, NodeRecord, cluster_record, node_record
from lab.settings import LabSettings


@dataclass(frozen=True)
class NodePlan:
    """Nodes to create, to keep (possibly with a new size) and to tear down."""

    add: tuple[NodeRecord, ...]
    keep: tuple[NodeRecord, ...]
    resize: tuple[NodeRecord, ...]
    remove: tuple[NodeRecord, ...]

    @property
    def desired(self) -> tuple[NodeRecord, ...]:
        return tuple(sorted(self.keep + self.add, key=lambda n: n.index))

    @property
    def changes_nothing(self) -> bool:
        return not (self.add or self.resize or self.remove)


def check_compatible(settings: LabSettings, state: LabState) -> None:
    """Refuse to reconcile a lab built with another network or cgroup layout."""
    mismatches = [
        f"{what} is {old!r}, settings say {new!r}"
        for what, old, new in (
            ("bridge", state.bridge, settings.bridge),
            ("subnet", state.subnet, settings.subnet),
            ("cgroup name", state.cgroup_name, settings.cgroup_name),
            ("main engine socket", state.main_socket, str(settings.engine.main_socket)),
        )
        if old != new
    ]
    if len(state.clusters) + 1 > settings.clusters:
        mismatches.append(f"the lab has {len(state.clusters) + 1} clusters, settings say "
                          f"{settings.clusters} (`up` adds clusters, never removes one)")
    for cluster in state.clusters:
        if cluster.index > settings.clusters:
            continue
        wanted = cluster_record(settings, cluster.index)
        mismatches += [
            f"cluster {cluster.index}'s {what} is {old!r}, settings say {new!r}"
            for what, old, new in (("bridge", cluster.bridge, wanted.bridge),
                                   ("subnet", cluster.subnet, wanted.subnet))
            if old != new
        ]
    if mismatches:
        raise LabConflictError(
            "a lab with other settings is up (" + "; ".join(mismatches)
            + "); run `greenswarm lab down` first"
        )


def plan_clusters(settings: LabSettings,
                  existing: Sequence[ClusterRecord]) -> tuple[ClusterRecord, ...]:
    """Clusters 2..N: the recorded ones as they are (their nodes, ids, pids), new ones empty."""
    by_index = {c.index: c for c in existing}
    return tuple(by_index.get(k) or cluster_record(settings, k)
                 for k in range(2, settings.clusters + 1))


def other_subnets(settings: LabSettings, cluster: int) -> list[str]:
    """The subnets of every cluster but ``cluster``: routed to through the host, and delayed."""
    return [str(settings.cluster_network(k)) for k in range(1, settings.clusters + 1)
            if k != cluster]


def plan_nodes(settings: LabSettings, existing: Sequence[NodeRecord],
               cluster: int = 1) -> NodePlan:
    """Nodes 1..N of ``cluster`` of the settings' size; existing nodes keep their ids and pids."""
    by_index = {n.index: n for n in existing}
    add: list[NodeRecord] = []
    keep: list[NodeRecord] = []
    resize: list[NodeRecord] = []
    for index in range(1, settings.nodes + 1):
        wanted = node_record(settings, index, cluster)
        old = by_index.get(index)
        if old is None:
            add.append(wanted)
            continue
        kept = replace(old, cpus=wanted.cpus, memory_bytes=wanted.memory_bytes,
                       manager=wanted.manager)
        keep.append(kept)
        if (old.cpus, old.memory_bytes) != (wanted.cpus, wanted.memory_bytes):
            resize.append(kept)
    remove = [n for n in existing if n.index > settings.nodes]
    return NodePlan(add=tuple(add), keep=tuple(keep), resize=tuple(resize),
                    remove=tuple(sorted(remove, key=lambda n: n.index)))


def cfs_quota_us(cpus: float, period_us: int) -> int:
    """CFS quota for ``cpus`` cores; at least 1000 us (the kernel's minimum)."""
    return max(1000, round(cpus * period_us))
