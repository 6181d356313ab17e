"""The registration table of the placement policies (DESIGN 10): one line per policy.

Everything that offers a choice of policy reads this table: the manager's settings
(``GREENSWARM_POLICY``), ``greenswarm decide --policy``, ``greenswarm bench simulate
--policies``, the live replay's script, and the README's list. To add a policy, write its module
under ``scheduler/policies/`` (see ``scheduler/plugin.py``) and add its ``PLUGIN`` below; a test
or an experiment may also call :func:`register` at run time.
"""

from __future__ import annotations

from typing import Any

from domain.errors import ConflictError, ValidationError
from scheduler.plugin import Policy, PolicyPlugin
from scheduler.policies import binpack, energy, lvrb, qos, random_choice, spread, swarm, tlp

_TABLE: dict[str, PolicyPlugin[Any]] = {
    plugin.name: plugin
    for plugin in (
        energy.PLUGIN,
        qos.PLUGIN,
        tlp.PLUGIN,
        lvrb.PLUGIN,
        spread.PLUGIN,
        binpack.PLUGIN,
        random_choice.PLUGIN,
        swarm.PLUGIN,
    )
}


def register(plugin: PolicyPlugin[Any]) -> PolicyPlugin[Any]:
    """Add a policy to the table (ConflictError if its name is taken); returns it."""
    if plugin.name in _TABLE:
        raise ConflictError(f"a policy named {plugin.name!r} is registered already")
    _TABLE[plugin.name] = plugin
    return plugin


def unregister(name: str) -> None:
    """Remove a policy added with :func:`register` (tests)."""
    _TABLE.pop(name, None)


def plugins(*, simulated: bool | None = None) -> list[PolicyPlugin[Any]]:
    """Every registered policy, in table order; ``simulated`` True leaves out the live-only."""
    return [p for p in _TABLE.values() if simulated is None or p.simulated == simulated]


def names(*, simulated: bool | None = None) -> list[str]:
    return [p.name for p in plugins(simulated=simulated)]


def find(name: str) -> PolicyPlugin[Any] | None:
    """The plugin called ``name``, or None."""
    return _TABLE.get(name)


def plugin(name: str, *, simulated: bool = False, field: str = "policy") -> PolicyPlugin[Any]:
    """The plugin called ``name``; a ValidationError naming ``field`` lists the choices.
    ``simulated`` True refuses a live-only policy."""
    found = _TABLE.get(name)
    if found is None or (simulated and not found.simulated):
        choices = ", ".join(names(simulated=True if simulated else None))
        what = "unknown" if found is None else "live-only"
        raise ValidationError(field, f"{what} policy {name!r} (choose {choices})")
    return found


def make_policy(name: str, options: object = None, *, seed: int = 0) -> Policy:
    """A fresh policy by name, with its options (None: the defaults)."""
    return plugin(name).make(options, seed)
