"""Classes, regions, rounding, units and the tally (DESIGN 3.2, 3.3)."""

import dataclasses
from fractions import Fraction as F

import pytest

from domain.classes import ClassTable, OverbookingModel, after_cut
from domain.errors import ValidationError
from domain.model import Request, TaskType
from domain.pending import violation_deadline
from domain.regions import Region, RegionBounds
from domain.units import parse_memory
from tests.builders import H, T, build


@pytest.mark.parametrize(
    ("cls", "tolerance", "thesis_factor", "label_factor"),
    [(1, F(0), F(1), F(1)), (2, F(1, 6), F(7, 6), F(6, 5)),
     (3, F(1, 3), F(4, 3), F(3, 2)), (4, F(1, 2), F(3, 2), F(2))],
)
def test_class_table_is_exact(cls: int, tolerance: F, thesis_factor: F, label_factor: F) -> None:
    thesis, label = ClassTable(), ClassTable(OverbookingModel.LABEL)
    assert thesis.tolerance(cls) == tolerance == label.tolerance(cls)
    assert thesis.max_factor(cls) == thesis_factor
    assert label.max_factor(cls) == label_factor


@pytest.mark.parametrize(
    ("capacity", "cls", "limit"), [(1200, 1, 1200), (1200, 2, 1400), (1000, 2, 1166),
                                    (1000, 3, 1333), (8192, 4, 12288)],
)
def test_limit_is_floor_of_capacity_times_factor(capacity: int, cls: int, limit: int) -> None:
    assert ClassTable().limit(capacity, cls) == limit


@pytest.mark.parametrize(
    ("original", "cut", "left"),
    [(100, F(1, 6), 84), (1000, F(1, 3), 667), (1024, F(1, 2), 512), (7, F(1, 6), 6),
     (1, F(1, 2), 1), (1073741824, F(1, 6), 894784854)],
)
def test_cuts_round_up(original: int, cut: F, left: int) -> None:
    assert after_cut(original, cut) == left
    assert left >= original * (1 - cut)  # never beyond the allowance


@pytest.mark.parametrize("floor", [0, 4 * 2**20])
@pytest.mark.parametrize("original", [0, 1, 7, 4 * 2**20 - 1, 4 * 2**20, 2**40])
def test_no_cut_leaves_the_original(original: int, floor: int) -> None:
    # Most placements are uncut, so after_cut answers a zero cut at once: as its arithmetic
    # would, floor or not.
    assert after_cut(original, F(0), floor) == original


@pytest.mark.parametrize(("rc", "hc", "cut"), [
    (1, 1, 0), (2, 1, F(1, 6)), (2, 2, 0), (3, 1, F(1, 3)), (3, 2, F(1, 6)), (3, 3, 0),
    (4, 1, F(1, 2)), (4, 2, F(1, 3)), (4, 3, F(1, 6)), (4, 4, 0), (2, 3, 0), (1, 4, 0)])
def test_request_cut_table(rc: int, hc: int, cut: F) -> None:
    assert ClassTable().request_cut(rc, hc) == cut


@pytest.mark.parametrize(("util", "region"), [
    (0.0, Region.LEE), (0.4999, Region.LEE), (0.5, Region.DEE), (0.85, Region.DEE),
    (0.8501, Region.EED), (1.0, Region.EED)])
def test_region_bounds(util: float, region: Region) -> None:
    assert RegionBounds().classify(util) is region


def test_region_bounds_are_configurable_and_checked() -> None:
    assert RegionBounds(0.3, 0.7).classify(0.4) is Region.DEE
    assert RegionBounds(0.3, 0.7).classify(0.75) is Region.EED
    with pytest.raises(ValidationError):
        RegionBounds(0.9, 0.5)


@pytest.mark.parametrize(("text", "size"), [
    ("512m", 512 * 2**20), ("2g", 2 * 2**30), ("1.5GiB", 3 * 2**29), ("1048576", 2**20),
    (4096, 4096), ("64k", 65536), ("1MB", 2**20)])
def test_parse_memory(text: object, size: int) -> None:
    assert parse_memory(text) == size


@pytest.mark.parametrize("bad", ["", "12q", "-5m", 0, -1, True, 3.5, None, "m"])
def test_parse_memory_refuses(bad: object) -> None:
    with pytest.raises(ValidationError) as err:
        parse_memory(bad)
    assert err.value.field == "memory"


def test_host_view_derives_class_allocation_and_overbooking() -> None:
    store = build(H("a", 0.3, [T("x", 3, cpu=600, mem=300), T("y", 2, cpu=700, mem=100),
                               T("z", 4, cpu=100, mem=900, cut=F(1, 6))]))
    host = store.host("a")
    assert host.host_class == 2
    assert (host.cpu_allocated, host.memory_allocated) == (1400, 1300)
    assert host.overbooking_factor == pytest.approx(1400 / 1200)
    assert host.task_count == 3
    assert host.region is Region.LEE
    store.end_task("y")
    assert store.host("a").host_class == 3


def test_a_host_views_class_is_made_with_every_copy() -> None:
    # The class is a field set when a view is made (as its rooms), so no copy may carry the
    # class of the books it was copied from.
    host = build(H("a", 0.3, [T("x", 3, cpu=600, mem=300), T("y", 4, cpu=100, mem=900)])).host("a")
    empty = host.with_tally((0,) * len(host.tally))
    assert (host.host_class, empty.host_class) == (3, None)
    assert empty.with_tally(host.tally).host_class == 3
    assert dataclasses.replace(host, tally=empty.tally).host_class is None
    assert host.with_utilization(0.9, 0.9, Region.EED).host_class == 3


def test_time_to_violate_matches_the_paper() -> None:
    # QoS paper eq. 3: V = e / sigma - (e + p)
    assert violation_deadline(1000.0, 100.0, 0.0, F(1, 2)) == 1100.0
    assert violation_deadline(1000.0, 120.0, 30.0, F(2, 3)) == pytest.approx(1000 + 180 - 150)
    assert violation_deadline(1000.0, 500.0, 20.0, F(1)) == 980.0  # class 1: already late


def test_settings_come_from_the_environment_typed_and_overridable(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from manager.settings import ManagerSettings

    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    settings = ManagerSettings.from_env(
        {"GREENSWARM_LISTEN_PORT": "9001", "GREENSWARM_LEE_BELOW": "0.4",
         "GREENSWARM_TOKEN_FILE": str(token_file)}, policy="binpack")
    assert (settings.listen_port, settings.lee_below, settings.policy) == (9001, 0.4, "binpack")
    assert settings.token == "from-a-file"
    assert ManagerSettings.from_env({"GREENSWARM_TOKEN": "direct",
                                     "GREENSWARM_TOKEN_FILE": str(token_file)}).token == "direct"
    with pytest.raises(ValidationError) as err:
        ManagerSettings.from_env({"GREENSWARM_LISTEN_PORT": "eighty"})
    assert err.value.field == "GREENSWARM_LISTEN_PORT"
    with pytest.raises(ValidationError) as err:
        ManagerSettings.from_env({"GREENSWARM_POLICY": "fastest"})
    assert err.value.field == "policy"
    with pytest.raises(ValidationError) as err:
        ManagerSettings.from_env({"GREENSWARM_TOKEN_FILE": str(tmp_path / "missing")})
    assert err.value.field == "GREENSWARM_TOKEN_FILE"


def test_the_none_model_books_each_class_at_capacity_and_cuts_nothing() -> None:
    none = ClassTable(OverbookingModel.NONE)
    for cls in (1, 2, 3, 4):
        assert (none.tolerance(cls), none.max_factor(cls)) == (0, 1)
        assert none.limit(8192, cls) == 8192
        assert all(none.request_cut(cls, hc) == 0 for hc in (1, 2, 3, 4))
    # the default availability objectives are the thesis model's in every model (3.10)
    for table in (none, ClassTable(), ClassTable(OverbookingModel.LABEL)):
        assert [table.availability_objective(c) for c in (1, 2, 3, 4)] == [
            1, F(5, 6), F(2, 3), F(1, 2)]


def test_under_the_none_model_the_energy_policy_never_cuts() -> None:
    from scheduler.registry import make_policy

    none = ClassTable(OverbookingModel.NONE)
    store = build(H("h", util=0.3, tasks=[T("t4", cls=4, cpu=3000, mem=3000)], cpu=4096,
                    mem=4096), classes=none)
    for cls in (1, 2, 3):
        decision = make_policy("energy").decide(Request(f"r{cls}", cls, TaskType.JOB, 1800,
                                                        1000), store)
        assert not decision.placed or (decision.cuts == () and decision.cut_received == 0)
    thesis = build(H("h", util=0.3, tasks=[T("t4", cls=4, cpu=3000, mem=3000)], cpu=4096,
                     mem=4096))
    assert make_policy("energy").decide(Request("r1", 2, TaskType.JOB, 1800, 1000),
                                        thesis).cuts  # the same request is cut under thesis
