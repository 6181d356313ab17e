"""GET /metrics (DESIGN 11), read by the real Prometheus server of Debian's package.

The manager and agent are real processes on a single-node swarm with a real Redis (the `live`
fixture); Prometheus is started here on 127.0.0.1 with a scrape configuration of the kind the
README documents, and stopped by its pid.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from lab.processes import free_port, stop_child, wait_for
from tests.support.live import TOKEN, Live

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
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed (scripts/setup.sh installs Debian's package)")
    port = free_port()
    config = tmp_path / "prometheus.yml"
    target = live.url.removeprefix("http://")
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: greenswarm\n"
        f"    authorization:\n      credentials: {SCRAPE_TOKEN}\n"
        f"    static_configs:\n      - targets: ['{target}']\n",
        encoding="utf-8",
    )
    log = (tmp_path / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_child(process)
        log.close()


def _query(prometheus: str, expr: str) -> list[dict[str, Any]]:
    try:
        answer = requests.get(prometheus + "/api/v1/query", params={"query": expr}, timeout=5)
    except requests.ConnectionError:
        return []  # not serving yet
    if answer.status_code != 200:
        return []
    result: list[dict[str, Any]] = answer.json()["data"]["result"]
    return result


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
    wait_for(lambda: [r for r in _query(prometheus, 'up{job="greenswarm"}')
                      if r["value"][1] == "1"], 60, "prometheus to scrape the manager")
    expr = 'greenswarm_decisions_total{outcome="placed"}'
    wait_for(lambda: _query(prometheus, expr), 30, "the decision counter in prometheus")
    [series] = _query(prometheus, expr)
    assert series["metric"]["policy"] == "energy" and float(series["value"][1]) == 1.0
    [tasks] = _query(prometheus, "greenswarm_host_tasks")
    assert tasks["metric"]["host"] == live.node_id and float(tasks["value"][1]) >= 0


def test_measured_power_reaches_hosts_power_and_metrics(live: Live) -> None:
    """The monitor's RAPL reading (power_w in its utilization update, as monitor/core.py sends
    it) was dropped by the registry; now it is the host's measured power, beside the estimate."""
    before = live.get("/hosts")[0]["power"]
    assert before["measured_w"] is None and before["estimated_w"] >= 86.0  # hp-ml110-g4 idle
    bad = live.put(f"/registry/hosts/{live.node_id}/utilization",
                   {"cpu_util": 0.5, "power_w": -3})
    assert bad.status_code == 400 and bad.json()["field"] == "power_w"
    ok = live.put(f"/registry/hosts/{live.node_id}/utilization",
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
