"""Where a command writes its output (``--out``): atomic for regular files, in place otherwise.

A file is written to a temporary file beside it and renamed over it on success, so a failed run
never leaves half a file under the final name. A rename replaces whatever the name pointed at,
so it is only done for a regular file or a name that does not exist yet (DESIGN 9): a character
device (``/dev/null``, ``/dev/stdout``) or a fifo is written in place, and a directory, a block
device or a socket is refused with an error naming the option. A symbolic link is followed: the
file it points at is written (atomically when it is a regular file) and the link is kept.

``--out DIR`` options take :func:`out_directory`: an existing directory, or a name that does
not exist yet (created); anything else is refused.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO

from domain.errors import ValidationError

TMP_SUFFIX = ".tmp"


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISFIFO, "a fifo"),
    ):
        if test(mode):
            return name
    return "neither a file nor a directory"


class OutFile:
    """One output file. Write to :attr:`write_path`, then :meth:`commit` (or :meth:`discard`
    after a failure).

    ``tmp_name`` makes the temporary file's name from the target's (default: ``NAME.tmp``).
    """

    def __init__(
        self, path: str | Path, *, field: str = "out",
        tmp_name: Callable[[str], str] | None = None,
    ) -> None:
        self.path = Path(path)
        target = self.path.resolve() if self.path.is_symlink() else self.path
        try:
            mode: int | None = target.stat().st_mode
        except FileNotFoundError:
            mode = None
        except OSError as exc:
            raise ValidationError(field, f"cannot use {path}: {exc.strerror or exc}") from None
        if mode is None or stat.S_ISREG(mode):
            self.in_place = False
            name = tmp_name(target.name) if tmp_name else target.name + TMP_SUFFIX
            self.write_path = target.with_name(name)
        elif stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            self.in_place = True
            self.write_path = target
        else:
            raise ValidationError(
                field, f"{path} is {_kind(mode)}: give a file name (a regular file is "
                "replaced; a character device or a fifo is written in place)"
            )
        self.target = target

    def commit(self) -> None:
        """Put what was written under the final name."""
        if not self.in_place:
            os.replace(self.write_path, self.target)

    def discard(self) -> None:
        """Forget what was written (a failure): the final name is left as it was."""
        if not self.in_place:
            self.write_path.unlink(missing_ok=True)


def write_text(path: str | Path, text: str, *, field: str = "out") -> None:
    """Write ``text`` (UTF-8) to ``path`` as :class:`OutFile` says."""
    out = OutFile(path, field=field)
    try:
        with open(out.write_path, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
    except BaseException:
        out.discard()
        raise
    out.commit()


def open_text(path: str | Path, *, field: str = "out", newline: str | None = "") -> _TextOut:
    """A text file to write, as a context manager: committed when the block ends without an
    exception, discarded otherwise."""
    return _TextOut(OutFile(path, field=field), newline)


class _TextOut:
    def __init__(self, out: OutFile, newline: str | None) -> None:
        self.out = out
        self._newline = newline
        self._handle: IO[str] | None = None

    def __enter__(self) -> IO[str]:
        self._handle = open(self.out.write_path, "w", encoding="utf-8", newline=self._newline)
        return self._handle

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        assert self._handle is not None
        self._handle.close()
        if exc_type is None:
            self.out.commit()
        else:
            self.out.discard()


def out_directory(path: str | Path, *, field: str = "out", create: bool = True) -> Path:
    """An output directory: created when it does not exist (unless ``create`` is off: a check
    before a long run); anything but a directory (a file, a device) is refused."""
    directory = Path(path)
    try:
        mode = directory.stat().st_mode
    except FileNotFoundError:
        if not create:
            return directory
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValidationError(
                field, f"cannot create the directory {path}: {exc.strerror or exc}"
            ) from None
        return directory
    except OSError as exc:
        raise ValidationError(field, f"cannot use {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        raise ValidationError(
            field, f"{path} is {_kind(mode)}, not a directory: give a directory to write into"
        )
    return directory
