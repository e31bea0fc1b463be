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
//! and owned. A page never allocated since create (at or above its member's
//! fresh frontier, `header.rs`) still reads zero: its allocation raises the
//! frontier durably instead of zeroing and flushing the page (a 2 MiB page is
//! 32,768 lines). Free pages are tracked in DRAM and rebuilt from the table on
//! open, where an owned page at or above a frontier is refused as corrupt.
//!
//! Per-node pools (`header.rs`, `backend/striped.rs`) split the page range
//! into one run of pages per member file. The first page of every member
//! but the first holds only its member header and is owned by the system
//! table from create on (it never appears in `owned_pages`); free pages are
//! kept per member, so [`Pool::allocate_page_on`] can hand a worker a page
//! of its node's file.
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
    /// Member files of a per-node pool (one, the pool file, otherwise).
    pub members: Vec<MemberInfo>,
}

/// One member file of a pool and the pages it holds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemberInfo {
    pub path: String,
    pub first_page: u64,
    pub pages: u64,
    pub free_pages: u64,
}

/// Where a member's pages are: `first_page..first_page + pages`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolMember {
    pub path: std::path::PathBuf,
    pub first_page: u64,
    pub pages: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct OwnerPages {
    pub table: u32,
    pub worker: u16,
    pub pages: u64,
}

/// Free pages and fresh frontiers, per member, under one lock.
#[derive(Default)]
struct FreePages {
    /// Free page ids, popped from the end (lowest id last pushed = first used).
    lists: Vec<Vec<u64>>,
    /// Each member's fresh frontier as stored in the header (`header.rs`),
    /// validated at open; `None` for a pool created without the feature.
    frontiers: Vec<Option<u64>>,
}

/// An open pool on backend `B`.
pub struct Pool<B: PmemBackend> {
    backend: B,
    header: Header,
    was_clean_shutdown: bool,
    counters: Box<[CachePadded<WorkerCounters>]>,
    /// Member files (one covering every page for a single-file pool).
    members: Vec<PoolMember>,
    /// Free pages and fresh frontiers of each member.
    free_pages: Mutex<FreePages>,
    /// Whether anything beyond the open itself was written (see `mark_in_use`).
    in_use: AtomicBool,
    closed: bool,
}

impl<B: PmemBackend> Pool<B> {
    /// Create a backing store of `len` bytes with `opts` and format it.
    ///
    /// A per-node pool (`backend_opts.members`) gets `len` rounded down to
    /// equal members of whole pages, each at least two pages (its header
    /// page and one page to allocate).
    pub fn create(backend_opts: &BackendOptions, len: u64, opts: &PoolOptions) -> Result<Self> {
        let path = backend_opts.path_or_memory();
        opts.validate(&path, len)?;
        let count = backend_opts.members.len() as u64;
        let len = match (len / opts.page_size).checked_div(count) {
            None => len,
            Some(member_pages) if member_pages < 2 => {
                return Err(PmemError::TooSmall {
                    path,
                    requested: len,
                    min: 2 * count * opts.page_size,
                    min_pages: 2 * count,
                    page_size: opts.page_size,
                });
            }
            Some(member_pages) => member_pages * count * opts.page_size,
        };
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
    ///
    /// A per-node pool also gets, before that, a member header in every
    /// member's first page and a system-owned page-table entry for each.
    pub fn format(backend: B, opts: &PoolOptions) -> Result<Self> {
        let page_count = opts.validate(backend.path(), backend.len())?;
        if opts.features & header::FEATURE_PER_NODE != 0 {
            return Err(PmemError::InvalidOption {
                path: backend.path().to_path_buf(),
                detail: "the per-node feature is set by the pool from its member files".into(),
            });
        }
        let count = backend.members().len() as u64;
        let per_node = if count == 0 { 0 } else { header::FEATURE_PER_NODE };
        let uuid: [u8; 16] = rand::random();
        let header = Header {
            format_version: header::FORMAT_VERSION,
            features: opts.features | per_node | header::FEATURE_FRESH_FRONTIER,
            page_size: opts.page_size,
            page_count,
            uuid,
        };
        let members = layout_members(&backend, &header);
        let mut pool = Pool::with_header(backend, header, false, members);
        pool.mark_in_use();
        let p = pool.persister(SYSTEM_THREAD);
        let table_bytes = page_count * 8;
        p.write_zeros(header::PAGE_TABLE_OFFSET, table_bytes);
        p.write_u64_atomic(header::PAGE_TABLE_OFFSET, PageOwner::SYSTEM.encode());
        if count > 0 {
            for (index, m) in pool.members.iter().enumerate() {
                let member = header::MemberHeader {
                    uuid,
                    index: index as u64,
                    count,
                    member_pages: m.pages,
                    page_size: opts.page_size,
                };
                let at = m.first_page * opts.page_size + header::MEMBER_HEADER_OFFSET;
                p.write(at, &member.encode());
                p.flush(at, 64);
                let entry = header::PAGE_TABLE_OFFSET + m.first_page * 8;
                p.write_u64_atomic(entry, PageOwner::SYSTEM.encode());
            }
        }
        p.flush(header::PAGE_TABLE_OFFSET, table_bytes);
        // Nothing allocated yet: every member's frontier is its first page
        // after its header page.
        for (index, m) in pool.members.iter().enumerate() {
            let at = header::fresh_frontier_offset(index);
            p.write_u64_atomic(at, header::encode_fresh_frontier(m.first_page + 1));
            p.flush(at, 8);
        }
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
    /// Then the backend reserves storage for every page of a sparse file
    /// ([`PmemBackend::reserve_space`]), or the open is refused with
    /// `NoSpace`: a store to an unbacked page of a full file system would
    /// kill the process with SIGBUS.
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
        // The length is checked after the members, so that a short member
        // file is named rather than the pool as a whole.
        let header = match Header::decode(&path, &bytes, u64::MAX) {
            Err(PmemError::BadMagic { found: 0, .. }) => {
                return Err(misplaced_member_error(&backend, &path));
            }
            other => other?,
        };
        check_members(&backend, &header)?;
        let expected = header.page_count * header.page_size;
        if len < expected {
            return Err(PmemError::Truncated { path, expected, actual: len });
        }
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
        let members = layout_members(&backend, &header);
        let mut pool = Pool::with_header(backend, header, clean == header::CLEAN_SHUTDOWN, members);
        pool.rebuild_free_list()?;
        // Validated: now back every page with storage before the first store
        // (`backend/space.rs`). A refusal leaves the file as it was found.
        if let Err(e) = pool.backend.reserve_space() {
            pool.closed = true;
            return Err(e);
        }
        if clean != 0 {
            let p = pool.persister(SYSTEM_THREAD);
            p.write_u64_atomic(header::OFF_CLEAN_SHUTDOWN, 0);
            p.persist(header::OFF_CLEAN_SHUTDOWN, 8);
        }
        Ok(pool)
    }

    fn with_header(
        backend: B,
        header: Header,
        was_clean_shutdown: bool,
        members: Vec<PoolMember>,
    ) -> Self {
        let counters =
            (0..MAX_THREADS).map(|_| CachePadded::new(WorkerCounters::default())).collect();
        Pool {
            backend,
            header,
            was_clean_shutdown,
            counters,
            free_pages: Mutex::new(FreePages::default()),
            members,
            in_use: AtomicBool::new(false),
            closed: false,
        }
    }

    fn entry_offset(&self, page: u64) -> u64 {
        header::PAGE_TABLE_OFFSET + page * 8
    }

    /// Rebuild the free lists from the page table; a header page (page 0 or
    /// a member's first page) must be owned by the system table.
    ///
    /// With fresh frontiers, each member's frontier must lie in the member's
    /// data pages and no page at or above it may be owned (it is raised
    /// durably before a page is published); otherwise the header is corrupt.
    fn rebuild_free_list(&mut self) -> Result<()> {
        let mut free = vec![Vec::new(); self.members.len()];
        let mut frontiers = Vec::with_capacity(self.members.len());
        for (index, m) in self.members.iter().enumerate() {
            let frontier = self.fresh_frontier(index)?;
            frontiers.push(frontier);
            for page in (m.first_page..m.first_page + m.pages).rev() {
                let raw = self.backend.load_u64(self.entry_offset(page));
                match page_table::decode_entry(raw) {
                    Ok(None) if self.is_header_page(page) => {
                        return Err(self.corrupt_entry(page, raw));
                    }
                    Ok(Some(owner)) if self.is_header_page(page) && owner != PageOwner::SYSTEM => {
                        return Err(self.corrupt_entry(page, raw));
                    }
                    Ok(None) => free[index].push(page),
                    Ok(Some(_)) => {
                        if let Some(f) = frontier.filter(|&f| page >= f) {
                            return Err(PmemError::CorruptHeader {
                                path: self.path().to_path_buf(),
                                field: "fresh_frontier",
                                detail: format!(
                                    "member {index}'s frontier is page {f}, but page {page} \
                                     above it is owned"
                                ),
                            });
                        }
                    }
                    Err(_) => return Err(self.corrupt_entry(page, raw)),
                }
            }
        }
        *self.free_pages.get_mut() = FreePages { lists: free, frontiers };
        Ok(())
    }

    /// Member `index`'s fresh frontier, validated: `None` for a pool created
    /// without the feature (every allocation zeroes its page).
    fn fresh_frontier(&self, index: usize) -> Result<Option<u64>> {
        if self.header.features & header::FEATURE_FRESH_FRONTIER == 0 {
            return Ok(None);
        }
        let m = &self.members[index];
        let raw = self.backend.load_u64(header::fresh_frontier_offset(index));
        let corrupt = |detail: String| PmemError::CorruptHeader {
            path: self.path().to_path_buf(),
            field: "fresh_frontier",
            detail: format!("member {index}: {detail}"),
        };
        let page = header::decode_fresh_frontier(raw).map_err(corrupt)?;
        if !(m.first_page + 1..=m.first_page + m.pages).contains(&page) {
            return Err(corrupt(format!(
                "page {page} is outside the member's data pages {}..={}",
                m.first_page + 1,
                m.first_page + m.pages
            )));
        }
        Ok(Some(page))
    }

    /// Page 0, or the first page of a member (its member header).
    fn is_header_page(&self, page: u64) -> bool {
        page == 0 || (self.members.len() > 1 && page.is_multiple_of(self.members[0].pages))
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
        self.free_pages.lock().lists.iter().map(|f| f.len() as u64).sum()
    }

    /// The member files (one, covering every page, for a single-file pool).
    pub fn members(&self) -> &[PoolMember] {
        &self.members
    }

    /// Whether the pool is split into per-node member files.
    pub fn is_per_node(&self) -> bool {
        self.header.features & header::FEATURE_PER_NODE != 0
    }

    /// The member file that holds `page`.
    pub fn page_member(&self, page: u64) -> usize {
        assert!(page < self.header.page_count, "page {page} out of range");
        (page / self.members[0].pages) as usize
    }

    /// A persister for thread slot `thread`.
    pub fn persister(&self, thread: u32) -> Persister<'_, B> {
        Persister {
            backend: &self.backend,
            thread,
            counters: &self.counters[thread as usize],
            eadr: self.backend.domain() == PersistenceDomain::Eadr,
        }
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

    /// Allocate a page for `owner`: make its zeros durable (zeroing it, or
    /// raising the fresh frontier past it), then publish its entry (P1).
    /// On a per-node pool the page comes from the first member with room.
    pub fn allocate_page(&self, thread: u32, owner: PageOwner) -> Result<u64> {
        self.allocate_page_on(thread, owner, 0)
    }

    /// Allocate a page for `owner` from member `member` (a node's file),
    /// or, when that member is full, from the next one with room: a page on
    /// another node is slower, not wrong.
    ///
    /// A page at or above its member's fresh frontier has never been
    /// allocated, so it reads zero: the frontier is raised past it instead of
    /// zeroing the page; the fence below makes either durable before the
    /// entry is published (P1).
    pub fn allocate_page_on(&self, thread: u32, owner: PageOwner, member: usize) -> Result<u64> {
        self.mark_in_use();
        let p = self.persister(thread);
        let (page, fresh) = {
            let mut free = self.free_pages.lock();
            let n = free.lists.len();
            let (index, page) = (0..n)
                .map(|i| (member + i) % n)
                .find_map(|index| free.lists[index].pop().map(|page| (index, page)))
                .ok_or_else(|| PmemError::NoFreePage {
                    path: self.path().to_path_buf(),
                    page_count: self.header.page_count,
                    page_size: self.header.page_size,
                })?;
            // At or above the frontier: never allocated, so it reads zero.
            // Raised past it (one store and flush; under the lock, so raises
            // of one word never go backwards).
            let fresh = match &mut free.frontiers[index] {
                Some(frontier) if page >= *frontier => {
                    *frontier = page + 1;
                    let at = header::fresh_frontier_offset(index);
                    p.write_u64_atomic(at, header::encode_fresh_frontier(page + 1));
                    p.flush(at, 8);
                    true
                }
                _ => false,
            };
            (page, fresh)
        };
        let start = self.page_offset(page);
        if fresh {
            // What zeroing did as a side effect: the page's faults, taken
            // here at once rather than one per 4 KiB under later commits.
            self.backend.populate(start, self.header.page_size);
        } else {
            p.write_zeros(start, self.header.page_size);
            p.flush(start, self.header.page_size);
        }
        p.fence();
        let entry = self.entry_offset(page);
        p.write_u64_atomic(entry, owner.encode());
        p.persist(entry, 8);
        Ok(page)
    }

    /// Durably release `page` (owned by `owner`) back to the free list.
    pub fn release_page(&self, thread: u32, page: u64, owner: PageOwner) -> Result<()> {
        if page >= self.header.page_count
            || self.is_header_page(page)
            || self.page_owner(page)? != Some(owner)
        {
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
        self.free_pages.lock().lists[self.page_member(page)].push(page);
        Ok(())
    }

    /// The owner of `page` as the page table says now.
    pub fn page_owner(&self, page: u64) -> Result<Option<PageOwner>> {
        let raw = self.backend.load_u64(self.entry_offset(page));
        page_table::decode_entry(raw).map_err(|_| self.corrupt_entry(page, raw))
    }

    /// Every owned page except the header pages (page 0, members' first
    /// pages), in page order.
    pub fn owned_pages(&self) -> Result<Vec<(u64, PageOwner)>> {
        let mut pages = Vec::new();
        for page in 1..self.header.page_count {
            if self.is_header_page(page) {
                continue;
            }
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
            members: self.member_infos(),
        })
    }

    fn member_infos(&self) -> Vec<MemberInfo> {
        let free = self.free_pages.lock();
        self.members
            .iter()
            .zip(free.lists.iter())
            .map(|(m, f)| MemberInfo {
                path: m.path.display().to_string(),
                first_page: m.first_page,
                pages: m.pages,
                free_pages: f.len() as u64,
            })
            .collect()
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

/// The member files of the per-node pool named `pool`, one per node: a
/// `{node}` in the path is replaced by the node number
/// (`/mnt/pmem{node}/zen.pool`, one fsdax mount per node), otherwise
/// `.node<N>` is appended (`zen.pool.node0`, `zen.pool.node1`, ...).
pub fn member_paths(pool: &Path, count: usize) -> Vec<std::path::PathBuf> {
    (0..count)
        .map(|node| match pool.to_str() {
            Some(text) if text.contains("{node}") => {
                text.replace("{node}", &node.to_string()).into()
            }
            _ => {
                let mut name = pool.as_os_str().to_os_string();
                name.push(format!(".node{node}"));
                name.into()
            }
        })
        .collect()
}

/// How many member files the per-node pool named `pool` has, read from its
/// first member's header (reads only; typed errors name the file).
pub fn member_count(pool: &Path) -> Result<usize> {
    use std::io::Read;
    let first = member_paths(pool, 1).remove(0);
    let mut file = std::fs::File::open(&first).map_err(|e| PmemError::from_io(&first, e))?;
    let mut bytes = vec![0u8; header::MEMBER_HEADER_END as usize];
    let mut got = 0;
    while got < bytes.len() {
        match file.read(&mut bytes[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => return Err(PmemError::from_io(&first, e)),
        }
    }
    if got < bytes.len() {
        return Err(PmemError::TooShort {
            path: first,
            len: got as u64,
            min: header::MEMBER_HEADER_END,
        });
    }
    let mut member = [0u8; 64];
    member.copy_from_slice(&bytes[header::MEMBER_HEADER_OFFSET as usize..]);
    let m = header::MemberHeader::decode(&first, &member)?;
    Ok(m.count as usize)
}

/// The members' page ranges, from a validated header (`check_members` has
/// made sure every member has `page_count / count` pages).
fn layout_members<B: PmemBackend>(backend: &B, header: &Header) -> Vec<PoolMember> {
    let files = backend.members();
    if files.is_empty() {
        return vec![PoolMember {
            path: backend.path().to_path_buf(),
            first_page: 0,
            pages: header.page_count,
        }];
    }
    let pages = header.page_count / files.len() as u64;
    (0..files.len() as u64)
        .map(|i| PoolMember { path: files[i as usize].path.clone(), first_page: i * pages, pages })
        .collect()
}

/// Check that the backend's member files are exactly this pool's members,
/// in order, with their full length; reads only. Single-file pools pass
/// when the header does not ask for members.
fn check_members<B: PmemBackend>(backend: &B, header: &Header) -> Result<()> {
    let files = backend.members();
    let per_node = header.features & header::FEATURE_PER_NODE != 0;
    if files.is_empty() {
        if !per_node {
            return Ok(());
        }
        let path = backend.path().to_path_buf();
        if backend.len() < header::MEMBER_HEADER_END {
            return Err(PmemError::TooShort {
                path,
                len: backend.len(),
                min: header::MEMBER_HEADER_END,
            });
        }
        let member = read_member_header(backend, 0, &path)?;
        return Err(PmemError::PerNodeMember { path, index: 0, count: member.count });
    }
    if !per_node {
        return Err(PmemError::NotPerNode { path: files[0].path.clone() });
    }
    if let Some(short) = files.iter().find(|f| f.len < header::MEMBER_HEADER_END) {
        return Err(PmemError::TooShort {
            path: short.path.clone(),
            len: short.len,
            min: header::MEMBER_HEADER_END,
        });
    }
    let given = files.len() as u64;
    let first = read_member_header(backend, 0, &files[0].path)?;
    check_member_of(&first, header, &files[0].path, 0)?;
    if first.count != given {
        return Err(PmemError::MemberCount {
            path: files[0].path.clone(),
            in_pool: first.count,
            given,
        });
    }
    let member_bytes = first.member_pages * header.page_size;
    for (index, file) in files.iter().enumerate() {
        let index = index as u64;
        let member = read_member_header(backend, file.offset, &file.path)?;
        check_member_of(&member, header, &file.path, index)?;
        if member.count != given || member.member_pages != first.member_pages {
            return Err(PmemError::BadMemberHeader {
                path: file.path.clone(),
                detail: format!(
                    "says {} members of {} pages; member 0 says {given} of {}",
                    member.count, member.member_pages, first.member_pages
                ),
            });
        }
        if file.len < member_bytes {
            return Err(PmemError::Truncated {
                path: file.path.clone(),
                expected: member_bytes,
                actual: file.len,
            });
        }
        if file.len != member_bytes || file.offset != index * member_bytes {
            return Err(PmemError::MemberSize {
                path: file.path.clone(),
                expected: member_bytes,
                actual: file.len,
            });
        }
    }
    if given * first.member_pages != header.page_count {
        return Err(PmemError::CorruptHeader {
            path: files[0].path.clone(),
            field: "page_count",
            detail: format!(
                "{} pages, but {given} members of {} pages",
                header.page_count, first.member_pages
            ),
        });
    }
    Ok(())
}

fn read_member_header<B: PmemBackend>(
    backend: &B,
    member_offset: u64,
    path: &Path,
) -> Result<header::MemberHeader> {
    let mut bytes = [0u8; 64];
    backend.read(member_offset + header::MEMBER_HEADER_OFFSET, &mut bytes);
    header::MemberHeader::decode(path, &bytes)
}

/// `member`, read from `path`, must be member `index` of the pool `header`.
fn check_member_of(
    member: &header::MemberHeader,
    header: &Header,
    path: &Path,
    index: u64,
) -> Result<()> {
    if member.uuid != header.uuid {
        let found = Header { uuid: member.uuid, ..*header };
        return Err(PmemError::ForeignMember {
            path: path.to_path_buf(),
            expected: header.uuid_string(),
            found: found.uuid_string(),
        });
    }
    if member.index != index {
        return Err(PmemError::SwappedMember {
            path: path.to_path_buf(),
            expected: index,
            found: member.index,
        });
    }
    if member.page_size != header.page_size {
        return Err(PmemError::BadMemberHeader {
            path: path.to_path_buf(),
            detail: format!(
                "page size {} differs from the pool's {}",
                member.page_size, header.page_size
            ),
        });
    }
    Ok(())
}

/// A first file whose magic is zero: when it is a later member of a
/// per-node pool, say so (opened alone, or given in the wrong place).
fn misplaced_member_error<B: PmemBackend>(backend: &B, path: &Path) -> PmemError {
    let first_len = backend.members().first().map_or(backend.len(), |m| m.len);
    if first_len >= header::MEMBER_HEADER_END
        && let Ok(m) = read_member_header(backend, 0, path)
    {
        let path = path.to_path_buf();
        return if backend.members().is_empty() {
            PmemError::PerNodeMember { path, index: m.index, count: m.count }
        } else {
            PmemError::SwappedMember { path, expected: 0, found: m.index }
        };
    }
    PmemError::BadMagic { path: path.to_path_buf(), found: 0 }
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
///
/// Under eADR (`PersistenceDomain::Eadr`) the CPU caches are in the
/// persistence domain: a store is durable once it is globally visible, so
/// [`Persister::flush`] issues nothing and counts nothing, for every engine.
/// Fences stay: they still order this thread's stores against its later
/// ones and mark the points where an engine publishes durability.
pub struct Persister<'p, B: PmemBackend> {
    backend: &'p B,
    thread: u32,
    counters: &'p WorkerCounters,
    eadr: bool,
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

    /// Write back every cache line of the range (nothing under eADR: the
    /// caches are persistent).
    #[inline]
    pub fn flush(&self, offset: u64, len: u64) {
        if len == 0 || self.eadr {
            return;
        }
        let line = CACHE_LINE as u64;
        self.counters.on_flush((offset + len - 1) / line - offset / line + 1);
        self.backend.flush(self.thread, offset, len);
    }

    /// A write-back issued for speed, not for durability (Falcon's hinted
    /// flush, §4.4 of its paper): under ADR the same as [`Persister::flush`];
    /// under eADR, where `flush` issues nothing, it still writes the lines
    /// back (`clwb`) and counts them, because on a persistent-cache machine
    /// flushing contiguous lines early lets the module combine them into
    /// whole media blocks instead of evicting them one by one later.
    #[inline]
    pub fn flush_hint(&self, offset: u64, len: u64) {
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
        let charge = self.backend.fence_by(self.thread, lines);
        self.counters.on_charge(&charge);
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
        let charge = self.backend.read_by(self.thread, offset, buf);
        self.counters.on_charge(&charge);
    }

    /// A hint that `[offset, offset + len)` will be read soon
    /// ([`PmemBackend::prefetch`]); not counted.
    #[inline]
    pub fn prefetch(&self, offset: u64, len: u64) {
        self.backend.prefetch(offset, len);
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
