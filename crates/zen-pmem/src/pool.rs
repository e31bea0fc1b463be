//! A pool: header, page table, page allocator and the per-worker persisters.
//!
//! ```text
//! page 0                        page 1          page 2         …  page N-1
//! ┌──────────┬────────────────┐ ┌─────────────┐ ┌────────────┐    ┌────────┐
//! │ header   │ page table     │ │ owned or    │ │            │    │        │
//! │ 0..80    │ 4096..+8·N     │ │ free        │ │            │    │        │
//! └──────────┴────────────────┘ └─────────────┘ └────────────┘    └────────┘
//! ```
//!
//! Page allocation is the only persistent work of space management (Zen §3.4):
//! `allocate_page` zeroes the page durably and then publishes its page-table
//! entry with one atomic store (invariant P1 of `page_table.rs`), so no crash
//! leaves a page that is owned but holds stale bytes, or one that is both free
//! and owned. Free pages are tracked in DRAM and rebuilt from the table on open.
//!
//! Thread slots: every thread that persists has a slot (`0..MAX_THREADS`) with
//! its own counters and, in the simulator, its own flush marks. Slot
//! [`SYSTEM_THREAD`] is used by pool bookkeeping (create, open, close).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;

use crate::backend::{BackendKind, BackendOptions, Marker, PersistenceDomain, PmemBackend};
use crate::counters::{CounterSnapshot, WorkerCounters};
use crate::cpu::CACHE_LINE;
use crate::error::{PmemError, Result};
use crate::header::{self, Header};
use crate::page_table::{self, PageOwner};

/// Most thread slots a pool has (counters are preallocated for each).
pub const MAX_THREADS: usize = 512;
/// The slot used by pool bookkeeping.
pub const SYSTEM_THREAD: u32 = 0;

/// Options for creating a pool.
#[derive(Debug, Clone)]
pub struct PoolOptions {
    /// Page size in bytes: a power of two in 64 KiB ..= 2 MiB (2 MiB by default;
    /// smaller pages make crash-simulator tests fast).
    pub page_size: u64,
    /// Feature flags to record (must be known to this build).
    pub features: u64,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions { page_size: header::DEFAULT_PAGE_SIZE, features: 0 }
    }
}

impl PoolOptions {
    /// Check the options for a pool of `len` bytes at `path`.
    pub fn validate(&self, path: &Path, len: u64) -> Result<u64> {
        let invalid =
            |detail: String| PmemError::InvalidOption { path: path.to_path_buf(), detail };
        if !self.page_size.is_power_of_two()
            || !(header::MIN_PAGE_SIZE..=header::MAX_PAGE_SIZE).contains(&self.page_size)
        {
            return Err(invalid(format!(
                "page size {} is not a power of two in 64 KiB..=2 MiB",
                self.page_size
            )));
        }
        if self.features & !header::KNOWN_FEATURES != 0 {
            return Err(invalid(format!("unknown feature flags {:#x}", self.features)));
        }
        let min = header::MIN_PAGES * self.page_size;
        if len < min {
            return Err(PmemError::TooSmall {
                path: path.to_path_buf(),
                requested: len,
                min,
                min_pages: header::MIN_PAGES,
                page_size: self.page_size,
            });
        }
        let pages = len / self.page_size;
        let max = header::max_pages(self.page_size);
        if pages > max {
            return Err(invalid(format!(
                "{len} bytes need {pages} pages; a page table of {}-byte pages holds {max}",
                self.page_size
            )));
        }
        Ok(pages)
    }
}

/// Everything `zen inspect` shows about a pool.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PoolInfo {
    pub path: String,
    pub backend: BackendKind,
    pub format_version: u32,
    pub features: u64,
    pub page_size: u64,
    pub page_count: u64,
    pub uuid: String,
    pub catalog_root: Option<u32>,
    pub was_clean_shutdown: bool,
    pub free_pages: u64,
    /// (table, worker, pages) for every owner, sorted.
    pub pages_by_owner: Vec<OwnerPages>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct OwnerPages {
    pub table: u32,
    pub worker: u16,
    pub pages: u64,
}

/// An open pool on backend `B`.
pub struct Pool<B: PmemBackend> {
    backend: B,
    header: Header,
    was_clean_shutdown: bool,
    counters: Box<[CachePadded<WorkerCounters>]>,
    /// Free page ids, popped from the end (lowest id last pushed = first used).
    free_pages: Mutex<Vec<u64>>,
    /// Whether anything beyond the open itself was written (see `mark_in_use`).
    in_use: AtomicBool,
    closed: bool,
}

impl<B: PmemBackend> Pool<B> {
    /// Create a backing store of `len` bytes with `opts` and format it.
    pub fn create(backend_opts: &BackendOptions, len: u64, opts: &PoolOptions) -> Result<Self> {
        opts.validate(&backend_opts.path_or_memory(), len)?;
        let backend = B::create(backend_opts, len)?;
        Pool::format(backend, opts)
    }

    /// Open and validate an existing pool.
    pub fn open(backend_opts: &BackendOptions) -> Result<Self> {
        Pool::open_on(B::open(backend_opts)?)
    }

    /// Format a fresh backend (all zero) as an empty pool.
    ///
    /// Order: page-table entry of page 0, then the static header words and
    /// their checksum, flush, fence; then the magic word (the commit word of
    /// create), flush, fence. A crash before the last fence leaves no magic,
    /// so the file is refused on open rather than half trusted.
    pub fn format(backend: B, opts: &PoolOptions) -> Result<Self> {
        let page_count = opts.validate(backend.path(), backend.len())?;
        let uuid: [u8; 16] = rand::random();
        let header = Header {
            format_version: header::FORMAT_VERSION,
            features: opts.features,
            page_size: opts.page_size,
            page_count,
            uuid,
        };
        let mut pool = Pool::with_header(backend, header, false);
        pool.mark_in_use();
        let p = pool.persister(SYSTEM_THREAD);
        let table_bytes = page_count * 8;
        p.write_zeros(header::PAGE_TABLE_OFFSET, table_bytes);
        p.write_u64_atomic(header::PAGE_TABLE_OFFSET, PageOwner::SYSTEM.encode());
        p.flush(header::PAGE_TABLE_OFFSET, table_bytes);
        let encoded = header.encode();
        p.write(8, &encoded[8..64]);
        p.write_u64_atomic(header::OFF_CATALOG_ROOT, 0);
        p.write_u64_atomic(header::OFF_CLEAN_SHUTDOWN, 0);
        p.flush(0, header::HEADER_BYTES);
        p.fence();
        p.write_u64_atomic(header::OFF_MAGIC, header::MAGIC);
        p.persist(0, 8);
        pool.rebuild_free_list()?;
        Ok(pool)
    }

    /// Validate an existing pool on `backend` and open it.
    ///
    /// Nothing is written until the header and the whole page table have been
    /// validated, so opening a file that is not one of our pools changes nothing.
    pub fn open_on(backend: B) -> Result<Self> {
        let path = backend.path().to_path_buf();
        let len = backend.len();
        if len == 0 {
            return Err(PmemError::Empty { path });
        }
        if len < header::HEADER_BYTES {
            return Err(PmemError::TooShort { path, len, min: header::HEADER_BYTES });
        }
        let mut bytes = [0u8; 64];
        backend.read(0, &mut bytes);
        let header = Header::decode(&path, &bytes, len)?;
        let root = backend.load_u64(header::OFF_CATALOG_ROOT);
        if let Err(detail) = header::decode_catalog_root(root) {
            return Err(PmemError::CorruptHeader { path, field: "catalog_root", detail });
        }
        let clean = backend.load_u64(header::OFF_CLEAN_SHUTDOWN);
        if clean != 0 && clean != header::CLEAN_SHUTDOWN {
            return Err(PmemError::CorruptHeader {
                path,
                field: "clean_shutdown",
                detail: format!("{clean:#018x} is neither 0 nor the clean-shutdown word"),
            });
        }
        let mut pool = Pool::with_header(backend, header, clean == header::CLEAN_SHUTDOWN);
        pool.rebuild_free_list()?;
        if clean != 0 {
            let p = pool.persister(SYSTEM_THREAD);
            p.write_u64_atomic(header::OFF_CLEAN_SHUTDOWN, 0);
            p.persist(header::OFF_CLEAN_SHUTDOWN, 8);
        }
        Ok(pool)
    }

    fn with_header(backend: B, header: Header, was_clean_shutdown: bool) -> Self {
        let counters =
            (0..MAX_THREADS).map(|_| CachePadded::new(WorkerCounters::default())).collect();
        Pool {
            backend,
            header,
            was_clean_shutdown,
            counters,
            free_pages: Mutex::new(Vec::new()),
            in_use: AtomicBool::new(false),
            closed: false,
        }
    }

    fn entry_offset(&self, page: u64) -> u64 {
        header::PAGE_TABLE_OFFSET + page * 8
    }

    fn rebuild_free_list(&mut self) -> Result<()> {
        let mut free = Vec::new();
        for page in (0..self.header.page_count).rev() {
            let raw = self.backend.load_u64(self.entry_offset(page));
            match page_table::decode_entry(raw) {
                Ok(None) if page == 0 => {
                    return Err(self.corrupt_entry(page, raw));
                }
                Ok(None) => free.push(page),
                Ok(Some(_)) => {}
                Err(_) => return Err(self.corrupt_entry(page, raw)),
            }
        }
        *self.free_pages.get_mut() = free;
        Ok(())
    }

    fn corrupt_entry(&self, page: u64, raw: u64) -> PmemError {
        PmemError::CorruptPageTable { path: self.path().to_path_buf(), page, raw }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }
    pub fn path(&self) -> &Path {
        self.backend.path()
    }
    pub fn kind(&self) -> BackendKind {
        self.backend.kind()
    }
    pub fn domain(&self) -> PersistenceDomain {
        self.backend.domain()
    }
    pub fn header(&self) -> &Header {
        &self.header
    }
    pub fn page_size(&self) -> u64 {
        self.header.page_size
    }
    pub fn page_count(&self) -> u64 {
        self.header.page_count
    }
    /// Byte offset of the first byte of `page`.
    pub fn page_offset(&self, page: u64) -> u64 {
        assert!(page < self.header.page_count, "page {page} out of range");
        page * self.header.page_size
    }
    /// Whether the previous close was clean (read at open).
    pub fn was_clean_shutdown(&self) -> bool {
        self.was_clean_shutdown
    }
    pub fn free_page_count(&self) -> u64 {
        self.free_pages.lock().len() as u64
    }

    /// A persister for thread slot `thread`.
    pub fn persister(&self, thread: u32) -> Persister<'_, B> {
        Persister { backend: &self.backend, thread, counters: &self.counters[thread as usize] }
    }

    /// The counters of thread slot `thread`.
    pub fn counters(&self, thread: u32) -> &WorkerCounters {
        &self.counters[thread as usize]
    }

    /// Sum of every slot's counters.
    pub fn total_counters(&self) -> CounterSnapshot {
        self.counters.iter().fold(CounterSnapshot::default(), |acc, c| acc.add(&c.snapshot()))
    }

    /// The catalog root page, if one was set.
    pub fn catalog_root(&self) -> Option<u32> {
        header::decode_catalog_root(self.backend.load_u64(header::OFF_CATALOG_ROOT))
            .expect("catalog root validated at open and only written by set_catalog_root")
    }

    /// Durably point the header at the catalog page (one atomic store).
    pub fn set_catalog_root(&self, thread: u32, page: Option<u32>) {
        self.mark_in_use();
        let p = self.persister(thread);
        p.write_u64_atomic(header::OFF_CATALOG_ROOT, header::encode_catalog_root(page));
        p.persist(header::OFF_CATALOG_ROOT, 8);
    }

    /// Allocate a page for `owner`: zero it durably, then publish its entry (P1).
    pub fn allocate_page(&self, thread: u32, owner: PageOwner) -> Result<u64> {
        let page = self.free_pages.lock().pop().ok_or_else(|| PmemError::NoFreePage {
            path: self.path().to_path_buf(),
            page_count: self.header.page_count,
            page_size: self.header.page_size,
        })?;
        self.mark_in_use();
        let p = self.persister(thread);
        let start = self.page_offset(page);
        p.write_zeros(start, self.header.page_size);
        p.flush(start, self.header.page_size);
        p.fence();
        let entry = self.entry_offset(page);
        p.write_u64_atomic(entry, owner.encode());
        p.persist(entry, 8);
        Ok(page)
    }

    /// Durably release `page` (owned by `owner`) back to the free list.
    pub fn release_page(&self, thread: u32, page: u64, owner: PageOwner) -> Result<()> {
        if page == 0 || page >= self.header.page_count || self.page_owner(page)? != Some(owner) {
            return Err(PmemError::NotOwner {
                path: self.path().to_path_buf(),
                page,
                table: owner.table,
                worker: owner.worker,
            });
        }
        self.mark_in_use();
        let p = self.persister(thread);
        let entry = self.entry_offset(page);
        p.write_u64_atomic(entry, 0);
        p.persist(entry, 8);
        self.free_pages.lock().push(page);
        Ok(())
    }

    /// The owner of `page` as the page table says now.
    pub fn page_owner(&self, page: u64) -> Result<Option<PageOwner>> {
        let raw = self.backend.load_u64(self.entry_offset(page));
        page_table::decode_entry(raw).map_err(|_| self.corrupt_entry(page, raw))
    }

    /// Every owned page except page 0, in page order.
    pub fn owned_pages(&self) -> Result<Vec<(u64, PageOwner)>> {
        let mut pages = Vec::new();
        for page in 1..self.header.page_count {
            if let Some(owner) = self.page_owner(page)? {
                pages.push((page, owner));
            }
        }
        Ok(pages)
    }

    /// What `zen inspect` prints.
    pub fn info(&self) -> Result<PoolInfo> {
        let mut by_owner = std::collections::BTreeMap::<(u32, u16), u64>::new();
        for (_, owner) in self.owned_pages()? {
            *by_owner.entry((owner.table, owner.worker)).or_default() += 1;
        }
        Ok(PoolInfo {
            path: self.path().display().to_string(),
            backend: self.kind(),
            format_version: self.header.format_version,
            features: self.header.features,
            page_size: self.header.page_size,
            page_count: self.header.page_count,
            uuid: self.header.uuid_string(),
            catalog_root: self.catalog_root(),
            was_clean_shutdown: self.was_clean_shutdown,
            free_pages: self.free_page_count(),
            pages_by_owner: by_owner
                .into_iter()
                .map(|((table, worker), pages)| OwnerPages { table, worker, pages })
                .collect(),
        })
    }

    /// Close cleanly: set the clean-shutdown word durably and sync the file.
    pub fn close(mut self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        if !self.in_use.load(Ordering::Acquire) && !self.was_clean_shutdown {
            // Opened after a crash and never changed (e.g. `zen inspect`, or
            // an open the engine refused): still a crashed pool.
            return Ok(());
        }
        let p = self.persister(SYSTEM_THREAD);
        p.write_u64_atomic(header::OFF_CLEAN_SHUTDOWN, header::CLEAN_SHUTDOWN);
        p.persist(header::OFF_CLEAN_SHUTDOWN, 8);
        self.backend.marker(SYSTEM_THREAD, Marker::CleanShutdown);
        self.backend.sync_all()
    }

    /// Record that the pool's contents are about to change (page allocation,
    /// release and the catalog root do it themselves; an engine calls it
    /// before its first own write, e.g. recovery's clean-up). A pool dropped
    /// before that (an open refused by the engine) is left as it was found:
    /// its clean-shutdown word is restored, not set.
    pub fn mark_in_use(&self) {
        self.in_use.store(true, Ordering::Release);
    }

    /// Drop the pool without the clean-shutdown write, as a crash would.
    pub fn abandon(mut self) {
        self.closed = true;
    }
}

impl<B: PmemBackend> Drop for Pool<B> {
    fn drop(&mut self) {
        // Best effort: a pool dropped without `close` (e.g. on an error path) is
        // still closed cleanly; `abandon` is the way to simulate a crash. A
        // pool nothing was written to keeps the clean-shutdown word it had
        // (see `close_inner`).
        let _ = self.close_inner();
    }
}

/// The persist primitives for one thread slot, counting into its counters.
pub struct Persister<'p, B: PmemBackend> {
    backend: &'p B,
    thread: u32,
    counters: &'p WorkerCounters,
}

impl<B: PmemBackend> Persister<'_, B> {
    pub fn thread(&self) -> u32 {
        self.thread
    }

    pub fn domain(&self) -> PersistenceDomain {
        self.backend.domain()
    }

    /// Store bytes (not failure-atomic beyond aligned 8-byte words).
    #[inline]
    pub fn write(&self, offset: u64, data: &[u8]) {
        self.counters.on_write(offset, data.len() as u64);
        self.backend.write(self.thread, offset, data);
    }

    /// Store zeros.
    #[inline]
    pub fn write_zeros(&self, offset: u64, len: u64) {
        self.counters.on_write(offset, len);
        self.backend.write_zeros(self.thread, offset, len);
    }

    /// One aligned 8-byte failure-atomic store: the way to write commit words.
    #[inline]
    pub fn write_u64_atomic(&self, offset: u64, value: u64) {
        self.counters.on_write(offset, 8);
        self.backend.store_u64(self.thread, offset, value);
    }

    /// Write back every cache line of the range.
    #[inline]
    pub fn flush(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let line = CACHE_LINE as u64;
        self.counters.on_flush((offset + len - 1) / line - offset / line + 1);
        self.backend.flush(self.thread, offset, len);
    }

    /// Store fence (the persist barrier of this thread's earlier flushes).
    #[inline]
    pub fn fence(&self) {
        let lines = self.counters.on_fence();
        let stall = self.backend.fence(self.thread, lines);
        self.counters.on_stall(stall);
    }

    /// Flush then fence.
    #[inline]
    pub fn persist(&self, offset: u64, len: u64) {
        self.flush(offset, len);
        self.fence();
    }

    /// Read NVM bytes (counted, and delayed by the latency model).
    #[inline]
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        self.counters.on_read(buf.len() as u64);
        let stall = self.backend.read(offset, buf);
        self.counters.on_stall(stall);
    }

    /// Atomic load of an aligned 8-byte word (not counted: metadata probes).
    #[inline]
    pub fn read_u64(&self, offset: u64) -> u64 {
        self.backend.load_u64(offset)
    }

    /// Report a marker to the crash simulator.
    #[inline]
    pub fn marker(&self, marker: Marker) {
        self.backend.marker(self.thread, marker);
    }

    pub fn counters(&self) -> &WorkerCounters {
        self.counters
    }
}
