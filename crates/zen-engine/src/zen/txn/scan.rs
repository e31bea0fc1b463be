//! Range scans and secondary-index lookups, and the `Transaction` impl.
//!
//! A scan reads every record of the range through the normal read path (so
//! each row is validated like a point read) and remembers the record ids it
//! met; commit re-scans the index range and aborts with `Phantom` if the set
//! of records changed (records the transaction inserted itself excepted) or
//! a key of the range was unlinked while it re-scanned (`index/mod.rs`,
//! "Phantoms and unlinks").

use std::ops::RangeInclusive;

use zen_pmem::PmemBackend;

use super::{ReadItem, ScanItem, WriteKind, ZenWorker};
use crate::api::{TableId, Transaction};
use crate::cc::Protocol;
use crate::config::RaceFault;
use crate::error::{Error, Result};
use crate::zen::table::Table;

impl<B: PmemBackend, P: Protocol> ZenWorker<'_, B, P> {
    pub(super) fn scan(
        &mut self,
        table: TableId,
        range: RangeInclusive<u64>,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        let t = self.table(table)?;
        let (low, high) = (*range.start(), *range.end());
        crate::index::check_range(&t.schema.name, low, high)?;
        // The worker's row buffer (only commit and update use it, never a
        // scan's reads): no allocation per scan.
        let mut row = std::mem::take(&mut self.row_buf);
        row.resize(t.row_bytes, 0);
        let scanned = if self.snapshot.is_some() {
            self.scan_snapshot(t, low, high, limit, f, &mut row)
        } else {
            self.scan_into(t, low, high, limit, f, &mut row)
        };
        self.row_buf = row;
        scanned
    }

    /// A scan of the current versions (read set and phantom check).
    fn scan_into(
        &mut self,
        t: &Table,
        low: u64,
        high: u64,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
        row: &mut [u8],
    ) -> Result<usize> {
        if let Some(ts) = self.txn_ts.filter(|_| P::MULTI_VERSION) {
            // Before reading: an older inserter either sees this and aborts,
            // or its locked entry is already in the index and we wait for it.
            t.raise_scan_rts(low, high, ts);
        }
        let rids_at = self.scan_rids.len();
        let mut visited = 0;
        let mut last = high;
        let mut stopped = false;
        for (key, rid) in t.index.range(low..=high) {
            self.check_access_limit()?;
            self.scan_rids.push(rid);
            last = key;
            if self.visit(t, key, rid, row)? {
                visited += 1;
                if !f(key, row) || visited >= limit {
                    stopped = true;
                    break;
                }
            }
        }
        if !stopped {
            last = high;
        }
        let rids_len = self.scan_rids.len() - rids_at;
        self.scans.push(ScanItem { table: t.id.0, low, high: last, rids_at, rids_len });
        Ok(visited)
    }

    /// A snapshot scan (Zen+): no read set, no phantom check (the snapshot is
    /// complete, R1), no access-set limit (nothing is remembered).
    fn scan_snapshot(
        &mut self,
        t: &Table,
        low: u64,
        high: u64,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
        row: &mut [u8],
    ) -> Result<usize> {
        let mut visited = 0;
        for (key, rid) in t.index.range(low..=high) {
            self.safe_point(t)?;
            if self.read_snapshot(t, rid, row)? {
                visited += 1;
                if !f(key, row) || visited >= limit {
                    break;
                }
            }
        }
        Ok(visited)
    }

    /// Read one record met by a scan; true when it has a live row in `row`.
    fn visit(&mut self, t: &Table, key: u64, rid: u64, row: &mut [u8]) -> Result<bool> {
        self.safe_point(t)?;
        self.count_access(t);
        if P::PARTITIONED {
            self.lock_partition(t, key)?;
        }
        if let Some(i) = self.find_write(t.id.0, rid) {
            let w = self.writes[i];
            if w.kind == WriteKind::Delete {
                return Ok(false);
            }
            row.copy_from_slice(&self.write_data[w.data_at..w.data_at + t.row_bytes]);
            return Ok(true);
        }
        let (loc, observed) = self.read_current(t, key, rid, row)?;
        self.reads.push(ReadItem {
            table: t.id.0,
            for_update: false,
            rid,
            loc,
            observed,
            wts: self.last_wts,
        });
        Ok(super::found(loc, observed))
    }

    /// Does the index range of `scan` still hold exactly the records it met,
    /// with no key of it unlinked meanwhile (`index::PrimaryIndex::rescan_stable`)?
    pub(super) fn scan_still_valid(&self, scan: &ScanItem) -> bool {
        let t = &self.tables[scan.table as usize];
        if self.race(RaceFault::RescanIgnoresUnlinks) {
            return self.rescan_matches(t, scan);
        }
        t.index.rescan_stable(scan.low, scan.high, || self.rescan_matches(t, scan))
    }

    fn rescan_matches(&self, t: &Table, scan: &ScanItem) -> bool {
        let seen = &self.scan_rids[scan.rids_at..scan.rids_at + scan.rids_len];
        let mine = |rid: u64| {
            self.writes
                .iter()
                .any(|w| w.table == scan.table && w.rid == rid && w.kind == WriteKind::Insert)
        };
        let mut now = t.index.range(scan.low..=scan.high).map(|(_, rid)| rid).filter(|&r| !mine(r));
        let mut before = seen.iter().copied().filter(|&r| !mine(r));
        loop {
            match (now.next(), before.next()) {
                (None, None) => return true,
                (Some(a), Some(b)) if a == b => {}
                _ => return false,
            }
        }
    }

    pub(super) fn lookup_secondary(
        &mut self,
        table: TableId,
        index: usize,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        let t = self.table(table)?;
        let s = t.secondary.get(index).ok_or_else(|| Error::InvalidSchema {
            table: t.schema.name.clone(),
            detail: format!("no secondary index #{index}"),
        })?;
        if self.snapshot.is_some() {
            let mut candidates = Vec::new();
            s.lookup(&t.schema.name, prefix, usize::MAX, &mut candidates)?;
            return self.filter_secondary_at_snapshot(t, index, prefix, candidates, limit, out);
        }
        s.lookup(&t.schema.name, prefix, limit, out)
    }

    /// Secondary indexes hold only the current keys. A snapshot keeps the
    /// candidates whose row exists at S with a matching secondary key (rows
    /// inserted later are dropped). It cannot find a row whose secondary key
    /// changed, or that was deleted, after S (see `adaptive.rs`).
    fn filter_secondary_at_snapshot(
        &mut self,
        t: &Table,
        index: usize,
        prefix: &[u8],
        candidates: Vec<u64>,
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        let mut row = vec![0u8; t.row_bytes];
        for pk in candidates {
            if out.len() >= limit {
                break;
            }
            self.safe_point(t)?;
            let Some(rid) = t.lookup(pk) else { continue };
            if self.read_snapshot(t, rid, &mut row)?
                && t.secondary[index].key_starts_with(&row, prefix)
            {
                out.push(pk);
            }
        }
        Ok(())
    }
}

/// The transaction handed to a body: a view of the worker.
pub struct ZenTxn<'w, 'e, B: PmemBackend, P: Protocol> {
    pub(super) w: &'w mut ZenWorker<'e, B, P>,
}

/// The worker is also the explicit transaction's handle (`begin_txn`).
impl<B: PmemBackend, P: Protocol> Transaction for ZenWorker<'_, B, P> {
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        ZenWorker::get(self, table, key, out)
    }
    fn get_for_update(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        ZenWorker::get_for_update(self, table, key, out)
    }
    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        ZenWorker::insert(self, table, key, row)
    }
    fn update(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.update_or_delete(table, key, Some(row))
    }
    fn delete(&mut self, table: TableId, key: u64) -> Result<()> {
        self.update_or_delete(table, key, None)
    }
    fn scan(
        &mut self,
        table: TableId,
        range: RangeInclusive<u64>,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        ZenWorker::scan(self, table, range, limit, f)
    }
    fn lookup_secondary(
        &mut self,
        table: TableId,
        index: usize,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        ZenWorker::lookup_secondary(self, table, index, prefix, limit, out)
    }
    fn prefetch(&mut self, table: TableId, keys: &[u64]) {
        ZenWorker::prefetch(self, table, keys)
    }
}

impl<B: PmemBackend, P: Protocol> Transaction for ZenTxn<'_, '_, B, P> {
    fn get(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.w.get(table, key, out)
    }
    fn get_for_update(&mut self, table: TableId, key: u64, out: &mut [u8]) -> Result<bool> {
        self.w.get_for_update(table, key, out)
    }
    fn insert(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.w.insert(table, key, row)
    }
    fn update(&mut self, table: TableId, key: u64, row: &[u8]) -> Result<()> {
        self.w.update_or_delete(table, key, Some(row))
    }
    fn delete(&mut self, table: TableId, key: u64) -> Result<()> {
        self.w.update_or_delete(table, key, None)
    }
    fn scan(
        &mut self,
        table: TableId,
        range: RangeInclusive<u64>,
        limit: usize,
        f: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<usize> {
        self.w.scan(table, range, limit, f)
    }
    fn lookup_secondary(
        &mut self,
        table: TableId,
        index: usize,
        prefix: &[u8],
        limit: usize,
        out: &mut Vec<u64>,
    ) -> Result<()> {
        self.w.lookup_secondary(table, index, prefix, limit, out)
    }
    fn prefetch(&mut self, table: TableId, keys: &[u64]) {
        self.w.prefetch(table, keys)
    }
}
