"""Peering (DESIGN 12, federation/peers.py): the peers file, a peer's state, and the offload
choice a live manager takes from its own decision and its peers' adverts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domain.decision import Decision, Pass
from domain.energy import PowerModel
from domain.errors import ValidationError
from domain.regions import Region
from federation.offload import Advert, Room
from federation.peers import (
    OffloadMode,
    Peer,
    PeerState,
    PeerView,
    parse_peers,
    plan_offload,
    request_bounds,
    wants_offload,
)
from manager.settings import ManagerSettings
from tests.builders import req

WHERE = "GREENSWARM_PEERS_FILE"
GIB = 1024**3
GOOD = {"name": "b", "url": "http://10.0.0.2:8080/", "token": " t0k ", "latency_ms": 5,
        "bandwidth_mbit": 1000}


# ------------------------------------------------------------------ the peers file


def test_the_peers_file_gives_each_peer_with_its_link() -> None:
    peers = parse_peers(json.dumps([GOOD, {**GOOD, "name": "c", "url": "https://c.example",
                                           "latency_ms": 0, "bandwidth_mbit": 0.5}]),
                        WHERE, home="a")
    assert peers == (Peer("b", "http://10.0.0.2:8080", "t0k", 5.0, 1000.0),
                     Peer("c", "https://c.example", "t0k", 0.0, 0.5))
    assert "token" not in peers[0].to_json()
    assert parse_peers("[]", WHERE, home="a") == ()


@pytest.mark.parametrize(("text", "field", "says"), [
    ("{", WHERE, "is not JSON"),
    ('{"name": "b"}', WHERE, "a JSON list"),
    ("[1]", f"{WHERE}[0]", "must be an object"),
    (json.dumps([{**GOOD, "colour": "red"}]), f"{WHERE}[0].colour", "unknown field"),
    (json.dumps([{k: v for k, v in GOOD.items() if k != "token"}]), f"{WHERE}[0].token",
     "is required"),
    (json.dumps([{**GOOD, "name": "a"}]), f"{WHERE}[0].name", "this cluster's own name"),
    (json.dumps([GOOD, GOOD]), f"{WHERE}[1].name", "twice"),
    (json.dumps([{**GOOD, "name": "b c"}]), f"{WHERE}[0].name", "letters"),
    (json.dumps([{**GOOD, "url": "ftp://b"}]), f"{WHERE}[0].url", "http"),
    (json.dumps([{**GOOD, "url": "http://"}]), f"{WHERE}[0].url", "http"),
    (json.dumps([{**GOOD, "url": 8080}]), f"{WHERE}[0].url", "http"),
    (json.dumps([{**GOOD, "token": "  "}]), f"{WHERE}[0].token", "bearer token"),
    (json.dumps([{**GOOD, "latency_ms": -1}]), f"{WHERE}[0].latency_ms", ">= 0"),
    (json.dumps([{**GOOD, "latency_ms": "5"}]), f"{WHERE}[0].latency_ms", ">= 0"),
    (json.dumps([{**GOOD, "bandwidth_mbit": 0}]), f"{WHERE}[0].bandwidth_mbit", "> 0"),
    (json.dumps([{**GOOD, "bandwidth_mbit": True}]), f"{WHERE}[0].bandwidth_mbit", "> 0"),
])
def test_a_wrong_peers_file_is_refused_naming_the_entry(text: str, field: str, says: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_peers(text, WHERE, home="a")
    assert caught.value.field == field and says in caught.value.message


def test_the_manager_refuses_bad_federation_settings_at_start_by_name(tmp_path: Path) -> None:
    env = {"GREENSWARM_TOKEN": "x", "GREENSWARM_FEDERATION_NAME": "a"}
    peers = tmp_path / "peers.json"
    peers.write_text(json.dumps([GOOD]))
    settings = ManagerSettings.from_env({**env, WHERE: str(peers), "GREENSWARM_OFFLOAD": "kills"})
    assert settings.offload is OffloadMode.KILLS and [p.name for p in settings.peers()] == ["b"]
    assert ManagerSettings.from_env({"GREENSWARM_TOKEN": "x"}).offload is OffloadMode.OFF
    cases = [
        ({WHERE: str(tmp_path / "missing.json")}, WHERE),
        ({WHERE: str(peers), "GREENSWARM_FEDERATION_NAME": "b"}, f"{WHERE}[0].name"),
        ({"GREENSWARM_FEDERATION_NAME": "a/b"}, "GREENSWARM_FEDERATION_NAME"),
        ({"GREENSWARM_OFFLOAD": "sometimes"}, "GREENSWARM_OFFLOAD"),
        ({"GREENSWARM_OFFLOAD": "unplaced"}, "GREENSWARM_OFFLOAD"),  # no peer to offload to
        ({WHERE: str(peers), "GREENSWARM_OFFLOAD": "unplaced", "GREENSWARM_POLICY": "swarm"},
         "GREENSWARM_OFFLOAD"),
        ({"GREENSWARM_PEER_REFRESH_S": "0"}, "GREENSWARM_PEER_REFRESH_S"),
        ({"GREENSWARM_PEER_TIMEOUT_S": "61"}, "GREENSWARM_PEER_TIMEOUT_S"),
    ]
    for extra, field in cases:
        with pytest.raises(ValidationError) as caught:
            ManagerSettings.from_env({**env, **extra})
        assert caught.value.field == field, extra


# ------------------------------------------------------------------ a peer's state


def test_a_peer_is_up_with_an_advert_down_with_why_and_stale_after_a_period() -> None:
    view = PeerView(Peer("b", "http://b", "t", 1.0, 10.0))
    assert view.state is PeerState.UNKNOWN and view.stale(0.0, 10.0)
    up = view.refreshed(advert("b"), 100.0)
    assert (up.state, up.refreshed_at, up.error) == (PeerState.UP, 100.0, None)
    assert not up.stale(109.9, 10.0) and up.stale(110.0, 10.0)
    down = up.failed("connection refused", 120.0)
    assert (down.state, down.error, down.refreshed_at) == (PeerState.DOWN, "connection refused",
                                                          100.0)
    shown = down.to_json()
    assert shown["state"] == "down" and shown["error"] == "connection refused"
    assert shown["advert"]["hosts"] == 1 and "token" not in shown
    assert down.refreshed(advert("b"), 130.0).state is PeerState.UP


# ------------------------------------------------------------------ the offload choice


def advert(name: str, load: float = 0.5, rooms: tuple[Room, ...] = ((4096, 8 * GIB),)) -> Advert:
    return Advert(
        cluster=name, hosts=1, cpu_capacity=8192, memory_capacity=16 * GIB, cpu_allocated=0,
        memory_allocated=0, cpu_util=load, memory_util=0.0,
        hosts_by_region=((Region.LEE, 1), (Region.DEE, 0), (Region.EED, 0)),
        hosts_by_class=((3, 1),), empty_hosts=0, rooms=(rooms,) * 4, empty_rooms=(),
        busy_cpu_load=load, busy_host_cpu=8192, power=PowerModel.named("hp-ml110-g4"),
    )


def peer(name: str, ad: Advert | None = None, error: str | None = None) -> PeerView:
    view = PeerView(Peer(name, f"http://{name}", "t", 1.0, 100.0))
    if ad is not None:
        view = view.refreshed(ad, 1.0)
    return view.failed(error, 2.0) if error else view


REQUEST = req(2, cpu=1024, mem=GIB)
REFUSED = Decision.refused(REQUEST, "no host")
SIMPLE = Decision(REQUEST, True, host="h", pass_=Pass.SIMPLE)
KILLING = Decision(REQUEST, True, host="h", pass_=Pass.KILL, kills=("v",))


@pytest.mark.parametrize(("decision", "mode", "forwarded_from", "waits", "offload"), [
    (REFUSED, OffloadMode.OFF, None, False, False),  # off: a single cluster as before
    (REFUSED, OffloadMode.UNPLACED, None, False, True),
    (REFUSED, OffloadMode.KILLS, None, False, True),
    (SIMPLE, OffloadMode.UNPLACED, None, False, False),
    (SIMPLE, OffloadMode.KILLS, None, False, False),
    (KILLING, OffloadMode.UNPLACED, None, False, False),
    (KILLING, OffloadMode.KILLS, None, False, True),
    (REFUSED, OffloadMode.UNPLACED, None, True, False),  # it asked to wait in the queue
    (REFUSED, OffloadMode.UNPLACED, "a", False, False),  # forwarded here: never again
    (KILLING, OffloadMode.KILLS, "a", False, False),
])
def test_what_goes_to_a_peer_given_the_home_decision(
    decision: Decision, mode: OffloadMode, forwarded_from: str | None, waits: bool,
    offload: bool,
) -> None:
    assert wants_offload(decision, mode, forwarded_from=forwarded_from, waits=waits) is offload


def test_the_up_peers_that_fit_are_tried_cheapest_first() -> None:
    # 1 core of 8 at 60 %: the table climbs 3 W (106 to 109); at 70 %, 4.5 W (108 to 112.5)
    views = [peer("d", advert("d", 0.6)), peer("c", advert("c", 0.7)),
             peer("b", advert("b", 0.6)), peer("small", advert("small", 0.0, ((512, GIB),))),
             peer("e", advert("e", 0.0), error="timed out"), peer("f")]
    plan = plan_offload(REQUEST, views, home="a")
    assert plan.peers == ("b", "d", "c")  # b and d cost the same: by name
    assert plan.down == (("e", "timed out"), ("f", "not asked yet"))
    assert plan_offload(REQUEST, views, home="b").peers == ("d", "c")  # never itself


def test_why_no_peer_takes_it_names_the_peers_down() -> None:
    small = peer("small", advert("small", 0.0, ((512, GIB),)))
    down = peer("b", advert("b"), error="connection refused")
    assert plan_offload(REQUEST, [small], home="a").why_none() == "no peer has room for it"
    only_down = plan_offload(REQUEST, [down], home="a")
    assert only_down.peers == () and only_down.why_none() == "peer b is down: connection refused"
    both = plan_offload(REQUEST, [small, down], home="a").why_none()
    assert both == "no peer that is up has room for it; peer b is down: connection refused"


def test_a_request_larger_than_every_local_host_is_bounded_by_the_peers_with_offloading() -> None:
    """DESIGN 12: a request no local host can ever take may run at a peer (a bigger machine
    next door). Local hosts of 2048 shares and 4 GiB; up peer b advertises a room of 4096
    shares and 8 GiB; peer c is down (its last advert, of 16384 shares, is not used)."""
    local = [(2048, 4 * GIB), (1024, 8 * GIB)]
    peers = [peer("b", advert("b")), peer("c", advert("c", rooms=((16384, 64 * GIB),)),
                                           error="connection refused")]
    assert request_bounds(local, peers, with_peers=True) == (4096, 8 * GIB)
    assert request_bounds(local, peers, with_peers=False) == (2048, 8 * GIB)
    assert request_bounds(local, [], with_peers=True) == (2048, 8 * GIB)
