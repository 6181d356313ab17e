"""The dockerd processes of the lab: one per node inside its namespaces, and the main engine
when none runs. Started detached, found again and stopped only through their pid files.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from lab import engine
from lab.errors import LabUnavailableError
from lab.model import NodeRecord
from lab.proc import (
    cmdline,
    daemon_pid,
    pid_alive,
    read_pidfile,
    run,
    spawn_daemon,
    stop_pids,
    tail,
    wait_until,
)
from lab.settings import LabSettings

# Swarm workers try to pull a service's image first; with no registry that only costs time and
# log noise, so the lab's engines use the image they have.
DAEMON_ENV = {"DOCKER_SERVICE_PREFER_OFFLINE_IMAGE": "1"}


def daemon_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    return {**env, **DAEMON_ENV}


def node_dockerd_argv(settings: LabSettings, node: NodeRecord, netns_file: Path) -> list[str]:
    """``nsenter`` into the node's network and UTS namespaces, then exec its dockerd (pure).

    ``nsenter --net`` (not ``ip netns exec``, which remounts /sys and hides the cgroup mounts).
    """
    argv = [
        "nsenter", f"--net={netns_file}", f"--uts={node.uts_file}", "--",
        settings.engine.dockerd,
        "--data-root", node.data_root,
        "--exec-root", node.exec_root,
        "-H", node.socket_url,
        "--pidfile", node.pidfile,
        "--cgroup-parent", node.cgroup_parent,
        "--exec-opt", "native.cgroupdriver=cgroupfs",
        "--shutdown-timeout", str(settings.engine.node_shutdown_timeout_s),
    ]
    for key, value in node.engine_labels().items():
        argv += ["--label", f"{key}={value}"]
    return argv


def ensure_uts_namespace(node: NodeRecord) -> None:
    """A persistent UTS namespace (bind-mounted on ``uts_file``) whose hostname is the node's."""
    uts = Path(node.uts_file)
    if _is_nsfs_mount(uts):
        return
    uts.parent.mkdir(parents=True, exist_ok=True)
    uts.touch(exist_ok=True)
    run(["unshare", f"--uts={uts}", "hostname", node.name])


def _is_nsfs_mount(path: Path) -> bool:
    try:
        mounts = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return False
    return any(line.split()[4] == str(path) and " - nsfs " in line for line in mounts.splitlines())


def node_daemon_pid(node: NodeRecord) -> int | None:
    return daemon_pid(Path(node.pidfile))


def start_node_daemon(settings: LabSettings, node: NodeRecord) -> int:
    """Start the node's dockerd (it must not be running); return its pid."""
    for stale in (Path(node.pidfile), Path(node.socket)):
        stale.unlink(missing_ok=True)
    netns_file = settings.paths.netns_dir / node.netns
    argv = node_dockerd_argv(settings, node, netns_file)
    return spawn_daemon(argv, Path(node.log_file), daemon_env())


def stop_daemons(pidfiles: list[Path], timeout_s: float) -> list[int]:
    """Stop the daemons of ``pidfiles`` (only pids that are really theirs); return survivors."""
    pids = [pid for pid in (daemon_pid(p) for p in pidfiles) if pid is not None]
    return stop_pids(pids, timeout_s) if pids else []


@dataclass(frozen=True)
class MainEngine:
    started_by_lab: bool
    pid: int | None


def ensure_main_engine(settings: LabSettings) -> MainEngine:
    """Make sure the main engine answers; start a dockerd for it if none runs.

    A dockerd somebody else started (its pid file names a live process) is waited for, never
    replaced. One we start ourselves writes its pid to ``/run/greenswarm/dockerd.pid``.
    """
    url, timeouts = settings.engine.main_url, settings.timeouts
    if engine.ping(url):
        return MainEngine(False, daemon_pid(settings.paths.main_pidfile))
    ours = daemon_pid(settings.paths.main_pidfile)
    foreign = read_pidfile(settings.engine.system_pidfile)
    if ours is None and foreign is not None and pid_alive(foreign):
        engine.wait_engine(url, timeouts.engine_start_s,
                           f"the main Docker engine (pid {foreign}) to answer on {url}")
        return MainEngine(False, None)
    pid = ours
    if pid is None:
        settings.paths.main_pidfile.parent.mkdir(parents=True, exist_ok=True)
        argv = main_dockerd_argv(settings)
        pid = spawn_daemon(argv, settings.paths.main_log, daemon_env())
    try:
        engine.wait_engine(url, timeouts.engine_start_s, f"the main Docker engine on {url}")
    except LabUnavailableError as exc:
        raise LabUnavailableError(f"{exc}; see {settings.paths.main_log}") from exc
    return MainEngine(True, pid)


def main_dockerd_argv(settings: LabSettings) -> list[str]:
    """The main engine the lab starts when none runs: dockerd's defaults, our pid file."""
    eng = settings.engine
    argv = [eng.dockerd, "--pidfile", str(settings.paths.main_pidfile), "-H", eng.main_url]
    if eng.main_data_root is not None:
        argv += ["--data-root", str(eng.main_data_root)]
    if eng.main_exec_root is not None:
        argv += ["--exec-root", str(eng.main_exec_root)]
    return argv


def stop_main_engine(settings: LabSettings) -> bool:
    """Stop the main engine only through the lab's own pid file; True if one was stopped."""
    return _stop_by_pidfile(settings.paths.main_pidfile, settings, "the main engine")


def delay_argv(settings: LabSettings, delay_ms: float) -> list[str]:
    """The userspace delay between clusters (lab/delay.py) with this interpreter (pure)."""
    return [sys.executable, "-m", "lab.delay", "--queue", str(settings.delay_queue),
            "--delay-ms", f"{delay_ms:g}", "--pidfile", str(settings.paths.delay_pidfile)]


def delay_daemon_pid(settings: LabSettings) -> int | None:
    return daemon_pid(settings.paths.delay_pidfile)


def ensure_delay_daemon(settings: LabSettings, delay_ms: float) -> bool:
    """Run lab/delay.py with ``delay_ms`` (restarted if it runs with another); True if started.

    It writes its pid file only once its queue is bound, so this waits for that file.
    """
    pid = delay_daemon_pid(settings)
    if pid is not None and cmdline(pid) == delay_argv(settings, delay_ms):
        return False
    stop_delay_daemon(settings)
    settings.paths.delay_pidfile.parent.mkdir(parents=True, exist_ok=True)
    env = {**daemon_env(), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = spawn_daemon(delay_argv(settings, delay_ms), settings.paths.delay_log, env)
    log = settings.paths.delay_log

    def started() -> bool | None:
        if delay_daemon_pid(settings) is not None:
            return True
        if not pid_alive(child):
            raise LabUnavailableError(f"the delay between clusters did not start: {tail(log)}")
        return None

    wait_until(started, what="the delay between clusters (lab/delay.py) to bind its queue",
               timeout_s=settings.timeouts.engine_start_s)
    return True


def stop_delay_daemon(settings: LabSettings) -> bool:
    """Stop lab/delay.py through its pid file; True if one was running."""
    return _stop_by_pidfile(settings.paths.delay_pidfile, settings, "the delay between clusters")


def _stop_by_pidfile(pidfile: Path, settings: LabSettings, what: str) -> bool:
    """Stop the daemon of ``pidfile``, and only it; True if one was running."""
    if daemon_pid(pidfile) is None:
        return False
    survivors = stop_daemons([pidfile], settings.timeouts.engine_stop_s)
    if survivors:
        raise LabUnavailableError(f"{what} (pid {survivors[0]}) did not stop")
    return True
