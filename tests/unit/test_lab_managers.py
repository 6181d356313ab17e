"""`lab up --managers N` (DESIGN 13): nodes 1..N of cluster 1 become Swarm managers too; the
default lab keeps every node a worker, with the same records and labels as before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from domain.errors import ValidationError
from lab.model import LABEL_ROLE, LabState, NodeRecord, node_record
from lab.plan import plan_nodes
from lab.settings import LabSettings


def test_the_default_lab_has_no_manager_node() -> None:
    settings = LabSettings(nodes=3)
    nodes = [node_record(settings, i) for i in (1, 2, 3)]
    assert [n.manager for n in nodes] == [False, False, False]
    assert {n.labels()[LABEL_ROLE] for n in nodes} == {"worker"}


def test_managers_are_the_first_nodes_of_cluster_one() -> None:
    settings = LabSettings(nodes=5, clusters=2).with_managers(3)
    assert [node_record(settings, i).manager for i in range(1, 6)] == \
        [True, True, True, False, False]
    assert node_record(settings, 1).labels()[LABEL_ROLE] == "manager"
    assert not node_record(settings, 1, cluster=2).manager  # further clusters: workers


@pytest.mark.parametrize("managers", [-1, 4])
def test_more_managers_than_nodes_is_refused(managers: int) -> None:
    with pytest.raises(ValidationError) as caught:
        LabSettings(nodes=3).with_managers(managers)
    assert caught.value.field == "managers"


def test_up_again_with_other_managers_changes_the_kept_nodes_roles() -> None:
    before = LabSettings(nodes=3).with_managers(3)
    existing = [replace(node_record(before, i), swarm_node_id=f"id{i}", pid=100 + i)
                for i in (1, 2, 3)]
    plan = plan_nodes(LabSettings(nodes=3).with_managers(1), existing)
    assert [(n.swarm_node_id, n.manager) for n in plan.desired] == \
        [("id1", True), ("id2", False), ("id3", False)]
    assert plan.changes_nothing  # a role is not a node added, resized or removed


def test_a_state_file_of_before_reads_as_worker_nodes() -> None:
    record = node_record(LabSettings(nodes=1), 1).to_dict()
    del record["manager"]  # written before `--managers` existed
    assert NodeRecord.from_dict(record).manager is False
    state = LabState.from_dict({"version": 1, "bridge": "gsbr0", "subnet": "10.123.0.0/24",
                                "gateway": "10.123.0.1", "cgroup_name": "greenswarm-lab",
                                "cgroup_version": "v2", "main_socket": "/var/run/docker.sock",
                                "nodes": [record]})
    assert state.nodes[0].manager is False
