"""Field specs: one description of a JSON value that both reads it and states it as a schema.

Every JSON body and query string the services take is a spec built from these few kinds (an
integer within bounds, a text matching a pattern, an object of named fields, ...). ``read``
checks a decoded value and returns it (a ValidationError naming the field otherwise: dotted
paths such as ``request.class`` or ``cuts[2].memory``); ``schema`` states the same rules as an
OpenAPI 3.0 schema object, so the document (manager/openapi.py) and the parsers cannot drift:
a bound or a pattern is written once, here or in the module that owns the rule.

Patterns are written to be matched whole, in the part of regular expressions Python and
ECMA-262 read alike (no ``\\d``, ``\\w`` or ``\\s``, whose meaning differs): ``read`` uses
``fullmatch``, the schema anchors them with ``^(?:...)$``. A spec named with :class:`Named`
becomes a component of the document, referred to with ``$ref``.

A rule no schema can state (two ports published twice, a link naming a request of its
deployment) stays in the parser that needs it, and its spec says it in a ``description``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.errors import ValidationError

Schema = dict[str, Any]


def at(path: str, key: str | int) -> str:
    """The path of ``key`` inside ``path``: ``cuts[2]``, ``request.class``, ``class``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Components:
    """The named schemas a document collects while specs state themselves."""

    def __init__(self) -> None:
        self.schemas: dict[str, Schema] = {}

    def ref(self, name: str, build: Callable[[], Schema]) -> Schema:
        if name not in self.schemas:
            self.schemas[name] = {}  # taken first: a spec that refers to itself ends here
            self.schemas[name] = build()
        return {"$ref": f"#/components/schemas/{name}"}


class Spec:
    """A JSON value's rules. Subclasses say ``read`` and ``_schema``."""

    description: str = ""

    def read(self, value: object, path: str) -> Any:
        raise NotImplementedError

    def takes(self, value: object) -> bool:
        """Whether ``value`` is of the JSON type this spec reads (for :class:`Either`)."""
        return True

    def _schema(self, refs: Components | None) -> Schema:
        raise NotImplementedError

    def but_described(self, text: str) -> Any:
        """The same spec with ``text`` as its description (every kind is a dataclass)."""
        return dataclasses.replace(self, description=text)  # type: ignore[type-var]

    def schema(self, refs: Components | None = None) -> Schema:
        """The OpenAPI schema object; named specs go into ``refs`` (inline without it)."""
        found = self._schema(refs)
        if self.description and "$ref" not in found:
            found = {**found, "description": self.description}
        return found


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float)


@dataclass(frozen=True)
class Int(Spec):
    """A JSON integer (not a boolean) within [minimum, maximum]."""

    minimum: int | None = None
    maximum: int | None = None
    description: str = ""

    def read(self, value: object, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(path, "must be an integer")
        if self.minimum is not None and value < self.minimum:
            raise ValidationError(path, f"must be at least {self.minimum}")
        if self.maximum is not None and value > self.maximum:
            raise ValidationError(path, f"must be at most {self.maximum}")
        return value

    def takes(self, value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def read_text(self, text: str, path: str) -> int:
        """The integer of a query string's value: digits, an optional '-' first."""
        if re.fullmatch("-?[0-9]{1,18}", text) is None:
            raise ValidationError(path, "must be an integer")
        return self.read(int(text), path)

    def _schema(self, refs: Components | None) -> Schema:
        return _bounded({"type": "integer"}, self.minimum, self.maximum)


def _bounded(schema: Schema, minimum: float | None, maximum: float | None) -> Schema:
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


@dataclass(frozen=True)
class Num(Spec):
    """A finite JSON number (not a boolean) within [minimum, maximum], or above ``minimum``
    when ``above`` (exclusive); read as a float, or as given (an int stays one) when not
    ``as_float``."""

    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    description: str = ""
    as_float: bool = True

    def read(self, value: object, path: str) -> float:
        if not _number(value) or not math.isfinite(value):  # type: ignore[arg-type]
            raise ValidationError(path, "must be a finite number")
        number: float = value  # type: ignore[assignment]
        low, high = self.minimum, self.maximum
        if low is not None and (number <= low if self.above else number < low):
            raise ValidationError(path, f"must be {'above' if self.above else 'at least'} {low}")
        if high is not None and number > high:
            raise ValidationError(path, f"must be at most {high}")
        return float(number) if self.as_float else number

    def takes(self, value: object) -> bool:
        return _number(value)

    def _schema(self, refs: Components | None) -> Schema:
        found = _bounded({"type": "number"}, self.minimum, self.maximum)
        if self.above:
            found["exclusiveMinimum"] = True
        return found


@dataclass(frozen=True)
class Bool(Spec):
    description: str = ""

    def read(self, value: object, path: str) -> bool:
        if not isinstance(value, bool):
            raise ValidationError(path, "must be true or false")
        return value

    def takes(self, value: object) -> bool:
        return isinstance(value, bool)

    def _schema(self, refs: Components | None) -> Schema:
        return {"type": "boolean"}


@dataclass(frozen=True)
class Text(Spec):
    """A JSON string of ``min_length`` to ``max_length`` characters matching ``pattern`` (whole)
    and not ``unlike`` (whole). ``message``: the error for any other value (``unlike_message``
    for one matching ``unlike``)."""

    pattern: str | None = None
    max_length: int | None = None
    min_length: int = 0
    unlike: str | None = None
    message: str = ""
    unlike_message: str = ""
    example: str | None = None
    description: str = ""
    _compiled: tuple[re.Pattern[str] | None, re.Pattern[str] | None] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled", (
            None if self.pattern is None else re.compile(self.pattern),
            None if self.unlike is None else re.compile(self.unlike)))

    def read(self, value: object, path: str) -> str:
        if not isinstance(value, str):
            raise ValidationError(path, self.message or "must be a string")
        if len(value) < self.min_length:
            raise ValidationError(path, self.message or
                                  f"must have at least {self.min_length} characters")
        if self.max_length is not None and len(value) > self.max_length:
            raise ValidationError(path, f"is longer than {self.max_length} characters")
        pattern, unlike = self._compiled
        if pattern is not None and pattern.fullmatch(value) is None:
            raise ValidationError(path, self.message or "is not valid")
        if unlike is not None and unlike.fullmatch(value) is not None:
            raise ValidationError(path, self.unlike_message or self.message or "is not valid")
        return value

    def takes(self, value: object) -> bool:
        return isinstance(value, str)

    def _schema(self, refs: Components | None) -> Schema:
        found: Schema = {"type": "string"}
        if self.min_length:
            found["minLength"] = self.min_length
        if self.max_length is not None:
            found["maxLength"] = self.max_length
        if self.pattern is not None:
            found["pattern"] = f"^(?:{self.pattern})$"
        if self.unlike is not None:
            found["not"] = {"pattern": f"^(?:{self.unlike})$"}
        if self.example is not None:
            found["example"] = self.example
        return found


@dataclass(frozen=True)
class Choice(Spec):
    """One of ``values`` (strings, numbers or booleans), compared by type and value."""

    values: tuple[object, ...]
    description: str = ""

    def read(self, value: object, path: str) -> Any:
        for choice in self.values:
            if type(choice) is type(value) and choice == value:
                return value
        raise ValidationError(path, "must be one of " + ", ".join(map(str, self.values)))

    def takes(self, value: object) -> bool:
        return any(type(choice) is type(value) for choice in self.values)

    def _schema(self, refs: Components | None) -> Schema:
        return {"enum": list(self.values)}


@dataclass(frozen=True)
class Items(Spec):
    """A JSON array of ``min_items`` to ``max_items`` values, each read by ``item``."""

    item: Spec
    max_items: int | None = None
    min_items: int = 0
    description: str = ""

    def read(self, value: object, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise ValidationError(path, "must be a list")
        if len(value) < self.min_items:
            raise ValidationError(path, f"must hold at least {self.min_items} items")
        if self.max_items is not None and len(value) > self.max_items:
            raise ValidationError(path, f"must hold at most {self.max_items} items")
        return [self.item.read(item, at(path, index)) for index, item in enumerate(value)]

    def takes(self, value: object) -> bool:
        return isinstance(value, list)

    def _schema(self, refs: Components | None) -> Schema:
        found: Schema = {"type": "array", "items": self.item.schema(refs)}
        if self.min_items:
            found["minItems"] = self.min_items
        if self.max_items is not None:
            found["maxItems"] = self.max_items
        return found


@dataclass(frozen=True)
class Fields(Spec):
    """A JSON object of named fields; ``required`` ones must be there, and no other is taken
    (``closed``). ``one_of_required``: at least one of these names must be there. ``read``
    answers the fields that are there, each as its spec read it."""

    fields: Mapping[str, Spec]
    required: tuple[str, ...] = ()
    closed: bool = True
    one_of_required: tuple[str, ...] = ()
    description: str = ""

    def read(self, value: object, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValidationError(path or "body", "must be a JSON object")
        if self.closed:
            unknown = sorted(set(value) - set(self.fields))
            if unknown:
                raise ValidationError(at(path, unknown[0]), "unknown field")
        if self.one_of_required and not set(self.one_of_required) & value.keys():
            raise ValidationError(at(path, self.one_of_required[0]),
                                  " or ".join(self.one_of_required) + " is required")
        out = {}
        for name, spec in self.fields.items():  # in order: the first bad field is named
            if name in value:
                out[name] = spec.read(value[name], at(path, name))
            elif name in self.required:
                raise ValidationError(at(path, name), "is required")
        return out

    def takes(self, value: object) -> bool:
        return isinstance(value, dict)

    def _schema(self, refs: Components | None) -> Schema:
        found: Schema = {"type": "object",
                         "properties": {n: s.schema(refs) for n, s in self.fields.items()}}
        if self.required:
            found["required"] = list(self.required)
        if self.closed:
            found["additionalProperties"] = False
        if self.one_of_required:
            found["anyOf"] = [{"required": [name]} for name in self.one_of_required]
        return found

    def but(self, required: tuple[str, ...] = (), description: str = "",
            **changes: Spec | None) -> Fields:
        """These fields with some added or replaced (or, given None, left out), ``required``
        ones added to the required."""
        fields = {**self.fields, **{k: v for k, v in changes.items() if v is not None}}
        gone = {name for name, spec in changes.items() if spec is None}
        return Fields({k: v for k, v in fields.items() if k not in gone},
                      tuple(n for n in (*self.required, *required) if n not in gone),
                      self.closed, self.one_of_required, description or self.description)


@dataclass(frozen=True)
class Table(Spec):
    """A JSON object of up to ``max_names`` names matching ``names`` (a pattern, whole; any
    name when None), each value read by ``value``. The schema can say the names' rule only in
    words (OpenAPI 3.0 states no rule on names): one rule no schema states."""

    value: Spec
    names: str | None = None
    max_names: int | None = None
    description: str = ""

    def read(self, value: object, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValidationError(path, "must be a JSON object")
        if self.max_names is not None and len(value) > self.max_names:
            raise ValidationError(path, f"must have at most {self.max_names} names")
        names = None if self.names is None else re.compile(self.names)
        out = {}
        for name, item in value.items():
            if names is not None and names.fullmatch(name) is None:
                raise ValidationError(at(path, name), "is not a valid name")
            out[name] = self.value.read(item, at(path, name))
        return out

    def takes(self, value: object) -> bool:
        return isinstance(value, dict)

    def _schema(self, refs: Components | None) -> Schema:
        # OpenAPI 3.0 has no patternProperties (nor propertyNames): the names' rule is said
        found: Schema = {"type": "object", "additionalProperties": self.value.schema(refs)}
        if self.names is not None:
            found["description"] = f"names match ^(?:{self.names})$"
        if self.max_names is not None:
            found["maxProperties"] = self.max_names
        return found


@dataclass(frozen=True)
class Either(Spec):
    """One of ``options``, each of its own JSON type (a string or a list, ...: the schema says
    ``oneOf``): the option that takes the value's type reads it; ``message`` when none does."""

    options: tuple[Spec, ...]
    message: str
    description: str = ""

    def read(self, value: object, path: str) -> Any:
        for option in self.options:
            if option.takes(value):
                return option.read(value, path)
        raise ValidationError(path, self.message)

    def takes(self, value: object) -> bool:
        return any(option.takes(value) for option in self.options)

    def _schema(self, refs: Components | None) -> Schema:
        return {"oneOf": [option.schema(refs) for option in self.options]}


@dataclass(frozen=True)
class Nullable(Spec):
    """``spec``, or null."""

    spec: Spec
    description: str = ""

    def read(self, value: object, path: str) -> Any:
        return None if value is None else self.spec.read(value, path)

    def takes(self, value: object) -> bool:
        return value is None or self.spec.takes(value)

    def _schema(self, refs: Components | None) -> Schema:
        inner = self.spec.schema(refs)
        if "enum" in inner:  # an enum admits null only when it lists it
            return {**inner, "enum": [*inner["enum"], None], "nullable": True}
        if "$ref" in inner:
            return {"allOf": [inner], "nullable": True}
        return {**inner, "nullable": True}


@dataclass(frozen=True)
class Named(Spec):
    """``spec`` under a name: a component of the document, referred to with ``$ref``."""

    name: str
    spec: Spec

    def read(self, value: object, path: str) -> Any:
        return self.spec.read(value, path)

    def takes(self, value: object) -> bool:
        return self.spec.takes(value)

    def _schema(self, refs: Components | None) -> Schema:
        if refs is None:
            return self.spec.schema(None)
        return refs.ref(self.name, lambda: self.spec.schema(refs))


@dataclass(frozen=True)
class Then(Spec):
    """``spec``, then ``convert`` applied to what it read (a rule the schema cannot state may
    raise there: say it in ``description``)."""

    spec: Spec
    convert: Callable[[Any, str], Any]
    description: str = ""

    def read(self, value: object, path: str) -> Any:
        return self.convert(self.spec.read(value, path), path)

    def takes(self, value: object) -> bool:
        return self.spec.takes(value)

    def _schema(self, refs: Components | None) -> Schema:
        return self.spec.schema(refs)


@dataclass(frozen=True)
class Parsed(Spec):
    """A value read by ``parse`` (its own, more telling errors), stated by ``stated``: the two
    must take the same values, and a test holds them to it (e.g. an image reference: Docker's
    grammar as code, and as one pattern)."""

    stated: Spec
    parse: Callable[[object, str], Any]
    description: str = ""

    def read(self, value: object, path: str) -> Any:
        return self.parse(value, path)

    def takes(self, value: object) -> bool:
        return self.stated.takes(value)

    def _schema(self, refs: Components | None) -> Schema:
        return self.stated.schema(refs)


@dataclass(frozen=True)
class Query:
    """A query string's parameters: each a spec of its text (a :class:`Text` or
    :class:`Choice` of strings) or an :class:`Int`; no other parameter is taken."""

    params: Mapping[str, Spec]

    def read(self, args: Mapping[str, str]) -> dict[str, Any]:
        unknown = sorted(set(args) - set(self.params))
        if unknown:
            raise ValidationError(unknown[0], "unknown field")
        out: dict[str, Any] = {}
        for name, spec in self.params.items():
            if name in args:
                text = args[name]
                out[name] = (spec.read_text(text, name) if isinstance(spec, Int)
                             else spec.read(text, name))
        return out

    def parameters(self) -> list[Schema]:
        return [{"name": name, "in": "query", "required": False, "schema": spec.schema()}
                for name, spec in self.params.items()]


NO_QUERY = Query({})
