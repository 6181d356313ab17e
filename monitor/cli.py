"""``greenswarm monitor``: the per-node monitor (thesis 4.2.3, design section 5).

Every option falls back to the environment (GREENSWARM_MONITOR_<OPTION>, GREENSWARM_REGISTRY_URL,
GREENSWARM_NODE_SECRET or GREENSWARM_NODE_CREDENTIAL, DOCKER_HOST) and then to the defaults of
``MonitorSettings``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from domain.labels import DOCKER_API_VERSION
from monitor.settings import HostSourceKind, LogLevel, MonitorSettings, load_settings

if TYPE_CHECKING:
    from monitor.client import RegistryPort
    from monitor.service import Monitor
    from monitor.tasks import ContainerSampler


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "monitor",
        help="sample this node's host and task utilization and push thresholded updates",
        description="Samples the host (psutil, or a cgroup subtree) and our task containers, "
        "averages each window and pushes an update to the Host and Task Registry when CPU or "
        "memory moved by at least the threshold since the last value sent, and at least every "
        "--resend-s. It reports with its node's own credential (DESIGN 9), derived from "
        "GREENSWARM_NODE_SECRET and the host id, or given as GREENSWARM_NODE_CREDENTIAL; "
        "never with the operator's token.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = MonitorSettings()
    parser.add_argument("--registry-url", help=f"(default {defaults.registry_url}; env "
                        "GREENSWARM_REGISTRY_URL)")
    parser.add_argument("--host-id", help="host id (default: the Swarm node id, else hostname)")
    parser.add_argument("--address", help="host address (default: Swarm node address, else "
                        "hostname)")
    parser.add_argument("--source", choices=[s.value for s in HostSourceKind],
                        help=f"host source (default {defaults.source.value})")
    parser.add_argument("--cgroup", metavar="PATH",
                        help="cgroup subtree of this node, relative to each hierarchy "
                        "(for --source cgroup), e.g. greenswarm-lab/node1")
    parser.add_argument("--cgroup-root", metavar="DIR",
                        help=f"where the cgroup hierarchies are mounted ({defaults.cgroup_root})")
    parser.add_argument("--container-cgroup-parent", metavar="PATH",
                        help="the engine's --cgroup-parent, used when a container's cgroup "
                        f"cannot be found from its process ({defaults.container_cgroup_parent})")
    parser.add_argument("--host-interval-s", type=float,
                        help=f"seconds between host samples ({defaults.host_interval_s:g})")
    parser.add_argument("--host-window-s", type=float,
                        help=f"seconds per host window ({defaults.host_window_s:g})")
    parser.add_argument("--task-interval-s", type=float,
                        help=f"seconds between task samples ({defaults.task_interval_s:g})")
    parser.add_argument("--task-window-s", type=float,
                        help=f"seconds per task window ({defaults.task_window_s:g})")
    parser.add_argument("--threshold-pp", type=float,
                        help=f"percentage points a value must move to be sent "
                        f"({defaults.threshold_pp:g})")
    parser.add_argument("--resend-s", type=float,
                        help="the current values are sent again, moved or not, at the first "
                        "window closing this long after the last values sent: a wrong value "
                        f"in the registry heals ({defaults.resend_s:g})")
    parser.add_argument("--docker-socket",
                        help=f"Docker socket path or URL ({defaults.docker_socket})")
    parser.add_argument("--powercap-root", metavar="DIR",
                        help=f"where RAPL zones are ({defaults.powercap_root})")
    parser.add_argument("--once", action="store_true",
                        help="take one host and one task window, print what would be sent as "
                        "JSON, send nothing")
    parser.add_argument("--insecure-no-token", action="store_true", default=None,
                        help="talk to a registry without a bearer token")
    parser.add_argument("--log-level", choices=[level.value for level in LogLevel],
                        type=str.upper, help=f"({defaults.log_level.value})")


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> MonitorSettings:
    names = ("registry_url", "host_id", "address", "source", "cgroup", "cgroup_root",
             "container_cgroup_parent", "host_interval_s", "host_window_s", "task_interval_s",
             "task_window_s", "threshold_pp", "resend_s", "docker_socket", "powercap_root",
             "insecure_no_token", "log_level")
    return load_settings(environ, {name: getattr(args, name, None) for name in names})


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, os.environ)
    logging.basicConfig(
        level=settings.log_level.value,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if args.once:
        report = run_once(settings)
        print(json.dumps(report, indent=2, sort_keys=True))
        return 0
    settings.require_credential()
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        logging.getLogger(__name__).info("signal %d: stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    run_forever(settings, stop)
    return 0


@dataclass(frozen=True)
class Wiring:
    monitor: Monitor
    registry: RegistryPort
    sampler: ContainerSampler
    docker_client: Any  # docker.DockerClient (untyped library)

    def close(self) -> None:
        self.sampler.close()
        self.docker_client.close()


def build(settings: MonitorSettings, once: bool) -> Wiring:
    """The monitor wired from the settings (heavy imports here, so --help stays fast)."""
    import docker

    from domain.credentials import own_credential
    from monitor.client import DryRunRegistry, RegistryClient
    from monitor.core import BackoffPolicy
    from monitor.host_sources import CgroupHostSource, HostSource, PsutilHostSource
    from monitor.identity import resolve_identity
    from monitor.rapl import RaplMeter
    from monitor.service import Monitor, Timings
    from monitor.tasks import ContainerSampler

    cgroup_root = Path(settings.cgroup_root)
    source: HostSource
    if settings.source is HostSourceKind.CGROUP:
        assert settings.cgroup is not None
        source = CgroupHostSource(settings.cgroup, root=cgroup_root)
    else:
        source = PsutilHostSource()
    docker_client = docker.DockerClient(
        # a fixed API version: the client connects lazily (the monitor starts, and keeps
        # sampling the host, while the engine is down) and one-shot stats are available
        base_url=settings.docker_url, version=DOCKER_API_VERSION, timeout=10
    )
    identity = resolve_identity(docker_client, settings.host_id, settings.address)
    parents = [settings.container_cgroup_parent]
    if settings.cgroup:
        parents.append(settings.cgroup)
    sampler = ContainerSampler(
        docker_client,
        host_memory_bytes=source.capacity().memory_bytes,
        cgroup_root=cgroup_root,
        cgroup_parents=parents,
        refresh_s=settings.task_window_s,
    )
    registry: RegistryPort
    if once:
        registry = DryRunRegistry()
    else:
        credential = "" if settings.insecure_no_token and not (
            settings.node_secret or settings.node_credential
        ) else own_credential(identity.host_id, settings.node_secret, settings.node_credential)
        registry = RegistryClient(
            settings.registry_url,
            credential,
            connect_timeout_s=settings.connect_timeout_s,
            read_timeout_s=settings.read_timeout_s,
        )
    monitor = Monitor(
        identity,
        source,
        registry,
        timings=Timings(settings.host_interval_s, settings.host_window_s,
                        settings.task_interval_s, settings.task_window_s),
        threshold_pp=settings.threshold_pp,
        resend_s=settings.resend_s,
        backoff=BackoffPolicy(settings.backoff_base_s, settings.backoff_cap_s),
        task_sampler=sampler,
        power_meter=RaplMeter.discover(Path(settings.powercap_root)),
    )
    return Wiring(monitor, registry, sampler, docker_client)


def run_once(settings: MonitorSettings) -> dict[str, object]:
    """One host window and one task window; what would be sent, without sending it."""
    from monitor.client import DryRunRegistry

    wiring = build(settings, once=True)
    try:
        wiring.monitor.run(threading.Event(), once=True)
    finally:
        wiring.close()
    registry = wiring.registry
    assert isinstance(registry, DryRunRegistry)
    return {
        "host_id": wiring.monitor.identity.host_id,
        "address": wiring.monitor.identity.address,
        "registry_url": settings.registry_url,
        "messages": registry.messages,
    }


def run_forever(settings: MonitorSettings, stop: threading.Event) -> None:
    wiring = build(settings, once=False)
    identity = wiring.monitor.identity
    logging.getLogger(__name__).info(
        "monitor of host %s (%s) started: source %s, registry %s", identity.host_id,
        identity.address, settings.source.value, settings.registry_url)
    try:
        wiring.monitor.run(stop)
    finally:
        wiring.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m monitor ...``: the same command without the ``greenswarm`` entry point."""
    from domain.errors import GreenSwarmError

    parser = argparse.ArgumentParser(prog="python -m monitor", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except GreenSwarmError as exc:
        print(f"monitor: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
