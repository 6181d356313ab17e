"""Offloading (DESIGN 12, federation/offload.py): adverts, marginal prices, the peer chosen.
Prices by hand with the HP ProLiant ML110 G4 table (86, 89.4, 92.6, 96, 99.5, 102, 106, 108,
112, 114, 117 W) and 0.392 W per GiB in use."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from domain.classes import MEMORY_FLOOR, after_cut
from domain.decision import Decision, Pass
from domain.energy import PowerModel
from domain.errors import ValidationError
from domain.regions import Region
from federation.offload import (
    Advert,
    OffloadWhen,
    Room,
    advertise,
    choose_peer,
    marginal_watts,
    pareto_front,
    price,
    should_offload,
)
from tests.builders import H, T, build, req
from workloads.cluster import MIB

GIB = 1024**3
HOST = (8192, 12 * GIB)  # the thesis host: 8 cores, 12 GiB
G4 = PowerModel.named("hp-ml110-g4")


def advert(
    name: str,
    load: float = 0.0,
    rooms: tuple[Room, ...] = (HOST,),
    empty: tuple[Room, ...] = (),
    wake_counts_idle: bool = True,
) -> Advert:
    """A cluster of thesis hosts whose busy hosts run at ``load`` and offer ``rooms`` to every
    class; ``empty``: its empty hosts."""
    return Advert(
        cluster=name, hosts=5, cpu_capacity=5 * HOST[0], memory_capacity=5 * HOST[1],
        cpu_allocated=0, memory_allocated=0, cpu_util=load, memory_util=0.0,
        hosts_by_region=((Region.LEE, 5), (Region.DEE, 0), (Region.EED, 0)),
        hosts_by_class=((3, 5 - len(empty)),), empty_hosts=len(empty),
        rooms=(rooms,) * 4, empty_rooms=empty, busy_cpu_load=load,
        busy_host_cpu=HOST[0] if rooms else 0, power=G4, wake_counts_idle=wake_counts_idle,
    )


# ------------------------------------------------------------------ prices


def test_marginal_watts_on_a_busy_host_climb_the_table_from_the_load() -> None:
    # 2 cores on an 8-core host at 25 %: table(0.50) - table(0.25) = 102 - 94.3 = 7.7 W,
    # plus 1 GiB x 0.392 W: 8.092 W, 4.046 W per core.
    request = req(3, cpu=2048, mem=GIB)
    assert marginal_watts(advert("a", 0.25), request) == pytest.approx(8.092)
    assert price(advert("a", 0.25), request) == pytest.approx(4.046)
    # at 50 %: table(0.75) - table(0.50) = 110 - 102 = 8 W: 8.392 W, 4.196 W per core
    assert price(advert("b", 0.50), request) == pytest.approx(4.196)
    # at 60 %: table(0.85) - table(0.60) = 113 - 106 = 7 W: 7.392 W, 3.696 W per core
    assert price(advert("c", 0.60), request) == pytest.approx(3.696)


def test_waking_an_empty_host_costs_its_idle_watts_unless_told_otherwise() -> None:
    request = req(3, cpu=2048, mem=GIB)
    # table(0.25) = 94.3 W from nothing, plus 0.392 W: 94.692 W, 47.346 W per core
    assert price(advert("a", rooms=(), empty=(HOST,)), request) == pytest.approx(47.346)
    # the host counted as on anyway: 94.3 - 86 + 0.392 = 8.692 W, 4.346 W per core
    on = advert("a", rooms=(), empty=(HOST,), wake_counts_idle=False)
    assert price(on, request) == pytest.approx(4.346)


def test_a_busy_host_with_room_is_used_before_an_empty_one_is_woken() -> None:
    request = req(3, cpu=2048, mem=GIB)
    assert price(advert("a", 0.25, empty=(HOST,)), request) == pytest.approx(4.046)
    # too big for the busy room: the empty host it is
    small = advert("a", 0.25, rooms=((1024, GIB),), empty=(HOST,))
    assert price(small, request) == pytest.approx(47.346)


def test_a_saturated_cluster_costs_only_the_table_left_above_its_load() -> None:
    # 95 % + 25 % is clamped at 100 %: 117 - 115.5 = 1.5 W, plus 0.392: 0.946 W per core.
    assert price(advert("a", 0.95), req(3, cpu=2048, mem=GIB)) == pytest.approx(0.946)


def test_no_price_where_the_request_does_not_fit() -> None:
    request = req(3, cpu=2048, mem=GIB)
    assert price(advert("a", 0.25, rooms=((1024, 16 * GIB),)), request) is None
    assert marginal_watts(advert("a", rooms=(), empty=((2048, GIB // 2),)), request) is None


# ------------------------------------------------------------------ the peer chosen


def test_choose_peer_takes_the_lowest_marginal_price() -> None:
    request = req(3, cpu=2048, mem=GIB)
    adverts = [advert("a", 0.25), advert("b", 0.60), advert("c", rooms=(), empty=(HOST,))]
    assert choose_peer(request, adverts) == "b"  # 3.696 < 4.046 < 47.346
    full_b = advert("b", 0.60, rooms=((1024, GIB),))
    assert choose_peer(request, [adverts[0], full_b, adverts[2]]) == "a"
    assert choose_peer(request, [full_b, adverts[2]]) == "c"


def test_choose_peer_breaks_ties_by_name_and_leaves_the_home_out() -> None:
    request = req(2, cpu=1024, mem=GIB)
    assert choose_peer(request, [advert("y", 0.3), advert("x", 0.3)]) == "x"
    assert choose_peer(request, [advert("y", 0.3), advert("x", 0.3)], home="x") == "y"
    # the home is left out even when it is the cheapest
    assert choose_peer(request, [advert("h", 0.5), advert("p", 0.1)], home="h") == "p"


def test_choose_peer_says_none_when_no_advert_has_room() -> None:
    request = req(1, cpu=4096, mem=8 * GIB)
    tight = advert("a", 0.2, rooms=((8192, 4 * GIB), (2048, 12 * GIB)))
    assert choose_peer(request, [tight]) is None
    assert choose_peer(request, []) is None


def test_the_room_checked_is_the_one_of_the_requests_class() -> None:
    rooms: tuple[tuple[Room, ...], ...] = (((1000, 1000),), (), (), ((4000, 4000),))
    cluster = Advert(
        cluster="a", hosts=1, cpu_capacity=4000, memory_capacity=4000, cpu_allocated=3000,
        memory_allocated=3000, cpu_util=0.5, memory_util=0.5,
        hosts_by_region=((Region.DEE, 1),), hosts_by_class=((4, 1),), empty_hosts=0,
        rooms=rooms, empty_rooms=(), busy_cpu_load=0.5, busy_host_cpu=4000, power=G4,
    )
    assert cluster.fits(req(4, cpu=2000, mem=2000))
    assert not cluster.fits(req(1, cpu=2000, mem=2000))
    assert cluster.fits(req(1, cpu=1000, mem=1000))
    assert not cluster.fits(req(2, cpu=10, mem=10))
    assert choose_peer(req(1, cpu=2000, mem=2000), [cluster]) is None


def test_an_advert_needs_one_room_front_per_class() -> None:
    with pytest.raises(ValidationError, match="one front per class"):
        Advert("a", 1, 1, 1, 0, 0, 0.0, 0.0, (), (), 0, ((),), (), 0.0, 0, G4)


# ------------------------------------------------------------------ adverts from a store


def test_pareto_front_keeps_the_rooms_no_other_covers() -> None:
    assert pareto_front([(366, 1116), (600, 900), (200, 200), (600, 900), (100, 1116)]) == (
        (600, 900), (366, 1116))
    assert pareto_front([]) == ()


def test_advertise_reads_books_regions_and_rooms_from_the_store() -> None:
    # Hosts of 1200 shares and 1200 MiB (class limits 1200, 1400, 1600, 1800); M = one MiB.
    # a: a class-2 task of 1000/100M (LEE). For class 1 the host class drops to 1 and the task
    #    may be cut by t(2) - t(1) = 1/6: it keeps ceil(5/6 x 1000) = 834 and ceil(5/6 x 100M)
    #    freeing 166 and the rest: room (1200 - 834, 1200M - ceil(5/6 x 100M)).
    #    Class 2: the host stays class 2, nothing to cut: (1400 - 1000, min(1200M, 1400M -
    #    100M)) = (400, 1200M). Classes 3 and 4 cut only themselves on this stricter host, by
    #    t(3) - t(2) = 1/6 and t(4) - t(2) = 1/3: (400, 1200M) x 6/5 and x 3/2, within the
    #    host's 1200: (480, 1200M) and (600, 1200M).
    # b: a class-4 task of 1200/600M (DEE). Class 1: cut by 1/2 frees 600 and 300M: (600,
    #    900M); class 2: limits 1400, cut by 1/3 frees 400 and 200M: (600, 1000M); class 3:
    #    limits 1600, cut by 1/6 frees 200 and 100M: (600, 1100M); class 4: (600, 1200M).
    # c: in EED: offers nothing. d: empty, 2400/2400M.
    M = MIB
    store = build(
        H("a", 0.3, [T("t1", 2, cpu=1000, mem=100 * M)], mem=1200 * M),
        H("b", 0.6, [T("t2", 4, cpu=1200, mem=600 * M)], mem=1200 * M),
        H("c", 0.9, [T("t3", 4, cpu=100, mem=100 * M)], mem=1200 * M),
        H("d", 0.0, cpu=2400, mem=2400 * M),
    )
    ad = advertise("east", store, G4)
    assert ad.cluster == "east" and ad.hosts == 4 and ad.empty_hosts == 1
    assert (ad.cpu_capacity, ad.memory_capacity) == (6000, 6000 * M)
    assert (ad.cpu_allocated, ad.memory_allocated) == (2300, 800 * M)
    assert dict(ad.hosts_by_region) == {Region.LEE: 2, Region.DEE: 1, Region.EED: 1}
    assert ad.hosts_by_class == ((2, 1), (4, 2))
    a_class_1 = 1200 * M - after_cut(100 * M, Fraction(1, 6), MEMORY_FLOOR)
    assert ad.rooms == (((600, 900 * M), (366, a_class_1)), ((600, 1000 * M), (400, 1200 * M)),
                        ((600, 1100 * M), (480, 1200 * M)), ((600, 1200 * M),))
    assert ad.empty_rooms == ((2400, 2400 * M),)
    # busy hosts a, b, c: (0.3 + 0.6 + 0.9) x 1200 / 3600 = 0.6; CPU weighted over all hosts
    assert ad.busy_cpu_load == pytest.approx(0.6)
    assert ad.busy_host_cpu == 1200
    assert ad.cpu_util == pytest.approx((0.3 + 0.6 + 0.9) * 1200 / 6000)
    assert ad.busy_room(req(1, cpu=500, mem=800 * M)) == (600, 900 * M)
    assert ad.busy_room(req(1, cpu=500, mem=1000 * M)) is None
    assert ad.empty_room(req(1, cpu=500, mem=1000 * M)) == (2400, 2400 * M)
    assert not ad.fits(req(1, cpu=2401, mem=10 * M))


def test_an_overbooked_host_advertises_no_room_never_a_negative_one() -> None:
    # booked beyond its capacity (a placement the registry took as told): its room is 0, so
    # the advert stays one a peer accepts (Advert.from_json refuses a negative room)
    store = build(H("a", 0.1, [T("t1", 1, cpu=5000, mem=100)]),
                  H("b", 0.1, [T("t2", 4, cpu=5000, mem=100)]))
    ad = advertise("east", store, G4)
    assert all(cpu >= 0 and memory >= 0 for front in ad.rooms for cpu, memory in front)
    assert Advert.from_json(ad.to_json()) == ad


# ------------------------------------------------------------------ when to offload


def test_should_offload_what_is_not_placed_and_by_choice_what_kills() -> None:
    request = req(2)
    refused = Decision.refused(request, "no host")
    simple = Decision(request, True, host="a", pass_=Pass.SIMPLE)
    killing = Decision(request, True, host="a", pass_=Pass.KILL, kills=("v",))
    assert should_offload(refused, OffloadWhen.UNPLACED)
    assert should_offload(refused, OffloadWhen.KILLS)
    assert not should_offload(simple, OffloadWhen.UNPLACED)
    assert not should_offload(simple, OffloadWhen.KILLS)
    assert not should_offload(killing, OffloadWhen.UNPLACED)
    assert should_offload(killing, OffloadWhen.KILLS)



# ------------------------------------------------------------------ adverts as JSON


def advertised() -> Advert:
    store = build(
        H("a", 0.3, [T("t1", 2, cpu=1000, mem=100)]),
        H("c", 0.9, [T("t3", 4, cpu=100, mem=100)]),
        H("d", 0.0, cpu=2400, mem=2400),
    )
    return advertise("east", store, PowerModel.named("hp-ml110-g4", 0.5), wake_counts_idle=False)


def test_an_advert_reads_back_from_its_json_as_it_was() -> None:
    ad = advertised()
    wire = json.loads(json.dumps(ad.to_json()))  # what crosses the network
    assert wire["power_table"] == "hp-ml110-g4" and wire["hosts_by_region"]["EED"] == 1
    back = Advert.from_json(wire)
    assert back == ad
    request = req(3, cpu=300, mem=300)
    assert price(back, request) == price(ad, request)
    assert Advert.from_json(advert("west", 0.4).to_json()) == advert("west", 0.4)


def _broken(change: dict[str, object]) -> dict[str, object]:
    wire = advertised().to_json()
    for key, value in change.items():
        if value is KeyError:
            del wire[key]
        else:
            wire[key] = value
    return wire


@pytest.mark.parametrize(("change", "field"), [
    ({"hosts": KeyError}, "advert.hosts"),
    ({"hosts": -1}, "advert.hosts"),
    ({"hosts": True}, "advert.hosts"),
    ({"cpu_capacity": 1.5}, "advert.cpu_capacity"),
    ({"cpu_util": "high"}, "advert.cpu_util"),
    ({"busy_cpu_load": float("nan")}, "advert.busy_cpu_load"),
    ({"cluster": "no/slash"}, "advert.cluster"),
    ({"cluster": KeyError}, "advert.cluster"),
    ({"power_table": "toaster"}, "advert.power_table"),
    ({"memory_w_per_gib": -1}, "advert.memory_w_per_gib"),
    ({"rooms": [[]] * 3}, "advert.rooms"),
    ({"rooms": [[[1, 2, 3]], [], [], []]}, "advert.rooms[0][0]"),
    ({"rooms": [[["a", 2]], [], [], []]}, "advert.rooms[0][0][0]"),
    ({"empty_rooms": {"cpu": 1}}, "advert.empty_rooms"),
    ({"hosts_by_region": {"HOT": 1}}, "advert.hosts_by_region.HOT"),
    ({"hosts_by_region": [1, 2]}, "advert.hosts_by_region"),
    ({"hosts_by_class": {"7": 1}}, "advert.hosts_by_class.7"),
    ({"wake_counts_idle": "yes"}, "advert.wake_counts_idle"),
])
def test_a_malformed_advert_is_refused_naming_its_field(
    change: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Advert.from_json(_broken(change))
    assert caught.value.field == field


@pytest.mark.parametrize("wire", [None, [], "advert", 3])
def test_an_advert_that_is_no_object_is_refused(wire: object) -> None:
    with pytest.raises(ValidationError, match="advert"):
        Advert.from_json(wire)
