"""Every request's service level, in submission order (``requests.jsonl``, DESIGN 3.10), held as
columns. Pure: no I/O.

A day on 1,000 hosts keeps about ten million of them until the run ends, and hands them from a
policy's process to the parent. As one :class:`measure.service_levels.RequestLevel` each, that
is about 170 bytes a request held (1.6 GiB); as columns (the ids' UTF-8 in one buffer, each
figure in an array) under a third, and a pickle is the columns' bytes
(``python -m benchmarks.request_levels``). Reading one builds its :class:`RequestLevel`.

:class:`LevelSlots` is what the recorder's book fills: a slot per admitted request, at its
order of submission, filled when the request is over, in any order; a slot never filled (a
probe's) is left out of the levels it hands over.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from domain.model import TaskType
from measure.service_levels import RequestLevel, RequestStatus

_TYPES = tuple(TaskType)
_TYPE_CODE = {member: code for code, member in enumerate(_TYPES)}
_STATUSES = tuple(RequestStatus)
_STATUS_CODE = {member: code for code, member in enumerate(_STATUSES)}


class _Columns:
    """The figures of requests, one array each (ids apart)."""

    __slots__ = ("availability", "classes", "met", "preemptions", "statuses", "types")

    def __init__(self) -> None:
        self.classes = array("b")
        self.types = array("b")
        self.availability = array("d")
        self.met = array("b")
        self.preemptions = array("q")
        self.statuses = array("b")

    def grow(self) -> None:
        """One more request's figures, all zero until :meth:`put`."""
        self.classes.append(0)
        self.types.append(0)
        self.availability.append(0.0)
        self.met.append(0)
        self.preemptions.append(0)
        self.statuses.append(0)

    def put(self, index: int, cls: int, task_type: TaskType, availability: float, met: bool,
            preemptions: int, status: RequestStatus) -> None:
        self.classes[index] = cls
        self.types[index] = _TYPE_CODE[task_type]
        self.availability[index] = availability
        self.met[index] = met
        self.preemptions[index] = preemptions
        self.statuses[index] = _STATUS_CODE[status]

    def level(self, index: int, request_id: str) -> RequestLevel:
        return RequestLevel(request_id, self.classes[index], _TYPES[self.types[index]],
                            self.availability[index], bool(self.met[index]),
                            self.preemptions[index], _STATUSES[self.statuses[index]])


class RequestLevels(Sequence[RequestLevel]):
    """Requests' service levels, in order; equal to any sequence of the same levels."""

    __slots__ = ("_buffer", "_columns", "_lengths", "_starts")

    def __init__(self, levels: Iterable[RequestLevel] = ()) -> None:
        self._buffer = bytearray()  # the ids' UTF-8, in the order they came
        self._starts = array("Q")  # where each request's id starts in _buffer
        self._lengths = array("I")  # and its length
        self._columns = _Columns()
        for level in levels:
            self.append(level)

    def append(self, level: RequestLevel) -> None:
        self._grow()
        self._put(len(self) - 1, level.id, level.cls, level.type, level.availability,
                  level.met_slo, level.preemptions, level.status)

    def _grow(self) -> None:
        self._starts.append(0)
        self._lengths.append(0)
        self._columns.grow()

    def _put(self, index: int, request_id: str, cls: int, task_type: TaskType,
             availability: float, met: bool, preemptions: int, status: RequestStatus) -> None:
        encoded = request_id.encode("utf-8", "surrogatepass")  # JSON can carry a lone one
        self._starts[index] = len(self._buffer)
        self._lengths[index] = len(encoded)
        self._buffer += encoded
        self._columns.put(index, cls, task_type, availability, met, preemptions, status)

    def _level(self, index: int) -> RequestLevel:
        start = self._starts[index]
        encoded = self._buffer[start:start + self._lengths[index]]
        return self._columns.level(index, encoded.decode("utf-8", "surrogatepass"))

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> RequestLevel: ...

    @overload
    def __getitem__(self, index: slice) -> RequestLevels: ...

    def __getitem__(self, index: int | slice) -> RequestLevel | RequestLevels:
        if isinstance(index, slice):
            return RequestLevels(self[i] for i in range(*index.indices(len(self))))
        count = len(self)
        if not -count <= index < count:
            raise IndexError("request level index out of range")
        return self._level(index % count)

    def __iter__(self) -> Iterator[RequestLevel]:
        for index in range(len(self)):
            yield self._level(index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(
                mine == theirs for mine, theirs in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RequestLevels({len(self)} requests)"


class LevelSlots:
    """A slot per admitted request, in order, filled in any order (each id's UTF-8 goes to the
    buffer as its slot is filled); :meth:`levels` hands the filled ones over."""

    __slots__ = ("_filled", "_levels")

    def __init__(self) -> None:
        self._levels = RequestLevels()
        self._filled = array("b")

    def reserve(self) -> None:
        """One more slot, the next request's (index len - 1)."""
        self._levels._grow()
        self._filled.append(0)

    def fill(self, index: int, request_id: str, cls: int, task_type: TaskType,
             availability: float, met: bool, preemptions: int, status: RequestStatus) -> None:
        """Slot ``index`` holds this level (the fields of a :class:`RequestLevel`)."""
        self._levels._put(index, request_id, cls, task_type, availability, met, preemptions,
                          status)
        self._filled[index] = 1

    def levels(self) -> RequestLevels:
        """The filled slots, in order: the slots themselves when every one is (and these
        slots are then empty), else a copy of the filled ones."""
        if all(self._filled):
            levels, self._levels, self._filled = self._levels, RequestLevels(), array("b")
            return levels
        return RequestLevels(self._levels._level(index)
                             for index, filled in enumerate(self._filled) if filled)

