"""greenswarm highly available on the lab (DESIGN 13, issue 32 item 4): docker-stack.ha.yml
deployed with `docker stack deploy` on a lab whose three nodes are Swarm managers
(`lab up --managers 3`), and the chaos driver: a stream of submissions while one fault is made
for real (the leader's container killed, the Redis primary stopped, the engine of the leader's
Swarm manager node stopped), then what was accepted, lost, placed twice, and how long
scheduling stopped.

Used by tests/e2e/test_ha_chaos_lab.py (one run of each fault) and scripts/bench_ha_failover.py
(N runs, median and worst). Every name is the run's own (stack, service prefix); the lab is
taken down by whoever brought it up.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
import requests

from domain.labels import LABEL_TASK
from tests.e2e.conftest import REPO, Lab, lab_cli, node_engine
from tests.e2e.stack import IDLE, poll

LAB_UP_ARGS = ("up", "--nodes", "3", "--managers", "3", "--node-cpus", "0.5",
               "--node-memory", "1g", "--images", "all")
BUSYBOX = "greenswarm/busybox:latest"
SUBMIT_INTERVAL_S = 0.4
SUBMIT_TIMEOUT_S = 15.0  # a client that waits this long for an answer
BACK_WITHIN_S = 10.0
AFTER_S = 4.0  # the stream goes on this long after scheduling is back
RUN_LIMIT_S = 45.0  # from the fault: a stream never runs longer


class Fault:
    LEADER_CONTAINER = "leader-container"
    REDIS_PRIMARY = "redis-primary"
    LEADER_ENGINE = "leader-engine"


ALL_FAULTS = (Fault.LEADER_CONTAINER, Fault.REDIS_PRIMARY, Fault.LEADER_ENGINE)


@dataclass
class HaStack:
    """docker-stack.ha.yml + docker-stack.ha.lab.yml on the lab's Swarm manager nodes."""

    lab: Lab
    # the stack's name, its own for each deployment: Redis' volume (<name>_redis-data) lives on
    # in the nodes' data roots, which `lab down` keeps
    name: str = field(default_factory=lambda: f"gsha{secrets.token_hex(2)}")
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    port: int = 18080
    lease_s: float = 5.0
    down_after_ms: int = 2000
    # Swarm's node heartbeat (`docker swarm update --dispatcher-heartbeat`; Swarm's default
    # 5 s): a node whose engine stopped is Down after about three of them, and until then the
    # new leader may place on it. None leaves the Swarm's setting alone.
    heartbeat_s: float | None = None

    @property
    def manager_nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.lab.nodes if n.get("manager")]

    @property
    def prefix(self) -> str:
        return f"{self.name}-"

    def url(self, node: dict[str, Any]) -> str:
        return f"http://{node['address']}:{self.port}"

    @property
    def urls(self) -> list[str]:
        return [self.url(n) for n in self.manager_nodes]

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "GREENSWARM_TOKEN": self.token,
            "GREENSWARM_PORT": str(self.port),
            "GREENSWARM_PUBLISH_MODE": "host",
            "GREENSWARM_MANAGER_ENDPOINT_MODE": "dnsrr",
            "GREENSWARM_DOCKER_SOCKET": "/run/greenswarm/lab/{{.Node.Hostname}}.sock",
            "GREENSWARM_SERVICE_PREFIX": self.prefix,
            "GREENSWARM_LEADER_LEASE_S": f"{self.lease_s:g}",
            "GREENSWARM_SENTINEL_DOWN_AFTER_MS": str(self.down_after_ms),
            # the names the managers advertise (docker-stack.ha.lab.yml's extra_hosts)
            **{f"GREENSWARM_LAB_NODE{n['index']}_ADDRESS": n["address"]
               for n in self.manager_nodes},
        }

    def docker(self, *args: str, timeout_s: float = 180.0) -> str:
        argv = [self.lab.settings.engine.docker_cli, *args]
        done = subprocess.run(argv, cwd=REPO, env=self.env(), capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    # -- life cycle ---------------------------------------------------------------------------

    def up(self, timeout_s: float = 240.0) -> float:
        """Images, Redis' node labels, `docker stack deploy`; seconds until one leads and
        every manager answers."""
        done = lab_cli("images", timeout_s=900)
        assert done.returncode == 0, done.stdout + done.stderr
        nodes = self.manager_nodes
        assert len(nodes) >= 3, "the lab needs three Swarm manager nodes (`up --managers 3`)"
        for node, role in ((nodes[1], "primary"), (nodes[2], "replica")):
            self.docker("node", "update", "--label-add", f"greenswarm.redis={role}",
                        node["swarm_node_id"])
        if self.heartbeat_s is not None:
            self.docker("swarm", "update", "--dispatcher-heartbeat", f"{self.heartbeat_s:g}s")
        started = time.monotonic()
        self.docker("stack", "deploy", "--resolve-image", "never", "-c", "docker-stack.ha.yml",
                    "-c", "docker-stack.ha.lab.yml", self.name)
        poll(self.healthy, timeout_s, "every manager to answer, one leading, Redis replicated",
             interval_s=1.0)
        return time.monotonic() - started

    def down(self) -> None:
        """The stack and the requests' services (the lab, taken down after, does the rest)."""
        subprocess.run([self.lab.settings.engine.docker_cli, "stack", "rm", self.name],
                       env=self.env(), capture_output=True, timeout=120, check=False)
        if self.heartbeat_s is not None:  # Swarm's default again for the lab's other users
            subprocess.run([self.lab.settings.engine.docker_cli, "swarm", "update",
                            "--dispatcher-heartbeat", "5s"], env=self.env(),
                           capture_output=True, timeout=60, check=False)
        client = docker.DockerClient(base_url=self.lab.settings.engine.main_url, timeout=60)
        try:
            for service in client.services.list():
                if service.name.startswith(self.prefix):
                    with contextlib.suppress(docker.errors.APIError):
                        service.remove()
        finally:
            client.close()
        deadline = time.monotonic() + 30
        for node in self.lab.nodes:  # Redis' files: the containers go first (bounded wait)
            with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
                engine = node_engine(node)
                while time.monotonic() < deadline:
                    try:
                        engine.volumes.get(f"{self.name}_redis-data").remove(force=True)
                        break
                    except docker.errors.NotFound:
                        break
                    except docker.errors.APIError:
                        time.sleep(1)
                engine.close()

    # -- what the managers say ----------------------------------------------------------------

    def health(self, url: str, timeout_s: float = 2.0) -> tuple[int, dict[str, Any]]:
        response = requests.get(url + "/healthz", headers=self.headers(), timeout=timeout_s)
        body: dict[str, Any] = response.json()
        return response.status_code, body

    def roles(self) -> dict[str, str]:
        """Manager URL -> role, or the error that kept it from answering."""
        found: dict[str, str] = {}
        for url in self.urls:
            try:
                found[url] = str(self.health(url)[1].get("role"))
            except (requests.RequestException, ValueError) as exc:
                found[url] = f"error: {type(exc).__name__}"
        return found

    def leader_url(self) -> str | None:
        leaders = [u for u, role in self.roles().items() if role == "leader"]
        return leaders[0] if len(leaders) == 1 else None

    def node_of(self, url: str) -> dict[str, Any]:
        return next(n for n in self.manager_nodes if self.url(n) == url)

    def healthy(self) -> bool:
        """Every manager answers, exactly one leads, it sees every lab node as a host, and the
        Redis primary has its replica connected."""
        roles = self.roles()
        if sorted(roles.values()) != ["leader", "standby", "standby"]:
            return False
        leader = next(u for u, r in roles.items() if r == "leader")
        hosts = requests.get(leader + "/hosts", headers=self.headers(), timeout=5).json()
        if len(hosts) != len(self.lab.nodes):
            return False
        return self.redis_replicas() >= 1 and self.sentinels_formed()

    def sentinels_formed(self) -> bool:
        """Every Sentinel watches the same primary and knows the other two: a failover needs
        two of them to agree and a majority to elect one that carries it out. Just after
        `docker stack deploy` they are still (re)starting (each waits for redis-primary's
        address) and finding each other; a primary lost then is never replaced (seen: every
        manager without Redis for a minute, until the primary's node came back)."""
        primaries = set()
        for node in self.manager_nodes:
            found = self._service_containers("redis-sentinel", node)
            if len(found) != 1:
                return False
            said = _fields(_sentinel_cli(found[0], "sentinel", "master", "greenswarm"))
            if said.get("num-other-sentinels") != "2" or said.get("flags") != "master":
                return False
            primaries.add(said.get("ip"))
        return len(primaries) == 1

    # -- Redis, through a Sentinel ------------------------------------------------------------

    def _service_containers(self, service: str, node: dict[str, Any]) -> list[Any]:
        try:
            client = node_engine(node)
            found = client.containers.list(filters={
                "label": f"com.docker.swarm.service.name={self.name}_{service}"})
            return list(found)
        except (docker.errors.DockerException, requests.RequestException):
            return []

    def sentinel(self, *command: str) -> str:
        """``redis-cli -p 26379 <command>`` in the first Sentinel that answers."""
        for node in self.manager_nodes:
            for container in self._service_containers("redis-sentinel", node):
                said = _sentinel_cli(container, *command)
                if said:
                    return said
        raise AssertionError("no Sentinel answers")

    def primary_address(self) -> str:
        return self.sentinel("sentinel", "get-master-addr-by-name", "greenswarm").split()[0]

    def redis_replicas(self) -> int:
        """Replicas the primary (as the Sentinels name it) has connected and in sync."""
        try:
            text = self.sentinel("sentinel", "replicas", "greenswarm")
        except AssertionError:
            return 0
        lines = text.splitlines()
        starts = [i for i in range(0, len(lines) - 1, 2) if lines[i] == "name"] + [len(lines)]
        replicas = [_fields("\n".join(lines[a:b])) for a, b in itertools.pairwise(starts)]
        # linked: a replica still in its full sync is neither down nor disconnected, and a
        # failover then promotes it without what the primary wrote since the sync began
        flags = [r.get("flags", "down") for r in replicas if r.get("master-link-status") == "ok"]
        return sum(1 for f in flags if "down" not in f and "disconnected" not in f)

    def redis_primary_container(self) -> tuple[dict[str, Any], Any]:
        """The lab node and container of the server the Sentinels name primary."""
        address = self.primary_address()
        for node in self.manager_nodes:
            for service in ("redis-primary", "redis-replica"):
                for container in self._service_containers(service, node):
                    networks = container.attrs["NetworkSettings"]["Networks"].values()
                    ips = {n.get("IPAddress") for n in networks}
                    if address in ips or address == service:
                        return node, container
        raise AssertionError(f"no container of the Redis primary {address}")

    def manager_container(self, node: dict[str, Any]) -> Any:
        found = self._service_containers("manager", node)
        assert len(found) == 1, f"{len(found)} manager containers on {node['name']}"
        return found[0]

    def lead_beside_the_primary(self, attempts: int = 6) -> str:
        """The worst case of a node lost: the leader on the Redis primary's node (the leader
        goes first, the primary at the end of the engine's stop). The managers of the other
        nodes are killed at once (Swarm starts them again 2 s later), so that the one beside
        the primary takes the lease when it expires; tried again, bounded, when a restarted
        one got it first. Never a Sentinel failover: it can fail when asked, and its Sentinel
        starts none of its own for twice the failover timeout. Returns the node's name."""
        for _ in range(attempts):
            poll(self.healthy, 180, "the stack to be healthy", interval_s=1.0)
            leader_url = self.leader_url()
            assert leader_url is not None
            primary_node, _ = self.redis_primary_container()
            if self.node_of(leader_url)["name"] == primary_node["name"]:
                return str(primary_node["name"])
            for node in self.manager_nodes:
                if node["name"] != primary_node["name"]:
                    self.manager_container(node).kill()
            time.sleep(1.0)  # then healthy again: a leader, the two killed back as managers
        raise AssertionError(f"the leader never ran beside the primary in {attempts} tries")


def _sentinel_cli(container: Any, *command: str) -> str:
    """``redis-cli -p 26379 <command>`` in one Sentinel's container; "" when it does not
    answer."""
    with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
        code, out = container.exec_run(["redis-cli", "-p", "26379", *command])
        if code == 0:
            return str(out.decode().strip())
    return ""


def _fields(text: str) -> dict[str, str]:
    """redis-cli's answer of alternating names and values (``sentinel master``) as a map."""
    lines = text.splitlines()
    return dict(zip(lines[0::2], lines[1::2], strict=False))


# -- the stream of submissions ----------------------------------------------------------------

@dataclass
class Attempt:
    """One submission: when it was sent and answered (monotonic), through which manager, and
    what came back."""

    name: str
    sent_s: float
    via: str
    done_s: float = 0.0
    status: int | None = None  # None: no answer (connection refused, timeout)
    host: str | None = None
    error: str = ""
    retry_after: str | None = None
    leader_named: str | None = None


class Stream(threading.Thread):
    """Sends a small request every ``SUBMIT_INTERVAL_S``, each on its own thread (one that
    hangs does not hold up the next: the stream's cadence is the clock of the measurement),
    each through the next manager in turn and, when that one does not answer at all, through
    the following ones (as a client with several addresses does). A request is accepted by a
    201; a name is never sent again once a manager answered."""

    def __init__(self, stack: HaStack, tag: str, limit: int = 150) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.tag = tag
        self.limit = limit
        self.attempts: list[Attempt] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._senders: list[threading.Thread] = []

    def run(self) -> None:
        for i in range(self.limit):
            if self.stopping.is_set():
                break
            sender = threading.Thread(target=self._send, args=(i,), daemon=True)
            sender.start()
            self._senders.append(sender)
            self.stopping.wait(SUBMIT_INTERVAL_S)
        for sender in self._senders:
            sender.join(timeout=len(self.stack.urls) * SUBMIT_TIMEOUT_S + 5)

    def _send(self, i: int) -> None:
        urls = self.stack.urls
        order = urls[i % len(urls):] + urls[:i % len(urls)]
        for url in order:
            attempt = self._submit(f"{self.tag}-{i}", url)
            with self._lock:
                self.attempts.append(attempt)
            if attempt.status is not None:
                return

    def _submit(self, name: str, url: str) -> Attempt:
        body = {"image": BUSYBOX, "name": name, "class": 3, "type": "service",
                "cpu_shares": 8, "memory": "8m", "command": IDLE}
        attempt = Attempt(name=name, sent_s=time.monotonic(), via=url)
        try:
            response = requests.post(url + "/requests", json=body, headers=self.stack.headers(),
                                     timeout=SUBMIT_TIMEOUT_S)
            attempt.status = response.status_code
            attempt.retry_after = response.headers.get("Retry-After")
            with contextlib.suppress(ValueError):
                answer = response.json()
                if response.status_code == 201:
                    attempt.host = answer["request"].get("host")
                else:
                    attempt.leader_named = answer.get("leader")
                    attempt.error = str(answer.get("message", ""))[:120]
        except requests.RequestException as exc:
            attempt.error = type(exc).__name__
        attempt.done_s = time.monotonic()
        return attempt

    def accepted(self) -> list[Attempt]:
        with self._lock:
            return [a for a in self.attempts if a.status == 201]

    def placed_after(self, t: float, live_hosts: set[str] | None = None) -> Attempt | None:
        """The first placement of a request sent after ``t`` (on one of ``live_hosts``)."""
        placed = [a for a in self.accepted() if a.sent_s >= t and a.host
                  and (live_hosts is None or a.host in live_hosts)]
        return min(placed, key=lambda a: a.done_s, default=None)


class Watch(threading.Thread):
    """What an operator sees: every manager's /healthz every 0.25 s (role, or the error)."""

    def __init__(self, stack: HaStack) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.seen: list[tuple[float, str, str]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for url in self.stack.urls:
                try:
                    code, body = self.stack.health(url, timeout_s=1.0)
                    what = f"{code} {body.get('role')}"
                except (requests.RequestException, ValueError) as exc:
                    what = f"error {type(exc).__name__}"
                self.seen.append((time.monotonic(), url, what))
            self.stopping.wait(0.25)


def cli(stack: HaStack, url: str, *args: str) -> tuple[int, float, str]:
    """`greenswarm <args>` against ``url``: exit code, seconds, first line of its answer."""
    started = time.monotonic()
    env = {**os.environ, "GREENSWARM_URL": url, "GREENSWARM_TOKEN": stack.token}
    done = subprocess.run([sys.executable, "-m", "cli.main", *args, "--url", url], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    text = (done.stdout or done.stderr).strip().splitlines()
    return done.returncode, time.monotonic() - started, (text[0] if text else "")[:100]


# -- one fault --------------------------------------------------------------------------------

@dataclass
class Outcome:
    fault: str
    failover_s: float | None  # from the fault to the next placement
    live_failover_s: float | None  # ... to the next placement on a node still running
    accepted: int
    lost: list[str]
    duplicated: list[str]
    refused: int  # answered, not 201 (503 while none led)
    no_answer: int  # connection refused, timeouts
    phantoms: list[str]  # not answered 201, yet recorded (the answer was lost on the way)
    leader_before: str
    leader_after: str | None
    gap: list[str]  # what healthz, the CLI and the refused submissions said meanwhile

    def summary(self) -> str:
        def secs(value: float | None) -> str:
            return "never" if value is None else f"{value:.1f} s"
        return (f"{self.fault}: scheduling back in {secs(self.failover_s)} (on a live node "
                f"{secs(self.live_failover_s)}); accepted {self.accepted}, lost "
                f"{len(self.lost)}, duplicated {len(self.duplicated)}, refused {self.refused}, "
                f"no answer {self.no_answer}, recorded without a 201 {len(self.phantoms)}; "
                f"leader {self.leader_before} -> {self.leader_after}")


def _inflict(stack: HaStack, fault: str, leader: dict[str, Any]) -> dict[str, Any] | None:
    """Make the fault; the lab node whose engine was stopped, if any."""
    if fault == Fault.LEADER_CONTAINER:
        stack.manager_container(leader).kill()  # SIGKILL; Swarm starts a new task later
        return None
    if fault == Fault.REDIS_PRIMARY:
        stack.redis_primary_container()[1].stop(timeout=5)
        return None
    done = lab_cli("power", "off", leader["name"], timeout_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return leader


def run_fault(stack: HaStack, fault: str, tag: str, report: Callable[[str], None] = print
              ) -> Outcome:
    """A stream of submissions; the fault after a few seconds of it; the stream until
    scheduling is back (and AFTER_S more, at most RUN_LIMIT_S); then the records checked."""
    poll(stack.healthy, 180, "the stack to be healthy before the fault", interval_s=1.0)
    leader_url = stack.leader_url()
    assert leader_url is not None
    leader = stack.node_of(leader_url)
    standby = next(u for u in stack.urls if u != leader_url)
    hosts = {n["swarm_node_id"] for n in stack.lab.nodes}
    stream, watch = Stream(stack, tag), Watch(stack)
    watch.start()
    stream.start()
    time.sleep(3.0)
    began_s = time.monotonic()
    stopped = _inflict(stack, fault, leader)
    struck_s = time.monotonic()  # the fault is complete: the component is down
    gap = [f"{fault} at t=0 ({leader['name']} led; making the fault took "
           f"{struck_s - began_s:.1f} s)"]
    live = hosts - ({stopped["swarm_node_id"]} if stopped else set())
    code, took, line = cli(stack, standby, "status")
    gap.append(f"t={time.monotonic() - struck_s:.1f} `greenswarm status` via a standby: "
               f"exit {code} in {took:.1f} s: {line}")
    gap.append(f"t={time.monotonic() - struck_s:.1f} {_dashboard(stack, standby)}")
    deadline = struck_s + RUN_LIMIT_S
    while time.monotonic() < deadline and stream.placed_after(struck_s, live) is None:
        time.sleep(0.2)
    back = stream.placed_after(struck_s, live)
    if back is not None:
        time.sleep(max(0.0, min(AFTER_S, deadline - time.monotonic())))
    stream.stopping.set()
    stream.join(timeout=60)
    watch.stopping.set()
    watch.join(timeout=10)
    first = stream.placed_after(struck_s)
    for args in (("status",), ("hosts",)):
        code, took, line = cli(stack, standby, *args)
        gap.append(f"after: `greenswarm {' '.join(args)}` via a standby: exit {code} in "
                   f"{took:.1f} s: {line}")
    gap.append(f"after: {_dashboard(stack, standby)}")
    gap += _gap_lines(stack, stream, watch, struck_s, back.done_s if back else deadline)
    gap.append(f"t={time.monotonic() - struck_s:.1f} the Sentinels name primary: "
               + _sentinel_view(stack))
    if stopped is not None:  # on again: the node rejoins (its tasks come back by Swarm)
        done = lab_cli("power", "on", stopped["name"], timeout_s=180)
        gap.append(f"{stopped['name']} switched on again: exit {done.returncode}")
    try:
        lost, duplicated, phantoms = _check(stack, stream, stopped)
    except AssertionError:  # what the gap looked like, for the failure's reader
        for line in gap:
            report(f"  {line}")
        raise
    gap += _phantom_lines(stack, stream, set(phantoms), struck_s)
    gap += _lost_lines(stack, stream, set(lost), struck_s)
    outcome = Outcome(
        fault=fault,
        failover_s=None if first is None else first.done_s - struck_s,
        live_failover_s=None if back is None else back.done_s - struck_s,
        accepted=len(stream.accepted()), lost=lost, duplicated=duplicated,
        refused=sum(1 for a in stream.attempts if a.status not in (None, 201)),
        no_answer=sum(1 for a in stream.attempts if a.status is None),
        phantoms=phantoms, leader_before=leader["name"],
        leader_after=_leader_name(stack), gap=gap)
    report(outcome.summary())
    for line in gap:
        report(f"  {line}")
    return outcome


def _dashboard(stack: HaStack, url: str) -> str:
    """The dashboard through ``url``: its page, and a session opened with the token (a write:
    relayed to the leader, whose session every manager then reads from Redis)."""
    try:
        page = requests.get(url + "/dashboard", timeout=10).status_code
        session = requests.Session()
        login = session.post(url + "/dashboard/login", json={"token": stack.token},
                             timeout=15).status_code
        reads = session.get(url + "/hosts", timeout=15).status_code if login == 200 else None
    except requests.RequestException as exc:
        return f"dashboard via a standby: {type(exc).__name__}"
    return f"dashboard via a standby: page {page}, login {login}, its read of /hosts {reads}"


def _sentinel_view(stack: HaStack) -> str:
    try:
        primary = stack.primary_address()
        state = _fields(stack.sentinel("sentinel", "master", "greenswarm")).get("flags", "?")
        return f"{primary} ({state}), replicas in sync {stack.redis_replicas()}"
    except (AssertionError, IndexError) as exc:
        return f"unknown ({exc})"


def _leader_name(stack: HaStack) -> str | None:
    with contextlib.suppress(StopIteration, AssertionError):
        poll(lambda: stack.leader_url() is not None, 30, "a leader", interval_s=0.5)
    url = stack.leader_url()
    return None if url is None else str(stack.node_of(url)["name"])


def _gap_lines(stack: HaStack, stream: Stream, watch: Watch, struck_s: float, back_s: float
               ) -> list[str]:
    """Each manager's healthz during the gap (its distinct answers in order), and the refused
    submissions' answers (status, Retry-After, the leader named)."""
    lines = []
    for url in stack.urls:
        said: list[str] = []
        for t, seen_url, what in watch.seen:
            if seen_url == url and struck_s <= t <= back_s and (not said or said[-1] != what):
                said.append(what)
        lines.append(f"healthz {stack.node_of(url)['name']} during the gap: "
                     + " -> ".join(said or ["(not polled)"]))
    refusals: dict[str, tuple[int, float]] = {}
    for a in stream.attempts:
        if struck_s <= a.sent_s <= back_s and a.status != 201:
            key = _told(stack, a)
            count, longest = refusals.get(key, (0, 0.0))
            refusals[key] = (count + 1, max(longest, a.done_s - a.sent_s))
    lines += [f"submission answered {key}: x{n}, the longest in {took:.1f} s"
              for key, (n, took) in refusals.items()]
    return lines


def _told(stack: HaStack, a: Attempt) -> str:
    """What a client was told (status, Retry-After, the leader named, the message; or no
    answer), and by which manager."""
    said = (f"{a.status} Retry-After={a.retry_after} leader={a.leader_named} {a.error[:60]}"
            if a.status else f"no answer ({a.error})")
    return f"{said} via {stack.node_of(a.via)['name']}"


def _phantom_lines(stack: HaStack, stream: Stream, phantoms: set[str], struck_s: float
                   ) -> list[str]:
    """What the clients of the requests recorded without a 201 were told, and when (from the
    fault; negative: while it was being made)."""
    told: dict[str, list[float]] = {}
    for a in stream.attempts:
        if a.name in phantoms:
            told.setdefault(_told(stack, a), []).append(a.sent_s - struck_s)
    return [f"recorded without a 201, told {key}: x{len(ts)}, sent at t={min(ts):.1f}.."
            f"{max(ts):.1f}" for key, ts in told.items()]


def _lost_lines(stack: HaStack, stream: Stream, lost: set[str], struck_s: float) -> list[str]:
    """Each request answered 201 that the records do not have: when it was sent and answered
    (from the fault; negative: while it was being made), through which manager, and where it
    was placed."""
    return [f"lost {a.name}: sent t={a.sent_s - struck_s:.1f}, 201 at t={a.done_s - struck_s:.1f}"
            f" via {stack.node_of(a.via)['name']}, on {a.host}"
            for a in stream.accepted() if a.name in lost]


def _check(stack: HaStack, stream: Stream, stopped: dict[str, Any] | None
           ) -> tuple[list[str], list[str], list[str]]:
    """Lost: accepted (201) yet not in the records. Duplicated: running in more than one
    container across the live nodes, or on more than one host in the registry. Phantoms:
    in the records though the client never saw its 201."""
    url = stack.leader_url() or stack.urls[0]
    try:
        poll(lambda: stack.leader_url() is not None, 60, "a leader to check the records")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the managers say {stack.roles()}") from None
    url = stack.leader_url() or url
    records = requests.get(url + "/requests", headers=stack.headers(), timeout=30).json()
    known = {r["id"]: r for r in records} | {r.get("name", ""): r for r in records}
    accepted = {a.name for a in stream.accepted()}
    lost = sorted(n for n in accepted if n not in known)
    hosts = requests.get(url + "/hosts", headers=stack.headers(), timeout=30).json()
    on_hosts: dict[str, int] = {}
    for host in hosts:
        for task in host.get("tasks", []):
            on_hosts[task["id"]] = on_hosts.get(task["id"], 0) + 1
    running: dict[str, int] = {}
    for node in stack.lab.nodes:
        if stopped is not None and node["name"] == stopped["name"]:
            continue
        with contextlib.suppress(docker.errors.DockerException, requests.RequestException):
            client = node_engine(node)
            for container in client.containers.list(filters={"label": LABEL_TASK}):
                task = container.labels.get(LABEL_TASK, "")
                running[task] = running.get(task, 0) + 1
            client.close()
    duplicated = sorted(n for n in accepted | set(running)
                        if running.get(n, 0) > 1 or on_hosts.get(n, 0) > 1)
    sent = {a.name for a in stream.attempts}
    phantoms = sorted(n for n in sent - accepted if n in known)
    return lost, duplicated, phantoms


def outcome_json(outcome: Outcome) -> str:
    return json.dumps(outcome.__dict__, sort_keys=True)
