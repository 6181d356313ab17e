"""The one digest of source files both native builds key their caches on (native/loader.py for
the mypyc build, native/rust.py for the Rust crate)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path


def files_digest(named: Iterable[tuple[str, Path]]) -> str:
    """sha256 over each file's name and contents, in the order given."""
    digest = hashlib.sha256()
    for name, path in named:
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()
