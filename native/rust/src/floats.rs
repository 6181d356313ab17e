//! A column of floats put in order where it lies (reference: measure/stats.py, `ordered`,
//! Python's `sorted`): the run's summary sorts each tally (a decision time per decision, a
//! delay per placement, an availability per request) once, at the end of the run, and a list
//! of Python floats costs 32 bytes a value against the column's 8.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

/// Sort `values` ascending, stably: Python's `sorted` on floats, where -0.0 and 0.0 are equal
/// and keep the order they came in. None when a value is NaN: no order holds it, and `sorted`
/// leaves it where its comparisons happen to put it, so the caller asks `sorted`.
pub fn sort(values: &mut [f64]) -> Option<()> {
    if values.iter().any(|value| value.is_nan()) {
        return None;
    }
    // Stable (a merge sort): equal values keep their order, as in sorted.
    values.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    Some(())
}

/// sort_floats(column): sort a writable, contiguous buffer of doubles (an `array('d')`) in
/// place and give True; False, leaving it as it was, when a value is NaN. An empty array may
/// have no aligned storage and is refused (BufferError): its caller sorts two values or more.
#[pyfunction]
pub fn sort_floats(py: Python<'_>, column: &PyAny) -> PyResult<bool> {
    let buffer: PyBuffer<f64> = PyBuffer::get(column)?;
    if buffer.as_mut_slice(py).is_none() {
        return Err(PyTypeError::new_err("a writable, contiguous column of doubles expected"));
    }
    // SAFETY: as_mut_slice checked that the buffer is writable, C-contiguous, of f64 and
    // aligned; `buffer` holds the export for as long as the slice lives, so its owner can
    // neither resize nor free it, and no Python code runs while the slice lives (the GIL is
    // held and nothing here calls back into Python).
    let values = unsafe {
        std::slice::from_raw_parts_mut(buffer.buf_ptr() as *mut f64, buffer.item_count())
    };
    Ok(sort(values).is_some())
}
