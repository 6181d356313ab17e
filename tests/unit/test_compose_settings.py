"""docker-compose.yml passes every setting an operator may give the manager (DESIGN 9): a
setting the file does not list never reaches the container, whatever the shell exports."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from domain.energy import DEFAULT_POWER_TABLE
from domain.power import POWER_ENV_PREFIX, PowerSettings
from domain.slo import DEFAULT_ALLOCATION_S
from manager.power_backends import PowerBackendSettings
from manager.settings import ENV_PREFIX, ManagerSettings

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
# Set by the compose file itself, or internal to a test or a process, not an operator's choice.
NOT_PASSED = {"redis_url", "docker_url", "seed", "agent_url", "threads", "options", "cluster",
              "swarm_pending_timeout_s", "power_settings", "power_backend_settings",
              # replicated Redis (DESIGN 13) is the HA stack's; compose runs one Redis
              "redis_sentinels", "redis_master", "redis_wait_replicas"}


def _passed() -> dict[str, str]:
    """The manager's environment in the compose file: NAME -> its default."""
    found = {}
    for name, value in re.findall(r"^\s+(GREENSWARM_[A-Z_]+): (.+)$", COMPOSE.read_text(), re.M):
        default = re.fullmatch(r"\$\{\w+:-(.*)\}", value)
        found[name] = default.group(1) if default else value
    return found


def test_every_operator_setting_reaches_the_manager_with_the_managers_default() -> None:
    passed = _passed()
    fields = {f.name for f in dataclasses.fields(ManagerSettings)}
    missing = sorted(f"{ENV_PREFIX}{name.upper()}" for name in fields - NOT_PASSED
                     if f"{ENV_PREFIX}{name.upper()}" not in passed)
    assert missing == []
    # the power manager's knobs and its backend's (DESIGN 3.15), with their defaults
    power = [(f"{POWER_ENV_PREFIX}{f.name.upper()}", f.default)
             for cls in (PowerSettings, PowerBackendSettings) for f in dataclasses.fields(cls)]
    power = [("GREENSWARM_POWER", False) if name == "GREENSWARM_POWER_ENABLED" else (name, d)
             for name, d in power]
    assert sorted(name for name, _ in power if name not in passed) == []
    for name, default in power:
        parsed = {"on": True, "off": False}.get(passed[name], passed[name])
        if isinstance(default, float | int) and not isinstance(default, bool):
            parsed = float(passed[name])
        assert parsed == default, name
    assert passed["GREENSWARM_SLO"] == ""
    assert float(passed["GREENSWARM_ALLOCATION_S"]) == DEFAULT_ALLOCATION_S
    assert passed["GREENSWARM_POWER_TABLE"] == DEFAULT_POWER_TABLE
    assert passed["GREENSWARM_OFFLOAD"] == "off"  # a single cluster: nothing changes
    # what compose passes is what the manager takes: its values parse
    settings = ManagerSettings.from_env({**passed, "GREENSWARM_TOKEN": "x"})
    assert settings.slo_table.objective(1) == 1


STACK = COMPOSE.parent / "docker-stack.yml"


def test_the_nodes_get_the_node_secret_and_never_the_operators_token() -> None:
    """DESIGN 9: the agents and monitors derive their own credentials from the node secret;
    the operator's token reaches only the manager (docker-compose.yml)."""
    stack = STACK.read_text()
    variables = set(re.findall(r"^\s+(GREENSWARM_[A-Z_]+):", stack, re.M))
    assert "GREENSWARM_NODE_SECRET" in variables
    assert not {v for v in variables if "TOKEN" in v}, variables
    assert "${GREENSWARM_NODE_SECRET:?" in stack  # required, by name
    # docker's interpolation ends the variable's name at a '-' even inside the ':?' message
    # (the first stack passed "secret` on the manager" as every node's secret)
    for text in (stack, COMPOSE.read_text()):
        for message in re.findall(r"\$\{\w+:\?([^}]*)\}", text):
            assert "-" not in message and "`" not in message, message
    assert "GREENSWARM_MONITOR_RESEND_S" in variables
    assert _passed()["GREENSWARM_NODE_SECRET"] == ""  # the manager's: derived when unset


HA_STACK = COMPOSE.parent / "docker-stack.ha.yml"


def test_the_ha_stack_spreads_managers_and_sentinels_over_manager_nodes() -> None:
    """DESIGN 13: several managers, one per Swarm manager node, on Redis replicated with
    three Sentinels; every setting the HA needs reaches the managers."""
    import yaml

    text = HA_STACK.read_text()
    services = yaml.safe_load(text)["services"]
    for name in ("manager", "redis-sentinel"):
        placement = services[name]["deploy"]["placement"]
        assert placement["max_replicas_per_node"] == 1, name
        assert "node.role == manager" in placement["constraints"], name
    assert services["redis-sentinel"]["deploy"]["replicas"] == 3
    for name, role in (("redis-primary", "primary"), ("redis-replica", "replica")):
        command = services[name]["command"]  # sh -c SCRIPT ROLE: the same start for both
        assert command[:2] == ["sh", "-c"] and command[3] == role, name
        assert "redis-server --dir /data --appendonly yes" in command[2], name
        assert services[name]["deploy"]["restart_policy"]["delay"] == "10s", name
    script = services["redis-replica"]["command"][2]
    # the first start of the replica follows redis-primary's address, never its name (Redis
    # resolves a name on its one thread at each reconnection: a dead node's hung it 10 s)
    assert '--replicaof "$$primary" 6379' in script and "--replicaof redis-primary" not in script
    assert "getent ahostsv4 redis-primary" in script.split("then exec")[1]
    assert '--replicaof "$$master" 6379' in script  # any start while another is primary
    env = services["manager"]["environment"]
    names = {f"{ENV_PREFIX}{field.name.upper()}" for field in dataclasses.fields(ManagerSettings)}
    for setting in ("REDIS_SENTINELS", "REDIS_MASTER", "REDIS_WAIT_REPLICAS", "LEADER_LEASE_S",
                    "LEADER_RENEW_S", "ADVERTISE_URL"):
        assert f"{ENV_PREFIX}{setting}" in env and f"{ENV_PREFIX}{setting}" in names, setting
    master = env["GREENSWARM_REDIS_MASTER"]
    assert f"sentinel monitor {master} %s 6379 2" in text  # an address, never a name
    assert "getent ahostsv4 redis-primary" in text
    assert "resolve-hostnames" not in text and "announce-hostnames" not in text
    # each Sentinel keeps its slot's id: started again at a new address, it takes its old place
    # among the voters instead of joining as one more (tests/e2e/test_ha_chaos_lab.py)
    sentinel_env = services["redis-sentinel"]["environment"]
    assert sentinel_env["SENTINEL_NAME"] == "{{.Service.Name}}.{{.Task.Slot}}"
    assert "sentinel myid %s" in text and '| sha1sum | cut -c1-40' in text
    assert "${GREENSWARM_TOKEN:?" in text
