"""Preemption that keeps work, live on the lab (DESIGN 3.14, issue 30): greenswarm deployed as
users deploy it (compose + stack) with its default policy (``energy``, which suspends). A
class-4 job that burns CPU is suspended, not killed, to place a class-1 request on its node:
the node's own engine says its container is paused (``docker inspect``: ``State.Paused``),
the same container, its memory kept. When the class-1 request ends, the job is unpaused on the
same node and finishes at its own length plus its pause: its work was kept.

The job's work is 20 steps of one second (``sleep 1``, beside a busy loop that makes its node
EED, the region the kill pass looks at); its own length is measured first by the same job run
without a pause. The numbers are printed (``pytest -s``).

Run under the machine's lab lock: ``flock /tmp/gs-lab.lock python -m pytest
tests/e2e/test_suspend_lab.py -s``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from domain.labels import LABEL_TASK
from tests.e2e.conftest import Lab
from tests.e2e.stack import Stack, deployed, idle, node_client, poll

pytestmark = pytest.mark.lab

LAB_UP_ARGS = ("up", "--nodes", "2", "--node-cpus", "0.5", "--node-memory", "512m",
               "--images", "minimal")
STEPS = 20
# a job of STEPS one-second steps beside a busy loop (its node EED); exit 0 when done
WORK = ["sh", "-c", "trap 'exit 0' TERM; yes > /dev/null & burner=$!; i=0; "
        f"while [ $i -lt {STEPS} ]; do sleep 1; i=$((i+1)); done; kill $burner; exit 0"]
PAUSE_S = 12.0  # how long the class-1 request holds the node
# A frozen `sleep 1` ends at the thaw: the job may finish up to a step earlier than its
# length plus the pause; start-up and the sync add a second or two either way.
TOLERANCE_S = 3.0


@pytest.fixture(scope="module")
def stack(lab: Lab) -> Iterator[Stack]:
    with deployed(lab, name="gssusp") as up:
        yield up


@pytest.fixture
def cluster(stack: Stack) -> Iterator[Stack]:
    with idle(stack) as ready:
        yield ready


def _node(lab: Lab, host_id: str) -> dict[str, Any]:
    return next(n for n in lab.nodes if n["swarm_node_id"] == host_id)


def containers_of(node: dict[str, Any], task: str) -> list[dict[str, Any]]:
    """`docker inspect` of every container of ``task`` on ``node``'s own engine, paused too."""
    with node_client(node) as client:
        found = client.containers.list(all=True, filters={"label": f"{LABEL_TASK}={task}"},
                                       ignore_removed=True)
        return [c.attrs for c in found]


def event_t(record: dict[str, Any], kind: str) -> float:
    times = [e["t"] for e in record["history"] if e["kind"] == kind]
    assert len(times) == 1, (kind, record["history"])
    return float(times[0])


def ran_s(record: dict[str, Any]) -> float:
    """From its container's start to its end, as its history says."""
    return event_t(record, "ended") - event_t(record, "started")


def completed(stack: Stack, name: str) -> bool:
    return bool(stack.request(name)["status"] == "completed")


def test_a_suspended_job_is_paused_for_a_class_1_request_and_finishes_with_its_work_kept(
    cluster: Stack, lab: Lab
) -> None:
    # its own length, unpaused
    cluster.submit("alone", 4, "job", 300, "64m", WORK)
    poll(lambda: completed(cluster, "alone"), 120, "the job run alone to complete")
    length_s = ran_s(cluster.request("alone"))
    assert STEPS <= length_s < STEPS + 10, length_s
    cluster.wait_quiet()

    work = cluster.submit("work", 4, "job", 300, "64m", WORK)["request"]["host"]
    strict = cluster.submit("strict", 1, "service", 450, "32m")["request"]["host"]
    assert strict != work, "one host each"
    node = _node(lab, work)
    poll(lambda: [c["State"]["Status"] for c in containers_of(node, "work")] == ["running"],
         30, f"the job to run on {node['name']}")
    container_id = containers_of(node, "work")[0]["Id"]
    cluster.wait_region(work, "EED", 60)

    # 450 shares of class 1 fit on neither host unchanged nor with a cut (the job may lose
    # half: 150 + 450 > 512); its node is EED and only CPU is missing there: suspended
    answer = cluster.submit("urgent", 1, "service", 450, "32m")
    decision = answer["decision"]
    assert (decision["pass"], answer["request"]["host"]) == ("kill", work), decision
    assert (decision["kills"], decision["suspends"]) == ([], ["work"]), decision
    poll(lambda: [c["State"]["Paused"] for c in containers_of(node, "work")] == [True], 30,
         f"the job's container to be paused on {node['name']}")
    paused = containers_of(node, "work")[0]
    assert paused["Id"] == container_id, "the same container, paused, not replaced"
    assert paused["State"]["Status"] == "paused" and paused["State"]["Running"]
    booked = next(t for t in cluster.host(work)["tasks"] if t["id"] == "work")
    assert (booked["suspended"], booked["cpu_shares"], booked["suspended_cpu_shares"],
            booked["memory"]) == (True, 0, 300, 64 * 2**20), booked
    record = cluster.request("work")
    assert record["status"] == "running" and record["kills"] == 0, record
    suspended = [e for e in record["history"] if e["kind"] == "suspended"]
    assert [(e["host"], e["by"], e["applied"]) for e in suspended] == [(work, "urgent", True)]

    held = containers_of(node, "work")[0]["State"]
    assert held["Paused"], held  # still paused a while later: nothing resumed it early
    poll(lambda: event_t(cluster.request("work"), "suspended") + PAUSE_S <= time.time(), 60,
         "the pause to last")
    cluster.stop("urgent")  # its host's CPU room comes back: the job resumes there
    poll(lambda: [c["State"]["Paused"] for c in containers_of(node, "work")] == [False], 30,
         f"the job's container to run again on {node['name']}")
    assert containers_of(node, "work")[0]["Id"] == container_id
    record = cluster.request("work")
    resumed = [e for e in record["history"] if e["kind"] == "resumed"]
    assert [(e["host"], e["applied"]) for e in resumed] == [(work, True)], record["history"]

    poll(lambda: completed(cluster, "work"), 120, "the resumed job to complete")
    record = cluster.request("work")
    pause_s = event_t(record, "resumed") - event_t(record, "suspended")
    total_s = ran_s(record)
    print(f"\nsuspend: job alone {length_s:.2f} s; paused {pause_s:.2f} s; with the pause "
          f"{total_s:.2f} s = alone + pause {total_s - length_s - pause_s:+.2f} s; "
          f"kills {record['kills']}")
    assert record["kills"] == 0 and record["host"] == work
    assert abs(total_s - (length_s + pause_s)) <= TOLERANCE_S, (total_s, length_s, pause_s)
    assert pause_s >= PAUSE_S - 1
