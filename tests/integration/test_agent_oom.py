"""The agent's out-of-memory report when Docker's ``die`` comes before its ``oom`` (issue 28
item 10), on a real Docker engine, a real agent and the real registry on a real Redis.

Docker 20.10 sets ``State.OOMKilled`` only when the kernel's OOM notice reaches it before the
exit; under load on cgroup v1 the exit can win, and then the ``die`` event and the container's
state say nothing of memory, and the ``oom`` event follows. The kernel's timing cannot be forced,
so the test builds that state for real: a container of ours is killed with SIGKILL (the OOM
killer's signal: exit code 137, ``State.OOMKilled`` false, exactly what Docker shows when the
exit beats the notice), and the agent is fed the engine's real ``die`` event of it, then an
``oom`` event in Docker's shape for it (the one stand-in: Docker emits that event only for a
real OOM kill). On main the agent reported the exit at once, without "out of memory", and
removed the container, so the late notice found nothing."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import docker
import pytest
import requests
from werkzeug.serving import make_server

from domain.credentials import node_credential
from domain.labels import DOCKER_API_VERSION, LABEL_TASK
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer, wait_for
from manager.records import RequestRecords
from task_registry.agent import Agent, AgentSettings, ManagerLink
from task_registry.standalone import create_registry_app

pytestmark = [pytest.mark.docker, pytest.mark.redis]
TOKEN = "oom-token"
NODE_SECRET = "oom-node-secret"
GRACE_S = 3.0
_numbers = itertools.count()


class EndReports:
    """WSGI middleware in front of the real registry app that keeps the bodies of the end
    reports it answered (an observer, not a replacement)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.bodies: list[tuple[str, dict[str, Any], int]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(raw)
        path = environ["PATH_INFO"]

        def recording(status: str, headers: Any, *rest: Any) -> Any:
            if path.endswith("/end"):
                with self.lock:
                    self.bodies.append((path, json.loads(raw), int(status.split()[0])))
            return start_response(status, headers, *rest)

        return self.app(environ, recording)

    def of(self, task_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return [b for p, b, s in self.bodies if p == f"/registry/tasks/{task_id}/end"
                    and s == 200]


@dataclass
class Node:
    registry_url: str
    reports: EndReports
    store: RedisStore
    docker: Any
    image: str
    socket: str

    def book(self, task_id: str) -> None:
        """Booked as a scheduler books it: the manager recorded the request, then placed it."""
        self.store.sibling(RequestRecords).create(task_id, {
            "image": "busybox", "class": 3, "type": "job", "cpu_shares": 100,
            "memory": 16 * 2**20})
        body = {"request": {"id": task_id, "class": 3, "type": "job", "cpu_shares": 100,
                            "memory": 16 * 2**20}, "host": "n1"}
        answer = requests.post(f"{self.registry_url}/registry/placements", json=body,
                               headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert answer.status_code == 201, answer.text

    def agent(self) -> Agent:
        settings = AgentSettings(node_secret=NODE_SECRET, node_id="n1", oom_grace_s=GRACE_S,
                                 docker_url=f"unix://{self.socket}")
        return Agent(settings, ManagerLink(self.registry_url, node_credential(NODE_SECRET, "n1")))

    def killed_container(self, task_id: str) -> tuple[Any, dict[str, Any]]:
        """A container of ``task_id`` killed with SIGKILL, and the engine's real die event."""
        since = int(time.time()) - 1
        container = self.docker.containers.run(
            self.image, ["sleep", "300"], detach=True, labels={LABEL_TASK: task_id},
            name=f"gs-oomtest-{task_id}")
        container.kill(signal="SIGKILL")
        assert container.wait(timeout=30)["StatusCode"] == 137
        container.reload()
        state = container.attrs["State"]
        assert (state["ExitCode"], state["OOMKilled"]) == (137, False)
        events = self.docker.events(since=since, until=int(time.time()) + 1, decode=True,
                                    filters={"type": "container", "container": container.id})
        die = next(e for e in events if e.get("Action") == "die")
        return container, die


def oom_event_for(die: dict[str, Any]) -> dict[str, Any]:
    """Docker's oom event of the same container, in the shape the engine sends (its die
    event's, without the exit code)."""
    attributes = {k: v for k, v in die["Actor"]["Attributes"].items() if k != "exitCode"}
    return {**die, "status": "oom", "Action": "oom",
            "Actor": {"ID": die["Actor"]["ID"], "Attributes": attributes},
            "time": die["time"], "timeNano": die["timeNano"] + 1_000_000}


def replay(agent: Agent, *timed: tuple[float, dict[str, Any]]) -> None:
    """The agent's own event loop (Agent._follow_events), fed these events from its Docker
    client's event stream, each after its delay."""

    def stream(**_: Any) -> Iterator[dict[str, Any]]:
        for delay_s, event in timed:
            time.sleep(delay_s)
            yield event

    agent.client.events = stream
    agent._follow_events()


@pytest.fixture
def node(redis_srv: RedisServer, docker_socket: str, busybox_image: str) -> Iterator[Node]:
    store = RedisStore.from_url(redis_srv.url, prefix=f"oom{next(_numbers)}")
    reports = EndReports(create_registry_app(store, TOKEN, node_secret=NODE_SECRET))
    server = make_server("127.0.0.1", 0, reports, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    client = docker.DockerClient(base_url=f"unix://{docker_socket}", version=DOCKER_API_VERSION)
    try:
        registered = requests.post(
            f"http://127.0.0.1:{server.port}/registry/hosts", timeout=10,
            headers={"Authorization": f"Bearer {node_credential(NODE_SECRET, 'n1')}"},
            json={"id": "n1", "cpu_capacity": 2048, "memory_capacity": 2**32})
        assert registered.status_code == 201, registered.text
        yield Node(f"http://127.0.0.1:{server.port}", reports, store, client, busybox_image,
                   docker_socket)
    finally:
        # a container removed between the list and its inspection is skipped, not an error
        for container in client.containers.list(all=True, filters={"name": "gs-oomtest-"},
                                                ignore_removed=True):
            with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
                container.remove(force=True)  # the agent may be removing it too
        client.close()
        server.shutdown()
        server.server_close()
        store.flush()


def test_an_oom_event_after_the_die_is_still_reported_as_out_of_memory(node: Node) -> None:
    task_id = f"race{next(_numbers)}"
    node.book(task_id)
    container, die = node.killed_container(task_id)
    agent = node.agent()
    replay(agent, (0.0, die), (0.3, oom_event_for(die)))  # die first, oom 0.3 s later
    wait_for(lambda: bool(node.reports.of(task_id)), 10.0, "the agent's end report")
    time.sleep(0.5)  # a second report would come now
    [report] = node.reports.of(task_id)
    assert (report["status"], report["exit_code"], report["oom"]) == ("failed", 137, True)
    assert node.store.task(task_id) is None
    wait_for(lambda: not node.docker.containers.list(all=True, filters={"id": container.id},
                                                     ignore_removed=True),
             10.0, "the container removed after the report")


def test_a_sigkill_that_was_no_oom_is_reported_after_the_grace_not_lost(node: Node) -> None:
    task_id = f"kill{next(_numbers)}"
    node.book(task_id)
    container, die = node.killed_container(task_id)
    agent = node.agent()
    started = time.monotonic()
    replay(agent, (0.0, die))
    assert node.reports.of(task_id) == []  # waiting for a notice that may still come
    assert node.docker.containers.list(all=True, filters={"id": container.id})
    wait_for(lambda: bool(node.reports.of(task_id)), GRACE_S + 10.0, "the report after the grace")
    assert time.monotonic() - started >= GRACE_S - 0.1
    [report] = node.reports.of(task_id)
    assert (report["status"], report["exit_code"], report["oom"]) == ("failed", 137, False)


def test_the_reconciliation_holds_a_sigkilled_exit_for_its_late_notice_too(node: Node) -> None:
    """The agent's timer (converge) may find the exited container before its die event is
    handled: it waits the same grace, and the oom event then reports it at once. (What
    converge does with each exited container of ours; converge itself would also take any
    other container of ours on this engine.)"""
    task_id = f"conv{next(_numbers)}"
    node.book(task_id)
    container, die = node.killed_container(task_id)
    agent = node.agent()
    agent._exited(node.docker.containers.get(container.id))
    assert node.reports.of(task_id) == []
    replay(agent, (0.2, oom_event_for(die)))
    wait_for(lambda: bool(node.reports.of(task_id)), 5.0, "the report with the notice")
    assert node.reports.of(task_id)[0]["oom"] is True


def test_a_container_removed_between_the_list_and_its_inspection_is_skipped(node: Node) -> None:
    """docker-py lists the containers' ids, then inspects each: one removed in between (Swarm
    ending a task, the agent removing an exited one) failed the agent's whole pass ("cannot
    list containers"). The race is built for real: the engine's own listing, taken before one
    of the two containers is removed, is what the agent's client lists (the one stand-in)."""
    kept, gone = (
        node.docker.containers.run(node.image, ["sleep", "300"], detach=True,
                                   labels={LABEL_TASK: f"listed{next(_numbers)}"},
                                   name=f"gs-oomtest-listed{next(_numbers)}")
        for _ in range(2)
    )
    agent = node.agent()
    listing = agent.client.api.containers(all=True, filters={"label": LABEL_TASK})
    assert {kept.id, gone.id} <= {c["Id"] for c in listing}
    gone.remove(force=True)
    agent.client.api.containers = lambda *args, **kwargs: listing  # the list as it was
    found = {c.id for c in agent.containers(include_exited=True)}
    assert kept.id in found and gone.id not in found
