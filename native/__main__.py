"""``python -m native``: which core this process would run, and why (nothing is imported)."""

from __future__ import annotations

import sys

from native.loader import NativeCoreError, decide, decide_rust

if __name__ == "__main__":
    try:
        choice = decide()
        rust_choice = decide_rust()
    except NativeCoreError as exc:
        print(f"core: none ({exc})", file=sys.stderr)
        sys.exit(1)
    print(f"core: {choice.core} ({choice.reason})")
    print(f"rust: {rust_choice.core} ({rust_choice.reason})")
