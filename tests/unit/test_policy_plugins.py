"""A policy is a plugin (DESIGN 10): registered in one line, it runs everywhere a policy runs.

The toy policy below is defined in this test module and registered with one call; it then runs
through ``greenswarm decide``, the simulator (``greenswarm bench simulate``), the manager's
settings and ``greenswarm policies``, none of which names it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import pytest

from cli.main import main
from domain.errors import ConflictError, ValidationError
from manager.settings import ManagerSettings
from scheduler import registry
from scheduler.plugin import PolicyPlugin, option_fields
from scheduler.policies.scored import ScoredPolicy

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


class Order(StrEnum):
    HIGHEST = "highest"
    LOWEST = "lowest"


@dataclass(frozen=True)
class ToyOptions:
    order: Order = field(default=Order.HIGHEST, metadata={"help": "which score wins"})
    tries: int = field(default=3, metadata={"help": "unused, an int option"})
    weight: float = field(default=0.5, metadata={"help": "unused, a float option"})
    loud: bool = field(default=False, metadata={"help": "unused, a flag"})


def toy(options: ToyOptions, seed: int) -> ScoredPolicy:
    """binpack's or spread's scoring under another name, as the options say."""
    return ScoredPolicy("toy", highest=options.order is Order.HIGHEST)


@pytest.fixture
def registered() -> Iterator[PolicyPlugin[ToyOptions]]:
    plugin = registry.register(PolicyPlugin("toy", "a toy policy", ToyOptions, toy))
    try:
        yield plugin
    finally:
        registry.unregister("toy")


def decide(capsys: pytest.CaptureFixture[str], *args: str) -> object:
    code = main(["decide", "--scenario", str(EXAMPLES / "scenarios.json"), *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_a_registered_policy_decides_through_greenswarm_decide(
    registered: PolicyPlugin[ToyOptions], capsys: pytest.CaptureFixture[str]
) -> None:
    binpack = decide(capsys, "--policy", "binpack")
    spread = decide(capsys, "--policy", "spread")
    toy_highest = decide(capsys, "--policy", "toy")
    toy_lowest = decide(capsys, "--policy", "toy", "--order", "lowest")
    assert isinstance(toy_highest, list) and isinstance(binpack, list)
    assert isinstance(toy_lowest, list) and isinstance(spread, list)
    assert [d["host"] for d in toy_highest] == [d["host"] for d in binpack]
    assert [d["host"] for d in toy_lowest] == [d["host"] for d in spread]
    assert [d["placed"] for d in toy_highest] == [d["placed"] for d in binpack]
    assert any(d["placed"] for d in toy_highest)
    assert all(d["reason"].startswith("toy: ") for d in toy_highest)


def test_a_bad_option_value_is_refused_naming_the_option(
    registered: PolicyPlugin[ToyOptions], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["decide", "--scenario", str(EXAMPLES / "scenarios.json"), "--policy", "toy",
              "--order", "sideways"])
    assert exit_.value.code == 2
    assert "--order" in capsys.readouterr().err


def test_a_registered_policy_runs_in_the_simulator(
    registered: PolicyPlugin[ToyOptions], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["bench", "simulate", "--workload", "thesis", "--seed", "3",
                 "--duration-s", "600", "--policies", "toy,binpack", "--no-plots",
                 "--jobs", "1", "--out", str(tmp_path)])
    capsys.readouterr()
    assert code == 0
    summary = json.loads((tmp_path / "summary.json").read_text())["policies"]
    toy_m, binpack_m = summary["toy"], summary["binpack"]
    assert toy_m["requests"] > 100
    same = ("requests", "successful", "failed", "energy_kwh", "avg_cpu_util", "jobs_finished")
    assert {k: toy_m[k] for k in same} == {k: binpack_m[k] for k in same}
    result = json.loads((tmp_path / "toy" / "result.json").read_text())
    binpack_passes = json.loads((tmp_path / "binpack" / "result.json").read_text())["passes"]
    assert result["policy"] == "toy" and result["passes"] == {"toy": binpack_passes["binpack"]}


def test_the_managers_settings_read_a_registered_policys_options(
    registered: PolicyPlugin[ToyOptions],
) -> None:
    settings = ManagerSettings.from_env({
        "GREENSWARM_POLICY": "toy",
        "GREENSWARM_POLICY_OPTIONS": "order=lowest, tries=7",
        "GREENSWARM_LOUD": "yes",
    })
    assert settings.options == ToyOptions(order=Order.LOWEST, tries=7, weight=0.5, loud=True)
    with pytest.raises(ValidationError) as bad:
        ManagerSettings.from_env({"GREENSWARM_POLICY": "toy",
                                  "GREENSWARM_POLICY_OPTIONS": "order=sideways"})
    assert bad.value.field == "GREENSWARM_POLICY_OPTIONS.order"
    with pytest.raises(ValidationError) as unknown:
        ManagerSettings.from_env({"GREENSWARM_POLICY": "toy",
                                  "GREENSWARM_POLICY_OPTIONS": "colour=red"})
    assert "order, tries, weight, loud" in unknown.value.message
    with pytest.raises(ValidationError) as enum_env:
        ManagerSettings.from_env({"GREENSWARM_POLICY": "toy", "GREENSWARM_ORDER": "up"})
    assert enum_env.value.field == "GREENSWARM_ORDER"


def test_greenswarm_policies_lists_the_table(
    registered: PolicyPlugin[ToyOptions], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policies", "--names"]) == 0
    assert capsys.readouterr().out.split() == ["energy", "qos", "tlp", "lvrb", "spread", "binpack", "random",
                                               "swarm", "toy"]
    assert main(["policies", "--simulated", "--names"]) == 0
    assert "swarm" not in capsys.readouterr().out.split()
    assert main(["policies", "--json"]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert [o["flag"] for o in rows["toy"]["options"]] == ["--order", "--tries", "--weight",
                                                           "--loud"]
    assert rows["energy"]["passes"] == ["simple", "cut", "kill"]


def test_names_are_unique_and_unknown_names_list_the_choices(
    registered: PolicyPlugin[ToyOptions],
) -> None:
    with pytest.raises(ConflictError):
        registry.register(PolicyPlugin("toy", "again", ToyOptions, toy))
    with pytest.raises(ValidationError) as unknown:
        registry.plugin("nope")
    assert unknown.value.field == "policy" and "toy" in unknown.value.message
    with pytest.raises(ValidationError) as live_only:
        registry.plugin("swarm", simulated=True)
    assert "live-only" in live_only.value.message


def test_option_fields_need_a_default_and_a_simple_type() -> None:
    @dataclass(frozen=True)
    class NoDefault:
        level: int

    @dataclass(frozen=True)
    class Listy:
        levels: list[int] = field(default_factory=list)

    with pytest.raises(TypeError):
        option_fields(NoDefault)
    with pytest.raises(TypeError):
        option_fields(Listy)


def test_the_readme_lists_every_registered_policy() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for plugin in registry.plugins():
        assert f"| `{plugin.name}` | {plugin.summary} |" in readme, plugin.name
