"""The manager's settings: one typed dataclass, read from the environment at the edge only."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from domain.classes import ClassTable
from domain.credentials import node_secret_from_token
from domain.energy import DEFAULT_POWER_TABLE, PowerModel
from domain.errors import ValidationError
from domain.model import check_id
from domain.power import PowerSettings, power_settings_from_env
from domain.regions import RegionBounds
from domain.settings import load_settings, secret_setting, shared_token
from domain.slo import DEFAULT_ALLOCATION_S, SloTable
from federation.peers import OffloadMode, Peer, parse_peers
from host_registry.connection import RedisEndpoint
from manager.power_backends import PowerBackendSettings, backend_settings_from_env
from scheduler import registry
from scheduler.admission import AdmissionMode
from scheduler.plugin import (
    ClusterOptions,
    PlacedBy,
    PolicyPlugin,
    build_options,
    option_fields,
)
from web.edge import BodyLimits, listen_addresses

ENV_PREFIX = "GREENSWARM_"


@dataclass(frozen=True)
class ManagerSettings:
    token: str = ""  # bearer token for every endpoint but /healthz (GREENSWARM_TOKEN)
    # The nodes' shared secret (DESIGN 9, domain/credentials.py): each node's agent and monitor
    # present a credential derived from it and their node id, which lets them report their own
    # host's measurements only; the manager's calls to an agent carry a word derived from it.
    # Empty: derived from the token (`greenswarm node-secret` prints it for the nodes).
    node_secret: str = field(default="", repr=False)
    listen_host: str = "127.0.0.1"  # several: comma-separated (the lab: 127.0.0.1,10.123.0.1)
    listen_port: int = 8080
    redis_url: str = "redis://127.0.0.1:6379/0"
    # Redis replicated (DESIGN 13): the Sentinels as HOST:PORT,... and the name they watch the
    # primary under; with them the primary is asked of the Sentinels (REDIS_URL then gives
    # only the database and password). Empty: the one server of REDIS_URL.
    redis_sentinels: str = ""
    redis_master: str = "greenswarm"
    redis_wait_replicas: int = 0  # each registry write waits for this many replicas (WAIT)
    redis_prefix: str = "gs"
    docker_url: str = "unix:///var/run/docker.sock"
    policy: str = "energy"  # a name of the registration table (scheduler/registry.py)
    # The selected policy's options as NAME=VALUE pairs, comma-separated (e.g.
    # "empty_hosts=lee"); GREENSWARM_<NAME> for one option works too.
    policy_options: str = ""
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
    # a job Swarm shows done waits this long for its agent's report (which says whether the
    # kernel killed it out of memory) before it is ended from Swarm's state alone
    exit_report_grace_s: float = 10.0
    swarm_pending_timeout_s: float = 60.0  # 'swarm' policy: refuse what Swarm cannot start
    # A node Down this long is gone: its host (whose tasks moved after NODE_GRACE_S) is retired,
    # no longer listed as down (DESIGN 9); a node removed from the Swarm, or back under a new
    # id, is retired at once.
    node_gone_s: float = 600.0
    threads: int = 8  # WSGI worker threads
    # Checkpointing jobs' directories (DESIGN 3.14, manager/checkpoints.py): an absolute path,
    # the same on the manager and every node (NFS, or the lab's host directory); "" none
    checkpoint_dir: str = "/var/lib/greenswarm/checkpoints"
    # Several managers, one leader (DESIGN 13): the lease in Redis expires this long after its
    # holder last renewed it, and is renewed this often; a standby forwards mutating calls to
    # the leader at the URL the leader advertises (empty: http://<first listen host>:<port>).
    leader_lease_s: float = 5.0
    leader_renew_s: float = 1.0
    advertise_url: str = ""
    service_prefix: str = "gs-"
    # Service levels (DESIGN 3.10): the availability objective of the classes named, e.g.
    # "2=0.9,4=0.5" (the others keep 1, 5/6, 2/3, 1/2), and alpha, the allocation time charged
    # on every placement after a request's first, which the qos policy and the queue expect too.
    slo: str = ""
    allocation_s: float = DEFAULT_ALLOCATION_S
    # GET /metrics (DESIGN 11) also takes this bearer token, so that Prometheus need not hold
    # the shared one (which can submit and stop requests); empty: the shared token only.
    metrics_token: str = ""
    # Dashboard sessions (DESIGN 9, manager/sessions.py) end this long after logging in.
    session_max_age_s: float = 12 * 3600.0
    # The manager's own history for the dashboard's charts (manager/history.py): one sample of
    # the cluster this often, kept this long (a day: 8,640 samples, some 3.5 MB in Redis).
    history_interval_s: float = 10.0
    history_keep_s: float = 86400.0
    # The SPECpower table the hosts' power is estimated with (`greenswarm bench power-tables`).
    power_table: str = DEFAULT_POWER_TABLE
    # The class table and region bounds (GREENSWARM_OVERBOOKING_MODEL, _LEE_BELOW, _EED_ABOVE)
    # and the selected policy's typed options: read by from_env from the same environment.
    cluster: ClusterOptions = field(default_factory=ClusterOptions)
    options: Any = None
    # bounds on every request body (DESIGN 9): 413 past the size, 400 past depth or length
    max_body_bytes: int = BodyLimits.max_body_bytes
    max_json_depth: int = BodyLimits.max_json_depth
    max_json_string_chars: int = BodyLimits.max_json_string_chars
    # Federation (DESIGN 12): this cluster's name among its peers; the peers file (JSON: a list
    # of {name, url, token, latency_ms, bandwidth_mbit}; tokens live in the file); when a new
    # request goes to a peer (off: never); how often the peers' adverts are asked for, and how
    # long an answer of a peer may take (a forwarded request: FORWARD_TIMEOUT_S).
    federation_name: str = "local"
    peers_file: str = ""
    offload: OffloadMode = OffloadMode.OFF
    peer_refresh_s: float = 10.0
    peer_timeout_s: float = 2.0
    # Hosts switched off and on (DESIGN 3.15): GREENSWARM_POWER=on|off and
    # GREENSWARM_POWER_<KNOB> (domain/power.py), the backend GREENSWARM_POWER_BACKEND and its
    # settings (manager/power_backends.py); read by from_env (the backend's only when on).
    power_settings: PowerSettings = field(default_factory=PowerSettings)
    power_backend_settings: PowerBackendSettings = field(default_factory=PowerBackendSettings)
    # Admission control (DESIGN 3.13) of the requests that would wait in the queue: slo (every
    # request of qos, those that ask to queue otherwise) or none.
    admission: AdmissionMode = AdmissionMode.SLO

    @property
    def classes(self) -> ClassTable:
        return self.cluster.classes()

    @property
    def lee_below(self) -> float:
        return self.cluster.lee_below

    @property
    def eed_above(self) -> float:
        return self.cluster.eed_above

    @property
    def bounds(self) -> RegionBounds:
        return self.cluster.bounds()

    @property
    def slo_table(self) -> SloTable:
        return SloTable.parse(self.slo, f"{ENV_PREFIX}SLO")

    @property
    def power_model(self) -> PowerModel:
        try:
            return PowerModel.named(self.power_table)
        except ValidationError as exc:
            raise ValidationError(f"{ENV_PREFIX}POWER_TABLE", exc.message) from None

    @property
    def plugin(self) -> PolicyPlugin[Any]:
        return registry.plugin(self.policy)

    def peers(self) -> tuple[Peer, ...]:
        """The peers of GREENSWARM_PEERS_FILE (none without one); a ValidationError naming the
        setting when the file cannot be read or says something wrong."""
        where = f"{ENV_PREFIX}PEERS_FILE"
        if not self.peers_file:
            return ()
        try:
            with open(self.peers_file, encoding="utf-8") as handle:
                text = handle.read(1_048_577)
        except OSError as exc:
            raise ValidationError(where, f"cannot read {self.peers_file}: {exc.strerror}") \
                from None
        return parse_peers(text, where, home=self.federation_name)

    @property
    def manager_url(self) -> str:
        """This manager's URL as the other managers reach it (GREENSWARM_ADVERTISE_URL)."""
        if self.advertise_url:
            return self.advertise_url.rstrip("/")
        host = self.listen_host.split(",")[0].strip()
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        return f"http://{f'[{host}]' if ':' in host else host}:{self.listen_port}"

    @property
    def redis_endpoint(self) -> RedisEndpoint:
        return RedisEndpoint(self.redis_url, self.redis_sentinels, self.redis_master,
                             wait_replicas=self.redis_wait_replicas)

    @property
    def body_limits(self) -> BodyLimits:
        return BodyLimits(self.max_body_bytes, self.max_json_depth, self.max_json_string_chars)

    @property
    def nodes_secret(self) -> str:
        """The node secret in use: GREENSWARM_NODE_SECRET, else the one derived from the
        token."""
        return self.node_secret or node_secret_from_token(self.token)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: object
    ) -> ManagerSettings:
        """GREENSWARM_<FIELD> for every field; explicit overrides (CLI options) win."""
        env = os.environ if environ is None else environ
        secrets = {"token": shared_token(env),
                   "node_secret": secret_setting(env, f"{ENV_PREFIX}NODE_SECRET")}
        settings = load_settings(cls, env, ENV_PREFIX, {**secrets, **overrides})
        plugin = settings.plugin  # ValidationError (field "policy") for an unknown name
        cluster = load_settings(ClusterOptions, env, ENV_PREFIX)
        options = load_settings(plugin.options, env, ENV_PREFIX)
        options = replace(options, **_pairs(settings.policy_options, plugin))
        settings = replace(settings, cluster=cluster, options=options)
        power = power_settings_from_env(env)
        backend = backend_settings_from_env(env) if power.enabled else PowerBackendSettings()
        settings = replace(settings, power_settings=power, power_backend_settings=backend)
        settings.validate()
        return settings

    def validate(self) -> None:
        if not 0 < self.listen_port < 65536:
            raise ValidationError("listen_port", "must be a TCP port")
        listen_addresses(self.listen_host, self.listen_port)
        if self.sync_interval_s <= 0 or self.retry_interval_s <= 0:
            raise ValidationError("sync_interval_s", "intervals must be positive")
        if not 0 < self.node_gone_s <= 30 * 86400:
            raise ValidationError(f"{ENV_PREFIX}NODE_GONE_S", "must be between 0 and 30 days")
        self.slo_table  # noqa: B018 - a bad GREENSWARM_SLO is refused at start, by name
        self.power_model  # noqa: B018 - and so is an unknown power table
        if not 0 <= self.allocation_s <= 3600:
            raise ValidationError(f"{ENV_PREFIX}ALLOCATION_S", "must be between 0 and 3600 s")
        self.body_limits.validate()
        self.redis_endpoint.validate()
        if self.checkpoint_dir and not self.checkpoint_dir.startswith("/"):
            raise ValidationError(f"{ENV_PREFIX}CHECKPOINT_DIR", "must be an absolute path")
        if not 0.5 <= self.leader_lease_s <= 300:
            raise ValidationError(f"{ENV_PREFIX}LEADER_LEASE_S", "must be between 0.5 and 300 s")
        if not 0.05 <= self.leader_renew_s <= self.leader_lease_s / 2:
            raise ValidationError(f"{ENV_PREFIX}LEADER_RENEW_S", "must be between 0.05 s and "
                                  "half the lease (LEADER_LEASE_S)")
        if self.advertise_url and not self.advertise_url.startswith(("http://", "https://")):
            raise ValidationError(f"{ENV_PREFIX}ADVERTISE_URL", "must be an http(s) URL")
        if not 1 <= self.session_max_age_s <= 30 * 86400:
            raise ValidationError(f"{ENV_PREFIX}SESSION_MAX_AGE_S",
                                  "must be between 1 s and 30 days")
        if not 0.1 <= self.history_interval_s <= 3600:
            raise ValidationError(f"{ENV_PREFIX}HISTORY_INTERVAL_S",
                                  "must be between 0.1 and 3600 s")
        if not self.history_interval_s <= self.history_keep_s <= 31 * 86400:
            raise ValidationError(f"{ENV_PREFIX}HISTORY_KEEP_S", "must be at least one "
                                  "interval (HISTORY_INTERVAL_S) and at most 31 days")
        check_id(self.federation_name, f"{ENV_PREFIX}FEDERATION_NAME")
        if not 0 < self.peer_refresh_s <= 3600:
            raise ValidationError(f"{ENV_PREFIX}PEER_REFRESH_S", "must be between 0 and 3600 s")
        if not 0 < self.peer_timeout_s <= 60:
            raise ValidationError(f"{ENV_PREFIX}PEER_TIMEOUT_S", "must be between 0 and 60 s")
        peers = self.peers()
        if self.offload is not OffloadMode.OFF:
            if not peers:
                raise ValidationError(f"{ENV_PREFIX}OFFLOAD", f"is {self.offload.value}, but "
                                      f"no peer is configured ({ENV_PREFIX}PEERS_FILE)")
            if self.plugin.placed_by is PlacedBy.SWARM:
                raise ValidationError(f"{ENV_PREFIX}OFFLOAD", "needs a policy that decides "
                                      "(not 'swarm')")


def _pairs(text: str, plugin: PolicyPlugin[Any]) -> dict[str, object]:
    """GREENSWARM_POLICY_OPTIONS ("name=value,...") as typed values of the policy's options."""
    fields = {option.name: option for option in option_fields(plugin.options)}
    values: dict[str, object] = {}
    for pair in filter(None, (part.strip() for part in text.split(","))):
        name, sep, raw = pair.partition("=")
        name = name.strip().lower()
        where = f"{ENV_PREFIX}POLICY_OPTIONS"
        if not sep:
            raise ValidationError(where, f"{pair!r} is not NAME=VALUE")
        if name not in fields:
            known = ", ".join(fields) or "none"
            raise ValidationError(where, f"policy {plugin.name} has no option {name!r} "
                                  f"(its options: {known})")
        values[name] = fields[name].parse(raw.strip(), f"{where}.{name}")
    build_options(plugin.options, values)  # the dataclass's own checks
    return values
