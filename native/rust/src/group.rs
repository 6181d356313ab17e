//! One list of hosts of the in-memory store, a (region, class) (reference:
//! host_registry/memory.py, `_Group`): the hosts sorted by (U, id), cut into blocks that know,
//! per room key, the largest (CPU, memory) room of their hosts, so that a walk skips a list or a
//! block that cannot hold a request without reading its hosts.
//!
//! The same blocks as the reference (split above twice the block size, a small block merged
//! into a neighbour), the same caches (a host that joins can only raise them; one that leaves
//! forgets those it may have held) and the same order of hosts in a walk. Rooms are i64 here:
//! a view whose rooms are beyond 64 bits (or whose U is not a number) is refused with an
//! OverflowError (ValueError) before anything changes, and the store keeps that list in Python.
//! A walk ends when its list changes under it, as the reference's does.

use std::cmp::Ordering;

use pyo3::exceptions::{PyIndexError, PyOverflowError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use pyo3::{ffi, intern, AsPyPointer};

/// Room keys (domain.rooms.ROOM_KEYS).
pub const KEYS: usize = 13;

type Room = (i64, i64);
type Cache = [Option<Room>; KEYS];

struct Entry {
    util: f64,
    id: String,
    view: PyObject,
    rooms: [Room; KEYS],
}

/// The order of the reference's entries (U, id, view): ids are unique in a list, so the view
/// never decides; U is never NaN here (insert refuses it).
fn order(util: f64, id: &str, other: &Entry) -> Ordering {
    if util < other.util {
        Ordering::Less
    } else if util > other.util {
        Ordering::Greater
    } else {
        id.cmp(other.id.as_str()) // UTF-8 bytes sort as Python's code points
    }
}

/// domain's _grow: a host with ``rooms`` joined, so the known largest rooms can only grow.
fn grow(cache: &mut Cache, rooms: &[Room; KEYS]) {
    for (known, room) in cache.iter_mut().zip(rooms.iter()) {
        if let Some(best) = known {
            if room.0 >= best.0 || room.1 >= best.1 {
                *known = Some((room.0.max(best.0), room.1.max(best.1)));
            }
        }
    }
}

/// _shrink: a host with ``rooms`` left, so a largest room it may have held becomes unknown.
fn shrink(cache: &mut Cache, rooms: &[Room; KEYS]) {
    for (known, room) in cache.iter_mut().zip(rooms.iter()) {
        if let Some(best) = known {
            if room.0 >= best.0 || room.1 >= best.1 {
                *known = None;
            }
        }
    }
}

fn read_room(pair: *mut ffi::PyObject, py: Python<'_>) -> PyResult<Room> {
    // SAFETY: ``pair`` is a borrowed reference held alive by the view's rooms tuple.
    let pair: &PyAny = unsafe { py.from_borrowed_ptr(pair) };
    let pair: &PyTuple = pair.downcast()?;
    if pair.len() != 2 {
        return Err(PyIndexError::new_err("a room is a (cpu, memory) pair"));
    }
    Ok((pair.get_item(0)?.extract::<i64>()?, pair.get_item(1)?.extract::<i64>()?))
}

/// A view's (U, id, rooms), or the error that keeps its list in Python.
fn read_view(view: &PyAny) -> PyResult<(f64, String, [Room; KEYS])> {
    let py = view.py();
    let util: f64 = view.getattr(intern!(py, "util"))?.extract()?;
    if util.is_nan() {
        return Err(PyValueError::new_err("a host's U is not a number"));
    }
    let id: String = view.getattr(intern!(py, "id"))?.extract()?;
    let rooms_object = view.getattr(intern!(py, "rooms"))?;
    let rooms_tuple: &PyTuple = rooms_object.downcast()?;
    if rooms_tuple.len() != KEYS {
        return Err(PyIndexError::new_err(format!(
            "a host has {} rooms, {} expected",
            rooms_tuple.len(),
            KEYS
        )));
    }
    let mut rooms = [(0i64, 0i64); KEYS];
    for (index, slot) in rooms.iter_mut().enumerate() {
        // SAFETY: index < len (checked above); the item is borrowed from the live tuple.
        let item = unsafe { ffi::PyTuple_GET_ITEM(rooms_tuple.as_ptr(), index as ffi::Py_ssize_t) };
        *slot = read_room(item, py).map_err(|error| {
            if error.is_instance_of::<PyOverflowError>(py) {
                PyOverflowError::new_err("a room beyond 64 bits")
            } else {
                error
            }
        })?;
    }
    Ok((util, id, rooms))
}

#[pyclass(module = "greenswarm_core")]
pub struct HostGroup {
    block_size: usize,
    blocks: Vec<Vec<Entry>>,
    /// Per block, per key, its largest (CPU, memory) room, or None until asked.
    rooms: Vec<Cache>,
    /// The same for the whole list.
    top: Cache,
    #[pyo3(get)]
    size: usize,
    /// Changed on every insert and removal: a walk that began before stops.
    version: u64,
}

impl HostGroup {
    /// bisect_right over the blocks' first entries, less one (-1: before the first block).
    fn block_of(&self, util: f64, id: &str) -> isize {
        let after = self
            .blocks
            .partition_point(|block| order(util, id, &block[0]) != Ordering::Less);
        after as isize - 1
    }

    fn block_room(&mut self, b: usize, index: usize) -> Room {
        if let Some(best) = self.rooms[b][index] {
            return best;
        }
        let mut best = (-1i64, -1i64);
        for entry in &self.blocks[b] {
            let room = entry.rooms[index];
            best.0 = best.0.max(room.0);
            best.1 = best.1.max(room.1);
        }
        self.rooms[b][index] = Some(best);
        best
    }

    fn room(&mut self, index: usize) -> Room {
        match self.top[index] {
            Some(top) => top,
            None => self.compute_list_room(index),
        }
    }

    fn compute_list_room(&mut self, index: usize) -> Room {
        let mut top = (-1i64, -1i64);
        for b in 0..self.blocks.len() {
            let best = self.block_room(b, index);
            top.0 = top.0.max(best.0);
            top.1 = top.1.max(best.1);
        }
        self.top[index] = Some(top);
        top
    }
}

/// A need as i128: an int of 64 bits read directly; a larger one (which no 64-bit room holds,
/// or every room holds) as the largest or smallest value of its sign.
fn need_value(value: &PyAny) -> PyResult<i128> {
    // SAFETY: ``value`` is a live object; PyLong_AsLongLong sets an error on failure.
    let read = unsafe { ffi::PyLong_AsLongLong(value.as_ptr()) };
    if read != -1 {
        return Ok(read as i128);
    }
    match PyErr::take(value.py()) {
        None => Ok(-1),
        Some(error) if error.is_instance_of::<PyOverflowError>(value.py()) => {
            Ok(if value.gt(0)? { i128::MAX } else { i128::MIN })
        }
        Some(error) => Err(error),
    }
}

fn key_index(index: usize) -> PyResult<usize> {
    if index < KEYS {
        Ok(index)
    } else {
        Err(PyIndexError::new_err(format!("room key {} of {}", index, KEYS)))
    }
}

#[pymethods]
impl HostGroup {
    /// HostGroup(block_size): an empty list whose blocks split above 2 x ``block_size``.
    #[new]
    fn new(block_size: usize) -> PyResult<Self> {
        if block_size < 1 {
            return Err(PyValueError::new_err("a block holds at least one host"));
        }
        Ok(HostGroup {
            block_size,
            blocks: Vec::new(),
            rooms: Vec::new(),
            top: [None; KEYS],
            size: 0,
            version: 0,
        })
    }

    /// _Group.insert: ``view`` joins its place by (U, id).
    fn insert(&mut self, view: &PyAny) -> PyResult<()> {
        let (util, id, rooms) = read_view(view)?;
        let entry = Entry { util, id, view: view.into(), rooms };
        self.version += 1;
        self.size += 1;
        grow(&mut self.top, &entry.rooms);
        if self.blocks.is_empty() {
            self.blocks.push(vec![entry]);
            self.rooms.push([None; KEYS]);
            return Ok(());
        }
        let b = self.block_of(entry.util, &entry.id).max(0) as usize;
        let block = &mut self.blocks[b];
        let at = block.partition_point(|e| order(entry.util, &entry.id, e) != Ordering::Less);
        let joined = entry.rooms;
        block.insert(at, entry);
        if block.len() > 2 * self.block_size {
            let tail = block.split_off(self.block_size);
            self.blocks.insert(b + 1, tail);
            self.rooms[b] = [None; KEYS];
            self.rooms.insert(b + 1, [None; KEYS]);
        } else {
            grow(&mut self.rooms[b], &joined);
        }
        Ok(())
    }

    /// _Group.remove: ``view`` (this very object) leaves; RuntimeError when it is not here.
    fn remove(&mut self, view: &PyAny) -> PyResult<()> {
        let py = view.py();
        let util: f64 = view.getattr(intern!(py, "util"))?.extract()?;
        let id: String = view.getattr(intern!(py, "id"))?.extract()?;
        let b = self.block_of(util, &id);
        let found = (b >= 0 && !util.is_nan()).then(|| {
            let block = &self.blocks[b as usize];
            let index = block.partition_point(|e| order(util, &id, e) == Ordering::Greater);
            (index < block.len() && block[index].view.as_ptr() == view.as_ptr()).then(|| index)
        });
        // (none: a broken invariant, said as the reference says it)
        let index = found.flatten().ok_or_else(|| {
            PyRuntimeError::new_err(format!("host {} missing from its list", id))
        })?;
        let b = b as usize;
        let entry = self.blocks[b].remove(index);
        self.version += 1;
        self.size -= 1;
        shrink(&mut self.top, &entry.rooms);
        if self.blocks[b].is_empty() {
            self.blocks.remove(b);
            self.rooms.remove(b);
            return Ok(());
        }
        shrink(&mut self.rooms[b], &entry.rooms);
        if self.blocks[b].len() < self.block_size / 2 {
            // merge a small block into a neighbour that has room
            for left in [b as isize, b as isize - 1] {
                if left >= 0
                    && (left as usize) + 1 < self.blocks.len()
                    && self.blocks[left as usize].len() + self.blocks[left as usize + 1].len()
                        <= self.block_size
                {
                    let left = left as usize;
                    let right = self.blocks.remove(left + 1);
                    self.blocks[left].extend(right);
                    self.rooms.remove(left + 1);
                    self.rooms[left] = [None; KEYS];
                    break;
                }
            }
        }
        Ok(())
    }

    /// _Group.walk: the hosts whose room for key ``index`` holds the need, in list order (or
    /// reversed), or None when the list's largest room cannot hold it.
    fn walk(
        mut slf: PyRefMut<'_, Self>,
        index: usize,
        need_cpu: &PyAny,
        need_memory: &PyAny,
        ascending: bool,
    ) -> PyResult<Option<GroupWalk>> {
        let index = key_index(index)?;
        let (need_cpu, need_memory) = (need_value(need_cpu)?, need_value(need_memory)?);
        let top = slf.room(index);
        if (top.0 as i128) < need_cpu || (top.1 as i128) < need_memory {
            return Ok(None);
        }
        let (blocks, version) = (slf.blocks.len(), slf.version);
        Ok(Some(GroupWalk {
            group: slf.into(),
            index,
            need_cpu,
            need_memory,
            ascending,
            blocks,
            next_block: 0,
            block: None,
            pos: 0,
            version,
        }))
    }

    /// The largest (CPU, memory) room of key ``index`` in the list, computed afresh (cached).
    fn list_room(&mut self, index: usize) -> PyResult<Room> {
        Ok(self.compute_list_room(key_index(index)?))
    }

    /// Every host of the list in order (or reversed).
    fn views(&self, py: Python<'_>, ascending: bool) -> PyObject {
        let mut out: Vec<PyObject> = Vec::with_capacity(self.size);
        for block in &self.blocks {
            for entry in block {
                out.push(entry.view.clone_ref(py));
            }
        }
        if !ascending {
            out.reverse();
        }
        PyList::new(py, out).into()
    }

    /// Host ids of the list, ascending.
    fn host_ids(&self) -> Vec<String> {
        self.blocks.iter().flat_map(|block| block.iter().map(|e| e.id.clone())).collect()
    }

    /// The number of hosts of each block, in order (for the tests of the blocks' shape).
    fn block_sizes(&self) -> Vec<usize> {
        self.blocks.iter().map(Vec::len).collect()
    }
}

/// A walk of a HostGroup (the reference's generator): reads the list as it is at each step,
/// and ends when the list changed since the walk began.
#[pyclass(module = "greenswarm_core")]
pub struct GroupWalk {
    group: Py<HostGroup>,
    index: usize,
    need_cpu: i128,
    need_memory: i128,
    ascending: bool,
    /// The number of blocks when the walk began, and how many it has passed.
    blocks: usize,
    next_block: usize,
    /// The block being read, and the next position in it (counted in the walk's direction).
    block: Option<usize>,
    pos: usize,
    version: u64,
}

#[pymethods]
impl GroupWalk {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(mut slf: PyRefMut<'_, Self>, py: Python<'_>) -> Option<PyObject> {
        let walk = &mut *slf;
        let mut group = walk.group.borrow_mut(py);
        if group.version != walk.version {
            return None; // the list changed under the walk: it ends
        }
        let index = walk.index;
        loop {
            if let Some(b) = walk.block {
                let block = &group.blocks[b];
                let len = block.len();
                while walk.pos < len {
                    let at = if walk.ascending { walk.pos } else { len - 1 - walk.pos };
                    walk.pos += 1;
                    let entry = &block[at];
                    let room = entry.rooms[index];
                    if room.0 as i128 >= walk.need_cpu && room.1 as i128 >= walk.need_memory {
                        return Some(entry.view.clone_ref(py));
                    }
                }
                walk.block = None;
            }
            if walk.next_block >= walk.blocks {
                return None;
            }
            let b = if walk.ascending {
                walk.next_block
            } else {
                walk.blocks - 1 - walk.next_block
            };
            walk.next_block += 1;
            let best = group.block_room(b, index);
            if best.0 as i128 >= walk.need_cpu && best.1 as i128 >= walk.need_memory {
                walk.block = Some(b);
                walk.pos = 0;
            }
        }
    }
}
