"""Live power backends (DESIGN 3.15, manager/power_backends.py): the ``command`` backend runs real
shell scripts that record how they were called (argv, environment, timing); ``none`` and
``advise`` switch nothing; settings and command files are checked with clear errors."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from domain.errors import ValidationError
from domain.power import PowerState
from manager.power_backends import (
    BackendKind,
    CommandBackend,
    NoBackend,
    PowerBackendSettings,
    PowerSwitchError,
    PowerTarget,
    backend_settings_from_env,
    make_backend,
)
from manager.power_commands import CommandFile, PowerOp

NODE1 = PowerTarget("k3x9node1id", "node1", "10.0.0.11")
NODE2 = PowerTarget("p0q7node2id", "node2", "10.0.0.12")

# Appends one line per call to the log given as its first argument: its arguments, the power
# environment, whether the manager's token leaked, and when it started and ended.
RECORD = """#!/bin/sh
log="$1"; shift
start=$(date +%s.%N)
printf 'argv' >> "$log"; for a in "$@"; do printf ' [%s]' "$a" >> "$log"; done
printf ' | env %s %s %s %s | token %s' "$GREENSWARM_POWER_ACTION" "$GREENSWARM_POWER_HOST_ID" \\
    "$GREENSWARM_POWER_HOST_NAME" "$GREENSWARM_POWER_HOST_ADDRESS" "${GREENSWARM_TOKEN:-unset}" \\
    >> "$log"
sleep "${PAUSE:-0}"
printf ' | start %s end %s\\n' "$start" "$(date +%s.%N)" >> "$log"
echo "done for $GREENSWARM_POWER_HOST_NAME"
"""


def script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def command_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "power.toml"
    path.write_text(text)
    return str(path)


@pytest.fixture
def recorder(tmp_path: Path) -> tuple[str, Path]:
    return script(tmp_path, "record.sh", RECORD), tmp_path / "calls.log"


def lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_each_host_runs_its_own_command_or_the_default_with_its_names_filled_in(
        tmp_path: Path, recorder: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    record, log = recorder
    monkeypatch.setenv("GREENSWARM_TOKEN", "secret-of-the-manager")
    path = command_file(tmp_path, f"""
timeout_s = 10
[defaults]
power_on = "{record} {log} wakeonlan-default {{name}} {{address}}"
power_off = ["{record}", "{log}", "ssh", "root@{{address}}", "systemctl poweroff"]
[hosts.node1]
power_on = "{record} {log} ipmitool -H {{name}}-bmc chassis power on"
""")
    backend = make_backend(PowerBackendSettings(BackendKind.COMMAND, commands_file=path))
    assert backend.switches
    on1 = backend.switch_on(NODE1)
    on2 = backend.switch_on(NODE2)
    off2 = backend.switch_off(NODE2)
    calls = lines(log)
    assert [c.split(" | ")[0] for c in calls] == [
        "argv [ipmitool] [-H] [node1-bmc] [chassis] [power] [on]",
        "argv [wakeonlan-default] [node2] [10.0.0.12]",
        "argv [ssh] [root@10.0.0.12] [systemctl poweroff]",
    ]
    assert [c.split(" | ")[1] for c in calls] == [
        "env power_on k3x9node1id node1 10.0.0.11",
        "env power_on p0q7node2id node2 10.0.0.12",
        "env power_off p0q7node2id node2 10.0.0.12",
    ]
    assert all(c.split(" | ")[2] == "token unset" for c in calls)  # no token leaks
    for result in (on1, on2, off2):
        assert result.ok and result.switched and result.exit_status == 0
    assert (on1.op, on1.host, on1.output) == (PowerOp.ON, "node1", "done for node1\n")
    assert "exited with 0" in off2.detail and off2.to_json()["op"] == "power_off"


def test_a_command_is_timed_and_the_calls_are_one_after_the_other(
        tmp_path: Path, recorder: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    record, log = recorder
    pause = script(tmp_path, "pause.sh", f"#!/bin/sh\nPAUSE=0.3 exec {record} \"$@\"\n")
    backend = make_backend(PowerBackendSettings(BackendKind.COMMAND, commands_file=command_file(
        tmp_path, f'[defaults]\npower_on = "{pause} {log} on {{name}}"\n')))
    first = backend.switch_on(NODE1)
    second = backend.switch_on(NODE2)
    spans = [(float(c.split("start ")[1].split()[0]), float(c.split("end ")[1]))
             for c in lines(log)]
    assert all(end - start >= 0.3 for start, end in spans)
    assert spans[0][1] <= spans[1][0]  # the second started after the first ended
    assert first.duration_s >= 0.3 and second.duration_s >= 0.3
    assert first.steps[0][0] == "ran"


def test_a_failing_command_raises_with_its_exit_status_and_output(tmp_path: Path) -> None:
    fail = script(tmp_path, "fail.sh", "#!/bin/sh\necho 'BMC unreachable' >&2\nexit 3\n")
    backend = make_backend(PowerBackendSettings(BackendKind.COMMAND, commands_file=command_file(
        tmp_path, f'[defaults]\npower_off = "{fail} --host {{name}}"\n')))
    with pytest.raises(PowerSwitchError) as info:
        backend.switch_off(NODE1)
    result = info.value.result
    assert (result.ok, result.switched, result.exit_status) == (False, False, 3)
    assert result.output == "BMC unreachable\n"
    assert "exited with 3" in str(info.value) and "node1" in str(info.value)


def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    hang = script(tmp_path, "hang.sh", f"#!/bin/sh\nsleep 30 &\necho $! > {pids}\nwait\n")
    backend = make_backend(PowerBackendSettings(BackendKind.COMMAND, commands_file=command_file(
        tmp_path, f'timeout_s = 0.5\n[defaults]\npower_on = "{hang}"\n')))
    started = time.monotonic()
    with pytest.raises(PowerSwitchError) as info:
        backend.switch_on(NODE1)
    assert time.monotonic() - started < 5.0
    result = info.value.result
    assert result.exit_status is None and "timed out after" in result.detail
    child = int(pids.read_text())
    for _ in range(50):  # the killed sleep is reaped by init shortly
        if not Path(f"/proc/{child}").exists() or "Z" in Path(
                f"/proc/{child}/stat").read_text().rsplit(")", 1)[-1].split()[:1]:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the command's child {child} survived its timeout")


def test_a_command_that_cannot_run_says_why(tmp_path: Path) -> None:
    backend = make_backend(PowerBackendSettings(BackendKind.COMMAND, commands_file=command_file(
        tmp_path, '[defaults]\npower_on = "/nonexistent/wakeonlan aa:bb"\n')))
    with pytest.raises(PowerSwitchError) as info:
        backend.switch_on(NODE1)
    assert "could not run" in info.value.result.detail


@pytest.mark.parametrize(("output", "code", "state", "ok"), [
    ("Chassis Power is on", 0, PowerState.ON, True),
    ("Chassis Power is off", 0, PowerState.OFF, True),
    ("no idea", 0, None, True),
    ("Chassis Power is on", 1, None, False),  # a failed status is unknown, not an error
])
def test_a_status_command_says_on_or_off(tmp_path: Path, output: str, code: int,
                                         state: PowerState | None, ok: bool) -> None:
    status = script(tmp_path, "status.sh", f"#!/bin/sh\necho '{output}'\nexit {code}\n")
    backend = make_backend(PowerBackendSettings(BackendKind.COMMAND, commands_file=command_file(
        tmp_path, f'[hosts."10.0.0.11"]\nstatus = "{status}"\n')))  # found by its address
    result = backend.status(NODE1)
    assert (result.state, result.ok, result.exit_status, result.switched) == (
        state, ok, code, False)
    assert backend.status(NODE2).state is None  # no status command: unknown


def test_a_host_without_a_command_is_a_clear_error(tmp_path: Path) -> None:
    backend = make_backend(PowerBackendSettings(BackendKind.COMMAND, commands_file=command_file(
        tmp_path, '[hosts.node1]\npower_on = "true"\n')))
    with pytest.raises(ValidationError) as info:
        backend.switch_on(NODE2)
    assert info.value.field == "GREENSWARM_POWER_COMMANDS_FILE"
    assert "no power_on command for host node2" in info.value.message


@pytest.mark.parametrize(("text", "says"), [
    ("power_on = 'x'\n[defaults", "not valid TOML"),
    ("colour = 'red'\n[defaults]\npower_on = 'x'\n", "unknown key(s) colour"),
    ("[defaults]\nreboot = 'x'\n", "defaults: unknown key(s) reboot"),
    ("[defaults]\npower_on = ''\n", "defaults.power_on: is empty"),
    ("[defaults]\npower_on = 3\n", "defaults.power_on: must be a string or a list"),
    ("[hosts]\nnode1 = 'x'\n", "hosts.node1: must be a table"),
    ("[defaults]\npower_on = 'a \"b'\n", "cannot split"),
    ("timeout_s = -1\n[defaults]\npower_on = 'x'\n", "timeout_s: must be a number"),
    ("", "no commands"),
])
def test_a_bad_command_file_is_refused_with_the_setting_the_file_and_the_place(
        tmp_path: Path, text: str, says: str) -> None:
    path = command_file(tmp_path, text)
    with pytest.raises(ValidationError) as info:
        CommandFile.load(path, 10.0)
    assert info.value.field == "GREENSWARM_POWER_COMMANDS_FILE"
    assert path in info.value.message and says in info.value.message


def test_a_missing_command_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as info:
        make_backend(PowerBackendSettings(BackendKind.COMMAND,
                                          commands_file=str(tmp_path / "nope.toml")))
    assert "cannot read it" in info.value.message


def test_advise_and_none_switch_nothing() -> None:
    advise = make_backend(PowerBackendSettings())
    assert isinstance(advise, NoBackend) and not advise.switches
    said = advise.switch_off(NODE1)
    assert (said.ok, said.switched) == (True, False)
    assert said.detail == "advise: would switch off node1 (nothing is switched)"
    quiet = make_backend(PowerBackendSettings(BackendKind.NONE)).switch_on(NODE1)
    assert not quiet.switched and "none" in quiet.detail


def test_settings_from_the_environment() -> None:
    assert backend_settings_from_env({}).backend is BackendKind.ADVISE
    loaded = backend_settings_from_env({"GREENSWARM_POWER_BACKEND": "lab",
                                        "GREENSWARM_TOKEN": "shared",
                                        "GREENSWARM_POWER_LAB_URL": "http://127.0.0.1:9"})
    assert (loaded.backend, loaded.lab_token, loaded.lab_url) == (
        BackendKind.LAB, "shared", "http://127.0.0.1:9")
    for environ, field in (
        ({"GREENSWARM_POWER_BACKEND": "ipmi"}, "GREENSWARM_POWER_BACKEND"),
        ({"GREENSWARM_POWER_BACKEND": "command"}, "GREENSWARM_POWER_COMMANDS_FILE"),
        ({"GREENSWARM_POWER_BACKEND": "lab"}, "GREENSWARM_POWER_LAB_TOKEN"),
        ({"GREENSWARM_POWER_COMMAND_TIMEOUT_S": "0"}, "GREENSWARM_POWER_COMMAND_TIMEOUT_S"),
        ({"GREENSWARM_POWER_BACKEND": "lab", "GREENSWARM_TOKEN": "t",
          "GREENSWARM_POWER_LAB_URL": "ftp://x"}, "GREENSWARM_POWER_LAB_URL"),
    ):
        with pytest.raises(ValidationError) as info:
            backend_settings_from_env(environ)
        assert info.value.field == field, environ


def test_the_command_backend_runs_no_shell(tmp_path: Path, recorder: tuple[str, Path]) -> None:
    record, log = recorder
    backend = CommandBackend(CommandFile.parse("inline", {"defaults": {
        "power_on": [record, str(log), "$(touch pwned)", "{name};id"]}}, 5.0))
    backend.switch_on(NODE1)
    assert lines(log)[0].split(" | ")[0] == "argv [$(touch pwned)] [node1;id]"
    assert not Path("pwned").exists() and not (Path(os.getcwd()) / "pwned").exists()
