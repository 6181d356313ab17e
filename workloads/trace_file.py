"""The benchmark trace: a JSON Lines file of timed requests, replayed identically per policy.

Format, version 1 (UTF-8; a name ending in ``.gz`` is read and written gzip-compressed):

Line 1, the header::

    {"kind": "header", "version": 1, "source": "thesis", "seed": 7, "duration_s": 3600.0,
     "hosts": [{"id": "host-1", "cpu_capacity": 8192, "memory_capacity": 12884901888}, ...],
     "notes": "free text"}

* ``source``: where the requests come from: ``thesis`` (the generator of DESIGN 7.1),
  ``google2011``, ``alibaba``, or any other short name (letters, digits, ``-_.``);
* ``seed``: the generator's seed, ``null`` for a converted trace;
* ``duration_s`` > 0: the arrival window; every request has ``0 <= t <= duration_s``;
* ``hosts``: the cluster the trace was made for, at least one host, ids unique; capacities are
  CPU shares (1024 per core) and bytes; optional ``labels`` (``{"disk": "ssd"}``) for placement
  constraints (a host's hostname is its id).

Then one line per request, sorted by ``t`` (ties keep file order)::

    {"kind": "request", "t": 0.5, "id": "r000001", "class": 3, "type": "job",
     "workload": "ffmpeg", "cpu_shares": 512, "memory": 536870912, "makespan_s": 120.0,
     "request_rate": null}

* ``t``: seconds from the start of the run at which the client submits it;
* ``id``: unique in the file;
* ``class``: overbooking class 1..4 (DESIGN 3.2);
* ``type``: ``job`` | ``service``; ``workload``: ``ffmpeg`` (job), ``redis`` (service), ``dl``
  (job), ``timeserver`` (service) or ``generic`` (either; converted traces);
* ``cpu_shares`` >= 2, ``memory`` >= 1 (bytes), both integers;
* ``makespan_s`` > 0: how long it runs once started; for a service, how long until the client
  stops it;
* ``request_rate``: client requests per 10 s sent to a service, ``null`` for jobs (and for
  services without client load);
* ``constraints`` (optional): placement constraints as in ``POST /requests``
  (``["node.labels.disk==ssd"]``, DESIGN 4).

Unknown keys are refused (a typo must not silently change a benchmark). Blank lines are
ignored. Every error is a :class:`TraceError` (a ``ValidationError``) naming the file, the line
and the field.

The values (header, hosts, requests) and their checks are in :mod:`workloads.trace`.

Small traces are read whole with :func:`read_trace`; large ones (24 h on 1,000 hosts holds
millions of requests) are streamed with :func:`open_trace` / :class:`TraceWriter`.
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from domain.errors import ValidationError
from workloads.outfiles import OutFile
from workloads.trace import (
    Trace,
    TraceError,
    TraceHeader,
    TraceRequest,
    check_order,
    check_request_in_header,
    header_from_json,
    request_from_json,
)


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number")


# One decoder and one encoder for every line (json.loads/dumps with options build new ones).
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_ENCODER = json.JSONEncoder(separators=(", ", ": "), allow_nan=False)


def _load_json_line(text: str) -> object:
    return _DECODER.decode(text)


def _dumps(obj: Mapping[str, Any]) -> str:
    return _ENCODER.encode(obj)


# ---------------------------------------------------------------- files


def _open_text(path: Path, mode: str, *, gz: bool | None = None) -> IO[str]:
    # The handle is returned to a reader/writer class that closes it. ``gz``: compress (default:
    # when the name ends in .gz; a writer's temporary file or device says it apart).
    if path.name.endswith(".gz") if gz is None else gz:
        raw = gzip.GzipFile(path, "rb" if mode == "r" else "wb", compresslevel=6)
        return io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
    return open(path, mode, encoding="utf-8", newline="\n")


class TraceReader:
    """Streams a trace: ``header`` is read on open, requests are validated as iterated.

    Use as a context manager::

        with open_trace(path) as reader:
            print(reader.header.duration_s)
            for request in reader:
                ...
    """

    def __init__(self, path: str | Path, *, check_unique_ids: bool = True) -> None:
        self.path = Path(path)
        self._name = str(path)
        self._check_unique = check_unique_ids
        try:
            self._file = _open_text(self.path, "r")
        except OSError as exc:
            raise TraceError("file", f"cannot open: {exc.strerror or exc}",
                             path=self._name) from None
        self._line_no = 0
        self.header = self._read_header()

    def _next_line(self) -> str | None:
        while True:
            try:
                text = self._file.readline()
            except (OSError, UnicodeDecodeError, EOFError) as exc:
                raise TraceError("file", f"cannot read: {exc}", line=self._line_no + 1,
                                 path=self._name) from None
            if not text:
                return None
            self._line_no += 1
            if text.strip():
                return text

    def _decode(self, text: str) -> object:
        try:
            return _load_json_line(text)
        except ValueError as exc:
            raise TraceError("json", f"not valid JSON: {exc}", line=self._line_no,
                             path=self._name) from None

    def _read_header(self) -> TraceHeader:
        text = self._next_line()
        if text is None:
            self.close()
            raise TraceError("header", "the file is empty; line 1 must be the header",
                             line=1, path=self._name)
        try:
            return header_from_json(self._decode(text))
        except TraceError:
            self.close()
            raise
        except ValidationError as exc:
            self.close()
            raise TraceError(exc.field, exc.message, line=self._line_no,
                             path=self._name) from None

    def __iter__(self) -> Iterator[TraceRequest]:
        previous_t = 0.0
        seen: set[str] = set()
        while (text := self._next_line()) is not None:
            try:
                request = request_from_json(self._decode(text))
                check_request_in_header(self.header, request)
                check_order(previous_t, request)
                if self._check_unique:
                    if request.id in seen:
                        raise ValidationError("id", f"{request.id!r} appears twice")
                    seen.add(request.id)
            except TraceError:
                raise
            except ValidationError as exc:
                raise TraceError(exc.field, exc.message, line=self._line_no,
                                 path=self._name) from None
            previous_t = request.t_s
            yield request

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_trace(path: str | Path, *, check_unique_ids: bool = True) -> TraceReader:
    """Open a trace for streaming (see :class:`TraceReader`)."""
    return TraceReader(path, check_unique_ids=check_unique_ids)


def read_trace(path: str | Path) -> Trace:
    """Read and validate a whole trace."""
    with open_trace(path) as reader:
        requests = tuple(reader)
        return Trace(reader.header, requests)


def _tmp_name(name: str) -> str:
    """``trace.jsonl.gz`` is written as ``trace.jsonl.tmp.gz``, others as ``NAME.tmp``."""
    return name[:-3] + ".tmp.gz" if name.endswith(".gz") else name + ".tmp"


class TraceWriter:
    """Writes a trace line by line, checking order, window and ids as it goes.

    A regular file is written to ``<path>.tmp`` and renamed on a clean close, so a failed run
    never leaves a half trace under the final name; a character device or a fifo is written in
    place, never replaced (workloads.outfiles). ``check_unique_ids=False`` skips the set of ids
    seen (for generators whose ids are unique by construction: millions of requests).
    """

    def __init__(
        self, path: str | Path, header: TraceHeader, *, check_unique_ids: bool = True
    ) -> None:
        self.path = Path(path)
        self.header = header
        self._check_unique = check_unique_ids
        self._out = OutFile(path, tmp_name=_tmp_name)
        try:
            self._file = _open_text(self._out.write_path, "w", gz=self.path.name.endswith(".gz"))
        except OSError as exc:
            raise TraceError("file", f"cannot write: {exc.strerror or exc}",
                             path=str(path)) from None
        self._file.write(_dumps(header.to_json()) + "\n")
        self._previous_t = 0.0
        self._seen: set[str] = set()
        self.count = 0

    def write(self, request: TraceRequest) -> None:
        try:
            check_request_in_header(self.header, request)
            check_order(self._previous_t, request)
            if self._check_unique:
                if request.id in self._seen:
                    raise ValidationError("id", f"{request.id!r} appears twice")
                self._seen.add(request.id)
        except ValidationError as exc:
            raise TraceError(exc.field, exc.message, line=self.count + 2,
                             path=str(self.path)) from None
        self._previous_t = request.t_s
        self._file.write(_dumps(request.to_json()) + "\n")
        self.count += 1

    def write_all(self, requests: Iterable[TraceRequest]) -> None:
        for request in requests:
            self.write(request)

    def close(self, *, keep: bool = True) -> None:
        self._file.close()
        if keep:
            self._out.commit()
        else:
            self._out.discard()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(keep=exc_type is None)


def write_trace(path: str | Path, trace: Trace) -> None:
    """Write a whole trace."""
    with TraceWriter(path, trace.header) as writer:
        writer.write_all(trace.requests)


def write_requests(
    path: str | Path,
    header: TraceHeader,
    requests: Iterable[TraceRequest],
    *,
    check_unique_ids: bool = True,
) -> int:
    """Stream ``requests`` into a trace file; returns how many were written."""
    with TraceWriter(path, header, check_unique_ids=check_unique_ids) as writer:
        writer.write_all(requests)
        return writer.count
