"""What a placement policy is, and how it is plugged in (DESIGN 10).

A policy is one module under ``scheduler/policies/`` that defines its policy class, a frozen
dataclass of typed options (each field with a default and a ``help`` in its metadata), and one
:class:`PolicyPlugin` value naming them. ``scheduler/registry.py`` lists the plugins; the
manager's settings, ``greenswarm decide``, ``bench simulate``, the replay and the README's policy
list all read that table, so a new policy is its module and one line there.

Option fields become ``--dashed-name`` command-line options and ``GREENSWARM_<NAME>`` settings
(cli/policy_options.py, manager/settings.py); their type is one of ``int``, ``float``, ``bool``,
``str`` or a ``StrEnum`` (whose values are the choices).
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from domain.classes import ClassTable, OverbookingModel
from domain.decision import Decision
from domain.errors import ValidationError
from domain.load import STALE_AFTER_S
from domain.model import HostView, Request
from domain.regions import RegionBounds
from domain.slo import SloTable
from domain.store import ClusterReader
from scheduler.load import Freshness


class Policy(Protocol):
    """A placement policy: decides one request against a store's view; pure."""

    @property
    def name(self) -> str: ...

    def decide(
        self,
        request: Request,
        view: ClusterReader,
        *,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision: ...

    def may_place(
        self, request: Request, hosts: Iterable[HostView], classes: ClassTable
    ) -> bool:
        """False only when ``decide`` could place ``request`` on none of ``hosts`` as they are
        now, whatever the other hosts; judged from the hosts' views alone (cheap)."""
        ...


@runtime_checkable
class RoundPolicy(Protocol):
    """A policy that decides over the pending queue in rounds (the QoS-driven one, DESIGN
    3.11): the scheduler asks it about each waiting request, most urgent first, with the
    request's QoS metric and the round's moment, objectives and allocation time; a round runs at
    least every ``watchdog_s`` (the simulator's clock)."""

    @property
    def watchdog_s(self) -> float: ...

    def decide_waiting(
        self,
        request: Request,
        view: ClusterReader,
        *,
        q_s: float,
        now: float,
        slo: SloTable,
        alpha_s: float,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision: ...


@runtime_checkable
class TimeAware(Protocol):
    """A policy whose decision depends on the moment (the energy policy's kill pass weighs the
    work each victim would lose, DESIGN 3.6): the scheduler calls ``decide_at`` with it instead
    of ``decide``."""

    def decide_at(
        self,
        request: Request,
        view: ClusterReader,
        *,
        now: float,
        exclude: Collection[str] = (),
        explain: bool = False,
    ) -> Decision: ...


@runtime_checkable
class LoadAware(Protocol):
    """A policy that reads utilization and wants it as expected now (DESIGN 3.12): with the
    predicted use of tasks placed since each host's last measurement, and by allocation where
    that measurement is too old (``scheduler.load``). ``tlp`` and ``lvrb`` always; ``energy``
    with ``--predict-recent``."""

    @property
    def predicts_recent(self) -> bool: ...


class PlacedBy(enum.StrEnum):
    """Who carries out a policy's placements."""

    OURS = "ours"  # the scheduler decides; the manager creates a service pinned to the host
    SWARM = "swarm"  # Swarm's own scheduler places the service (live only)


OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True)
class NoOptions:
    """For a policy without options of its own."""


@dataclass(frozen=True)
class PolicyPlugin(Generic[OptionsT]):
    """A policy as the registration table lists it.

    ``build(options, seed)`` makes a fresh policy (``seed`` for those that draw at random);
    ``passes`` names the passes its decisions report (reports count placements per pass; a
    policy without passes is counted under its own name); ``admits_to_queue``: a new request
    waits in the pending queue unless its client says ``queue: false`` (the QoS-driven
    policy's admission); ``simulated`` False marks a policy that only exists live (``swarm``).
    """

    name: str
    summary: str
    options: type[OptionsT]
    build: Callable[[OptionsT, int], Policy]
    passes: tuple[str, ...] = ()
    admits_to_queue: bool = False
    placed_by: PlacedBy = PlacedBy.OURS
    simulated: bool = True

    def make(self, options: OptionsT | None = None, seed: int = 0) -> Policy:
        return self.build(options if options is not None else self.options(), seed)


@dataclass(frozen=True)
class ClusterOptions:
    """The settings every policy shares: the class table (DESIGN 3.2) and the region bounds
    (3.3). The stores keep hosts by region and class with them, and every report classifies
    time by region with them, so they belong to the cluster, not to one policy."""

    overbooking_model: OverbookingModel = field(
        default=OverbookingModel.THESIS,
        metadata={"help": "class table (DESIGN 3.2): thesis, M(c) = 1, 7/6, 4/3, 3/2; label, "
                          "M(c) = 1, 1.2, 1.5, 2.0; none, M(c) = 1 and no cuts"},
    )
    lee_below: float = field(
        default=RegionBounds().lee_below,
        metadata={"help": "a host is in LEE below this utilization", "metavar": "U"},
    )
    eed_above: float = field(
        default=RegionBounds().eed_above,
        metadata={"help": "a host is in EED above this utilization", "metavar": "U"},
    )
    stale_after_s: float = field(
        default=STALE_AFTER_S,
        metadata={"help": "a load-aware policy judges a host whose utilization is older than "
                          "this by its allocation (DESIGN 3.12)", "metavar": "S"},
    )
    predict_multiplier: float = field(
        default=1.0,
        metadata={"help": "a task placed since its host's last measurement, and not measured "
                          "itself yet, is predicted to use its allocation times this",
                  "metavar": "X"},
    )

    def __post_init__(self) -> None:
        self.bounds()  # raises ValidationError (field region_bounds) unless 0 < LEE <= EED < 1
        if not self.stale_after_s > 0:
            raise ValidationError("stale_after_s", "must be positive")
        if not 0 <= self.predict_multiplier <= 10:
            raise ValidationError("predict_multiplier", "must be in [0, 10]")

    def classes(self) -> ClassTable:
        return ClassTable(self.overbooking_model)

    def bounds(self) -> RegionBounds:
        return RegionBounds(self.lee_below, self.eed_above)

    def freshness(self) -> Freshness:
        return Freshness(self.stale_after_s, self.predict_multiplier)


# -- option fields, for the edges that read them from words ---------------------------------


@dataclass(frozen=True)
class OptionField:
    """One option of an options dataclass, as the command line and the settings see it."""

    name: str  # the dataclass field
    kind: type  # int, float, bool, str, or a StrEnum
    default: Any
    help: str
    metavar: str = ""  # how the command line names its value (a StrEnum lists its choices)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def choices(self) -> list[str] | None:
        if isinstance(self.kind, type) and issubclass(self.kind, enum.Enum):
            return [str(member.value) for member in self.kind]
        return None

    def parse(self, raw: str, where: str) -> object:
        """``raw`` as this field's type; a ValidationError naming ``where`` otherwise."""
        kind = self.kind
        try:
            if kind is bool:
                lowered = raw.strip().lower()
                if lowered not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                    raise ValueError(raw)
                return lowered in {"1", "true", "yes", "on"}
            if kind is int:
                return int(raw)
            if kind is float:
                return float(raw)
            if issubclass(kind, enum.Enum):
                return kind(raw)
        except ValueError:
            choices = self.choices
            expected = f"one of {', '.join(choices)}" if choices else kind.__name__
            raise ValidationError(where, f"cannot read {raw!r} as {expected}") from None
        return raw


_KINDS = (int, float, bool, str)


def option_fields(options: type[Any]) -> tuple[OptionField, ...]:
    """The fields of an options dataclass, with their resolved types."""
    if not dataclasses.is_dataclass(options):
        raise TypeError(f"{options!r} is not a dataclass")
    hints = typing.get_type_hints(options)
    fields = []
    for item in dataclasses.fields(options):
        kind = hints[item.name]
        if not (kind in _KINDS or (isinstance(kind, type) and issubclass(kind, enum.StrEnum))):
            raise TypeError(f"option {options.__name__}.{item.name}: unsupported type {kind!r}")
        if item.default is dataclasses.MISSING:
            raise TypeError(f"option {options.__name__}.{item.name} needs a default")
        help_text = str(item.metadata.get("help", ""))
        metavar = str(item.metadata.get("metavar", ""))
        fields.append(OptionField(item.name, kind, item.default, help_text, metavar))
    return tuple(fields)


def build_options(options: type[OptionsT], values: dict[str, object]) -> OptionsT:
    """An options instance from the values given (the others keep their defaults); a
    ValidationError names a field whose value the dataclass refuses."""
    known = {f.name for f in option_fields(options)}
    return options(**{name: value for name, value in values.items() if name in known})
