"""The dashboard (DESIGN 11) in a real headless Chromium (Debian's chromium and
chromium-driver), against the live manager on a single-node swarm with a real Redis.

The screenshot goes to $GREENSWARM_TEST_ARTEFACTS (else the test's temporary directory).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.support.live import TOKEN, Live

pytestmark = [pytest.mark.docker, pytest.mark.redis]

WAIT_S = 30.0


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.fail("chromium and chromium-driver are not installed (scripts/setup.sh does)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1500,1000"):
        options.add_argument(argument)
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium fetch a driver
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, condition: Any, what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.2).until(condition, message=what)


def _log_in(driver: Any, live: Live, token: str) -> None:
    from selenium.webdriver.common.by import By

    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login button").click()


def test_the_dashboard_shows_hosts_requests_and_events_live(
    live: Live, browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    hostname = live.docker.info()["Name"]
    live.submit("d1", 3, "service", 512, "64m")
    browser.get(live.url + "/dashboard")
    assert browser.current_url.endswith("/dashboard/login")  # no session: the form
    _log_in(browser, live, "not-the-token")
    _wait(browser, lambda d: d.find_element(By.ID, "error").text, "the refusal to show")
    assert "token" in browser.find_element(By.ID, "error").text
    assert browser.current_url.endswith("/dashboard/login")
    _log_in(browser, live, TOKEN)
    _wait(browser, lambda d: d.current_url.endswith("/dashboard"), "the page after logging in")
    host = _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, f'.host[data-host="{live.node_id}"]'),
                 "the host card")[0]
    assert host.find_element(By.CLASS_NAME, "name").text == hostname
    _wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, '.host li[data-task="d1"]'),
          "the placed request on its host")
    assert "estimated" in host.text  # no RAPL here: the estimate, said to be one
    browser.execute_script("window.greenswarmMarker = 42;")
    live.submit("d2", 4, "service", 256, "32m")  # after the page loaded
    _wait(browser, lambda d: d.find_elements(
        By.CSS_SELECTOR, '.timeline li[data-request="d2"][data-kind="placed"]'),
        "d2's placement in the timeline")
    assert browser.execute_script("return window.greenswarmMarker;") == 42  # never reloaded
    artefacts = Path(os.environ.get("GREENSWARM_TEST_ARTEFACTS", tmp_path))
    artefacts.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(artefacts / "dashboard.png"))
    # the session stands for the token on reads only
    cookie = {c["name"]: c["value"] for c in browser.get_cookies()}
    assert requests.get(live.url + "/hosts", cookies=cookie, timeout=30).status_code == 200
    assert requests.get(live.url + "/hosts", timeout=30).status_code == 401
    assert requests.post(live.url + "/requests", cookies=cookie, timeout=30,
                         json={"image": "busybox"}).status_code == 401
    assert requests.get(live.url + "/hosts", timeout=30,
                        cookies={"greenswarm_session": "forged"}).status_code == 401
