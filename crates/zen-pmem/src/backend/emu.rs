//! `emu`: the `fs` backend plus the NVM device model of [`crate::device`].
//!
//! Every thread slot of the pool shares one [`Device`]: flushes go through
//! the slot's write-combining buffer, fences pay the persist latency and
//! wait for the write bandwidth their media bytes take, reads pay random or
//! sequential latency and wait for read bandwidth. The delays are TSC
//! busy-waits to a deadline: the access's stamp (taken after its memory
//! operation) plus its charge, less what the thread's last wait overshot
//! ([`Device::stall`]), so that the model's own work is paid out of the
//! charge. The [`Charge`] goes back to the caller, which adds it to the
//! worker's counters.
//!
//! With an idle device (the `dram` profile) the backend never calls the
//! model: it is `fs` plus one predictable branch per read, flush and fence.
//! [`EmuBackend::set_modelled`] turns the model off and on for a running
//! pool (the same branch): `zen probe` measures this machine's own figures
//! on the very memory the model's run on.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::{BackendKind, BackendOptions, FsBackend, PersistenceDomain, PmemBackend};
use crate::device::{Charge, Clock, Device, DeviceParams, Stamp};
use crate::error::{PmemError, Result};

pub struct EmuBackend {
    inner: FsBackend,
    device: Device,
    /// `device.params().is_idle()`, or the model turned off
    /// ([`EmuBackend::set_modelled`]); kept beside the hot path's other
    /// fields. A relaxed load: the same plain load a `bool` field takes.
    idle: AtomicBool,
}

impl EmuBackend {
    /// Refuse a device model the backend cannot run, before any file is
    /// created or opened; the detail names the `--nvm-*` flag.
    fn check(opts: &BackendOptions) -> Result<()> {
        opts.latency.validate().map_err(|e| PmemError::InvalidOption {
            path: opts.path.clone().unwrap_or_default(),
            detail: e.to_string(),
        })
    }

    fn with(inner: FsBackend, params: DeviceParams) -> Result<Self> {
        Ok(EmuBackend {
            inner,
            device: Device::new(params, Default::default()),
            idle: AtomicBool::new(params.is_idle()),
        })
    }

    /// Charge accesses from now on by the model (`true`, unless the device
    /// is idle), or not at all (`false`: the backend is `fs` plus a branch,
    /// as with the `dram` profile). For `zen probe`'s baseline on the same
    /// memory; flushes issued while off cost no media bytes at the next
    /// fence, so switch between fences.
    pub fn set_modelled(&self, on: bool) {
        self.idle.store(!on || self.device.params().is_idle(), Relaxed);
    }

    #[inline]
    fn idle(&self) -> bool {
        self.idle.load(Relaxed)
    }

    pub fn model(&self) -> &DeviceParams {
        self.device.params()
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The device's time now (ordered after the caller's memory access).
    #[inline]
    fn stamp(&self) -> u64 {
        self.device.clock().now_ns()
    }
}

impl PmemBackend for EmuBackend {
    fn create(opts: &BackendOptions, len: u64) -> Result<Self> {
        EmuBackend::check(opts)?;
        EmuBackend::with(FsBackend::create(opts, len)?, opts.latency)
    }
    fn open(opts: &BackendOptions) -> Result<Self> {
        EmuBackend::check(opts)?;
        EmuBackend::with(FsBackend::open(opts)?, opts.latency)
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
        if self.idle() {
            return 0;
        }
        let started = self.stamp();
        let charge = self.device.on_read(None, offset, buf.len() as u64, started);
        self.device.stall(Stamp::AfterLoads, started, &charge);
        charge.stall_ns()
    }
    #[inline]
    fn read_by(&self, thread: u32, offset: u64, buf: &mut [u8]) -> Charge {
        self.inner.mapping().read(offset, buf);
        if self.idle() {
            return Charge::default();
        }
        let started = self.stamp();
        let charge = self.device.on_read(Some(thread), offset, buf.len() as u64, started);
        self.device.stall(Stamp::AfterLoads, started, &charge);
        charge
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
        self.inner.flush(thread, offset, len);
        if !self.idle() {
            self.device.on_flush(thread, offset, len);
        }
    }
    #[inline]
    fn fence(&self, thread: u32, lines_flushed: u64) -> u64 {
        self.fence_by(thread, lines_flushed).stall_ns()
    }
    #[inline]
    fn fence_by(&self, thread: u32, lines_flushed: u64) -> Charge {
        self.inner.fence(thread, lines_flushed);
        if self.idle() {
            return Charge::default();
        }
        let (charge, started) = self.device.on_fence(thread, lines_flushed);
        self.device.stall(Stamp::AfterDrain, started, &charge);
        charge
    }
    fn reserve_space(&self) -> Result<()> {
        self.inner.reserve_space()
    }
    fn sync_all(&self) -> Result<()> {
        self.inner.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::NvmProfile;

    fn pool(dir: &Path, profile: NvmProfile) -> EmuBackend {
        let opts =
            BackendOptions { latency: profile.model(), ..BackendOptions::new(dir.join("p")) };
        EmuBackend::create(&opts, 1 << 20).unwrap()
    }

    #[test]
    fn a_pool_with_the_model_off_charges_nothing_and_with_it_on_again() {
        let dir = tempfile::tempdir().unwrap();
        let b = pool(dir.path(), NvmProfile::Optane);
        let mut buf = [0u8; 8];
        let optane = NvmProfile::Optane.model();
        assert_eq!(b.read_by(1, 4096, &mut buf).read_latency_ns, optane.read_random_ns);
        b.set_modelled(false);
        assert_eq!(b.read_by(1, 8192, &mut buf), Charge::default());
        b.flush(1, 8192, 64);
        assert_eq!(b.fence_by(1, 1), Charge::default());
        b.set_modelled(true);
        b.flush(1, 16384, 64);
        let fence = b.fence_by(1, 1);
        assert_eq!(fence.write_latency_ns, optane.fence_cost_ns(1));
        assert_eq!(fence.media_bytes_written, optane.media_granularity_bytes);
        assert_eq!(b.read_by(1, 65536, &mut buf).read_latency_ns, optane.read_random_ns);
    }

    #[test]
    fn an_idle_device_stays_idle_when_the_model_is_turned_on() {
        let dir = tempfile::tempdir().unwrap();
        let b = pool(dir.path(), NvmProfile::Dram);
        b.set_modelled(true);
        let mut buf = [0u8; 8];
        assert_eq!(b.read_by(1, 4096, &mut buf), Charge::default());
        b.flush(1, 4096, 64);
        assert_eq!(b.fence_by(1, 1), Charge::default());
    }
}
