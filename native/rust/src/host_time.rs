//! One host's time accounting for the metrics recorder (reference: measure/host_time.py,
//! `HostTime` and `advance`): its current state, its time integrals and the bins of the
//! plots' series. The same float operations in the same order as the reference, so the same
//! sums to the last bit (the differential tests compare them with `==`).

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::energy::HostMeter;

/// The series of measure.results.SERIES_COLUMNS, then the coverage of each bin.
const N_SERIES: usize = 7;
const N_COLUMNS: usize = N_SERIES + 1;

#[pyclass(module = "greenswarm_core")]
pub struct HostTime {
    #[pyo3(get)]
    cap_cpu: PyObject,
    #[pyo3(get)]
    cap_mem: PyObject,
    cap_cpu_f: f64,
    cap_mem_f: f64,
    #[pyo3(get)]
    model: PyObject,
    #[pyo3(get)]
    last_t: f64,
    #[pyo3(get)]
    cpu: f64,
    #[pyo3(get)]
    mem: f64,
    #[pyo3(get)]
    mem_bytes: f64,
    #[pyo3(get)]
    power: f64,
    #[pyo3(get)]
    cpu_alloc: f64,
    #[pyo3(get)]
    mem_alloc: f64,
    #[pyo3(get)]
    tasks: i64,
    #[pyo3(get)]
    used: bool,
    #[pyo3(get)]
    cpu_s: f64,
    #[pyo3(get)]
    mem_s: f64,
    #[pyo3(get)]
    cpu_busy_s: f64,
    #[pyo3(get)]
    mem_busy_s: f64,
    #[pyo3(get)]
    busy_s: f64,
    #[pyo3(get)]
    empty_s: f64,
    #[pyo3(get)]
    cpu_alloc_s: f64,
    #[pyo3(get)]
    mem_alloc_s: f64,
    #[pyo3(get)]
    of_busy_s: f64,
    #[pyo3(get)]
    region_s: [f64; 3],
    #[pyo3(get, set)]
    oom: i64,
    bins: [Vec<f64>; N_COLUMNS],
    table: Option<Table>,
    /// The host's id and its energy meter, when the book's meter is the Rust one: ``record``
    /// updates it as HostBook.record does (``EnergyMeter.update_unchecked``).
    meter: Option<(PyObject, Py<HostMeter>)>,
    lee_below: f64,
    eed_above: f64,
    t0_s: f64,
    step_s: f64,
}

const GIB: f64 = (1u64 << 30) as f64;

/// A power model's table and memory watts (domain.energy.PowerModel), to compute its
/// ``power_w_unchecked`` here with the same float operations.
struct Table {
    watts: [f64; 11],
    memory_w_per_gib: f64,
}

impl Table {
    /// PowerTable._interpolate plus the memory term, as PowerModel.power_w_unchecked.
    fn power_w(&self, cpu_util: f64, memory_in_use_bytes: f64) -> f64 {
        let u = if cpu_util < 1.0 { cpu_util } else { 1.0 }; // min(1.0, cpu_util)
        let position = u * 10.0;
        let floor = position.floor();
        let index = if floor < 9.0 { floor } else { 9.0 }; // min(9, floor(position))
        let fraction = position - index;
        let i = index as usize; // position >= 0: the caller checked the utilization
        let (low, high) = (self.watts[i], self.watts[i + 1]);
        low + (high - low) * fraction + self.memory_w_per_gib * (memory_in_use_bytes / GIB)
    }
}

impl HostTime {
    /// The host's power at that load: its model's ``power_w_unchecked``, computed here when the
    /// model gave its table (a PowerModel), else asked of the model.
    fn watts(&self, py: Python<'_>, cpu: f64, mem_bytes: f64) -> PyResult<f64> {
        match &self.table {
            Some(table) if cpu >= 0.0 && cpu.is_finite() => Ok(table.power_w(cpu, mem_bytes)),
            _ => self
                .model
                .call_method1(py, intern!(py, "power_w_unchecked"), (cpu, mem_bytes))?
                .extract(py),
        }
    }

    /// Integrate the current state over [last_t, t) (measure.host_time.advance).
    fn integrate(&mut self, t: f64) -> PyResult<()> {
        let a = self.last_t;
        let dt = t - a;
        if dt <= 0.0 {
            return Ok(());
        }
        let empty = self.tasks == 0;
        self.cpu_s += self.cpu * dt;
        self.mem_s += self.mem * dt;
        self.cpu_alloc_s += self.cpu_alloc * dt;
        self.mem_alloc_s += self.mem_alloc * dt;
        if empty {
            self.empty_s += dt;
        } else {
            self.busy_s += dt;
            self.cpu_busy_s += self.cpu * dt;
            self.mem_busy_s += self.mem * dt;
            // max(cpu_alloc, mem_alloc) as Python takes it: the first unless the second is larger
            let most = if self.mem_alloc > self.cpu_alloc { self.mem_alloc } else { self.cpu_alloc };
            self.of_busy_s += most * dt;
        }
        let total = if self.mem > self.cpu { self.mem } else { self.cpu };
        let region = if total < self.lee_below {
            0
        } else if total <= self.eed_above {
            1
        } else {
            2
        };
        self.region_s[region] += dt;
        let values = [
            self.cpu,
            self.mem,
            self.cpu_alloc,
            self.mem_alloc,
            self.tasks as f64,
            self.power,
            if empty { 0.0 } else { self.power },
        ];
        let (t0_s, step_s) = (self.t0_s, self.step_s);
        let mut start = a;
        while start < t {
            let mut index = ((start - t0_s) / step_s).floor();
            let mut bin_end = t0_s + (index + 1.0) * step_s;
            if !(bin_end < t) {
                bin_end = t;
            }
            if bin_end <= start {
                // float edge: move to the next bin
                index += 1.0;
                bin_end = t0_s + (index + 1.0) * step_s;
                if !(bin_end < t) {
                    bin_end = t;
                }
            }
            if !(index >= 0.0 && index < (1u64 << 40) as f64) {
                return Err(PyValueError::new_err(format!(
                    "bin {} of a host's series is out of range (t {}, start {})",
                    index, t, t0_s
                )));
            }
            let index = index as usize;
            let piece = bin_end - start;
            if self.bins[0].len() <= index {
                for column in self.bins.iter_mut() {
                    column.resize(index + 1, 0.0);
                }
            }
            for (column, value) in self.bins.iter_mut().zip(values.iter()) {
                column[index] += value * piece;
            }
            self.bins[N_SERIES][index] += piece;
            start = bin_end;
        }
        self.last_t = t;
        Ok(())
    }
}

#[pymethods]
impl HostTime {
    /// HostTime(cap_cpu, cap_mem, model, t0, bins, lee_below, eed_above, t0_s, step_s,
    /// table=None, meter=None): a host of that capacity and power model from t0, with
    /// ``bins`` bins made at once, in a book whose regions, first bin and bin width are those.
    /// ``table``: the model's 11 watts and memory watts per GiB when it is a PowerModel (its
    /// power is then computed here), else None (asked of ``model.power_w_unchecked``).
    /// ``meter``: (host id, its HostMeter) for ``record`` to update, else None (the caller
    /// feeds the energy meter, reading ``power``).
    #[new]
    #[args(table = "None", meter = "None")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        cap_cpu: PyObject,
        cap_mem: PyObject,
        model: PyObject,
        t0: f64,
        bins: usize,
        lee_below: f64,
        eed_above: f64,
        t0_s: f64,
        step_s: f64,
        table: Option<([f64; 11], f64)>,
        meter: Option<(PyObject, Py<HostMeter>)>,
    ) -> PyResult<Self> {
        let cap_cpu_f: f64 = cap_cpu.extract(py)?;
        let cap_mem_f: f64 = cap_mem.extract(py)?;
        let mut host = HostTime {
            cap_cpu,
            cap_mem,
            cap_cpu_f,
            cap_mem_f,
            model,
            last_t: t0,
            cpu: 0.0,
            mem: 0.0,
            mem_bytes: 0.0,
            power: 0.0,
            cpu_alloc: 0.0,
            mem_alloc: 0.0,
            tasks: 0,
            used: false,
            cpu_s: 0.0,
            mem_s: 0.0,
            cpu_busy_s: 0.0,
            mem_busy_s: 0.0,
            busy_s: 0.0,
            empty_s: 0.0,
            cpu_alloc_s: 0.0,
            mem_alloc_s: 0.0,
            of_busy_s: 0.0,
            region_s: [0.0; 3],
            oom: 0,
            bins: std::array::from_fn(|_| vec![0.0; bins]),
            table: table.map(|(watts, memory_w_per_gib)| Table { watts, memory_w_per_gib }),
            meter,
            lee_below,
            eed_above,
            t0_s,
            step_s,
        };
        host.power = host.watts(py, 0.0, 0.0)?;
        Ok(host)
    }

    /// The state held until ``t`` (measure.host_time.advance).
    fn advance(&mut self, t: f64) -> PyResult<()> {
        self.integrate(t)
    }

    /// The state from ``t`` on (measure.host_time.HostBook.record; allocations: None keeps
    /// them): the state until ``t`` integrated first, the power recomputed only when the load
    /// changed, then the energy meter's state set when this host holds it.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        py: Python<'_>,
        t: f64,
        cpu: f64,
        mem: f64,
        mem_bytes: f64,
        task_count: i64,
        cpu_alloc: Option<f64>,
        mem_alloc: Option<f64>,
    ) -> PyResult<()> {
        self.integrate(t)?;
        if cpu != self.cpu || mem_bytes != self.mem_bytes {
            self.power = self.watts(py, cpu, mem_bytes)?;
        }
        self.cpu = cpu;
        self.mem = mem;
        self.mem_bytes = mem_bytes;
        self.tasks = task_count;
        if task_count != 0 {
            self.used = true;
        }
        if let Some(value) = cpu_alloc {
            self.cpu_alloc = value / self.cap_cpu_f;
        }
        if let Some(value) = mem_alloc {
            self.mem_alloc = value / self.cap_mem_f;
        }
        if let Some((host_id, meter)) = &self.meter {
            let mut meter = meter.as_ref(py).try_borrow_mut()?;
            meter.set(py, t, host_id.as_ref(py), cpu, mem_bytes, task_count == 0, self.power)?;
        }
        Ok(())
    }

    /// The bins: one list per series, then the coverage (copies).
    #[getter]
    fn bins(&self, py: Python<'_>) -> PyObject {
        let columns: Vec<PyObject> =
            self.bins.iter().map(|column| PyList::new(py, column).to_object(py)).collect();
        PyList::new(py, columns).to_object(py)
    }
}
