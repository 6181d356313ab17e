"""Redis replicated (DESIGN 13): the store finds the primary through real Sentinels, and when
the primary's process is killed it carries on with the promoted replica, nothing acknowledged
lost. Real redis-server and redis-sentinel processes (tests/support/sentinels.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from domain.errors import UnavailableError, ValidationError
from domain.model import HostSpec
from host_registry.connection import RedisEndpoint
from host_registry.redis_store import RedisStore
from tests.support.sentinels import ReplicatedRedis, replicated_redis

pytestmark = pytest.mark.redis


@pytest.fixture
def cluster() -> Iterator[ReplicatedRedis]:
    with replicated_redis(replicas=1, sentinels=3) as replicated:
        yield replicated


def _add(store: RedisStore, number: int) -> None:
    store.add_host(HostSpec(f"h{number:03d}", 1024, 2**30))


def test_store_follows_the_primary_through_a_failover(cluster: ReplicatedRedis) -> None:
    # the URL's host and port are not used with Sentinels: a server that does not exist
    endpoint = RedisEndpoint("redis://127.0.0.1:1/0", cluster.sentinels, cluster.master,
                             socket_timeout_s=2.0, wait_replicas=1)
    store = RedisStore.connect(endpoint, prefix="ha")
    try:
        old_primary, replica = cluster.ports
        acknowledged = []
        for number in range(40):
            _add(store, number)
            acknowledged.append(number)
        cluster.kill(old_primary)  # SIGKILL: no goodbye, as when the machine dies
        killed_at = time.monotonic()
        failures, back_s = 0, None
        number = len(acknowledged)
        while len(acknowledged) < 60 and time.monotonic() - killed_at < 60.0:
            try:
                _add(store, number)
            except UnavailableError:
                failures += 1
                time.sleep(0.2)
                continue
            acknowledged.append(number)
            number += 1
            back_s = back_s or time.monotonic() - killed_at
        # (each write after it waits WAIT_TIMEOUT_MS for the replica that is gone)
        print(f"failover: writes back {back_s} s after the kill, {failures} refused meanwhile")
        assert len(acknowledged) == 60, "the store never wrote to the promoted replica"
        assert cluster.primary_port() == replica
        stored = {view.id for view in store.all_hosts()}
        assert stored == {f"h{n:03d}" for n in acknowledged}
    finally:
        store.close()


def test_bad_sentinel_settings_name_the_setting() -> None:
    with pytest.raises(ValidationError) as bad:
        RedisEndpoint(sentinels="127.0.0.1:26379,nonsense").validate()
    assert "GREENSWARM_REDIS_SENTINELS" in str(bad.value)
    with pytest.raises(ValidationError) as empty:
        RedisEndpoint(sentinels="127.0.0.1:26379", master=" ").validate()
    assert "GREENSWARM_REDIS_MASTER" in str(empty.value)


def test_the_manager_reads_the_sentinels_from_its_environment() -> None:
    from manager.settings import ManagerSettings

    settings = ManagerSettings.from_env({"GREENSWARM_REDIS_SENTINELS": "10.0.0.1:26379,b:1",
                                         "GREENSWARM_REDIS_MASTER": "main"})
    assert settings.redis_endpoint.sentinel_addresses() == [("10.0.0.1", 26379), ("b", 1)]
    assert settings.redis_endpoint.master == "main"
    with pytest.raises(ValidationError):
        ManagerSettings.from_env({"GREENSWARM_REDIS_SENTINELS": "10.0.0.1"})


def test_an_answered_record_is_on_the_replica(cluster: ReplicatedRedis,
                                              caplog: pytest.LogCaptureFixture) -> None:
    """GREENSWARM_REDIS_WAIT_REPLICAS: a record write returns once the replica holds it; a
    replica that does not answer (paused for real) makes it wait its limit and say so."""
    import os
    import signal

    import redis

    from manager.records import RequestRecords

    client = RedisEndpoint("redis://127.0.0.1:1/0", cluster.sentinels, cluster.master,
                           socket_timeout_s=2.0).connect()
    records = RequestRecords(client, "rep")
    records.replicate(1)
    spec = {"cpu_shares": 10, "memory": 8 * 2**20}
    replica = redis.Redis(port=cluster.ports[1], decode_responses=True)
    try:
        with caplog.at_level("WARNING", logger="manager.records"):
            records.create("kept", spec)
            assert replica.hget("rep:request:kept", "status") == "pending"  # already there
            assert not caplog.records
            os.kill(cluster.processes[cluster.ports[1]].pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                records.create("unreplicated", spec)
                waited_s = time.monotonic() - started
            finally:
                os.kill(cluster.processes[cluster.ports[1]].pid, signal.SIGCONT)
        assert waited_s >= 0.45, waited_s
        assert "reached 0 of 1 replicas" in caplog.text
    finally:
        replica.close()
        client.close()


def test_a_standby_leads_soon_after_the_primarys_machine_falls_silent(
        cluster: ReplicatedRedis) -> None:
    """The leader and the Redis primary on one machine that stops (the lab's chaos test: the
    engine of the leader's node stopped, the leader going first). A primary whose machine is
    gone answers nothing, not even a reset, so a standby's renewal on the connection it already
    had waits for the socket's timeout: with the registry's 5 s, the standby led 4-5 s after
    the failover and the lease's expiry (11-15 s from the fault on the lab). Its renewals give
    up within their own bound instead and find the promoted replica through the Sentinels.
    The silence is real: the primary's process is stopped (SIGSTOP), its sockets open."""
    import os
    import signal

    from manager.leadership import Leadership, lease_on

    endpoint = RedisEndpoint("redis://127.0.0.1:1/0", cluster.sentinels, cluster.master,
                             wait_replicas=1)  # the manager's own timeouts
    stores = [RedisStore.connect(endpoint, prefix="lease") for _ in range(2)]
    lease_s, renew_s = 5.0, 1.0  # the manager's defaults
    old, new = (lease_on(store, f"m{i}", f"http://m{i}", lease_s, renew_s, 1)
                for i, store in enumerate(stores))
    led_at: list[float] = []
    standby = Leadership(new, renew_s, lease_s, lambda token: led_at.append(time.monotonic()),
                         lambda: None)
    primary = cluster.processes[cluster.ports[0]]
    try:
        assert old.hold()[0]  # the leader's last renewal: it dies first, its lease runs on
        expires_at = time.monotonic() + lease_s
        standby.start()  # its connection to the primary is open and used every second
        assert not standby.is_leader
        time.sleep(3.0)
        os.kill(primary.pid, signal.SIGSTOP)
        silent_at = time.monotonic()
        promoted_at = None
        while not led_at and time.monotonic() - silent_at < 30.0:
            if promoted_at is None and cluster.primary_port() == cluster.ports[1]:
                promoted_at = time.monotonic()
            time.sleep(0.1)
        assert promoted_at is not None and led_at, "no failover, or the standby never led"
        late_s = led_at[0] - max(promoted_at, expires_at)
        print(f"promoted {promoted_at - silent_at:.1f} s after the silence, the lease expired "
              f"at {expires_at - silent_at:.1f} s, the standby led at "
              f"{led_at[0] - silent_at:.1f} s ({late_s:.1f} s after both)")
        # a renewal every renew_s, one that gives up on the silent primary, and the WAIT for
        # the replica that is gone (500 ms): within 3 s of both, never the socket's 5 s
        assert late_s <= 3.0, late_s
    finally:
        standby.stop()
        os.kill(primary.pid, signal.SIGCONT)
        cluster.kill(cluster.ports[0])
        for store in stores:
            store.close()
