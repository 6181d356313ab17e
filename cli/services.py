"""``greenswarm manager`` and ``greenswarm agent``: the two long-running services."""

from __future__ import annotations

import argparse
import logging
import threading
from typing import TYPE_CHECKING

from domain.errors import ValidationError
from scheduler import registry as policies

if TYPE_CHECKING:
    from host_registry.redis_store import RedisStore
    from manager.settings import ManagerSettings


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError("use HOST:PORT")
    return host, int(port)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    manager = subparsers.add_parser(
        "manager",
        help="run the manager: REST API, scheduler, Host and Task Registry",
        description="Settings come from GREENSWARM_* variables (see the README); options win. "
        "GREENSWARM_TOKEN is required.",
    )
    manager.add_argument("--listen", type=_listen, help="HOST:PORT (default 127.0.0.1:8080)")
    manager.add_argument("--redis-url")
    manager.add_argument("--docker-url")
    manager.add_argument("--policy", choices=policies.names(),
                         help="the placement policy (default: energy; GREENSWARM_POLICY)")
    manager.add_argument("--node-label", help="only Swarm nodes carrying this label are hosts")
    manager.add_argument("--nodes", help="only these node ids or hostnames (comma-separated)")
    manager.add_argument("--agent-url", help="one agent URL for every node (single-node set-ups)")
    manager.add_argument("--log-level", default="INFO")
    manager.set_defaults(handler=run_manager)

    registry = subparsers.add_parser(
        "registry",
        help="run the Host and Task Registry endpoints on their own (no scheduler)",
        description="The manager serves these endpoints itself; run them apart only when a "
        "scheduler elsewhere drives them. Uses the manager's GREENSWARM_* settings.",
    )
    registry.add_argument("--listen", type=_listen, help="HOST:PORT (default 127.0.0.1:8080)")
    registry.add_argument("--redis-url")
    registry.add_argument("--log-level", default="INFO")
    registry.set_defaults(handler=run_registry)

    agent = subparsers.add_parser(
        "agent",
        help="run a node agent: CPU shares, live cuts, kills, exit reports",
        description="Settings come from GREENSWARM_AGENT_* variables, GREENSWARM_NODE_SECRET "
        "(or this node's GREENSWARM_NODE_CREDENTIAL; never the operator's token) and "
        "GREENSWARM_MANAGER_URL; options win.",
    )
    agent.add_argument("--listen", type=_listen, help="HOST:PORT (default 0.0.0.0:8081)")
    agent.add_argument("--manager-url")
    agent.add_argument("--docker-url")
    agent.add_argument("--node-id", help="default: the local engine's Swarm node id")
    agent.add_argument("--log-level", default="INFO")
    agent.set_defaults(handler=run_agent)

    secret = subparsers.add_parser(
        "node-secret",
        help="print the node secret the nodes' agents and monitors need (GREENSWARM_NODE_SECRET)",
        description="Prints the node secret the manager uses: GREENSWARM_NODE_SECRET when set, "
        "else the one derived from GREENSWARM_TOKEN. Give it to the nodes' agents and monitors "
        "(GREENSWARM_NODE_SECRET), never the token: with it each node derives its own "
        "credential, which reports its own host's measurements and nothing else.",
    )
    secret.set_defaults(handler=run_node_secret)
    credential = subparsers.add_parser(
        "node-credential",
        help="print one node's own credential (GREENSWARM_NODE_CREDENTIAL of that node)",
        description="Prints the credential of one node under the node secret (see `greenswarm "
        "node-secret`). A node given only its own credential (GREENSWARM_NODE_CREDENTIAL) "
        "instead of the node secret cannot speak for any other node.",
    )
    credential.add_argument("node_id", help="the node's Swarm node id (its host id)")
    credential.set_defaults(handler=run_node_credential)


def _node_secret() -> str:
    import os

    from domain.credentials import node_secret_from_token
    from domain.settings import secret_setting, shared_token

    found = secret_setting(os.environ, "GREENSWARM_NODE_SECRET") or node_secret_from_token(
        shared_token(os.environ))
    if not found:
        raise ValidationError("GREENSWARM_NODE_SECRET", "nor GREENSWARM_TOKEN is set")
    return found


def run_node_secret(args: argparse.Namespace) -> int:
    print(_node_secret())
    return 0


def run_node_credential(args: argparse.Namespace) -> int:
    from domain.credentials import node_credential

    print(node_credential(_node_secret(), args.node_id))
    return 0


def _logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _require_token(token: str) -> None:
    if not token:
        raise ValidationError("GREENSWARM_TOKEN", "is required: the shared bearer token")


def _registry_store(settings: ManagerSettings) -> RedisStore:
    """The shared token is required; the Redis store must answer before anything is served."""
    from host_registry.redis_store import RedisStore

    _require_token(settings.token)
    store = RedisStore.connect(
        settings.redis_endpoint, settings.classes, settings.bounds, settings.redis_prefix
    )
    store.ping()
    return store


def run_manager(args: argparse.Namespace) -> int:
    from manager.agents import AgentClient
    from manager.app import create_app
    from manager.core import Manager
    from manager.records import RequestRecords
    from manager.settings import ManagerSettings
    from manager.swarm import SwarmBackend
    from web.edge import serve

    _logging(args.log_level)
    host, port = args.listen or (None, None)
    settings = ManagerSettings.from_env(
        listen_host=host,
        listen_port=port,
        redis_url=args.redis_url,
        docker_url=args.docker_url,
        policy=args.policy,
        node_label=args.node_label,
        nodes=args.nodes,
        agent_url=args.agent_url,
    )
    store = _registry_store(settings)
    manager = Manager(
        settings,
        store,
        store.sibling(RequestRecords),
        SwarmBackend(settings.docker_url, settings.service_prefix),
        AgentClient(settings.nodes_secret),
    )
    manager.start()
    try:
        serve(create_app(manager), settings.listen_host, settings.listen_port, settings.threads)
    finally:
        manager.stop()
    return 0


def run_registry(args: argparse.Namespace) -> int:
    from manager.settings import ManagerSettings
    from task_registry.standalone import create_registry_app
    from web.edge import serve

    _logging(args.log_level)
    host, port = args.listen or (None, None)
    settings = ManagerSettings.from_env(
        listen_host=host, listen_port=port, redis_url=args.redis_url
    )
    store = _registry_store(settings)
    serve(
        create_registry_app(store, settings.token, settings.body_limits,
                            node_secret=settings.nodes_secret),
        settings.listen_host,
        settings.listen_port,
        settings.threads,
    )
    return 0


def run_agent(args: argparse.Namespace) -> int:
    from task_registry.agent import Agent, AgentSettings
    from task_registry.agent_app import create_agent_app
    from web.edge import serve

    _logging(args.log_level)
    host, port = args.listen or (None, None)
    settings = AgentSettings.from_env(
        listen_host=host,
        listen_port=port,
        manager_url=args.manager_url,
        docker_url=args.docker_url,
        node_id=args.node_id,
    )
    agent = Agent(settings)  # a ValidationError naming GREENSWARM_NODE_SECRET without one
    worker = threading.Thread(target=agent.run, name="agent-events", daemon=True)
    worker.start()
    try:
        serve(create_agent_app(agent), settings.listen_host, settings.listen_port, threads=4)
    finally:
        agent.stop()
    return 0
