//! `SimBackend`: the crash simulator as a [`PmemBackend`].
//!
//! What: a pool in memory whose every store, flush, fence and marker is
//! recorded (see `machine.rs`), so a test can run an engine on it, take the
//! [`Trace`], and check every crash image the run could have left.
//!
//! How: the visible image lives in a shared-memory file mapped twice
//! (`memfd.rs`): the engine reads through a read-only view, the simulator
//! writes through the other mapping while holding the global mutex that also
//! orders the events. Reads take no lock. A `SimBackend` is a cheap handle:
//! clones share the same simulated machine, so a test can keep one while a
//! [`crate::Pool`] owns another (and still read the trace after `close`).
//!
//! Invariants: only the simulator writes the image; events are recorded in the
//! order their stores became visible; `from_image` gives a machine whose
//! durable and visible images are both the given bytes (a machine after
//! power-up).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::atom::MAX_POOL_BYTES;
use super::lint::LintReport;
use super::machine::{Machine, StoreData};
use super::memfd::{self, DoubleMap};
use super::trace::Trace;
use crate::backend::{
    BackendKind, BackendOptions, Mapping, Marker, PersistenceDomain, PmemBackend,
};
use crate::error::{PmemError, Result};

struct Inner {
    path: PathBuf,
    len: u64,
    domain: PersistenceDomain,
    view: Mapping,
    store: Mapping,
    view_addr: usize,
    machine: Mutex<Machine>,
}

/// The crash-simulator backend. See the module docs.
#[derive(Clone)]
pub struct SimBackend {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SimBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimBackend")
            .field("len", &self.inner.len)
            .field("domain", &self.inner.domain)
            .field("pending_atoms", &self.pending_atoms())
            .finish()
    }
}

const SIM_PATH: &str = "<sim>";

impl SimBackend {
    /// A zeroed machine of `len` bytes. Panics if the memory cannot be mapped
    /// (use [`SimBackend::try_from_image`] to get an error instead).
    pub fn new(len: u64, domain: PersistenceDomain) -> SimBackend {
        let size = usize::try_from(len).expect("simulated pool fits in memory");
        SimBackend::from_image(vec![0u8; size], domain)
    }

    /// A machine after power-up whose durable and visible images are `image`.
    /// Panics if the memory cannot be mapped.
    pub fn from_image(image: Vec<u8>, domain: PersistenceDomain) -> SimBackend {
        SimBackend::try_from_image(image, domain)
            .unwrap_or_else(|e| panic!("cannot map a simulated pool: {e}"))
    }

    /// As [`SimBackend::from_image`], with mapping failures as errors.
    pub fn try_from_image(image: Vec<u8>, domain: PersistenceDomain) -> Result<SimBackend> {
        let path = PathBuf::from(SIM_PATH);
        let len = image.len() as u64;
        if len >= MAX_POOL_BYTES {
            return Err(PmemError::InvalidOption {
                path,
                detail: format!("{len} bytes exceed the simulator's {MAX_POOL_BYTES}-byte limit"),
            });
        }
        let DoubleMap { view, store, view_addr } =
            memfd::double_map(&image).map_err(|e| PmemError::from_io(&path, e))?;
        let machine = Mutex::new(Machine::new(domain, Arc::new(image)));
        let inner = Inner { path, len, domain, view, store, view_addr, machine };
        Ok(SimBackend { inner: Arc::new(inner) })
    }

    /// A snapshot of the trace since creation or the last [`SimBackend::reset_trace`].
    pub fn trace(&self) -> Trace {
        self.inner.machine.lock().trace(self.inner.len)
    }

    /// Start recording afresh from the current state, which becomes the new
    /// initial image. Panics if any atom is still pending (flush and fence first).
    pub fn reset_trace(&self) {
        self.inner.machine.lock().reset_trace(&self.inner.store)
    }

    /// Lints since the machine was made (across trace resets).
    pub fn lints(&self) -> LintReport {
        self.inner.machine.lock().lints()
    }

    /// Atoms stored but not yet durable (always 0 under eADR).
    pub fn pending_atoms(&self) -> u64 {
        self.inner.machine.lock().pending_atoms()
    }

    /// Lines with pending atoms.
    pub fn dirty_lines(&self) -> u64 {
        self.inner.machine.lock().dirty_lines()
    }

    /// Events recorded in the current trace.
    pub fn event_count(&self) -> u64 {
        self.inner.machine.lock().event_count()
    }

    /// What a crash right now would leave if no pending atom survived.
    pub fn durable_image(&self) -> Vec<u8> {
        self.inner.machine.lock().durable_image(&self.inner.store)
    }

    /// The visible image (every store applied).
    pub fn visible_image(&self) -> Vec<u8> {
        let mut image = vec![0u8; self.inner.view.len()];
        self.inner.view.read(0, &mut image);
        image
    }

    /// Address of the read-only view (tests check its protection).
    pub fn view_address(&self) -> usize {
        self.inner.view_addr
    }

    fn store(&self, thread: u32, offset: u64, data: StoreData<'_>) {
        self.inner.machine.lock().store(&self.inner.store, thread, offset, data)
    }
}

impl PmemBackend for SimBackend {
    fn create(opts: &BackendOptions, len: u64) -> Result<Self> {
        opts.refuse_members(BackendKind::Sim)?;
        let size = usize::try_from(len).map_err(|_| PmemError::InvalidOption {
            path: opts.path_or_memory(),
            detail: format!("{len} bytes do not fit in memory"),
        })?;
        SimBackend::try_from_image(vec![0u8; size], opts.domain)
    }

    fn open(opts: &BackendOptions) -> Result<Self> {
        Err(PmemError::InvalidOption {
            path: opts.path_or_memory(),
            detail: "a `sim` pool lives in memory and cannot be opened from a path; \
                     open a crash image with SimBackend::from_image"
                .to_string(),
        })
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Sim
    }

    fn path(&self) -> &Path {
        &self.inner.path
    }

    fn len(&self) -> u64 {
        self.inner.len
    }

    fn domain(&self) -> PersistenceDomain {
        self.inner.domain
    }

    #[inline]
    fn read(&self, offset: u64, buf: &mut [u8]) -> u64 {
        self.inner.view.read(offset, buf);
        0
    }

    #[inline]
    fn load_u64(&self, offset: u64) -> u64 {
        self.inner.view.load_u64(offset)
    }

    fn write(&self, thread: u32, offset: u64, data: &[u8]) {
        self.store(thread, offset, StoreData::Bytes(data))
    }

    fn write_zeros(&self, thread: u32, offset: u64, len: u64) {
        self.store(thread, offset, StoreData::Zeros(len))
    }

    fn store_u64(&self, thread: u32, offset: u64, value: u64) {
        assert!(offset.is_multiple_of(8), "8-byte atomic store at unaligned offset {offset}");
        self.store(thread, offset, StoreData::Word(value))
    }

    fn flush(&self, thread: u32, offset: u64, len: u64) {
        self.inner.machine.lock().flush(self.inner.len, thread, offset, len)
    }

    fn fence(&self, thread: u32, _lines_flushed: u64) -> u64 {
        self.inner.machine.lock().fence(thread);
        0
    }

    fn marker(&self, thread: u32, marker: Marker) {
        self.inner.machine.lock().marker(thread, marker)
    }
}
