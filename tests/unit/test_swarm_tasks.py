"""Which of a service's Swarm tasks stands for it (manager/swarm.py): a refusal is seen even
though Swarm replaces the refused task within a second (issue 28, item 4)."""

from __future__ import annotations

from typing import Any

from domain.labels import LABEL_TASK
from manager.swarm import SwarmBackend, TaskState

ATTRS = {"ID": "svc1", "Spec": {"Name": "gs-x", "Labels": {LABEL_TASK: "x"}}}
REFUSED = "No such image: greenswarm/missing:1"


def task(index: int, state: str, node: str = "n1", err: str = "") -> dict[str, Any]:
    return {"Version": {"Index": index}, "NodeID": node,
            "Status": {"State": state, "Err": err, "Timestamp": "2026-11-27T12:00:00Z"}}


def test_a_refused_task_replaced_by_a_pending_one_is_a_refusal() -> None:
    # as `docker service ps` shows it a second after: the newest pending, the refused below
    tasks = [task(10, "rejected", err=REFUSED), task(12, "rejected", err=REFUSED),
             task(14, "pending", node="")]
    info = SwarmBackend._describe(ATTRS, tasks)
    assert info is not None
    assert (info.state, info.node_id, info.message) == (TaskState.REJECTED, "n1", REFUSED)


def test_a_task_that_runs_after_a_refusal_runs() -> None:
    info = SwarmBackend._describe(ATTRS, [task(10, "rejected", err=REFUSED), task(12, "running")])
    assert info is not None and info.state is TaskState.RUNNING


def test_a_pending_task_after_one_that_ran_is_pending() -> None:
    info = SwarmBackend._describe(ATTRS, [task(10, "failed"), task(12, "pending", node="")])
    assert info is not None and info.state is TaskState.PENDING
    assert SwarmBackend._describe(ATTRS, []) is not None


def test_after_a_start_first_update_the_new_task_stands_for_the_service() -> None:
    # a consolidation move (DESIGN 3.15) as the lab's Swarm lists it once done: the new task
    # runs on n2; the old one on n1 was shut down after it, so its Version.Index is the higher
    # (Swarm bumps it at each change): the service is the task created last, not changed last
    old = {**task(30, "shutdown", node="n1"), "CreatedAt": "2026-11-27T12:00:00.5Z"}
    new = {**task(25, "running", node="n2"), "CreatedAt": "2026-11-27T12:05:00.25Z"}
    info = SwarmBackend._describe(ATTRS, [old, new])
    assert info is not None
    assert (info.state, info.node_id) == (TaskState.RUNNING, "n2")


def test_the_service_update_status_is_read() -> None:
    attrs = {**ATTRS, "UpdateStatus": {"State": "rollback_completed", "Message": "rolled back"}}
    info = SwarmBackend._describe(attrs, [task(10, "running")])
    assert info is not None and info.update_state == "rollback_completed"
    never = SwarmBackend._describe(ATTRS, [task(10, "running")])
    assert never is not None and never.update_state is None
