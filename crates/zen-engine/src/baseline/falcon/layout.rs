//! Byte layouts of the falcon pool: heap pages of single-version tuple
//! slots, and one log page per worker holding its redo ring (the small log
//! window, or the page-sized log of the Inp variants). Fixed-width
//! little-endian fields.
//!
//! ```text
//! heap page (owner (table, worker): the worker's region of the table)
//!    0  u64 magic "ZENFALH1"   8 u64 table | worker << 32   16 u64 slot size
//!   64  slots
//!
//! tuple slot (slot size = 16 + row padded to 16; the 16-byte header never
//! straddles a cache line)
//!    0  u64 key (63 bits) | DELETED << 63
//!    8  u64 cts of the last write (0: never written); never decreases
//!   16  row, updated in place
//!
//! log page (owner (LOG_TABLE, worker))
//!    0  u64 magic "ZENFALW1"   8 u64 worker   16 u64 ring bytes R
//!   24  u64 crc32c(bytes 0..24)
//!   64  the ring: records at 8-aligned offsets in [0, R), none straddling R
//!
//! redo record (one per writing transaction)
//!    0  u32 tag "FREC"         4 u32 record bytes L (multiple of 8)
//!    8  u64 seq (per worker)  16 u64 cts
//!   24  u32 entries           28 u32 0
//!   32  entries: u32 table · u8 kind (1 write, 2 delete) · 3 pad · u64 key
//!                · u64 slot · row (write only; padded to 8)
//!  L-8  u64 seal = crc32c(bytes 0..L-8 ‖ ring offset) | "SEAL" << 32
//! ```
//!
//! The seal is the commit mark: a record whose seal checks is a committed
//! transaction, whole. Including the ring offset in the crc means a record
//! copied elsewhere (inside a row, or a stale lap) is only taken for one
//! where it was written.

use zen_pmem::SYSTEM_TABLE;

pub const HEAP_MAGIC: u64 = u64::from_le_bytes(*b"ZENFALH1");
pub const LOG_MAGIC: u64 = u64::from_le_bytes(*b"ZENFALW1");
pub const META_MAGIC: u64 = u64::from_le_bytes(*b"ZENFALM1");
/// Page-table owner of the log pages.
pub const LOG_TABLE: u32 = SYSTEM_TABLE - 1;

pub const PAGE_HEADER: u64 = 64;
pub const SLOT_HEADER: u64 = 16;
pub const DELETED: u64 = 1 << 63;
pub const OFF_CTS: u64 = 8;

pub const RECORD_TAG: u32 = u32::from_le_bytes(*b"FREC");
const SEAL_TAG: u64 = u32::from_le_bytes(*b"SEAL") as u64;
pub const RECORD_HEADER: usize = 32;
pub const SEAL_BYTES: usize = 8;
pub const ENTRY_HEADER: usize = 24;
pub const KIND_WRITE: u8 = 1;
pub const KIND_DELETE: u8 = 2;

const _: () = assert!(PAGE_HEADER == crate::baseline::wbl::layout::PAGE_HEADER);
const _: () = assert!(SLOT_HEADER.is_multiple_of(16) && PAGE_HEADER.is_multiple_of(64));
const _: () = assert!(RECORD_HEADER.is_multiple_of(8) && ENTRY_HEADER.is_multiple_of(8));

pub fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Bytes of a tuple slot for rows of `row_bytes`.
pub fn slot_size(row_bytes: usize) -> u64 {
    SLOT_HEADER + (row_bytes as u64).div_ceil(16) * 16
}

pub fn slots_per_page(page_size: u64, slot_size: u64) -> u64 {
    (page_size - PAGE_HEADER) / slot_size
}

fn word(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

fn put(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The 24-byte header of a heap page.
pub fn heap_header(table: u32, worker: u16, slot_size: u64) -> [u8; 24] {
    let mut b = [0u8; 24];
    put(&mut b, 0, HEAP_MAGIC);
    put(&mut b, 8, u64::from(table) | (u64::from(worker) << 32));
    put(&mut b, 16, slot_size);
    b
}

/// The 32-byte header of a log page.
pub fn log_header(worker: u16, ring_bytes: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    put(&mut b, 0, LOG_MAGIC);
    put(&mut b, 8, u64::from(worker));
    put(&mut b, 16, ring_bytes);
    let crc = u64::from(crc32c::crc32c(&b[..24]));
    put(&mut b, 24, crc);
    b
}

/// (worker, ring bytes) of a whole log page header.
pub fn decode_log_header(b: &[u8]) -> Option<(u64, u64)> {
    (word(b, 0) == LOG_MAGIC && word(b, 24) == u64::from(crc32c::crc32c(&b[..24])))
        .then(|| (word(b, 8), word(b, 16)))
}

/// Bytes of the record of a transaction whose entries take `entry_bytes`.
pub fn record_bytes(entry_bytes: usize) -> usize {
    RECORD_HEADER + entry_bytes + SEAL_BYTES
}

/// Append one entry to `out`.
pub fn push_entry(out: &mut Vec<u8>, table: u32, key: u64, slot: u64, row: Option<&[u8]>) {
    out.extend_from_slice(&table.to_le_bytes());
    out.push(if row.is_some() { KIND_WRITE } else { KIND_DELETE });
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&slot.to_le_bytes());
    if let Some(row) = row {
        out.extend_from_slice(row);
        out.resize(out.len() + pad8(row.len()) - row.len(), 0);
    }
}

/// Fill the header of `record` (which holds header room, the entries and
/// seal room) for `seq`/`cts`; the seal is computed by [`seal`].
pub fn fill_record_header(record: &mut [u8], seq: u64, cts: u64, entries: u32) {
    let len = u32::try_from(record.len()).expect("a record is smaller than a page");
    record[0..4].copy_from_slice(&RECORD_TAG.to_le_bytes());
    record[4..8].copy_from_slice(&len.to_le_bytes());
    put(record, 8, seq);
    put(record, 16, cts);
    record[24..28].copy_from_slice(&entries.to_le_bytes());
    record[28..32].copy_from_slice(&[0; 4]);
}

/// The seal word of a record whose bytes before the seal are `body`,
/// written at `ring_offset`.
pub fn seal(body: &[u8], ring_offset: u64) -> u64 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(body), &ring_offset.to_le_bytes());
    u64::from(crc) | (SEAL_TAG << 32)
}

/// A record's header, as read at a ring offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub len: usize,
    pub seq: u64,
    pub cts: u64,
    pub entries: u32,
}

/// The length a record starting with `head` (8 bytes) claims, if it is
/// tagged as a record.
pub fn record_len(head: &[u8]) -> Option<usize> {
    let tag = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes"));
    let len = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes")) as usize;
    (tag == RECORD_TAG && len >= RECORD_HEADER + SEAL_BYTES && len.is_multiple_of(8)).then_some(len)
}

/// The header of the whole record `b` written at `ring_offset`, if its seal
/// checks (it committed).
pub fn decode_record(b: &[u8], ring_offset: u64) -> Option<RecordHeader> {
    let len = record_len(b)?;
    if b.len() != len {
        return None;
    }
    let body = &b[..len - SEAL_BYTES];
    if word(b, len - SEAL_BYTES) != seal(body, ring_offset) {
        return None;
    }
    Some(RecordHeader {
        len,
        seq: word(b, 8),
        cts: word(b, 16),
        entries: u32::from_le_bytes(b[24..28].try_into().expect("4 bytes")),
    })
}

/// One entry of a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub table: u32,
    pub key: u64,
    pub slot: u64,
    /// `None`: a delete.
    pub row: Option<Vec<u8>>,
}

/// The entries of a sealed record's body (`bytes` = what follows the
/// header, up to the seal); `row_bytes[t]` is table t's row size.
pub fn parse_entries(
    mut bytes: &[u8],
    count: u32,
    row_bytes: &[usize],
) -> Result<Vec<Entry>, String> {
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        if bytes.len() < ENTRY_HEADER {
            return Err("entry header past the record".into());
        }
        let table = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
        let kind = bytes[4];
        let key = word(bytes, 8);
        let slot = word(bytes, 16);
        let size = *row_bytes.get(table as usize).ok_or(format!("unknown table {table}"))?;
        bytes = &bytes[ENTRY_HEADER..];
        let row = match kind {
            KIND_WRITE => {
                let padded = pad8(size);
                if bytes.len() < padded {
                    return Err("row past the record".into());
                }
                let row = bytes[..size].to_vec();
                bytes = &bytes[padded..];
                Some(row)
            }
            KIND_DELETE => None,
            other => return Err(format!("unknown entry kind {other}")),
        };
        out.push(Entry { table, key, slot, row });
    }
    if !bytes.is_empty() {
        return Err(format!("{} bytes after the last entry", bytes.len()));
    }
    Ok(out)
}

/// The 16-byte header of a slot holding `key` written at `cts`.
pub fn slot_header(key: u64, deleted: bool, cts: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    put(&mut b, 0, key | if deleted { DELETED } else { 0 });
    put(&mut b, 8, cts);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, at: u64) -> Vec<u8> {
        let mut entries = Vec::new();
        push_entry(&mut entries, 0, 42, 4096, Some(&[7u8; 12]));
        push_entry(&mut entries, 1, 43, 8192, None);
        let mut r = vec![0u8; RECORD_HEADER];
        r.extend_from_slice(&entries);
        r.resize(r.len() + SEAL_BYTES, 0);
        fill_record_header(&mut r, seq, 99, 2);
        let end = r.len() - SEAL_BYTES;
        let s = seal(&r[..end], at);
        r[end..].copy_from_slice(&s.to_le_bytes());
        r
    }

    #[test]
    fn records_round_trip_and_a_flipped_bit_or_another_place_is_caught() {
        let r = record(5, 128);
        let h = decode_record(&r, 128).unwrap();
        assert_eq!(h, RecordHeader { len: r.len(), seq: 5, cts: 99, entries: 2 });
        let body = &r[RECORD_HEADER..r.len() - SEAL_BYTES];
        let entries = parse_entries(body, 2, &[12, 8]).unwrap();
        assert_eq!(entries[0].row.as_deref(), Some(&[7u8; 12][..]));
        assert_eq!(entries[1], Entry { table: 1, key: 43, slot: 8192, row: None });
        assert_eq!(decode_record(&r, 136), None, "a record read at another offset");
        let mut torn = r.clone();
        torn[40] ^= 1;
        assert_eq!(decode_record(&torn, 128), None);
        assert!(parse_entries(body, 2, &[12]).is_err(), "an unknown table is refused");
    }

    #[test]
    fn log_headers_check_themselves_and_slots_fit_pages() {
        let h = log_header(3, 4096);
        assert_eq!(decode_log_header(&h), Some((3, 4096)));
        assert_eq!(decode_log_header(&[0u8; 32]), None);
        for row in [1, 8, 100, 1000] {
            let s = slot_size(row);
            assert_eq!(s % 16, 0);
            assert!(PAGE_HEADER + slots_per_page(64 << 10, s) * s <= 64 << 10);
        }
    }
}
