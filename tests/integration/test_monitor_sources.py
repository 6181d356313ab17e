"""The monitor against real things: a cgroup subtree created under /sys/fs/cgroup with a process
burning CPU in it, real busybox containers on the Docker engine (cgroup files and the stats API),
and a small HTTP registry on the loopback speaking the registry protocol (messages 11-13)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest

from domain.errors import AuthError, NotFoundError, UnavailableError, ValidationError
from monitor.cgroups import CgroupVersion, detect_version
from monitor.client import HostRegistration, RegistryClient
from monitor.core import BackoffPolicy, HostUpdate, TaskBatch, TaskUtil, UtilSample
from monitor.host_sources import CgroupHostSource, HostCapacity
from monitor.identity import HostIdentity, resolve_identity
from monitor.service import Monitor, Timings
from monitor.tasks import TASK_LABEL, ContainerSampler, ReadPath, TaskContainer
from tests.support.servers import free_port, wait_for

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

    client = docker.DockerClient(base_url=f"unix://{docker_socket}", version="1.41", timeout=30)
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
        labels = {TASK_LABEL: task_id} if labelled else {}
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


def _wait_for_memory(container_id: str, at_least_bytes: int) -> None:
    path = CGROUP_ROOT / "memory" / "docker" / container_id / "memory.usage_in_bytes"

    def ready() -> bool:
        try:
            return int(path.read_text()) >= at_least_bytes
        except OSError:
            return True  # not this layout: the sampler's own numbers will tell
    wait_for(ready, 20.0, f"container {container_id[:12]} to fill its memory")


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
    _wait_for_memory(fat_id, 30_000_000)
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


def test_refuses_to_start_without_a_token() -> None:
    environment = {**os.environ, "GREENSWARM_TOKEN": ""}
    completed = subprocess.run([sys.executable, "-m", "monitor"], cwd=REPO, env=environment,
                               capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 2
    assert "GREENSWARM_TOKEN is empty" in completed.stderr


# --- the registry client and the loop against a real HTTP registry ----------------------------

TOKEN = "t0ken"


@dataclass
class FakeRegistry:
    """A tiny registry on 127.0.0.1 that speaks messages 11-13 (not a mock of our client: a
    server with the protocol's statuses, which tests can make fail)."""

    known_tasks: set[str] = field(default_factory=set)
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    fail_status: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, method: str, path: str, auth: str | None, body: Any) -> tuple[int, Any]:
        with self.lock:
            if auth != f"Bearer {TOKEN}":
                return 401, {"error": "unauthorized"}
            if self.fail_status is not None:
                return self.fail_status, {"error": "down"}
            self.log.append((method, path, body))
            if method == "POST" and path == "/registry/hosts":
                value = body.get("cpu_util")
                if not (isinstance(value, float | int) and 0 <= value <= 1):
                    return 400, {"error": "invalid", "field": "cpu_util", "message": "a number"}
                created = body["id"] not in self.hosts
                self.hosts[body["id"]] = dict(body)
                return (201 if created else 200), self.hosts[body["id"]]
            if method == "PUT" and path == "/registry/tasks/utilization":
                ids = [t["id"] for t in body["tasks"]]
                return 200, {"updated": [i for i in ids if i in self.known_tasks],
                             "unknown": [i for i in ids if i not in self.known_tasks]}
            parts = path.strip("/").split("/")
            if method == "PUT" and len(parts) == 4 and parts[3] == "utilization":
                host = self.hosts.get(parts[2])
                if host is None:
                    return 404, {"error": "not found"}
                host.update(body)
                return 200, host
            return 404, {"error": "no route"}

    def host_puts(self) -> list[dict[str, Any]]:
        with self.lock:
            return [b for m, p, b in self.log if m == "PUT" and p.startswith("/registry/hosts/")]


@pytest.fixture
def registry() -> Iterator[tuple[FakeRegistry, str]]:
    state = FakeRegistry()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            status, answer = state.handle(self.command, self.path,
                                          self.headers.get("Authorization"), body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_PUT = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


REGISTRATION = HostRegistration("n1", "10.123.0.2", 1024, 2 * 1024**3, 0.25, 0.5)


def test_client_speaks_the_protocol(registry: tuple[FakeRegistry, str]) -> None:
    state, url = registry
    client = RegistryClient(url, TOKEN)
    with pytest.raises(NotFoundError):
        client.update_host("n1", HostUpdate(cpu_util=0.5))
    assert client.register_host(REGISTRATION) is True
    assert client.register_host(REGISTRATION) is False
    client.update_host("n1", HostUpdate(memory_util=0.75, power_w=42.0))
    assert state.hosts["n1"]["memory_util"] == 0.75 and state.hosts["n1"]["power_w"] == 42.0
    assert state.hosts["n1"]["cpu_util"] == 0.25
    state.known_tasks = {"a"}
    result = client.update_tasks("n1", TaskBatch((TaskUtil("a", 0.5, 0.5), TaskUtil("b", 0, 0))))
    assert (result.updated, result.unknown) == (("a",), ("b",))
    with pytest.raises(ValidationError) as caught:
        client.register_host(HostRegistration("n1", "x", 1, 1, 1.5, 0.0))
    assert caught.value.field == "cpu_util"  # the registry's 400, translated
    with pytest.raises(ValidationError):  # refused before sending, not "unreachable"
        client.register_host(HostRegistration("n1", "x", 1, 1, float("nan"), 0.0))
    with pytest.raises(AuthError):
        RegistryClient(url, "wrong").register_host(REGISTRATION)
    state.fail_status = 503
    with pytest.raises(UnavailableError):
        client.register_host(REGISTRATION)
    client.close()


def test_client_unreachable_registry() -> None:
    client = RegistryClient(f"http://127.0.0.1:{free_port()}", TOKEN, connect_timeout_s=1.0)
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
    registry: tuple[FakeRegistry, str],
) -> None:
    state, url = registry
    state.known_tasks = {"a"}
    host, tasks = ScriptedHost(), ScriptedTasks()
    monitor = Monitor(
        HostIdentity("n1", "10.123.0.2"), host, RegistryClient(url, TOKEN, read_timeout_s=2.0),
        timings=Timings(0.05, 0.2, 0.05, 0.3), threshold_pp=10.0,
        backoff=BackoffPolicy(base_s=0.05, cap_s=0.2), task_sampler=tasks,
    )
    with running(monitor):
        wait_for(lambda: len(state.host_puts()) >= 1, 10.0, "the first host update")
        assert state.hosts["n1"]["cpu_capacity"] == 2048
        assert state.host_puts()[0].keys() == {"cpu_util", "memory_util"}
        wait_for(lambda: monitor.counters.task_batches_sent >= 1, 10.0, "the first task batch")
        # a small move is not sent
        host.cpu_util = 0.25
        windows = monitor.counters.host_windows
        wait_for(lambda: monitor.counters.host_windows >= windows + 3, 10.0, "three windows")
        assert len(state.host_puts()) == 1
        # the registry goes down; the host moves twice; only the latest value arrives later
        state.fail_status = 503
        host.cpu_util = 0.6
        wait_for(lambda: monitor.counters.send_failures >= 2, 10.0, "failed sends")
        host.cpu_util, host.memory_util = 0.9, 0.8
        windows = monitor.counters.host_windows
        wait_for(lambda: monitor.counters.host_windows >= windows + 2, 10.0, "two windows")
        state.fail_status = None
        wait_for(lambda: len(state.host_puts()) >= 2, 10.0, "the update after the outage")
        time.sleep(0.5)
        puts = state.host_puts()
        assert len(puts) == 2
        assert puts[1] == {"cpu_util": 0.9, "memory_util": 0.8}
        # the registry forgot the host (restart without persistence): re-register, retry once
        with state.lock:
            state.hosts.clear()
        host.cpu_util = 0.1
        wait_for(lambda: "n1" in state.hosts and state.hosts["n1"].get("cpu_util") == 0.1, 10.0,
                 "re-registration and the retried update")
    assert monitor.counters.registrations >= 2
    assert monitor.registered


def test_loop_keeps_sampling_while_the_registry_is_unreachable() -> None:
    host = ScriptedHost()
    monitor = Monitor(
        HostIdentity("n1", "a"), host,
        RegistryClient(f"http://127.0.0.1:{free_port()}", TOKEN, connect_timeout_s=0.5),
        timings=Timings(0.05, 0.1, 0.05, 0.1), backoff=BackoffPolicy(base_s=0.05, cap_s=0.3),
    )
    with running(monitor):
        wait_for(lambda: monitor.counters.host_windows >= 10, 10.0, "ten windows")
    assert not monitor.registered
    assert monitor.counters.send_failures >= 2
    # back-off: far fewer attempts than windows would have caused
    assert monitor.counters.send_failures < monitor.counters.host_samples
    assert monitor.host.pending is not None
