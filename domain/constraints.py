"""Placement constraints as Swarm users write them (DESIGN 4): ``node.labels.disk==ssd``,
``node.hostname!=gs-node2``, ``node.platform.arch==x86_64``.

A request may carry a list; a host takes it only if it meets every one. The grammar is Swarm's:
``<attribute> == <value>`` or ``<attribute> != <value>``, spaces around the operator allowed,
names and values of letters, digits and ``_.:/@+-``,
with the attributes ``node.id``, ``node.hostname``, ``node.role``, ``node.platform.os``,
``node.platform.arch``, ``node.labels.<name>`` and ``engine.labels.<name>``. As in Swarm, values
compare without regard to case, and a label the node does not have is unequal to every value
(so ``!=`` holds). Pure: the facts of a node are handed in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from domain.errors import ValidationError
from domain.fields import Items, Parsed, Text

MAX_CONSTRAINTS = 32
MAX_CONSTRAINT_CHARS = 256
_SCALARS = ("node.id", "node.hostname", "node.role", "node.platform.os", "node.platform.arch")
_LABELS = ("node.labels.", "engine.labels.")


class ConstraintOp(StrEnum):
    EQ = "=="
    NE = "!="


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What constraints can ask about a host: Swarm's node description (a trace's host: its id
    as hostname, Linux on x86_64, and the labels the trace gives)."""

    id: str
    hostname: str
    role: str = "worker"
    os: str = "linux"
    arch: str = "x86_64"
    labels: tuple[tuple[str, str], ...] = ()
    engine_labels: tuple[tuple[str, str], ...] = ()

    def attribute(self, key: str) -> str | None:
        """The node's value of ``key`` (an attribute of the grammar), None when it has none."""
        if key.startswith("node.labels."):
            return dict(self.labels).get(key[len("node.labels."):])
        if key.startswith("engine.labels."):
            return dict(self.engine_labels).get(key[len("engine.labels."):])
        return {
            "node.id": self.id,
            "node.hostname": self.hostname,
            "node.role": self.role,
            "node.platform.os": self.os,
            "node.platform.arch": self.arch,
        }.get(key)


@dataclass(frozen=True, slots=True)
class Constraint:
    key: str
    op: ConstraintOp
    value: str

    @property
    def text(self) -> str:
        return f"{self.key}{self.op.value}{self.value}"

    def __str__(self) -> str:
        return self.text

    def holds(self, node: NodeFacts) -> bool:
        have = node.attribute(self.key)
        equal = have is not None and have.casefold() == self.value.casefold()
        return equal if self.op is ConstraintOp.EQ else not equal

    @staticmethod
    def parse(text: object, field_name: str) -> Constraint:
        """One constraint from its text; a ValidationError naming ``field_name`` otherwise."""
        if not isinstance(text, str) or not text.strip(" "):
            raise ValidationError(field_name,
                                  "must be a constraint such as 'node.labels.disk==ssd'")
        if len(text) > MAX_CONSTRAINT_CHARS:
            raise ValidationError(field_name, f"is longer than {MAX_CONSTRAINT_CHARS} characters")
        found = [(text.find(op.value), op) for op in ConstraintOp if op.value in text]
        if len(found) != 1 or text.count(found[0][1].value) != 1:
            raise ValidationError(field_name, "needs exactly one operator, == or !=")
        at, op = found[0]
        key, value = text[:at].strip(" "), text[at + len(op.value):].strip(" ")
        if key not in _SCALARS and not (
            key.startswith(_LABELS) and _label_name(key) and _plain(_label_name(key))
        ):
            raise ValidationError(
                field_name,
                f"unknown attribute {key!r}: use {', '.join(_SCALARS)}, node.labels.<name> or "
                "engine.labels.<name>",
            )
        if not value or not _plain(value):
            raise ValidationError(field_name, "needs a value of letters, digits and _.:/@+-")
        return Constraint(key, op, value)


def _label_name(key: str) -> str:
    return key.split(".labels.", 1)[1]


# The characters of a label name or a value (Swarm's are wider; these are what nodes and
# platforms use, and what the OpenAPI document's pattern says).
PLAIN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:/@+-")
_PLAIN = "[A-Za-z0-9_.:/@+-]+"
# ``Constraint.parse`` as one pattern (the OpenAPI document states it; a test holds the two to
# each other): an attribute, one operator, a value, spaces around each.
CONSTRAINT_PATTERN = (
    " *(?:" + "|".join(re.escape(key) for key in _SCALARS) + "|(?:"
    + "|".join(re.escape(prefix) for prefix in _LABELS) + ")" + _PLAIN + ") *(?:"
    + "|".join(re.escape(op.value) for op in ConstraintOp) + ") *" + _PLAIN + " *"
)


def _plain(text: str) -> bool:
    return bool(text) and all(c in PLAIN_CHARS for c in text)


def check_constraints(raw: object, field_name: str = "constraints") -> tuple[Constraint, ...]:
    """A request's constraints: a list of up to MAX_CONSTRAINTS texts; errors name the item."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ValidationError(field_name, "must be a list of constraints such as "
                                          "['node.labels.disk==ssd']")
    if len(raw) > MAX_CONSTRAINTS:
        raise ValidationError(field_name, f"at most {MAX_CONSTRAINTS} constraints")
    parsed = tuple(Constraint.parse(item, f"{field_name}[{index}]")
                   for index, item in enumerate(raw))
    return tuple(dict.fromkeys(parsed))  # the same constraint twice is once


def _read_constraint(value: object, path: str) -> Constraint:
    return Constraint.parse(value, path)


CONSTRAINTS = Items(
    Parsed(Text(CONSTRAINT_PATTERN, max_length=MAX_CONSTRAINT_CHARS), _read_constraint),
    MAX_CONSTRAINTS,
    description="placement constraints as Swarm's: node.labels.disk==ssd, "
                "node.hostname!=gs-node2, node.platform.arch==x86_64")


def constraint_texts(constraints: Sequence[Constraint]) -> list[str]:
    return [c.text for c in constraints]


def unmet(constraints: Sequence[Constraint], node: NodeFacts | None) -> Constraint | None:
    """The first constraint ``node`` does not meet (a node nothing is known of meets none)."""
    for constraint in constraints:
        if node is None or not constraint.holds(node):
            return constraint
    return None


def exclusions(
    constraints: Sequence[Constraint], facts: Mapping[str, NodeFacts], host_ids: Iterable[str]
) -> dict[str, str]:
    """Each host of ``host_ids`` a constraint rules out, with why (for notes and refusals)."""
    if not constraints:
        return {}
    out: dict[str, str] = {}
    for host_id in host_ids:
        node = facts.get(host_id)
        failed = unmet(constraints, node)
        if failed is not None:
            out[host_id] = (f"constraint {failed.text} not met" if node is not None
                            else f"constraint {failed.text}: nothing known of this node")
    return out
