"""Typed settings from an environment mapping: one loader for every greenswarm process.

Each field ``name`` of a settings dataclass is read from ``<PREFIX><NAME>`` (or from an alias),
converted to the field's type, and explicit overrides (command-line options) win. Pure: the
caller passes the environment.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from domain.errors import ValidationError

S = TypeVar("S")


def load_settings(
    cls: type[S],
    environ: Mapping[str, str],
    prefix: str,
    overrides: Mapping[str, object] | None = None,
    aliases: Mapping[str, str] | None = None,
) -> S:
    """Build ``cls`` from ``environ``; ``aliases`` maps a field to an extra variable name."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    values: dict[str, Any] = {}
    hints = typing.get_type_hints(cls)
    for item in dataclasses.fields(cls):
        names = [prefix + item.name.upper()]
        if aliases and item.name in aliases:
            names.insert(0, aliases[item.name])
        raw = None
        for name in names:  # the first set, the alias first
            if name in environ:
                raw = environ[name]
                break
        if raw is not None:
            values[item.name] = parse_setting(names[-1], raw, hints.get(item.name, item.type))
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return cls(**values)


def parse_setting(name: str, raw: str, kind: object) -> object:
    """``raw`` read as a field of type ``kind`` (int, float, bool, an Enum; anything else stays
    text); a ValidationError naming ``name`` when it cannot be."""
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(raw)
        except ValueError:
            choices = ", ".join(str(member.value) for member in kind)
            raise ValidationError(name, f"cannot read {raw!r}: one of {choices}") from None
    type_name = kind if isinstance(kind, str) else getattr(kind, "__name__", "")
    try:
        if type_name == "int":
            return int(raw)
        if type_name == "float":
            return float(raw)
        if type_name == "bool":
            if raw.lower() not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                raise ValueError(raw)
            return raw.lower() in {"1", "true", "yes", "on"}
    except ValueError:
        raise ValidationError(name, f"cannot read {raw!r} as {type_name}") from None
    return raw


def shared_token(environ: Mapping[str, str], read_file: Any = None) -> str:
    """The bearer token: GREENSWARM_TOKEN, else the file GREENSWARM_TOKEN_FILE names (e.g. a
    Docker secret at /run/secrets/...). ``read_file(path) -> str`` is the caller's I/O."""
    return secret_setting(environ, "GREENSWARM_TOKEN", read_file)


def secret_setting(environ: Mapping[str, str], name: str, read_file: Any = None) -> str:
    """A secret: the variable ``name``, else the file ``<name>_FILE`` names (a Docker secret
    under /run/secrets/, say), stripped; "" when neither is set."""
    value = environ.get(name, "").strip()
    path = environ.get(f"{name}_FILE", "")
    if value or not path:
        return value
    reader = read_file or _read_text
    try:
        return str(reader(path)).strip()
    except OSError as exc:
        raise ValidationError(f"{name}_FILE", f"cannot read {path}: {exc}") from None


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()
