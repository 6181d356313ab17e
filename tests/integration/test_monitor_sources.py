"""The monitor against real things: a cgroup subtree created under /sys/fs/cgroup with a process
burning CPU in it, real busybox containers on the Docker engine (cgroup files and the stats API),
and the real Host and Task Registry (on a redis-server of its own) for messages 11-13."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import requests
from werkzeug.serving import make_server

from domain.credentials import node_credential
from domain.errors import (
    AuthError,
    ForbiddenError,
    NotFoundError,
    UnavailableError,
    ValidationError,
)
from domain.labels import DOCKER_API_VERSION, LABEL_TASK
from host_registry.redis_store import RedisStore
from lab.processes import RedisServer, free_port, redis_server, wait_for
from manager.records import RequestRecords
from monitor.cgroups import CgroupVersion, detect_version, dirs_from_proc_cgroup, read_memory
from monitor.client import HostRegistration, RegistryClient
from monitor.core import BackoffPolicy, HostUpdate, TaskBatch, TaskUtil, UtilSample
from monitor.host_sources import CgroupHostSource, HostCapacity
from monitor.identity import HostIdentity, resolve_identity
from monitor.service import Monitor, Timings
from monitor.tasks import ContainerSampler, ReadPath, TaskContainer
from task_registry.standalone import create_registry_app

CGROUP_ROOT = Path("/sys/fs/cgroup")
MIB = 1024**2
REPO = Path(__file__).resolve().parents[2]

# --- the cgroup host source on a real cgroup subtree -------------------------------------------

BURNER = """
import sys
sys.stdin.readline()                  # wait until the parent moved us into the cgroup
block = b"\\x01" * (64 * 1024 * 1024)  # 64 MiB, written, so charged to the cgroup
sys.stdout.write("ready\\n")
sys.stdout.flush()
while True:
    pass
"""


@dataclass
class NodeCgroup:
    name: str
    directories: list[Path]
    procs_files: list[Path]


def _own_cgroup_dirs() -> dict[str, Path]:
    """Where this test process sits, per v1 controller ("" for v2), to move children back."""
    found: dict[str, Path] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if not controllers:
            found[""] = CGROUP_ROOT / path.lstrip("/")
        for controller in controllers.split(","):
            if controller in ("cpu", "cpuacct", "memory"):
                found[controller] = CGROUP_ROOT / controller / path.lstrip("/")
    return found


def _write(path: Path, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _rmdir(path: Path) -> None:
    for _ in range(50):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise
            time.sleep(0.1)
    path.rmdir()


@pytest.fixture
def node_cgroup() -> Iterator[NodeCgroup]:
    """A node-like cgroup: 0.5 CPU (CFS quota 50 ms / 100 ms) and 256 MiB; removed afterwards,
    after moving any process still in it back where the test process is."""
    if os.geteuid() != 0:
        pytest.skip("creating cgroups needs root")
    version = detect_version(CGROUP_ROOT)
    name = f"greenswarm-test-{uuid.uuid4().hex[:8]}"
    if version is CgroupVersion.V1:
        directories = [CGROUP_ROOT / c / name for c in ("cpu", "cpuacct", "memory")]
    elif version is CgroupVersion.V2:
        enabled = (CGROUP_ROOT / "cgroup.subtree_control").read_text().split()
        if not {"cpu", "memory"} <= set(enabled):
            pytest.skip("cgroup v2 root does not delegate cpu and memory")
        directories = [CGROUP_ROOT / name]
    else:
        pytest.skip("no cgroup hierarchy")
    created: list[Path] = []
    try:
        for directory in directories:
            directory.mkdir()
            created.append(directory)
        if version is CgroupVersion.V1:
            _write(CGROUP_ROOT / "cpu" / name / "cpu.cfs_period_us", "100000")
            _write(CGROUP_ROOT / "cpu" / name / "cpu.cfs_quota_us", "50000")
            _write(CGROUP_ROOT / "memory" / name / "memory.limit_in_bytes", str(256 * MIB))
        else:
            _write(CGROUP_ROOT / name / "cpu.max", "50000 100000")
            _write(CGROUP_ROOT / name / "memory.max", str(256 * MIB))
        yield NodeCgroup(name, created, [d / "cgroup.procs" for d in created])
    finally:
        own = _own_cgroup_dirs()
        for directory in created:
            key = directory.parent.name if version is CgroupVersion.V1 else ""
            back = own.get(key, directory.parent)
            with contextlib.suppress(FileNotFoundError):
                for pid in (directory / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        _write(back / "cgroup.procs", pid)
        for directory in reversed(created):
            _rmdir(directory)


@contextlib.contextmanager
def burner_in(cgroup: NodeCgroup) -> Iterator[int]:
    process = subprocess.Popen([sys.executable, "-c", BURNER], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        for procs in cgroup.procs_files:
            _write(procs, str(process.pid))
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write("go\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == "ready"
        yield process.pid
    finally:
        process.terminate()  # SIGTERM to this pid (stop_pid would wait on the unreaped zombie)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def test_cgroup_source_measures_a_half_core_node(node_cgroup: NodeCgroup) -> None:
    with burner_in(node_cgroup) as pid:
        source = CgroupHostSource(node_cgroup.name, root=CGROUP_ROOT)
        assert source.capacity() == HostCapacity(cpu_shares=512, memory_bytes=256 * MIB)
        assert str(pid) in node_cgroup.procs_files[0].read_text().split()
        assert source.sample() is None  # primes
        time.sleep(2.0)
        sample = source.sample()
    assert sample is not None
    # busy loop under a 0.5-core quota: ~100% of the node (a loaded machine may give it less)
    assert 0.7 <= sample.cpu_util <= 1.0
    # 64 MiB block + the interpreter, against 256 MiB
    assert 0.25 <= sample.memory_util <= 0.45


def test_cgroup_source_of_an_idle_node(node_cgroup: NodeCgroup) -> None:
    source = CgroupHostSource(node_cgroup.name, root=CGROUP_ROOT)
    assert source.sample() is None
    time.sleep(0.5)
    sample = source.sample()
    assert sample is not None
    assert sample.cpu_util == 0.0
    assert sample.memory_util < 0.02


# --- per-container sampling on the real engine -------------------------------------------------


@pytest.fixture
def docker_client(docker_socket: str) -> Iterator[Any]:
    import docker

    client = docker.DockerClient(base_url=f"unix://{docker_socket}", version=DOCKER_API_VERSION, timeout=30)
    yield client
    client.close()


StartContainer = Callable[..., tuple[str, str]]


@pytest.fixture
def start_container(docker_client: Any, busybox_image: str) -> Iterator[StartContainer]:
    """Starts labelled busybox containers; every one is removed by id at the end, even on
    failure. Returns (container id, task id)."""
    import docker

    started: list[str] = []

    def start(command: list[str], labelled: bool = True, **options: Any) -> tuple[str, str]:
        task_id = f"t-{uuid.uuid4().hex[:10]}"
        labels = {LABEL_TASK: task_id} if labelled else {}
        container = docker_client.containers.run(busybox_image, command, detach=True,
                                                 labels=labels, **options)
        started.append(container.id)
        return container.id, task_id

    yield start
    for container_id in started:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.api.remove_container(container_id, force=True)


def _ours(sampler: ContainerSampler, task_ids: set[str]) -> list[TaskContainer]:
    return [c for c in sampler.list_tasks() if c.task_id in task_ids]


def _measure(sampler: ContainerSampler, task_ids: set[str], seconds: float) -> dict[str, UtilSample]:
    refs = _ours(sampler, task_ids)
    assert {c.task_id for c in refs} == task_ids
    assert sampler.read(refs) == {}  # the first reading primes every counter
    time.sleep(seconds)
    return sampler.read(refs)


def _wait_for_memory(docker_client: Any, container_id: str, at_least_bytes: int) -> None:
    """Until the container's own cgroup (found from its pid, v1 or v2) holds the bytes."""
    pid = int(docker_client.containers.get(container_id).attrs["State"]["Pid"])
    text = Path(f"/proc/{pid}/cgroup").read_text()
    dirs = dirs_from_proc_cgroup(text, CGROUP_ROOT, detect_version(CGROUP_ROOT))
    assert dirs is not None, f"no cgroup found for container {container_id[:12]}"
    assert container_id in str(dirs.memory), dirs  # its own cgroup, not a parent's
    wait_for(lambda: read_memory(dirs).usage_bytes >= at_least_bytes, 20.0,
             f"container {container_id[:12]} to fill its memory")


@pytest.mark.docker
def test_task_sampling_from_cgroup_files_and_stats_api(
    docker_client: Any, start_container: StartContainer, tmp_path: Path
) -> None:
    # a shell holding a 30 MB variable (a loop, so the shell is not replaced by exec sleep)
    fat_id, fat = start_container(
        ["sh", "-c", "a=$(yes | head -c 30000000); while true; do sleep 60; done"],
        mem_limit="128m",
    )
    busy_id, busy = start_container(["sh", "-c", "yes > /dev/null"], cpu_shares=512)
    idle_id, idle = start_container(["sleep", "300"])
    _, unlabelled = start_container(["sleep", "300"], labelled=False)
    _wait_for_memory(docker_client, fat_id, 30_000_000)
    time.sleep(0.5)  # past the peak of the command substitution
    host_memory = psutil.virtual_memory().total
    ours = {busy, idle, fat}

    files = ContainerSampler(docker_client, host_memory, cgroup_root=CGROUP_ROOT)
    assert unlabelled not in {c.task_id for c in files.list_tasks()}
    by_files = _measure(files, ours, 1.5)
    assert {files.read_path(i) for i in (busy_id, idle_id, fat_id)} == {ReadPath.CGROUP}

    # an empty cgroup root: no files, so every reading goes through the Docker stats API
    stats = ContainerSampler(docker_client, host_memory, cgroup_root=tmp_path)
    by_stats = _measure(stats, ours, 1.5)
    assert {stats.read_path(i) for i in (busy_id, idle_id, fat_id)} == {ReadPath.STATS}

    for result in (by_files, by_stats):
        assert set(result) == ours
        # `yes` uses a whole core, twice its 0.5-core allocation: capped at 1 (>= 0.5 on a
        # machine other work keeps busy)
        assert result[busy].cpu_util >= 0.5
        assert result[idle].cpu_util < 0.05
        assert result[fat].cpu_util < 0.1
        # no memory limit: relative to the host's memory, so tiny
        assert result[idle].memory_util < 0.01
        # 30 MB of shell variable in a 128 MiB limit
        assert 0.2 <= result[fat].memory_util <= 0.6
    assert abs(by_files[fat].memory_util - by_stats[fat].memory_util) < 0.05
    assert abs(by_files[busy].cpu_util - by_stats[busy].cpu_util) < 0.3


@pytest.mark.docker
@pytest.mark.parametrize("layout", ["cgroup", "stats"])
def test_vanished_containers_are_skipped(
    docker_client: Any, start_container: StartContainer, tmp_path: Path, layout: str
) -> None:
    stay_id, stay = start_container(["sleep", "300"])
    gone_id, gone = start_container(["sleep", "300"])
    never_id, never = start_container(["sleep", "300"])
    root = CGROUP_ROOT if layout == "cgroup" else tmp_path
    sampler = ContainerSampler(docker_client, psutil.virtual_memory().total, cgroup_root=root)
    refs = _ours(sampler, {stay, gone, never})
    # `never` vanishes between the listing and its very first reading (inspect: not found)
    docker_client.api.remove_container(never_id, force=True)
    assert sampler.read(refs) == {}
    assert sampler.read_path(gone_id) == ReadPath(layout)
    # `gone` vanishes after being primed (its cgroup files or its stats are gone)
    docker_client.api.remove_container(gone_id, force=True)
    time.sleep(0.3)
    result = sampler.read(refs)
    assert set(result) == {stay}
    assert sampler.read_path(gone_id) is None
    assert sampler.read_path(never_id) is None
    assert stay_id in {c.container_id for c in sampler.list_tasks()}


@pytest.mark.docker
def test_identity_from_the_engine(docker_client: Any) -> None:
    identity = resolve_identity(docker_client)
    swarm = docker_client.info().get("Swarm") or {}
    assert identity.host_id == (swarm.get("NodeID") or os.uname().nodename)
    assert resolve_identity(docker_client, "h1", "10.0.0.9") == HostIdentity("h1", "10.0.0.9")


@pytest.mark.docker
def test_once_prints_what_would_be_sent(start_container: StartContainer, docker_socket: str) -> None:
    _, task = start_container(["sleep", "300"])
    environment = {**os.environ, "GREENSWARM_TOKEN": ""}
    completed = subprocess.run(
        [sys.executable, "-m", "monitor", "--once", "--host-interval-s", "0.3",
         "--host-window-s", "0.6", "--task-interval-s", "0.3", "--task-window-s", "0.6",
         "--docker-socket", docker_socket, "--host-id", "node-x", "--address", "10.9.9.9",
         "--log-level", "warning"],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=60, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report["host_id"] == "node-x"
    messages = {m["message"]: m for m in report["messages"]}
    assert set(messages) == {11, 12, 13}
    registration = messages[11]["body"]
    assert registration["id"] == "node-x" and registration["address"] == "10.9.9.9"
    assert registration["cpu_capacity"] == (psutil.cpu_count() or 1) * 1024
    assert set(messages[12]["body"]) >= {"cpu_util", "memory_util"}
    assert messages[12]["path"] == "/registry/hosts/node-x/utilization"
    assert task in {t["id"] for t in messages[13]["body"]["tasks"]}


def test_refuses_to_start_without_a_node_secret() -> None:
    """The operator's token is no node's credential (DESIGN 9): with only it, no start."""
    environment = {**os.environ, "GREENSWARM_TOKEN": "the-operators", "GREENSWARM_NODE_SECRET": "",
                   "GREENSWARM_NODE_CREDENTIAL": ""}
    completed = subprocess.run([sys.executable, "-m", "monitor"], cwd=REPO, env=environment,
                               capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 2
    assert "GREENSWARM_NODE_SECRET is empty" in completed.stderr


# --- the registry client and the loop against the real registry --------------------------------

TOKEN = "t0ken"  # the operator's
NODE_SECRET = "n0de-secret"
NODE = node_credential(NODE_SECRET, "n1")  # what n1's monitor presents


class Recorder:
    """WSGI middleware that records every request the registry answers (method, path, JSON
    body, status): an observer in front of the real app, not a replacement for it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.log: list[tuple[str, str, Any, int]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        environ["wsgi.input"] = io.BytesIO(raw)

        def recording_start_response(status: str, headers: Any, *rest: Any) -> Any:
            with self.lock:
                self.log.append((environ["REQUEST_METHOD"], environ["PATH_INFO"],
                                 json.loads(raw) if raw else None, int(status.split()[0])))
            return start_response(status, headers, *rest)

        return self.app(environ, recording_start_response)


@dataclass
class LiveRegistry:
    """The real Host and Task Registry (``create_registry_app`` on a ``RedisStore``) on a
    redis-server of its own, served on 127.0.0.1 from this process. Its outages are real:
    stopping that redis-server makes the registry answer 503."""

    redis: RedisServer
    store: RedisStore
    recorder: Recorder
    url: str

    def host_puts(self) -> list[dict[str, Any]]:
        """The bodies of the host updates the registry accepted (200), in order."""
        with self.recorder.lock:
            return [b for m, p, b, status in self.recorder.log
                    if m == "PUT" and p.startswith("/registry/hosts/") and status == 200]

    def host(self, host_id: str) -> dict[str, Any] | None:
        response = requests.get(f"{self.url}/registry/hosts/{host_id}", timeout=5.0,
                                headers={"Authorization": f"Bearer {TOKEN}"})
        if response.status_code == 404:
            return None
        response.raise_for_status()
        answer: dict[str, Any] = response.json()
        return answer

    def get(self, path: str) -> Any:
        response = requests.get(f"{self.url}{path}", timeout=5.0,
                                headers={"Authorization": f"Bearer {TOKEN}"})
        response.raise_for_status()
        return response.json()

    def place(self, task_id: str, host_id: str) -> None:
        """A placement of a request the manager recorded (else 409)."""
        request_ = {"id": task_id, "class": 4, "type": "job", "cpu_shares": 64, "memory": 2**20}
        self.store.sibling(RequestRecords).create(
            task_id, {**request_, "image": "busybox"})
        body = {"request": request_, "host": host_id}
        response = requests.post(f"{self.url}/registry/placements", json=body, timeout=5.0,
                                 headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status_code == 201, response.text


@pytest.fixture
def registry() -> Iterator[LiveRegistry]:
    with redis_server() as redis_srv:
        store = RedisStore.from_url(redis_srv.url, prefix="monitor-test")
        recorder = Recorder(create_registry_app(store, TOKEN, node_secret=NODE_SECRET))
        server = make_server("127.0.0.1", 0, recorder, threaded=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield LiveRegistry(redis_srv, store, recorder, f"http://127.0.0.1:{server.port}")
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)


REGISTRATION = HostRegistration("n1", "10.123.0.2", 1024, 2 * 1024**3, 0.25, 0.5)


def test_client_speaks_the_protocol(registry: LiveRegistry) -> None:
    client = RegistryClient(registry.url, NODE)
    with pytest.raises(NotFoundError):
        client.update_host("n1", HostUpdate(cpu_util=0.5))
    assert client.register_host(REGISTRATION) is True
    assert client.register_host(REGISTRATION) is False
    client.update_host("n1", HostUpdate(memory_util=0.75, power_w=42.0))
    assert registry.host_puts()[-1] == {"memory_util": 0.75, "power_w": 42.0}
    host = registry.host("n1")
    assert host is not None and host["memory_util"] == 0.75 and host["cpu_util"] == 0.25
    assert host["cpu_capacity"] == 1024 and host["address"] == "10.123.0.2"
    registry.place("a", "n1")
    result = client.update_tasks("n1", TaskBatch((TaskUtil("a", 0.5, 0.5), TaskUtil("b", 0, 0))))
    assert (result.updated, result.unknown) == (("a",), ("b",))
    with pytest.raises(ValidationError) as caught:
        client.register_host(HostRegistration("n1", "x", 1024, 2**30, 1.5, 0.0))
    assert caught.value.field == "cpu_util"  # the registry's 400, translated
    with pytest.raises(ValidationError):  # refused before sending, not "unreachable"
        client.register_host(HostRegistration("n1", "x", 1, 1, float("nan"), 0.0))
    with pytest.raises(AuthError):
        RegistryClient(registry.url, "wrong").register_host(REGISTRATION)
    # the operator's token, and another node's credential, are refused (DESIGN 9)
    for credential in (TOKEN, node_credential(NODE_SECRET, "n2")):
        with pytest.raises(ForbiddenError):
            RegistryClient(registry.url, credential).register_host(REGISTRATION)
        with pytest.raises(ForbiddenError):
            RegistryClient(registry.url, credential).update_host("n1", HostUpdate(cpu_util=0.9))
    assert (registry.host("n1") or {}).get("memory_util") == 0.75
    registry.redis.stop()  # the registry's Redis is down: it answers 503
    with pytest.raises(UnavailableError):
        client.register_host(REGISTRATION)
    assert registry.recorder.log[-1][3] == 503, registry.recorder.log[-1]
    client.close()


def test_client_unreachable_registry() -> None:
    client = RegistryClient(f"http://127.0.0.1:{free_port()}", NODE, connect_timeout_s=1.0)
    with pytest.raises(UnavailableError):
        client.register_host(REGISTRATION)


class ScriptedHost:
    """A host source whose utilization the test sets (the loop is under test here)."""

    def __init__(self) -> None:
        self.cpu_util = 0.2
        self.memory_util = 0.3
        self.primed = False

    def capacity(self) -> HostCapacity:
        return HostCapacity(2048, 4 * 1024**3)

    def sample(self) -> UtilSample | None:
        if not self.primed:
            self.primed = True
            return None
        return UtilSample(self.cpu_util, self.memory_util)


class ScriptedTasks:
    def __init__(self) -> None:
        self.samples: dict[str, UtilSample] = {"a": UtilSample(0.5, 0.5)}

    def sample(self) -> dict[str, UtilSample]:
        return dict(self.samples)


@contextlib.contextmanager
def running(monitor: Monitor) -> Iterator[Monitor]:
    stop = threading.Event()
    thread = threading.Thread(target=monitor.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield monitor
    finally:
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive()


def test_loop_registers_sends_thresholded_updates_and_survives_outages(
    registry: LiveRegistry,
) -> None:
    host, tasks = ScriptedHost(), ScriptedTasks()
    monitor = Monitor(
        HostIdentity("n1", "10.123.0.2"), host,
        RegistryClient(registry.url, NODE, read_timeout_s=2.0),
        timings=Timings(0.05, 0.2, 0.05, 0.3), threshold_pp=10.0,
        backoff=BackoffPolicy(base_s=0.05, cap_s=0.2), task_sampler=tasks,
    )
    with running(monitor):
        wait_for(lambda: len(registry.host_puts()) >= 1, 10.0, "the first host update")
        registered = registry.host("n1")
        assert registered is not None and registered["cpu_capacity"] == 2048
        first = registry.host_puts()[0]
        assert first.keys() == {"cpu_util", "memory_util", "measured_at", "windows"}
        assert first["windows"]["5m"]["samples"] >= 1
        registry.place("a", "n1")

        def a_measured() -> bool:  # the batch that carried "a" was accepted and stored
            task = registry.store.task("a")
            return task is not None and (task.cpu_util, task.memory_util) == (0.5, 0.5)

        wait_for(a_measured, 10.0, "task a's utilization from the monitor")
        assert monitor.counters.task_batches_sent >= 1
        # a small move is not sent
        host.cpu_util = 0.25
        windows = monitor.counters.host_windows
        wait_for(lambda: monitor.counters.host_windows >= windows + 3, 10.0, "three windows")
        assert len(registry.host_puts()) == 1
        # the registry's Redis goes down (503s); the host moves twice; only the latest value
        # arrives once it is back (append-only file: nothing the registry had is lost)
        registry.redis.stop()
        host.cpu_util = 0.6
        wait_for(lambda: monitor.counters.send_failures >= 2, 10.0, "failed sends")
        assert 503 in {status for _, _, _, status in registry.recorder.log}
        host.cpu_util, host.memory_util = 0.9, 0.8
        windows = monitor.counters.host_windows
        wait_for(lambda: monitor.counters.host_windows >= windows + 2, 10.0, "two windows")
        assert len(registry.host_puts()) == 1
        registry.redis.start()
        wait_for(lambda: len(registry.host_puts()) >= 2, 10.0, "the update after the outage")
        time.sleep(0.5)
        puts = registry.host_puts()
        assert len(puts) == 2
        assert {k: puts[1][k] for k in ("cpu_util", "memory_util")} == {
            "cpu_util": 0.9, "memory_util": 0.8}
        assert puts[1]["measured_at"] > first["measured_at"]
        answer = registry.host("n1")
        assert answer is not None and answer["cpu_util"] == 0.9
        # the registry forgot the host (Redis emptied): re-register, retry once
        registry.store.flush()
        host.cpu_util = 0.1
        wait_for(lambda: (registry.host("n1") or {}).get("cpu_util") == 0.1, 10.0,
                 "re-registration and the retried update")
    assert monitor.counters.registrations >= 2
    assert monitor.registered


def test_a_quiet_host_sends_its_values_again_so_a_wrong_value_heals(
    registry: LiveRegistry,
) -> None:
    """DESIGN 9: nothing moves after the first window, yet the monitor sends its current values
    again every resend_s: they stay dated (a quiet host is no dead one, DESIGN 3.12), and a
    wrong value written to the registry meanwhile is corrected within that period. (On main
    the monitor sent only the time: the wrong value stood for good.)"""
    host, tasks = ScriptedHost(), ScriptedTasks()
    monitor = Monitor(
        HostIdentity("n1", "10.123.0.2"), host,
        RegistryClient(registry.url, NODE, read_timeout_s=2.0),
        timings=Timings(0.05, 0.2, 0.05, 0.2), threshold_pp=10.0, resend_s=1.0,
        task_sampler=tasks,
    )
    with running(monitor):
        wait_for(lambda: len(registry.host_puts()) >= 1, 10.0, "the first host update")
        dated = registry.store.host("n1").util_at
        assert dated is not None and abs(dated - time.time()) < 5
        registry.place("a", "n1")
        wait_for(lambda: task_cpu(registry, "a") == 0.5, 10.0, "task a's utilization")
        # a wrong value, as the audit wrote it (with a credential that may write it: n1's own)
        wrong = requests.put(f"{registry.url}/registry/hosts/n1/utilization", timeout=5.0,
                             json={"memory_util": 0.96},
                             headers={"Authorization": f"Bearer {NODE}"})
        assert wrong.status_code == 200 and registry.store.host("n1").memory_util == 0.96
        registry.store.update_task_utilization("a", 0.99, 0.99)
        wrote_s = time.monotonic()
        wait_for(lambda: registry.store.host("n1").memory_util == 0.3, 5.0,
                 "the monitor to send its memory value again")
        healed_s = time.monotonic() - wrote_s
        wait_for(lambda: task_cpu(registry, "a") == 0.5, 5.0, "the task's values again")
        wait_for(lambda: len(registry.host_puts()) >= 5, 10.0, "more re-sends")
    assert healed_s <= 1.0 + 0.2 + 0.5, healed_s  # resend_s + a window + slack
    puts = registry.host_puts()
    monitor_puts = [p for p in puts[1:] if p != {"memory_util": 0.96}]
    assert len(monitor_puts) >= 3
    # every re-send carries both values, the time and the windows; none is a bare heartbeat
    assert all(p.keys() == {"cpu_util", "memory_util", "measured_at", "windows"}
               for p in monitor_puts)
    assert all((p["cpu_util"], p["memory_util"]) == (0.2, 0.3) for p in monitor_puts)
    stored = registry.store.host("n1")
    assert stored.util_at is not None and stored.util_at > dated
    assert stored.windows is not None and stored.windows.windows[0].samples >= 3
    watcher = registry.get("/registry/watcher")
    entry = watcher["data"]["n1"]
    assert entry["measured_at"] == pytest.approx(stored.util_at)
    assert entry["windows"]["5m"]["samples"] == stored.windows.windows[0].samples


def task_cpu(registry: LiveRegistry, task_id: str) -> float | None:
    task = registry.store.task(task_id)
    return None if task is None else task.cpu_util


def test_loop_keeps_sampling_while_the_registry_is_unreachable() -> None:
    host = ScriptedHost()
    monitor = Monitor(
        HostIdentity("n1", "a"), host,
        RegistryClient(f"http://127.0.0.1:{free_port()}", NODE, connect_timeout_s=0.5),
        timings=Timings(0.05, 0.1, 0.05, 0.1), backoff=BackoffPolicy(base_s=0.05, cap_s=0.3),
    )
    with running(monitor):
        wait_for(lambda: monitor.counters.host_windows >= 10, 10.0, "ten windows")
    assert not monitor.registered
    assert monitor.counters.send_failures >= 2
    # back-off: far fewer attempts than windows would have caused
    assert monitor.counters.send_failures < monitor.counters.host_samples
    assert monitor.host.pending is not None
