//! OCC: Kung and Robinson's optimistic concurrency control (TODS 1981) with
//! serial validation, on Met-Cache entries.
//!
//! CC-META
//!   `cc[0]` the version word only (shared encoding, `silo.rs`).
//!
//! PHASES
//!   read      as Silo: stable copies of the entries, writes buffered.
//!   validate  inside ONE global critical section (a mutex): backward
//!             validation — the read set must not intersect the write set of
//!             any transaction that committed since the read (checked per tuple
//!             through the version words, which those commits changed) —
//!             then the transaction number (Tx-CTS) is drawn, the write phase
//!             persists (Alg. 1) and installs, and the section is left.
//!
//! GUARANTEES
//!   Serializable (in validation order) and strict. Scans are phantom-safe
//!   through the commit-time re-scan.
//!
//! WHAT IT DOES NOT DO
//!   Parallel validation (Kung–Robinson's second algorithm): the single
//!   critical section is the point of this baseline — it shows what serial
//!   validation costs next to Silo's per-tuple locking. Read-only transactions
//!   validate without entering the section (their serialization point is the
//!   validation itself).

use super::Protocol;
use crate::config::CcKind;

pub struct Occ;

impl Protocol for Occ {
    const KIND: CcKind = CcKind::Occ;
    const SERIAL_VALIDATION: bool = true;
    const COPY_ON_FOREIGN_WRITE: bool = true;
}
