"""Decision objects: what a policy decided, before anything is applied (DESIGN 2, 3)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

from domain.model import Request


class Pass(StrEnum):
    SIMPLE = "simple"
    CUT = "cut"
    KILL = "kill"
    PREEMPT = "preempt"  # the QoS-driven policy's preemption (DESIGN 3.11)


@dataclass(frozen=True, slots=True, init=False)
class TaskCut:
    """A running task shrunk to make room: its new resources and its new total cut."""

    task: str
    host: str
    cpu_shares: int
    memory: int
    cut_received: Fraction
    cpu_freed: int
    memory_freed: int

    # Written by hand (init=False), as the generated one would be: compiled (see
    # native.loader), the dataclass's own __init__ stays interpreted and is several times
    # slower. tests/unit/test_dataclass_inits.py checks it against the fields.
    def __init__(self, task: str, host: str, cpu_shares: int, memory: int,
                 cut_received: Fraction, cpu_freed: int, memory_freed: int) -> None:
        object.__setattr__(self, "task", task)
        object.__setattr__(self, "host", host)
        object.__setattr__(self, "cpu_shares", cpu_shares)
        object.__setattr__(self, "memory", memory)
        object.__setattr__(self, "cut_received", cut_received)
        object.__setattr__(self, "cpu_freed", cpu_freed)
        object.__setattr__(self, "memory_freed", memory_freed)


_NO_CUT = Fraction(0)  # a decision's cut by default (one object: a Fraction is immutable)


@dataclass(frozen=True, slots=True, init=False)
class Decision:
    """Where a request goes (or why it does not), and what has to give way for it."""

    request: Request
    placed: bool
    host: str | None = None
    pass_: Pass | None = None
    cpu_shares: int = 0  # the request's resources as placed (after its own cut)
    memory: int = 0
    cut_received: Fraction = _NO_CUT
    cuts: tuple[TaskCut, ...] = ()
    kills: tuple[str, ...] = ()  # victims killed: taken off the host (DESIGN 3.6, 3.11)
    new_class: int | None = None  # the host's class once the decision is applied
    reason: str = ""  # for people: nothing parses it
    explain: tuple[str, ...] = field(default=(), compare=False)
    policy: str = ""  # the policy that decided (its plugin's name)
    # How long the policy took to decide, in milliseconds (set by the scheduler); None for a
    # retry that was not decided because no host changed since its last try could take it.
    decision_ms: float | None = field(default=None, compare=False)
    # Victims paused on the host instead of killed (DESIGN 3.14: only CPU was missing there):
    # they keep their memory and place, book no CPU, and resume there (none is in ``kills``).
    suspends: tuple[str, ...] = ()

    # By hand (init=False), as TaskCut's.
    def __init__(
        self, request: Request, placed: bool, host: str | None = None,
        pass_: Pass | None = None, cpu_shares: int = 0, memory: int = 0,
        cut_received: Fraction = _NO_CUT, cuts: tuple[TaskCut, ...] = (),
        kills: tuple[str, ...] = (), new_class: int | None = None, reason: str = "",
        explain: tuple[str, ...] = (), policy: str = "", decision_ms: float | None = None,
        suspends: tuple[str, ...] = (),
    ) -> None:
        object.__setattr__(self, "request", request)
        object.__setattr__(self, "placed", placed)
        object.__setattr__(self, "host", host)
        object.__setattr__(self, "pass_", pass_)
        object.__setattr__(self, "cpu_shares", cpu_shares)
        object.__setattr__(self, "memory", memory)
        object.__setattr__(self, "cut_received", cut_received)
        object.__setattr__(self, "cuts", cuts)
        object.__setattr__(self, "kills", kills)
        object.__setattr__(self, "new_class", new_class)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "explain", explain)
        object.__setattr__(self, "policy", policy)
        object.__setattr__(self, "decision_ms", decision_ms)
        object.__setattr__(self, "suspends", suspends)

    @property
    def victims(self) -> tuple[str, ...]:
        """Every task that gives way whole: the killed, then the suspended."""
        return self.kills + self.suspends if self.suspends else self.kills

    @classmethod
    def refused(
        cls, request: Request, reason: str, explain: tuple[str, ...] = (), *, policy: str = ""
    ) -> Decision:
        # By position, on the class itself: mypyc then calls the compiled constructor directly
        # (a scheduler makes one for every retry it skips).
        return Decision(request, False, None, None, 0, 0, _NO_CUT, (), (), None, reason, explain,
                        policy)

    def timed(self, decision_ms: float | None) -> Decision:
        """This decision with the time it took (``dataclasses.replace`` without its field
        lookups: the scheduler times every decision)."""
        return Decision(self.request, self.placed, self.host, self.pass_, self.cpu_shares,
                        self.memory, self.cut_received, self.cuts, self.kills, self.new_class,
                        self.reason, self.explain, self.policy, decision_ms, self.suspends)

    def to_dict(self, *, with_explain: bool = False) -> dict[str, Any]:
        """The JSON form documented for ``greenswarm decide`` and ``POST /requests``."""
        out: dict[str, Any] = {
            "placed": self.placed,
            "host": self.host,
            "pass": self.pass_.value if self.pass_ is not None else None,
            "request": {
                "cpu_shares": self.cpu_shares if self.placed else self.request.cpu_shares,
                "memory": self.memory if self.placed else self.request.memory,
                "cut_received": float(self.cut_received),
            },
            "cuts": [
                {
                    "task": cut.task,
                    "cpu_shares": cut.cpu_shares,
                    "memory": cut.memory,
                    "cut_received": float(cut.cut_received),
                }
                for cut in self.cuts
            ],
            "kills": list(self.kills),
            "suspends": list(self.suspends),
            "reason": self.reason,
        }
        if with_explain:
            out["explain"] = list(self.explain)
        return out
