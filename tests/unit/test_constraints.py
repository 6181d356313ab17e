"""Placement constraints (DESIGN 4): Swarm's grammar, and every policy honouring them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli.main import main
from domain.constraints import (
    MAX_CONSTRAINTS,
    Constraint,
    ConstraintOp,
    NodeFacts,
    check_constraints,
    exclusions,
)
from domain.decision import Decision
from domain.errors import ValidationError
from domain.model import HostSpec, Request, TaskType
from host_registry.memory import MemoryStore
from scheduler import registry
from scheduler.service import Scheduler

SSD = NodeFacts("id-1", "gs-node1", labels=(("disk", "ssd"), ("zone", "a")))
HDD = NodeFacts("id-2", "gs-node2", role="manager", arch="aarch64", labels=(("disk", "hdd"),))


@pytest.mark.parametrize(("text", "ssd", "hdd"), [
    ("node.labels.disk==ssd", True, False),
    ("node.labels.disk!=ssd", False, True),
    ("node.labels.disk == SSD", True, False),  # values compare without case, as Swarm's
    ("node.labels.gpu==yes", False, False),  # a label the node lacks equals nothing...
    ("node.labels.gpu!=yes", True, True),  # ...and differs from everything
    ("node.hostname!=gs-node2", True, False),
    ("node.hostname==GS-NODE1", True, False),
    ("node.id==id-2", False, True),
    ("node.role==manager", False, True),
    ("node.platform.os==linux", True, True),
    ("node.platform.arch==x86_64", True, False),
    ("node.platform.arch!=x86_64", False, True),
    ("engine.labels.kernel==6", False, False),
])
def test_the_grammar_and_its_meaning(text: str, ssd: bool, hdd: bool) -> None:
    constraint = Constraint.parse(text, "c")
    assert (constraint.holds(SSD), constraint.holds(HDD)) == (ssd, hdd)


def test_a_constraint_reads_back_as_it_was_meant() -> None:
    parsed = Constraint.parse("  node.labels.disk  !=  ssd ", "c")
    assert (parsed.key, parsed.op, parsed.value) == ("node.labels.disk", ConstraintOp.NE, "ssd")
    assert parsed.text == "node.labels.disk!=ssd"


@pytest.mark.parametrize("text", [
    "", "   ", "node.labels.disk", "node.labels.disk=ssd", "node.labels.disk==ssd==x",
    "node.labels.disk!==ssd", "node.labels.==ssd", "node.name==x", "labels.disk==ssd",
    "node.labels.disk==", "node.hostname==a b", "node.hostname=='x'", "\tnode.id==x",
    "node.id==x" + "y" * 300, 7, None,
])
def test_malformed_constraints_are_refused_naming_the_item(text: object) -> None:
    with pytest.raises(ValidationError) as caught:
        check_constraints(["node.labels.disk==ssd", text])
    assert caught.value.field == "constraints[1]"


def test_a_list_is_required_and_bounded_and_duplicates_count_once() -> None:
    with pytest.raises(ValidationError) as caught:
        check_constraints("node.labels.disk==ssd")
    assert caught.value.field == "constraints"
    with pytest.raises(ValidationError):
        check_constraints(["node.platform.os==linux"] * (MAX_CONSTRAINTS + 1))
    assert len(check_constraints(["node.id==a", "node.id == a"])) == 1
    assert check_constraints(None) == ()


def test_exclusions_name_the_first_unmet_constraint_and_unknown_nodes() -> None:
    constraints = check_constraints(["node.platform.os==linux", "node.labels.disk==ssd"])
    ruled = exclusions(constraints, {"a": SSD, "b": HDD}, ["a", "b", "c"])
    assert ruled == {"b": "constraint node.labels.disk==ssd not met",
                     "c": "constraint node.platform.os==linux: nothing known of this node"}


# -- every policy honours them ---------------------------------------------------------------

CORE = 1024
GIB = 1024**3


def cluster() -> tuple[MemoryStore, dict[str, NodeFacts]]:
    """Three hosts; n3 is labelled disk=ssd and is the one every policy likes least (it is
    the fullest in allocation and in utilization)."""
    store = MemoryStore()
    facts = {}
    for name, util in (("n1", 0.3), ("n2", 0.4), ("n3", 0.2)):
        labels = (("disk", "ssd"),) if name == "n3" else ()
        spec = HostSpec(name, 4 * CORE, 8 * GIB, labels=labels)
        store.add_host(spec)
        store.update_host_utilization(name, util, 0.1, util_at=0.0)
        facts[name] = spec.facts()
    return store, facts


def request(rid: str, *constraints: str, cls: int = 2) -> Request:
    return Request(rid, cls, TaskType.SERVICE, CORE, GIB, check_constraints(list(constraints)))


@pytest.mark.parametrize("policy", registry.names(simulated=True))
def test_every_policy_places_only_where_the_constraints_hold(policy: str) -> None:
    store, facts = cluster()
    scheduler = Scheduler(store, registry.make_policy(policy, seed=3),
                          admits_to_queue=registry.plugin(policy).admits_to_queue)
    scheduler.set_node_facts(facts)
    for index in range(3):
        outcome = scheduler.submit(request(f"ssd{index}", "node.labels.disk==ssd"), 10.0 + index)
        assert [d.host for d in outcome.applied] == ["n3"], (policy, outcome.decisions)
    outcome = scheduler.submit(request("not-n1", "node.hostname!=n1", "node.labels.disk!=ssd"),
                               20.0)
    assert [d.host for d in outcome.applied] == ["n2"], policy
    # nothing meets it: refused (or waiting, for the qos policy) with the constraint named
    outcome = scheduler.submit(request("gpu", "node.labels.gpu==yes"), 30.0)
    assert not outcome.applied
    decision = (outcome.refused or outcome.waiting)[0]
    assert "node.labels.gpu==yes" in decision.reason, decision.reason


def test_explain_names_the_constraint_that_excluded_each_host(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = {
        "hosts": [
            {"id": "n1", "cpu_capacity": 4096, "memory_capacity": GIB, "labels": {"disk": "hdd"}},
            {"id": "n2", "cpu_capacity": 4096, "memory_capacity": GIB, "hostname": "gs-node2",
             "labels": {"disk": "ssd"}},
            {"id": "n3", "cpu_capacity": 4096, "memory_capacity": GIB, "labels": {"disk": "ssd"},
             "platform": {"arch": "aarch64"}},
        ],
        "request": {"id": "r", "class": 4, "type": "job", "cpu_shares": 512, "memory": 1024,
                    "constraints": ["node.labels.disk==ssd", "node.platform.arch==x86_64"]},
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps(scenario))
    assert main(["decide", "--scenario", str(path), "--explain", "--policy", "spread"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["host"] == "n2"
    text = "\n".join(decision["explain"])
    assert "n1" in text and "constraint node.labels.disk==ssd not met" in text
    assert "constraint node.platform.arch==x86_64 not met" in text
    scenario["request"]["constraints"] = ["node.hostname==gs-node9"]  # type: ignore[index]
    path.write_text(json.dumps(scenario))
    assert main(["decide", "--scenario", str(path), "--policy", "spread"]) == 0
    refused = json.loads(capsys.readouterr().out)
    assert not refused["placed"]
    assert "no host meets the request's constraints" in refused["reason"]
    assert "node.hostname==gs-node9" in refused["reason"]
    scenario["request"]["constraints"] = ["node.hostname=gs-node9"]  # type: ignore[index]
    path.write_text(json.dumps(scenario))
    assert main(["decide", "--scenario", str(path)]) == 2
    assert "request.constraints[0]" in capsys.readouterr().err


def test_a_killed_task_keeps_its_constraints_when_rescheduled() -> None:
    store, facts = cluster()
    store.add_host(HostSpec("n4", 4 * CORE, 8 * GIB, labels=(("disk", "ssd"),)))
    facts["n4"] = NodeFacts("n4", "n4", labels=(("disk", "ssd"),))
    scheduler = Scheduler(store, registry.make_policy("energy"))
    scheduler.set_node_facts(facts)
    placed = scheduler.submit(request("t", "node.labels.disk==ssd", cls=4), 0.0).applied[0]
    task = store.task("t")
    assert task is not None and task.constraints == placed.request.constraints
    assert task.as_request().constraints == placed.request.constraints
    lost = scheduler.host_lost(placed.host or "", 5.0)
    moved = [d.host for d in lost.applied]
    assert moved and all(host in {"n3", "n4"} and host != placed.host for host in moved)


def test_a_label_that_comes_lets_a_waiting_request_in() -> None:
    store, facts = cluster()
    scheduler = Scheduler(store, registry.make_policy("energy"))
    scheduler.set_node_facts(facts)
    outcome = scheduler.submit(request("w", "node.labels.gpu==yes"), 0.0, queue=True)
    assert outcome.queued and store.is_pending("w")
    assert not scheduler.retry_pending(1.0).applied
    facts["n1"] = NodeFacts("n1", "n1", labels=(("gpu", "yes"),))
    assert scheduler.set_node_facts(facts)
    assert [d.host for d in scheduler.retry_pending(2.0).applied] == ["n1"]
    assert not scheduler.set_node_facts(facts)  # the same facts again: no change


def test_a_placed_decision_carries_the_request_with_its_constraints() -> None:
    store, facts = cluster()
    scheduler = Scheduler(store, registry.make_policy("binpack"))
    scheduler.set_node_facts(facts)
    outcome = scheduler.submit(request("b", "node.labels.disk==ssd"), 0.0)
    decision: Decision = outcome.applied[0]
    assert [c.text for c in decision.request.constraints] == ["node.labels.disk==ssd"]
