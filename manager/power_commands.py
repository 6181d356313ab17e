"""The ``command`` power backend's file and runner (DESIGN 3.15).

The file (``GREENSWARM_POWER_COMMANDS_FILE``) is TOML::

    # every command: a string, split as a shell would split it (no shell runs it), or a list
    # of arguments; {id}, {name} and {address} stand for the host's Swarm node id, hostname
    # and address
    timeout_s = 30      # each command's limit (else GREENSWARM_POWER_COMMAND_TIMEOUT_S)

    [defaults]          # for every host, unless its own table says otherwise
    power_off = "ssh root@{address} systemctl poweroff"
    status = "ipmitool -I lanplus -H {name}-bmc -U admin -f /etc/gs/ipmi.pass chassis power status"

    [hosts.node1]       # by hostname, Swarm node id or address (quoted: [hosts."10.0.0.12"])
    power_on = "wakeonlan 52:54:00:12:34:56"

    [hosts.node2]
    power_on = ["ipmitool", "-I", "lanplus", "-H", "node2-bmc", "-U", "admin",
                "-f", "/etc/gs/ipmi.pass", "chassis", "power", "on"]

A command runs in a session of its own, with stdin closed, stdout and stderr together, and a
small environment: ``PATH``, ``HOME``, ``USER``, ``LANG``, ``LC_ALL``, ``TZ``,
``SSH_AUTH_SOCK`` when set, plus ``GREENSWARM_POWER_ACTION`` (power_on, power_off, status),
``GREENSWARM_POWER_HOST_ID``, ``GREENSWARM_POWER_HOST_NAME``, ``GREENSWARM_POWER_HOST_ADDRESS``
(never the manager's tokens). Past its timeout its whole session is killed. A status command
that exits 0 says ``on`` or ``off`` as a word of its output (ipmitool: "Chassis Power is on").
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from domain.errors import ValidationError
from domain.power import PowerState

FIELD = "GREENSWARM_POWER_COMMANDS_FILE"
MAX_FILE_BYTES = 1 << 20
MAX_HOSTS = 100_000
PASSED_ENV = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "SSH_AUTH_SOCK")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_ON = re.compile(r"\bon\b", re.IGNORECASE)
_OFF = re.compile(r"\boff\b", re.IGNORECASE)


class PowerOp(StrEnum):
    ON = "power_on"
    OFF = "power_off"
    STATUS = "status"


Commands = dict[PowerOp, tuple[str, ...]]


def _bad(path: str, where: str, message: str) -> ValidationError:
    return ValidationError(FIELD, f"{path}: {where}: {message}" if where else f"{path}: {message}")


def _command(path: str, where: str, raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        try:
            argv = tuple(shlex.split(raw))
        except ValueError as exc:
            raise _bad(path, where, f"cannot split {raw!r}: {exc}") from None
    elif isinstance(raw, list) and all(isinstance(a, str) for a in raw):
        argv = tuple(raw)
    else:
        raise _bad(path, where, "must be a string or a list of strings")
    if not argv or not argv[0]:
        raise _bad(path, where, "is empty")
    return argv


def _commands(path: str, where: str, raw: object) -> Commands:
    if not isinstance(raw, dict):
        raise _bad(path, where, "must be a table of power_on, power_off, status")
    unknown = sorted(set(raw) - {op.value for op in PowerOp})
    if unknown:
        raise _bad(path, where, f"unknown key(s) {', '.join(unknown)}: only power_on, "
                   "power_off, status")
    return {PowerOp(key): _command(path, f"{where}.{key}", value) for key, value in raw.items()}


@dataclass(frozen=True)
class CommandFile:
    path: str
    timeout_s: float
    defaults: Commands = field(default_factory=dict)
    hosts: dict[str, Commands] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str, timeout_s: float) -> CommandFile:
        """Read and check the file; a ValidationError naming the setting, the file and the
        place otherwise."""
        try:
            raw = Path(path).read_bytes()
        except OSError as exc:
            raise _bad(path, "", f"cannot read it: {exc.strerror or exc}") from None
        if len(raw) > MAX_FILE_BYTES:
            raise _bad(path, "", f"larger than {MAX_FILE_BYTES} bytes")
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise _bad(path, "", f"not valid TOML: {exc}") from None
        return cls.parse(path, data, timeout_s)

    @classmethod
    def parse(cls, path: str, data: dict[str, Any], timeout_s: float) -> CommandFile:
        unknown = sorted(set(data) - {"timeout_s", "defaults", "hosts"})
        if unknown:
            raise _bad(path, "", f"unknown key(s) {', '.join(unknown)}: only timeout_s, "
                       "defaults, hosts")
        timeout = data.get("timeout_s", timeout_s)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not (
                0 < timeout < 86_400):
            raise _bad(path, "timeout_s", "must be a number of seconds in (0, 86400)")
        defaults = _commands(path, "defaults", data.get("defaults", {}))
        hosts_raw = data.get("hosts", {})
        if not isinstance(hosts_raw, dict):
            raise _bad(path, "hosts", "must be a table of host tables ([hosts.NAME])")
        if len(hosts_raw) > MAX_HOSTS:
            raise _bad(path, "hosts", f"more than {MAX_HOSTS} hosts")
        hosts = {str(name): _commands(path, f"hosts.{name}", table)
                 for name, table in hosts_raw.items()}
        if not defaults and not hosts:
            raise _bad(path, "", "no commands: give [defaults] or [hosts.NAME] tables")
        return cls(path, float(timeout), defaults, hosts)

    def argv(self, op: PowerOp, host_id: str, name: str, address: str) -> list[str] | None:
        """The command of ``op`` for the host (its own table found by id, name or address,
        else the defaults), placeholders filled; None when there is none."""
        own: Commands = {}
        for key in (host_id, name, address):
            if key and key in self.hosts:
                own = self.hosts[key]
                break
        template = own.get(op) or self.defaults.get(op)
        if template is None:
            return None
        values = {"{id}": host_id, "{name}": name or host_id, "{address}": address}
        out = []
        for arg in template:
            for placeholder, value in values.items():
                arg = arg.replace(placeholder, value)
            out.append(arg)
        return out


@dataclass(frozen=True)
class CommandRun:
    argv: tuple[str, ...]
    exit_status: int | None  # None: it could not start, or it was killed at its timeout
    output: str
    duration_s: float
    timed_out: bool = False
    error: str = ""  # why it could not start

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.timed_out

    @property
    def state(self) -> PowerState | None:
        """What a status command's output says: off, on, or None (neither word, or both)."""
        on, off = bool(_ON.search(self.output)), bool(_OFF.search(self.output))
        if on == off:
            return None
        return PowerState.ON if on else PowerState.OFF

    def describe(self) -> str:
        shown = shlex.join(self.argv)
        if self.error:
            return f"`{shown}` could not run: {self.error}"
        if self.timed_out:
            return f"`{shown}` timed out after {self.duration_s:.1f} s and was killed"
        return f"`{shown}` exited with {self.exit_status} after {self.duration_s:.2f} s"


def command_env(op: PowerOp, host_id: str, name: str, address: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update({"GREENSWARM_POWER_ACTION": op.value, "GREENSWARM_POWER_HOST_ID": host_id,
                "GREENSWARM_POWER_HOST_NAME": name, "GREENSWARM_POWER_HOST_ADDRESS": address})
    return env


def run_command(argv: list[str], op: PowerOp, host_id: str, name: str, address: str,
                timeout_s: float) -> CommandRun:
    """Run ``argv`` (no shell) with the power environment; its session killed at
    ``timeout_s``."""
    started = time.monotonic()
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, start_new_session=True,
                                 env=command_env(op, host_id, name, address))
    except OSError as exc:
        return CommandRun(tuple(argv), None, "", time.monotonic() - started,
                          error=exc.strerror or str(exc))
    try:
        out, _ = child.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        try:  # a process that left the session may still hold the pipe: not waited for long
            out, _ = child.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:
            child.kill()
            out = b""
        timed_out = True
    return CommandRun(tuple(argv), None if timed_out else child.returncode,
                      out.decode("utf-8", errors="replace"), time.monotonic() - started,
                      timed_out)
