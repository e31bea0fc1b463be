//! `emu`: the `fs` backend plus the NVM latency model of [`crate::latency`].
//!
//! Reads pay the modelled read latency, fences pay the modelled write-back cost
//! of the lines flushed since the thread's previous fence. The delays are TSC
//! busy-waits (see [`crate::cpu::busy_wait_ns`]) and are returned to the
//! caller, which adds them to the worker's `stall_ns` counter.

use std::path::Path;

use super::{BackendKind, BackendOptions, FsBackend, PersistenceDomain, PmemBackend};
use crate::cpu::busy_wait_ns;
use crate::error::Result;
use crate::latency::LatencyModel;

pub struct EmuBackend {
    inner: FsBackend,
    model: LatencyModel,
}

impl EmuBackend {
    pub fn model(&self) -> &LatencyModel {
        &self.model
    }
}

impl PmemBackend for EmuBackend {
    fn create(opts: &BackendOptions, len: u64) -> Result<Self> {
        Ok(EmuBackend { inner: FsBackend::create(opts, len)?, model: opts.latency })
    }
    fn open(opts: &BackendOptions) -> Result<Self> {
        Ok(EmuBackend { inner: FsBackend::open(opts)?, model: opts.latency })
    }
    fn kind(&self) -> BackendKind {
        BackendKind::Emu
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn members(&self) -> &[super::MemberFile] {
        self.inner.members()
    }
    fn domain(&self) -> PersistenceDomain {
        self.inner.domain()
    }
    #[inline]
    fn read(&self, offset: u64, buf: &mut [u8]) -> u64 {
        self.inner.mapping().read(offset, buf);
        busy_wait_ns(self.model.read_cost_ns(offset, buf.len() as u64))
    }
    #[inline]
    fn load_u64(&self, offset: u64) -> u64 {
        self.inner.load_u64(offset)
    }
    #[inline]
    fn write(&self, thread: u32, offset: u64, data: &[u8]) {
        self.inner.write(thread, offset, data)
    }
    #[inline]
    fn write_zeros(&self, thread: u32, offset: u64, len: u64) {
        self.inner.write_zeros(thread, offset, len)
    }
    #[inline]
    fn store_u64(&self, thread: u32, offset: u64, value: u64) {
        self.inner.store_u64(thread, offset, value)
    }
    #[inline]
    fn flush(&self, thread: u32, offset: u64, len: u64) {
        self.inner.flush(thread, offset, len)
    }
    #[inline]
    fn fence(&self, thread: u32, lines_flushed: u64) -> u64 {
        self.inner.fence(thread, lines_flushed);
        busy_wait_ns(self.model.fence_cost_ns(lines_flushed))
    }
    fn reserve_space(&self) -> Result<()> {
        self.inner.reserve_space()
    }
    fn sync_all(&self) -> Result<()> {
        self.inner.sync_all()
    }
}
