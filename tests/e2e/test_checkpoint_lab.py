"""Checkpointed restarts, live on the lab (DESIGN 3.14, issue 30): a deep-learning job of the
lab's image (greenswarm/dl) that asks for ``checkpoint: true`` gets its own directory, a host
directory every lab node's engine sees (GREENSWARM_CHECKPOINT_DIR), mounted at /checkpoint, and
saves its progress there every interval. Killed (message 7) and placed again on the other node,
it resumes from its last checkpoint, and its log there says from which step; its history says
``checkpoint-restart``. Once it is stopped, the manager removes its directory.

The numbers are printed (``pytest -s``). Run under the machine's lab lock: ``flock
/tmp/gs-lab.lock python -m pytest tests/e2e/test_checkpoint_lab.py -s``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import requests

from domain.labels import LABEL_TASK
from tests.e2e.conftest import Lab
from tests.e2e.stack import Stack, deployed, idle, node_client, poll

pytestmark = pytest.mark.lab

LAB_UP_ARGS = ("up", "--nodes", "2", "--node-cpus", "0.5", "--node-memory", "1g")
INTERVAL_S = 3.0
JOB = {"image": "greenswarm/dl:latest", "name": "learner", "class": 3, "type": "job",
       "cpu_shares": 256, "memory": "256m", "checkpoint": True,
       "checkpoint_interval_s": INTERVAL_S,
       "env": {"MAKESPAN_S": "300", "DL_MEMORY_MB": "16", "DL_HIDDEN": "128"}}


@pytest.fixture(scope="module")
def checkpoint_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkpoints")
    root.chmod(0o755)
    return root


@pytest.fixture(scope="module")
def stack(lab: Lab, checkpoint_root: Path) -> Iterator[Stack]:
    with deployed(lab, name="gsckpt",
                  extra_env={"GREENSWARM_CHECKPOINT_DIR": str(checkpoint_root)}) as up:
        yield up


@pytest.fixture
def cluster(stack: Stack) -> Iterator[Stack]:
    with idle(stack) as ready:
        yield ready


def _node(lab: Lab, host_id: str) -> dict[str, Any]:
    return next(n for n in lab.nodes if n["swarm_node_id"] == host_id)


def logs(node: dict[str, Any], task: str) -> str:
    """The log of the running container of ``task`` on ``node``'s own engine ('' if none)."""
    with node_client(node) as client:
        found = client.containers.list(filters={"label": f"{LABEL_TASK}={task}",
                                                "status": "running"})
        return "".join(c.logs().decode(errors="replace") for c in found)


def saved_step(path: Path) -> int:
    """The step of the checkpoint on disk (0 when there is none yet)."""
    if not path.exists():
        return 0
    with np.load(path) as saved:
        return int(saved["steps"])


def test_a_checkpointed_job_killed_and_placed_on_another_node_resumes_from_its_checkpoint(
    cluster: Stack, lab: Lab, checkpoint_root: Path
) -> None:
    answer = requests.post(cluster.url + "/requests", json=JOB, headers=cluster.headers(),
                           timeout=60)
    assert answer.status_code == 201, answer.text
    first = answer.json()["request"]["host"]
    first_node = _node(lab, first)
    directory = checkpoint_root / "gs" / "learner"  # under the registries' prefix
    state = directory / "state.npz"
    poll(lambda: "no checkpoint yet, starting from step 0" in logs(first_node, "learner"), 120,
         f"the job to start on {first_node['name']}")
    poll(lambda: logs(first_node, "learner").count("checkpoint at step") >= 2, 60,
         "two checkpoints")
    before = saved_step(state)
    assert before > 0
    killed_at = time.time()
    response = requests.post(f"{cluster.url}/registry/tasks/learner/kill",
                             headers=cluster.headers(), timeout=60)
    assert response.status_code == 202, response.text
    poll(lambda: not logs(first_node, "learner"), 60,
         f"the job's container to leave {first_node['name']}")
    last = saved_step(state)  # saves may have landed until its container stopped

    poll(lambda: cluster.request("learner")["host"] not in (None, first), 60,
         "the job to be placed on the other node")
    second = cluster.request("learner")["host"]
    second_node = _node(lab, second)
    poll(lambda: "resumed from step" in logs(second_node, "learner"), 120,
         f"the job to start on {second_node['name']}")
    resumed_after_s = time.time() - killed_at
    found = re.search(r"dl: resumed from step (\d+) \(([\d.]+)s of training kept\)",
                      logs(second_node, "learner"))
    assert found, logs(second_node, "learner")
    step, kept_s = int(found.group(1)), float(found.group(2))
    print(f"\ncheckpoint: interval {INTERVAL_S:g} s; last checkpoint before the kill at step "
          f"{before}..{last}; resumed on {second_node['name']} from step {step} "
          f"({kept_s:.1f} s of training kept) {resumed_after_s:.1f} s after the kill")
    assert before <= step <= last, (before, step, last)
    record = cluster.request("learner")
    history = record["history"]
    assert [e["host"] for e in history if e["kind"] == "killed"] == [first], history
    assert [e["host"] for e in history if e["kind"] == "checkpoint-restart"] == [second]
    assert record["kills"] == 1 and record["status"] == "running"

    cluster.stop("learner")
    poll(lambda: not directory.exists(), 60,
         "the checkpoint directory to be removed once the request ended")
