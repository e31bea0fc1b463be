//! Byte layouts of the mmdb pool: the meta page, redo-log pages and their
//! fragments, checkpoint pages. Fixed-width little-endian fields.
//!
//! ```text
//! meta page (owner SYSTEM; the catalog's `floor_page`)
//!   0  u64 magic "ZENMMDB1"
//!   8  u64 checkpoint root: 0 = none, else dir_page | !dir_page << 32 (one atomic store)
//!
//! log page (owner LOG_TABLE, worker w), records from byte 64
//!   0  u64 magic "ZENMLOG1"   8 u64 worker   16 u64 page seq (per worker, +1 per page)
//!  24  u64 crc32c(bytes 0..24)
//!
//! log fragment (8-byte aligned; one transaction = fragments 0..=k, the last flagged LAST)
//!   0  u32 len (bytes, header included, multiple of 8)
//!   4  u32 crc32c(bytes 0..4 ‖ bytes 8..len)
//!   8  u64 cts        16 u32 entries    20 u16 fragment index    22 u16 flags (1 = LAST)
//!  24  u64 reserved (0)
//!  32  entries: u32 table · u8 kind (1 put, 2 delete) · 3 pad · u64 key · row (put; padded to 8)
//!
//! checkpoint data page (owner CKPT_TABLE, worker 0), entries from byte 64
//!   0  u64 magic "ZENMCKP1"   8 u64 checkpoint seq   16 u64 entry bytes   24 u64 crc32c(entries)
//!  64  entries: u32 table · u32 row bytes · u64 key · row (padded to 8)
//!
//! checkpoint directory page (owner CKPT_TABLE, worker 1)
//!   0  u64 magic "ZENMCKPD"   8 u64 seq   16 u64 ts (every cts below it is in the checkpoint)
//!  24  u64 data pages n       32 u64 row bytes in all (sizes the DRAM budget on recovery)
//!  40  u64 crc32c(bytes 8..40 ‖ page list)
//!  64  u64 × n data page ids
//! ```
//!
//! Pages come zeroed from the pool (durably, before their owner is
//! published), so a log page holds only bytes its worker wrote; recovery
//! zeroes the tail after the last complete transaction before a new run
//! appends there. Pages owned by a table id are rows placed in NVM as volatile
//! memory: recovery releases all of them.

use zen_pmem::SYSTEM_TABLE;

pub const META_MAGIC: u64 = u64::from_le_bytes(*b"ZENMMDB1");
pub const OFF_CHECKPOINT_ROOT: u64 = 8;

pub const LOG_TABLE: u32 = SYSTEM_TABLE - 1;
pub const CHECKPOINT_TABLE: u32 = SYSTEM_TABLE - 2;
pub const CHECKPOINT_DATA_WORKER: u16 = 0;
pub const CHECKPOINT_DIR_WORKER: u16 = 1;

pub const LOG_MAGIC: u64 = u64::from_le_bytes(*b"ZENMLOG1");
pub const LOG_PAGE_HEADER: u64 = 64;
pub const FRAGMENT_HEADER: usize = 32;
pub const ENTRY_HEADER: usize = 16;
pub const FLAG_LAST: u16 = 1;
pub const KIND_PUT: u8 = 1;
pub const KIND_DELETE: u8 = 2;

pub const CHECKPOINT_MAGIC: u64 = u64::from_le_bytes(*b"ZENMCKP1");
pub const DIRECTORY_MAGIC: u64 = u64::from_le_bytes(*b"ZENMCKPD");
pub const CHECKPOINT_HEADER: u64 = 64;
pub const CHECKPOINT_ENTRY_HEADER: usize = 16;

const _: () = assert!(FRAGMENT_HEADER.is_multiple_of(8) && ENTRY_HEADER.is_multiple_of(8));
const _: () = assert!(LOG_TABLE != CHECKPOINT_TABLE && CHECKPOINT_TABLE < LOG_TABLE);

pub fn pad8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// The self-checking root word of page `page` (`None` = no checkpoint).
pub fn encode_root(page: Option<u64>) -> u64 {
    page.map_or(0, |p| p | (!p << 32))
}

/// Decode a root word; `Err` when it is neither 0 nor self-consistent.
pub fn decode_root(word: u64) -> Result<Option<u64>, u64> {
    if word == 0 {
        return Ok(None);
    }
    let page = word & 0xFFFF_FFFF;
    if word >> 32 != !page & 0xFFFF_FFFF {
        return Err(word);
    }
    Ok(Some(page))
}

pub fn word(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

pub fn put_word(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The 32-byte header of log page `seq` of `worker`.
pub fn log_page_header(worker: usize, seq: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    put_word(&mut b, 0, LOG_MAGIC);
    put_word(&mut b, 8, worker as u64);
    put_word(&mut b, 16, seq);
    let crc = u64::from(crc32c::crc32c(&b[..24]));
    put_word(&mut b, 24, crc);
    b
}

/// (worker, seq) of a log page header, if it is whole and checks.
pub fn decode_log_page_header(b: &[u8]) -> Option<(u64, u64)> {
    (word(b, 0) == LOG_MAGIC && word(b, 24) == u64::from(crc32c::crc32c(&b[..24])))
        .then(|| (word(b, 8), word(b, 16)))
}

/// The crc of a fragment whose bytes are `frag` (its crc field ignored).
pub fn fragment_crc(frag: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&frag[0..4]);
    crc32c::crc32c_append(crc, &frag[8..])
}

/// A decoded fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragmentHeader {
    pub len: usize,
    pub cts: u64,
    pub entries: u32,
    pub index: u16,
    pub last: bool,
}

/// Encode a fragment header into `frag[..32]` and seal it with its crc
/// (`frag` must already hold the entries).
pub fn seal_fragment(frag: &mut [u8], cts: u64, entries: u32, index: u16, last: bool) {
    let len = u32::try_from(frag.len()).expect("fragments are smaller than a page");
    frag[0..4].copy_from_slice(&len.to_le_bytes());
    put_word(frag, 8, cts);
    frag[16..20].copy_from_slice(&entries.to_le_bytes());
    frag[20..22].copy_from_slice(&index.to_le_bytes());
    frag[22..24].copy_from_slice(&(if last { FLAG_LAST } else { 0 }).to_le_bytes());
    put_word(frag, 24, 0);
    let crc = fragment_crc(frag);
    frag[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// The length word of the fragment starting at `head` (its first 8 bytes).
pub fn fragment_len(head: &[u8]) -> usize {
    u32::from_le_bytes(head[0..4].try_into().expect("4 bytes")) as usize
}

/// Decode a whole fragment, `None` if its crc does not check.
pub fn decode_fragment(frag: &[u8]) -> Option<FragmentHeader> {
    let crc = u32::from_le_bytes(frag[4..8].try_into().expect("4 bytes"));
    if frag.len() < FRAGMENT_HEADER || fragment_crc(frag) != crc {
        return None;
    }
    let flags = u16::from_le_bytes(frag[22..24].try_into().expect("2 bytes"));
    Some(FragmentHeader {
        len: frag.len(),
        cts: word(frag, 8),
        entries: u32::from_le_bytes(frag[16..20].try_into().expect("4 bytes")),
        index: u16::from_le_bytes(frag[20..22].try_into().expect("2 bytes")),
        last: flags & FLAG_LAST != 0,
    })
}

/// Append one log entry to `out`.
pub fn push_entry(out: &mut Vec<u8>, table: u32, key: u64, row: Option<&[u8]>) {
    out.extend_from_slice(&table.to_le_bytes());
    out.push(if row.is_some() { KIND_PUT } else { KIND_DELETE });
    out.extend_from_slice(&[0; 3]);
    out.extend_from_slice(&key.to_le_bytes());
    if let Some(row) = row {
        out.extend_from_slice(row);
        out.resize(out.len() + pad8(row.len()) - row.len(), 0);
    }
}

/// Append one checkpoint entry to `out`.
pub fn push_checkpoint_entry(out: &mut Vec<u8>, table: u32, key: u64, row: &[u8]) {
    out.extend_from_slice(&table.to_le_bytes());
    out.extend_from_slice(&(row.len() as u32).to_le_bytes());
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(row);
    out.resize(out.len() + pad8(row.len()) - row.len(), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_words_check_themselves() {
        assert_eq!(decode_root(encode_root(None)), Ok(None));
        assert_eq!(decode_root(encode_root(Some(77))), Ok(Some(77)));
        assert!(decode_root(77).is_err());
    }

    #[test]
    fn fragments_round_trip_and_a_flipped_bit_is_caught() {
        let mut frag = vec![0u8; FRAGMENT_HEADER];
        push_entry(&mut frag, 3, 42, Some(&[7u8; 12]));
        seal_fragment(&mut frag, 99, 1, 0, true);
        let h = decode_fragment(&frag).unwrap();
        assert_eq!(
            h,
            FragmentHeader { len: frag.len(), cts: 99, entries: 1, index: 0, last: true }
        );
        assert_eq!(fragment_len(&frag), frag.len());
        frag[40] ^= 1;
        assert_eq!(decode_fragment(&frag), None);
    }

    #[test]
    fn log_page_headers_check_themselves() {
        let h = log_page_header(3, 9);
        assert_eq!(decode_log_page_header(&h), Some((3, 9)));
        let mut torn = h;
        torn[16] = 0;
        assert_eq!(decode_log_page_header(&torn), None);
    }
}
