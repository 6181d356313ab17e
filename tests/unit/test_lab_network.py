"""`lab down` and a veth the kernel removes by itself (lab/network.py).

Deleting a node's namespace takes its veth pair with it, a moment later: `lab down` saw the
host end still there, ran `ip link del` on it, and failed with "Cannot find device" (seen on
this machine after a live replay). That moment cannot be produced on demand, so the check that
saw the link is a stand-in answering True once; `ip link del` itself runs for real, on a link
that does not exist."""

from __future__ import annotations

import os
import shutil

import pytest

from lab import network
from lab.errors import CommandFailedError

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None, reason="needs root and iproute2")

GONE = "gstestgone0"


def test_a_link_that_vanishes_after_the_check_counts_as_deleted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not network.link_exists(GONE)
    answers = iter([True])  # there at the check; gone by the delete (and after)
    monkeypatch.setattr(network, "link_exists",
                        lambda name, netns=None: next(answers, False))
    assert network.delete_link(GONE) is True


def test_a_link_that_stays_and_cannot_be_deleted_is_still_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(network, "link_exists", lambda name, netns=None: True)
    with pytest.raises(CommandFailedError):
        network.delete_link(GONE)
