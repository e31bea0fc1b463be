//! The pool header: page 0, bytes 0..80, fixed-width little-endian 8-byte words.
//!
//! ```text
//! offset  size  field            notes
//!      0     8  magic            b"ZENPOOL1"; written LAST at create (the commit word of create)
//!      8     8  format_version   FORMAT_VERSION
//!     16     8  features         feature flags; unknown bits refuse to open
//!     24     8  page_size        power of two, 64 KiB ..= 2 MiB (2 MiB by default)
//!     32     8  page_count       pages in the pool, page 0 included
//!     40    16  uuid             random at create
//!     56     8  checksum         low 32 bits: crc32c(bytes 0..56); high 32 bits: their complement
//!     64     8  catalog_root     0 = none, else page | (!page << 32)  (self-checking, one atomic store)
//!     72     8  clean_shutdown   CLEAN_SHUTDOWN after a clean close, 0 while open or after a crash
//!     80    48  reserved         zero
//!    128   512  fresh frontiers  FEATURE_FRESH_FRONTIER: one word per member, page | (!page << 32)
//!    640  1408  reserved         zero
//!   2048    64  member header    per-node pools only (FEATURE_PER_NODE), see below
//!   2112  1984  reserved         zero
//!   4096     …  page table       page_count × 8 bytes (see `page_table.rs`)
//! ```
//!
//! PER-NODE POOLS (`FEATURE_PER_NODE`) are striped over `count` member files
//! of `member_pages` pages each, mapped back to back as one address range:
//! pool page p lives in member `p / member_pages`, at file offset
//! `(p mod member_pages) · page_size`. File 0 holds the header above and the
//! page table; every member's first page (page 0 for member 0, a reserved
//! page owned by the system table for the others) carries a member header
//! at byte 2048, so a missing, swapped, foreign or truncated member is
//! refused before anything is written:
//!
//! ```text
//! offset  size  field            notes
//!   2048     8  magic            b"ZENMEMB1"
//!   2056    16  uuid             the pool's uuid (header bytes 40..56)
//!   2072     8  index            this member's position, 0..count
//!   2080     8  count            members in the pool
//!   2088     8  member_pages     pages per member (all members are equal)
//!   2096     8  page_size        the pool's page size
//!   2104     8  checksum         as the header's, over bytes 2048..2104
//! ```
//!
//! The checksum covers the words that never change after create. The words
//! that do change (catalog root, clean-shutdown flag, fresh frontiers) are
//! each one aligned 8-byte store with a self-checking encoding, so no update
//! needs two stores to agree and a torn update is impossible by construction.
//!
//! FRESH FRONTIERS (`FEATURE_FRESH_FRONTIER`, set by every pool this build
//! creates): member m's word holds the lowest page of that member at or above
//! which no page has been allocated since create. Create works on an all-zero
//! store, so such a page still reads zero and its allocation need not zero it
//! (`Pool::allocate_page_on`); the frontier is raised durably before the page
//! is published. An older build refuses the feature bit, so no build that does
//! not raise the frontier ever allocates from such a pool.

use std::path::Path;

use crate::error::{PmemError, Result};

pub const MAGIC: u64 = u64::from_le_bytes(*b"ZENPOOL1");
pub const FORMAT_VERSION: u32 = 1;
/// The pool is striped over per-node member files (bit 0 stays reserved).
pub const FEATURE_PER_NODE: u64 = 1 << 1;
/// The header holds each member's fresh frontier (see the module comment).
pub const FEATURE_FRESH_FRONTIER: u64 = 1 << 2;
/// Feature flags this build understands.
pub const KNOWN_FEATURES: u64 = FEATURE_PER_NODE | FEATURE_FRESH_FRONTIER;
pub const CLEAN_SHUTDOWN: u64 = u64::from_le_bytes(*b"CLEAN_SD");

pub const OFF_MAGIC: u64 = 0;
pub const OFF_VERSION: u64 = 8;
pub const OFF_FEATURES: u64 = 16;
pub const OFF_PAGE_SIZE: u64 = 24;
pub const OFF_PAGE_COUNT: u64 = 32;
pub const OFF_UUID: u64 = 40;
pub const OFF_CHECKSUM: u64 = 56;
pub const OFF_CATALOG_ROOT: u64 = 64;
pub const OFF_CLEAN_SHUTDOWN: u64 = 72;
/// Member 0's fresh frontier; member m's is `m · 8` bytes further.
pub const OFF_FRESH_FRONTIER: u64 = 128;
/// Bytes a file must have before its header can be read.
pub const HEADER_BYTES: u64 = 80;
/// Where the page table starts inside page 0.
pub const PAGE_TABLE_OFFSET: u64 = 4096;
/// Where a member header sits inside a member's first page.
pub const MEMBER_HEADER_OFFSET: u64 = 2048;
pub const MEMBER_MAGIC: u64 = u64::from_le_bytes(*b"ZENMEMB1");
/// Bytes a member file must have before its member header can be read.
pub const MEMBER_HEADER_END: u64 = MEMBER_HEADER_OFFSET + 64;
/// Most member files a per-node pool may have (one per NUMA node).
pub const MAX_MEMBERS: u64 = 64;

pub const DEFAULT_PAGE_SIZE: u64 = 2 << 20;
pub const MIN_PAGE_SIZE: u64 = 64 << 10;
pub const MAX_PAGE_SIZE: u64 = 2 << 20;
/// Page 0 plus at least two data pages.
pub const MIN_PAGES: u64 = 3;

const _: () = assert!(HEADER_BYTES <= PAGE_TABLE_OFFSET);
const _: () = assert!(PAGE_TABLE_OFFSET < MIN_PAGE_SIZE);
const _: () =
    assert!(HEADER_BYTES <= MEMBER_HEADER_OFFSET && MEMBER_HEADER_END <= PAGE_TABLE_OFFSET);
const _: () = assert!(MIN_PAGE_SIZE.is_power_of_two() && MAX_PAGE_SIZE.is_power_of_two());
const _: () = assert!(
    HEADER_BYTES <= OFF_FRESH_FRONTIER
        && OFF_FRESH_FRONTIER + 8 * MAX_MEMBERS <= MEMBER_HEADER_OFFSET
);
/// Page numbers fit the frontier word's 32-bit halves.
const _: () = assert!((MAX_PAGE_SIZE - PAGE_TABLE_OFFSET) / 8 < u32::MAX as u64);

/// Where member `member`'s fresh frontier lives.
pub fn fresh_frontier_offset(member: usize) -> u64 {
    OFF_FRESH_FRONTIER + 8 * member as u64
}

/// The decoded, validated immutable part of a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub format_version: u32,
    pub features: u64,
    pub page_size: u64,
    pub page_count: u64,
    pub uuid: [u8; 16],
}

/// Most pages a page table can describe for a given page size.
pub fn max_pages(page_size: u64) -> u64 {
    (page_size - PAGE_TABLE_OFFSET) / 8
}

fn word(bytes: &[u8], offset: u64) -> u64 {
    let at = offset as usize;
    u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8-byte slice"))
}

/// Checksum word over bytes 0..56.
pub fn checksum_word(first_56: &[u8]) -> u64 {
    let crc = crc32c::crc32c(&first_56[..OFF_CHECKSUM as usize]);
    u64::from(crc) | (u64::from(!crc) << 32)
}

impl Header {
    /// Encode bytes 0..64 (magic through checksum).
    pub fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..16].copy_from_slice(&u64::from(self.format_version).to_le_bytes());
        b[16..24].copy_from_slice(&self.features.to_le_bytes());
        b[24..32].copy_from_slice(&self.page_size.to_le_bytes());
        b[32..40].copy_from_slice(&self.page_count.to_le_bytes());
        b[40..56].copy_from_slice(&self.uuid);
        let sum = checksum_word(&b);
        b[56..64].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decode and validate bytes 0..64 of a file of `file_len` bytes.
    /// Never panics: any byte pattern gives a header or a typed error.
    pub fn decode(path: &Path, bytes: &[u8], file_len: u64) -> Result<Header> {
        let path_buf = || path.to_path_buf();
        if bytes.len() < 64 {
            return Err(PmemError::TooShort {
                path: path_buf(),
                len: bytes.len() as u64,
                min: HEADER_BYTES,
            });
        }
        let magic = word(bytes, OFF_MAGIC);
        if magic != MAGIC {
            return Err(PmemError::BadMagic { path: path_buf(), found: magic });
        }
        let stored = word(bytes, OFF_CHECKSUM);
        let computed = checksum_word(bytes);
        if stored != computed {
            return Err(PmemError::BadChecksum {
                path: path_buf(),
                stored: stored as u32,
                computed: computed as u32,
            });
        }
        let version = word(bytes, OFF_VERSION);
        if version != u64::from(FORMAT_VERSION) {
            return Err(PmemError::UnsupportedVersion {
                path: path_buf(),
                found: u32::try_from(version).unwrap_or(u32::MAX),
                supported: FORMAT_VERSION,
            });
        }
        let features = word(bytes, OFF_FEATURES);
        if features & !KNOWN_FEATURES != 0 {
            return Err(PmemError::UnsupportedFeature {
                path: path_buf(),
                unknown: features & !KNOWN_FEATURES,
            });
        }
        let page_size = word(bytes, OFF_PAGE_SIZE);
        if !page_size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&page_size) {
            return Err(PmemError::CorruptHeader {
                path: path_buf(),
                field: "page_size",
                detail: format!("{page_size} is not a power of two in 64 KiB..=2 MiB"),
            });
        }
        let page_count = word(bytes, OFF_PAGE_COUNT);
        if !(MIN_PAGES..=max_pages(page_size)).contains(&page_count) {
            return Err(PmemError::CorruptHeader {
                path: path_buf(),
                field: "page_count",
                detail: format!("{page_count} outside {MIN_PAGES}..={}", max_pages(page_size)),
            });
        }
        let expected = page_count * page_size;
        if file_len < expected {
            return Err(PmemError::Truncated { path: path_buf(), expected, actual: file_len });
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&bytes[40..56]);
        Ok(Header { format_version: FORMAT_VERSION, features, page_size, page_count, uuid })
    }

    pub fn uuid_string(&self) -> String {
        let h: String = self.uuid.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
    }
}

/// The decoded, validated member header of one file of a per-node pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberHeader {
    pub uuid: [u8; 16],
    pub index: u64,
    pub count: u64,
    pub member_pages: u64,
    pub page_size: u64,
}

impl MemberHeader {
    /// Encode the 64 bytes stored at `MEMBER_HEADER_OFFSET`.
    pub fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&MEMBER_MAGIC.to_le_bytes());
        b[8..24].copy_from_slice(&self.uuid);
        b[24..32].copy_from_slice(&self.index.to_le_bytes());
        b[32..40].copy_from_slice(&self.count.to_le_bytes());
        b[40..48].copy_from_slice(&self.member_pages.to_le_bytes());
        b[48..56].copy_from_slice(&self.page_size.to_le_bytes());
        let sum = checksum_word(&b);
        b[56..64].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decode the 64 bytes read at `MEMBER_HEADER_OFFSET` of the member file
    /// `path`. Checks magic, checksum and ranges only; whether the member
    /// belongs where it was found is the pool's business (`Pool::open_on`).
    pub fn decode(path: &Path, bytes: &[u8; 64]) -> Result<MemberHeader> {
        let bad = |detail: String| PmemError::BadMemberHeader { path: path.to_path_buf(), detail };
        let magic = word(bytes, 0);
        if magic != MEMBER_MAGIC {
            return Err(bad(format!("wrong member magic {magic:#018x}")));
        }
        let (stored, computed) = (word(bytes, 56), checksum_word(bytes));
        if stored != computed {
            return Err(bad(format!(
                "member header checksum mismatch (stored {:#010x}, computed {:#010x})",
                stored as u32, computed as u32
            )));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&bytes[8..24]);
        let h = MemberHeader {
            uuid,
            index: word(bytes, 24),
            count: word(bytes, 32),
            member_pages: word(bytes, 40),
            page_size: word(bytes, 48),
        };
        if !(1..=MAX_MEMBERS).contains(&h.count) || h.index >= h.count {
            return Err(bad(format!("member {} of {} is out of range", h.index, h.count)));
        }
        Ok(h)
    }
}

/// A page number as a self-checking word: the page in the low half, its
/// complement in the high half (never 0).
fn self_checking(page: u32) -> u64 {
    u64::from(page) | (u64::from(!page) << 32)
}

/// The page of a self-checking word; `Err` describes the corruption.
fn check_self(raw: u64) -> std::result::Result<u32, String> {
    let page = raw as u32;
    if (raw >> 32) as u32 != !page {
        return Err(format!("{raw:#018x} fails its self-check"));
    }
    Ok(page)
}

/// Encode a catalog root page as its self-checking word.
pub fn encode_catalog_root(page: Option<u32>) -> u64 {
    page.map_or(0, self_checking)
}

/// Encode a fresh frontier (page numbers are below 2^32, `max_pages`).
pub fn encode_fresh_frontier(page: u64) -> u64 {
    self_checking(page as u32)
}

/// Decode a fresh-frontier word; `Err` describes the corruption (0 is one:
/// create writes every member's word).
pub fn decode_fresh_frontier(raw: u64) -> std::result::Result<u64, String> {
    check_self(raw).map(u64::from)
}

/// Decode a catalog root word; `Err` carries a description of the corruption.
pub fn decode_catalog_root(raw: u64) -> std::result::Result<Option<u32>, String> {
    if raw == 0 {
        return Ok(None);
    }
    check_self(raw).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Header {
        Header {
            format_version: FORMAT_VERSION,
            features: 0,
            page_size: MIN_PAGE_SIZE,
            page_count: 8,
            uuid: [7; 16],
        }
    }

    #[test]
    fn encode_then_decode_is_identity() {
        let h = sample();
        let bytes = h.encode();
        assert_eq!(Header::decode(Path::new("p"), &bytes, 8 * MIN_PAGE_SIZE).unwrap(), h);
    }

    #[test]
    fn single_bit_flip_in_static_fields_is_detected() {
        let bytes = sample().encode();
        for bit in 64..(56 * 8) {
            let mut b = bytes;
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(Header::decode(Path::new("p"), &b, u64::MAX).is_err(), "bit {bit}");
        }
    }

    #[test]
    fn catalog_root_word_is_self_checking() {
        assert_eq!(decode_catalog_root(encode_catalog_root(Some(5))), Ok(Some(5)));
        assert_eq!(decode_catalog_root(0), Ok(None));
        assert!(decode_catalog_root(5).is_err());
    }

    proptest! {
        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128), len in any::<u64>()) {
            let _ = Header::decode(Path::new("p"), &bytes, len);
        }

        #[test]
        fn decoding_random_fields_behind_a_valid_magic_never_panics(
            mut words in proptest::collection::vec(any::<u64>(), 8), len in any::<u64>(), fix_sum in any::<bool>()
        ) {
            words[0] = MAGIC;
            let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            if fix_sum {
                let sum = checksum_word(&bytes);
                bytes[56..64].copy_from_slice(&sum.to_le_bytes());
            }
            match Header::decode(Path::new("p"), &bytes, len) {
                Ok(h) => {
                    prop_assert!(h.page_size.is_power_of_two());
                    prop_assert!(h.page_count * h.page_size <= len);
                }
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }
}
