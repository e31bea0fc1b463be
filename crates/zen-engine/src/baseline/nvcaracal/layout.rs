//! nvcaracal's persistent formats (byte diagrams in `docs/design/nvcaracal.md`).
//!
//! META PAGE (a system page; `CatalogDoc::floor_page` names it)
//! ```text
//!   0  magic "NVCARAC1"
//!   8  durable epoch E        (8-byte atomic; written last in an epoch)
//!  16  log seal S             (8-byte atomic; = the epoch whose inputs are
//!                              logged completely; S ∈ {E, E+1})
//!  24  log page count n
//!  32  persistent row bytes R  (0: inline-only, the slot sized to the row)
//!  40  n log page ids (u64 each)
//! ```
//! INPUT LOG (the n log pages as one byte stream; one epoch at a time)
//! ```text
//!   0  epoch | txn count | payload bytes | crc32c(payload) | procedure-set
//!      fingerprint | 0 | 0 | 0                                 (64 bytes)
//!  64  per transaction: proc u32 | writes u32 | input bytes u64 |
//!      writes × (table u64, key u64) | input, padded to 8
//! ```
//! ROW SLOT (table pages, packed from offset 0; `SlotLayout::size` bytes,
//! a multiple of 64: R, or, inline-only, 16 + 2 V rounded up to 64)
//! ```text
//!   0  key u64 | 0 u64
//!  16  version 0: epoch u64 (0 = empty) | flags u64 (bit 0: tombstone) |
//!                 inline heap: the row, or (pooled table) value offset u64
//!  16+V version 1: the same
//!        V = (R - 16) / 2 rounded down to 8 (its inline heap V - 16 bytes;
//!        R = 256: 120 and 104); inline-only: 16 + row bytes rounded up to 8
//! ```
//! VALUE (value pages of a pooled table: a table whose row does not fit the
//! inline heap; `value_size` = row bytes rounded up to 64, packed from 0)
//! ```text
//!   0  the row's bytes (no header: a value is live iff a version <= E
//!      names it, so the free list is rebuilt from the slots)
//! ```
//! The newest version with `0 < epoch ≤ E` is the row; a slot whose newest
//! version is a tombstone, or that has none, is free. An epoch writes a row
//! into its *older* version (empty, or stale: the write deletes it, the
//! minor collector; the major collector empties it in the next epoch's
//! init phase instead), so the newest stays intact until the epoch is
//! durable.

use crate::error::{Error, Result};

pub const META_MAGIC: u64 = u64::from_le_bytes(*b"NVCARAC2");
pub const META_EPOCH: u64 = 8;
pub const META_SEAL: u64 = 16;
pub const META_LOG_PAGES: u64 = 24;
pub const META_ROW_BYTES: u64 = 32;
pub const META_LOG_IDS: u64 = 40;

pub const LOG_HEADER: u64 = 64;
pub const FLAG_TOMBSTONE: u64 = 1;
pub const VERSION_HEADER: u64 = 16;
/// `PageOwner::worker` of a table's value pages (its slot pages have 0).
pub const VALUE_PAGE: u16 = 1;

/// Bytes of a version: header plus the row padded to 8.
pub fn version_bytes(row: usize) -> u64 {
    VERSION_HEADER + (row as u64).div_ceil(8) * 8
}

/// Bytes of a row slot (two versions after the key), a multiple of 64.
pub fn slot_size(row: usize) -> u64 {
    (16 + 2 * version_bytes(row)).div_ceil(64) * 64
}

/// Offset of version `v` (0 or 1) within an inline-only slot.
pub fn version_offset(row: usize, v: usize) -> u64 {
    16 + v as u64 * version_bytes(row)
}

/// The slot format of a table (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotLayout {
    /// Bytes of a slot (a multiple of 64).
    pub size: u64,
    /// Bytes of a version (header + inline heap).
    pub version: u64,
    /// The row does not fit the inline heap: versions hold a value offset.
    pub pooled: bool,
    /// Bytes of a value (pooled tables; 0 otherwise).
    pub value_size: u64,
}

impl SlotLayout {
    /// The slot of a table with `row`-byte rows in persistent rows of
    /// `row_bytes` (0: inline-only).
    pub fn new(row: usize, row_bytes: u64) -> SlotLayout {
        if row_bytes == 0 {
            return SlotLayout {
                size: slot_size(row),
                version: version_bytes(row),
                pooled: false,
                value_size: 0,
            };
        }
        let version = (row_bytes - 16) / 2 / 8 * 8;
        let pooled = version_bytes(row) > version;
        SlotLayout {
            size: row_bytes,
            version,
            pooled,
            value_size: if pooled { (row as u64).div_ceil(64) * 64 } else { 0 },
        }
    }

    /// Offset of version `v` (0 or 1) within a slot.
    pub fn version_offset(&self, v: usize) -> u64 {
        16 + v as u64 * self.version
    }

    /// Bytes of the inline heap of a version.
    pub fn inline_heap(&self) -> u64 {
        self.version - VERSION_HEADER
    }
}

/// Check a persistent row size (`--nvcaracal-row-bytes`): 0, or a multiple
/// of 64 in 64..=4096.
pub fn check_row_bytes(row_bytes: u64) -> Result<()> {
    if row_bytes != 0 && (!row_bytes.is_multiple_of(64) || !(64..=4096).contains(&row_bytes)) {
        return Err(Error::InvalidConfig(format!(
            "--nvcaracal-row-bytes {row_bytes}: 0 (inline-only) or a multiple of 64 in 64..=4096"
        )));
    }
    Ok(())
}

/// One logged transaction (decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedTxn {
    pub proc: u32,
    pub writes: Vec<(u32, u64)>,
    pub input: Vec<u8>,
}

/// Encode an epoch's transactions as the log payload.
pub fn encode_payload<'a>(
    txns: impl Iterator<Item = (u32, &'a [(crate::api::TableId, u64)], &'a [u8])>,
) -> Vec<u8> {
    let mut out = Vec::new();
    for (proc, writes, input) in txns {
        out.extend_from_slice(&proc.to_le_bytes());
        out.extend_from_slice(&(writes.len() as u32).to_le_bytes());
        out.extend_from_slice(&(input.len() as u64).to_le_bytes());
        for (t, k) in writes {
            out.extend_from_slice(&u64::from(t.0).to_le_bytes());
            out.extend_from_slice(&k.to_le_bytes());
        }
        out.extend_from_slice(input);
        out.resize(out.len().div_ceil(8) * 8, 0);
    }
    out
}

/// Bytes one transaction takes in the log payload (`encode_payload`).
pub fn entry_bytes(writes: usize, input: usize) -> u64 {
    16 + 16 * writes as u64 + (input as u64).div_ceil(8) * 8
}

/// The 64-byte log header.
pub fn encode_header(epoch: u64, txns: u64, payload: &[u8], fingerprint: u64) -> [u8; 64] {
    let mut h = [0u8; 64];
    let words =
        [epoch, txns, payload.len() as u64, u64::from(crc32c::crc32c(payload)), fingerprint];
    for (i, w) in words.iter().enumerate() {
        h[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    h
}

/// The header's words: (epoch, txns, payload bytes, crc, fingerprint).
pub fn decode_header(h: &[u8; 64]) -> (u64, u64, u64, u64, u64) {
    let w = |i: usize| u64::from_le_bytes(h[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    (w(0), w(1), w(2), w(3), w(4))
}

/// Decode `txns` transactions from a payload whose checksum matched;
/// every length is checked against the payload (typed error, no panic).
pub fn decode_payload(epoch: u64, payload: &[u8], txns: u64) -> Result<Vec<LoggedTxn>> {
    let bad = |detail: String| Error::InputLogCorrupt { epoch, detail };
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let end = at.checked_add(n).filter(|&e| e <= payload.len()).ok_or_else(|| {
            bad(format!("entry runs past the payload ({} bytes) at byte {at}", payload.len()))
        })?;
        let s = &payload[at..end];
        at = end;
        Ok(s)
    };
    let mut out = Vec::new();
    for _ in 0..txns {
        let head = take(16)?;
        let proc = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes"));
        let nwrites = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes")) as usize;
        let ilen = u64::from_le_bytes(head[8..16].try_into().expect("8 bytes"));
        let ilen = usize::try_from(ilen).map_err(|_| bad(format!("input length {ilen}")))?;
        let wbytes = nwrites.checked_mul(16).ok_or_else(|| bad(format!("{nwrites} writes")))?;
        let w = take(wbytes)?;
        let writes = w
            .chunks_exact(16)
            .map(|c| {
                let t = u64::from_le_bytes(c[0..8].try_into().expect("8 bytes"));
                let k = u64::from_le_bytes(c[8..16].try_into().expect("8 bytes"));
                u32::try_from(t).map(|t| (t, k)).map_err(|_| bad(format!("table id {t}")))
            })
            .collect::<Result<Vec<_>>>()?;
        let input = take(ilen)?.to_vec();
        let pad = ilen.div_ceil(8) * 8 - ilen;
        take(pad)?;
        out.push(LoggedTxn { proc, writes, input });
    }
    if at != payload.len() {
        return Err(bad(format!("{} bytes left after {txns} transactions", payload.len() - at)));
    }
    Ok(out)
}

/// One buffered write: ((table, key), row or `None` for a delete).
pub type RowWrite = ((u32, u64), Option<Vec<u8>>);

/// One decoded APPLY entry: (table, key, row or `None` for a delete).
pub type ApplyEntry<'a> = (u32, u64, Option<&'a [u8]>);

/// APPLY's input: a list of (table u32, op u32 (1 put, 2 delete), key u64,
/// row length u64, row) in order.
pub fn encode_apply(writes: &[RowWrite]) -> Vec<u8> {
    let mut out = Vec::new();
    for ((t, k), row) in writes {
        out.extend_from_slice(&t.to_le_bytes());
        out.extend_from_slice(&(if row.is_some() { 1u32 } else { 2 }).to_le_bytes());
        out.extend_from_slice(&k.to_le_bytes());
        let r = row.as_deref().unwrap_or(&[]);
        out.extend_from_slice(&(r.len() as u64).to_le_bytes());
        out.extend_from_slice(r);
    }
    out
}

/// Decode APPLY's input (typed error on a malformed one).
pub fn decode_apply(input: &[u8]) -> Result<Vec<ApplyEntry<'_>>> {
    let bad = |m: &str| Error::InvalidArgument(format!("apply input: {m}"));
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < input.len() {
        let head = input.get(at..at + 24).ok_or_else(|| bad("truncated entry"))?;
        let t = u32::from_le_bytes(head[0..4].try_into().expect("4 bytes"));
        let op = u32::from_le_bytes(head[4..8].try_into().expect("4 bytes"));
        let k = u64::from_le_bytes(head[8..16].try_into().expect("8 bytes"));
        let len = usize::try_from(u64::from_le_bytes(head[16..24].try_into().expect("8 bytes")))
            .map_err(|_| bad("row length"))?;
        at += 24;
        let row = input.get(at..at.saturating_add(len)).ok_or_else(|| bad("truncated row"))?;
        at += len;
        match op {
            1 => out.push((t, k, Some(row))),
            2 => out.push((t, k, None)),
            _ => return Err(bad(&format!("unknown op {op}"))),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TableId;

    #[test]
    fn payload_round_trips_and_truncation_is_typed() {
        let w = [(TableId(1), 7u64), (TableId(0), 9)];
        let txns = [(3u32, &w[..], &b"hello"[..]), (0, &w[..0], &b""[..])];
        let p = encode_payload(txns.iter().copied());
        let d = decode_payload(4, &p, 2).unwrap();
        assert_eq!(
            d[0],
            LoggedTxn { proc: 3, writes: vec![(1, 7), (0, 9)], input: b"hello".into() }
        );
        assert_eq!(d[1].writes.len(), 0);
        assert!(matches!(decode_payload(4, &p[..20], 2), Err(Error::InputLogCorrupt { .. })));
        assert!(matches!(decode_payload(4, &p, 1), Err(Error::InputLogCorrupt { .. })));
        assert_eq!(slot_size(8) % 64, 0);
        assert!(version_offset(8, 1) + version_bytes(8) <= slot_size(8));
    }

    #[test]
    fn slot_layouts_inline_small_rows_and_pool_large_ones() {
        let small = SlotLayout::new(104, 256);
        assert_eq!(
            (small.size, small.version, small.pooled, small.inline_heap()),
            (256, 120, false, 104)
        );
        let large = SlotLayout::new(105, 256);
        assert_eq!((large.pooled, large.value_size), (true, 128));
        assert_eq!(
            SlotLayout::new(1000, 0),
            SlotLayout {
                size: slot_size(1000),
                version: version_bytes(1000),
                pooled: false,
                value_size: 0
            }
        );
        assert!(large.version_offset(1) + large.version <= large.size);
        assert!(check_row_bytes(0).is_ok() && check_row_bytes(256).is_ok());
        assert!(check_row_bytes(100).is_err() && check_row_bytes(8192).is_err());
    }

    #[test]
    fn apply_round_trips() {
        let w = vec![((1, 5), Some(vec![1, 2, 3])), ((0, 6), None)];
        let e = encode_apply(&w);
        let d = decode_apply(&e).unwrap();
        assert_eq!(d, vec![(1, 5, Some(&[1u8, 2, 3][..])), (0, 6, None)]);
        assert!(decode_apply(&e[..10]).is_err());
    }
}
