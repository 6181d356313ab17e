"""The manager's settings: one typed dataclass, read from the environment at the edge only."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from domain.classes import ClassTable, OverbookingModel
from domain.errors import ValidationError
from domain.regions import RegionBounds
from domain.settings import load_settings, shared_token
from task_registry.web import BodyLimits, listen_addresses

ENV_PREFIX = "GREENSWARM_"


@dataclass(frozen=True)
class ManagerSettings:
    token: str = ""  # bearer token for every endpoint but /healthz (GREENSWARM_TOKEN)
    listen_host: str = "127.0.0.1"  # several: comma-separated (the lab: 127.0.0.1,10.123.0.1)
    listen_port: int = 8080
    redis_url: str = "redis://127.0.0.1:6379/0"
    redis_prefix: str = "gs"
    docker_url: str = "unix:///var/run/docker.sock"
    policy: str = "energy"  # energy | spread | binpack | random | swarm
    overbooking_model: str = OverbookingModel.THESIS.value
    empty_hosts: str = "last"  # last | lee
    lee_below: float = RegionBounds.lee_below  # the one default of domain.regions
    eed_above: float = RegionBounds.eed_above
    seed: int = 0
    # Which Swarm nodes are hosts: all Ready and Active nodes, or only those with this label
    # (e.g. greenswarm.lab.node), or only these ids/hostnames (comma-separated).
    node_label: str = ""
    nodes: str = ""
    # How to reach the agent of a node: its node label greenswarm.agent.url, else this URL for
    # every node (single-node set-ups), else http://<node address>:<agent_port>.
    agent_url: str = ""
    agent_port: int = 8081
    sync_interval_s: float = 5.0  # node discovery and reconciliation with Swarm
    retry_interval_s: float = 10.0  # pending queue retried at least this often
    swarm_pending_timeout_s: float = 60.0  # 'swarm' policy: refuse what Swarm cannot start
    threads: int = 8  # WSGI worker threads
    service_prefix: str = "gs-"
    # bounds on every request body (DESIGN 9): 413 past the size, 400 past depth or length
    max_body_bytes: int = BodyLimits.max_body_bytes
    max_json_depth: int = BodyLimits.max_json_depth
    max_json_string_chars: int = BodyLimits.max_json_string_chars

    @property
    def classes(self) -> ClassTable:
        return ClassTable(OverbookingModel(self.overbooking_model))

    @property
    def bounds(self) -> RegionBounds:
        return RegionBounds(self.lee_below, self.eed_above)

    @property
    def body_limits(self) -> BodyLimits:
        return BodyLimits(self.max_body_bytes, self.max_json_depth, self.max_json_string_chars)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: object
    ) -> ManagerSettings:
        """GREENSWARM_<FIELD> for every field; explicit overrides (CLI options) win."""
        env = os.environ if environ is None else environ
        settings = load_settings(cls, env, ENV_PREFIX, {"token": shared_token(env), **overrides})
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.policy not in {"energy", "spread", "binpack", "random", "swarm"}:
            raise ValidationError("policy", "must be energy, spread, binpack, random or swarm")
        if self.empty_hosts not in {"last", "lee"}:
            raise ValidationError("empty_hosts", "must be last or lee")
        OverbookingModel(self.overbooking_model)
        RegionBounds(self.lee_below, self.eed_above)
        if not 0 < self.listen_port < 65536:
            raise ValidationError("listen_port", "must be a TCP port")
        listen_addresses(self.listen_host, self.listen_port)
        if self.sync_interval_s <= 0 or self.retry_interval_s <= 0:
            raise ValidationError("sync_interval_s", "intervals must be positive")
        self.body_limits.validate()
