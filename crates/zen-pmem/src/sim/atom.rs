//! Atoms: the 8-byte units of persistence the simulator reasons about.
//!
//! What: every store is split at 8-byte boundaries into [`Atom`]s; an atom is
//! (aligned word offset, byte mask within the word, the stored bytes). Only an
//! atom is failure-atomic: a crash image holds all of its bytes or none.
//!
//! How: an atom packs into two `u64`s (offset in the low 56 bits and mask in
//! the high 8 of `key`; the bytes, zero outside the mask, in `value`), so a
//! trace of millions of atoms stays compact. [`Atom::apply`] merges the masked
//! bytes into an image.
//!
//! Invariants: `word_offset` is a multiple of 8 and below 2^56 (pool lengths
//! are checked against [`MAX_POOL_BYTES`]); `mask != 0`; `value` has no bits
//! outside the mask.

use crate::cpu::CACHE_LINE;

/// Bytes in one failure-atomic word.
pub const WORD_BYTES: u64 = 8;
/// Bytes in one cache line (the unit of flushing).
pub const LINE_BYTES: u64 = CACHE_LINE as u64;
/// Largest pool the simulator can describe (word offsets use 56 bits).
pub const MAX_POOL_BYTES: u64 = 1 << 56;

const OFFSET_BITS: u64 = MAX_POOL_BYTES - 1;

/// One failure-atomic piece of a store. See the module docs.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Atom {
    key: u64,
    value: u64,
}

impl std::fmt::Debug for Atom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Atom({:#x} mask {:#04x} = {:#018x})",
            self.word_offset(),
            self.mask(),
            self.value
        )
    }
}

/// The 64-bit mask of the bytes selected by a byte mask.
#[inline]
pub(crate) fn mask_bits(mask: u8) -> u64 {
    let mut bits = 0u64;
    for byte in 0..8 {
        if mask & (1 << byte) != 0 {
            bits |= 0xFF << (8 * byte);
        }
    }
    bits
}

/// Read the little-endian word at `offset` of `image`.
#[inline]
pub(crate) fn read_word(image: &[u8], offset: u64) -> u64 {
    let at = offset as usize;
    match image.get(at..at + 8) {
        Some(word) => u64::from_le_bytes(word.try_into().expect("8-byte word")),
        None => {
            // The last word of an image whose length is not a multiple of 8.
            let mut bytes = [0u8; 8];
            bytes[..image.len() - at].copy_from_slice(&image[at..]);
            u64::from_le_bytes(bytes)
        }
    }
}

/// Write the little-endian word at `offset` of `image`.
#[inline]
pub(crate) fn write_word(image: &mut [u8], offset: u64, word: u64) {
    let at = offset as usize;
    let n = (image.len() - at).min(8);
    image[at..at + n].copy_from_slice(&word.to_le_bytes()[..n]);
}

impl Atom {
    /// An atom storing the masked bytes of `value` into the word at `word_offset`.
    pub(crate) fn new(word_offset: u64, mask: u8, value: u64) -> Atom {
        debug_assert!(word_offset.is_multiple_of(WORD_BYTES) && word_offset < MAX_POOL_BYTES);
        debug_assert!(mask != 0);
        Atom { key: word_offset | (u64::from(mask) << 56), value: value & mask_bits(mask) }
    }

    /// Byte offset of the aligned word this atom stores into.
    #[inline]
    pub fn word_offset(self) -> u64 {
        self.key & OFFSET_BITS
    }

    /// Byte offset of the cache line holding the word.
    #[inline]
    pub fn line_offset(self) -> u64 {
        self.word_offset() & !(LINE_BYTES - 1)
    }

    /// Which bytes of the word are stored (bit `i` = byte `i`).
    #[inline]
    pub fn mask(self) -> u8 {
        (self.key >> 56) as u8
    }

    /// True when the atom covers the whole word.
    #[inline]
    pub fn is_full_word(self) -> bool {
        self.mask() == 0xFF
    }

    /// The stored word (little-endian; bytes outside the mask are zero).
    #[inline]
    pub fn value(self) -> u64 {
        self.value
    }

    /// Merge the atom into `image` (which must cover the word).
    #[inline]
    pub fn apply(self, image: &mut [u8]) {
        let offset = self.word_offset();
        let keep = !mask_bits(self.mask());
        let old = read_word(image, offset);
        write_word(image, offset, (old & keep) | self.value);
    }
}

/// Call `f(word_offset, first_byte, end_byte)` for every word overlapping
/// `[offset, offset + len)`, with the byte range `[first_byte, end_byte)` of
/// the word that the range covers.
#[inline]
pub(crate) fn for_each_word(offset: u64, len: u64, mut f: impl FnMut(u64, u64, u64)) {
    let end = offset + len;
    let mut word = offset - offset % WORD_BYTES;
    while word < end {
        let first = offset.max(word) - word;
        let last = end.min(word + WORD_BYTES) - word;
        f(word, first, last);
        word += WORD_BYTES;
    }
}

/// The byte mask of bytes `[first, end)` of a word.
#[inline]
pub(crate) fn byte_mask(first: u64, end: u64) -> u8 {
    debug_assert!(first < end && end <= WORD_BYTES);
    let width = end - first;
    let ones = if width == 8 { 0xFFu16 } else { (1u16 << width) - 1 };
    (ones << first) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_merges_only_masked_bytes() {
        let mut image = vec![0xAAu8; 16];
        // Bytes 2..4 of the word at 8 become 0x34, 0x12; the rest of `value` is ignored.
        Atom::new(8, byte_mask(2, 4), 0xFFFF_0000_1234_FFFF).apply(&mut image);
        assert_eq!(&image[8..16], &[0xAA, 0xAA, 0x34, 0x12, 0xAA, 0xAA, 0xAA, 0xAA]);
        assert_eq!(&image[0..8], &[0xAA; 8]);
    }

    #[test]
    fn ranges_split_at_word_boundaries() {
        let mut words = Vec::new();
        for_each_word(5, 12, |w, a, b| words.push((w, a, b)));
        assert_eq!(words, vec![(0, 5, 8), (8, 0, 8), (16, 0, 1)]);
        assert_eq!(byte_mask(0, 8), 0xFF);
        assert_eq!(byte_mask(5, 8), 0xE0);
        assert_eq!(byte_mask(0, 1), 0x01);
    }

    #[test]
    fn atom_accessors_round_trip() {
        let a = Atom::new(4096 + 72, 0xFF, 7);
        assert_eq!((a.word_offset(), a.line_offset(), a.mask(), a.value()), (4168, 4160, 0xFF, 7));
        assert!(a.is_full_word());
    }
}
