"""Field specs (domain/fields.py) read what their schema states and refuse the rest, naming
the field by its path."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest

from domain.errors import ValidationError
from domain.fields import (
    Bool,
    Choice,
    Components,
    Either,
    Fields,
    Int,
    Items,
    Named,
    Nullable,
    Num,
    Query,
    Table,
    Text,
)


def valid(schema: dict[str, Any], value: object, components: dict[str, Any] | None = None
          ) -> bool:
    """What a JSON Schema validator (the one schemathesis uses) says of ``value``."""
    root = {**schema, "components": {"schemas": components or {}}}
    return bool(jsonschema_rs.Draft4Validator(root).is_valid(value))


def reads(spec: Any, value: object) -> bool:
    try:
        spec.read(value, "f")
    except ValidationError:
        return False
    return True


KINDS: list[tuple[Any, list[object], list[object]]] = [
    (Int(2, 10), [2, 10, 7], [1, 11, 2.5, True, "3", None]),
    (Num(0.0, 1.0), [0, 1, 0.5], [-0.1, 1.01, True, "0.5", None]),
    (Num(0.0, above=True), [0.1, 5], [0, -1]),
    (Bool(), [True, False], [0, 1, "true", None]),
    (Text("[a-c]+", max_length=3), ["a", "abc"], ["", "abcd", "d", "a\n", 3]),
    (Text(unlike="no"), ["yes", ""], ["no"]),
    (Choice(("x", 0)), ["x", 0], ["y", 1, False, "0"]),
    (Items(Int(), 2, 1), [[1], [1, 2]], [[], [1, 2, 3], ["a"], {}]),
    (Fields({"a": Int(), "b": Text()}, ("a",)), [{"a": 1}, {"a": 1, "b": "x"}],
     [{}, {"b": "x"}, {"a": 1, "c": 2}, [], None]),
    (Fields({"a": Int(), "b": Int()}, one_of_required=("a", "b")), [{"a": 1}, {"b": 2}], [{}]),
    (Table(Int(), "[a-z]+", 2), [{}, {"ab": 1}], [{"a": "x"}, {"a": 1, "b": 2, "c": 3}]),
    (Either((Int(), Text("[a-z]+")), "int or word"), [1, "ab"], [1.5, "AB", None]),
    (Nullable(Int(0)), [None, 0], [-1, "x"]),
]


@pytest.mark.parametrize(("spec", "good", "bad"), KINDS, ids=[type(k[0]).__name__ for k in KINDS])
def test_each_kind_reads_what_its_schema_states(spec: Any, good: list[object],
                                                bad: list[object]) -> None:
    refs = Components()
    schema = spec.schema(refs)
    for value in good:
        assert reads(spec, value), value
        if value is not None:  # OpenAPI's nullable is no JSON Schema keyword
            assert valid(schema, value, refs.schemas), value
    for value in bad:
        assert not reads(spec, value), value
        assert not valid(schema, value, refs.schemas), value


def test_a_tables_names_are_read_and_only_said() -> None:
    """OpenAPI 3.0 states no rule on an object's names: the parser refuses a bad name, the
    schema says the rule in its description (one of the few rules no schema states)."""
    table = Table(Int(), "[a-z]+")
    assert not reads(table, {"A": 1})
    assert valid(table.schema(), {"A": 1})
    assert "^(?:[a-z]+)$" in table.schema()["description"]


def test_errors_name_the_field_by_its_path() -> None:
    spec = Fields({"cuts": Items(Fields({"memory": Int(1)}, ("memory",)))}, ("cuts",))
    with pytest.raises(ValidationError) as caught:
        spec.read({"cuts": [{"memory": 1}, {"memory": 0}]}, "")
    assert caught.value.field == "cuts[1].memory"
    with pytest.raises(ValidationError) as caught:
        spec.read({"cuts": [], "other": 1}, "")
    assert (caught.value.field, caught.value.message) == ("other", "unknown field")


def test_a_named_spec_is_a_component_referred_to() -> None:
    inner = Named("Thing", Fields({"a": Int()}))
    refs = Components()
    assert Items(inner).schema(refs) == {"type": "array",
                                         "items": {"$ref": "#/components/schemas/Thing"}}
    assert refs.schemas["Thing"]["properties"]["a"] == {"type": "integer"}


def test_a_query_reads_its_texts_and_refuses_others() -> None:
    query = Query({"limit": Int(1, 10), "order": Choice(("asc", "desc"))})
    assert query.read({"limit": "3", "order": "asc"}) == {"limit": 3, "order": "asc"}
    for args, field in (({"limit": "0"}, "limit"), ({"limit": "+3"}, "limit"),
                        ({"limit": " 3"}, "limit"), ({"order": "up"}, "order"),
                        ({"other": "1"}, "other")):
        with pytest.raises(ValidationError) as caught:
            query.read(args)
        assert caught.value.field == field


