"""The dataclasses of the compiled core whose ``__init__`` is written by hand (declared with
``init=False``: compiled, mypyc keeps a generated ``__init__`` interpreted, several times slower)
take exactly what the generated one would: the fields with ``init=True``, in order, of the same
kind, default and type, and they set every field as given, then call ``__post_init__``.

A field added to such a class without its ``__init__`` fails here. A default factory's parameter
defaults to None (None: a new value of the factory), its annotation gets ``| None``.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from fractions import Fraction
from typing import Any
from unittest import mock

import pytest

from domain.booking import Booking
from domain.books import contribution
from domain.classes import ClassTable
from domain.constraints import Constraint
from domain.decision import Decision, Pass, TaskCut
from domain.load import LoadWindow, LoadWindows
from domain.model import HostView, Request, Task, TaskType
from domain.pending import PendingEntry, PendingReason
from domain.regions import Region
from domain.restore import TaskRestore
from domain.rooms import RoomKey, RoomKind
from domain.slo import Phase, ServiceClock, ServiceLevel
from measure.service_levels import RequestLevel, RequestStatus
from monitor.core import TaskUtil, UtilSample
from native.loader import MODULES
from scheduler.admission import Refusal, Resource
from scheduler.service import Outcome
from workloads.trace import TraceRequest, Workload


def hand_written_inits() -> list[type[Any]]:
    """Every dataclass of the compiled modules declared with ``init=False``."""
    found: list[type[Any]] = []
    for name in MODULES:
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if (isinstance(obj, type) and obj.__module__ == name
                    and dataclasses.is_dataclass(obj)
                    and obj.__dataclass_params__.init is False):  # type: ignore[attr-defined]
                found.append(obj)
    return sorted(found, key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


HAND_WRITTEN = hand_written_inits()


def _request() -> Request:
    return Request("req-1", 2, TaskType.JOB, 300, 4000, (Constraint.parse("node.id==h1", "constraints"),),
                   90.0)


def _task() -> Task:
    return Task("task-1", "host-1", 3, TaskType.JOB, 200, 3000, 400, 6000, Fraction(1, 3),
                0.25, 0.5, 10.0, 20.0, 30.0, 4, (Constraint.parse("node.id!=h2", "constraints"),),
                60.0, 150, 42.0)


def _host() -> HostView:
    windows = LoadWindows((LoadWindow(300, 0.1, 0.01, 0.2, 0.02, 10),))
    tally = contribution(_task(), ClassTable())
    return HostView("host-1", 1000, 2000, 0.3, 0.4, Region.DEE, tally, (1000, 1166, 1333, 1500),
                    (2000, 2333, 2666, 3000), "10.0.0.1:7946", 12.5, windows)


def _cut() -> TaskCut:
    return TaskCut("task-1", "host-1", 150, 2500, Fraction(1, 4), 50, 500)


def _decision() -> Decision:
    return Decision(_request(), True, "host-1", Pass.CUT, 250, 3500, Fraction(1, 8),
                    (_cut(),), ("victim-1",), 3, "a reason", ("line 1", "line 2"), "energy",
                    1.5, ("victim-2",))


EXAMPLES: dict[type[Any], Callable[[], Any]] = {
    # every field given a value of its own (not its default, and unlike the other fields')
    Request: _request,
    Task: _task,
    HostView: _host,
    TaskCut: _cut,
    Decision: _decision,
    Booking: lambda: Booking(_host(), (_task(),), (_task(), _task()), dataclasses.replace(
        _task(), id="placed"), (_task(), _task(), _task())),
    RoomKey: lambda: RoomKey(RoomKind.KILL, 3, True),
    ServiceClock: lambda: ServiceClock(5.0, Phase.RUNNING, 7.0, 11.0, 13.0, 17.0, 2, 1, 19.0,
                                       23.0, 29.0, 31.0, 37.0, 3, 4, 41.0),
    ServiceLevel: lambda: ServiceLevel(1.0, 2.0, 0.75, 0.9, -3.0, 0.1, 4, 5.0),
    RequestLevel: lambda: RequestLevel("req-1", 2, TaskType.JOB, 0.5, True, 3,
                                       RequestStatus.FINISHED),
    Outcome: lambda: Outcome(
        [_decision()], [_decision(), _decision()], [_task()],
        [PendingEntry(_request(), PendingReason.QUEUED, 1.0, 2.0)],
        [Decision.refused(_request(), "no")], [Decision.refused(_request(), "wait"),
                                               Decision.refused(_request(), "wait")],
        [TaskRestore("task-1", "host-1", 300, 4000, Fraction(0), 100, 1000)],
        [_task(), _task(), _task()], [_task(), _task(), _task(), _task()],
        Refusal("req-1", 2, Resource.CPU, 10.0, 5.0),
    ),
    # a checkpointable job: its request_rate (a service's) stays at its default
    TraceRequest: lambda: TraceRequest(1.5, "req-1", 2, TaskType.JOB, Workload.DL, 300,
                                       4000, 600.0, None, (Constraint.parse("node.id==h1",
                                                                            "constraints"),),
                                       120.0),
    UtilSample: lambda: UtilSample(0.25, 0.5, 120.0),
    TaskUtil: lambda: TaskUtil("task-1", 0.25, 0.5),
}


# Fields a __post_init__ sets from others (the example cannot tell them apart).
SET_BY_POST_INIT = {(ServiceClock, "since_s"), (ServiceClock, "admitted_s")}
# Fields an example must leave at their default, another field excluding them (a job's
# checkpoint interval and a service's request rate).
LEFT_AT_DEFAULT = {(TraceRequest, "request_rate")}


def ids(cls: type[Any]) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def init_fields(cls: type[Any]) -> list[dataclasses.Field[Any]]:
    return [f for f in dataclasses.fields(cls) if f.init]


def test_the_hot_classes_write_their_init() -> None:
    """The search finds them (an empty search would pass everything below)."""
    assert set(EXAMPLES) <= set(HAND_WRITTEN)


@pytest.mark.parametrize("cls", HAND_WRITTEN, ids=ids)
def test_init_takes_the_fields(cls: type[Any]) -> None:
    params = list(inspect.signature(cls.__init__).parameters.values())
    assert params[0].name == "self"
    params = params[1:]
    fields = init_fields(cls)
    assert [p.name for p in params] == [f.name for f in fields]
    for param, f in zip(params, fields, strict=True):
        kind = (inspect.Parameter.KEYWORD_ONLY if f.kw_only
                else inspect.Parameter.POSITIONAL_OR_KEYWORD)
        assert param.kind is kind, f.name
        if f.default_factory is not dataclasses.MISSING:
            assert param.default is None, f.name
            assert param.annotation == f"{f.type} | None", f.name
        else:
            expected = inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default
            assert param.default == expected, f.name
            assert type(param.default) is type(expected), f.name
            assert param.annotation == f.type, f.name


@pytest.mark.parametrize("cls", HAND_WRITTEN, ids=ids)
def test_init_sets_every_field(cls: type[Any]) -> None:
    assert cls in EXAMPLES, f"give {ids(cls)} an example in EXAMPLES"
    example = EXAMPLES[cls]()
    fields = init_fields(cls)
    names = [f.name for f in fields]
    values = [getattr(example, name) for name in names]
    for f in fields:  # the example tells a swap of two fields, and a default not overridden
        others = [v for name, v in zip(names, values, strict=True) if name != f.name]
        if (cls, f.name) not in SET_BY_POST_INIT:
            assert getattr(example, f.name) not in others, f.name
        if f.default is not dataclasses.MISSING and (cls, f.name) not in LEFT_AT_DEFAULT:
            assert getattr(example, f.name) != f.default, f.name
    for made in (cls(*values), cls(**dict(zip(names, values, strict=True)))):
        for name, value in zip(names, values, strict=True):
            # equal and of the same type (compiled, a float field is stored unboxed: not "is")
            assert getattr(made, name) == value and type(getattr(made, name)) is type(value)
        assert dataclasses.astuple(made) == dataclasses.astuple(example)
        assert made == example
        for name, value in zip(names, values, strict=True):
            changed = dataclasses.replace(made, **{name: value})
            assert changed == made
            assert dataclasses.astuple(changed) == dataclasses.astuple(example)


@pytest.mark.parametrize("cls", HAND_WRITTEN, ids=ids)
def test_defaults_and_post_init_as_generated(cls: type[Any]) -> None:
    example = EXAMPLES[cls]()
    fields = init_fields(cls)
    required = [getattr(example, f.name) for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    post_init = getattr(cls, "__post_init__", None)
    calls: list[object] = []

    def spy(self: object) -> None:
        calls.append(self)
        assert post_init is not None
        post_init(self)

    with mock.patch.object(cls, "__post_init__", spy, create=post_init is None):
        made = cls(*required)
        other = cls(*required)
    assert calls == ([made, other] if post_init is not None else [])
    for f in fields:
        if f.default_factory is not dataclasses.MISSING:
            assert getattr(made, f.name) == f.default_factory()
            assert getattr(made, f.name) is not getattr(other, f.name)  # a new one each
        elif f.default is not dataclasses.MISSING and (cls, f.name) not in SET_BY_POST_INIT:
            assert getattr(made, f.name) == f.default, f.name


def test_service_clock_starts_at_admission() -> None:
    """Its __post_init__ (the one a generated __init__ would call) sets ``since_s``."""
    assert ServiceClock(5.0).since_s == 5.0
    assert ServiceClock(5.0, since_s=1.0).since_s == 5.0
