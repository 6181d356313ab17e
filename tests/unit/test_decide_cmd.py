"""``greenswarm decide``: the dry run users call, through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli.main import main
from domain.classes import ClassTable
from domain.decision import Decision
from domain.model import HostView, Request
from domain.slo import SloTable
from domain.store import ClusterReader
from scheduler import registry
from scheduler.plugin import PolicyPlugin
from scheduler.policies.qos import QosOptions, QosPolicy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["decide", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_single_scenario_prints_one_decision(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--scenario", str(EXAMPLES / "cut.json"))
    decision = json.loads(out)
    assert code == 0
    assert set(decision) == {"placed", "host", "pass", "request", "cuts", "kills", "suspends",
                             "reason"}
    assert (decision["placed"], decision["host"], decision["pass"]) == (True, "node-a", "cut")
    assert [c["task"] for c in decision["cuts"]] == ["redis-7", "time-3", "dl-1"]
    assert decision["request"] == {"cpu_shares": 1024, "memory": 2**30, "cut_received": 0.0}


def test_list_of_scenarios_prints_a_list_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--scenario", str(EXAMPLES / "scenarios.json"))
    assert code == 0
    assert [d["pass"] for d in json.loads(out)] == ["simple", "cut", "kill"]


def test_explain_lists_candidates(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--scenario", str(EXAMPLES / "kill.json"), "--explain")
    explain = json.loads(out)["explain"]
    assert code == 0
    assert any(line.startswith("simple: node-b") and "does not fit" in line for line in explain)
    assert any(line.startswith("kill: node-a") and "takes it" in line for line in explain)


@pytest.mark.parametrize("policy", ["spread", "binpack", "random"])
def test_baselines_never_overbook(capsys: pytest.CaptureFixture[str], policy: str) -> None:
    code, out, _ = run(capsys, "--scenario", str(EXAMPLES / "scenarios.json"), "--policy", policy)
    assert code == 0
    for decision in json.loads(out):
        assert decision["cuts"] == [] and decision["kills"] == []
    assert json.loads(out)[1]["placed"] is False  # the cut scenario has no unreserved room


@pytest.mark.parametrize(("document", "field"), [
    ({"hosts": [], "request": {"id": "r", "class": 9, "type": "job", "cpu_shares": 10,
                               "memory": 10}}, "request.class"),
    ({"hosts": [{"id": "a", "cpu_capacity": 100}], "request": {}}, "hosts[0].memory_capacity"),
    ({"hosts": [{"id": "a", "cpu_capacity": 100, "memory_capacity": 100, "tasks": [
        {"id": "t", "class": 2, "type": "cron", "cpu_shares": 1, "memory": 1}]}]},
     "hosts[0].tasks[0].type"),
    ({"hosts": [{"id": "a", "cpu_capacity": 100, "memory_capacity": 100, "region": "LEE"}]},
     "hosts[0].region"),
    ([{"hosts": [], "request": {"id": "ok", "class": 1, "type": "job", "cpu_shares": 2,
                                "memory": 1}}, {"hosts": "none"}], "[1].hosts"),
    ("not an object", "scenario"),
])
def test_malformed_scenario_names_the_field_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: object, field: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    code, out, err = run(capsys, "--scenario", str(path))
    assert code != 0 and out == ""
    assert field in err and "Traceback" not in err


def test_unreadable_or_invalid_json_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "--scenario", str(tmp_path / "missing.json"))
    assert code != 0 and "cannot read" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{\"hosts\": [")
    code, _, err = run(capsys, "--scenario", str(broken))
    assert code != 0 and "not valid JSON" in err


def test_the_installed_command_runs_without_a_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hosts": [], "request": {"id": "r", "class": 0}}')
    result = subprocess.run([sys.executable, "-m", "cli.main", "decide", "--scenario",
                             str(bad)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "request.class" in result.stderr and "Traceback" not in result.stderr


def test_the_load_example_shows_a_prediction_and_a_stale_host(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--scenario", str(EXAMPLES / "load.json"), "--policy", "tlp",
                       "--explain")
    assert code == 0
    decision = json.loads(out)
    assert decision["host"] == "n3"  # the stale host, judged by its (empty) allocation
    text = "\n".join(decision["explain"])
    assert "+ 1 recent task(s) predicted" in text and "by allocation" in text


def _full_host_scenario(tmp_path: Path) -> Path:
    """One host of 1024 shares full with a class-2 service that has run 100 s (started at 0,
    now 100); a new class-2 request of the same size."""
    scenario = {
        "now": 100,
        "hosts": [{"id": "h", "cpu_capacity": 1024, "memory_capacity": 2**30,
                   "cpu_util": 0.9, "memory_util": 0.5,
                   "tasks": [{"id": "old", "class": 2, "type": "service", "cpu_shares": 1024,
                              "memory": 2**30, "started_at": 0}]}],
        "request": {"id": "new", "class": 2, "type": "service", "cpu_shares": 1024,
                    "memory": 2**30},
    }
    path = tmp_path / "full.json"
    path.write_text(json.dumps(scenario))
    return path


def test_decide_takes_the_slo_the_qos_policy_judges_victims_by(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Q of 'old' = e / sigma - e - alpha: with the default 5/6, 100 x 0.2 - 1.2 = 18.8 s of
    slack, above the 10-s margin: preempted for the new request (Q = 0). With --slo 2=0.99,
    100 / 0.99 - 100 - 1.2 = -0.19 s: behind its SLO, more urgent than the new request of its
    own class: nothing is placed."""
    path = str(_full_host_scenario(tmp_path))
    code, out, _ = run(capsys, "--scenario", path, "--policy", "qos")
    assert code == 0 and json.loads(out)["kills"] == ["old"]
    code, out, _ = run(capsys, "--scenario", path, "--policy", "qos", "--slo", "2=0.99")
    assert code == 0 and json.loads(out)["placed"] is False
    with pytest.raises(SystemExit) as caught:
        run(capsys, "--scenario", path, "--policy", "qos", "--slo", "9=0.5")
    assert caught.value.code == 2 and "--slo" in capsys.readouterr().err


@dataclass
class Relay:
    """A second round policy (DESIGN 3.11's protocol, ``scheduler.plugin.RoundPolicy``), not a
    QosPolicy: it hands every decision to one it holds. Outside a round it decides as qos does
    there (t = 0, default objectives, no allocation time); in a round, with the round's."""

    inner: QosPolicy
    name: str = "relay"

    @property
    def watchdog_s(self) -> float:
        return self.inner.watchdog_s

    def decide(self, request: Request, view: ClusterReader, *, exclude: Collection[str] = (),
               explain: bool = False) -> Decision:
        return self.inner.decide(request, view, exclude=exclude, explain=explain)

    def may_place(self, request: Request, hosts: Iterable[HostView], classes: ClassTable) -> bool:
        return True

    def decide_waiting(self, request: Request, view: ClusterReader, *, q_s: float, now: float,
                       slo: SloTable, alpha_s: float, exclude: Collection[str] = (),
                       explain: bool = False) -> Decision:
        return self.inner.decide_waiting(request, view, q_s=q_s, now=now, slo=slo,
                                         alpha_s=alpha_s, exclude=exclude, explain=explain)


@pytest.fixture
def relay() -> Iterator[None]:
    registry.register(PolicyPlugin("relay", "qos's rounds, relayed", QosOptions,
                                   lambda options, seed: Relay(QosPolicy(options)),
                                   admits_to_queue=True))
    try:
        yield
    finally:
        registry.unregister("relay")


@pytest.mark.parametrize(("extra", "kills"), [
    ((), ["old"]),  # the old task's Q: 100 / (5/6) - 100 - 1.2 = 18.8 s, above the margin
    (("--slo", "2=0.5"), ["old"]),  # 200 - 100 - 1.2 = 98.8 s
    (("--slo", "2=0.99"), []),  # 101.01 - 100 - 1.2 = -0.19 s: behind its SLO, kept
    (("--allocation-s", "5"), ["old"]),  # 120 - 100 - 5 = 15 s
    (("--allocation-s", "30"), []),  # 120 - 100 - 30 = -10 s
])
def test_a_second_round_policy_decides_as_its_rounds_would(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, relay: None, extra: tuple[str, ...],
    kills: list[str],
) -> None:
    """``decide`` asks the scheduler, which asks any round policy as its rounds do (the request
    new, Q = 0, at the scenario's now 100, with --slo and --allocation-s): the relay decides
    what qos decides, whatever their class, and neither at t = 0 (where the old task has no
    slack: never preempted)."""
    path = str(_full_host_scenario(tmp_path))
    code, qos, _ = run(capsys, "--scenario", path, "--policy", "qos", "--explain", *extra)
    assert code == 0 and json.loads(qos)["kills"] == kills
    code, relayed, _ = run(capsys, "--scenario", path, "--policy", "relay", "--explain", *extra)
    assert code == 0
    assert json.loads(relayed) == json.loads(qos)
