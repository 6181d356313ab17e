"""The power manager in the live service (DESIGN 3.15, issue 31): an idle host switched off
through the ``command`` backend, not lost while off, switched on again for a request that only
it would take (which waits for it instead of killing), and ``advise``, which switches nothing.

The real manager (its app, loop, scheduler, reconciliation, power control) on a real Redis;
the ``command`` backend runs real scripts (tests write them), which record their calls in a
file. The Swarm is the in-memory stand-in of tests/support/standin_swarm.py: a machine that
really powers off cannot be had in the fast suite, so the test sets the node Down when the
power_off script ran and Ready when power_on ran. tests/e2e/test_power_manager_lab.py does it
with the lab's real engines. Each pass and power round runs on the manager's loop by the test
(the manager's timer is not started).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import manager.reconcile
from cli.client import _power_cell
from domain.errors import FencedError
from domain.power import HostPower, PowerSettings, PowerState
from host_registry.keys import HostKeys
from lab.processes import RedisServer
from manager.answers import HOSTS
from manager.power_backends import BackendKind, PowerBackendSettings
from manager.switching import PowerStates
from tests.integration.test_reconcile_records import AUTH, Cluster, make_cluster
from tests.support.standin_swarm import StandInSwarm

pytestmark = pytest.mark.redis
_numbers = itertools.count()
SCRIPT = """#!/bin/sh
# a power command of the test: records its call, says what a BMC would
echo "$1 $2 $GREENSWARM_POWER_HOST_NAME" >> {log}
echo "chassis power $1 for $2"
exit {status}
"""


def _commands(tmp_path: Path, status: int = 0) -> tuple[Path, Path]:
    log = tmp_path / "calls.log"
    script = tmp_path / "power.sh"
    script.write_text(SCRIPT.format(log=log, status=status))
    script.chmod(0o755)
    commands = tmp_path / "power.toml"
    commands.write_text(f'timeout_s = 10\n[defaults]\npower_on = ["{script}", "on", "{{id}}"]\n'
                        f'power_off = ["{script}", "off", "{{id}}"]\n')
    return commands, log


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _build(redis_srv: RedisServer, swarm: StandInSwarm, backend: PowerBackendSettings,
           monkeypatch: pytest.MonkeyPatch) -> Cluster:
    monkeypatch.setattr(manager.reconcile, "NODE_GRACE_S", 0.0)
    built = make_cluster(
        redis_srv.url, swarm, f"pow{next(_numbers)}", node_gone_s=1.0,
        power_settings=PowerSettings(enabled=True, idle_s=0.0, min_on=1),
        power_backend_settings=backend)
    built.sync()
    return built


@pytest.fixture
def swarm() -> StandInSwarm:
    stand_in = StandInSwarm()
    stand_in.add_node("n1", "h1")
    stand_in.add_node("n2", "h2")
    return stand_in


@pytest.fixture
def commanded(redis_srv: RedisServer, swarm: StandInSwarm, monkeypatch: pytest.MonkeyPatch,
              tmp_path: Path) -> Iterator[tuple[Cluster, Path]]:
    commands, log = _commands(tmp_path)
    built = _build(redis_srv, swarm, PowerBackendSettings(
        BackendKind.COMMAND, commands_file=str(commands)), monkeypatch)
    try:
        yield built, log
    finally:
        built.manager.loop.stop()
        built.store.flush()


def _round(cluster: Cluster) -> None:
    """A reconciliation pass and a power round, as the manager's timer runs them."""
    cluster.sync()
    cluster.manager.loop.call(cluster.manager.power_tick)


def _hosts(cluster: Cluster) -> dict[str, dict[str, Any]]:
    answer = cluster.client.get("/hosts", headers=AUTH).get_json()
    HOSTS.read(answer, "hosts")  # the answer is what the OpenAPI document says
    return {host["id"]: host for host in answer}


def _until(what: str, done: Any, cluster: Cluster, timeout_s: float = 10.0) -> None:
    """Power rounds until ``done()`` (a switch runs on a thread of its own)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout_s} s")
        time.sleep(0.05)
        cluster.manager.loop.call(lambda: None)  # the switch's end, posted to the loop


def _power_events(cluster: Cluster) -> list[dict[str, Any]]:
    events = cluster.client.get("/events?limit=1000", headers=AUTH).get_json()["events"]
    return [e for e in events if e.get("host") and not e["request"]]


def test_an_idle_host_is_switched_off_kept_while_off_and_switched_on_for_a_request(
        commanded: tuple[Cluster, Path]) -> None:
    cluster, log = commanded
    placed = cluster.submit("small", cls=3, cpu=100)["request"]["host"]
    idle = "n2" if placed == "n1" else "n1"
    _round(cluster)  # the empty host: idle (idle_s 0), and the other keeps the spare room
    _until("the power_off command ran", lambda: _calls(log) == [f"off {idle} h{idle[1]}"],
           cluster)
    _until("the host is off", lambda: _hosts(cluster)[idle]["power"]["state"] == "off",
           cluster)
    cluster.swarm.set_down(idle)  # what a machine switched off is to the Swarm
    time.sleep(1.1)  # past GREENSWARM_NODE_GONE_S (1 s here): a Down node would be retired
    for _ in range(3):
        _round(cluster)
    hosts = _hosts(cluster)
    assert hosts[idle]["power"]["state"] == "off", hosts[idle]
    assert cluster.health()["nodes_down"] == []  # switched off: not a node down, not retired
    kinds = [e["kind"] for e in _power_events(cluster)]
    assert kinds == ["switching-off", "switched-off"], kinds
    off_event = _power_events(cluster)[-1]
    assert off_event["exit_status"] == 0 and "chassis power off" in off_event["output"]
    metrics = cluster.client.get("/metrics", headers=AUTH).get_data(as_text=True)
    assert (f'greenswarm_host_power_state{{host="{idle}",name="h{idle[1]}",state="off"}} 1.0'
            in metrics), metrics
    assert f'greenswarm_host_power_state{{host="{placed}",name="h{placed[1]}",state="on"}} 1.0' \
        in metrics
    assert 'greenswarm_energy_kwh_total{source="estimated_all_on"}' in metrics
    assert _power_cell(_hosts(cluster)[idle]["power"]) == "off"  # greenswarm hosts' POWER
    assert _hosts(cluster)[idle]["power"]["estimated_w"] == 5.0  # standby_w, while off

    # a class-1 request of 2000 shares: no host on takes it without killing "small"; the off
    # host would: it waits for that host (queued even with queue false), nothing is killed
    answer = cluster.submit("big", cls=1, cpu=2000, queue=False)
    assert answer["request"]["status"] == "pending", answer
    assert idle in answer["decision"]["reason"], answer["decision"]
    _until("the power_on command ran", lambda: len(_calls(log)) == 2, cluster)
    assert _calls(log)[1] == f"on {idle} h{idle[1]}"
    assert _hosts(cluster)[idle]["power"]["state"] == "booting"
    _round(cluster)  # its node is not Ready yet: still booting, big still waits
    assert cluster.record("big")["status"] == "pending"
    cluster.swarm.states[idle] = "ready"  # the machine came up and its node rejoined
    _round(cluster)
    _until("big placed on the host switched on",
           lambda: cluster.record("big")["host"] == idle, cluster)
    assert _hosts(cluster)[idle]["power"]["state"] == "on"
    small = cluster.record("small")
    assert (small["status"], small["kills"]) == ("running", 0), small
    kinds = [e["kind"] for e in _power_events(cluster)]
    assert kinds == ["switching-off", "switched-off", "switching-on", "switched-on"], kinds
    switching_on = _power_events(cluster)[2]
    assert (switching_on["power_reason"], switching_on["for_request"]) == ("request", "big")


def test_a_failed_power_command_is_recorded_and_the_host_stays_on(
        redis_srv: RedisServer, swarm: StandInSwarm, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    commands, log = _commands(tmp_path, status=3)
    cluster = _build(redis_srv, swarm, PowerBackendSettings(
        BackendKind.COMMAND, commands_file=str(commands)), monkeypatch)
    try:
        cluster.submit("small", cls=3, cpu=100)
        _round(cluster)
        _until("the switch failed", lambda: any(
            e["kind"] == "switch-failed" for e in _power_events(cluster)), cluster)
        failed = next(e for e in _power_events(cluster) if e["kind"] == "switch-failed")
        assert (failed["op"], failed["state"], failed["exit_status"]) == ("off", "on", 3)
        assert "chassis power off" in failed["output"]
        assert len(_calls(log)) == 1
        assert {h["power"]["state"] for h in _hosts(cluster).values()} == {"on"}
    finally:
        cluster.manager.loop.stop()
        cluster.store.flush()


def test_a_host_switched_on_whose_node_never_comes_is_taken_as_off(
        redis_srv: RedisServer, swarm: StandInSwarm, monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    commands, log = _commands(tmp_path)
    cluster = _build(redis_srv, swarm, PowerBackendSettings(
        BackendKind.COMMAND, commands_file=str(commands), ready_timeout_s=0.5), monkeypatch)
    try:
        placed = cluster.submit("small", cls=3, cpu=100)["request"]["host"]
        idle = "n2" if placed == "n1" else "n1"
        _round(cluster)
        _until("the host is off", lambda: _hosts(cluster)[idle]["power"]["state"] == "off",
               cluster)
        cluster.swarm.set_down(idle)
        cluster.submit("big", cls=1, cpu=2000)
        _until("the power_on command ran", lambda: len(_calls(log)) == 2, cluster)
        time.sleep(0.6)  # its node stays Down past the ready timeout
        _round(cluster)
        failed = [e for e in _power_events(cluster) if e["kind"] == "switch-failed"]
        assert [(e["op"], e["state"]) for e in failed] == [("on", "off")], failed
        assert _hosts(cluster)[idle]["power"]["state"] == "off"
        assert cluster.record("big")["status"] == "pending"  # it waits again
    finally:
        cluster.manager.loop.stop()
        cluster.store.flush()


def test_a_restarted_manager_keeps_a_host_it_switched_off_as_off(
        commanded: tuple[Cluster, Path], redis_srv: RedisServer) -> None:
    cluster, _ = commanded
    placed = cluster.submit("small", cls=3, cpu=100)["request"]["host"]
    idle = "n2" if placed == "n1" else "n1"
    _round(cluster)
    _until("the host is off", lambda: _hosts(cluster)[idle]["power"]["state"] == "off",
           cluster)
    cluster.swarm.set_down(idle)
    cluster.manager.loop.stop()
    # the same Redis prefix, a new manager: as after a restart (start() loads the states)
    again = make_cluster(redis_srv.url, cluster.swarm, cluster.manager.settings.redis_prefix,
                         node_gone_s=1.0, power_settings=cluster.manager.settings.power_settings,
                         power_backend_settings=cluster.manager.settings.power_backend_settings)
    try:
        assert again.manager.switching is not None
        again.manager.switching.load()
        time.sleep(1.1)  # past GREENSWARM_NODE_GONE_S
        for _ in range(2):
            _round(again)
        assert _hosts(again)[idle]["power"]["state"] == "off"
        assert again.health()["nodes_down"] == []
        assert cluster.record("small")["status"] == "running"
    finally:
        again.manager.loop.stop()


def test_advise_switches_nothing_and_shows_what_it_would_switch_off(
        redis_srv: RedisServer, swarm: StandInSwarm, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _build(redis_srv, swarm, PowerBackendSettings(BackendKind.ADVISE), monkeypatch)
    try:
        placed = cluster.submit("small", cls=3, cpu=100)["request"]["host"]
        idle = "n2" if placed == "n1" else "n1"
        _round(cluster)
        _round(cluster)
        hosts = _hosts(cluster)
        assert hosts[idle]["power"]["state"] == "on"
        assert hosts[idle]["power"]["advice"] == "switch-off", hosts[idle]["power"]
        assert "advice" not in hosts[placed]["power"]
        assert _power_cell(hosts[idle]["power"]) == "on (advise: switch-off)"
        advised = [e for e in _power_events(cluster) if e["kind"] == "switch-advised"]
        assert [(e["host"], e["action"]) for e in advised] == [(idle, "switch-off")]
        assert cluster.health()["nodes_down"] == []
    finally:
        cluster.manager.loop.stop()
        cluster.store.flush()


def test_the_dashboard_shows_a_host_off_and_the_kwh_with_switching(
        commanded: tuple[Cluster, Path], tmp_path: Path) -> None:
    """In a real headless Chromium, against the manager app served over HTTP."""
    import threading

    from selenium.webdriver.common.by import By
    from werkzeug.serving import make_server

    from manager.app import create_app
    from tests.integration.test_reconcile_records import TOKEN
    from tests.support.watchers import artefacts_dir, chromium, log_in, wait

    cluster, _ = commanded
    placed = cluster.submit("small", cls=3, cpu=100)["request"]["host"]
    idle = "n2" if placed == "n1" else "n1"
    _round(cluster)
    _until("the host is off", lambda: _hosts(cluster)[idle]["power"]["state"] == "off",
           cluster)
    cluster.manager.power.meter(time.time(), cluster.store.all_hosts())
    server = make_server("127.0.0.1", 0, create_app(cluster.manager), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with chromium() as browser:
            browser.get(f"http://127.0.0.1:{server.port}/dashboard")
            log_in(browser, TOKEN)
            cell = wait(browser, lambda d: d.find_elements(
                By.CSS_SELECTOR, f'tr.host[data-host="{idle}"] td[data-power="off"]'),
                "the host off")[0]
            assert cell.text.startswith("off") and "5" in cell.text, cell.text
            assert browser.find_elements(
                By.CSS_SELECTOR, f'tr.host[data-host="{placed}"] td[data-power="on"]')
            summary = wait(browser, lambda d: [e for e in d.find_elements(By.ID, "watts")
                                               if "with switching" in e.text], "the kWh")[0]
            assert "1 on, 1 off" in summary.text and "had all stayed on" in summary.text
            browser.save_screenshot(str(artefacts_dir(tmp_path) / "dashboard-power.png"))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_manager_that_leads_again_reads_the_power_states_the_other_leader_left(
        commanded: tuple[Cluster, Path]) -> None:
    """DESIGN 13: a manager that lost the lease and gains it again takes the books as the
    other leader left them, the hosts' power states too (not its own, older view)."""
    cluster, _ = commanded
    placed = cluster.submit("small", cls=3, cpu=100)["request"]["host"]
    idle = "n2" if placed == "n1" else "n1"
    _round(cluster)
    _until("the host is off", lambda: _hosts(cluster)[idle]["power"]["state"] == "off",
           cluster)
    # meanwhile another leader switched it on again (its record gone: on), and this manager
    # gains the lease once more
    cluster.store.sibling(PowerStates).save(idle, HostPower(PowerState.ON, time.time()))
    cluster.manager._lead(7)
    cluster.manager.loop.call(lambda: None)  # the take-over posted to the loop
    assert _hosts(cluster)[idle]["power"]["state"] == "on"


def test_a_former_leaders_power_state_write_is_refused(commanded: tuple[Cluster, Path]) -> None:
    """DESIGN 13: a power state written under an older lease token than the newest is
    refused inside Redis (a paused former leader cannot undo the leader's switch)."""
    cluster, _ = commanded
    states = cluster.store.sibling(PowerStates)
    states.fence(3)
    states.save("n1", HostPower(PowerState.OFF, 1.0))  # the newest token: written
    assert states.load()["n1"].state is PowerState.OFF
    cluster.store._redis.set(HostKeys(cluster.store.host_keys.prefix).fence, 4)
    with pytest.raises(FencedError):
        states.save("n1", HostPower(PowerState.ON, 2.0))
    assert states.load()["n1"].state is PowerState.OFF
