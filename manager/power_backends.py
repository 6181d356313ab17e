"""Live power backends (DESIGN 3.15): how the manager really switches a host off and on.

``GREENSWARM_POWER_BACKEND`` chooses one:

* ``none``: nothing is switched, nothing advised;
* ``advise`` (the default): nothing is switched; each call says what it would have done, so an
  operator can watch the power manager before trusting it;
* ``command``: per-host commands from a file (``GREENSWARM_POWER_COMMANDS_FILE``, TOML, see
  :mod:`manager.power_commands`): ``power_on``, ``power_off``, ``status``, e.g. ``ipmitool ...
  chassis power on``, ``wakeonlan MAC``, ``ssh node systemctl poweroff``; each run with a
  timeout, its exit status and output recorded in the result;
* ``lab``: the local lab's node engines: ``switch_off`` drains the Swarm node (``docker node
  update --availability drain``), waits for its tasks to stop, then asks the lab's power
  endpoint (``python -m lab power serve``, like a BMC; ``GREENSWARM_POWER_LAB_URL``) to stop the
  node's engine; ``switch_on`` asks it to start the engine again (same data root: the same Swarm
  node), waits until the node is Ready, then sets it active.

Every backend has ``switch_on(target)``, ``switch_off(target)`` and ``status(target)``, each
returning a :class:`PowerResult` (what was done, exit status, output, timings: what an event
records). A switch that fails raises :class:`PowerSwitchError` (an UnavailableError of the
exception root) carrying its result; bad settings or a bad command file raise ValidationError
naming the setting. The calls block (a command's timeout, a node's boot): the manager runs them
off its decision loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from domain.errors import GreenSwarmError, UnavailableError, ValidationError
from domain.power import PowerState
from domain.settings import load_settings, shared_token
from manager.power_commands import CommandFile, PowerOp, run_command
from web.client import HttpClient, HttpSettings

OUTPUT_CHARS = 4000  # of a command's output kept in its result (the end)


class BackendKind(StrEnum):
    NONE = "none"
    ADVISE = "advise"
    COMMAND = "command"
    LAB = "lab"


@dataclass(frozen=True)
class PowerBackendSettings:
    """``GREENSWARM_POWER_BACKEND`` and the backends' own settings (``GREENSWARM_POWER_*``)."""

    backend: BackendKind = BackendKind.ADVISE
    commands_file: str = ""  # command: the TOML file of per-host commands
    command_timeout_s: float = 60.0  # command: each command's (the file may set its own)
    lab_url: str = "http://127.0.0.1:8089"  # lab: the lab's power endpoint
    lab_token: str = ""  # lab: its bearer token (empty: the shared GREENSWARM_TOKEN)
    ready_timeout_s: float = 180.0  # a node switched on is Ready within this (any backend)
    drain_timeout_s: float = 60.0  # lab: a drained node's tasks stop within this
    http_timeout_s: float = 120.0  # lab: one call to the endpoint (an engine's start)

    def __post_init__(self) -> None:
        for name in ("command_timeout_s", "ready_timeout_s", "drain_timeout_s",
                     "http_timeout_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < 86_400):
                raise ValidationError(f"GREENSWARM_POWER_{name.upper()}",
                                      f"must be a number of seconds in (0, 86400), got {value!r}")
        if self.backend is BackendKind.COMMAND and not self.commands_file:
            raise ValidationError("GREENSWARM_POWER_COMMANDS_FILE",
                                  "the command backend needs the file of per-host commands")
        if self.backend is BackendKind.LAB and not self.lab_url.startswith(("http://",
                                                                            "https://")):
            raise ValidationError("GREENSWARM_POWER_LAB_URL", f"{self.lab_url!r} is not an "
                                  "http(s) URL")


def backend_settings_from_env(environ: Mapping[str, str]) -> PowerBackendSettings:
    """The backend's settings from ``GREENSWARM_POWER_BACKEND``, ``_COMMANDS_FILE``,
    ``_COMMAND_TIMEOUT_S``, ``_LAB_URL``, ``_LAB_TOKEN``, ``_READY_TIMEOUT_S``,
    ``_DRAIN_TIMEOUT_S``, ``_HTTP_TIMEOUT_S``; the lab's token defaults to the shared one."""
    settings = load_settings(PowerBackendSettings, environ, "GREENSWARM_POWER_")
    if settings.backend is BackendKind.LAB and not settings.lab_token:
        token = shared_token(environ)
        if not token:
            raise ValidationError("GREENSWARM_POWER_LAB_TOKEN", "the lab backend needs the "
                                  "power endpoint's token (or the shared GREENSWARM_TOKEN)")
        settings = PowerBackendSettings(**{**settings.__dict__, "lab_token": token})
    return settings


@dataclass(frozen=True)
class PowerTarget:
    """The host to switch: its id (the Swarm node id), hostname and address."""

    id: str
    name: str = ""
    address: str = ""

    def label(self) -> str:
        return self.name or self.id


@dataclass(frozen=True)
class PowerResult:
    """What one call did: ``switched`` when a host was really switched (never by none and
    advise), the state a status found (None: unknown), a command's exit status and output, how
    long it took, and the steps' timings (seconds from the call's start)."""

    backend: BackendKind
    op: PowerOp
    host: str
    ok: bool
    switched: bool
    detail: str
    state: PowerState | None = None
    exit_status: int | None = None
    output: str = ""
    duration_s: float = 0.0
    steps: tuple[tuple[str, float], ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend.value, "op": self.op.value, "host": self.host,
                "ok": self.ok, "switched": self.switched, "detail": self.detail,
                "state": None if self.state is None else self.state.value,
                "exit_status": self.exit_status, "output": self.output,
                "duration_s": round(self.duration_s, 3),
                "steps": [{"step": s, "at_s": round(t, 3)} for s, t in self.steps]}


class PowerSwitchError(UnavailableError):
    """A switch failed (a command exited non-zero or timed out, the lab's endpoint refused);
    ``result`` says what was done and seen."""

    def __init__(self, result: PowerResult) -> None:
        super().__init__(f"{result.backend.value} could not {result.op.value} "
                         f"{result.host}: {result.detail}")
        self.result = result


class PowerBackend(Protocol):
    @property
    def kind(self) -> BackendKind: ...

    @property
    def switches(self) -> bool:
        """Whether it really switches hosts (none and advise do not)."""
        ...

    def switch_on(self, target: PowerTarget) -> PowerResult: ...

    def switch_off(self, target: PowerTarget) -> PowerResult: ...

    def status(self, target: PowerTarget) -> PowerResult: ...


# -- none and advise ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NoBackend:
    """``none`` (nothing said) or ``advise`` (what it would do, said)."""

    kind: BackendKind = BackendKind.ADVISE

    @property
    def switches(self) -> bool:
        return False

    def _said(self, op: PowerOp, target: PowerTarget, verb: str) -> PowerResult:
        detail = (f"advise: would {verb} {target.label()} (nothing is switched)"
                  if self.kind is BackendKind.ADVISE else "power backend none: nothing done")
        return PowerResult(self.kind, op, target.label(), True, False, detail)

    def switch_on(self, target: PowerTarget) -> PowerResult:
        return self._said(PowerOp.ON, target, "switch on")

    def switch_off(self, target: PowerTarget) -> PowerResult:
        return self._said(PowerOp.OFF, target, "switch off")

    def status(self, target: PowerTarget) -> PowerResult:
        return self._said(PowerOp.STATUS, target, "read the power of")


# -- command -----------------------------------------------------------------------------------


@dataclass
class CommandBackend:
    """Per-host commands from a file; see :mod:`manager.power_commands`."""

    commands: CommandFile
    kind: BackendKind = BackendKind.COMMAND

    @property
    def switches(self) -> bool:
        return True

    def _run(self, op: PowerOp, target: PowerTarget) -> PowerResult:
        argv = self.commands.argv(op, target.id, target.name, target.address)
        if argv is None:
            if op is PowerOp.STATUS:
                return PowerResult(self.kind, op, target.label(), True, False,
                                   "no status command for this host: state unknown")
            raise ValidationError(
                "GREENSWARM_POWER_COMMANDS_FILE",
                f"{self.commands.path}: no {op.value} command for host {target.label()} "
                f"(id {target.id}), and no default")
        ran = run_command(argv, op, target.id, target.name, target.address,
                          self.commands.timeout_s)
        output = ran.output[-OUTPUT_CHARS:]
        if op is PowerOp.STATUS:
            state = ran.state if ran.exit_status == 0 else None
            return PowerResult(self.kind, op, target.label(), ran.exit_status == 0, False,
                               ran.describe(), state, ran.exit_status, output, ran.duration_s,
                               (("ran", ran.duration_s),))
        result = PowerResult(self.kind, op, target.label(), ran.ok, ran.ok, ran.describe(),
                             None, ran.exit_status, output, ran.duration_s,
                             (("ran", ran.duration_s),))
        if not ran.ok:
            raise PowerSwitchError(result)
        return result

    def switch_on(self, target: PowerTarget) -> PowerResult:
        return self._run(PowerOp.ON, target)

    def switch_off(self, target: PowerTarget) -> PowerResult:
        return self._run(PowerOp.OFF, target)

    def status(self, target: PowerTarget) -> PowerResult:
        return self._run(PowerOp.STATUS, target)


# -- lab -----------------------------------------------------------------------------------------


class SwarmNodes(Protocol):
    """What the lab backend asks of the Swarm (:class:`DockerNodes` live)."""

    def set_availability(self, node_id: str, availability: str) -> None: ...

    def node_state(self, node_id: str) -> tuple[str, str]:
        """(status state, availability), e.g. ("ready", "active")."""
        ...

    def running_tasks(self, node_id: str) -> int: ...


@dataclass
class LabBackend:
    settings: PowerBackendSettings
    nodes: SwarmNodes
    kind: BackendKind = BackendKind.LAB
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    poll_s: float = 0.25

    def __post_init__(self) -> None:
        # the endpoint's token attached to every call; a switch (POST) is sent again only when
        # no connection was made: an engine asked to start twice may start twice
        self._http = HttpClient(
            self.settings.lab_url, "lab power endpoint", bearer=self.settings.lab_token,
            context="lab power endpoint",
            settings=HttpSettings(connect_timeout_s=min(5.0, self.settings.http_timeout_s),
                                  read_timeout_s=self.settings.http_timeout_s))

    @property
    def switches(self) -> bool:
        return True

    def _call(self, method: str, path: str) -> dict[str, Any]:
        return self._http.call_object(method, path)

    def _wait(self, what: str, done: Callable[[], bool], timeout_s: float) -> bool:
        deadline = self.clock() + timeout_s
        while True:
            if done():
                return True
            if self.clock() >= deadline:
                return False
            self.sleep(self.poll_s)

    def switch_off(self, target: PowerTarget) -> PowerResult:
        started = self.clock()
        steps: list[tuple[str, float]] = []

        def step(name: str) -> None:
            steps.append((name, self.clock() - started))

        def failed(detail: str) -> PowerSwitchError:
            return PowerSwitchError(PowerResult(self.kind, PowerOp.OFF, target.label(), False,
                                                False, detail, None, None, "",
                                                self.clock() - started, tuple(steps)))

        self.nodes.set_availability(target.id, "drain")
        step("drain")
        try:
            if not self._wait("tasks", lambda: self.nodes.running_tasks(target.id) == 0,
                              self.settings.drain_timeout_s):
                raise failed(f"its tasks still run {self.settings.drain_timeout_s:g} s after "
                             "drain")
            step("drained")
            answer = self._call("POST", f"/nodes/{target.name or target.id}/off")
        except GreenSwarmError:
            # not switched off: the node takes work again (a drained node would be lost)
            self.nodes.set_availability(target.id, "active")
            raise
        step("engine-stopped")
        return PowerResult(self.kind, PowerOp.OFF, target.label(), True, True,
                           f"drained, engine stopped ({json.dumps(answer, sort_keys=True)})",
                           PowerState.OFF, None, "", self.clock() - started, tuple(steps))

    def switch_on(self, target: PowerTarget) -> PowerResult:
        started = self.clock()
        steps: list[tuple[str, float]] = []

        def step(name: str) -> None:
            steps.append((name, self.clock() - started))

        answer = self._call("POST", f"/nodes/{target.name or target.id}/on")
        step("engine-started")
        if not self._wait("ready", lambda: self.nodes.node_state(target.id)[0] == "ready",
                          self.settings.ready_timeout_s):
            raise PowerSwitchError(PowerResult(
                self.kind, PowerOp.ON, target.label(), False, True,
                f"its engine started, but the node is not Ready after "
                f"{self.settings.ready_timeout_s:g} s", PowerState.BOOTING, None, "",
                self.clock() - started, tuple(steps)))
        step("ready")
        self.nodes.set_availability(target.id, "active")
        step("active")
        return PowerResult(self.kind, PowerOp.ON, target.label(), True, True,
                           f"engine started, Ready, active "
                           f"({json.dumps(answer, sort_keys=True)})", PowerState.ON, None, "",
                           self.clock() - started, tuple(steps))

    def status(self, target: PowerTarget) -> PowerResult:
        started = self.clock()
        answer = self._call("GET", f"/nodes/{target.name or target.id}")
        power = str(answer.get("power", ""))
        swarm, availability = self.nodes.node_state(target.id)
        if power == "off":
            state: PowerState | None = PowerState.OFF
        elif power == "on" and swarm == "ready":
            state = PowerState.ON
        elif power in ("on", "booting"):
            state = PowerState.BOOTING
        else:
            state = None
        return PowerResult(self.kind, PowerOp.STATUS, target.label(), True, False,
                           f"engine {power or 'unknown'}, Swarm {swarm}, {availability}", state,
                           None, "", self.clock() - started)


def make_backend(settings: PowerBackendSettings, *,
                 nodes: SwarmNodes | None = None) -> PowerBackend:
    """The backend ``settings`` choose; ``nodes``: the Swarm, for ``lab`` (the manager's
    Docker engine: :class:`DockerNodes`)."""
    if settings.backend in (BackendKind.NONE, BackendKind.ADVISE):
        return NoBackend(settings.backend)
    if settings.backend is BackendKind.COMMAND:
        return CommandBackend(CommandFile.load(settings.commands_file,
                                               settings.command_timeout_s))
    if nodes is None:
        raise ValidationError("GREENSWARM_POWER_BACKEND", "the lab backend needs the Swarm")
    return LabBackend(settings, nodes)


class DockerNodes:
    """:class:`SwarmNodes` through the Swarm manager's Docker engine (the manager's
    ``GREENSWARM_DOCKER_URL``)."""

    def __init__(self, base_url: str, timeout_s: float = 30.0) -> None:
        import docker

        from domain.labels import DOCKER_API_VERSION

        self.client = docker.DockerClient(base_url=base_url, version=DOCKER_API_VERSION,
                                          timeout=int(max(1, timeout_s)))

    def set_availability(self, node_id: str, availability: str) -> None:
        from manager.swarm import NodeAvailability, docker_errors

        wanted = NodeAvailability(availability)
        with docker_errors(f"set node {node_id} {wanted.value}"):
            raw = self.client.api.inspect_node(node_id)
            spec = dict(raw["Spec"])
            if spec.get("Availability") == wanted.value:
                return
            spec["Availability"] = wanted.value
            self.client.api.update_node(node_id, raw["Version"]["Index"], spec)

    def node_state(self, node_id: str) -> tuple[str, str]:
        from manager.swarm import docker_errors

        with docker_errors(f"inspect node {node_id}"):
            raw = self.client.api.inspect_node(node_id)
        return (str(raw.get("Status", {}).get("State", "unknown")),
                str(raw.get("Spec", {}).get("Availability", "unknown")))

    def running_tasks(self, node_id: str) -> int:
        from manager.swarm import docker_errors

        with docker_errors(f"list the tasks of node {node_id}"):
            tasks = self.client.api.tasks(filters={"node": node_id})
        return sum(1 for t in tasks if t.get("Status", {}).get("State") in (
            "running", "starting", "preparing", "assigned", "accepted", "ready"))

    def close(self) -> None:
        self.client.close()
