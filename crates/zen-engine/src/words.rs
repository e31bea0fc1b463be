//! Rows kept in DRAM as atomic 8-byte words (so that optimistic readers may
//! copy a row while a writer replaces it; the protocol's version word tells
//! them to retry), and the copies between such words and byte rows.
//!
//! The copies move whole words with fixed-size conversions (one load or store
//! and one 8-byte move each) and only the last, partial word byte by byte:
//! a per-word `copy_from_slice` of a variable-length chunk compiles to a
//! `memmove` call per word, which took a quarter of the CPU time of a YCSB run.

use std::sync::atomic::{AtomicU64, Ordering};

/// Copy `words` into `out` (relaxed loads: the caller validates the version).
/// Under a model a schedule point comes before the copy and one more in its
/// middle (outside one, no point is reached: one check of the hook), so that a writer may run between the halves and torn copies are
/// among the explored schedules (`crate::sched`).
#[inline]
pub fn load_row(words: &[AtomicU64], out: &mut [u8]) {
    if crate::sched::hooked() {
        let (head, tail) = out.split_at_mut(model_split(out.len()));
        crate::sched::point();
        copy_out(&words[..head.len() / 8], head);
        crate::sched::point();
        copy_out(&words[head.len() / 8..], tail);
        return;
    }
    copy_out(words, out);
}

/// Where a copy under a model pauses: the word boundary nearest the middle.
fn model_split(len: usize) -> usize {
    len / 16 * 8
}

#[inline]
fn copy_out(words: &[AtomicU64], out: &mut [u8]) {
    let mut chunks = out.chunks_exact_mut(8);
    let mut words = words.iter();
    for (dst, w) in (&mut chunks).zip(&mut words) {
        let bytes: &mut [u8; 8] = dst.try_into().expect("chunks of 8");
        *bytes = w.load(Ordering::Relaxed).to_le_bytes();
    }
    let tail = chunks.into_remainder();
    if let Some(w) = words.next().filter(|_| !tail.is_empty()) {
        let len = tail.len();
        tail.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes()[..len]);
    }
}

/// Store `row` into `words` (relaxed stores: the caller publishes the version
/// with release ordering afterwards). A partial last word is zero-padded.
/// Schedule points as in [`load_row`].
#[inline]
pub fn store_row(words: &[AtomicU64], row: &[u8]) {
    if crate::sched::hooked() {
        let (head, tail) = row.split_at(model_split(row.len()));
        crate::sched::point();
        copy_in(&words[..head.len() / 8], head);
        crate::sched::point();
        copy_in(&words[head.len() / 8..], tail);
        return;
    }
    copy_in(words, row);
}

#[inline]
fn copy_in(words: &[AtomicU64], row: &[u8]) {
    let mut chunks = row.chunks_exact(8);
    let mut words = words.iter();
    for (src, w) in (&mut chunks).zip(&mut words) {
        let bytes: [u8; 8] = src.try_into().expect("chunks of 8");
        w.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
    }
    let tail = chunks.remainder();
    if let Some(w) = words.next().filter(|_| !tail.is_empty()) {
        let mut bytes = [0u8; 8];
        bytes[..tail.len()].copy_from_slice(tail);
        w.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_every_length_round_trip() {
        for len in 0..40usize {
            let words: Vec<AtomicU64> = (0..len.div_ceil(8)).map(|_| AtomicU64::new(!0)).collect();
            let row: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37) ^ 0x5A).collect();
            store_row(&words, &row);
            let mut out = vec![0u8; len];
            load_row(&words, &mut out);
            assert_eq!(out, row, "length {len}");
            if len % 8 != 0 {
                let last = words.last().unwrap().load(Ordering::Relaxed).to_le_bytes();
                assert!(last[len % 8..].iter().all(|&b| b == 0), "padding of length {len}");
            }
        }
    }
}
