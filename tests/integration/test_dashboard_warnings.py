"""The dashboard's warning (manager/static/warnings.js; DESIGN 9, 11) in a real headless Chromium
(Debian's chromium and chromium-driver), against the real manager app served over HTTP on a
real Redis.

The Swarm is the in-memory stand-in of tests/support/standin_swarm.py (a node's loss cannot be
produced in the fast suite; tests/e2e/test_live_lab.py shows the same warning on the lab after
a node's engine is killed for real). The failing record is a task booked without a request
record (see tests/integration/test_reconcile_records.py for why it is written as the registry
did). The screenshot goes to $GREENSWARM_TEST_ARTEFACTS (else the test's temporary directory).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server

import manager.reconcile
from lab.processes import RedisServer
from manager.app import create_app
from tests.integration.test_reconcile_records import TOKEN, Cluster, make_cluster
from tests.support.standin_swarm import StandInSwarm
from tests.support.watchers import artefacts_dir, chromium, log_in, wait

pytestmark = pytest.mark.redis


@pytest.fixture
def served(redis_srv: RedisServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Cluster, str]]:
    monkeypatch.setattr(manager.reconcile, "NODE_GRACE_S", 0.0)
    swarm = StandInSwarm()
    swarm.add_node("n1", "gs-alpha")
    swarm.add_node("n2", "gs-beta")
    cluster = make_cluster(redis_srv.url, swarm, "warnings")
    cluster.sync()
    server = make_server("127.0.0.1", 0, create_app(cluster.manager), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield cluster, f"http://127.0.0.1:{server.port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        cluster.manager.loop.stop()
        cluster.store.flush()


def test_the_dashboard_warns_of_failing_records_and_down_nodes_and_clears(
    served: tuple[Cluster, str], tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    cluster, url = served
    cluster.submit("fine")
    with chromium() as browser:
        browser.get(url + "/dashboard")
        log_in(browser, TOKEN)
        wait(browser, lambda d: d.current_url.endswith("/dashboard"), "the page")
        box = browser.find_element(By.ID, "warnings")
        wait(browser, lambda d: [e for e in d.find_elements(By.CSS_SELECTOR, "tr.host .tasks-count")
                                 if e.text == "1"], "the page to draw its hosts")
        assert not box.is_displayed()  # all is well: nothing shown

        cluster.orphan("orphan-1", "n2")
        cluster.swarm.set_down("n1")
        cluster.sync()
        record = wait(browser, lambda d: d.find_elements(
            By.CSS_SELECTOR, '#warnings li[data-record="orphan-1"]'), "the failing record")[0]
        assert box.is_displayed()
        assert "without a request record" in record.text
        node = wait(browser, lambda d: d.find_elements(
            By.CSS_SELECTOR, '#warnings li[data-node="n1"]'), "the node down")[0]
        assert node.text.startswith("gs-alpha")  # by its name
        top = box.location["y"]
        assert all(top < e.location["y"] for e in browser.find_elements(By.CSS_SELECTOR, "main"))
        shot = artefacts_dir(tmp_path) / "dashboard-warnings.png"
        assert browser.save_screenshot(str(shot))
        print(f"screenshot: {shot}")

        answer = browser.execute_script(
            "return fetch('/registry/tasks/orphan-1', {method: 'DELETE', headers: "
            f"{{Authorization: 'Bearer {TOKEN}'}}}}).then(r => r.status);")
        assert answer == 202
        cluster.swarm.states["n1"] = "ready"
        cluster.sync()
        wait(browser, lambda d: not d.find_element(By.ID, "warnings").is_displayed(),
             "the warning to clear")
        shown: Any = browser.find_elements(By.CSS_SELECTOR, "#warnings li")
        assert not [e for e in shown if e.is_displayed()]
