"""`lab status`'s node roles: read from the Swarm manager's node list (the raft leader, a
manager, a worker) and shown in the table and the JSON; "-" for a node Swarm does not list."""

from __future__ import annotations

from typing import Any

from lab.engine import _swarm_node
from lab.model import CgroupVersion, DaemonState, EngineState, LabState, SwarmState
from lab.status import LabStatus, NodeStatus, render


def raw_node(node_id: str, role: str, leader: bool | None) -> dict[str, Any]:
    """A node as the Docker API lists it (GET /nodes), the fields lab.engine reads."""
    raw: dict[str, Any] = {"ID": node_id, "Spec": {"Role": role, "Labels": {}},
                           "Description": {"Hostname": node_id, "Engine": {"Labels": {}}},
                           "Status": {"State": "ready", "Addr": "10.0.0.1"}}
    if leader is not None:  # only a manager has a ManagerStatus, and only the leader Leader
        raw["ManagerStatus"] = {"Reachability": "reachable", "Addr": "10.0.0.1:2377",
                                **({"Leader": True} if leader else {})}
    return raw


def test_a_nodes_role_is_the_one_swarm_lists() -> None:
    assert _swarm_node(raw_node("a", "manager", True)).role == "leader"
    assert _swarm_node(raw_node("b", "manager", False)).role == "manager"
    assert _swarm_node(raw_node("c", "worker", None)).role == "worker"


def node(name: str, role: str) -> NodeStatus:
    return NodeStatus(name=name, address="10.0.0.2", socket=f"/run/{name}.sock", pid=1,
                      daemon=DaemonState.RUNNING, engine=EngineState.ANSWERING,
                      swarm=SwarmState.READY if role != "-" else SwarmState.ABSENT,
                      swarm_node_id="x" if role != "-" else None, role=role, cpus=0.5,
                      memory_bytes=512 << 20, cgroup_parent="gs/n", cpu_used_s=None,
                      memory_used_bytes=None)


def test_the_table_and_the_json_show_each_nodes_role() -> None:
    state = LabState(bridge="gsbr0", subnet="10.0.0.0/24", gateway="10.0.0.1",
                     cgroup_name="gs", cgroup_version=CgroupVersion.V2,
                     main_socket="/run/docker.sock")
    nodes = (node("gs-node1", "leader"), node("gs-node2", "manager"), node("gs-node3", "worker"),
             node("gs-node4", "-"))
    status = LabStatus(False, EngineState.ANSWERING, "active", state, nodes)
    lines = render(status).splitlines()
    header = lines[0].split()
    assert header[:7] == ["NODE", "SWARM", "ID", "ADDRESS", "ENGINE", "SWARM", "ROLE"]
    roles = {line.split()[0]: line.split()[5] for line in lines[1:5]}
    assert roles == {"gs-node1": "leader", "gs-node2": "manager", "gs-node3": "worker",
                     "gs-node4": "-"}
    assert [n["role"] for n in status.to_dict()["nodes"]] == ["leader", "manager", "worker", "-"]
