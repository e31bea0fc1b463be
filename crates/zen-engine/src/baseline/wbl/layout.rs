//! Byte layouts of the wbl pool: meta page with the write-behind log ring,
//! heap pages of versions. Fixed-width little-endian 8-byte words.
//!
//! ```text
//! meta page (owner SYSTEM; the catalog's `floor_page`)
//!    0  u64 magic "ZENWBL01"
//!   64  ring of RING_RECORDS write-behind records, 64 bytes apart:
//!         0 u64 seq (1, 2, …)   8 u64 cp   16 u64 cd
//!        24 u64 check = crc32c(bytes 0..24) | "WBL1" << 32
//!       record seq s lives in slot s % RING_RECORDS; the valid record of the
//!       largest seq is the log's last record
//!
//! heap page (owner (table, worker): the worker's region of the table)
//!    0  u64 magic "ZENWBLH1"   8 u64 table | worker << 32   16 u64 slot size
//!   64  slots
//!
//! version slot (slot size = 48 + row padded to 16)
//!    0  key (63 bits) | DELETED << 63              ┐ written once, persisted
//!    8  begin cts (0 = empty slot)                 ┘ (recovery's commit test)
//!   16  end cts: cts of the version that superseded it (0: newest)   ┐ per-tuple
//!   24  txn id of the transaction holding its write lock (0: none)  │ CC metadata
//!   32  prev: offset of the previous version's slot (0: none)       ┘
//!   40  reserved (0)
//!   48  row
//! ```
//!
//! A slot is free iff its begin-cts word is durably 0 (reclamation zeroes it
//! and waits for a fence before reuse), so a torn reuse can never combine a
//! new key with an old, committed timestamp.

pub const META_MAGIC: u64 = u64::from_le_bytes(*b"ZENWBL01");
pub const RING_OFFSET: u64 = 64;
pub const RING_RECORDS: u64 = 64;
pub const RECORD_BYTES: u64 = 64;
const RECORD_TAG: u64 = u32::from_le_bytes(*b"WBL1") as u64;

pub const PAGE_MAGIC: u64 = u64::from_le_bytes(*b"ZENWBLH1");
pub const PAGE_HEADER: u64 = 64;
pub const SLOT_HEADER: u64 = 48;
pub const DELETED: u64 = 1 << 63;
pub const OFF_CTS: u64 = 8;
pub const OFF_END: u64 = 16;
pub const OFF_TXN: u64 = 24;

const _: () = assert!(RING_OFFSET + RING_RECORDS * RECORD_BYTES <= 64 << 10);
const _: () = assert!(SLOT_HEADER.is_multiple_of(16) && PAGE_HEADER.is_multiple_of(16));

/// Bytes of a version slot for rows of `row_bytes`.
pub fn slot_size(row_bytes: usize) -> u64 {
    SLOT_HEADER + (row_bytes as u64).div_ceil(16) * 16
}

pub fn slots_per_page(page_size: u64, slot_size: u64) -> u64 {
    (page_size - PAGE_HEADER) / slot_size
}

/// The 24-byte header of a heap page.
pub fn page_header(table: u32, worker: u16, slot_size: u64) -> [u8; 24] {
    let mut b = [0u8; 24];
    b[0..8].copy_from_slice(&PAGE_MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&(u64::from(table) | (u64::from(worker) << 32)).to_le_bytes());
    b[16..24].copy_from_slice(&slot_size.to_le_bytes());
    b
}

/// A write-behind record: every transaction with cts ≤ cp is durable; no
/// version with cts > cd was written before the next record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WblRecord {
    pub seq: u64,
    pub cp: u64,
    pub cd: u64,
}

impl WblRecord {
    pub fn encode(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[0..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.cp.to_le_bytes());
        b[16..24].copy_from_slice(&self.cd.to_le_bytes());
        let check = u64::from(crc32c::crc32c(&b[..24])) | (RECORD_TAG << 32);
        b[24..32].copy_from_slice(&check.to_le_bytes());
        b
    }

    /// The record in `b`, if whole.
    pub fn decode(b: &[u8]) -> Option<WblRecord> {
        let word = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        let check = u64::from(crc32c::crc32c(&b[..24])) | (RECORD_TAG << 32);
        (word(3) == check && word(0) != 0 && word(1) <= word(2)).then(|| WblRecord {
            seq: word(0),
            cp: word(1),
            cd: word(2),
        })
    }

    /// Offset of the ring slot of record `seq` in the meta page at `meta`.
    pub fn offset(meta: u64, seq: u64) -> u64 {
        meta + RING_OFFSET + (seq % RING_RECORDS) * RECORD_BYTES
    }
}

/// The 48-byte header of a new version.
pub fn version_header(key: u64, deleted: bool, cts: u64, prev: u64) -> [u8; 48] {
    let mut b = [0u8; 48];
    b[0..8].copy_from_slice(&(key | if deleted { DELETED } else { 0 }).to_le_bytes());
    b[8..16].copy_from_slice(&cts.to_le_bytes());
    b[32..40].copy_from_slice(&prev.to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_zero_or_torn_ones_do_not_check() {
        let r = WblRecord { seq: 5, cp: 10, cd: 20 };
        assert_eq!(WblRecord::decode(&r.encode()), Some(r));
        assert_eq!(WblRecord::decode(&[0u8; 32]), None);
        let mut torn = r.encode();
        torn[9] ^= 1;
        assert_eq!(WblRecord::decode(&torn), None);
    }

    #[test]
    fn slots_fit_pages_and_stay_aligned() {
        for row in [1, 8, 100, 1000] {
            let s = slot_size(row);
            assert_eq!(s % 16, 0);
            assert!(PAGE_HEADER + slots_per_page(64 << 10, s) * s <= 64 << 10);
        }
    }
}
