//! A host's room for every pass (reference: domain/rooms.py, compute_rooms_reference): the
//! largest (cpu, memory) request each pass could place on the host if it did everything it is
//! allowed to do there. Pure integer arithmetic, in i128 so no sum of i64 terms can overflow.

/// Tally indices (domain/tally.py).
const COUNT: usize = 0;
const CPU: usize = 4;
const MEM: usize = 8;
const SVC4_CPU: usize = 12;
const SVC4_MEM: usize = 13;
const CUT_CPU: usize = 14;
const CUT_MEM: usize = 17;

#[derive(Clone, Copy)]
pub enum Kind {
    Simple = 0,
    Cut = 1,
    Kill = 2,
}

pub struct Step {
    pub kind: Kind,
    /// The class bounding the new host class (4 for the simple pass: the host keeps its own).
    pub cls: i64,
    pub job: bool,
}

const fn step(kind: Kind, cls: i64, job: bool) -> Step {
    Step { kind, cls, job }
}

/// domain.rooms.ROOM_KEYS in order: simple; cut for classes 1-4; kill for (class, job).
pub const PLAN: [Step; 13] = [
    step(Kind::Simple, 4, false),
    step(Kind::Cut, 1, false),
    step(Kind::Cut, 2, false),
    step(Kind::Cut, 3, false),
    step(Kind::Cut, 4, false),
    step(Kind::Kill, 1, false),
    step(Kind::Kill, 1, true),
    step(Kind::Kill, 2, false),
    step(Kind::Kill, 2, true),
    step(Kind::Kill, 3, false),
    step(Kind::Kill, 3, true),
    step(Kind::Kill, 4, false),
    step(Kind::Kill, 4, true),
];

pub struct Host {
    pub tally: [i64; 20],
    pub cpu_capacity: i64,
    pub memory_capacity: i64,
    pub cpu_limits: [i64; 4],
    pub memory_limits: [i64; 4],
}

fn host_class(t: &[i64; 20]) -> Option<i64> {
    (1..=4).find(|&cls| t[COUNT + cls as usize - 1] != 0)
}

pub fn compute(host: &Host) -> [(i128, i128); 13] {
    let t = &host.tally;
    let cpu_capacity = host.cpu_capacity as i128;
    let memory_capacity = host.memory_capacity as i128;
    let host_class = match host_class(t) {
        None => return [(cpu_capacity, memory_capacity); 13],
        Some(cls) => cls,
    };
    let v = |index: usize| t[index] as i128;
    let cpu_allocated = v(CPU) + v(CPU + 1) + v(CPU + 2) + v(CPU + 3);
    let memory_allocated = v(MEM) + v(MEM + 1) + v(MEM + 2) + v(MEM + 3);
    // What killing every task of a class above k frees, for k = 1, 2, 3 (index k - 1).
    let above_cpu = [
        v(CPU + 1) + v(CPU + 2) + v(CPU + 3),
        v(CPU + 2) + v(CPU + 3),
        v(CPU + 3),
    ];
    let above_memory = [
        v(MEM + 1) + v(MEM + 2) + v(MEM + 3),
        v(MEM + 2) + v(MEM + 3),
        v(MEM + 3),
    ];
    let mut rooms = [(0i128, 0i128); 13];
    for (room, plan) in rooms.iter_mut().zip(PLAN.iter()) {
        let new_class = if host_class < plan.cls { host_class } else { plan.cls };
        let (free_cpu, free_memory) = match plan.kind {
            Kind::Simple => (0, 0),
            Kind::Cut if new_class < 4 => {
                let n = new_class as usize;
                (v(CUT_CPU + n - 1), v(CUT_MEM + n - 1))
            }
            Kind::Cut => (0, 0),
            Kind::Kill if plan.cls < 4 => {
                let k = plan.cls as usize;
                (above_cpu[k - 1], above_memory[k - 1])
            }
            Kind::Kill if plan.job => (v(SVC4_CPU), v(SVC4_MEM)),
            Kind::Kill => (0, 0),
        };
        let index = new_class as usize - 1;
        let cpu = host.cpu_limits[index] as i128 - cpu_allocated + free_cpu;
        let memory = host.memory_limits[index] as i128 - memory_allocated + free_memory;
        *room = (cpu.min(cpu_capacity), memory.min(memory_capacity));
    }
    rooms
}
