"""The baselines decide without notes as with them, less the notes: spread and binpack rank in
one loop that notes only when asked (``ScoredPolicy.decide``), tlp and lvrb format the chosen
host's score alone (``highest_score``); on drawn clusters of mixed sizes and loads with ties,
exclusions and requests that fit nowhere. And the in-memory store's walk of every host by id,
whose order it keeps between calls."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from domain.decision import Decision
from domain.model import HostSpec
from host_registry.memory import MemoryStore
from scheduler.policies.scored import ScoredPolicy
from scheduler.registry import make_policy
from tests.builders import JOB, SERVICE, H, T, build, req

SIZES = (600, 1200, 1800)  # few sizes and round loads, so that scores and task counts tie


@st.composite
def clusters(draw: st.DrawFn) -> list[H]:
    hosts = []
    for h in range(draw(st.integers(1, 8))):
        cpu, mem = draw(st.sampled_from(SIZES)), draw(st.sampled_from(SIZES))
        tasks = [T(f"t{h}-{i}", draw(st.integers(1, 4)), draw(st.sampled_from((100, 200, 300))),
                   draw(st.sampled_from((100, 200, 300))), draw(st.sampled_from((JOB, SERVICE))))
                 for i in range(draw(st.integers(0, 4)))]
        # ids drawn out of order: the store walks them by id whatever order they came in
        util = draw(st.sampled_from((0.0, 0.25, 0.5, 0.9)))
        hosts.append(H(f"h{draw(st.integers(0, 99)):02d}-{h}", util=util, cpu=cpu, mem=mem,
                       tasks=tasks))
    return hosts


def without_notes(decision: Decision) -> Decision:
    return replace(decision, explain=())


@settings(max_examples=300, deadline=None)
@given(hosts=clusters(), cpu=st.sampled_from((100, 300, 600, 1900)),
       memory=st.sampled_from((100, 300, 600, 1900)), highest=st.booleans(),
       excluded=st.sets(st.integers(0, 7)))
def test_a_quiet_decision_is_the_decision_with_notes(
    hosts: list[H], cpu: int, memory: int, highest: bool, excluded: set[int],
) -> None:
    store = build(*hosts)
    policy = ScoredPolicy("binpack" if highest else "spread", highest=highest)
    exclude = {hosts[i].id for i in excluded if i < len(hosts)}
    request = req(2, cpu, memory)
    quiet = policy.decide(request, store, exclude=exclude)
    noted = policy.decide(request, store, exclude=exclude, explain=True)
    assert noted.explain  # the reference path ran: it notes every host
    assert quiet.explain == ()
    assert quiet == without_notes(noted)


@settings(max_examples=200, deadline=None)
@given(hosts=clusters(), cpu=st.sampled_from((100, 300, 600, 1900)),
       memory=st.sampled_from((100, 300, 600, 1900)), name=st.sampled_from(("tlp", "lvrb")),
       excluded=st.sets(st.integers(0, 7)))
def test_a_load_scored_decision_without_notes_is_the_decision_with_them(
    hosts: list[H], cpu: int, memory: int, name: str, excluded: set[int],
) -> None:
    store = build(*hosts)
    policy = make_policy(name, seed=1)
    exclude = {hosts[i].id for i in excluded if i < len(hosts)}
    request = req(2, cpu, memory)
    quiet = policy.decide(request, store, exclude=exclude)
    noted = policy.decide(request, store, exclude=exclude, explain=True)
    assert noted.explain and quiet.explain == ()
    assert quiet == without_notes(noted)


def test_ties_go_to_fewer_tasks_then_the_smaller_id() -> None:
    store = build(H("b", tasks=[T("b1", 4, 200, 200)]), H("a", tasks=[T("a1", 4, 100, 100),
                                                                      T("a2", 4, 100, 100)]),
                  H("c", tasks=[T("c1", 4, 200, 200)]), H("d"))
    binpack, spread = ScoredPolicy("binpack", True), ScoredPolicy("spread", False)
    # a, b and c score alike; b and c hold fewer tasks than a; b has the smaller id
    assert binpack.decide(req(2), store).host == "b"
    assert binpack.decide(req(2), store, exclude={"b"}).host == "c"
    assert spread.decide(req(2), store).host == "d"
    assert spread.decide(req(2), store, exclude={"d"}).host == "b"


def test_the_store_walks_every_host_by_id_as_they_come_and_go() -> None:
    store = MemoryStore()
    for host_id in ("h2", "h0", "h1"):
        store.add_host(HostSpec(host_id, 1000, 1000))
    assert [h.id for h in store.all_hosts()] == ["h0", "h1", "h2"]
    walk = store.all_hosts()
    assert next(walk).id == "h0"
    store.add_host(HostSpec("h05", 1000, 1000))  # joins during the walk: the walk goes on
    assert [h.id for h in walk] == ["h1", "h2"]
    assert [h.id for h in store.all_hosts()] == ["h0", "h05", "h1", "h2"]
    store.add_host(HostSpec("h1", 2000, 1000))  # an update of a host: the same ids
    assert [h.cpu_capacity for h in store.all_hosts()] == [1000, 1000, 2000, 1000]
    store.remove_host("h05")
    assert [h.id for h in store.all_hosts()] == ["h0", "h1", "h2"]
