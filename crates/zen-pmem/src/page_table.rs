//! The persistent page table: one aligned 8-byte word per page, in page 0 at
//! [`crate::header::PAGE_TABLE_OFFSET`].
//!
//! ```text
//! bits  0..32  owner table   (u32; SYSTEM_TABLE for engine metadata such as the catalog)
//! bits 32..48  owner worker  (u16)
//! bits 48..56  reserved, 0
//! bits 56..64  OWNED_TAG     0xA5 when owned
//! word == 0    page is free
//! ```
//!
//! Invariants (checked by the crash-simulator tests of page allocation):
//!
//! (P1) An entry is published (made non-zero) only after the page's zeroing
//!      is durable: zero, flush, fence, then the entry store, flush, fence;
//!      or, for a page never allocated since create (at or above its
//!      member's fresh frontier, `header.rs`), after the raised frontier is:
//!      frontier store, flush, fence, then the entry.
//! (P2) An entry changes with one aligned 8-byte store, so no crash image
//!      holds half an owner.
//! (P3) Page 0 is always owned by SYSTEM_TABLE and never released.

/// Owner table id reserved for engine metadata pages.
pub const SYSTEM_TABLE: u32 = u32::MAX;
const OWNED_TAG: u64 = 0xA5;

/// Who owns a page: a table and the worker whose region it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct PageOwner {
    pub table: u32,
    pub worker: u16,
}

impl PageOwner {
    pub const SYSTEM: PageOwner = PageOwner { table: SYSTEM_TABLE, worker: 0 };

    pub fn encode(self) -> u64 {
        u64::from(self.table) | (u64::from(self.worker) << 32) | (OWNED_TAG << 56)
    }
}

/// A page-table word that is neither free nor a well-formed owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorruptEntry(pub u64);

/// Decode an entry: `Ok(None)` = free.
pub fn decode_entry(raw: u64) -> Result<Option<PageOwner>, CorruptEntry> {
    if raw == 0 {
        return Ok(None);
    }
    if raw >> 56 != OWNED_TAG || (raw >> 48) & 0xFF != 0 {
        return Err(CorruptEntry(raw));
    }
    Ok(Some(PageOwner { table: raw as u32, worker: (raw >> 32) as u16 }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_round_trips_and_garbage_is_rejected() {
        let o = PageOwner { table: 3, worker: 9 };
        assert_eq!(decode_entry(o.encode()), Ok(Some(o)));
        assert_eq!(decode_entry(0), Ok(None));
        assert_eq!(decode_entry(0x1234), Err(CorruptEntry(0x1234)));
    }
}
