# The Rust extension module of the native core (native/rust/src/lib.rs), for mypy.

__version__: str

def compute_rooms(
    t: tuple[int, ...],
    cpu_capacity: int,
    memory_capacity: int,
    cpu_limits: tuple[int, ...],
    memory_limits: tuple[int, ...],
) -> tuple[tuple[int, int], ...]: ...
def room_plan() -> list[tuple[int, int, bool]]: ...
