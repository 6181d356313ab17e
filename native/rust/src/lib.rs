//! greenswarm_core: the Rust part of greenswarm's native core (DESIGN 10).
//!
//! Each function here has a Python reference implementation that stays the definition of the
//! result (named in its doc); the differential tests (tests/unit/test_native_rust.py,
//! tests/integration/test_native_rust.py) require identical results from both. Integers
//! only: where Python's arithmetic is exact (ints, Fractions), this is too (i128 inside, and
//! an OverflowError, on which the caller falls back to Python, for values beyond i64).

use pyo3::exceptions::{PyIndexError, PyOverflowError};
use pyo3::{ffi, AsPyPointer};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

mod energy;
mod event_heap;
mod floats;
mod group;
mod host_time;
mod rooms;

/// The number of terms of a host's tally (domain/tally.py).
const TALLY_SIZE: usize = 20;

fn read_ints<const N: usize>(values: &PyTuple, what: &str) -> PyResult<[i64; N]> {
    if values.len() < N {
        return Err(PyIndexError::new_err(format!(
            "{} has {} terms, {} expected",
            what,
            values.len(),
            N
        )));
    }
    let mut out = [0i64; N];
    for (index, slot) in out.iter_mut().enumerate() {
        // SAFETY: index < len (checked above); the item is borrowed from the live tuple.
        let item = unsafe { ffi::PyTuple_GET_ITEM(values.as_ptr(), index as ffi::Py_ssize_t) };
        let value = unsafe { ffi::PyLong_AsLongLong(item) };
        if value == -1 {
            if let Some(error) = PyErr::take(values.py()) {
                return Err(error); // TypeError (not an int) or OverflowError (beyond i64)
            }
        }
        *slot = value;
    }
    Ok(out)
}

fn narrow(value: i128) -> PyResult<i64> {
    i64::try_from(value).map_err(|_| PyOverflowError::new_err("a room beyond 64 bits"))
}

/// A tuple of pairs of ints; equal pairs share one tuple object (a tuple is immutable: only
/// identity tells them apart, and nothing compares rooms by identity).
fn pairs_tuple(py: Python<'_>, pairs: &[(i128, i128)]) -> PyResult<PyObject> {
    let mut objects: Vec<((i128, i128), PyObject)> = Vec::with_capacity(pairs.len());
    let mut items: Vec<PyObject> = Vec::with_capacity(pairs.len());
    for pair in pairs {
        let found = objects.iter().find(|(seen, _)| seen == pair).map(|(_, o)| o.clone_ref(py));
        let object = match found {
            Some(object) => object,
            None => {
                let object = (narrow(pair.0)?, narrow(pair.1)?).to_object(py);
                objects.push((*pair, object.clone_ref(py)));
                object
            }
        };
        items.push(object);
    }
    Ok(PyTuple::new(py, items).to_object(py))
}

/// compute_rooms(t, cpu_capacity, memory_capacity, cpu_limits, memory_limits): the room of
/// every pass, in domain.rooms.ROOM_KEYS order (reference: domain.rooms.compute_rooms_reference).
#[pyfunction]
fn compute_rooms(
    py: Python<'_>,
    t: &PyTuple,
    cpu_capacity: i64,
    memory_capacity: i64,
    cpu_limits: &PyTuple,
    memory_limits: &PyTuple,
) -> PyResult<PyObject> {
    let tally: [i64; TALLY_SIZE] = read_ints(t, "the tally")?;
    let cpu_limits: [i64; 4] = read_ints(cpu_limits, "cpu_limits")?;
    let memory_limits: [i64; 4] = read_ints(memory_limits, "memory_limits")?;
    let host = rooms::Host {
        tally,
        cpu_capacity,
        memory_capacity,
        cpu_limits,
        memory_limits,
    };
    pairs_tuple(py, &rooms::compute(&host))
}

/// The room plan this build computes, as (kind, class bound, job) with kinds 0 simple, 1 cut,
/// 2 kill: the tests compare it with domain.rooms' own plan.
#[pyfunction]
fn room_plan() -> Vec<(u8, i64, bool)> {
    rooms::PLAN.iter().map(|p| (p.kind as u8, p.cls, p.job)).collect()
}

#[pymodule]
fn greenswarm_core(_py: Python<'_>, m: &PyModule) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(compute_rooms, m)?)?;
    m.add_function(wrap_pyfunction!(room_plan, m)?)?;
    m.add_function(wrap_pyfunction!(floats::sort_floats, m)?)?;
    m.add_class::<host_time::HostTime>()?;
    m.add_class::<energy::HostMeter>()?;
    m.add_class::<group::HostGroup>()?;
    m.add_class::<group::GroupWalk>()?;
    m.add_class::<event_heap::EventHeap>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
