# The Rust extension module of the native core (native/rust/src/lib.rs), for mypy.

from domain.energy import PowerModel

__version__: str

def compute_rooms(
    t: tuple[int, ...],
    cpu_capacity: int,
    memory_capacity: int,
    cpu_limits: tuple[int, ...],
    memory_limits: tuple[int, ...],
) -> tuple[tuple[int, int], ...]: ...
def room_plan() -> list[tuple[int, int, bool]]: ...

class HostTime:
    """One host's time accounting (measure.host_time.HostTime and advance, in Rust)."""

    cap_cpu: int
    cap_mem: int
    model: PowerModel
    last_t: float
    cpu: float
    mem: float
    mem_bytes: float
    power: float
    cpu_alloc: float
    mem_alloc: float
    tasks: int
    used: bool
    cpu_s: float
    mem_s: float
    cpu_busy_s: float
    mem_busy_s: float
    busy_s: float
    empty_s: float
    cpu_alloc_s: float
    mem_alloc_s: float
    of_busy_s: float
    region_s: list[float]
    oom: int
    bins: list[list[float]]
    def __init__(
        self,
        cap_cpu: int,
        cap_mem: int,
        model: PowerModel,
        t0: float,
        bins: int,
        lee_below: float,
        eed_above: float,
        t0_s: float,
        step_s: float,
        table: tuple[tuple[float, ...], float] | None = None,
    ) -> None: ...
    def advance(self, t: float) -> None: ...
    def record(
        self,
        t: float,
        cpu: float,
        mem: float,
        mem_bytes: float,
        task_count: int,
        cpu_alloc: float | None,
        mem_alloc: float | None,
    ) -> float: ...
