//! Checkpoints of mmdb: a transaction-consistent copy of every live row in
//! NVM, taken behind a commit gate, and the log truncation it allows.
//!
//! PROTOCOL (`take`)
//! ```text
//!   1 close the gate: wait until no worker is between drawing its cts and
//!     installing its writes; new commits wait at the gate
//!   2 ts := clock.now(): every cts below ts is installed, every later one is ≥ ts
//!   3 copy the live rows to fresh data pages, then the directory page; flush, fence
//!   4 switch the meta page's root word to the directory (one atomic store, persisted)
//!   5 open the gate; release the previous checkpoint's pages
//!   6 truncate: release every log page (oldest first, never a tail page)
//!     whose transactions are all below ts
//! ```
//! A crash before 4 leaves the old root (the new pages are orphans that
//! recovery releases); after 4, the new one. Recovery replays only log
//! transactions with cts ≥ ts on top of it, so a page that survives
//! truncation does no harm.
//!
//! The gate is per-worker flags (Dekker-style, `SeqCst`), so a commit pays
//! two stores to its own cache line and one load, not a shared lock.
//!
//! WHAT IT DOES NOT DO: commits pause while the copy is written (reads go
//! on); no incremental or fuzzy checkpoints. The paper turns checkpoints off
//! during throughput runs, and so does the default configuration.

use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_utils::CachePadded;
use zen_pmem::{PageOwner, PmemBackend, Pool};

use super::layout::{self, CHECKPOINT_HEADER, CHECKPOINT_TABLE};
use crate::error::{Error, Result};

/// The commit gate (see the module docs).
pub struct Gate {
    closed: AtomicBool,
    busy: Box<[CachePadded<AtomicBool>]>,
}

impl Gate {
    pub fn new(workers: usize) -> Gate {
        Gate {
            closed: AtomicBool::new(false),
            busy: (0..workers).map(|_| CachePadded::new(AtomicBool::new(false))).collect(),
        }
    }

    /// Enter the commit section (waits while a checkpoint holds the gate).
    pub fn enter(&self, worker: usize) {
        loop {
            self.busy[worker].store(true, Ordering::SeqCst);
            if !self.closed.load(Ordering::SeqCst) {
                return;
            }
            self.busy[worker].store(false, Ordering::SeqCst);
            while self.closed.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
        }
    }

    pub fn leave(&self, worker: usize) {
        self.busy[worker].store(false, Ordering::Release);
    }

    /// Close the gate and wait for every worker inside to leave.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        for b in self.busy.iter() {
            while b.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
    }

    pub fn open(&self) {
        self.closed.store(false, Ordering::Release);
    }
}

/// One live row for the checkpoint.
pub struct Row<'a> {
    pub table: u32,
    pub key: u64,
    pub row: &'a [u8],
}

/// Writes the data pages of one checkpoint, page by page.
pub struct Writer<'a, B: PmemBackend> {
    pool: &'a Pool<B>,
    thread: u32,
    seq: u64,
    pub pages: Vec<u64>,
    page_buf: Vec<u8>,
    pub row_bytes: u64,
    pub rows: u64,
}

impl<'a, B: PmemBackend> Writer<'a, B> {
    pub fn new(pool: &'a Pool<B>, thread: u32, seq: u64) -> Self {
        Writer { pool, thread, seq, pages: Vec::new(), page_buf: Vec::new(), row_bytes: 0, rows: 0 }
    }

    pub fn push(&mut self, r: Row<'_>) -> Result<()> {
        let need = layout::CHECKPOINT_ENTRY_HEADER + layout::pad8(r.row.len());
        if (CHECKPOINT_HEADER as usize + self.page_buf.len() + need) as u64 > self.pool.page_size()
        {
            self.seal_page()?;
        }
        layout::push_checkpoint_entry(&mut self.page_buf, r.table, r.key, r.row);
        self.row_bytes += r.row.len() as u64;
        self.rows += 1;
        Ok(())
    }

    /// Write the buffered entries to a fresh data page (flushed, not fenced).
    fn seal_page(&mut self) -> Result<()> {
        if self.page_buf.is_empty() {
            return Ok(());
        }
        let owner = PageOwner { table: CHECKPOINT_TABLE, worker: layout::CHECKPOINT_DATA_WORKER };
        let page = self.pool.allocate_page(self.thread, owner)?;
        self.pages.push(page);
        let base = self.pool.page_offset(page);
        let mut head = [0u8; 32];
        layout::put_word(&mut head, 0, layout::CHECKPOINT_MAGIC);
        layout::put_word(&mut head, 8, self.seq);
        layout::put_word(&mut head, 16, self.page_buf.len() as u64);
        layout::put_word(&mut head, 24, u64::from(crc32c::crc32c(&self.page_buf)));
        let p = self.pool.persister(self.thread);
        p.write(base, &head);
        p.write(base + CHECKPOINT_HEADER, &self.page_buf);
        p.flush(base, CHECKPOINT_HEADER + self.page_buf.len() as u64);
        self.page_buf.clear();
        Ok(())
    }

    /// Seal the last page and write the directory; one fence makes it all
    /// durable. Returns the directory page.
    pub fn finish(mut self, ts: u64) -> Result<(u64, Vec<u64>)> {
        let capacity = (self.pool.page_size() - 64) / 8;
        if let Err(e) = self.seal_page() {
            self.abort();
            return Err(e);
        }
        if self.pages.len() as u64 > capacity {
            let n = self.pages.len();
            self.abort();
            return Err(Error::InvalidConfig(format!(
                "checkpoint of {n} pages exceeds a directory page ({capacity})"
            )));
        }
        let owner = PageOwner { table: CHECKPOINT_TABLE, worker: layout::CHECKPOINT_DIR_WORKER };
        let dir = match self.pool.allocate_page(self.thread, owner) {
            Ok(dir) => dir,
            Err(e) => {
                self.abort();
                return Err(e.into());
            }
        };
        let mut buf = vec![0u8; 64 + self.pages.len() * 8];
        layout::put_word(&mut buf, 0, layout::DIRECTORY_MAGIC);
        layout::put_word(&mut buf, 8, self.seq);
        layout::put_word(&mut buf, 16, ts);
        layout::put_word(&mut buf, 24, self.pages.len() as u64);
        layout::put_word(&mut buf, 32, self.row_bytes);
        for (i, &page) in self.pages.iter().enumerate() {
            layout::put_word(&mut buf, 64 + i * 8, page);
        }
        let crc = crc32c::crc32c_append(crc32c::crc32c(&buf[8..40]), &buf[64..]);
        layout::put_word(&mut buf, 40, u64::from(crc));
        let base = self.pool.page_offset(dir);
        let p = self.pool.persister(self.thread);
        p.write(base, &buf);
        p.flush(base, buf.len() as u64);
        p.fence();
        Ok((dir, std::mem::take(&mut self.pages)))
    }

    /// Give back the pages of a checkpoint that failed half way.
    pub fn abort(mut self) {
        self.release_pages();
    }

    fn release_pages(&mut self) {
        for page in std::mem::take(&mut self.pages) {
            let owner =
                PageOwner { table: CHECKPOINT_TABLE, worker: layout::CHECKPOINT_DATA_WORKER };
            let _ = self.pool.release_page(self.thread, page, owner);
        }
    }
}

/// A checkpoint's directory, as recovery reads it.
#[derive(Debug, Clone)]
pub struct Directory {
    pub page: u64,
    pub seq: u64,
    pub ts: u64,
    pub row_bytes: u64,
    pub pages: Vec<u64>,
}

/// Read and check the directory at `page`.
pub fn read_directory<B: PmemBackend>(pool: &Pool<B>, thread: u32, page: u64) -> Result<Directory> {
    let corrupt =
        |what: String| Error::Corrupt(format!("checkpoint directory page {page}: {what}"));
    let owner = PageOwner { table: CHECKPOINT_TABLE, worker: layout::CHECKPOINT_DIR_WORKER };
    if page == 0 || page >= pool.page_count() || pool.page_owner(page)? != Some(owner) {
        return Err(corrupt("not a checkpoint directory page".into()));
    }
    let base = pool.page_offset(page);
    let p = pool.persister(thread);
    let mut head = [0u8; 64];
    p.read(base, &mut head);
    let n = layout::word(&head, 24);
    if layout::word(&head, 0) != layout::DIRECTORY_MAGIC || n > (pool.page_size() - 64) / 8 {
        return Err(corrupt("bad magic or page count".into()));
    }
    let mut list = vec![0u8; n as usize * 8];
    p.read(base + 64, &mut list);
    let crc = crc32c::crc32c_append(crc32c::crc32c(&head[8..40]), &list);
    if u64::from(crc) != layout::word(&head, 40) {
        return Err(corrupt("checksum mismatch".into()));
    }
    Ok(Directory {
        page,
        seq: layout::word(&head, 8),
        ts: layout::word(&head, 16),
        row_bytes: layout::word(&head, 32),
        pages: (0..n as usize).map(|i| layout::word(&list, i * 8)).collect(),
    })
}

/// What `read_data_page` calls per entry: (table, key, row).
pub type EntryVisitor<'a> = dyn FnMut(u32, u64, &[u8]) -> Result<()> + 'a;

/// Read and check data page `page` of checkpoint `seq`; calls `f` per entry.
pub fn read_data_page<B: PmemBackend>(
    pool: &Pool<B>,
    thread: u32,
    page: u64,
    seq: u64,
    row_bytes: &[usize],
    f: &mut EntryVisitor<'_>,
) -> Result<u64> {
    let corrupt = |what: String| Error::Corrupt(format!("checkpoint page {page}: {what}"));
    let owner = PageOwner { table: CHECKPOINT_TABLE, worker: layout::CHECKPOINT_DATA_WORKER };
    if page == 0 || page >= pool.page_count() || pool.page_owner(page)? != Some(owner) {
        return Err(corrupt("not a checkpoint data page".into()));
    }
    let mut buf = vec![0u8; pool.page_size() as usize];
    pool.persister(thread).read(pool.page_offset(page), &mut buf);
    let used = layout::word(&buf, 16) as usize;
    if layout::word(&buf, 0) != layout::CHECKPOINT_MAGIC
        || layout::word(&buf, 8) != seq
        || used > buf.len() - CHECKPOINT_HEADER as usize
    {
        return Err(corrupt("bad magic, seq or length".into()));
    }
    let entries = &buf[CHECKPOINT_HEADER as usize..CHECKPOINT_HEADER as usize + used];
    if u64::from(crc32c::crc32c(entries)) != layout::word(&buf, 24) {
        return Err(corrupt("checksum mismatch".into()));
    }
    let mut at = 0;
    while at < entries.len() {
        if at + layout::CHECKPOINT_ENTRY_HEADER > entries.len() {
            return Err(corrupt("entry header past the end".into()));
        }
        let table = u32::from_le_bytes(entries[at..at + 4].try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(entries[at + 4..at + 8].try_into().expect("4 bytes")) as usize;
        let key = layout::word(entries, at + 8);
        if row_bytes.get(table as usize) != Some(&len) {
            return Err(corrupt(format!("entry of table {table} has {len} bytes")));
        }
        let start = at + layout::CHECKPOINT_ENTRY_HEADER;
        if start + layout::pad8(len) > entries.len() {
            return Err(corrupt("row past the end".into()));
        }
        f(table, key, &entries[start..start + len])?;
        at = start + layout::pad8(len);
    }
    Ok(buf.len() as u64)
}
