"""GET /metrics (DESIGN 11), read by the real Prometheus server of Debian's package.

The manager and agent are real processes on a single-node swarm with a real Redis (the `live`
fixture); Prometheus is started here on 127.0.0.1 with a scrape configuration of the kind the
README documents, and stopped by its pid.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from lab.processes import stop_child, wait_for
from tests.support.live import NODE_SECRET, TOKEN, Live
from tests.support.watchers import prometheus as prometheus_server
from tests.support.watchers import query

pytestmark = [pytest.mark.docker, pytest.mark.redis]

SCRAPE_TOKEN = "read-only-scrape-token"


def _metrics(live: Live, token: str | None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return requests.get(live.url + "/metrics", headers=headers, timeout=30)


def _sample(text: str, metric: str, **labels: str) -> float | None:
    """The value of the first sample of ``metric`` whose labels include ``labels``."""
    for line in text.splitlines():
        if not line.startswith(metric + "{") and not line.startswith(metric + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture
def prometheus(live: Live, tmp_path: Path) -> Iterator[str]:
    with prometheus_server(live.url, SCRAPE_TOKEN, tmp_path) as url:
        yield url


def test_metrics_need_a_token_and_count_what_the_manager_did(live: Live) -> None:
    assert _metrics(live, None).status_code == 401
    assert _metrics(live, "wrong").status_code == 401
    live.submit("m1", 3, "service", 512, "64m")
    hostname = live.docker.info()["Name"]
    answer = _metrics(live, TOKEN)
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/plain")
    text = answer.text
    assert _sample(text, "greenswarm_up") == 1.0
    assert _sample(text, "greenswarm_decisions_total", policy="energy", outcome="placed") == 1.0
    assert _sample(text, "greenswarm_decision_seconds_count") == 1.0
    labels = {"host": live.node_id, "name": hostname, "class": "3"}
    assert _sample(text, "greenswarm_host_cpu_allocated_shares", **labels) == 512.0
    assert _sample(text, "greenswarm_host_tasks", **labels) == 1.0
    watts = _sample(text, "greenswarm_host_power_estimated_watts", **labels)
    assert watts is not None and 86.0 <= watts <= 117.0 + 1  # hp-ml110-g4, plus memory
    assert _sample(text, "greenswarm_requests", status="running") == 1.0
    assert _sample(text, "greenswarm_queue_length") == 0.0


def test_a_real_prometheus_scrapes_the_manager_with_its_read_token(
    live: Live, prometheus: str
) -> None:
    live.stop_manager()  # again, with a token of its own for /metrics
    live.settings["GREENSWARM_METRICS_TOKEN"] = SCRAPE_TOKEN
    live.start_manager()
    assert _metrics(live, SCRAPE_TOKEN).status_code == 200
    hosts = requests.get(live.url + "/hosts", timeout=30,
                         headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
    assert hosts.status_code == 401  # it reads the metrics only
    live.submit("m2", 4, "job", 256, "32m", ["sleep", "30"])
    wait_for(lambda: [r for r in query(prometheus, 'up{job="greenswarm"}')
                      if r["value"][1] == "1"], 60, "prometheus to scrape the manager")
    expr = 'greenswarm_decisions_total{outcome="placed"}'
    wait_for(lambda: query(prometheus, expr), 30, "the decision counter in prometheus")
    [series] = query(prometheus, expr)
    assert series["metric"]["policy"] == "energy" and float(series["value"][1]) == 1.0
    [tasks] = query(prometheus, "greenswarm_host_tasks")
    assert tasks["metric"]["host"] == live.node_id and float(tasks["value"][1]) >= 0


def test_measured_power_reaches_hosts_power_and_metrics(live: Live) -> None:
    """The monitor's RAPL reading (power_w in its utilization update, as monitor/core.py sends
    it) was dropped by the registry; now it is the host's measured power, beside the estimate."""
    before = live.get("/hosts")[0]["power"]
    assert before["measured_w"] is None and before["estimated_w"] >= 86.0  # hp-ml110-g4 idle
    bad = live.node_put(f"/registry/hosts/{live.node_id}/utilization",
                        {"cpu_util": 0.5, "power_w": -3})
    assert bad.status_code == 400 and bad.json()["field"] == "power_w"
    ok = live.node_put(f"/registry/hosts/{live.node_id}/utilization",
                       {"cpu_util": 0.5, "memory_util": 0.25, "power_w": 42.5})
    assert ok.status_code == 200
    power = live.get("/hosts")[0]["power"]
    assert power["measured_w"] == 42.5 and power["measured_at"] is not None
    # the estimate follows the utilization: the table at 50 % (102 W) plus the memory in use
    assert power["estimated_w"] > before["estimated_w"]
    cluster = live.get("/power")
    assert cluster["hosts"][live.node_id]["measured_w"] == 42.5
    assert cluster["hosts"][live.node_id]["name"] == live.docker.info()["Name"]
    assert cluster["cluster"]["measured_w"] == 42.5 and cluster["cluster"]["measured_hosts"] == 1
    text = _metrics(live, TOKEN).text
    assert _sample(text, "greenswarm_host_power_measured_watts", host=live.node_id) == 42.5


def test_a_monitor_reading_rapl_shows_its_power_in_hosts(live: Live, tmp_path: Path) -> None:
    """End to end from a powercap tree to GET /hosts: a real monitor process reads a RAPL zone
    the test writes (a file tree laid out as /sys/class/powercap is; no RAPL hardware is needed
    and none of our code is replaced), its counter growing 2 J every 0.1 s (20 W)."""
    import subprocess
    import sys
    import threading

    zone = tmp_path / "powercap" / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    energy = zone / "energy_uj"
    energy.write_text("1000000\n")
    stop = threading.Event()

    def burn() -> None:  # bounded: stops when asked, or after 120 s
        value, deadline = 1_000_000, time.monotonic() + 120
        while not stop.wait(0.1) and time.monotonic() < deadline:
            value += 2_000_000
            tmp = zone / "energy_uj.tmp"
            tmp.write_text(f"{value}\n")
            tmp.replace(energy)

    writer = threading.Thread(target=burn, daemon=True)
    writer.start()
    env = {**os.environ, "GREENSWARM_NODE_SECRET": NODE_SECRET}  # the node's, not the token
    monitor = subprocess.Popen(
        [sys.executable, "-m", "monitor", "--registry-url", live.url, "--host-id", live.node_id,
         "--address", "127.0.0.1", "--source", "psutil", "--powercap-root",
         str(tmp_path / "powercap"), "--host-interval-s", "0.3", "--host-window-s", "0.9",
         "--task-interval-s", "1", "--task-window-s", "3", "--threshold-pp", "0.1",
         "--resend-s", "2", "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=(tmp_path / "monitor.log").open("wb"),
    )
    try:
        wait_for(lambda: monitor.poll() is not None
                 or live.get("/hosts")[0]["power"]["measured_w"] is not None, 60,
                 "the monitor's RAPL reading in /hosts")
        assert monitor.poll() is None, (tmp_path / "monitor.log").read_text()
        measured = live.get("/hosts")[0]["power"]["measured_w"]
        assert 12.0 <= measured <= 28.0, measured  # 20 W, give or take the writer's timing
        assert live.get("/power")["cluster"]["measured_hosts"] == 1
    finally:
        stop_child(monitor)
        stop.set()
        writer.join(timeout=5)
