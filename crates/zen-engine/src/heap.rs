//! The persistent tuple heap: slots in 2 MiB pages of each worker's region.
//!
//! ```text
//! page (owned by (table, worker) in the pool's page table)
//! ┌──────────────── 64-byte page header ────────────────┬─ slot 0 ─┬─ slot 1 ─┬ …
//! │ magic "ZENHEAP1" │ table u32 · worker u16 │ slot size │ …        │          │
//! └──────────────────┴────────────────────────┴───────────┴──────────┴──────────┘
//! slot (16-byte aligned, so the header never straddles a cache line)
//! ┌──────────── word 0 ────────────┬──────────── word 1 ────────────┬── data ──┐
//! │ key (63 bits) · deleted bit 63 │ Tx-CTS << 1 · LP bit 0          │ row …    │
//! └────────────────────────────────┴────────────────────────────────┴──────────┘
//! ```
//!
//! Word 1 = 0 means the slot is empty. A slot's word 1 is set to zero durably
//! (flushed and fenced) before the slot is reused, so a crash in the middle of
//! writing a reused slot can never combine a new key with an old committed
//! timestamp (hazard 1, "torn header").

pub const PAGE_HEADER_BYTES: u64 = 64;
pub const SLOT_HEADER_BYTES: u64 = 16;
pub const PAGE_MAGIC: u64 = u64::from_le_bytes(*b"ZENHEAP1");
pub const DELETED_BIT: u64 = 1 << 63;
pub const LP_BIT: u64 = 1;

/// Bytes of a slot for rows of `row_bytes`.
pub fn slot_size(row_bytes: usize) -> u64 {
    SLOT_HEADER_BYTES + (row_bytes as u64).div_ceil(16) * 16
}

/// Slots in one page.
pub fn slots_per_page(page_size: u64, slot_size: u64) -> u64 {
    (page_size - PAGE_HEADER_BYTES) / slot_size
}

/// Offset of slot `index` of the page starting at `page_offset`.
pub fn slot_offset(page_offset: u64, slot_size: u64, index: u64) -> u64 {
    page_offset + PAGE_HEADER_BYTES + index * slot_size
}

/// The encoded page header words.
pub fn page_header(table: u32, worker: u16, slot_size: u64) -> [u8; 24] {
    let mut b = [0u8; 24];
    b[0..8].copy_from_slice(&PAGE_MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&(u64::from(table) | (u64::from(worker) << 32)).to_le_bytes());
    b[16..24].copy_from_slice(&slot_size.to_le_bytes());
    b
}

/// A decoded slot header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHeader {
    pub key: u64,
    pub deleted: bool,
    pub cts: u64,
    pub lp: bool,
}

impl SlotHeader {
    pub fn decode(word0: u64, word1: u64) -> Option<SlotHeader> {
        if word1 == 0 {
            return None;
        }
        Some(SlotHeader {
            key: word0 & !DELETED_BIT,
            deleted: word0 & DELETED_BIT != 0,
            cts: word1 >> 1,
            lp: word1 & LP_BIT != 0,
        })
    }

    pub fn word0(key: u64, deleted: bool) -> u64 {
        key | if deleted { DELETED_BIT } else { 0 }
    }

    pub fn word1(cts: u64, lp: bool) -> u64 {
        (cts << 1) | u64::from(lp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_16_byte_aligned_and_fit_the_page() {
        for row in [1, 8, 100, 1000, 1008] {
            let s = slot_size(row);
            assert_eq!(s % 16, 0);
            let n = slots_per_page(2 << 20, s);
            assert!(slot_offset(0, s, n - 1) + s <= 2 << 20);
        }
    }

    #[test]
    fn header_words_round_trip() {
        let h = SlotHeader::decode(SlotHeader::word0(42, true), SlotHeader::word1(77, true));
        assert_eq!(h, Some(SlotHeader { key: 42, deleted: true, cts: 77, lp: true }));
        assert_eq!(SlotHeader::decode(5, 0), None);
    }
}
