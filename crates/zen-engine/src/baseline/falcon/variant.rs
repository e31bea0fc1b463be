//! The Falcon design variants of its paper's evaluation (Falcon §6.2, Table
//! 1; §6.3, Fig. 10–11), chosen at run time (`--falcon-variant`).
//!
//! A variant is three switches:
//!
//! | variant | redo log | log written back under eADR | tuple write-back under eADR | paper |
//! | --- | --- | --- | --- | --- |
//! | `falcon` | small window | no | selective (not hot tuples) | Falcon |
//! | `no-flush` | small window | no | none | Falcon (No Flush) |
//! | `all-flush` | small window | no | every tuple | Falcon (All Flush) |
//! | `small-log-window` | small window | no | every tuple | ③ Inp (Small Log Window) |
//! | `hot-tracking` | page-sized log | yes | selective | ④ Inp (Hot Tuple Tracking) |
//! | `inp` | page-sized log | yes | every tuple | ② Inp |
//! | `inp-no-flush` | page-sized log | no | none | ① Inp (No Flush) |
//!
//! `small-log-window` and `all-flush` are the same engine: the paper defines
//! Falcon (All Flush) as "Inp with small log windows" (§6.2.2), and Fig. 10's
//! ③ is exactly that; both names are kept so either figure can be rerun by
//! its own labels.
//!
//! Under ADR every write-back that durability needs is issued whatever the
//! variant (the log before its commit is acknowledged, every tuple before
//! the log record that describes it may be overwritten), so the switches
//! only choose among write-backs that are optional, i.e. under eADR. The
//! variants whose point is to leave tuples unflushed (`no-flush`,
//! `inp-no-flush`, `hot-tracking`) are refused under ADR by
//! `EngineConfig::validate`; `falcon` under ADR runs with hot tracking off
//! (a hot tuple never written back would be lost once its log record is
//! reused) and says so in `docs/design/falcon.md`.

use serde::Serialize;

/// Which tuples a commit writes back after its in-place updates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataFlush {
    /// Every tuple written (the hinted flush of each).
    All,
    /// Every tuple except those in the worker's hot-tuple LRU.
    Selective,
    /// None (the caches write them back when they evict them).
    None,
}

/// A Falcon variant (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FalconVariant {
    #[default]
    Falcon,
    NoFlush,
    AllFlush,
    SmallLogWindow,
    HotTracking,
    Inp,
    InpNoFlush,
}

impl FalconVariant {
    pub const ALL: [FalconVariant; 7] = [
        FalconVariant::Falcon,
        FalconVariant::NoFlush,
        FalconVariant::AllFlush,
        FalconVariant::SmallLogWindow,
        FalconVariant::HotTracking,
        FalconVariant::Inp,
        FalconVariant::InpNoFlush,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FalconVariant::Falcon => "falcon",
            FalconVariant::NoFlush => "no-flush",
            FalconVariant::AllFlush => "all-flush",
            FalconVariant::SmallLogWindow => "small-log-window",
            FalconVariant::HotTracking => "hot-tracking",
            FalconVariant::Inp => "inp",
            FalconVariant::InpNoFlush => "inp-no-flush",
        }
    }

    pub fn parse(s: &str) -> Option<FalconVariant> {
        FalconVariant::ALL.into_iter().find(|v| v.name() == s)
    }

    /// One line for `zen list` and errors.
    pub fn describe(self) -> &'static str {
        match self {
            FalconVariant::Falcon => {
                "small log window + selective data flush (hinted flush, hot-tuple LRU)"
            }
            FalconVariant::NoFlush => "small log window, no tuple write-back (eADR only)",
            FalconVariant::AllFlush => "small log window, every tuple written back",
            FalconVariant::SmallLogWindow => "Inp + small log window (= all-flush)",
            FalconVariant::HotTracking => {
                "Inp + hot-tuple tracking: page-sized NVM log, hot tuples not written back (eADR only)"
            }
            FalconVariant::Inp => {
                "in-place updates with a page-sized redo log in NVM, log and tuples written back"
            }
            FalconVariant::InpNoFlush => "Inp with every write-back removed (eADR only)",
        }
    }

    /// The redo log is the small window (else a log as large as a page).
    pub fn small_window(self) -> bool {
        matches!(
            self,
            FalconVariant::Falcon
                | FalconVariant::NoFlush
                | FalconVariant::AllFlush
                | FalconVariant::SmallLogWindow
        )
    }

    /// Under eADR, the log record is written back after it is written (the
    /// Inp designs, whose log does not stay in the cache).
    pub fn flushes_log(self) -> bool {
        matches!(self, FalconVariant::HotTracking | FalconVariant::Inp)
    }

    /// Under eADR, which tuples a commit writes back.
    pub fn data_flush(self) -> DataFlush {
        match self {
            FalconVariant::Falcon | FalconVariant::HotTracking => DataFlush::Selective,
            FalconVariant::AllFlush | FalconVariant::SmallLogWindow | FalconVariant::Inp => {
                DataFlush::All
            }
            FalconVariant::NoFlush | FalconVariant::InpNoFlush => DataFlush::None,
        }
    }

    /// Correct only where caches are persistent (module docs).
    pub fn needs_eadr(self) -> bool {
        matches!(
            self,
            FalconVariant::NoFlush | FalconVariant::HotTracking | FalconVariant::InpNoFlush
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_are_the_same_engine() {
        for v in FalconVariant::ALL {
            assert_eq!(FalconVariant::parse(v.name()), Some(v));
        }
        let (a, b) = (FalconVariant::AllFlush, FalconVariant::SmallLogWindow);
        assert_eq!(
            (a.small_window(), a.flushes_log(), a.data_flush()),
            (b.small_window(), b.flushes_log(), b.data_flush())
        );
        assert_eq!(FalconVariant::parse("nonsense"), None);
    }
}
