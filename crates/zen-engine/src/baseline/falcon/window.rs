//! A worker's redo ring: the small log window (Falcon §4.3), or the
//! page-sized NVM log of the Inp variants. One log page per worker,
//! allocated at its first writing commit; the ring is the page after its
//! 64-byte header (`layout.rs`).
//!
//! PLACEMENT. Record n+1 goes right after record n, or at ring offset 0
//! when it does not fit before the end. A record larger than the ring is
//! refused at prepare (`Error::LogWindowOverflow`, with both sizes).
//!
//! REUSE (the window's one rule): a record may be overwritten only once
//! every tuple write it describes is durable. Under eADR a commit's
//! in-place stores are durable as soon as they are visible, i.e. before
//! the next record is written, so nothing waits. Under ADR they are
//! written back after the commit (Alg. 1's `sfence; clwb…`) and durable at
//! this worker's next fence; until then the record's range is `pending`,
//! and writing a record over it first issues that fence. Records that are
//! not overwritten stay in the ring after their tuples are durable; replay
//! of such a stale record changes nothing (see `recovery.rs`).

use zen_pmem::{PageOwner, PmemBackend, Pool};

use super::layout::{self, LOG_TABLE, PAGE_HEADER, RECORD_HEADER, SEAL_BYTES};
use crate::error::{AbortReason, Error, Result};

/// The append state of one worker's ring (DRAM).
#[derive(Debug, Default)]
pub struct Window {
    /// The log page, once allocated.
    pub page: Option<u64>,
    /// Pool offset of the ring's first byte.
    pub base: u64,
    pub ring_bytes: u64,
    /// Ring offset of the next record (if it fits before the end).
    pub next: u64,
    /// ADR: ring range of the last record whose tuple write-backs this
    /// worker has not fenced yet.
    pub pending: Option<(u64, u64)>,
    /// Sequence number of the next record.
    pub seq: u64,
    /// Highest seq whose tuple writes are durable (tombstones of that
    /// record or older may be reclaimed).
    pub durable_seq: u64,
    /// Ring range of the record being committed.
    pub current: (u64, u64),
}

impl Window {
    /// Allocate and format the log page if the worker has none (the header
    /// is flushed; the first record's fence makes it durable with it).
    pub fn ensure_page<B: PmemBackend>(
        &mut self,
        pool: &Pool<B>,
        thread: u32,
        worker: usize,
        ring_bytes: u64,
    ) -> Result<()> {
        if self.page.is_some() {
            return Ok(());
        }
        let owner = PageOwner { table: LOG_TABLE, worker: worker as u16 };
        let page = pool.allocate_page(thread, owner).map_err(|e| {
            if e.is_retryable() { Error::Abort(AbortReason::OutOfSpace) } else { e.into() }
        })?;
        let at = pool.page_offset(page);
        let p = pool.persister(thread);
        p.write(at, &layout::log_header(worker as u16, ring_bytes));
        p.flush(at, 32);
        *self = Window {
            page: Some(page),
            base: at + PAGE_HEADER,
            ring_bytes,
            next: 0,
            pending: None,
            seq: self.seq.max(1),
            durable_seq: self.durable_seq,
            current: (0, 0),
        };
        Ok(())
    }

    /// Refuse a record of `len` bytes the ring cannot hold.
    pub fn check_fits(&self, len: usize) -> Result<()> {
        if len as u64 > self.ring_bytes {
            return Err(Error::LogWindowOverflow {
                needed_bytes: len as u64,
                window_bytes: self.ring_bytes,
            });
        }
        Ok(())
    }

    /// Where a record of `len` bytes goes (module docs).
    pub fn place(&self, len: u64) -> u64 {
        if self.next + len <= self.ring_bytes { self.next } else { 0 }
    }

    /// Does ring range `at..at + len` overlap the pending record?
    pub fn overlaps_pending(&self, at: u64, len: u64) -> bool {
        self.pending.is_some_and(|(s, e)| at < e && s < at + len)
    }
}

/// A sealed record found in a ring by recovery.
#[derive(Debug, Clone)]
pub struct FoundRecord {
    pub worker: u64,
    pub seq: u64,
    pub cts: u64,
    pub entries: Vec<layout::Entry>,
}

/// What scanning one ring found.
#[derive(Debug, Default)]
pub struct RingScan {
    pub records: Vec<FoundRecord>,
    /// Tagged records whose seal did not check (in flight at the crash, or
    /// a stale lap partly overwritten).
    pub unsealed: u64,
    pub bytes: u64,
}

/// Read every sealed record of the ring in `page` (`bytes`: the whole
/// page). `None` when the page header is not whole (the page was being
/// formatted: none of its records can have been acknowledged, see
/// `ensure_page`). Records are found by their tag at every 8-byte offset;
/// a sealed record's interior is skipped.
pub fn scan_ring(bytes: &[u8], worker: u16, row_bytes: &[usize]) -> Result<Option<RingScan>> {
    let Some((w, ring)) = layout::decode_log_header(&bytes[..32]) else { return Ok(None) };
    if w != u64::from(worker) || ring > bytes.len() as u64 - PAGE_HEADER || ring < 64 {
        return Err(Error::Corrupt(format!(
            "log page of worker {worker}: header says worker {w}, ring {ring} bytes"
        )));
    }
    let data = &bytes[PAGE_HEADER as usize..(PAGE_HEADER + ring) as usize];
    let mut out = RingScan { bytes: ring, ..RingScan::default() };
    let mut at = 0usize;
    while at + RECORD_HEADER + SEAL_BYTES <= data.len() {
        let Some(len) = layout::record_len(&data[at..at + 8]) else {
            at += 8;
            continue;
        };
        if at + len > data.len() {
            at += 8;
            continue;
        }
        let Some(h) = layout::decode_record(&data[at..at + len], at as u64) else {
            out.unsealed += 1;
            at += 8;
            continue;
        };
        let body = &data[at + RECORD_HEADER..at + len - SEAL_BYTES];
        let entries = layout::parse_entries(body, h.entries, row_bytes).map_err(|e| {
            Error::Corrupt(format!("sealed record at ring offset {at} of worker {worker}: {e}"))
        })?;
        out.records.push(FoundRecord { worker: w, seq: h.seq, cts: h.cts, entries });
        at += len;
    }
    Ok(Some(out))
}
