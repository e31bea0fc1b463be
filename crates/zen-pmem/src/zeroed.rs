//! Large all-zero arrays that cost nothing until they are touched.
//!
//! [`ZeroedSlice`] maps anonymous memory: the kernel gives every page as
//! zeros on its first touch, so a slice of millions of entries is one
//! `mmap` (no store at allocation, no resident memory until used, no
//! commit charge: `MAP_NORESERVE`) and its base is page-aligned. Slices of
//! 2 MiB or more ask for transparent huge pages (`MADV_HUGEPAGE`). The engine's Met-Cache chunks grow geometrically
//! (`zen/cache.rs`): the last one a region opens may be gigabytes of address
//! space of which the region uses what its share allows. A `Vec` built by
//! `collect` would write every element first, and `alloc_zeroed` stores the
//! zeros itself for any alignment above 16 bytes (the entries are
//! line-aligned), faulting the whole chunk in at once.

use std::alloc::Layout;
use std::marker::PhantomData;
use std::ops::Deref;
use std::sync::OnceLock;

use bytemuck::Zeroable;

/// A transparent huge page (x86-64).
const HUGE_PAGE: usize = 2 << 20;

/// `len` values of `T`, all zero, in anonymous memory backed on first touch.
pub struct ZeroedSlice<T> {
    map: Option<memmap2::MmapMut>,
    len: usize,
    _values: PhantomData<T>,
}

impl<T: Zeroable> ZeroedSlice<T> {
    /// Map `len` zero values. Out of memory (no address space for the
    /// mapping) ends the process, as a `Vec` that cannot grow does.
    pub fn new(len: usize) -> ZeroedSlice<T> {
        let layout =
            Layout::array::<T>(len).expect("ZeroedSlice: length overflows the address space");
        assert!(layout.align() <= 4096, "ZeroedSlice: alignment {} above a page", layout.align());
        if layout.size() == 0 {
            return ZeroedSlice { map: None, len, _values: PhantomData };
        }
        // `MAP_NORESERVE`: the mapping is address space, charged as its
        // pages are touched (a chunk's tail past a region's share is never
        // touched), not committed up front.
        let map = memmap2::MmapOptions::new()
            .len(layout.size())
            .no_reserve_swap()
            .map_anon()
            .unwrap_or_else(|_| std::alloc::handle_alloc_error(layout));
        // Transparent huge pages for mappings of at least one (`madvise`
        // mode, the common default, backs only advised ranges): a cold
        // access to a large table walks the page table, and the prefetches
        // of the engines' read stages wait on those walks. A hint: a kernel
        // without THP, or with it off, keeps 4 KiB pages. The first touch of
        // each 2 MiB then zeroes 2 MiB (the same work, in fewer faults).
        if layout.size() >= HUGE_PAGE {
            let _ = map.advise(memmap2::Advice::HugePage);
        }
        ZeroedSlice { map: Some(map), len, _values: PhantomData }
    }
}

impl<T> Deref for ZeroedSlice<T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        let Some(map) = &self.map else { return &[] };
        // `new` mapped `len` values of `T` (`Layout::array`), page-aligned (so aligned for `T`,
        // asserted at most a page), reading as zeros until written, which `T: Zeroable` makes
        // valid; they are shared only through `&T` (interior mutability), unmapped on drop.
        // SAFETY: `len` valid, aligned `T`s in a mapping that lives as long as `self` (above).
        unsafe { std::slice::from_raw_parts(map.as_ptr().cast::<T>(), self.len) }
    }
}

/// Chunk and position of `index` in chunks that double: chunk `c` holds
/// `first << c` values and starts at `first * (2^c - 1)`, so
/// `c = log2(index / first + 1)`. `first` is a power of two, so this is
/// shifts, a `lzcnt` and a subtraction, whether `first` is a constant or a
/// field. With `first` a multiple of 64, every chunk starts at a multiple
/// of 64.
#[inline]
pub fn doubling_locate(index: u64, first: u64) -> (usize, u64) {
    debug_assert!(first.is_power_of_two(), "first chunk of {first}");
    let shift = first.trailing_zeros();
    let c = 63 - ((index >> shift) + 1).leading_zeros();
    (c as usize, index - (((1u64 << c) - 1) << shift))
}

/// A grow-only array of all-zero values in `N` chunks that double
/// ([`doubling_locate`]), each a [`ZeroedSlice`] mapped on first use: the
/// chunk descriptors are `N` words inside the array itself, so reaching a
/// value is arithmetic and one load of a line that stays cached, and an
/// array that may grow to billions of values costs a few hundred bytes
/// until it is used. (A boxed slice of one descriptor per fixed-size chunk
/// costs its whole length at creation, and a descriptor load per access
/// that misses once the descriptors outgrow the cache.)
///
/// The array is indexed by run: run `index` is `width` consecutive values
/// (`width` 1 for an array of single values, [`DoublingArray::get`]; a row
/// of words for a row arena, [`DoublingArray::run`]). Chunk `c` holds
/// `first << c` whole runs, so no run straddles two chunks. `first` is a
/// power of two, so that finding a run's chunk is shifts, not a division.
pub struct DoublingArray<T, const N: usize> {
    first_shift: u32,
    width: usize,
    chunks: [OnceLock<ZeroedSlice<T>>; N],
}

impl<T: Zeroable, const N: usize> DoublingArray<T, N> {
    /// An array of single values whose first chunk holds `first` of them
    /// (a power of two).
    pub fn new(first: u64) -> DoublingArray<T, N> {
        DoublingArray::of_runs(first, 1)
    }

    /// An array of runs of `width` values whose first chunk holds `first`
    /// runs (a power of two).
    ///
    /// # Panics
    /// If `first` is not a power of two.
    pub fn of_runs(first: u64, width: usize) -> DoublingArray<T, N> {
        assert!(first.is_power_of_two(), "DoublingArray: first chunk of {first} runs");
        DoublingArray {
            first_shift: first.trailing_zeros(),
            width,
            chunks: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// Runs the `N` chunks hold: every index below it is valid.
    pub fn capacity(&self) -> u64 {
        (1u64 << self.first_shift).saturating_mul((1u64 << N) - 1)
    }

    #[inline]
    fn locate(&self, index: u64) -> (usize, u64) {
        doubling_locate(index, 1 << self.first_shift)
    }

    /// Run `index`'s chunk, mapped on first use, and the run's first value
    /// in it.
    #[inline]
    fn place(&self, index: u64) -> (&[T], usize) {
        let (c, i) = self.locate(index);
        let runs = (1usize << self.first_shift) << c;
        let chunk = self.chunks[c].get_or_init(|| ZeroedSlice::new(runs * self.width));
        (chunk, i as usize * self.width)
    }

    /// The `width` values of run `index`, mapping its chunk on first use.
    ///
    /// # Panics
    /// If `index` is at or above [`capacity`](Self::capacity) (callers
    /// bound their indices by it).
    #[inline]
    pub fn run(&self, index: u64) -> &[T] {
        let (chunk, at) = self.place(index);
        &chunk[at..at + self.width]
    }

    /// The value at `index` of an array of single values (the first value
    /// of run `index` otherwise).
    ///
    /// # Panics
    /// As [`run`](Self::run), and for runs of no values.
    #[inline]
    pub fn get(&self, index: u64) -> &T {
        let (chunk, at) = self.place(index);
        &chunk[at]
    }

    /// The value at `index` if its chunk was ever mapped (no mapping: for
    /// walks over every index, most of whose chunks may be unused).
    pub fn get_if_mapped(&self, index: u64) -> Option<&T> {
        let (c, i) = self.locate(index);
        self.chunks.get(c)?.get().map(|chunk| &chunk[i as usize * self.width])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Zeroable)]
    #[repr(C, align(64))]
    struct Line {
        words: [AtomicU64; 8],
    }

    #[test]
    fn values_start_zero_aligned_and_keep_what_is_stored() {
        let s = ZeroedSlice::<Line>::new(100_000);
        assert_eq!(s.len(), 100_000);
        assert_eq!(s.as_ptr() as usize % 64, 0);
        assert!(
            s.iter().step_by(997).all(|l| l.words.iter().all(|w| w.load(Ordering::Relaxed) == 0))
        );
        s[99_999].words[7].store(7, Ordering::Relaxed);
        s[0].words[0].store(1, Ordering::Relaxed);
        assert_eq!(s[99_999].words[7].load(Ordering::Relaxed), 7);
        assert_eq!(s[0].words[0].load(Ordering::Relaxed), 1);
        assert_eq!(s[1].words[0].load(Ordering::Relaxed), 0);
    }

    #[test]
    fn doubling_chunks_tile_every_index() {
        for first in [1u64, 64, 1024, 4096] {
            assert_eq!(doubling_locate(0, first), (0, 0));
            assert_eq!(doubling_locate(first - 1, first), (0, first - 1));
            assert_eq!(doubling_locate(first, first), (1, 0));
            let mut probes = vec![u64::from(u32::MAX), (1 << 40) + 12_345];
            for c in 1..40 {
                let start = first * ((1 << c) - 1);
                probes.extend([start - 1, start, start + 1]);
            }
            for index in probes {
                let (c, i) = doubling_locate(index, first);
                assert!(i < first << c, "first {first} index {index}: chunk {c} position {i}");
                assert_eq!(first * ((1 << c) - 1) + i, index);
                if index > 0 {
                    let (pc, pi) = doubling_locate(index - 1, first);
                    assert!((pc, pi + 1) == (c, i) || (pc + 1 == c && i == 0), "index {index}");
                }
            }
        }
    }

    #[test]
    fn a_doubling_array_keeps_values_across_chunks_and_maps_lazily() {
        let a = DoublingArray::<AtomicU64, 6>::new(4);
        assert_eq!(a.capacity(), 4 * 63);
        assert!(a.get_if_mapped(200).is_none(), "nothing mapped yet");
        for i in 0..a.capacity() {
            a.get(i).store(i * 7 + 1, Ordering::Relaxed);
        }
        for i in 0..a.capacity() {
            assert_eq!(a.get(i).load(Ordering::Relaxed), i * 7 + 1);
            assert_eq!(a.get_if_mapped(i).map(|v| v.load(Ordering::Relaxed)), Some(i * 7 + 1));
        }
        let b = DoublingArray::<AtomicU64, 6>::new(4);
        b.get(3).store(9, Ordering::Relaxed);
        assert!(b.get_if_mapped(3).is_some() && b.get_if_mapped(4).is_none(), "chunk 1 unmapped");
    }

    #[test]
    fn runs_tile_the_chunks_and_keep_their_values() {
        // Runs of 3 values, first chunk of 2 runs: chunks of 6, 12, 24 values.
        let a = DoublingArray::<AtomicU64, 3>::of_runs(2, 3);
        assert_eq!(a.capacity(), 14);
        for r in 0..a.capacity() {
            let run = a.run(r);
            assert_eq!(run.len(), 3);
            for (j, v) in run.iter().enumerate() {
                assert_eq!(v.load(Ordering::Relaxed), 0, "run {r} starts zero");
                v.store(r * 10 + j as u64 + 1, Ordering::Relaxed);
            }
        }
        for r in 0..a.capacity() {
            let got: Vec<u64> = a.run(r).iter().map(|v| v.load(Ordering::Relaxed)).collect();
            assert_eq!(got, [r * 10 + 1, r * 10 + 2, r * 10 + 3], "run {r}");
            assert_eq!(a.get(r).load(Ordering::Relaxed), r * 10 + 1);
        }
        let empty = DoublingArray::<AtomicU64, 3>::of_runs(2, 0);
        assert!(empty.run(13).is_empty(), "runs of no values");
    }

    #[test]
    #[should_panic(expected = "first chunk of 3 runs")]
    fn a_first_chunk_that_is_not_a_power_of_two_is_refused() {
        let _ = DoublingArray::<AtomicU64, 3>::new(3);
    }

    /// The `VmFlags` line of the mapping that holds `addr`
    /// (`/proc/self/smaps`).
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_once(' ').and_then(|(r, _)| r.split_once('-'));
            if let Some((start, end)) = range
                && let (Ok(start), Ok(end)) =
                    (usize::from_str_radix(start, 16), usize::from_str_radix(end, 16))
            {
                inside = (start..end).contains(&addr);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.trim().to_string();
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    #[test]
    fn slices_of_a_huge_page_or_more_ask_for_huge_pages() {
        let big = ZeroedSlice::<AtomicU64>::new(HUGE_PAGE / 8);
        let small = ZeroedSlice::<AtomicU64>::new(HUGE_PAGE / 8 - 512);
        let (big_flags, small_flags) =
            (vm_flags(big.as_ptr() as usize), vm_flags(small.as_ptr() as usize));
        assert!(big_flags.split(' ').any(|f| f == "hg"), "MADV_HUGEPAGE: {big_flags}");
        assert!(!small_flags.split(' ').any(|f| f == "hg"), "below 2 MiB: {small_flags}");
    }

    #[test]
    fn an_empty_slice_maps_nothing() {
        let s = ZeroedSlice::<AtomicU64>::new(0);
        assert!(s.is_empty());
    }

    #[test]
    fn a_gibibyte_slice_maps_at_once_and_reads_back_its_far_end() {
        // 1 GiB of address space; only the two pages touched are backed.
        let s = ZeroedSlice::<AtomicU64>::new(1 << 27);
        s[(1 << 27) - 1].store(3, Ordering::Relaxed);
        assert_eq!(s[(1 << 27) - 1].load(Ordering::Relaxed), 3);
        assert_eq!(s[1 << 20].load(Ordering::Relaxed), 0);
    }
}
