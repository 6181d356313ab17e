"""One (region, class) list of a pass, walked in one direction: what a policy asks a store for
(``domain.store.ClusterReader.candidates``).

A class of the compiled core (native.loader.MODULES): the energy passes make up to 26 of them
for every decision, and a named tuple's ``__new__`` is interpreted code, several times the cost
of a compiled constructor (half of a refused decision's time was spent making them).
"""

from __future__ import annotations

from typing import Final

from domain.regions import Region
from domain.rooms import RoomKey


class Segment:
    """The hosts of the (``region``, ``host_class``) list in (U, id) order, or reversed.

    With ``room_key``, hosts whose ``room(host, room_key)`` is below ``need`` in either
    dimension may be left out (a store may also return them; callers check). Its fields are
    ``Final`` (mypy refuses an assignment); equal and hashed by every field, as the named tuple
    it replaces.
    """

    __slots__ = ("ascending", "host_class", "need", "region", "room_key")

    def __init__(
        self,
        region: Region,
        host_class: int | None,  # None: the empty hosts
        ascending: bool,
        room_key: RoomKey | None = None,
        need: tuple[int, int] = (0, 0),
    ) -> None:
        self.region: Final = region
        self.host_class: Final = host_class
        self.ascending: Final = ascending
        self.room_key: Final = room_key
        self.need: Final = need

    def every_host(self) -> Segment:
        """The same list with no room to hold: every host of it (for notes on each one)."""
        return Segment(self.region, self.host_class, self.ascending)

    def _fields(self) -> tuple[Region, int | None, bool, RoomKey | None, tuple[int, int]]:
        return (self.region, self.host_class, self.ascending, self.room_key, self.need)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Segment):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"Segment(region={self.region!r}, host_class={self.host_class!r}, "
                f"ascending={self.ascending!r}, room_key={self.room_key!r}, need={self.need!r})")
