"""The dashboard (DESIGN 11) in a real headless Chromium (Debian's chromium and
chromium-driver), against the live manager on a single-node swarm with a real Redis.

The screenshot goes to $GREENSWARM_TEST_ARTEFACTS (else the test's temporary directory).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.live import TOKEN, Live
from tests.support.watchers import artefacts_dir, chromium, log_in, wait

pytestmark = [pytest.mark.docker, pytest.mark.redis]

@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium() as driver:
        yield driver


def test_the_dashboard_shows_hosts_requests_and_events_live(
    live: Live, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    hostname = live.docker.info()["Name"]
    live.submit("d1", 3, "service", 512, "64m")
    browser.get(live.url + "/dashboard")
    assert browser.current_url.endswith("/dashboard/login")  # no session: the form
    log_in(browser, "not-the-token")
    wait(browser, lambda d: d.find_element(By.ID, "error").text, "the refusal to show")
    assert "token" in browser.find_element(By.ID, "error").text
    assert browser.current_url.endswith("/dashboard/login")
    log_in(browser, TOKEN)
    wait(browser, lambda d: d.current_url.endswith("/dashboard"), "the page after logging in")
    row = f'tr.host[data-host="{live.node_id}"]'
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, row), "the host's row")
    assert browser.execute_script(  # no RAPL here: the estimate, said to be one
        "const r = document.querySelector(arguments[0]);"
        "return [r.querySelector('.host-name').textContent, !!r.querySelector('td.estimated')];",
        row) == [hostname, True]
    browser.execute_script(  # its tasks, when opened (in one script: rows are redrawn)
        "document.querySelector(arguments[0] + ' .expand').click();", row)
    wait(browser, lambda d: d.find_elements(
        By.CSS_SELECTOR, f'tr[data-host-tasks="{live.node_id}"] li[data-task="d1"]'),
        "the placed request on its host")
    browser.execute_script("window.greenswarmMarker = 42;")
    live.submit("d2", 4, "service", 256, "32m")  # after the page loaded
    wait(browser, lambda d: d.find_elements(
        By.CSS_SELECTOR, '.timeline li[data-request="d2"][data-kind="placed"]'),
        "d2's placement in the timeline")
    assert browser.execute_script("return window.greenswarmMarker;") == 42  # never reloaded
    shot = artefacts_dir(tmp_path) / "dashboard-single-node.png"
    assert browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
    # the session stands for the token on reads only
    cookie = {c["name"]: c["value"] for c in browser.get_cookies()}
    assert requests.get(live.url + "/hosts", cookies=cookie, timeout=30).status_code == 200
    assert requests.get(live.url + "/hosts", timeout=30).status_code == 401
    assert requests.post(live.url + "/requests", cookies=cookie, timeout=30,
                         json={"image": "busybox"}).status_code == 401
    assert requests.get(live.url + "/hosts", timeout=30,
                        cookies={"greenswarm_session": "forged"}).status_code == 401
