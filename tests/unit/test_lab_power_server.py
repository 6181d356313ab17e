"""The lab's power endpoint (lab/power_server.py) as the manager's ``lab`` backend meets it, without
a lab: a real HTTP server on a free loopback port that checks its token, answers the project's
JSON errors, and says clearly that no lab is up. Switching real engines: tests/e2e."""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from domain.errors import AuthError, NotFoundError, UnavailableError, ValidationError
from lab.power_server import make_server, parse_listen, read_token
from lab.processes import free_port, stop_child, wait_serving
from lab.settings import LabPaths, LabSettings
from manager.power_backends import (
    BackendKind,
    LabBackend,
    PowerBackendSettings,
    PowerTarget,
)

TOKEN = "power-test-token"


@pytest.fixture
def settings(tmp_path: Path) -> LabSettings:
    return LabSettings(paths=LabPaths(run_dir=tmp_path / "run", cache_dir=tmp_path / "cache",
                                      log_dir=tmp_path / "log"))


@pytest.fixture
def url(settings: LabSettings) -> Iterator[str]:
    server = make_server(settings, "127.0.0.1", 0, TOKEN)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def call(method: str, url: str, token: str | None = TOKEN, **kwargs: object) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.request(method, url, headers=headers, timeout=5, **kwargs)  # type: ignore[arg-type]


def test_every_endpoint_but_healthz_needs_the_token(url: str) -> None:
    assert call("GET", f"{url}/healthz", None).json() == {"ok": True}
    for method, path in (("GET", "/nodes"), ("GET", "/nodes/gs-node1"),
                         ("POST", "/nodes/gs-node1/off"), ("POST", "/nodes/gs-node1/on")):
        for token in (None, "wrong", TOKEN + "x"):
            answer = call(method, f"{url}{path}", token)
            assert answer.status_code == 401, (method, path, token)
            assert answer.json()["error"] == "unauthorized"


def test_without_a_lab_it_says_so_and_unknown_paths_are_not_found(url: str) -> None:
    answer = call("POST", f"{url}/nodes/gs-node1/off")
    assert answer.status_code == 503 and "no lab is up" in answer.json()["message"]
    assert call("POST", f"{url}/nodes/gs-node1/reboot").status_code == 404
    assert call("DELETE", f"{url}/nodes").status_code == 501  # http.server: no such method
    big = call("POST", f"{url}/nodes/gs-node1/on", data=b"x" * 10_000)
    assert big.status_code == 413


def test_the_lab_backend_turns_the_endpoints_answers_into_our_errors(url: str) -> None:
    backend = LabBackend(PowerBackendSettings(BackendKind.LAB, lab_url=url, lab_token=TOKEN),
                         nodes=_NoSwarm())
    with pytest.raises(UnavailableError) as info:
        backend.switch_on(PowerTarget("abc", "gs-node1"))
    assert "no lab is up" in str(info.value)
    wrong = LabBackend(PowerBackendSettings(BackendKind.LAB, lab_url=url, lab_token="nope"),
                       nodes=_NoSwarm())
    with pytest.raises(AuthError):
        wrong.status(PowerTarget("abc", "gs-node1"))


def test_a_switch_off_that_fails_after_the_drain_leaves_the_node_active(url: str) -> None:
    """The endpoint refuses (no lab is up here): the node drained for the switch takes work
    again, so the manager does not lose it as a drained node."""
    swarm = _RecordingSwarm()
    backend = LabBackend(PowerBackendSettings(BackendKind.LAB, lab_url=url, lab_token=TOKEN),
                         nodes=swarm)
    with pytest.raises(UnavailableError):
        backend.switch_off(PowerTarget("abc", "gs-node1"))
    assert swarm.availability == [("abc", "drain"), ("abc", "active")]


class _RecordingSwarm:
    """The Swarm's answers for one empty node, and the availability asked of it (a node's
    drain followed by a failing engine stop cannot be had without a lab that fails; the lab's
    own switch is tested for real in tests/e2e)."""

    def __init__(self) -> None:
        self.availability: list[tuple[str, str]] = []

    def set_availability(self, node_id: str, availability: str) -> None:
        self.availability.append((node_id, availability))

    def node_state(self, node_id: str) -> tuple[str, str]:
        return ("ready", self.availability[-1][1] if self.availability else "active")

    def running_tasks(self, node_id: str) -> int:
        return 0


class _NoSwarm:
    """The backend must not reach the Swarm before the endpoint answered."""

    def set_availability(self, node_id: str, availability: str) -> None:
        raise AssertionError("no Swarm call expected")

    def node_state(self, node_id: str) -> tuple[str, str]:
        raise AssertionError("no Swarm call expected")

    def running_tasks(self, node_id: str) -> int:
        raise AssertionError("no Swarm call expected")


def test_it_listens_on_loopback_or_the_labs_bridge_only(settings: LabSettings) -> None:
    assert parse_listen("127.0.0.1:8089", settings) == ("127.0.0.1", 8089)
    assert parse_listen(f"{settings.gateway}:0", settings) == (settings.gateway, 0)
    for bad in ("0.0.0.0:8089", "192.168.1.5:80", "localhost:80", "127.0.0.1", ":80"):
        with pytest.raises(ValidationError) as info:
            parse_listen(bad, settings)
        assert info.value.field == "listen"


def test_a_generated_token_is_kept_private_and_reused(settings: LabSettings,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GREENSWARM_TOKEN", raising=False)
    monkeypatch.delenv("GREENSWARM_TOKEN_FILE", raising=False)
    token, source = read_token(settings, None)
    assert len(token) >= 32 and source.endswith("power.token")
    assert stat.S_IMODE(Path(source).stat().st_mode) == 0o600
    assert read_token(settings, None)[0] == token
    monkeypatch.setenv("GREENSWARM_TOKEN", "shared")
    assert read_token(settings, None) == ("shared", "GREENSWARM_TOKEN")


# -- lab/power.py's pure parts: which node, and what its power is ---------------------------------


def _lab_state(settings: LabSettings) -> Any:
    from dataclasses import replace

    from lab.model import empty_state, node_record
    from monitor.cgroups import CgroupVersion

    nodes = tuple(replace(node_record(settings, i), swarm_node_id=f"swarm{i}") for i in (1, 2))
    return replace(empty_state(settings, CgroupVersion.V2), nodes=nodes)


def test_a_node_is_found_by_name_swarm_id_or_address(settings: LabSettings) -> None:
    from lab.power import UnknownNodeError, find_node

    state = _lab_state(settings)
    assert {find_node(state, ref).name for ref in ("gs-node2", "swarm2", "10.123.0.12")} == {
        "gs-node2"}
    with pytest.raises(UnknownNodeError) as info:
        find_node(state, "gs-node9")
    assert isinstance(info.value, NotFoundError)


def test_a_record_of_off_counts_only_while_the_engine_does_not_run(settings: LabSettings) -> None:
    from lab.power import NodePower, power_of

    node = _lab_state(settings).nodes[0]
    records = {"gs-node1": {"state": "off", "since": 123.0}}
    assert power_of(node, None, records) == (NodePower.OFF, 123.0)
    assert power_of(node, None, {}) == (NodePower.STOPPED, None)  # died: nobody switched it
    assert power_of(node, 4242, records, answering=True) == (NodePower.ON, None)
    assert power_of(node, 4242, records, answering=False) == (NodePower.BOOTING, None)


def test_lab_status_shows_a_node_switched_off_as_off_and_the_lab_still_up(
        settings: LabSettings) -> None:
    from lab.model import DaemonState, EngineState, SwarmState
    from lab.status import LabStatus, NodeStatus, render

    def node(name: str, daemon: DaemonState, swarm: SwarmState) -> NodeStatus:
        return NodeStatus(name, "10.123.0.11", "/run/x.sock", None, daemon,
                          EngineState.SILENT, swarm, "swarm1", "worker", 0.5, 512 * 2**20,
                          f"/greenswarm-lab/{name}", None, None)

    status = LabStatus(True, EngineState.ANSWERING, "active", _lab_state(settings),
                       (node("gs-node1", DaemonState.RUNNING, SwarmState.READY),
                        node("gs-node2", DaemonState.OFF, SwarmState.DOWN)))
    lines = render(status).splitlines()
    assert any(line.startswith("gs-node2") and "  off  " in line for line in lines)
    assert any(line.startswith("lab up (1 node(s) switched off)") for line in lines)


def test_a_served_endpoint_ends_on_sigterm_and_takes_its_pid_file_with_it(
    tmp_path: Path,
) -> None:
    """``power stop`` and ``lab down`` stop a detached server with SIGTERM: it closes its
    socket and removes its pid file (SIGTERM used to end it at once, the pid file left)."""
    token, pid_file = tmp_path / "token", tmp_path / "run" / "power.pid"
    token.write_text(TOKEN)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "lab", "power", "serve", "--listen", f"127.0.0.1:{port}",
         "--token-file", str(token), "--pidfile", str(pid_file)],
        cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT)
    try:
        # 30 s: a loaded machine starts Python slowly; the pid file is written before it serves
        wait_serving(server, f"http://127.0.0.1:{port}/healthz", 30, "the power endpoint")
        assert pid_file.read_text().strip() == str(server.pid)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0, server.stdout.read() if server.stdout else ""
        assert not pid_file.exists()
    finally:
        stop_child(server)
