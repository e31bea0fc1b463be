//! The per-worker redo log of mmdb: appending one transaction (one or more
//! fragments, one fence), reading the valid prefix at recovery, cleaning the
//! tail after it, and truncating pages a checkpoint covers.
//!
//! VALID PREFIX. Recovery reads a worker's pages in page-seq order (they
//! must be consecutive: truncation releases the oldest first) and each page's
//! fragments in order. A zero length word ends a page (the next fragment did
//! not fit). The stream stops at the first page whose header does not check,
//! the first fragment whose length or crc does not check, or the first
//! fragment out of sequence (a transaction's fragments are numbered 0..=k and
//! share one cts). The valid prefix ends after the last LAST fragment before
//! the stop: that is the last transaction whose fence may have completed.
//!
//! Why this is safe: a worker fences each transaction before it writes the
//! next, so everything before the transaction being written when the power
//! failed is durable; only the fragments of that one transaction may be
//! missing, torn or present out of order (one fence epoch), and the
//! numbering rejects any of them alone.

use std::collections::VecDeque;

use zen_pmem::{Marker, PageOwner, PmemBackend, Pool};

use super::layout::{self, FRAGMENT_HEADER, LOG_PAGE_HEADER, LOG_TABLE};
use crate::error::{AbortReason, Error, Result};

/// A log page of a worker.
#[derive(Debug, Clone, Copy)]
pub struct LogPage {
    pub page: u64,
    pub seq: u64,
    /// Largest cts of a fragment in the page (0 if none).
    pub max_cts: u64,
}

/// The append state of one worker's log (DRAM). Pages after the tail page
/// were reserved by `prepare` for a transaction that did not fit; only pages
/// before the tail page may be truncated.
#[derive(Debug, Default)]
pub struct WorkerLog {
    pub pages: VecDeque<LogPage>,
    /// Position in `pages` of the page the next fragment goes to.
    pub tail_page: usize,
    /// Offset in that page of the next fragment.
    pub tail_in_page: u64,
    pub next_seq: u64,
}

impl WorkerLog {
    /// Release every page before the tail page whose fragments are all
    /// below `ts`, oldest first; returns how many.
    pub fn truncate<B: PmemBackend>(
        &mut self,
        pool: &Pool<B>,
        thread: u32,
        worker: usize,
        ts: u64,
    ) -> Result<u64> {
        let owner = PageOwner { table: LOG_TABLE, worker: worker as u16 };
        let mut released = 0;
        while self.tail_page > 0 && self.pages.front().is_some_and(|p| p.max_cts < ts) {
            let page = self.pages.front().expect("checked").page;
            pool.release_page(thread, page, owner)?;
            self.pages.pop_front();
            self.tail_page -= 1;
            released += 1;
        }
        Ok(released)
    }
}

/// One decoded log entry.
#[derive(Debug, Clone)]
pub struct Entry {
    pub table: u32,
    pub key: u64,
    pub row: Option<Vec<u8>>,
}

/// A complete transaction read from a log.
#[derive(Debug, Clone)]
pub struct LoggedTxn {
    pub cts: u64,
    pub entries: Vec<Entry>,
}

/// What reading one worker's log found.
#[derive(Debug, Default)]
pub struct LogScan {
    pub txns: Vec<LoggedTxn>,
    /// Pages of the valid prefix, oldest first, and where appending resumes.
    pub kept: WorkerLog,
    /// Pages after the valid prefix (to release) and the byte range to zero.
    pub drop_pages: Vec<u64>,
    pub zero_from: Option<(u64, u64)>,
    pub incomplete: u64,
    pub bytes: u64,
}

/// The serialized entries of one transaction and where each ends.
#[derive(Debug, Default)]
pub struct RecordBuffer {
    pub entries: Vec<u8>,
    pub ends: Vec<usize>,
    pub fragment: Vec<u8>,
}

impl RecordBuffer {
    pub fn clear(&mut self) {
        self.entries.clear();
        self.ends.clear();
    }

    pub fn push(&mut self, table: u32, key: u64, row: Option<&[u8]>) {
        layout::push_entry(&mut self.entries, table, key, row);
        self.ends.push(self.entries.len());
    }

    fn entry_len(&self, i: usize) -> usize {
        self.ends[i] - if i == 0 { 0 } else { self.ends[i - 1] }
    }

    fn entries_of(&self, first: usize, last: usize) -> &[u8] {
        let from = if first == 0 { 0 } else { self.ends[first - 1] };
        &self.entries[from..self.ends[last - 1]]
    }
}

/// One fragment of a planned append.
#[derive(Debug, Clone, Copy)]
struct Planned {
    /// Position of its page in `WorkerLog::pages`.
    pos: usize,
    offset_in_page: u64,
    first: usize,
    last: usize,
    index: u16,
    bytes: u64,
}

/// Lay the transaction in `buf` out from the log's tail: fragments fill each
/// page as far as whole entries fit, then continue at the next page's start.
fn plan(log: &WorkerLog, buf: &RecordBuffer, page_size: u64) -> Result<Vec<Planned>> {
    let mut out = Vec::new();
    let mut at: Option<(usize, u64)> =
        (!log.pages.is_empty()).then_some((log.tail_page, log.tail_in_page));
    let (mut first, mut index) = (0usize, 0u16);
    while first < buf.ends.len() {
        let need = (FRAGMENT_HEADER + buf.entry_len(first)) as u64;
        let (pos, offset) = match at {
            Some((pos, offset)) if offset + need <= page_size => (pos, offset),
            Some((pos, _)) => (pos + 1, LOG_PAGE_HEADER),
            None => (0, LOG_PAGE_HEADER),
        };
        let room = page_size - offset;
        let (mut last, mut bytes) = (first, FRAGMENT_HEADER as u64);
        while last < buf.ends.len() && bytes + buf.entry_len(last) as u64 <= room {
            bytes += buf.entry_len(last) as u64;
            last += 1;
        }
        if last == first {
            return Err(Error::InvalidConfig(format!(
                "a log entry of {need} bytes does not fit a {page_size}-byte page"
            )));
        }
        out.push(Planned { pos, offset_in_page: offset, first, last, index, bytes });
        at = Some((pos, offset + bytes));
        first = last;
        index = index.checked_add(1).ok_or(Error::AccessSetFull { limit: 1 << 16 })?;
    }
    Ok(out)
}

/// Where and how a worker appends.
pub struct Appender<'a, B: PmemBackend> {
    pub pool: &'a Pool<B>,
    pub thread: u32,
    pub worker: usize,
    /// Injected bug: acknowledge before the flushes and the fence.
    pub ack_before_flush: bool,
}

impl<B: PmemBackend> Appender<'_, B> {
    /// Make sure the log has every page the transaction in `buf` needs
    /// (allocating and formatting them), so that `append` cannot fail.
    pub fn reserve(&self, log: &mut WorkerLog, buf: &RecordBuffer) -> Result<()> {
        let planned = plan(log, buf, self.pool.page_size())?;
        let pages_needed = planned.last().map_or(0, |f| f.pos + 1);
        while log.pages.len() < pages_needed {
            self.new_page(log)?;
        }
        Ok(())
    }

    /// Append the transaction in `buf` with timestamp `cts` (after
    /// `reserve`): fragments, their flushes, ONE fence, then the
    /// acknowledgement marker.
    pub fn append(&self, log: &mut WorkerLog, buf: &mut RecordBuffer, cts: u64) {
        let p = self.pool.persister(self.thread);
        p.marker(Marker::Begin { txn: cts });
        let planned = plan(log, buf, self.pool.page_size()).expect("reserved at prepare");
        let n = planned.len();
        for f in &planned {
            let page = &mut log.pages[f.pos];
            let at = self.pool.page_offset(page.page) + f.offset_in_page;
            let done = f.last == buf.ends.len();
            let count = (f.last - f.first) as u32;
            let mut fragment = std::mem::take(&mut buf.fragment);
            fragment.clear();
            fragment.resize(FRAGMENT_HEADER, 0);
            fragment.extend_from_slice(buf.entries_of(f.first, f.last));
            layout::seal_fragment(&mut fragment, cts, count, f.index, done);
            p.write(at, &fragment);
            buf.fragment = fragment;
            if !self.ack_before_flush {
                p.flush(at, f.bytes);
            }
            page.max_cts = page.max_cts.max(cts);
        }
        if let Some(end) = planned.last() {
            log.tail_page = end.pos;
            log.tail_in_page = end.offset_in_page + end.bytes;
        }
        if self.ack_before_flush {
            p.marker(Marker::Ack { txn: cts });
            for f in &planned {
                p.flush(self.pool.page_offset(log.pages[f.pos].page) + f.offset_in_page, f.bytes);
            }
        }
        debug_assert!(n > 0, "a writing transaction has entries");
        p.fence();
        if !self.ack_before_flush {
            p.marker(Marker::Ack { txn: cts });
        }
    }

    /// Allocate the next log page and write its header (flushed; the next
    /// transaction's fence makes it durable).
    fn new_page(&self, log: &mut WorkerLog) -> Result<()> {
        let owner = PageOwner { table: LOG_TABLE, worker: self.worker as u16 };
        let page = self.pool.allocate_page(self.thread, owner).map_err(|e| {
            if e.is_retryable() { Error::Abort(AbortReason::OutOfSpace) } else { e.into() }
        })?;
        let base = self.pool.page_offset(page);
        let p = self.pool.persister(self.thread);
        p.write(base, &layout::log_page_header(self.worker, log.next_seq));
        p.flush(base, 32);
        if log.pages.is_empty() {
            log.tail_page = 0;
            log.tail_in_page = LOG_PAGE_HEADER;
        }
        log.pages.push_back(LogPage { page, seq: log.next_seq, max_cts: 0 });
        log.next_seq += 1;
        Ok(())
    }
}

/// Read the valid prefix of `worker`'s log from its `pages` (page, seq).
/// `row_bytes[t]` is the row size of table t; every cts below `covered` is
/// in the checkpoint (the first page may open with the last fragments of
/// such a transaction, whose first page was truncated).
pub fn scan<B: PmemBackend>(
    pool: &Pool<B>,
    thread: u32,
    worker: usize,
    mut pages: Vec<(u64, u64)>,
    row_bytes: &[usize],
    covered: u64,
) -> Result<LogScan> {
    pages.sort_by_key(|&(_, seq)| seq);
    for pair in pages.windows(2) {
        if pair[1].1 != pair[0].1 + 1 {
            return Err(Error::Corrupt(format!(
                "log of worker {worker}: pages {} and {} have seqs {} and {}",
                pair[0].0, pair[1].0, pair[0].1, pair[1].1
            )));
        }
    }
    let page_size = pool.page_size();
    let p = pool.persister(thread);
    let mut out = LogScan::default();
    let mut buf = vec![0u8; page_size as usize];
    let mut open: Option<LoggedTxn> = None;
    let mut next_index = 0u16;
    // The end of the last complete transaction: (index into pages, offset).
    let mut valid_end: Option<(usize, u64)> = None;
    let mut page_max = vec![0u64; pages.len()];
    let mut leading = true;
    'pages: for (i, &(page, seq)) in pages.iter().enumerate() {
        let base = pool.page_offset(page);
        p.read(base, &mut buf);
        out.bytes += page_size;
        match layout::decode_log_page_header(&buf[..32]) {
            Some((w, s)) if w == worker as u64 && s == seq => {}
            Some((w, s)) => {
                return Err(Error::Corrupt(format!(
                    "log page {page} says worker {w} seq {s}, the page table says worker {worker}"
                )));
            }
            None => break 'pages,
        }
        if valid_end.is_none() && open.is_none() {
            valid_end = Some((i, LOG_PAGE_HEADER));
        }
        let mut at = LOG_PAGE_HEADER as usize;
        while at + FRAGMENT_HEADER <= buf.len() {
            let len = layout::fragment_len(&buf[at..]);
            if len == 0 {
                break;
            }
            if len < FRAGMENT_HEADER || !len.is_multiple_of(8) || at + len > buf.len() {
                break 'pages;
            }
            let Some(h) = layout::decode_fragment(&buf[at..at + len]) else { break 'pages };
            page_max[i] = page_max[i].max(h.cts);
            if leading && h.index > 0 {
                // The tail of a transaction whose first page was truncated.
                if h.cts >= covered {
                    return Err(Error::Corrupt(format!(
                        "log of worker {worker} opens with fragment {} of uncovered cts {}",
                        h.index, h.cts
                    )));
                }
                at += len;
                valid_end = Some((i, at as u64));
                continue;
            }
            leading = false;
            let in_sequence = match &open {
                None => h.index == 0,
                Some(t) => h.index == next_index && h.cts == t.cts,
            };
            if !in_sequence {
                break 'pages;
            }
            let txn = open.get_or_insert_with(|| LoggedTxn { cts: h.cts, entries: Vec::new() });
            parse_entries(&buf[at + FRAGMENT_HEADER..at + len], h.entries, row_bytes, txn)
                .map_err(|e| Error::Corrupt(format!("log page {page} offset {at}: {e}")))?;
            at += len;
            next_index = h.index.wrapping_add(1);
            if h.last {
                out.txns.push(open.take().expect("just opened"));
                next_index = 0;
                valid_end = Some((i, at as u64));
            }
        }
    }
    out.incomplete = u64::from(open.is_some());
    let Some((last_page, end)) = valid_end else {
        out.drop_pages = pages.iter().map(|&(page, _)| page).collect();
        return Ok(out);
    };
    for (i, &(page, seq)) in pages.iter().enumerate() {
        if i <= last_page {
            out.kept.pages.push_back(LogPage { page, seq, max_cts: page_max[i] });
        } else {
            out.drop_pages.push(page);
        }
    }
    let base = pool.page_offset(pages[last_page].0);
    out.kept.tail_page = last_page;
    out.kept.tail_in_page = end;
    out.kept.next_seq = pages[last_page].1 + 1;
    out.zero_from = Some((base + end, base + page_size));
    Ok(out)
}

fn parse_entries(
    mut bytes: &[u8],
    count: u32,
    row_bytes: &[usize],
    txn: &mut LoggedTxn,
) -> std::result::Result<(), String> {
    for _ in 0..count {
        if bytes.len() < layout::ENTRY_HEADER {
            return Err("entry header past the fragment".into());
        }
        let table = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
        let kind = bytes[4];
        let key = layout::word(bytes, 8);
        let size = *row_bytes.get(table as usize).ok_or(format!("unknown table {table}"))?;
        bytes = &bytes[layout::ENTRY_HEADER..];
        let row = match kind {
            layout::KIND_PUT => {
                let padded = layout::pad8(size);
                if bytes.len() < padded {
                    return Err("row past the fragment".into());
                }
                let row = bytes[..size].to_vec();
                bytes = &bytes[padded..];
                Some(row)
            }
            layout::KIND_DELETE => None,
            other => return Err(format!("unknown entry kind {other}")),
        };
        txn.entries.push(Entry { table, key, row });
    }
    if !bytes.is_empty() {
        return Err(format!("{} bytes after the last entry", bytes.len()));
    }
    Ok(())
}
