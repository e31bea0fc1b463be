//! `EngineConfig`: every knob of an engine, with documented defaults and `validate()`.
//!
//! The CLI turns flags into this struct; `crate::open` turns it into a running
//! engine with one `match` per axis (engine design × protocol × backend).

use std::path::PathBuf;

use serde::Serialize;
use zen_pmem::{BackendKind, LatencyModel, NvmProfile, PersistenceDomain};

use crate::api::Durability;
pub use crate::baseline::falcon::FalconVariant;
use crate::error::{Error, Result};

/// Engine designs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Zen,
    Ideal,
    Mmdb,
    Wbl,
    Falcon,
    Nvcaracal,
}

impl EngineKind {
    pub const ALL: [EngineKind; 6] = [
        EngineKind::Zen,
        EngineKind::Ideal,
        EngineKind::Mmdb,
        EngineKind::Wbl,
        EngineKind::Falcon,
        EngineKind::Nvcaracal,
    ];
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Zen => "zen",
            EngineKind::Ideal => "ideal",
            EngineKind::Mmdb => "mmdb",
            EngineKind::Wbl => "wbl",
            EngineKind::Falcon => "falcon",
            EngineKind::Nvcaracal => "nvcaracal",
        }
    }
    pub fn parse(s: &str) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|k| k.name() == s)
    }
    pub fn describe(self) -> &'static str {
        match self {
            EngineKind::Zen => {
                "Zen: Met-Cache in DRAM, log-free persistent transactions (LP bit), scan-based recovery"
            }
            EngineKind::Ideal => {
                "ideal: tuples, indexes and CC metadata in DRAM; no persistence, no recovery (the physical limit; --pmem dram)"
            }
            EngineKind::Mmdb => {
                "mmdb: tuples in DRAM up to the budget, the rest in NVM as volatile memory; per-worker redo log in NVM (one fence per transaction) and checkpoints; recovery = checkpoint + log replay"
            }
            EngineKind::Wbl => {
                "wbl: multi-versioned tuples with per-tuple CC metadata in NVM, DRAM tuple cache, a write-behind log record (cp, cd) every ~100 us (group commit); recovery undoes (cp, cd]"
            }
            EngineKind::Falcon => {
                "falcon: in-place updates of a single-version NVM tuple heap, DRAM indexes, a per-worker small redo log window (not flushed under eADR) and selective data flush (--falcon-variant for its ablations); recovery = replay of the windows + index rebuild"
            }
            EngineKind::Nvcaracal => {
                "nvcaracal: deterministic epochs (NVCaracal): inputs logged before execution, pending versions in DRAM, only each row's final version of the epoch persisted into a dual-version NVM row, epoch number persisted last; recovery = revert the crashed epoch + replay its inputs"
            }
        }
    }
    /// The concurrency-control protocols this design runs (`open` refuses others).
    pub fn supported_cc(self) -> &'static [CcKind] {
        match self {
            EngineKind::Zen => &CcKind::ALL,
            EngineKind::Ideal | EngineKind::Mmdb | EngineKind::Wbl | EngineKind::Nvcaracal => {
                &[CcKind::Silo]
            }
            EngineKind::Falcon => &crate::baseline::occ::protocol::CORE_PROTOCOLS,
        }
    }
    /// Whether the design runs protocol `cc`.
    pub fn supports(self, cc: CcKind) -> bool {
        self.supported_cc().contains(&cc)
    }
}

/// Concurrency-control protocols: the ten of Zen+ §5.4 (`CcKind::ALL`, the
/// ones Zen runs) and single-version timestamp ordering (`To`, which only
/// the baselines' OCC core runs, for Falcon §5.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CcKind {
    NoWait,
    WaitDie,
    DlDetect,
    Occ,
    Silo,
    Tictoc,
    Mvcc,
    Hekaton,
    Cicada,
    Hstore,
    To,
}

impl CcKind {
    /// The ten protocols of Zen+ §5.4 (every one Zen runs).
    pub const ALL: [CcKind; 10] = [
        CcKind::NoWait,
        CcKind::WaitDie,
        CcKind::DlDetect,
        CcKind::Occ,
        CcKind::Silo,
        CcKind::Tictoc,
        CcKind::Mvcc,
        CcKind::Hekaton,
        CcKind::Cicada,
        CcKind::Hstore,
    ];
    /// Every protocol `--cc` names: `ALL` and the baselines' `To`.
    pub const EVERY: [CcKind; 11] = {
        let mut every = [CcKind::To; 11];
        let mut i = 0;
        while i < Self::ALL.len() {
            every[i] = Self::ALL[i];
            i += 1;
        }
        every
    };
    pub fn name(self) -> &'static str {
        match self {
            CcKind::NoWait => "no-wait",
            CcKind::WaitDie => "wait-die",
            CcKind::DlDetect => "dl-detect",
            CcKind::Occ => "occ",
            CcKind::Silo => "silo",
            CcKind::Tictoc => "tictoc",
            CcKind::Mvcc => "mvcc",
            CcKind::Hekaton => "hekaton",
            CcKind::Cicada => "cicada",
            CcKind::Hstore => "hstore",
            CcKind::To => "to",
        }
    }
    pub fn parse(s: &str) -> Option<CcKind> {
        CcKind::EVERY.into_iter().find(|k| k.name() == s)
    }
    /// One line: family and guarantees.
    pub fn describe(self) -> &'static str {
        match self {
            CcKind::NoWait => {
                "2PL, abort on conflict: serializable, strict; phantoms caught by commit-time re-scan"
            }
            CcKind::WaitDie => {
                "2PL, older waits / younger dies: serializable, strict; phantoms caught by re-scan"
            }
            CcKind::DlDetect => {
                "2PL with waits-for-graph deadlock detection: serializable, strict; phantoms caught by re-scan"
            }
            CcKind::Occ => {
                "Kung-Robinson OCC, serial validation: serializable, strict; phantom-safe (re-scan)"
            }
            CcKind::Silo => {
                "single-version OCC (Silo): serializable, strict; scans re-validated at commit (phantom-safe)"
            }
            CcKind::Tictoc => {
                "TicToc, data-driven timestamps: serializable, strict; phantom-safe (re-scan)"
            }
            CcKind::Mvcc => {
                "multi-version timestamp ordering, versions in the Met-Cache: serializable; phantom-safe (scan read timestamps)"
            }
            CcKind::Hekaton => {
                "multi-version OCC (Hekaton): serializable snapshot + read validation; phantom-safe (re-scan)"
            }
            CcKind::Cicada => {
                "multi-version TO with per-worker clocks and early abort (Cicada): serializable"
            }
            CcKind::Hstore => "partition locks (H-Store): serializable; phantoms caught by re-scan",
            CcKind::To => {
                "single-version timestamp ordering (baselines only: falcon): serializable; phantom-safe (scan read timestamps)"
            }
        }
    }
    /// Protocols that run Zen+ read-only snapshots and adaptive execution
    /// (`Protocol::SNAPSHOT_READS`).
    pub fn supports_snapshots(self) -> bool {
        matches!(self, CcKind::Mvcc | CcKind::Hekaton)
    }

    /// Two-phase locking protocols (at most 62 workers: one lock-word bit each).
    pub fn is_locking(self) -> bool {
        matches!(self, CcKind::NoWait | CcKind::WaitDie | CcKind::DlDetect)
    }
}

/// A deliberate bug, switched on at run time by the bug-injection suite to
/// prove that the crash campaigns catch it (VERIFICATION §1). Never set in
/// production; `None` in every configuration the CLI builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// Alg. 1 without the fence between the tuples and the LP store.
    NoFenceBeforeLp,
    /// Acknowledge an Immediate commit before the fence after the LP store.
    AckBeforeLpFence,
    /// Write the LP word as two 4-byte halves.
    TornLpWord,
    /// Reuse a reclaimed slot without first zeroing its Tx-CTS durably (S1).
    ReuseWithoutZeroing,
    /// Zero a tombstone without waiting for older versions (S3).
    EarlyTombstone,
    /// Assume eADR on an ADR machine: no cache-line flushes.
    SkipFlushes,
    /// Recovery zeroes winning tombstones with (before) the older versions.
    RecoveryTombstonesFirst,
    /// Zero a worker's newest LP slot without raising its commit floor first
    /// (S4), at run time and in recovery.
    NoCommitFloor,
    /// Lazy commits: a transaction that read a version whose writer (on
    /// another worker) is not yet known durable does not flush that writer's
    /// LP line before its own fence, so a crash can keep the reader and drop
    /// the writer (the hole of issue 15, re-injectable).
    LazyDependencyUnflushed,
    /// A delete leaves its record's spare slot (S7) where it is, un-zeroed
    /// and not waited for, and the record free to get spares again: the
    /// tombstone can go while an older version of the key remains.
    SpareKeptOnDelete,
}

impl Fault {
    /// The engine whose code path the fault breaks: every `Fault` is Zen's
    /// (the baselines' faults are [`BaselineFault`]s).
    pub fn engine(self) -> EngineKind {
        EngineKind::Zen
    }

    pub const ALL: [Fault; 10] = [
        Fault::NoFenceBeforeLp,
        Fault::AckBeforeLpFence,
        Fault::TornLpWord,
        Fault::ReuseWithoutZeroing,
        Fault::EarlyTombstone,
        Fault::SkipFlushes,
        Fault::RecoveryTombstonesFirst,
        Fault::NoCommitFloor,
        Fault::LazyDependencyUnflushed,
        Fault::SpareKeptOnDelete,
    ];
}

/// A deliberate bug in a baseline engine, for the baselines' bug-injection
/// tests (`tests/baseline_crash.rs`). Kept apart from [`Fault`] because the
/// Zen suite matches `Fault` exhaustively; each names its engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BaselineFault {
    /// mmdb: acknowledge a commit before its redo record is flushed and fenced.
    WalAckBeforeFlush,
    /// wbl: publish a write-behind record's cp (and acknowledge up to it)
    /// before the record is durable.
    WblAckBeforeRecord,
    /// falcon (ADR): the redo record is not written back before its fence,
    /// so the commit is acknowledged while the record is still in the cache.
    FalconRecordUnflushed,
    /// falcon: the record's seal (the commit mark) is written after the
    /// in-place updates instead of before them.
    FalconSealAfterInstall,
    /// nvcaracal: the epoch number is persisted before the epoch's rows
    /// (recovery then trusts a half-written epoch and does not replay it).
    NvcaracalEpochMarkFirst,
    /// nvcaracal: the epoch's input log is neither flushed nor fenced
    /// before its seal and execution (its bytes may never reach NVM).
    NvcaracalInputLogUnpersisted,
    /// nvcaracal: the major collector's deletions of pooled versions are
    /// neither flushed nor fenced before execution, yet their values join
    /// the value pool's free list and are reused in the epoch (the free
    /// list not persisted before execution).
    NvcaracalValueFreeUnpersisted,
}

impl BaselineFault {
    pub const ALL: [BaselineFault; 7] = [
        BaselineFault::WalAckBeforeFlush,
        BaselineFault::WblAckBeforeRecord,
        BaselineFault::FalconRecordUnflushed,
        BaselineFault::FalconSealAfterInstall,
        BaselineFault::NvcaracalEpochMarkFirst,
        BaselineFault::NvcaracalInputLogUnpersisted,
        BaselineFault::NvcaracalValueFreeUnpersisted,
    ];

    /// The engine whose code path the fault breaks.
    pub fn engine(self) -> EngineKind {
        match self {
            BaselineFault::WalAckBeforeFlush => EngineKind::Mmdb,
            BaselineFault::WblAckBeforeRecord => EngineKind::Wbl,
            BaselineFault::FalconRecordUnflushed | BaselineFault::FalconSealAfterInstall => {
                EngineKind::Falcon
            }
            BaselineFault::NvcaracalEpochMarkFirst
            | BaselineFault::NvcaracalInputLogUnpersisted
            | BaselineFault::NvcaracalValueFreeUnpersisted => EngineKind::Nvcaracal,
        }
    }
}

/// A deliberate concurrency bug in a Zen protocol, for the schedule tests
/// (`tests/schedules.rs`): each one re-opens a race that the shuttle
/// schedules found and that is fixed, so that the test shows it would find
/// it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RaceFault {
    /// Read validation trusts an unlocked, unchanged version word without
    /// re-checking the record's location (hekaton's multi-version installs
    /// move the location first, then unlock the old head unchanged).
    NoLocationRecheck,
    /// TicToc's read-timestamp extension ignores a lock taken between its
    /// lock check and its CAS (the locker may have read the old rts).
    TictocExtendUnderLock,
    /// TicToc validates a read-only transaction at logical time 0 instead of
    /// the largest wts it read.
    TictocReadOnlyAtZero,
    /// A phantom re-scan ignores the keys unlinked while it ran
    /// (`index/mod.rs`, "Phantoms and unlinks"): a row that moves to another
    /// key and back can be missed by the scan and by its re-scan. Not a
    /// protocol's own code path (every engine re-scans through the index);
    /// injected through TicToc's.
    RescanIgnoresUnlinks,
    /// Copy-on-foreign-write leaves the original entry's version word as it
    /// was, not obsolete: single-version read validation trusts an
    /// unchanged word without the location word (C6 of `zen/cache.rs`), so
    /// a read of the original passes after the record moved to the copy.
    CopyLeavesOriginalValid,
    /// Read validation counts a lock the transaction holds on the record
    /// through another entry as its own lock on the word it read: a writer
    /// that read the original entry and locked the copy another writer had
    /// just installed (the original still locked by that writer) validates
    /// its stale read, and the other writer's update is lost. The copying
    /// writer also waits 2 µs inside that window, so that OS-thread runs
    /// meet it as readily as the schedules do.
    OwnLockOnCopyCounts,
}

impl RaceFault {
    pub const ALL: [RaceFault; 6] = [
        RaceFault::NoLocationRecheck,
        RaceFault::TictocExtendUnderLock,
        RaceFault::TictocReadOnlyAtZero,
        RaceFault::RescanIgnoresUnlinks,
        RaceFault::CopyLeavesOriginalValid,
        RaceFault::OwnLockOnCopyCounts,
    ];

    /// The protocol whose code path the fault breaks.
    pub fn cc(self) -> CcKind {
        match self {
            RaceFault::NoLocationRecheck => CcKind::Hekaton,
            RaceFault::TictocExtendUnderLock
            | RaceFault::TictocReadOnlyAtZero
            | RaceFault::RescanIgnoresUnlinks => CcKind::Tictoc,
            RaceFault::CopyLeavesOriginalValid | RaceFault::OwnLockOnCopyCounts => CcKind::Silo,
        }
    }
}

/// Everything needed to create or open an engine.
#[derive(Debug, Clone, Serialize)]
pub struct EngineConfig {
    pub engine: EngineKind,
    pub cc: CcKind,
    /// Backend (`--pmem`).
    pub pmem: BackendKind,
    /// Pool file for file backends.
    pub pool: Option<PathBuf>,
    /// Split the pool into this many per-node member files named after
    /// `pool` (`zen_pmem::pool::member_paths`: `{node}` replaced, else
    /// `.node<N>` appended), one per NUMA node (`--pool-per-node`); heap
    /// pages of a node's workers come from its file. `None`: one file.
    pub pool_per_node: Option<usize>,
    /// Pool size in bytes when creating (default 1 GiB).
    pub pool_size_bytes: u64,
    /// Pool page size when creating (default 2 MiB).
    pub page_size_bytes: u64,
    /// Latency model for `emu` (default: the optane preset).
    pub latency: LatencyModel,
    pub domain: PersistenceDomain,
    /// Most workers that may register (default 64).
    pub max_workers: usize,
    /// Met-Cache budget in bytes for all workers and tables (default 256 MiB);
    /// overridden by `dram_ratio` when set.
    pub cache_size_bytes: u64,
    /// Cache budget = data size / ratio (the paper's P: 4, 8, 16), computed when
    /// the engine is opened on a loaded pool or from `expected_data_bytes`.
    pub dram_ratio: Option<f64>,
    /// Hint for `dram_ratio` when creating an empty pool.
    pub expected_data_bytes: Option<u64>,
    /// Default durability of commits (the library default is Immediate).
    pub durability: Durability,
    /// Recovery threads (default: one per region, at most the CPU count).
    pub recovery_threads: Option<usize>,
    /// Tables in persist order: the LP tuple comes from the first of these the
    /// transaction writes (§3.3.4). Empty = table creation order.
    pub persist_order: Vec<String>,
    /// Create a new pool (true) or open and recover an existing one (false).
    pub create: bool,
    /// Most tuples one transaction may read and write (default 65,536).
    pub max_access_set: usize,
    /// Partitions of `hstore` (default: `max_workers`).
    pub hstore_partitions: Option<usize>,
    /// Bug injection for the verification suite only (`None` otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    /// mmdb: take a checkpoint every this many milliseconds in a background
    /// thread (default `None`: off, as in the paper's throughput runs; take
    /// one on demand with `MmdbEngine::checkpoint`).
    pub checkpoint_interval_ms: Option<u64>,
    /// wbl: group-commit interval, the time between two write-behind log
    /// records (default 100 µs, the paper's setting; 0 = one per commit).
    pub group_commit_interval_us: u64,
    /// falcon: the design variant (Falcon §6.2–6.3 ablations; default the
    /// full design). See `baseline::falcon::variant`.
    pub falcon_variant: FalconVariant,
    /// falcon: bytes of each worker's small log window (default 64 KiB, at
    /// most a pool page less its 64-byte header: larger values use the
    /// page). A transaction whose redo record is larger aborts with
    /// `Error::LogWindowOverflow`. Smaller windows stay in the CPU cache
    /// (the point of the design) but refuse larger transactions.
    pub falcon_window_bytes: u64,
    /// falcon: tuples each worker's hot-tuple LRU tracks (default 256;
    /// 0 = nothing is hot). Acts under eADR with the selective variants.
    pub falcon_hot_tuples: usize,
    /// nvcaracal: bytes of NVM for the input log of one epoch (default
    /// 16 MiB, rounded up to whole pages). A batch whose logged inputs are
    /// larger runs as several epochs; a transaction whose inputs alone do
    /// not fit is refused with `Error::EpochTooLarge`, naming both sizes.
    pub nvcaracal_log_bytes: u64,
    /// nvcaracal: batch append (Caracal's contention optimisation): in the
    /// init phase each thread groups its transactions' pending versions by
    /// row and appends each group in one locked merge; off, every pending
    /// version is one locked sorted insert into the row's version array.
    pub nvcaracal_batch_append: bool,
    /// nvcaracal: split-on-demand: a row that collects more than
    /// `baseline::nvcaracal::SPLIT_THRESHOLD` pending versions in an epoch
    /// gets one version array per init thread (appends take no shared
    /// lock; a read searches every array of the row).
    pub nvcaracal_split_on_demand: bool,
    /// nvcaracal: DRAM budget of one epoch's transient versions (version
    /// arrays and values, bounded before the epoch runs); a batch whose
    /// bound exceeds it runs as several consecutive epochs, and one
    /// transaction that alone exceeds it is refused with
    /// `Error::EpochOverBudget` (default 1 GiB).
    pub nvcaracal_dram_budget_bytes: u64,
    /// nvcaracal: cached versions (NVCaracal §4.2): a DRAM copy of committed
    /// rows read or updated by recent epochs, so later reads of them skip
    /// NVM; bounded by the DRAM cache budget (`cache_size_bytes` or
    /// `dram_ratio`), DRAM only (default on, as in the paper).
    pub nvcaracal_cached_versions: bool,
    /// nvcaracal: K, cached versions not read or updated in the last K
    /// epochs are evicted (default 20, the paper's).
    pub nvcaracal_cache_epochs: u64,
    /// nvcaracal: the minor garbage collector (NVCaracal §4.4, §5.3): the
    /// final write of a row that finds two versions in its slot overwrites
    /// the stale one at once. Off, the major collector instead: the slots
    /// an epoch wrote are kept in a DRAM list, and the next epoch's
    /// initialisation phase deletes their stale versions (one more NVM
    /// write per updated row), so every final write finds an empty
    /// version (default on, as in the paper for inline versions).
    pub nvcaracal_minor_gc: bool,
    /// nvcaracal: bytes of a persistent row (NVCaracal §5.3; default 256,
    /// the paper's): two versions of (R - 16) / 2 bytes each, whose inline
    /// heap holds a row that fits, else an offset into the table's
    /// persistent value pool (§5.5). 0: inline-only (every version inline,
    /// the slot sized to the row). Recorded in the pool at creation; a
    /// reopen uses the pool's.
    pub nvcaracal_row_bytes: u64,
    /// nvcaracal: the stored procedures one-shot transactions name (and
    /// recovery replays); the built-in `apply` is always there.
    #[serde(skip)]
    pub procedures: crate::det::Procedures,
    /// Bug injection into a baseline engine (tests only; `None` otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_fault: Option<BaselineFault>,
    /// Concurrency bug injection for the schedule tests only (`None` otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub race_fault: Option<RaceFault>,
    /// Zen+ NUMA placement, routing and accounting (`crate::numa`; default:
    /// the machine's real nodes, so off on a one-node machine).
    pub numa: crate::numa::NumaConfig,
    /// Zen+ MVCC-based adaptive execution (Zen+ §4.1, `zen/adaptive.rs`):
    /// read-only snapshots at the global minimum Tx-CTS − 1, the detecting
    /// stage (α, β, γ) and the exclusive stage. Default on; it acts only with
    /// the multi-version protocols that support it (`mvcc`, `hekaton`).
    /// Costs: one flag load and one counter per tuple access.
    pub adaptive: bool,
    /// α: a read-write transaction that accesses more tuples than this share
    /// of its worker's Met-Cache region becomes privileged (default 0.95).
    /// Lower leaves more room for other transactions, but enters the
    /// exclusive stage for smaller transactions.
    pub adaptive_alpha: f64,
    /// β: when free NVM pages fall below this share of the pool, the running
    /// transaction with the most accessed tuples becomes privileged (default
    /// 0.05). Higher triggers earlier (false alarms); lower risks running out.
    pub adaptive_beta: f64,
    /// γ: a transaction whose aborted attempts accessed more tuples than this
    /// in total becomes privileged (default 16 million, ~10 s of NVM reads on
    /// the paper's machine); bounds the work lost to retries.
    pub adaptive_gamma_tuples: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            engine: EngineKind::Zen,
            cc: CcKind::Silo,
            pmem: BackendKind::Dram,
            pool: None,
            pool_per_node: None,
            pool_size_bytes: 1 << 30,
            page_size_bytes: 2 << 20,
            latency: NvmProfile::Optane.model(),
            domain: PersistenceDomain::Adr,
            max_workers: 64,
            cache_size_bytes: 256 << 20,
            dram_ratio: None,
            expected_data_bytes: None,
            durability: Durability::Immediate,
            recovery_threads: None,
            persist_order: Vec::new(),
            create: true,
            max_access_set: 1 << 16,
            hstore_partitions: None,
            fault: None,
            checkpoint_interval_ms: None,
            group_commit_interval_us: 100,
            falcon_variant: FalconVariant::Falcon,
            falcon_window_bytes: 64 << 10,
            falcon_hot_tuples: 256,
            nvcaracal_log_bytes: 16 << 20,
            nvcaracal_batch_append: true,
            nvcaracal_split_on_demand: true,
            nvcaracal_dram_budget_bytes: 1 << 30,
            nvcaracal_cached_versions: true,
            nvcaracal_cache_epochs: 20,
            nvcaracal_minor_gc: true,
            nvcaracal_row_bytes: 256,
            procedures: crate::det::Procedures::default(),
            baseline_fault: None,
            race_fault: None,
            numa: crate::numa::NumaConfig::default(),
            adaptive: true,
            adaptive_alpha: 0.95,
            adaptive_beta: 0.05,
            adaptive_gamma_tuples: 16_000_000,
        }
    }
}

impl EngineConfig {
    /// The DRAM cache budget: `data_bytes / dram_ratio` when a ratio is set and
    /// the data size is known, else `cache_size_bytes`.
    pub fn cache_bytes(&self, data_bytes: u64) -> u64 {
        match self.dram_ratio {
            Some(ratio) if data_bytes > 0 => ((data_bytes as f64 / ratio) as u64).max(64 << 10),
            _ => self.cache_size_bytes,
        }
    }

    pub fn validate(&self) -> Result<()> {
        self.validate_pairing()?;
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if self.max_workers == 0 || self.max_workers > 250 {
            return bad(format!("max_workers {} outside 1..=250", self.max_workers));
        }
        if let Some(r) = self.dram_ratio
            && !(r.is_finite() && r >= 1.0)
        {
            return bad(format!("dram ratio {r} must be a number >= 1"));
        }
        if self.cache_size_bytes < 64 << 10 {
            return bad(format!("cache size {} bytes is below 64 KiB", self.cache_size_bytes));
        }
        if matches!(self.pmem, BackendKind::Dax | BackendKind::Fs | BackendKind::Emu)
            && self.pool.is_none()
        {
            return bad(format!("--pmem {} needs --pool PATH", self.pmem.name()));
        }
        if let Some(n) = self.pool_per_node {
            if !matches!(self.pmem, BackendKind::Dax | BackendKind::Fs | BackendKind::Emu) {
                return bad(format!(
                    "--pool-per-node needs member files: --pmem fs, emu or dax, not --pmem {}",
                    self.pmem.name()
                ));
            }
            if n == 0 || n as u64 > zen_pmem::header::MAX_MEMBERS {
                return bad(format!(
                    "--pool-per-node: {n} member files is outside 1..={}",
                    zen_pmem::header::MAX_MEMBERS
                ));
            }
        }
        if !self.create && !self.pmem.is_reopenable() {
            return bad(format!("a `{}` pool cannot be reopened", self.pmem.name()));
        }
        if self.cc.is_locking() && self.max_workers > crate::cc::two_phase::MAX_LOCKING_WORKERS {
            return bad(format!(
                "--cc {} supports at most {} workers",
                self.cc.name(),
                crate::cc::two_phase::MAX_LOCKING_WORKERS
            ));
        }
        if self.max_access_set == 0 {
            return bad("max access set must be at least 1".into());
        }
        if self.hstore_partitions == Some(0) {
            return bad("hstore needs at least one partition".into());
        }
        if self.recovery_threads == Some(0) {
            return bad("recovery threads must be at least 1".into());
        }
        self.numa.validate(self.max_workers)?;
        if self.numa.nodes.is_some_and(|n| n > 1) && self.engine != EngineKind::Zen {
            return bad(format!(
                "--numa-nodes applies to --engine zen (Zen+), not --engine {}",
                self.engine.name()
            ));
        }
        self.validate_adaptive()
    }

    /// The falcon knobs: a window that holds a record header, hot
    /// tracking bounded, and no variant that leaves tuples unflushed on an
    /// ADR machine (its writes would be lost once their record is reused).
    fn validate_falcon(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if self.falcon_window_bytes < 1 << 10 {
            return bad(format!(
                "--falcon-window-bytes {} is below 1 KiB",
                self.falcon_window_bytes
            ));
        }
        if self.falcon_hot_tuples > 1 << 20 {
            return bad(format!("--falcon-hot-tuples {} is above 1048576", self.falcon_hot_tuples));
        }
        if self.engine == EngineKind::Falcon
            && self.falcon_variant.needs_eadr()
            && self.domain != PersistenceDomain::Eadr
            && self.pmem != BackendKind::Dram
        {
            return bad(format!(
                "--falcon-variant {} leaves tuples unflushed, which is only correct with --persistence-domain eadr",
                self.falcon_variant.name()
            ));
        }
        Ok(())
    }

    /// α and β are shares in (0, 1]; γ is a positive tuple count.
    fn validate_adaptive(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        let share = |v: f64| v.is_finite() && v > 0.0 && v <= 1.0;
        if !share(self.adaptive_alpha) {
            return bad(format!(
                "adaptive alpha {} must be a share of the cache region in (0, 1]",
                self.adaptive_alpha
            ));
        }
        if !share(self.adaptive_beta) {
            return bad(format!(
                "adaptive beta {} must be a share of the NVM pool in (0, 1]",
                self.adaptive_beta
            ));
        }
        if self.adaptive_gamma_tuples == 0 {
            return bad("adaptive gamma must be at least 1 tuple".into());
        }
        Ok(())
    }

    /// Engine × protocol × backend × fault combinations that make sense.
    fn validate_pairing(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        let engine = self.engine.name();
        if !self.engine.supports(self.cc) {
            let allowed: Vec<&str> = self.engine.supported_cc().iter().map(|c| c.name()).collect();
            return bad(format!(
                "--engine {engine} does not run --cc {}; it supports: {}",
                self.cc.name(),
                allowed.join(", ")
            ));
        }
        if self.engine == EngineKind::Ideal && self.pmem != BackendKind::Dram {
            return bad(format!(
                "--engine ideal keeps everything in DRAM and persists nothing: use --pmem dram, not --pmem {}",
                self.pmem.name()
            ));
        }
        if self.engine == EngineKind::Ideal && !self.create {
            return bad(
                "--engine ideal has no persistence and no recovery: there is no pool to open"
                    .into(),
            );
        }
        let fault_engine = self.fault.map(Fault::engine);
        let baseline_fault_engine = self.baseline_fault.map(BaselineFault::engine);
        for (name, e) in [("fault", fault_engine), ("baseline fault", baseline_fault_engine)] {
            if let Some(e) = e
                && e != self.engine
            {
                return bad(format!("the {name} applies to --engine {}, not {engine}", e.name()));
            }
        }
        if let Some(race) = self.race_fault
            && (self.engine != EngineKind::Zen || race.cc() != self.cc)
        {
            return bad(format!(
                "the race fault applies to --engine zen --cc {}, not --engine {engine} --cc {}",
                race.cc().name(),
                self.cc.name()
            ));
        }
        if self.checkpoint_interval_ms == Some(0) {
            return bad("checkpoint interval must be at least 1 ms".into());
        }
        self.validate_falcon()?;
        if self.nvcaracal_log_bytes < 4 << 10 || self.nvcaracal_log_bytes > 1 << 34 {
            return bad(format!(
                "--nvcaracal-log-bytes {} is outside 4 KiB..=16 GiB",
                self.nvcaracal_log_bytes
            ));
        }
        crate::baseline::nvcaracal::layout::check_row_bytes(self.nvcaracal_row_bytes)?;
        if self.nvcaracal_dram_budget_bytes < 64 << 10 {
            return bad(format!(
                "--nvcaracal-dram-budget {} is below 64 KiB",
                self.nvcaracal_dram_budget_bytes
            ));
        }
        if !(1..=1 << 20).contains(&self.nvcaracal_cache_epochs) {
            return bad(format!(
                "--nvcaracal-cache-epochs {} is outside 1..=1048576",
                self.nvcaracal_cache_epochs
            ));
        }
        if self.group_commit_interval_us > 1_000_000 {
            return bad(format!(
                "group-commit interval {} us exceeds one second",
                self.group_commit_interval_us
            ));
        }
        Ok(())
    }
}
