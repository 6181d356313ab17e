"""The live service against a real Docker engine in swarm mode (single node), a real Redis,
and the manager and agent as real processes. Nothing here is mocked.

The node's capacity is set by labels to 2048 shares and 4 GiB, so the class limits are
2048, 2389, 2730 and 3072 shares."""

from __future__ import annotations

import time
from typing import Any

import docker.errors
import pytest
import requests

from manager.swarm import SwarmBackend
from tests.support.live import Live, poll

pytestmark = [pytest.mark.docker, pytest.mark.redis]


def test_request_becomes_a_container_with_its_shares_and_memory(live: Live) -> None:
    answer = live.submit("web", 3, "service", 512, "64m")
    assert answer["decision"]["placed"] and answer["request"]["status"] == "running"
    assert answer["request"]["host"] == live.node_id
    assert answer["request"]["kills"] == 0
    live.wait_resources("web", (512, 64 * 2**20))  # shares set by the agent on start
    # DESIGN 3.10: it runs alpha (1.2 s) after its placement, unless an agent says otherwise;
    # its wait for the decision is its only time not running
    poll(lambda: live.request("web")["service"]["availability"] > 0.9, 10,
         "web's availability to show it runs")
    service = live.request("web")["service"]
    assert service["slo"] == pytest.approx(2 / 3) and service["preemptions"] == 0
    assert service["met_slo"] and service["pending_s"] < 1
    # Q = e / sigma - (e + p) - alpha: a service that just started has about -alpha to go
    assert service["q_s"] > -2 * 1.2
    host = live.get("/hosts")[0]
    assert (host["cpu_allocated"], host["memory_allocated"], host["class"]) == (512, 64 * 2**20, 3)


def test_cut_changes_the_running_containers_live(live: Live) -> None:
    for number in range(4):
        live.submit(f"s{number}", 4, "service", 700, "64m")
    for number in range(4):
        live.wait_resources(f"s{number}", (700, 64 * 2**20))
    before = {n: live.running(f"s{n}").id for n in range(4)}
    answer = live.submit("cutter", 2, "job", 400, "64m", ["sleep", "60"])
    decision = answer["decision"]
    assert decision["pass"] == "cut" and len(decision["cuts"]) == 4
    for number in range(4):  # 700 x 2/3 and 64 MiB x 2/3, rounded up
        live.wait_resources(f"s{number}", (467, 44739243))
        assert live.running(f"s{number}").id == before[number], "the container was not replaced"
    record = live.request("s0")
    assert record["current"] == {"cpu_shares": 467, "memory": 44739243}
    assert record["cut_received"] == "1/3"
    assert any(e["kind"] == "cut" and e["cpu_shares"] == 467 and e["by"] == "cutter"
               for e in record["history"])


def test_a_cut_is_given_back_live_when_its_cutter_ends(live: Live) -> None:
    """DESIGN 3.8 on a real node: "kept" (class 4, 1800 shares) is cut by 1/3 for the class-2
    job "cutter" (the host becomes class 2, limit 2389: 1200 + 600); when the job ends the
    host is class 4 again (limit 3072) and "kept" gets its 1800 shares and 64 MiB back, in
    the same container, with a `restored` event in its history."""
    live.submit("kept", 4, "service", 1800, "64m")
    live.wait_resources("kept", (1800, 64 * 2**20))
    container = live.running("kept").id
    answer = live.submit("cutter", 2, "job", 600, "64m", ["sleep", "4"])
    assert answer["decision"]["pass"] == "cut"
    assert [c["task"] for c in answer["decision"]["cuts"]] == ["kept"]
    live.wait_resources("kept", (1200, 44739243))  # 1800 and 64 MiB x 2/3, rounded up
    live.wait_status("cutter", "completed")
    live.wait_resources("kept", (1800, 64 * 2**20))  # docker inspect: HostConfig
    assert live.running("kept").id == container, "the container was not replaced"
    # the node applies the restore before the manager records it (manager/effects.py: the
    # agent's answer, then the event): wait for the record, not only for docker inspect
    poll(lambda: any(e["kind"] == "restored" for e in live.request("kept")["history"]), 10,
         "the restored event in kept's history")
    record = live.request("kept")
    assert record["current"] == {"cpu_shares": 1800, "memory": 64 * 2**20}
    assert record["cut_received"] == "0"
    restored = [e for e in record["history"] if e["kind"] == "restored"]
    assert len(restored) == 1
    assert (restored[0]["host"], restored[0]["applied"], restored[0]["cpu_shares"],
            restored[0]["memory"], restored[0]["cut_received"]) == (
        live.node_id, True, 1800, 64 * 2**20, "0")
    host = live.get("/hosts")[0]
    assert (host["cpu_allocated"], host["memory_allocated"], host["class"]) == (
        1800, 64 * 2**20, 4)


def test_kill_stops_the_victim_and_it_comes_back_with_its_original_resources(live: Live) -> None:
    live.stop_manager()  # victims are killed, not paused (DESIGN 3.14's default: below)
    live.settings.update({"GREENSWARM_POLICY_OPTIONS": "suspend=false"})
    live.start_manager()
    live.submit("victim", 4, "service", 700, "64m")
    old_container = live.running("victim").id
    live.submit("other", 4, "service", 700, "64m")
    live.submit("victim2", 4, "service", 700, "64m")
    response = live.node_put(
        f"/registry/hosts/{live.node_id}/utilization", {"cpu_util": 0.95, "memory_util": 0.2}
    )  # as the monitor would, with the node's credential
    assert response.status_code == 200 and response.json()["region"] == "EED"
    answer = live.submit("strict", 1, "service", 1500, "64m")
    assert answer["decision"]["pass"] == "kill" and answer["decision"]["kills"]
    killed = answer["decision"]["kills"]
    assert "victim" in killed
    poll(lambda: all(not live.containers(k) for k in killed), 60, "the victims to stop")
    assert live.request("victim")["status"] == "pending"
    assert live.delete("/requests/strict").status_code == 200  # room frees up...
    response = live.node_put(
        f"/registry/hosts/{live.node_id}/utilization", {"cpu_util": 0.1, "memory_util": 0.1}
    )  # ...and the monitor sees it
    assert response.json()["region"] == "LEE"
    record = live.wait_status("victim", "running")  # again: its history says it was killed
    live.wait_resources("victim", (700, 64 * 2**20))
    assert live.running("victim").id != old_container
    kinds = [e["kind"] for e in record["history"]]
    assert any(e["kind"] == "killed" and e["by"] == "strict" for e in record["history"])
    assert "queued" in kinds
    assert record["kills"] == 1
    # it waited: its availability shows it, once it runs again (alpha after its placement)
    poll(lambda: live.request("victim")["service"]["executed_s"] > 0, 10,
         "the victim to run again")
    service = live.request("victim")["service"]
    assert service["preemptions"] == 1 and 0 < service["availability"] < 1
    assert service["pending_s"] > 0 and service["slo"] == 0.5
    [listed] = [r for r in live.get("/requests") if r["id"] == "victim"]
    assert listed["service"]["preemptions"] == 1


def test_a_victim_is_paused_where_only_cpu_is_missing_and_resumes_in_the_same_container(
    live: Live,
) -> None:
    """DESIGN 3.14, the default: the class-1 request lacks only CPU on the node (memory fits
    beside the class-4 jobs), so its victims are suspended, not killed: the agent pauses their
    containers (`docker inspect`: State.Paused), which stay, booked with their memory and no
    CPU. When the class-1 request ends, the agent unpauses them: the same containers run on."""
    for name in ("j1", "j2", "j3"):
        live.submit(name, 4, "job", 700, "64m")
    containers = {name: live.running(name).id for name in ("j1", "j2", "j3")}
    response = live.node_put(
        f"/registry/hosts/{live.node_id}/utilization", {"cpu_util": 0.95, "memory_util": 0.2}
    )  # as the monitor would: EED, where the kill pass looks
    assert response.status_code == 200 and response.json()["region"] == "EED"
    answer = live.submit("strict", 1, "service", 1500, "64m")
    decision = answer["decision"]
    assert decision["pass"] == "kill" and not decision["kills"] and decision["suspends"]
    paused = decision["suspends"]

    def state(name: str) -> dict[str, Any]:
        [container] = live.containers(name, all_=True)
        container.reload()
        assert container.id == containers[name], "the same container, not a new one"
        return dict(container.attrs["State"])

    poll(lambda: all(state(name)["Paused"] for name in paused), 30, "the victims to pause")
    for name in paused:
        record = live.request(name)
        assert (record["status"], record["kills"]) == ("running", 0)
        assert [(e["by"], e["applied"]) for e in record["history"]
                if e["kind"] == "suspended"] == [("strict", True)]
    booked = {t["id"]: t for t in live.get("/hosts")[0]["tasks"]}
    assert all(booked[name]["suspended"] and booked[name]["cpu_shares"] == 0
               and booked[name]["memory"] == 64 * 2**20 for name in paused), booked
    # a paused task stopped by its client goes like any other (Docker stops a paused
    # container); the host's CPU is still short for the others: they stay paused
    gone, *paused = paused
    assert live.delete(f"/requests/{gone}").status_code == 200
    poll(lambda: not live.containers(gone, all_=True), 30, f"{gone}'s container to go")
    assert all(state(name)["Paused"] for name in paused)
    assert live.delete("/requests/strict").status_code == 200  # its CPU comes back
    poll(lambda: not any(state(name)["Paused"] for name in paused), 30,
         "the victims to run again")
    for name in paused:
        record = live.request(name)
        assert [(e["host"], e["applied"]) for e in record["history"]
                if e["kind"] == "resumed"] == [(live.node_id, True)]
        assert state(name)["Running"] and record["kills"] == 0


def test_a_pause_the_agent_missed_is_applied_by_its_reconciliation(live: Live) -> None:
    """The agent is down when the manager suspends a victim: the pause is booked, not yet
    applied (its history says so); the agent, back, pauses the container to what the registry
    books, and unpauses it when the booking says it runs again."""
    live.submit("j1", 4, "job", 1500, "64m")
    container = live.running("j1")
    response = live.node_put(
        f"/registry/hosts/{live.node_id}/utilization", {"cpu_util": 0.95, "memory_util": 0.2})
    assert response.json()["region"] == "EED"
    live.stop_agent()
    answer = live.submit("strict", 1, "service", 1500, "64m")
    assert answer["decision"]["suspends"] == ["j1"], answer["decision"]
    [suspended] = [e for e in live.request("j1")["history"] if e["kind"] == "suspended"]
    assert suspended["applied"] is False and "not yet applied" in suspended["reason"]
    live.start_agent()

    def paused() -> bool:
        container.reload()
        return bool(container.attrs["State"]["Paused"])

    poll(paused, 30, "the agent's reconciliation to pause j1")
    live.stop_agent()
    assert live.delete("/requests/strict").status_code == 200  # resumed in the books only
    assert paused()
    live.start_agent()
    poll(lambda: not paused(), 30, "the agent's reconciliation to unpause j1")
    assert live.request("j1")["status"] == "running"


def test_a_kill_on_request_stops_the_task_and_places_it_again(live: Live) -> None:
    """Message 7 on the manager (POST /registry/tasks/{id}/kill): its service goes, the task
    waits in the pending queue (its resubmission may not use the host it was taken from, the
    only one here) and a later retry places it again, in a new container."""
    live.submit("target", 3, "service", 300, "64m")
    old_container = live.running("target").id
    response = live.post("/registry/tasks/target/kill", {})
    assert response.status_code == 202, response.text
    poll(lambda: live.request("target")["kills"] == 1, 30, "the kill to be recorded")
    record = live.wait_status("target", "running")  # what it is now (issue 28, item 7)
    events = record["history"]
    killed = [e for e in events if e["kind"] == "killed" and e["host"] == live.node_id]
    assert len(killed) == 1 and killed[0]["kills"] == 1 and record["kills"] == 1
    assert "by" not in killed[0]  # on request: it made room for nothing
    assert any(e["kind"] == "queued" and e["queue_reason"] == "victim" for e in events)

    def replaced() -> bool:
        running = [c.id for c in live.containers("target")]
        return len(running) == 1 and running[0] != old_container

    poll(replaced, 60, "the old container to go and a new one to run")
    live.wait_resources("target", (300, 64 * 2**20))
    host = live.get("/hosts")[0]
    assert (host["cpu_allocated"], host["memory_allocated"], host["task_count"]) == (
        300, 64 * 2**20, 1)


def test_each_placement_records_when_its_container_starts(live: Live) -> None:
    """DESIGN 3.10, 3.11: alpha is measured live. Each placement gets one `started` event, dated
    when Swarm saw its container run (between the placement and the moment it was recorded), and
    a later placement's measured allocation time is charged as waiting (C > 0)."""
    live.submit("timed", 3, "service", 300, "64m")
    first = live.running("timed")

    def starts() -> list[dict[str, Any]]:
        return [e for e in live.request("timed")["history"] if e["kind"] == "started"]

    poll(lambda: len(starts()) == 1, 30, "the first start to be recorded")
    history = live.request("timed")["history"]
    placed = [e for e in history if e["kind"] == "placed"]
    started = starts()[0]
    assert started["host"] == live.node_id and started["t"] >= placed[0]["t"]
    first.reload()
    container_start = _docker_time(first.attrs["State"]["StartedAt"])
    assert abs(started["t"] - container_start) < 2.0, (started, container_start)

    assert live.post("/registry/tasks/timed/kill", {}).status_code == 202
    poll(lambda: len(starts()) == 2, 90, "the second placement's start to be recorded")
    history = live.request("timed")["history"]
    placed = [e for e in history if e["kind"] == "placed"]
    second = starts()[1]
    assert len(placed) == 2 and second["t"] >= placed[1]["t"] > started["t"]
    service = live.request("timed")["service"]
    assert service["preemptions"] == 1 and service["overhead"] > 0
    # the measured allocation time, placement to start, is what the record charges
    measured = second["t"] - placed[1]["t"]
    assert service["overhead"] == pytest.approx(
        measured / (service["executed_s"] + measured), rel=0.05, abs=1e-3)


def _docker_time(raw: str) -> float:
    from manager.swarm import swarm_time
    value = swarm_time(raw)
    assert value is not None, raw
    return value


def test_finished_job_frees_its_room_and_leaves_no_container_or_volume(live: Live) -> None:
    live.submit(
        "batch",
        2,
        "job",
        300,
        "32m",
        ["sh", "-c", "echo data > /data/out; sleep 2"],
        volumes=["/data"],
    )
    container = live.running("batch")
    volumes = [m["Name"] for m in container.attrs["Mounts"] if m["Type"] == "volume"]
    assert len(volumes) == 1
    record = live.wait_status("batch", "completed")
    assert record["history"][-1]["kind"] == "ended"
    assert (record["history"][-1]["status"], record["history"][-1]["exit_code"]) == (
        "completed", 0)
    host = live.get("/hosts")[0]
    assert (host["cpu_allocated"], host["task_count"]) == (0, 0)
    poll(lambda: not live.containers("batch", all_=True), 30, "the container to be removed")
    names = {v.name for v in live.docker.volumes.list()}
    assert volumes[0] not in names, "the anonymous volume was left behind"
    assert not [s for s in live.docker.services.list() if s.name == f"{live.prefix}-batch"]


def test_failed_job_is_recorded_as_failed(live: Live) -> None:
    live.submit("broken", 3, "job", 100, "16m", ["sh", "-c", "exit 3"])
    record = live.wait_status("broken", "failed")
    assert record["history"][-1].get("exit_code") in (3, "3")


def test_unplaceable_request_is_refused_or_queued_until_room_frees(live: Live) -> None:
    live.submit("big", 1, "service", 2000, "64m")
    refused = live.submit("late", 1, "job", 100, "16m")
    assert refused["request"]["status"] == "rejected"
    assert refused["decision"]["placed"] is False and refused["decision"]["reason"]
    assert not live.containers("late")
    # class 2: admitted (DESIGN 3.13: 2000 + 5/6 x 100 of the 2389 shares class 2 books; a
    # class-1 request would be refused at the door, see the admission test below)
    queued = live.submit("patient", 2, "job", 100, "16m", ["sleep", "30"], queue=True)
    assert queued["request"]["status"] == "pending"
    assert queued["decision"]["placed"] is False and queued["decision"]["reason"]
    assert live.get("/healthz")["pending"] == 1
    live.delete("/requests/big")
    live.wait_status("patient", "running")
    live.running("patient")


def test_agent_restart_loses_no_task(live: Live) -> None:
    live.submit("steady", 4, "service", 700, "64m")
    live.wait_resources("steady", (700, 64 * 2**20))
    live.stop_agent()
    # While the agent is down: a job ends, and a service starts without its CPU shares.
    live.submit("quick", 3, "job", 200, "16m", ["sleep", "1"])
    live.submit("newcomer", 3, "service", 256, "32m")
    newcomer = live.running("newcomer")
    newcomer.reload()
    assert newcomer.attrs["HostConfig"]["CpuShares"] in (0, 1024)  # nobody set them yet
    live.start_agent()
    live.wait_resources("newcomer", (256, 32 * 2**20))
    live.wait_resources("steady", (700, 64 * 2**20))
    live.wait_status("quick", "completed")
    tasks = {t["task"] for t in live.get_agent_tasks()}
    assert {"steady", "newcomer"} <= tasks


def test_manager_restart_loses_no_request(live: Live) -> None:
    live.submit("keep", 2, "service", 1500, "64m")
    live.submit("waiting", 1, "job", 1000, "16m", ["sleep", "20"], queue=True)
    # settled first: the reconciliation records keep's container start a moment later
    poll(lambda: any(e["kind"] == "started" for e in live.request("keep")["history"]), 30,
         "keep's start to be recorded")
    before = {name: live.request(name) for name in ("keep", "waiting")}
    assert before["waiting"]["status"] == "pending"
    live.stop_manager()
    live.start_manager()
    for name, record in before.items():
        after = live.request(name)
        assert (after["status"], after["host"], after["history"]) == (
            record["status"],
            record["host"],
            record["history"],
        )
    assert live.get("/healthz")["pending"] == 1
    assert live.delete("/requests/keep").status_code == 200
    live.wait_status("waiting", "running")


BAD_REQUESTS = [
    ("image", {"image": ""}),
    ("image", {"image": None}),
    ("cpu_shares", {"cpu_shares": "512"}),
    ("cpu_shares", {"cpu_shares": 1}),
    ("cpu_shares", {"cpu_shares": 10**9}),
    ("memory", {"memory": -5}),
    ("memory", {"memory": "lots"}),
    ("memory", {"memory": "900g"}),
    ("memory", {"memory": True}),
    ("class", {"class": 0}),
    ("class", {"class": 5}),
    ("class", {"class": "2"}),
    ("type", {"type": "batch"}),
    ("type", {"type": None}),
    ("name", {"name": "../etc"}),
    ("queue", {"queue": "yes"}),
    ("command", {"command": 42}),
    ("env.1BAD", {"env": {"1BAD": "x"}}),
    ("ports[0]", {"ports": ["eighty"]}),
    ("surprise", {"surprise": 1}),
    # accepted, then failed on the Swarm, before (issue 15, item 3)
    ("env.BIG", {"env": {"BIG": "v" * 10**6}}),
    ("env.BIG", {"env": {"BIG": "v" * 40_000}}),
    ("volumes[0]", {"volumes": ["/"]}),
    ("command[1]", {"command": ["echo", "a\x00b"]}),
]


@pytest.mark.parametrize(("field", "change"), BAD_REQUESTS, ids=[f for f, _ in BAD_REQUESTS])
def test_bad_field_is_refused_with_400_and_nothing_is_created(
    live: Live, field: str, change: dict[str, object]
) -> None:
    body: dict[str, object] = {
        "image": "greenswarm/busybox:latest",
        "cpu_shares": 100,
        "memory": "16m",
        "type": "job",
        "class": 2,
        "name": "bad",
    }
    body.update(change)
    response = live.post("/requests", body)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == field
    assert live.get("/requests") == []
    assert live.get("/healthz")["pending"] == 0
    assert live.get("/hosts")[0]["task_count"] == 0
    assert not [s for s in live.docker.services.list() if s.name.startswith(live.prefix)]


def test_missing_image_and_bad_json_are_400(live: Live) -> None:
    response = live.post(
        "/requests", {"cpu_shares": 100, "memory": "16m", "type": "job", "class": 2}
    )
    assert response.status_code == 400 and response.json()["field"] == "image"
    import requests

    raw = requests.post(
        live.url + "/requests",
        data="{not json",
        timeout=10,
        headers={**live.headers(), "Content-Type": "application/json"},
    )
    assert raw.status_code == 400 and raw.json()["field"] == "body"


def test_hostile_bodies_are_bounded_by_the_served_apps(live: Live) -> None:
    """The audit's bodies against the manager and the agent as they are served (waitress):
    400 naming the body, 413 with the JSON error (also for a chunked body, which declares no
    length), and past 4 x the limit waitress refuses it unread; never a 500."""
    import requests

    headers = {**live.headers(), "Content-Type": "application/json"}
    deep_env = '{"env": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}"
    answer = requests.post(live.url + "/requests", data=deep_env, headers=headers, timeout=30)
    assert (answer.status_code, answer.json()["field"]) == (400, "body"), answer.text
    deep_list = "[" * 50_000 + "]" * 50_000
    answer = requests.put(f"{live.agent_url}/agent/tasks/x/resources", data=deep_list,
                          headers={**live.agent_headers(), "Content-Type": "application/json"},
                          timeout=30)
    assert (answer.status_code, answer.json()["field"]) == (400, "body"), answer.text
    big = b'{"image": "' + b"a" * 2**21 + b'"}'
    node = {**live.node_headers(), "Content-Type": "application/json"}  # a monitor's route
    for url, sent in ((live.url + "/requests", headers), (live.url + "/registry/hosts", node)):
        answer = requests.post(url, data=big, headers=sent, timeout=30)
        assert answer.status_code == 413 and answer.json()["error"] == "too-large", answer.text
        chunks = iter([big[: 2**20], big[2**20 :]])  # a generator body is sent chunked
        answer = requests.post(url, data=chunks, headers=sent, timeout=30)
        assert answer.status_code == 413 and answer.json()["error"] == "too-large", answer.text
    huge = b"a" * (4 * 2**20 + 1)
    answer = requests.post(live.url + "/requests", data=huge, headers=headers, timeout=30)
    assert answer.status_code == 413
    assert live.get("/requests") == []


def test_mutating_calls_need_the_token(live: Live) -> None:
    body = {
        "image": "greenswarm/busybox:latest",
        "cpu_shares": 100,
        "memory": "16m",
        "type": "job",
        "class": 2,
    }
    assert live.post("/requests", body, auth=False).status_code == 401
    import requests

    wrong = requests.post(
        live.url + "/requests", json=body, timeout=10, headers={"Authorization": "Bearer nope"}
    )
    assert wrong.status_code == 401
    assert (
        requests.put(
            f"{live.agent_url}/agent/tasks/x/resources",
            timeout=10,
            json={"cpu_shares": 2, "memory": 2**23},
        ).status_code
        == 401
    )
    assert live.get("/requests") == []


def test_fifty_concurrent_submissions_never_overbook_a_host(live: Live) -> None:
    """DESIGN 9: under 50 concurrent submissions no host exceeds M(class) x capacity; a reader
    checks the registry all along, and once more at the end."""
    import random
    import threading

    factor = {1: 1.0, 2: 7 / 6, 3: 4 / 3, 4: 3 / 2}
    violations: list[str] = []
    answers: list[int] = []
    stop = threading.Event()

    def check() -> None:
        for host in live.get("/registry/hosts"):
            if host["class"] is not None:
                limit = host["cpu_capacity"] * factor[host["class"]]
                if host["cpu_allocated"] > limit:
                    violations.append(f"{host['cpu_allocated']} > {limit} (class {host['class']})")

    answered_at_reads: list[int] = []  # how many POSTs had been answered at each check
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                check()
                answered_at_reads.append(len(answers))
        except BaseException as exc:  # reported by the test, not lost with the thread
            errors.append(exc)

    def submit(number: int) -> None:
        rng = random.Random(number)
        response = live.post("/requests", {
            "image": "greenswarm/busybox:latest", "name": f"c{number}",
            "class": rng.randint(1, 4), "type": rng.choice(["job", "service"]),
            "cpu_shares": rng.randint(50, 600), "memory": "8m", "command": ["sleep", "120"]})
        answers.append(response.status_code)

    watcher = threading.Thread(target=reader)
    watcher.start()
    workers = [threading.Thread(target=submit, args=(n,)) for n in range(50)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    stop.set()
    watcher.join(timeout=30)
    assert not errors, errors[:1]
    assert any(0 < n < 50 for n in answered_at_reads), \
        "the reader must have checked while the submissions ran"
    check()
    assert answers.count(201) == 50
    assert not violations, violations[:3]
    statuses = [record["status"] for record in live.get("/requests")]
    assert statuses.count("running") >= 5 and "rejected" in statuses

    # The books equal the running tasks once the manager has carried out every decision (a
    # start is booked before its record says so). A victim placed again from the pending
    # queue is running again.
    booked: list[tuple[int, int]] = []

    def books_match() -> bool:
        host = live.get("/hosts")[0]["cpu_allocated"]
        records = live.get("/requests")  # every request of this manager, in one read
        running = sum(r["current"]["cpu_shares"] for r in records
                      if r["status"] == "running")
        booked.append((host, running))
        return host == running

    try:
        poll(books_match, 30.0, "the host's allocation to equal its running tasks'")
    except TimeoutError as exc:
        raise AssertionError(f"(allocated, running) last read: {booked[-3:]}") from exc
    check_records_registry_and_containers_agree(live)


def test_swarm_policy_lets_swarm_place_and_refuses_what_it_cannot_start(live: Live) -> None:
    live.stop_manager()
    live.settings.update({"GREENSWARM_POLICY": "swarm", "GREENSWARM_SWARM_PENDING_TIMEOUT_S": "5"})
    live.start_manager()
    answer = live.submit("chosen", 2, "service", 300, "32m")
    assert answer["decision"] is None  # Swarm decides, not us
    record = live.wait_status("chosen", "running", timeout_s=30)
    assert record["host"] == live.node_id
    service = live.docker.services.get(f"{live.prefix}-chosen")
    resources = service.attrs["Spec"]["TaskTemplate"]["Resources"]
    assert resources["Reservations"] == {"NanoCPUs": 300 * 10**9 // 1024, "MemoryBytes": 32 * 2**20}
    # No placement decision of ours: only the managed set (one node here) constrains Swarm.
    placement = service.attrs["Spec"]["TaskTemplate"].get("Placement", {})
    assert placement.get("Constraints") == [f"node.id=={live.node_id}"]
    assert live.get("/hosts")[0]["cpu_allocated"] == 300  # booked once Swarm started it
    # Reservations beyond what the engine has left (2 CPUs): Swarm keeps the second one
    # pending, and we refuse it once the timeout passes.
    live.submit("first", 2, "service", 1700, "32m")
    live.wait_status("first", "running", timeout_s=30)
    live.submit("second", 2, "service", 1700, "32m")
    record = live.wait_status("second", "rejected", timeout_s=30)
    assert record["history"][-1]["kind"] == "rejected"
    assert record["history"][-1]["policy"] == "swarm"
    assert not live.docker.services.list(filters={"name": f"{live.prefix}-second"})


def test_a_crashing_service_keeps_its_place_while_swarm_restarts_it(live: Live) -> None:
    live.submit("flaky", 3, "service", 300, "32m", ["sh", "-c", "sleep 2; exit 1"])
    first = live.running("flaky").id
    poll(lambda: any(c.id != first for c in live.containers("flaky")), 60,
         "Swarm to restart the service in a new container")
    poll(lambda: any(e["kind"] == "exited" and e["exit_code"] == 1
                     for e in live.request("flaky")["history"]), 30,
         "the agent's report of the exit")
    live.wait_resources("flaky", (300, 32 * 2**20))  # the new container got its shares too
    record = live.request("flaky")
    assert record["status"] == "running"
    assert live.get("/hosts")[0]["cpu_allocated"] == 300


def test_an_out_of_memory_kill_is_reported_as_such(live: Live) -> None:
    # dd keeps 64 MiB in one buffer: a 16 MiB limit makes the kernel kill it.
    live.submit("greedy", 3, "job", 100, "16m", ["dd", "if=/dev/zero", "of=/dev/null",
                                                  "bs=64M", "count=4"])
    record = live.wait_status("greedy", "failed")
    ended = record["history"][-1]
    assert (ended["kind"], ended["status"], ended.get("oom")) == ("ended", "failed", True)


def test_an_out_of_memory_kill_stays_one_when_swarm_sees_the_end_first(live: Live) -> None:
    # The manager's reconciliation (every second here) can see Swarm's task failed before the
    # node's agent reports the exit; only the agent's report says "out of memory". Stopping
    # the agent makes that order certain: Swarm shows the job failed for several
    # reconciliations before the agent, started again, reports it. Swarm's state must not
    # end the job meanwhile (it did: the end then said nothing of the memory).
    live.stop_manager()
    live.settings["GREENSWARM_EXIT_REPORT_GRACE_S"] = "60"
    live.start_manager()
    live.stop_agent()
    live.submit("greedy", 3, "job", 100, "16m", ["dd", "if=/dev/zero", "of=/dev/null",
                                                  "bs=64M", "count=4"])
    service = live.docker.services.get(f"{live.prefix}-greedy")
    poll(lambda: any(t["Status"]["State"] == "failed" for t in service.tasks()), 60,
         "Swarm to show the job failed")
    time.sleep(3)  # three reconciliations see it failed, with no report from the agent
    assert live.request("greedy")["status"] not in ("failed", "completed")
    live.start_agent()
    record = live.wait_status("greedy", "failed")
    ended = record["history"][-1]
    assert (ended["kind"], ended["status"], ended.get("oom")) == ("ended", "failed", True)


def test_listing_tasks_survives_a_service_removed_meanwhile(
    live: Live, docker_socket: str, busybox_image: str
) -> None:
    """Reconciliation lists our services, then their tasks; a service removed in between
    (by a kill, or by hand) must not make the whole listing fail."""
    backend = SwarmBackend(f"unix://{docker_socket}", f"{live.prefix}-")
    kept, gone, other = (
        live.docker.services.create(busybox_image, ["sleep", "300"], name=f"{live.prefix}-{n}")
        for n in ("kept", "gone", "other")
    )
    try:
        poll(lambda: all(live.docker.api.tasks(filters={"service": [s.id]}) for s in (kept, other)),
             30.0, "a task of each service")
        gone.remove()
        with pytest.raises(docker.errors.NotFound):  # the engine refuses the whole filter
            live.docker.api.tasks(filters={"service": [kept.id, gone.id]})
        tasks = backend.tasks_by_service([kept.id, gone.id])
        assert kept.id in tasks and other.id not in tasks  # (gone's tasks may still be listed)
        assert set(tasks) <= {kept.id, gone.id}
        for service_id, listed in tasks.items():
            assert all(task["ServiceID"] == service_id for task in listed)
    finally:
        kept.remove()
        other.remove()
        backend.close()


# -- records, registry and containers agree (issue 15, item 1) --------------------------------


def test_what_the_node_applied_reaches_the_record_and_the_registry(live: Live) -> None:
    """A node that applied a booked cut later (the container did not exist yet) reports what
    it really applied (message 6, PUT /registry/tasks/{id}/resources; a memory cut may stop at
    the task's use plus a margin): the request's record says the same as the registry."""
    live.submit("applied", 4, "service", 600, "64m")
    live.wait_resources("applied", (600, 64 * 2**20))
    response = live.put("/registry/tasks/applied/resources",
                        {"cpu_shares": 400, "memory": 50_000_000})
    assert response.status_code == 200, response.text
    record = live.request("applied")
    task = live.get("/registry/tasks/applied")
    assert record["current"] == {"cpu_shares": 400, "memory": 50_000_000}
    assert (task["cpu_shares"], task["memory"]) == (400, 50_000_000)
    poll(lambda: any(e["kind"] == "cut" and e.get("applied") and e.get("memory") == 50_000_000
                     for e in live.request("applied")["history"]), 10,
         "the record's history to say what the node applied")


def check_records_registry_and_containers_agree(live: Live, timeout_s: float = 30.0) -> None:
    """Every running request's record shows what the registry books for its task, and its
    container has what the registry books (the agent applies cuts asynchronously). A request
    that ends while this looks is skipped: there is nothing left to agree on."""
    last: list[str] = []

    def agree() -> bool:
        last.clear()
        for record in live.get("/requests"):
            if record["status"] != "running":
                continue
            answer = requests.get(f"{live.url}/registry/tasks/{record['id']}", timeout=30,
                                  headers=live.headers())
            containers = live.containers(record["id"])
            if answer.status_code == 404 or len(containers) != 1:
                continue  # it ended (or its next container is not there yet)
            task = answer.json()
            container = containers[0]
            container.reload()
            config = container.attrs["HostConfig"]
            booked = (task["cpu_shares"], task["memory"])
            shown = (record["current"]["cpu_shares"], record["current"]["memory"])
            running = (int(config["CpuShares"]), int(config["Memory"]))
            if not booked == shown == running:
                last.append(f"{record['id']}: registry {booked}, record {shown}, "
                            f"container {running}")
        return not last

    try:
        poll(agree, timeout_s, "records, registry and containers to agree")
    except TimeoutError as exc:
        raise AssertionError("; ".join(last[:5])) from exc


# -- only Swarm nodes are hosts; pause and drain as Swarm means them (issue 15, items 5, 6) -----


def set_availability(live: Live, availability: str) -> None:
    node = live.docker.nodes.get(live.node_id)
    node.update({**node.attrs["Spec"], "Availability": availability})


def test_a_host_that_is_not_a_swarm_node_is_refused_and_gets_nothing(live: Live) -> None:
    # a monitor with a valid credential for a node id the Swarm does not have
    response = live.node_post("/registry/hosts", {"id": "phantom1", "cpu_capacity": 2**20,
                                                  "memory_capacity": 2**40}, "phantom1")
    assert response.status_code == 409, response.text
    assert response.json()["error"] == "conflict" and "phantom1" in response.json()["message"]
    assert [h["id"] for h in live.get("/registry/hosts")] == [live.node_id]
    answer = live.submit("small", 3, "service", 256, "16m")
    assert answer["request"]["host"] == live.node_id


def test_a_paused_node_keeps_its_tasks_and_takes_no_new_one(live: Live) -> None:
    live.submit("keeper", 3, "service", 300, "32m")
    container = live.running("keeper").id
    set_availability(live, "pause")
    try:
        time.sleep(3.0)  # the manager syncs every second here
        answer = live.submit("newcomer", 3, "service", 300, "32m", queue=True)
        assert not answer["decision"]["placed"] and answer["request"]["status"] == "pending"
        time.sleep(18.0)  # longer than a lost node's grace: a paused one is not lost
        record = live.request("keeper")
        assert (record["status"], record["kills"]) == ("running", 0)
        assert live.running("keeper").id == container
        assert live.request("newcomer")["status"] == "pending"
    finally:
        set_availability(live, "active")
    live.wait_status("newcomer", "running", timeout_s=30)


def test_a_drained_node_loses_its_tasks_at_once_and_its_monitor_cannot_register_it(
    live: Live,
) -> None:
    live.submit("mover", 3, "service", 300, "32m")
    live.running("mover")
    host = live.get("/registry/hosts")[0]
    set_availability(live, "drain")
    try:
        record = live.wait_status("mover", "pending", timeout_s=8)  # no 15 s grace for a drain
        assert record["kills"] == 1
        assert any(e["kind"] == "host-lost" for e in record["history"])
        poll(lambda: not live.get("/registry/hosts"), 10, "the drained host to leave")
        again = live.node_post("/registry/hosts", {
            "id": live.node_id, "cpu_capacity": host["cpu_capacity"],
            "memory_capacity": host["memory_capacity"], "address": host["address"]})
        assert again.status_code == 409, again.text  # a monitor cannot bring it back
        time.sleep(3.0)
        assert not live.get("/registry/hosts")
    finally:
        set_availability(live, "active")
    live.wait_status("mover", "running", timeout_s=30)


def test_the_cli_names_nodes_by_hostname_and_stops_requests(
    live: Live, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 21: hostnames where node ids were, `greenswarm stop ID...`, `--volume`."""
    from cli.main import main
    from tests.support.live import TOKEN

    monkeypatch.setenv("GREENSWARM_TOKEN", TOKEN)
    hostname = live.docker.info()["Name"]  # what `docker node ls` prints for this node
    url = ["--url", live.url]
    assert main(["submit", "busybox", "--cpu-shares", "256", "--memory", "32m", "--class", "3",
                 "--type", "service", "--name", "cli1", "--volume", "/data", *url,
                 "--", "sleep", "600"]) == 0
    assert live.request("cli1")["spec"]["volumes"] == ["/data"]
    capsys.readouterr()
    assert main(["hosts", *url]) == 0
    out = capsys.readouterr().out
    assert hostname in out and live.node_id not in out
    assert main(["hosts", "--ids", *url]) == 0
    assert live.node_id in capsys.readouterr().out
    assert main(["status", *url]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cli1 ")]
    assert hostname in row and live.node_id not in row
    assert main(["status", "cli1", *url]) == 0
    assert f"host {hostname} ({live.node_id})" in capsys.readouterr().out
    assert main(["stop", "cli1", "nosuch", *url]) == 1  # one of them could not be stopped
    out, err = capsys.readouterr()
    assert "cli1: stopped" in out and "nosuch: not stopped" in err
    assert live.request("cli1")["status"] == "stopped"


def test_events_follow_every_request_with_a_cursor(
    live: Live, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """GET /events and `greenswarm events`: every request's typed events, oldest first, and a
    cursor that returns only what came after it."""
    from cli.main import main
    from tests.support.live import TOKEN

    first = live.get("/events?since=0")
    assert first["events"] == [] and live.get("/events?since=$")["events"] == []
    live.submit("e1", 3, "service", 256, "32m")
    page = live.get("/events?since=0")
    kinds = [(e["request"], e["kind"]) for e in page["events"]]
    assert kinds[:2] == [("e1", "submitted"), ("e1", "placed")]
    cursor = page["next"]
    assert live.get(f"/events?since={cursor}")["events"] == []  # nothing after it yet
    live.delete("/requests/e1")
    later = live.get(f"/events?since={cursor}")["events"]
    assert [e["kind"] for e in later] == ["stopped"] and later[0]["request"] == "e1"
    for bad in ("since=abc", "limit=0", "limit=x", "other=1"):
        answer = requests.get(f"{live.url}/events?{bad}", headers=live.headers(), timeout=30)
        assert answer.status_code == 400, bad
    monkeypatch.setenv("GREENSWARM_TOKEN", TOKEN)
    capsys.readouterr()
    assert main(["events", "--url", live.url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in lines] == ["submitted", "placed", "stopped"]
    assert live.docker.info()["Name"] in lines[1]  # the host by its name


def test_a_request_killed_and_placed_again_is_running_in_status_and_metrics(
    live: Live, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28, item 7: a request killed and placed again kept `killed-and-rescheduled` for
    good, in `greenswarm status` and out of greenswarm_requests{status="running"}. Its status
    is what it is now; its history and kill count say it was killed. The metrics also carry
    the cluster's kWh and its class's SLO state."""
    from cli.main import main
    from tests.support.live import TOKEN

    live.submit("again", 2, "service", 300, "64m")
    assert live.post("/registry/tasks/again/kill", {}).status_code == 202
    poll(lambda: live.request("again")["kills"] == 1, 30, "the kill to be recorded")
    record = live.wait_status("again", "running", "killed-and-rescheduled", timeout_s=60)
    assert record["status"] == "running", record["status"]
    assert [e["kind"] for e in record["history"]].count("killed") == 1
    monkeypatch.setenv("GREENSWARM_TOKEN", TOKEN)
    capsys.readouterr()
    assert main(["status", "again", "--url", live.url]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("again  running  class 2"), first
    assert main(["status", "--status", "running", "--ids", "--url", live.url]) == 0
    assert "again" in capsys.readouterr().out
    text = requests.get(live.url + "/metrics", headers=live.headers(), timeout=30).text
    assert 'greenswarm_requests{status="running"} 1.0' in text
    assert 'greenswarm_energy_kwh_total{source="estimated"}' in text
    states = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith('greenswarm_slo_requests{class="2"')}
    assert sum(states.values()) == 1.0, states  # counted once, in one state


def test_a_request_refused_at_admission_gets_503_retry_after_and_leaves_nothing(
    live: Live,
) -> None:
    """DESIGN 3.13 under qos (admission control on by default): the node books 2048 shares for
    class 1. Two class-1 services of 1024 are admitted and run; a third (512) would bring the
    class-1 demand to 2560: 503, Retry-After (no admitted request says when it ends: the
    retry interval, at least 5 s), a body naming class, resource and demand against the room,
    no record, a typed event in the stream, a count in the metrics. A class-4 request is still
    admitted beside them (it waits: less important classes never block the more important),
    and a request that does not ask to queue is not subject to the door."""
    live.stop_manager()
    live.settings.update({"GREENSWARM_POLICY": "qos"})
    live.start_manager()
    for name in ("g1", "g2"):
        assert live.submit(name, 1, "service", 1024, "32m")["decision"]["placed"]
    body = {"image": "greenswarm/busybox:latest", "name": "g3", "class": 1,
            "type": "service", "cpu_shares": 512, "memory": "32m", "command": ["sleep", "60"]}
    refused = live.post("/requests", body)
    assert refused.status_code == 503, refused.text
    assert int(refused.headers["Retry-After"]) >= 5
    answer = refused.json()
    assert answer["error"] == "unavailable"
    assert answer["message"] == "admission: class-1 CPU demand 1.25 x the bookable room"
    assert {k: answer["admission"][k] for k in ("class", "resource", "demand", "room")} == {
        "class": 1, "resource": "cpu", "demand": 2560.0, "room": 2048.0}
    assert requests.get(f"{live.url}/requests/g3", headers=live.headers(),
                        timeout=30).status_code == 404  # nothing recorded
    events = [e for e in live.get("/events?since=0")["events"] if e["request"] == "g3"]
    assert [e["kind"] for e in events] == ["refused-at-admission"]
    assert (events[0]["resource"], events[0]["demand"], events[0]["room"]) == (
        "cpu", 2560.0, 2048.0)
    metrics = requests.get(f"{live.url}/metrics", headers=live.headers(), timeout=30).text
    assert 'greenswarm_admission_refusals_total{class="1",resource="cpu"} 1.0' in metrics
    # the same name may come again (nothing was recorded), here without asking to queue
    later = live.post("/requests", {**body, "queue": False})
    assert later.status_code == 201 and not later.json()["decision"]["placed"]
    waiting = live.submit("low", 4, "job", 1024, "32m")
    assert waiting["request"]["status"] == "pending"  # admitted: it waits for room
