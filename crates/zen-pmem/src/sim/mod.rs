//! `sim`: the crash simulator (`--pmem sim`, VERIFICATION.md §1).
//!
//! What: [`SimBackend`] is a [`crate::PmemBackend`] that records every store,
//! flush, fence and marker of a run under x86-TSO (a global mutex orders the
//! events), keeps which atoms are durable, and counts persistence lints. Its
//! [`Trace`] yields [`CrashPoint`]s (just before each fence, and at the end),
//! and each point yields the crash images a power failure there could leave:
//!
//! | [`CrashMode`] | image |
//! | --- | --- |
//! | `Strict` (Px86, ADR) | durable + for every dirty line a prefix of its pending atoms |
//! | `Paranoid` | durable + any subset of pending atoms (tearing inside a line too) |
//! | `Eadr` | any prefix of the global atom order |
//!
//! How: stores are split into 8-byte [`Atom`]s (`atom.rs`); the live machine
//! (`machine.rs`) and the trace replay (`trace.rs`) share one model: a flush
//! of line L by thread T marks the atoms stored to L so far, and T's next fence
//! makes them durable. Images are enumerated exhaustively within a budget,
//! else extremes, single-line deviations and seeded random picks (`plan.rs`),
//! and built incrementally in a reusable buffer (`images.rs`). [`Trace::check`]
//! and [`for_each_nested`] drive checkers over them (`check.rs`).
//!
//! ```no_run
//! use zen_pmem::sim::{CrashMode, SimBackend};
//! use zen_pmem::{PersistenceDomain, PmemBackend};
//!
//! let sim = SimBackend::new(4096, PersistenceDomain::Adr);
//! sim.write(1, 0, &[1; 16]);
//! sim.flush(1, 0, 16);
//! sim.fence(1, 1);
//! for point in sim.trace().crash_points() {
//!     for image in point.images(CrashMode::Strict, 256, 42) {
//!         let recovered = SimBackend::from_image(image.bytes, PersistenceDomain::Adr);
//!         assert_eq!(recovered.len(), 4096, "{}", image.description);
//!     }
//! }
//! ```
//!
//! Why our own: no machine here has persistent memory and no existing PMem
//! checker runs in our CI (cf. SQLite's crash VFS and redb's `CrashBackend`).
//!
//! Invariants: the engine only ever reads the image (through a read-only
//! mapping); crash points and images are deterministic for a given trace and
//! seed; a failing check prints its seed, and [`seed_from_env`] replays it.

mod atom;
mod backend;
mod check;
mod images;
mod lint;
mod machine;
mod memfd;
mod plan;
mod point;
mod trace;

pub use atom::{Atom, LINE_BYTES, MAX_POOL_BYTES, WORD_BYTES};
pub use backend::SimBackend;
pub use check::{CheckFailure, CheckPlan, CheckStats, NestedStats, for_each_nested};
pub use images::{CrashImage, CrashImages, ImageCursor, ImageView};
pub use lint::{LintReport, MAX_MESSAGES};
pub use point::{CrashAt, CrashMode, CrashPoint};
pub use trace::{CrashPoints, Event, EventKind, MarkerRecord, Trace};

/// Images per crash point checked in CI (VERIFICATION.md §1).
pub const DEFAULT_BUDGET: u64 = 256;

/// The environment variable that replays a seed.
pub const SEED_ENV: &str = "ZEN_SEED";

/// The seed in `ZEN_SEED` (decimal or `0x` hex), else `default`.
///
/// Panics with a clear message when `ZEN_SEED` is set but is not a number, so
/// a mistyped replay never silently runs another seed.
pub fn seed_from_env(default: u64) -> u64 {
    match std::env::var(SEED_ENV) {
        Ok(text) => parse_seed(&text)
            .unwrap_or_else(|| panic!("{SEED_ENV}={text:?} is not a decimal or 0x-hex u64")),
        Err(_) => default,
    }
}

/// Parse a seed written in decimal or `0x` hex.
pub fn parse_seed(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_in_decimal_and_hex() {
        assert_eq!(parse_seed("42"), Some(42));
        assert_eq!(parse_seed(" 0x2A "), Some(42));
        assert_eq!(parse_seed("forty-two"), None);
    }
}
