//! Cache-line write-back, store fence and time-stamp counter, via inline assembly.
//!
//! Stable Rust has no `clwb`/`sfence` intrinsics usable on arbitrary targets, so
//! the instructions are emitted with `asm!` after a CPUID check made once per
//! process: `clwb` when the CPU has it, else `clflushopt`, else `clflush` (which
//! every x86-64 CPU has). On other architectures the flush is a no-op and the
//! fence a sequentially consistent fence; persistence is then only as good as
//! `msync`, which the `fs` backend calls on close, and a `dax` pool under ADR
//! is refused (`PmemError::NoFlushInstruction`) rather than run with flushes
//! that do nothing.

use std::sync::OnceLock;

/// Size of a CPU cache line, the unit of flushing and of the crash simulator.
pub const CACHE_LINE: usize = 64;

/// Which instruction `flush_line` uses on this CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlushInstruction {
    Clwb,
    Clflushopt,
    Clflush,
    /// Not x86-64: flushing is not available.
    None,
}

impl FlushInstruction {
    pub fn name(self) -> &'static str {
        match self {
            FlushInstruction::Clwb => "clwb",
            FlushInstruction::Clflushopt => "clflushopt",
            FlushInstruction::Clflush => "clflush",
            FlushInstruction::None => "none",
        }
    }
}

static FLUSH: OnceLock<FlushInstruction> = OnceLock::new();

/// The flush instruction chosen for this CPU (CPUID leaf 7, EBX bits 24 and 23).
pub fn flush_instruction() -> FlushInstruction {
    *FLUSH.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> FlushInstruction {
    // CPUID is available on every x86-64 CPU; leaf 7 exists when leaf 0 says so.
    let max_leaf = std::arch::x86_64::__cpuid(0).eax;
    if max_leaf >= 7 {
        let ebx = std::arch::x86_64::__cpuid_count(7, 0).ebx;
        if ebx & (1 << 24) != 0 {
            return FlushInstruction::Clwb;
        }
        if ebx & (1 << 23) != 0 {
            return FlushInstruction::Clflushopt;
        }
    }
    FlushInstruction::Clflush
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> FlushInstruction {
    FlushInstruction::None
}

/// Write back the cache lines from `first` (line aligned) up to `first +
/// bytes`. The instruction is chosen once per range, not once per line: the
/// choice is a call into a `OnceLock`, and a 1 KiB slot is 17 lines (that
/// call and its return were 8 % of `Persister::flush` in a YCSB WH profile).
#[inline]
pub(crate) fn flush_lines(first: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let kind = flush_instruction();
        let mut at = 0;
        while at < bytes {
            let addr = first.wrapping_add(at);
            match kind {
                // The flush instructions take any address that is mapped in
                // the process; callers pass ranges inside a live mapping
                // (checked by `Mapping::check_range`). They do not write
                // memory visible to Rust.
                // SAFETY: `addr` is mapped; no Rust-visible memory is written.
                FlushInstruction::Clwb => unsafe {
                    std::arch::asm!("clwb [{0}]", in(reg) addr, options(nostack, preserves_flags));
                },
                // SAFETY: as above.
                FlushInstruction::Clflushopt => unsafe {
                    std::arch::asm!(
                        "clflushopt [{0}]",
                        in(reg) addr,
                        options(nostack, preserves_flags)
                    );
                },
                // SAFETY: as above.
                FlushInstruction::Clflush | FlushInstruction::None => unsafe {
                    std::arch::asm!("clflush [{0}]", in(reg) addr, options(nostack, preserves_flags));
                },
            }
            at += CACHE_LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (first, bytes);
}

/// Store fence: orders earlier flushes and stores before later stores.
#[inline]
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no operands and touches no memory Rust knows of.
    unsafe {
        std::arch::asm!("sfence", options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// [`prefetch`] of the line holding address `p`, for memory that Rust holds
/// no reference to (a pool's mapping). Any address will do: a prefetch of an
/// unmapped address is dropped by the CPU, never faults.
#[inline(always)]
pub fn prefetch_addr(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: as in `prefetch`: `prefetcht0` reads no architectural state,
        // cannot fault (not even on an unmapped address) and changes no memory.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Lines [`prefetch_lines`] asks for at most: past them, the copy of a row
/// is sequential and the hardware's stream prefetcher follows it.
pub const PREFETCH_LINES_MAX: usize = 8;

/// Hint the CPU to bring the cache lines of `words` (a row) into all cache
/// levels: one [`prefetch`] per 64-byte line, the first
/// [`PREFETCH_LINES_MAX`] lines.
#[inline(always)]
pub fn prefetch_lines<T>(words: &[T]) {
    let per_line = (64 / std::mem::size_of::<T>().max(1)).max(1);
    for w in words.iter().step_by(per_line).take(PREFETCH_LINES_MAX) {
        prefetch(w);
    }
}

/// Hint the CPU to bring the cache line holding `*value` into all cache levels.
///
/// For chains of dependent loads (index → record word → Met-Cache entry →
/// row): once an address is known, the loads behind it start early and their
/// misses overlap. A hint only; it never faults and changes no memory.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        // `prefetcht0` is an SSE instruction (baseline on x86-64).
        // SAFETY: it reads no architectural state and cannot fault, and the
        // address comes from a live reference.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (value as *const T).cast::<i8>(),
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Hint the CPU to bring the cache lines of `words` into this core's cache
/// *for writing* (`prefetchw`: the line arrives owned, so the stores that
/// follow need no second request for ownership), every line of `words`.
///
/// For memory about to be overwritten whole after independent work, e.g. a
/// Met-Cache entry reserved for a copy before the commit's fence waits: the
/// misses then overlap with that wait. A hint only: it never faults, changes
/// no memory, and is a no-op on a CPU without the instruction (CPUID's
/// `PREFETCHW` bit; older ones decode it as a no-op).
#[inline(always)]
pub fn prefetch_for_write<T>(words: &[T]) {
    let per_line = (64 / std::mem::size_of::<T>().max(1)).max(1);
    for w in words.iter().step_by(per_line) {
        prefetch_line_for_write(w);
    }
}

/// [`prefetch_for_write`] of the one line holding `*value`.
///
/// `asm!`, not `_mm_prefetch::<_MM_HINT_ET0>`: the intrinsic emits
/// `prefetcht0` unless the `prfchw` target feature is enabled.
#[inline(always)]
pub fn prefetch_line_for_write<T: ?Sized>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetchw` cannot fault and writes no memory (only the line's
    // coherence state); the address comes from a live reference.
    unsafe {
        std::arch::asm!(
            "prefetchw [{0}]",
            in(reg) (value as *const T).cast::<u8>(),
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Read the time-stamp counter (cycles of the invariant TSC).
#[inline]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` reads a counter register and has no memory effects.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
}

/// Read the time-stamp counter after every earlier instruction has executed
/// and every earlier load is globally visible (`rdtscp`): a stamp taken right
/// after a memory access does not start the clock while the access's cache
/// miss is still in flight.
#[inline]
pub fn rdtsc_ordered() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut aux = 0u32;
        // SAFETY: `rdtscp` reads the counter and `IA32_TSC_AUX` into
        // registers; `aux` is a valid place for the latter.
        unsafe { std::arch::x86_64::__rdtscp(&mut aux) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        rdtsc()
    }
}

/// Read the time-stamp counter after every earlier store and write-back has
/// completed (`mfence; lfence; rdtsc`): a stamp taken right after a fence
/// does not start the clock while the fence's flushes are still draining to
/// memory (`rdtscp` does not wait for them: on this project's AMD guest a
/// wait stamped with it still ran under the drain).
#[inline]
pub fn rdtsc_after_drain() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `mfence` and `lfence` have no operands and touch no memory
        // Rust knows of; `rdtsc` reads a counter register into `eax:edx`.
        unsafe {
            let (lo, hi): (u32, u32);
            std::arch::asm!(
                "mfence",
                "lfence",
                "rdtsc",
                out("eax") lo,
                out("edx") hi,
                options(nostack, preserves_flags),
            );
            (u64::from(hi) << 32) | u64::from(lo)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        rdtsc()
    }
}

/// Full fence (`mfence`): later loads and stores wait until every earlier
/// store and write-back (`clwb`) has completed. A `SeqCst` fence compiles to
/// a locked instruction, which waits for the stores but not the write-backs.
#[inline]
pub fn full_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `mfence` has no operands and touches no memory Rust knows of.
    unsafe {
        std::arch::asm!("mfence", options(nostack, preserves_flags));
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// TSC ticks per nanosecond, measured once against the monotonic clock (20 ms).
pub fn tsc_ticks_per_ns() -> f64 {
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        let t0 = std::time::Instant::now();
        let c0 = rdtsc();
        while t0.elapsed() < std::time::Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let c1 = rdtsc();
        let ns = t0.elapsed().as_nanos() as f64;
        let rate = (c1.wrapping_sub(c0)) as f64 / ns;
        if rate.is_finite() && rate > 0.01 { rate } else { 1.0 }
    })
}

/// Busy-wait for `ns` nanoseconds on the TSC; returns the nanoseconds actually spent.
#[inline]
pub fn busy_wait_ns(ns: u64) -> u64 {
    if ns == 0 {
        return 0;
    }
    let rate = tsc_ticks_per_ns();
    let start = rdtsc();
    let ticks = (ns as f64 * rate) as u64;
    loop {
        let now = rdtsc();
        let spent = now.wrapping_sub(start);
        if spent >= ticks {
            return (spent as f64 / rate) as u64;
        }
        // No `pause` (`spin_loop`): on recent Intel cores it takes ~140
        // cycles, which would overshoot a 72-ns wait by most of itself.
    }
}
