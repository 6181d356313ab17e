"""How long a write waits for the replicas (DESIGN 13): in full while they keep up; once a
full wait came back short (the replica died with its node), only a look, with a full wait
again every SHORT_RECHECK_S. Found on the lab: with the replica's node stopped, every write
waited 500 ms, several a submission, and under a stream of submissions the leader stopped
answering at all (tests/e2e/test_ha_chaos_lab.py, the leader's node's engine stopped)."""

from __future__ import annotations

from host_registry.connection import (
    SHORT_RECHECK_S,
    SHORT_WAIT_MS,
    WAIT_TIMEOUT_MS,
    ReplicaWait,
)


class Clock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s


def test_full_waits_while_the_replicas_keep_up() -> None:
    wait = ReplicaWait(1, clock=Clock())
    for _ in range(3):
        assert wait.timeout_ms() == WAIT_TIMEOUT_MS
        wait.saw(1, WAIT_TIMEOUT_MS)
    assert not wait.short


def test_short_replicas_cost_one_full_wait_per_recheck_period() -> None:
    clock = Clock()
    wait = ReplicaWait(1, clock=clock)
    wait.saw(0, wait.timeout_ms())  # the replica is gone: this one waited in full
    assert wait.short
    full = 0
    for _ in range(100):  # 100 writes over 10 s
        timeout_ms = wait.timeout_ms()
        full += timeout_ms == WAIT_TIMEOUT_MS
        assert timeout_ms in (WAIT_TIMEOUT_MS, SHORT_WAIT_MS)
        wait.saw(0, timeout_ms)
        clock.now_s += 0.1
    assert 1 <= full <= 10 / SHORT_RECHECK_S  # instead of 100 full waits: 50 s of waiting


def test_a_replica_back_is_noticed_by_the_next_full_wait_or_a_quick_ack() -> None:
    clock = Clock()
    wait = ReplicaWait(1, clock=clock)
    wait.saw(0, WAIT_TIMEOUT_MS)
    wait.saw(1, SHORT_WAIT_MS)  # acknowledged even within the short look
    assert not wait.short and wait.timeout_ms() == WAIT_TIMEOUT_MS
    wait.saw(0, WAIT_TIMEOUT_MS)
    clock.now_s += SHORT_RECHECK_S
    assert wait.timeout_ms() == WAIT_TIMEOUT_MS
    wait.saw(1, WAIT_TIMEOUT_MS)
    assert not wait.short


def test_a_short_look_never_starts_the_short_mode() -> None:
    wait = ReplicaWait(2, clock=Clock())
    wait.saw(1, SHORT_WAIT_MS)
    assert not wait.short and wait.timeout_ms() == WAIT_TIMEOUT_MS
