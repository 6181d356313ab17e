"""Image references as Docker reads them (DESIGN 9: what the Swarm would refuse is refused at
the door). Pure, and written from Docker's grammar (distribution's ``reference`` package):

    reference        := name [ ":" tag ] [ "@" digest ]
    name             := [ domain "/" ] path-component ( "/" path-component )*
    domain           := host [ ":" port ]       host := domain-name | "[" IPv6 "]"
    domain-name      := domain-component ( "." domain-component )*   (IPv6: "[" hex and ":" "]")
    domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
    port             := [0-9]+
    path-component   := [a-z0-9]+ ( separator [a-z0-9]+ )*    separator := [._] | "__" | "-"+
    tag              := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
    digest           := "sha256:" hex{64} | "sha384:" hex{96} | "sha512:" hex{128}  (lowercase)

and the rules Docker adds when it normalises a name (``ParseNormalizedNamed``): a first
component that is no host (no ``.`` or ``:``, not ``localhost``, all lowercase) is a path on
``docker.io``, and a name of one component there is ``docker.io/library/<name>``; the
repository (the name past the host) must be lowercase; a name is at most 255 characters once
normalised; 64 hex digits alone are an image id, not a name. Docker accepts other digest
algorithms in its grammar but refuses them when it reads the digest, so the three it knows are
the grammar here.

``IMAGE_PATTERN`` says the same as one regular expression, in the subset that Python and
ECMA-262 read alike (the OpenAPI document states it; tests/unit/test_images.py holds the two to
each other). ``MAX_IMAGE_CHARS`` bounds the whole reference so that no accepted one can exceed
Docker's 255 characters once normalised: the bound is then a plain ``maxLength`` too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from domain.errors import ValidationError
from domain.fields import Parsed, Text

NAME_TOTAL_MAX_CHARS = 255  # Docker's NameTotalLengthMax, of the normalised name
DEFAULT_DOMAIN = "docker.io"
LEGACY_DEFAULT_DOMAIN = "index.docker.io"
OFFICIAL_PREFIX = "library/"
# A reference this long normalises to at most NAME_TOTAL_MAX_CHARS ("docker.io/library/" is
# the most Docker adds), so its length alone decides; Docker would take a few longer ones.
MAX_IMAGE_CHARS = NAME_TOTAL_MAX_CHARS - len(f"{DEFAULT_DOMAIN}/{OFFICIAL_PREFIX}")

_ALNUM = "[a-z0-9]+"
_SEPARATOR = "(?:[._]|__|-+)"
_PATH_COMPONENT = f"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_PORT = "(?::[0-9]+)"
# An IPv6 host: Docker takes a first component for a host only when it holds '.' or ':' (or
# is localhost, or has a capital), so "[ab]/x" is a path (and invalid) while "[ab]:5000/x" and
# "[::1]/x" name hosts.
_IPV6 = f"\\[(?:[a-fA-F0-9]*:[a-fA-F0-9:]*\\]{_PORT}?|[a-fA-F0-9]+\\]{_PORT})"
_HOST_NAME = f"{_DOMAIN_COMPONENT}(?:\\.{_DOMAIN_COMPONENT})*{_PORT}?"
_DOMAIN = f"(?:{_HOST_NAME}|{_IPV6})"
_PATH = f"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_NAME = f"(?:{_DOMAIN}/)?{_PATH}"
TAG_PATTERN = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
DIGEST_PATTERN = "(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})"
_END = f"(?::{TAG_PATTERN})?(?:@{DIGEST_PATTERN})?"
# Written as two alternatives (an IPv6 host, or any other or none), the same references as
# _NAME with _END: schemathesis rewrites a pattern of one sequence to fold maxLength into it,
# and drops the escape of ']' doing so.
IMAGE_PATTERN = f"{_IPV6}/{_PATH}{_END}|(?:{_HOST_NAME}/)?{_PATH}{_END}"
IMAGE_ID_PATTERN = "[a-f0-9]{64}"  # an image id: Docker refuses it as a name

_REFERENCE = re.compile(f"({_NAME})(?::({TAG_PATTERN}))?(?:@({DIGEST_PATTERN}))?")
_IMAGE_ID = re.compile(IMAGE_ID_PATTERN)
HINT = "an image reference such as 'redis:7' or 'registry.example:5000/team/app@sha256:<64 hex>'"


@dataclass(frozen=True, slots=True)
class ImageReference:
    """A reference as Docker normalises it: ``domain/path``, the tag and the digest."""

    domain: str
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        return f"{self.domain}/{self.path}"


def _split_domain(text: str) -> tuple[str, str]:
    """Docker's splitDockerDomain: the registry host and the rest."""
    slash = text.find("/")
    first = text[:slash]
    if slash == -1 or (not any(c in first for c in ".:") and first != "localhost"
                       and first.lower() == first):
        domain, rest = DEFAULT_DOMAIN, text
    else:
        domain, rest = first, text[slash + 1:]
    if domain == LEGACY_DEFAULT_DOMAIN:
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in rest:
        rest = OFFICIAL_PREFIX + rest
    return domain, rest


def parse_image(value: object, field_name: str = "image") -> ImageReference:
    """``value`` read as Docker reads an image reference (``docker run``, a Swarm service);
    a ValidationError naming ``field_name`` for any it would refuse, saying why."""
    if not isinstance(value, str) or not value:
        raise ValidationError(field_name, f"is required: {HINT}")
    if len(value) > MAX_IMAGE_CHARS:
        raise ValidationError(field_name, f"is longer than {MAX_IMAGE_CHARS} characters")
    if _IMAGE_ID.fullmatch(value):
        raise ValidationError(field_name, "is 64 hexadecimal digits, an image id: "
                                          "give the image's name")
    domain, rest = _split_domain(value)
    repository = rest.split(":", 1)[0].split("@", 1)[0]
    if repository.lower() != repository:
        raise ValidationError(field_name, f"repository {repository!r} must be lowercase")
    match = _REFERENCE.fullmatch(f"{domain}/{rest}")
    if match is None:
        raise ValidationError(field_name, f"is not a reference Docker can read: {HINT}")
    name, tag, digest = match.groups()
    if len(name) > NAME_TOTAL_MAX_CHARS:  # unreachable within MAX_IMAGE_CHARS; Docker's rule
        raise ValidationError(field_name, f"names more than {NAME_TOTAL_MAX_CHARS} characters")
    return ImageReference(domain, name[len(domain) + 1:], tag, digest)


def _read_image(value: object, path: str) -> str:
    parse_image(value, path)
    return value  # type: ignore[return-value]  # parse_image took it: a str


# An image as a request gives it: the reference as written (Docker normalises it itself).
IMAGE = Parsed(Text(IMAGE_PATTERN, max_length=MAX_IMAGE_CHARS, unlike=IMAGE_ID_PATTERN,
                    example="greenswarm/busybox:latest"), _read_image,
               description="an image reference Docker can read: [host[:port]/]path[:tag]"
                           "[@digest], the path lowercase")
