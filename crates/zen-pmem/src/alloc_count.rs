//! A counting global allocator, to prove "no heap allocation per
//! transaction" with a number: the `zen` binary installs it, and the
//! benchmark driver reads each worker thread's count at the start and end of
//! the measured interval (`allocations per commit` in the report).
//!
//! Counts are per thread (a `const` thread-local `Cell`): counting adds no
//! shared write to any allocation. A library user that does not install the
//! allocator gets `None` from [`installed`], and reports say "not counted".

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The system allocator, counting allocations (and reallocations) per thread.
pub struct CountingAllocator;

#[inline]
fn count() {
    // `try_with`: a thread being torn down may still allocate.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    if !INSTALLED.load(Ordering::Relaxed) {
        INSTALLED.store(true, Ordering::Relaxed);
    }
}

// Counting touches only a thread-local `Cell` and an atomic flag, and
// never allocates.
// SAFETY: every method forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for CountingAllocator {
    // SAFETY: callers uphold `GlobalAlloc::alloc`'s contract; it is forwarded unchanged.
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        unsafe { System.alloc(layout) }
    }

    // SAFETY: as `alloc`.
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    // SAFETY: callers uphold `GlobalAlloc::dealloc`'s contract; it is forwarded unchanged.
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }

    // SAFETY: callers uphold `GlobalAlloc::realloc`'s contract; it is forwarded unchanged.
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from `System` with `layout`; the caller's
        // contract for `realloc` is passed on as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Allocations made by the calling thread so far (0 when not installed).
pub fn thread_allocations() -> u64 {
    ALLOCATIONS.try_with(Cell::get).unwrap_or(0)
}

/// Whether [`CountingAllocator`] is the process's global allocator (it has
/// counted at least one allocation).
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed)
}
