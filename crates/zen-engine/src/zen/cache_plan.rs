//! Met-Cache sizing across tables (Zen §3.2): the greedy knapsack rule.
//!
//! Expected hits per transaction are Σ f_i·C_i / S_i (f_i: tuples of table i
//! accessed per transaction, S_i: its size, C_i: its cache share, all in
//! entries). Every table first gets its minimum (so concurrency control always
//! has entries to work with); the rest of the budget goes to tables in order of
//! descending f_i / S_i, each up to its full size (more would not help).
//!
//! The minimum is C_min, or `ACTIVE_HEADROOM` × f_i when that is larger. The
//! entries a running transaction touched cannot be evicted (C3), so a table
//! that every transaction inserts into (TPC-C's order lines: f_i ≈ 17 per
//! transaction, 10 of them inserts, S_i in the millions, so last in the f/S
//! order) needs room for them: with C_min = 16 such a region was full of its
//! own transaction's entries, and each insert walked the whole region for a
//! victim (TPC-C, 4 warehouses, 256 MiB: ~2,000 hand steps per transaction).
//!
//! Budget left over when every table is cached whole is split evenly, so
//! tables that grow (or were empty when planned) still have room.
//!
//! The engine plans once per table creation and after recovery (f_i unknown:
//! equal), again whenever `Engine::rebalance_cache` is called with measured
//! f_i (the benchmark driver calls it after warm-up), and when a region at its
//! limit belongs to a table that has grown by a quarter since the last plan
//! (`Shared::replan_if_grown`).

/// What the planner knows of one table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TableDemand {
    /// Tuples of the table accessed per transaction (f_i).
    pub accesses_per_txn: f64,
    /// Rows in the table (S_i, in entries): keys ever given a record, so
    /// deleted keys count too (an upper bound, read in O(1) per table).
    pub rows: u64,
    /// DRAM bytes of one cache entry of the table.
    pub entry_bytes: u64,
}

/// How many times a transaction's own accesses of a table its minimum share
/// holds, so that the CLOCK hand meets mostly evictable entries.
pub const ACTIVE_HEADROOM: f64 = 4.0;

impl TableDemand {
    /// The table's minimum share: `min_entries` (C_min), or room for
    /// `ACTIVE_HEADROOM` transactions' accesses of it.
    pub fn min_share(&self, min_entries: u64) -> u64 {
        min_entries.max((ACTIVE_HEADROOM * self.accesses_per_txn).ceil() as u64)
    }
}

/// Entries per table for a cache of `budget_bytes`, at least
/// `TableDemand::min_share(min_entries)` each.
pub fn plan(budget_bytes: u64, min_entries: u64, tables: &[TableDemand]) -> Vec<u64> {
    let mut shares: Vec<u64> = tables.iter().map(|t| t.min_share(min_entries)).collect();
    let reserved: u64 = tables.iter().zip(&shares).map(|(t, m)| m * t.entry_bytes).sum();
    let mut left = budget_bytes.saturating_sub(reserved);
    let mut order: Vec<usize> = (0..tables.len()).collect();
    let density = |t: &TableDemand| t.accesses_per_txn / t.rows.max(1) as f64;
    order.sort_by(|&a, &b| density(&tables[b]).total_cmp(&density(&tables[a])));
    for i in order {
        let t = &tables[i];
        let want = t.rows.saturating_sub(shares[i]);
        let take = want.min(left / t.entry_bytes.max(1));
        shares[i] += take;
        left -= take * t.entry_bytes;
    }
    let per_table = left / tables.len().max(1) as u64;
    for (share, t) in shares.iter_mut().zip(tables) {
        *share += per_table / t.entry_bytes.max(1);
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(f: f64, rows: u64) -> TableDemand {
        TableDemand { accesses_per_txn: f, rows, entry_bytes: 100 }
    }

    #[test]
    fn dense_tables_are_cached_whole_first() {
        // Budget of 1,000 entries; minimum 10 each.
        let shares = plan(100_000, 10, &[t(1.0, 10_000), t(5.0, 100), t(2.0, 500)]);
        assert_eq!(shares[1], 100, "small hot table entirely");
        assert_eq!(shares[2], 500, "next densest entirely");
        assert_eq!(shares[0], 400, "the big table gets the rest");
        assert_eq!(shares.iter().sum::<u64>(), 1000, "whole budget used");
    }

    #[test]
    fn every_table_gets_the_minimum_even_when_over_budget() {
        let shares = plan(1_000, 10, &[t(1.0, 1_000), t(1.0, 1_000)]);
        assert_eq!(shares, vec![10, 10]);
    }

    #[test]
    fn a_table_every_transaction_inserts_into_keeps_room_for_its_own_entries() {
        // f = 17 per transaction, millions of rows: last in the f/S order,
        // yet it keeps 4 × 17 = 68 entries, not C_min, whatever the others want.
        let shares = plan(20_000, 16, &[t(17.0, 5_000_000), t(10.0, 1_000)]);
        assert_eq!(shares[0], 68);
        assert_eq!(shares[1], 132, "the rest of the 200-entry budget");
        assert_eq!(t(0.5, 10).min_share(16), 16, "C_min below that");
    }

    #[test]
    fn empty_tables_split_the_budget_evenly() {
        assert_eq!(plan(100_000, 10, &[t(1.0, 0), t(1.0, 0)]), vec![500, 500]);
    }

    #[test]
    fn unknown_frequencies_favour_small_tables() {
        let shares = plan(50_000, 1, &[t(1.0, 10_000), t(1.0, 10)]);
        assert_eq!(shares[1], 10);
        assert_eq!(shares[0], 490);
    }
}
