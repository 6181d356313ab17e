//! The simulator's queue of timed events (reference: sim/event_heap.py, `EventHeap`, a `heapq`
//! of (t, kind, seq, obj) tuples): events leave in the order of their time, then their kind,
//! then the order they were pushed in (seq, counted by the heap), so two events never tie and
//! their objects are never compared. A time that is not a number is refused (a heap of tuples
//! would keep it, in no defined order); a kind beyond 64 bits is refused (OverflowError).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};

struct Event {
    t: f64,
    kind: i64,
    seq: u64,
    obj: PyObject,
}

impl Event {
    /// The reference's tuple order on (t, kind, seq); t is never NaN (push refuses it), and
    /// -0.0 equals 0.0 as in Python.
    fn order(&self, other: &Self) -> Ordering {
        match self.t.partial_cmp(&other.t) {
            Some(Ordering::Equal) | None => {
                (self.kind, self.seq).cmp(&(other.kind, other.seq))
            }
            Some(order) => order,
        }
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.order(other) == Ordering::Equal
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Event {
    /// Reversed: std's BinaryHeap keeps the greatest on top, the queue the earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        other.order(self)
    }
}

/// EventHeap(): the simulator's events in time order, with the objects they concern.
#[pyclass(module = "greenswarm_core")]
pub struct EventHeap {
    heap: BinaryHeap<Event>,
    seq: u64,
}

#[pymethods]
impl EventHeap {
    #[new]
    fn new() -> Self {
        EventHeap { heap: BinaryHeap::new(), seq: 0 }
    }

    fn __len__(&self) -> usize {
        self.heap.len()
    }

    /// Queue ``obj`` for time ``t`` with ``kind``.
    fn push(&mut self, t: f64, kind: i64, obj: PyObject) -> PyResult<()> {
        if t.is_nan() {
            return Err(PyValueError::new_err("an event's time is not a number"));
        }
        self.seq += 1;
        self.heap.push(Event { t, kind, seq: self.seq, obj });
        Ok(())
    }

    /// The earliest event as (t, kind, obj) when its time is at most ``limit``, else None
    /// (and it stays).
    fn pop_through(&mut self, limit: f64) -> Option<(f64, i64, PyObject)> {
        match self.heap.peek() {
            Some(event) if event.t <= limit => {}
            _ => return None,
        }
        self.heap.pop().map(|event| (event.t, event.kind, event.obj))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for event in self.heap.iter() {
            visit.call(&event.obj)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.heap.clear();
    }
}
