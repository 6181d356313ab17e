//! One host's energy meter (reference: domain/energy.py, `_HostMeter`): the energy of its
//! states as pieces of watts x seconds, summed exactly (Python's `math.fsum`) when a list of
//! pieces passes 4,096 and at the end, as the reference does, so the same energy to the bit.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;

/// The reference keeps at most this many pieces per list before summing them into one.
const PIECES: usize = 4096;

#[pyclass(module = "greenswarm_core")]
pub struct HostMeter {
    #[pyo3(get)]
    model: PyObject,
    #[pyo3(get)]
    last_t: f64,
    #[pyo3(get)]
    cpu_util: f64,
    #[pyo3(get)]
    memory: f64,
    #[pyo3(get)]
    watts: f64,
    #[pyo3(get)]
    empty: bool,
    joules: Vec<f64>,
    joules_off: Vec<f64>,
    #[pyo3(get)]
    empty_s: f64,
    /// The power state (a domain.power.PowerState), set by EnergyMeter.set_power_state.
    #[pyo3(get, set)]
    state: PyObject,
    #[pyo3(get, set)]
    state_w: Option<f64>,
    drawn: Vec<f64>,
    #[pyo3(get)]
    not_on_s: f64,
}

/// math.fsum(pieces): rare (once per 4,096 pieces), so Python's own, the reference's sum.
fn fsum(py: Python<'_>, pieces: &[f64]) -> PyResult<f64> {
    py.import(intern!(py, "math"))?
        .getattr(intern!(py, "fsum"))?
        .call1((PyList::new(py, pieces),))?
        .extract()
}

fn compact(py: Python<'_>, pieces: &mut Vec<f64>) -> PyResult<()> {
    if pieces.len() > PIECES {
        let sum = fsum(py, pieces)?;
        pieces.clear();
        pieces.push(sum);
    }
    Ok(())
}

#[pymethods]
impl HostMeter {
    /// HostMeter(model, t_start_s, watts, state): a meter from ``t_start_s``, idle and empty,
    /// drawing ``watts`` (the model's power at rest), in power ``state`` (PowerState.ON).
    #[new]
    fn new(model: PyObject, t_start_s: f64, watts: f64, state: PyObject) -> Self {
        HostMeter {
            model,
            last_t: t_start_s,
            cpu_util: 0.0,
            memory: 0.0,
            watts,
            empty: true,
            joules: Vec::new(),
            joules_off: Vec::new(),
            empty_s: 0.0,
            state,
            state_w: None,
            drawn: Vec::new(),
            not_on_s: 0.0,
        }
    }

    /// _HostMeter.advance: the state held until ``t``.
    pub fn advance(&mut self, py: Python<'_>, t: f64) -> PyResult<()> {
        let dt = t - self.last_t;
        if dt > 0.0 {
            let watts = self.watts;
            self.joules.push(watts * dt);
            if self.empty {
                self.empty_s += dt;
            } else {
                self.joules_off.push(watts * dt);
            }
            if let Some(state_w) = self.state_w {
                self.drawn.push((state_w - watts) * dt);
                self.not_on_s += dt;
                compact(py, &mut self.drawn)?;
            }
            self.last_t = t;
            compact(py, &mut self.joules)?;
            compact(py, &mut self.joules_off)?;
        }
        Ok(())
    }

    /// _HostMeter.set: the state from ``t`` on; a time before the last raises the
    /// reference's ValidationError, with its text.
    #[allow(clippy::too_many_arguments)]
    pub fn set(
        &mut self,
        py: Python<'_>,
        t: f64,
        host_id: &PyAny,
        cpu_util: f64,
        memory: f64,
        empty: bool,
        watts: f64,
    ) -> PyResult<()> {
        if t < self.last_t {
            let message = intern!(py, "{} is before the last state of {} at {}")
                .call_method1(intern!(py, "format"), (t, host_id, self.last_t))?;
            let error = py
                .import(intern!(py, "domain.errors"))?
                .getattr(intern!(py, "ValidationError"))?
                .call1((intern!(py, "t"), message))?;
            return Err(PyErr::from_value(error));
        }
        self.advance(py, t)?;
        self.cpu_util = cpu_util;
        self.memory = memory;
        self.empty = empty;
        self.watts = watts;
        Ok(())
    }

    /// The pieces not yet summed (copies).
    #[getter]
    fn joules(&self) -> Vec<f64> {
        self.joules.clone()
    }

    #[getter]
    fn joules_off(&self) -> Vec<f64> {
        self.joules_off.clone()
    }

    #[getter]
    fn drawn(&self) -> Vec<f64> {
        self.drawn.clone()
    }
}
