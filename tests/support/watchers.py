"""A real headless Chromium (Selenium) and a real Prometheus server for the tests, started and
stopped by them (Debian's chromium, chromium-driver and prometheus; nothing downloaded)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import requests

from lab.processes import free_port, stop_child

WAIT_S = 30.0


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    import pytest
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver_path is None:
        pytest.fail("chromium and chromium-driver are not installed (scripts/setup.sh does)")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1500,1000"):
        options.add_argument(argument)
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium fetch a driver
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: Any, condition: Any, what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.2).until(condition, message=what)


def log_in(driver: Any, token: str) -> None:
    from selenium.webdriver.common.by import By

    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login button").click()


def artefacts_dir(fallback: Path) -> Path:
    """$GREENSWARM_TEST_ARTEFACTS, else ``fallback`` (the test's temporary directory)."""
    directory = Path(os.environ.get("GREENSWARM_TEST_ARTEFACTS", fallback))
    directory.mkdir(parents=True, exist_ok=True)
    return directory


@contextlib.contextmanager
def prometheus(target_url: str, token: str, workdir: Path) -> Iterator[str]:
    """A Prometheus server on 127.0.0.1 scraping ``target_url`` every second with ``token``;
    its URL."""
    import pytest

    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is not installed (scripts/setup.sh installs Debian's package)")
    port = free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: greenswarm\n"
        f"    authorization:\n      credentials: {token}\n"
        f"    static_configs:\n      - targets: ['{target_url.removeprefix('http://')}']\n",
        encoding="utf-8",
    )
    with (workdir / "prometheus.log").open("wb") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_child(process)


def query(prometheus_url: str, expr: str) -> list[dict[str, Any]]:
    """The instant query's result; empty while the server is not serving yet."""
    try:
        answer = requests.get(prometheus_url + "/api/v1/query", params={"query": expr},
                              timeout=5)
    except requests.ConnectionError:
        return []
    if answer.status_code != 200:
        return []
    result: list[dict[str, Any]] = answer.json()["data"]["result"]
    return result
