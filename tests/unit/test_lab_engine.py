"""The lab's main engine after a reboot (lab/engine.py).

A reboot leaves the main engine in the lab's own swarm, advertised on the lab's bridge address,
which no longer exists until the lab is up again: Docker reports the swarm as 'error' and the
lab refused to start until the user ran `docker swarm leave --force` by hand. Rebooting cannot
be done in a test, so a stand-in engine answers ``info()`` as a real one did on this machine
after a restart (the error text is Docker's own); it records what the lab asks of it.
"""

from __future__ import annotations

from typing import Any

import pytest

from lab import engine
from lab.errors import LabConflictError

GATEWAY = "10.123.0.1"
REBOOT_ERROR = (f"manager stopped: failed to listen on remote API address: listen tcp "
                f"{GATEWAY}:2377: bind: cannot assign requested address")


class _Swarm:
    def __init__(self, owner: _Engine) -> None:
        self.owner = owner

    def leave(self, force: bool = False) -> None:
        self.owner.calls.append(("leave", force))
        self.owner.state, self.owner.error = "inactive", ""

    def init(self, advertise_addr: str, listen_addr: str) -> None:
        self.owner.calls.append(("init", advertise_addr))
        self.owner.state = "active"


class _Engine:
    """Stands in for a Docker engine whose swarm broke across a reboot (see the docstring)."""

    def __init__(self, state: str, error: str) -> None:
        self.state, self.error = state, error
        self.calls: list[tuple[str, Any]] = []
        self.swarm = _Swarm(self)

    def info(self) -> dict[str, Any]:
        return {"Swarm": {"LocalNodeState": self.state, "Error": self.error, "NodeID": "",
                          "NodeAddr": GATEWAY if self.state == "active" else "",
                          "ControlAvailable": self.state == "active"}}


def test_the_labs_own_swarm_broken_by_a_reboot_is_left_and_made_again() -> None:
    cli = _Engine("error", REBOOT_ERROR)
    assert engine.check_manager(cli, GATEWAY).local_state == "error"  # not refused
    assert engine.ensure_manager(cli, GATEWAY) is True
    assert cli.calls == [("leave", True), ("init", GATEWAY)]


@pytest.mark.parametrize("error", [
    REBOOT_ERROR.replace(GATEWAY, "192.168.7.2"),  # somebody else's swarm
    "",  # broken for no reason it gives
])
def test_any_other_broken_swarm_is_still_refused_and_named(error: str) -> None:
    cli = _Engine("error", error)
    with pytest.raises(LabConflictError) as caught:
        engine.ensure_manager(cli, GATEWAY)
    assert "'error'" in str(caught.value) and error in str(caught.value)
    assert cli.calls == []  # nothing changed
