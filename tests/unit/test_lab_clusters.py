"""The lab with several Swarms, on paper (lab/settings.py, lab/model.py, lab/plan.py): the names
and addresses of every cluster, the state file, what `up` refuses, and the tc commands of the
delay between clusters. Pure: nothing is created."""

from __future__ import annotations

import ipaddress
import json
import struct

import pytest

from domain.errors import ValidationError
from lab import delay
from lab.daemons import delay_argv
from lab.down import lab_bridges, record_of_name
from lab.errors import LabConflictError
from lab.model import (
    ClusterRecord,
    LabState,
    LatencyState,
    cluster_record,
    empty_state,
    manager_record,
    node_record,
)
from lab.network import delay_commands, queue_rule
from lab.plan import check_compatible, other_subnets, plan_clusters, plan_nodes
from lab.settings import LabSettings, settings_from_env
from monitor.cgroups import CgroupVersion


def _three() -> LabSettings:
    return LabSettings(nodes=2, clusters=3)


def test_one_cluster_is_exactly_the_old_lab() -> None:
    settings = LabSettings(nodes=2)
    assert settings.clusters == 1
    node = node_record(settings, 2)
    assert (node.name, node.address, node.veth_host, node.netns) == \
        ("gs-node2", "10.123.0.12", "gsbr0v2", "gs-node2")
    assert plan_clusters(settings, ()) == ()
    assert other_subnets(settings, 1) == []


@pytest.mark.parametrize(("cluster", "bridge", "subnet", "gateway", "manager", "first_node"), [
    (1, "gsbr0", "10.123.0.0/24", "10.123.0.1", None, ("gs-node1", "10.123.0.11", "gsbr0v1")),
    (2, "gsbr1", "10.123.1.0/24", "10.123.1.1", ("gs-node-c2-mgr", "10.123.1.10", "gsbr0c2v0"),
     ("gs-node-c2-1", "10.123.1.11", "gsbr0c2v1")),
    (3, "gsbr2", "10.123.2.0/24", "10.123.2.1", ("gs-node-c3-mgr", "10.123.2.10", "gsbr0c3v0"),
     ("gs-node-c3-1", "10.123.2.11", "gsbr0c3v1")),
])
def test_every_cluster_has_its_own_bridge_subnet_and_names(
    cluster: int, bridge: str, subnet: str, gateway: str,
    manager: tuple[str, str, str] | None, first_node: tuple[str, str, str],
) -> None:
    settings = _three()
    assert settings.cluster_bridge(cluster) == bridge
    assert str(settings.cluster_network(cluster)) == subnet
    assert settings.cluster_gateway(cluster) == gateway
    node = node_record(settings, 1, cluster)
    assert (node.name, node.address, node.veth_host) == first_node
    assert node.cgroup_parent == f"/greenswarm-lab/{first_node[0]}"
    assert node.socket == f"/run/greenswarm/lab/{first_node[0]}.sock"
    if manager is not None:
        record = manager_record(settings, cluster)
        assert (record.name, record.address, record.veth_host) == manager
        assert record.index == 0


def test_names_addresses_and_interfaces_never_collide() -> None:
    settings = LabSettings(nodes=20, clusters=8)
    records = [node_record(settings, i, k) for k in range(1, 9) for i in range(1, 21)]
    records += [manager_record(settings, k) for k in range(2, 9)]
    for attribute in ("name", "address", "veth_host", "socket", "cgroup_parent", "data_root"):
        values = [getattr(r, attribute) for r in records]
        assert len(set(values)) == len(values), attribute
    assert all(len(r.veth_host) <= 15 for r in records)  # IFNAMSIZ
    bridges = [settings.cluster_bridge(k) for k in range(1, 9)]
    assert len(set(bridges)) == 8
    networks = [settings.cluster_network(k) for k in range(1, 9)]
    for record in records:
        inside = [n for n in networks if ipaddress.IPv4Address(record.address) in n]
        assert len(inside) == 1


def test_a_name_tells_down_which_engine_it_is() -> None:
    settings = LabSettings()
    for record in (node_record(settings, 3), node_record(settings, 2, 4),
                   manager_record(settings, 5)):
        assert record_of_name(settings, record.name) == record
    for other in ("gs-node", "gs-nodex", "gs-node-c2-", "gs-node-c2-x", "docker0", "gs-node-c9-1"):
        assert record_of_name(settings, other) is None
    assert lab_bridges(settings, None)[:3] == ["gsbr0", "gsbr1", "gsbr2"]


def test_further_subnets_can_be_given() -> None:
    settings = settings_from_env({"GREENSWARM_LAB_CLUSTER_SUBNETS": "10.124.0.0/24, 10.125.0.0/24",
                                  "GREENSWARM_DEBIAN_MIRROR": "http://x"})
    settings = settings.with_clusters(3, 5)
    assert [str(settings.cluster_network(k)) for k in (1, 2, 3)] == \
        ["10.123.0.0/24", "10.124.0.0/24", "10.125.0.0/24"]
    assert other_subnets(settings, 2) == ["10.123.0.0/24", "10.125.0.0/24"]


@pytest.mark.parametrize(("changes", "field"), [
    ({"clusters": 0}, "clusters"),
    ({"clusters": 9}, "clusters"),
    ({"clusters": 2, "inter_cluster_latency_ms": -1.0}, "inter_cluster_latency_ms"),
    ({"clusters": 2, "inter_cluster_latency_ms": float("nan")}, "inter_cluster_latency_ms"),
    ({"clusters": 2, "cluster_subnets": ("10.123.0.128/25",)}, "cluster_subnets"),
    ({"clusters": 2, "cluster_subnets": ("8.8.8.0/24",)}, "cluster_subnets"),
    ({"clusters": 2, "subnet": "10.255.255.0/24"}, "cluster_subnets"),  # next: 11.0.0.0/24
    ({"clusters": 2, "subnet": "255.255.255.0/24"}, "clusters"),  # no next block at all
])
def test_bad_cluster_settings_are_refused(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        LabSettings(**changes)  # type: ignore[arg-type]
    assert raised.value.field == field


def _state(settings: LabSettings, clusters: int) -> LabState:
    recorded = tuple(cluster_record(settings, k) for k in range(2, clusters + 1))
    return LabState(**{**empty_state(settings, CgroupVersion.V2).__dict__, "clusters": recorded})


def test_up_adds_clusters_but_never_removes_one() -> None:
    settings = _three()
    check_compatible(settings, _state(settings, 2))  # one more: fine
    check_compatible(settings, _state(settings, 3))
    with pytest.raises(LabConflictError, match="never removes"):
        check_compatible(settings.with_clusters(2, 10), _state(settings, 3))
    moved = LabSettings(nodes=2, clusters=3, cluster_subnets=("10.124.0.0/24",))
    with pytest.raises(LabConflictError, match="cluster 2's subnet"):
        check_compatible(moved, _state(settings, 2))


def test_recorded_clusters_keep_their_engines_and_new_ones_are_added() -> None:
    settings = _three()
    manager = manager_record(settings, 2)
    recorded = ClusterRecord(index=2, bridge="gsbr1", subnet="10.123.1.0/24",
                             gateway="10.123.1.1", manager=manager.__class__(
                                 **{**manager.__dict__, "pid": 42}), swarm_id="abc")
    planned = plan_clusters(settings, [recorded])
    assert [c.index for c in planned] == [2, 3]
    assert planned[0] is recorded
    assert planned[1] == cluster_record(settings, 3)
    plan = plan_nodes(settings, (), cluster=3)
    assert [n.name for n in plan.add] == ["gs-node-c3-1", "gs-node-c3-2"]


def test_the_state_file_keeps_clusters_and_lists_every_swarm() -> None:
    settings = LabSettings(nodes=1, clusters=2)
    node1 = node_record(settings, 1)
    cluster = cluster_record(settings, 2)
    cluster = ClusterRecord(**{**cluster.__dict__, "nodes": (node_record(settings, 1, 2),),
                               "swarm_id": "s2"})
    state = LabState(**{**empty_state(settings, CgroupVersion.V1).__dict__, "nodes": (node1,),
                        "clusters": (cluster,), "inter_cluster_latency_ms": 10.0,
                        "latency": LatencyState.UNAVAILABLE})
    data = json.loads(json.dumps(state.to_dict()))
    assert LabState.from_dict(data) == state
    assert data["latency"] == "unavailable"
    assert [(s["name"], s["manager_socket"], s["manager_address"], s["bridge"], s["gateway"],
             [n["address"] for n in s["nodes"]]) for s in data["swarms"]] == [
        ("c1", "/var/run/docker.sock", "10.123.0.1", "gsbr0", "10.123.0.1", ["10.123.0.11"]),
        ("c2", "/run/greenswarm/lab/gs-node-c2-mgr.sock", "10.123.1.10", "gsbr1", "10.123.1.1",
         ["10.123.1.11"]),
    ]
    assert [n.name for n in state.all_nodes()] == ["gs-node1", "gs-node-c2-mgr", "gs-node-c2-1"]


def test_a_state_file_of_the_one_swarm_lab_still_reads() -> None:
    settings = LabSettings(nodes=1)
    old = empty_state(settings, CgroupVersion.V1).to_dict()
    for key in ("clusters", "inter_cluster_latency_ms", "latency", "ip_forward_enabled_by_lab",
                "swarms"):
        old.pop(key)
    state = LabState.from_dict(old)
    assert state.clusters == () and state.latency is LatencyState.NONE


def test_the_delay_goes_only_to_packets_from_other_clusters() -> None:
    argvs = delay_commands("gsbr1", ["10.123.0.0/24", "10.123.2.0/24"], 20)
    text = [" ".join(a) for a in argvs]
    assert text[0] == "tc qdisc replace dev gsbr1 root handle 1: htb default 1"
    assert "tc qdisc replace dev gsbr1 parent 1:2 handle 2: netem delay 20ms" in text
    filters = [t for t in text if " filter " in t]
    assert filters == [
        "tc filter replace dev gsbr1 parent 1: protocol ip prio 1 u32 match ip src "
        "10.123.0.0/24 flowid 1:2",
        "tc filter replace dev gsbr1 parent 1: protocol ip prio 2 u32 match ip src "
        "10.123.2.0/24 flowid 1:2",
    ]


def test_without_netem_packets_between_bridges_go_to_the_delay_queue() -> None:
    assert " ".join(queue_rule("gsbr0", "gsbr1", 123)) == (
        "FORWARD -i gsbr0 -o gsbr1 -m comment --comment greenswarm-lab -j NFQUEUE "
        "--queue-num 123 --queue-bypass")
    argv = delay_argv(LabSettings(), 20)
    assert argv[1:] == ["-m", "lab.delay", "--queue", "123", "--delay-ms", "20", "--pidfile",
                        "/run/greenswarm/lab/delay.pid"]


def _packet(packet_id: int) -> bytes:
    header = delay.attribute(delay.NFQA_PACKET_HDR, struct.pack("!IHB", packet_id, 0x0800, 2))
    other = delay.attribute(10, b"\x00\x00\x00\x07")  # e.g. NFQA_IFINDEX_OUTDEV
    return delay.queue_message(delay.NFQNL_MSG_PACKET, 123, [other, header])


def test_the_delay_reads_packet_ids_and_releases_up_to_one() -> None:
    data = _packet(7) + _packet(8) + delay.queue_message(delay.NFQNL_MSG_CONFIG, 123, [])
    assert delay.packet_ids(data) == [7, 8]
    assert delay.packet_ids(data[:-3]) == [7, 8]  # a truncated tail is ignored
    verdict = delay.accept_upto(123, 8)
    length, kind, flags, _seq, _pid = struct.unpack_from("=IHHII", verdict)
    assert (length, kind, flags) == (len(verdict), (3 << 8) | 3, 1)
    assert struct.unpack_from("!H", verdict, 18)[0] == 123  # nfgenmsg res_id: the queue
    assert struct.unpack_from("!II", verdict, 24) == (delay.NF_ACCEPT, 8)


def test_the_delay_binds_its_queue_and_asks_for_acknowledgements() -> None:
    bind, params = delay.config_messages(123)
    for message in (bind, params):
        _length, kind, flags, _seq, _pid = struct.unpack_from("=IHHII", message)
        assert kind == (3 << 8) | 2 and flags == 5
    assert struct.unpack_from("!BBH", bind, 24) == (1, 0, 0)  # BIND, pf unspec
    ack = struct.pack("=IHHII", 36, 2, 0, 1, 0) + struct.pack("=i", -16) + b"\0" * 16
    assert delay.ack_errors(ack) == [-16]
