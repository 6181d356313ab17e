"""Every writer gives an event only fields of its kind, the record's fields too.

mypy checks the fields given to a kind's constructor; the record's fields a writer changes with
an event (``records.update(id, Placed(...), status=..., host=...)``) become fields of that event
(domain.events.with_changes), which refuses, at run time, one its kind lacks. This reads every
such call in the manager's source and checks it without running it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from domain import events

ROOT = Path(__file__).resolve().parents[2]
KINDS = {cls.__name__: cls for cls in events._KNOWN}


def _calls() -> list[tuple[str, str, list[str]]]:
    """(where, kind, the keywords that reach the entry) of each records.update with an event
    built in place."""
    found = []
    for path in sorted((ROOT / "manager").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            call, args = ast.unparse(node.func), node.args
            if call == "partial" and args:  # partial(self.records.update, id, event, ...)
                call, args = ast.unparse(args[0]), args[1:]
            if not (call.endswith("records.update") and len(args) >= 2):
                continue
            event = args[1]
            if not (isinstance(event, ast.Call) and isinstance(event.func, ast.Name)
                    and event.func.id in KINDS):
                continue
            # a field given None is cleared in the record and left out of the entry
            names = [k.arg for k in node.keywords if k.arg is not None
                     and not (isinstance(k.value, ast.Constant) and k.value.value is None)]
            found.append((f"{path.relative_to(ROOT)}:{node.lineno}", event.func.id, names))
    return found


def test_the_records_fields_a_writer_changes_are_fields_of_its_event() -> None:
    calls = _calls()
    assert len(calls) >= 23  # the check finds the writers (wherever the manager keeps them)
    for where, kind, names in calls:
        fields = {f.name for f in dataclasses.fields(KINDS[kind])}
        assert set(names) <= fields, (where, kind, sorted(set(names) - fields))
