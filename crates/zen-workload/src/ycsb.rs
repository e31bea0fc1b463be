//! YCSB: the paper mode of the Zen papers and the core workloads A–F.
//!
//! SCHEMA. One table, `usertable`: an 8-byte key and ten 100-byte fields
//! (`field0` … `field9`). Every field is self-describing so `check` can tell a
//! well-formed row from a torn or misplaced one:
//!
//! ```text
//! byte  0..8    the row's key, little-endian
//! byte  8       the field's index (0..10)
//! byte  9..16   low 7 bytes of the seed that generated the payload
//! byte 16..96   payload, a xorshift stream of (key, field, seed)
//! byte 96..100  checksum of bytes 0..96 (FNV-1a 64 over 64-bit words, folded;
//!               `check` also accepts the byte-wise FNV-1a 32 of older builds)
//! ```
//!
//! PAPER MODE (`--mix RO|RH|BA|WH`): every transaction makes 16 requests to
//! distinct keys drawn from Zipf(θ) over the key space, *unscrambled* (key 0
//! is the hottest), each a read with probability 100 / 90 / 50 / 10 % and an
//! update of one field otherwise. A transaction of reads only is declared
//! read-only.
//!
//! CORE WORKLOADS (`-w a..f`), one operation per transaction, upstream
//! proportions: A 50 % read / 50 % update; B 95 / 5; C 100 % read; D 95 % read
//! with the `latest` distribution / 5 % insert; E 95 % scan (start Zipfian,
//! length uniform in 1..=100) / 5 % insert; F 50 % read / 50 %
//! read-modify-write. Keys are Zipfian, unscrambled unless `--scramble` asks
//! for YCSB's FNV-scrambled Zipfian; the report always names the distribution.
//!
//! LONG-RUNNING TRANSACTIONS (`--long-txn scan|update`, Zen+ §5.5): worker 0
//! (thread S of the paper) runs `--long-txn-every K` normal transactions,
//! then one long transaction, and so on. A long scan reads
//! `--long-txn-tuples N` rows from key 0 as a declared read-only transaction
//! (a Zen+ snapshot); a long update rewrites the rows of the N keys `records −
//! N .. records` (each row regenerated whole from a fresh seed), and every normal transaction draws its keys from `0 .. records −
//! N`, so the two never conflict (as in §5.5: a conflicting short commit would
//! otherwise abort the long transaction). Long transactions are reported as
//! their own transaction types.
//!
//! UPDATES read the row with `get_for_update`, rewrite one field and `update`
//! the row (the engine's API writes whole rows). INSERTS take the next key
//! from a shared counter in `next`, so a retried insert reuses its key and
//! every committed insert extends a dense key range `records..`: `check`
//! verifies exactly that, plus every field of every row.

use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng;
use rand::rngs::SmallRng;
use serde::{Deserialize, Serialize};
use serde_json::json;
use zen_engine::schema::MAX_KEY;
use zen_engine::{ColumnType, Engine, TableId, TableSchema, Transaction, TxnOptions};

use crate::error::{Error, Result};
use crate::meta::{self, WorkloadSpec};
use crate::workload::{CheckReport, Violations, Workload};
use crate::zipf::{Latest, ScrambledZipf, Zipf, fnv64};

pub const TABLE: &str = "usertable";
pub const FIELDS: usize = 10;
pub const FIELD_BYTES: usize = 100;
pub const ROW_BYTES: usize = FIELDS * FIELD_BYTES;
/// Requests per transaction in paper mode.
pub const PAPER_REQUESTS: usize = 16;
/// Most requests one transaction may make.
pub const MAX_REQUESTS: usize = 64;
/// Longest scan of workload E.
pub const MAX_SCAN_ROWS: usize = 100;

/// What a long-running transaction does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LongKind {
    /// Read-only scan of the first N keys.
    Scan,
    /// Update of the last N keys (disjoint from the normal transactions').
    Update,
}

impl LongKind {
    pub fn name(self) -> &'static str {
        match self {
            LongKind::Scan => "scan",
            LongKind::Update => "update",
        }
    }
    pub fn parse(s: &str) -> Result<LongKind> {
        match s {
            "scan" => Ok(LongKind::Scan),
            "update" => Ok(LongKind::Update),
            _ => Err(Error::invalid("long transaction", s, "scan or update")),
        }
    }
}

/// Worker 0's long-running transactions (Zen+ Fig. 24–26).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LongTxn {
    pub kind: LongKind,
    /// Tuples a long transaction scans or updates.
    pub tuples: u64,
    /// Normal transactions worker 0 runs between two long ones.
    pub every: u64,
}

/// The population: stored in the pool by `load`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct YcsbSpec {
    pub records: u64,
}

/// Read ratios of the paper mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PaperMix {
    /// Read-only: 100 % reads.
    RO,
    /// Read-heavy: 90 % reads.
    RH,
    /// Balanced: 50 % reads.
    BA,
    /// Write-heavy: 10 % reads.
    WH,
}

impl PaperMix {
    pub const ALL: [PaperMix; 4] = [PaperMix::RO, PaperMix::RH, PaperMix::BA, PaperMix::WH];

    pub fn name(self) -> &'static str {
        match self {
            PaperMix::RO => "RO",
            PaperMix::RH => "RH",
            PaperMix::BA => "BA",
            PaperMix::WH => "WH",
        }
    }

    pub fn parse(s: &str) -> Result<PaperMix> {
        PaperMix::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| Error::invalid("YCSB mix", s, "one of RO, RH, BA, WH"))
    }

    pub fn read_ratio(self) -> f64 {
        match self {
            PaperMix::RO => 1.0,
            PaperMix::RH => 0.9,
            PaperMix::BA => 0.5,
            PaperMix::WH => 0.1,
        }
    }
}

/// YCSB's core workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum CoreWorkload {
    A,
    B,
    C,
    D,
    E,
    F,
}

impl CoreWorkload {
    pub const ALL: [CoreWorkload; 6] = [
        CoreWorkload::A,
        CoreWorkload::B,
        CoreWorkload::C,
        CoreWorkload::D,
        CoreWorkload::E,
        CoreWorkload::F,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CoreWorkload::A => "a",
            CoreWorkload::B => "b",
            CoreWorkload::C => "c",
            CoreWorkload::D => "d",
            CoreWorkload::E => "e",
            CoreWorkload::F => "f",
        }
    }

    pub fn parse(s: &str) -> Result<CoreWorkload> {
        CoreWorkload::ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| Error::invalid("YCSB core workload", s, "one of a, b, c, d, e, f"))
    }

    /// Upstream proportions: (operation, weight in percent).
    pub fn proportions(self) -> &'static [(OpKind, u32)] {
        match self {
            CoreWorkload::A => &[(OpKind::Read, 50), (OpKind::Update, 50)],
            CoreWorkload::B => &[(OpKind::Read, 95), (OpKind::Update, 5)],
            CoreWorkload::C => &[(OpKind::Read, 100)],
            CoreWorkload::D => &[(OpKind::Read, 95), (OpKind::Insert, 5)],
            CoreWorkload::E => &[(OpKind::Scan, 95), (OpKind::Insert, 5)],
            CoreWorkload::F => &[(OpKind::Read, 50), (OpKind::ReadModifyWrite, 50)],
        }
    }
}

/// Which transactions run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum YcsbMode {
    Paper { mix: PaperMix },
    Core(CoreWorkload),
}

/// Operation kinds; also the core workloads' transaction types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum OpKind {
    Read = 0,
    Update = 1,
    Insert = 2,
    Scan = 3,
    ReadModifyWrite = 4,
}

const CORE_TYPES: &[&str] = &["read", "update", "insert", "scan", "read_modify_write"];
const PAPER_TYPES: &[&str] = &["read_only", "read_write"];
const CORE_TYPES_LONG: &[&str] =
    &["read", "update", "insert", "scan", "read_modify_write", "long_scan", "long_update"];
const PAPER_TYPES_LONG: &[&str] = &["read_only", "read_write", "long_scan", "long_update"];

/// Everything that defines a YCSB run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct YcsbConfig {
    pub spec: YcsbSpec,
    pub mode: YcsbMode,
    /// Zipf skew of the key choice (0 = uniform).
    pub theta: f64,
    /// YCSB's FNV-scrambled Zipfian instead of the plain one.
    pub scramble: bool,
    /// Requests per transaction (16 in paper mode, 1 for core workloads).
    pub requests: usize,
    /// Long-running transactions of worker 0 (none by default).
    pub long: Option<LongTxn>,
}

impl YcsbConfig {
    /// Paper mode with the papers' 16 requests per transaction.
    pub fn paper(records: u64, mix: PaperMix, theta: f64) -> YcsbConfig {
        YcsbConfig {
            spec: YcsbSpec { records },
            mode: YcsbMode::Paper { mix },
            theta,
            scramble: false,
            requests: PAPER_REQUESTS,
            long: None,
        }
    }

    /// A core workload, one operation per transaction, YCSB's θ = 0.99.
    pub fn core(records: u64, workload: CoreWorkload) -> YcsbConfig {
        YcsbConfig {
            spec: YcsbSpec { records },
            mode: YcsbMode::Core(workload),
            theta: 0.99,
            scramble: false,
            requests: 1,
            long: None,
        }
    }

    pub fn validate(&self) -> Result<()> {
        let records = self.spec.records;
        if !(1..=1 << 40).contains(&records) {
            return Err(Error::invalid("records", records, "1..=2^40"));
        }
        if !(1..=MAX_REQUESTS).contains(&self.requests) {
            return Err(Error::invalid("requests per transaction", self.requests, "1..=64"));
        }
        if (self.requests as u64) > records {
            return Err(Error::invalid(
                "records",
                records,
                format!("at least the {} distinct keys a transaction requests", self.requests),
            ));
        }
        if let Some(long) = self.long {
            if !(1..=records).contains(&long.tuples) {
                return Err(Error::invalid("long transaction tuples", long.tuples, "1..=records"));
            }
            if long.every == 0 {
                return Err(Error::invalid("long transaction every", 0, "at least 1"));
            }
            if self.normal_records() < self.requests as u64 {
                return Err(Error::invalid(
                    "long transaction tuples",
                    long.tuples,
                    format!(
                        "at most records − {} so that normal transactions keep disjoint keys",
                        self.requests
                    ),
                ));
            }
        }
        Zipf::validate(self.normal_records(), self.theta)
    }

    /// Keys normal transactions draw from: all of them, except the range a
    /// long update owns.
    pub fn normal_records(&self) -> u64 {
        match self.long {
            Some(LongTxn { kind: LongKind::Update, tuples, .. }) => {
                self.spec.records.saturating_sub(tuples)
            }
            _ => self.spec.records,
        }
    }

    /// The key distribution in words, for banners and reports.
    pub fn key_distribution(&self) -> String {
        let zipf = if self.theta == 0.0 {
            "uniform (zipfian θ=0)".to_string()
        } else if self.scramble {
            format!("scrambled zipfian θ={} (FNV-1a hashed ranks, as YCSB)", self.theta)
        } else {
            format!("zipfian θ={} over the key space, unscrambled (key 0 hottest)", self.theta)
        };
        match self.mode {
            YcsbMode::Core(CoreWorkload::D) => {
                format!("latest θ={} for reads (newest key hottest); inserts append", self.theta)
            }
            YcsbMode::Core(CoreWorkload::E) => format!("{zipf} for scan starts; inserts append"),
            _ => zipf,
        }
    }
}

/// One operation of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Read { key: u64 },
    Update { key: u64, field: u8, seed: u64 },
    Insert { key: u64, seed: u64 },
    Scan { start: u64, rows: u8 },
    ReadModifyWrite { key: u64, field: u8, seed: u64 },
}

/// One transaction: up to [`MAX_REQUESTS`] operations, no heap allocation.
#[derive(Debug, Clone)]
pub struct YcsbRequest {
    ops: [Op; MAX_REQUESTS],
    len: usize,
    txn_type: usize,
    read_only: bool,
    /// A long-running transaction (worker 0) with its update seed.
    long: Option<(LongKind, u64)>,
}

impl YcsbRequest {
    pub fn ops(&self) -> &[Op] {
        &self.ops[..self.len]
    }
}

/// Shared key generator (the Zipf tables are immutable once built).
#[derive(Debug)]
enum KeyChooser {
    Zipf(Zipf),
    Scrambled(ScrambledZipf),
}

impl KeyChooser {
    fn sample(&self, rng: &mut SmallRng) -> u64 {
        match self {
            KeyChooser::Zipf(z) => z.sample(rng),
            KeyChooser::Scrambled(z) => z.sample(rng),
        }
    }
}

/// The YCSB workload. See the module docs.
#[derive(Debug)]
pub struct Ycsb {
    config: YcsbConfig,
    keys: KeyChooser,
    /// Next key an insert takes.
    next_insert: AtomicU64,
}

/// Per-worker state of YCSB.
pub struct YcsbLocal {
    table: TableId,
    row: Vec<u8>,
    latest: Option<Latest>,
    /// Worker 0 issues the long transactions.
    worker: usize,
    /// Transactions this worker has drawn.
    issued: u64,
}

impl Ycsb {
    pub fn new(config: YcsbConfig) -> Result<Ycsb> {
        config.validate()?;
        let records = config.normal_records();
        let keys = if config.scramble {
            KeyChooser::Scrambled(ScrambledZipf::new(records, config.theta)?)
        } else {
            KeyChooser::Zipf(Zipf::new(records, config.theta)?)
        };
        Ok(Ycsb { next_insert: AtomicU64::new(records), keys, config })
    }

    pub fn config(&self) -> &YcsbConfig {
        &self.config
    }

    fn schema() -> TableSchema {
        (0..FIELDS).fold(TableSchema::new(TABLE), |s, i| {
            s.column(format!("field{i}"), ColumnType::Bytes(FIELD_BYTES as u16))
        })
    }

    /// Draw `requests` paper-mode operations on distinct keys.
    fn next_paper(&self, mix: PaperMix, rng: &mut SmallRng, request: &mut YcsbRequest) {
        let n = self.config.spec.records;
        for i in 0..self.config.requests {
            let key = self.distinct_key(&request.ops[..i], rng, n);
            request.ops[i] = if rng.random_bool(mix.read_ratio()) {
                Op::Read { key }
            } else {
                request.read_only = false;
                Op::Update { key, field: rng.random_range(0..FIELDS as u8), seed: rng.random() }
            };
        }
        request.txn_type = usize::from(!request.read_only);
    }

    /// A key not used by `taken`: redraw a few times, then probe upwards.
    fn distinct_key(&self, taken: &[Op], rng: &mut SmallRng, n: u64) -> u64 {
        let used = |k: u64| taken.iter().any(|op| op_key(op) == Some(k));
        let mut key = self.keys.sample(rng);
        for _ in 0..32 {
            if !used(key) {
                return key;
            }
            key = self.keys.sample(rng);
        }
        // `validate` guarantees n ≥ requests, so a free key exists.
        while used(key) {
            key = (key + 1) % n;
        }
        key
    }

    fn next_core(
        &self,
        workload: CoreWorkload,
        local: &mut YcsbLocal,
        rng: &mut SmallRng,
    ) -> (Op, OpKind) {
        let mut pick = rng.random_range(0..100u32);
        let mut kind = OpKind::Read;
        for &(k, weight) in workload.proportions() {
            kind = k;
            if pick < weight {
                break;
            }
            pick -= weight;
        }
        let field = rng.random_range(0..FIELDS as u8);
        let op = match kind {
            OpKind::Read => Op::Read { key: self.read_key(local, rng) },
            OpKind::Update => Op::Update { key: self.keys.sample(rng), field, seed: rng.random() },
            OpKind::Insert => {
                let key = self.next_insert.fetch_add(1, Ordering::Relaxed);
                Op::Insert { key, seed: rng.random() }
            }
            OpKind::Scan => {
                let rows = rng.random_range(1..=MAX_SCAN_ROWS as u8);
                Op::Scan { start: self.keys.sample(rng), rows }
            }
            OpKind::ReadModifyWrite => {
                Op::ReadModifyWrite { key: self.keys.sample(rng), field, seed: rng.random() }
            }
        };
        (op, kind)
    }

    fn read_key(&self, local: &mut YcsbLocal, rng: &mut SmallRng) -> u64 {
        match &mut local.latest {
            Some(latest) => {
                let newest = self.next_insert.load(Ordering::Relaxed).saturating_sub(1);
                latest.sample(rng, newest)
            }
            None => self.keys.sample(rng),
        }
    }

    fn execute_op(
        local: &mut YcsbLocal,
        tx: &mut dyn Transaction,
        op: Op,
    ) -> zen_engine::Result<()> {
        let table = local.table;
        match op {
            Op::Read { key } => {
                tx.get(table, key, &mut local.row)?;
            }
            Op::Update { key, field, seed } | Op::ReadModifyWrite { key, field, seed } => {
                if !tx.get_for_update(table, key, &mut local.row)? {
                    return Err(zen_engine::Error::KeyNotFound { table: TABLE.into(), key });
                }
                let at = usize::from(field) * FIELD_BYTES;
                fill_field(&mut local.row[at..at + FIELD_BYTES], key, field, seed);
                tx.update(table, key, &local.row)?;
            }
            Op::Insert { key, seed } => {
                fill_row(&mut local.row, key, seed);
                tx.insert(table, key, &local.row)?;
            }
            Op::Scan { start, rows } => {
                tx.scan(table, start..=MAX_KEY, usize::from(rows), &mut |_, _| true)?;
            }
        }
        Ok(())
    }

    /// Run worker 0's long transaction.
    fn execute_long(
        &self,
        local: &mut YcsbLocal,
        tx: &mut dyn Transaction,
        kind: LongKind,
        seed: u64,
    ) -> zen_engine::Result<()> {
        let long = self.config.long.expect("long requests only when configured");
        let table = local.table;
        match kind {
            LongKind::Scan => {
                let rows = usize::try_from(long.tuples).unwrap_or(usize::MAX);
                tx.scan(table, 0..=MAX_KEY, rows, &mut |_, _| true)?;
            }
            LongKind::Update => {
                // Whole rows regenerated from the seed (every field stays
                // self-describing), so each tuple is accessed once.
                let records = self.config.spec.records;
                for key in records - long.tuples..records {
                    fill_row(&mut local.row, key, seed ^ key);
                    tx.update(table, key, &local.row)?;
                }
            }
        }
        Ok(())
    }

    fn load_part(
        &self,
        loader: &mut meta::Loader<'_>,
        table: TableId,
        keys: std::ops::Range<u64>,
    ) -> Result<()> {
        let mut row = vec![0u8; ROW_BYTES];
        for key in keys {
            fill_row(&mut row, key, fnv64(key));
            loader.insert(table, key, &row)?;
        }
        Ok(())
    }
}

fn op_key(op: &Op) -> Option<u64> {
    match *op {
        Op::Read { key }
        | Op::Update { key, .. }
        | Op::Insert { key, .. }
        | Op::ReadModifyWrite { key, .. } => Some(key),
        Op::Scan { .. } => None,
    }
}

/// FNV-1a 32-bit.
/// The field's checksum: FNV-1a 64 over the bytes as little-endian 64-bit
/// words, folded to 32 bits. Word by word, its chain of dependent
/// multiplies is 12 long where byte-wise FNV's was 96: that chain was most
/// of `fill_field`, 7.4 % of an `ideal` YCSB-A transaction.
fn field_sum(bytes: &[u8]) -> u32 {
    let h = bytes.chunks(8).fold(0xCBF2_9CE4_8422_2325u64, |h, w| {
        let mut word = [0u8; 8];
        word[..w.len()].copy_from_slice(w);
        (h ^ u64::from_le_bytes(word)).wrapping_mul(0x0000_0100_0000_01B3)
    });
    (h ^ (h >> 32)) as u32
}

/// Write field `field` of row `key` (see the module docs for the layout).
pub fn fill_field(out: &mut [u8], key: u64, field: u8, seed: u64) {
    debug_assert_eq!(out.len(), FIELD_BYTES);
    out[0..8].copy_from_slice(&key.to_le_bytes());
    out[8] = field;
    out[9..16].copy_from_slice(&seed.to_le_bytes()[..7]);
    let mut state =
        seed ^ key.rotate_left(17) ^ u64::from(field).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for chunk in out[16..96].chunks_mut(8) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
    }
    let sum = field_sum(&out[0..96]);
    out[96..100].copy_from_slice(&sum.to_le_bytes());
}

/// Write every field of row `key`.
pub fn fill_row(row: &mut [u8], key: u64, seed: u64) {
    for (i, field) in row.chunks_mut(FIELD_BYTES).enumerate() {
        fill_field(field, key, i as u8, seed.wrapping_add(i as u64));
    }
}

/// Why field `field` of row `key` is malformed, if it is.
pub fn field_problem(data: &[u8], key: u64, field: u8) -> Option<String> {
    let stored_key = u64::from_le_bytes(data[0..8].try_into().expect("8 bytes"));
    if stored_key != key {
        return Some(format!("field{field} belongs to key {stored_key}"));
    }
    if data[8] != field {
        return Some(format!("field{field} is marked as field{}", data[8]));
    }
    let stored = u32::from_le_bytes(data[96..100].try_into().expect("4 bytes"));
    // Rows written before session 19 carry byte-wise FNV-1a 32: still accepted,
    // so pools loaded by an earlier build check clean.
    (stored != field_sum(&data[0..96]) && stored != fnv32(&data[0..96]))
        .then(|| format!("field{field} checksum mismatch"))
}

/// The checksum of rows written before session 19: FNV-1a 32 of the bytes.
fn fnv32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811C_9DC5u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

impl Workload for Ycsb {
    type Request = YcsbRequest;
    type Local = YcsbLocal;

    fn name(&self) -> &'static str {
        "ycsb"
    }

    fn txn_types(&self) -> &'static [&'static str] {
        match (self.config.mode, self.config.long.is_some()) {
            (YcsbMode::Paper { .. }, false) => PAPER_TYPES,
            (YcsbMode::Core(_), false) => CORE_TYPES,
            (YcsbMode::Paper { .. }, true) => PAPER_TYPES_LONG,
            (YcsbMode::Core(_), true) => CORE_TYPES_LONG,
        }
    }

    fn tables(&self) -> Vec<TableSchema> {
        vec![Self::schema()]
    }

    fn parameters(&self) -> serde_json::Value {
        let c = &self.config;
        let (mode, mix, read_ratio, core) = match c.mode {
            YcsbMode::Paper { mix } => ("paper", Some(mix.name()), Some(mix.read_ratio()), None),
            YcsbMode::Core(w) => ("core", None, None, Some(w.name())),
        };
        json!({
            "records": c.spec.records,
            "mode": mode,
            "mix": mix,
            "read_ratio": read_ratio,
            "core_workload": core,
            "requests_per_txn": c.requests,
            "theta": c.theta,
            "scrambled": c.scramble,
            "key_distribution": c.key_distribution(),
            "long_txn": c.long,
            "fields": FIELDS,
            "field_bytes": FIELD_BYTES,
        })
    }

    fn load(&self, engine: &dyn Engine, threads: usize) -> Result<()> {
        let table = meta::create_tables(engine, &self.tables())?[0];
        meta::write_spec(engine, &WorkloadSpec::Ycsb(self.config.spec.clone()))?;
        let records = self.config.spec.records;
        let parts = (threads * 4).max(1) as u64;
        let per_part = records.div_ceil(parts);
        meta::load_parallel(engine, threads, parts as usize, &|loader, part| {
            let start = (part as u64 * per_part).min(records);
            self.load_part(loader, table, start..(start + per_part).min(records))
        })?;
        meta::finish_load(engine)?;
        self.next_insert.store(records, Ordering::Relaxed);
        Ok(())
    }

    fn prepare(&self, engine: &dyn Engine) -> Result<()> {
        let table = meta::table(engine, TABLE)?;
        let records = self.config.spec.records;
        let mut next = records;
        meta::scan_all(engine, table, records..=MAX_KEY, &mut |key, _| {
            next = next.max(key + 1);
            Ok(())
        })?;
        self.next_insert.store(next, Ordering::Relaxed);
        Ok(())
    }

    fn local(&self, engine: &dyn Engine, worker: usize, _workers: usize) -> Result<YcsbLocal> {
        let latest = match self.config.mode {
            YcsbMode::Core(CoreWorkload::D) => {
                Some(Latest::new(self.config.spec.records, self.config.theta)?)
            }
            _ => None,
        };
        Ok(YcsbLocal {
            table: meta::table(engine, TABLE)?,
            row: vec![0u8; ROW_BYTES],
            latest,
            worker,
            issued: 0,
        })
    }

    fn next(&self, local: &mut YcsbLocal, rng: &mut SmallRng) -> YcsbRequest {
        let mut request = YcsbRequest {
            ops: [Op::Read { key: 0 }; MAX_REQUESTS],
            len: 0,
            txn_type: 0,
            read_only: true,
            long: None,
        };
        self.next_into(local, rng, &mut request);
        request
    }

    /// Writes the operations it draws and the request's other fields, no
    /// more: `ops` beyond `len` keep whatever they held.
    fn next_into(&self, local: &mut YcsbLocal, rng: &mut SmallRng, request: &mut YcsbRequest) {
        request.len = self.config.requests;
        request.txn_type = 0;
        request.read_only = true;
        request.long = None;
        local.issued += 1;
        if let Some(long) = self.config.long
            && local.worker == 0
            && local.issued.is_multiple_of(long.every + 1)
        {
            let base = self.txn_types().len() - 2;
            request.len = 0;
            request.read_only = long.kind == LongKind::Scan;
            request.txn_type = base + usize::from(long.kind == LongKind::Update);
            request.long = Some((long.kind, rng.random()));
            return;
        }
        match self.config.mode {
            YcsbMode::Paper { mix } => self.next_paper(mix, rng, request),
            YcsbMode::Core(workload) => {
                for i in 0..self.config.requests {
                    let (op, kind) = self.next_core(workload, local, rng);
                    request.ops[i] = op;
                    request.read_only &= matches!(kind, OpKind::Read | OpKind::Scan);
                    request.txn_type = kind as usize;
                }
            }
        }
    }

    fn txn_type(&self, request: &YcsbRequest) -> usize {
        request.txn_type
    }

    fn options(&self, request: &YcsbRequest) -> TxnOptions {
        if request.read_only { TxnOptions::read_only() } else { TxnOptions::default() }
    }

    fn execute(
        &self,
        local: &mut YcsbLocal,
        tx: &mut dyn Transaction,
        request: &YcsbRequest,
    ) -> zen_engine::Result<()> {
        if let Some((kind, seed)) = request.long {
            return self.execute_long(local, tx, kind, seed);
        }
        let ops = request.ops();
        if ops.len() > 1 {
            // The operations' keys are known up front and independent: ask
            // for all of their rows first, so that their misses overlap.
            let mut keys = [0u64; MAX_REQUESTS];
            let mut n = 0;
            for key in ops.iter().filter_map(op_key) {
                keys[n] = key;
                n += 1;
            }
            tx.prefetch(local.table, &keys[..n]);
        }
        for op in ops {
            Self::execute_op(local, tx, *op)?;
        }
        Ok(())
    }

    /// The primary key of every point operation; scans are "complex".
    fn partition_keys(&self, request: &YcsbRequest, out: &mut Vec<u64>) {
        out.extend(request.ops().iter().filter_map(|op| match *op {
            Op::Read { key }
            | Op::Update { key, .. }
            | Op::Insert { key, .. }
            | Op::ReadModifyWrite { key, .. } => Some(key),
            Op::Scan { .. } => None,
        }));
    }

    fn partition_key_columns(&self) -> Vec<(&'static str, &'static str)> {
        vec![(TABLE, "key (primary)")]
    }

    fn check(&self, engine: &dyn Engine) -> Result<CheckReport> {
        let table = meta::table(engine, TABLE)?;
        let records = self.config.spec.records;
        let (mut expected, mut malformed, mut keys) =
            (0u64, Violations::default(), Violations::default());
        let rows = meta::scan_all(engine, table, 0..=MAX_KEY, &mut |key, data| {
            keys.require(key == expected, || {
                if key > expected {
                    format!("keys {expected}..{key} are missing")
                } else {
                    format!("key {key} appears out of order")
                }
            });
            expected = key + 1;
            for (i, field) in data.chunks(FIELD_BYTES).enumerate() {
                if let Some(problem) = field_problem(field, key, i as u8) {
                    malformed.note(|| format!("key {key}: {problem}"));
                }
            }
            Ok(())
        })?;
        let mut count = Violations::default();
        count.require(rows >= records, || format!("{rows} rows, the load wrote {records}"));
        let mut report = CheckReport::new("ycsb");
        report.record("rows", "every loaded key is present (row count >= records)", count);
        report.record("keys", "keys are dense: loaded 0..records, inserts appended after", keys);
        report.record(
            "fields",
            "every field names its key and index and has a valid checksum",
            malformed,
        );
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn a_filled_field_validates_and_a_flipped_byte_does_not() {
        let mut row = vec![0u8; ROW_BYTES];
        fill_row(&mut row, 42, 7);
        for (i, field) in row.chunks(FIELD_BYTES).enumerate() {
            assert_eq!(field_problem(field, 42, i as u8), None);
        }
        assert!(field_problem(&row[..FIELD_BYTES], 43, 0).is_some());
        row[50] ^= 1;
        assert!(field_problem(&row[..FIELD_BYTES], 42, 0).unwrap().contains("checksum"));
        // A field an earlier build wrote (byte-wise FNV-1a 32) still validates.
        row[50] ^= 1;
        let old = fnv32(&row[0..96]).to_le_bytes();
        row[96..100].copy_from_slice(&old);
        assert_eq!(field_problem(&row[..FIELD_BYTES], 42, 0), None);
    }

    fn local_of_worker(worker: usize) -> YcsbLocal {
        YcsbLocal { table: TableId(0), row: vec![0; ROW_BYTES], latest: None, worker, issued: 0 }
    }

    #[test]
    fn paper_mode_requests_have_distinct_keys_and_the_mix_ratio() {
        let ycsb = Ycsb::new(YcsbConfig::paper(100, PaperMix::BA, 0.99)).unwrap();
        let mut local = local_of_worker(1);
        let mut rng = SmallRng::seed_from_u64(1);
        let (mut reads, mut total) = (0, 0);
        for _ in 0..2000 {
            let request = ycsb.next(&mut local, &mut rng);
            let mut keys: Vec<u64> = request.ops().iter().filter_map(op_key).collect();
            assert_eq!(keys.len(), PAPER_REQUESTS);
            keys.sort_unstable();
            keys.dedup();
            assert_eq!(keys.len(), PAPER_REQUESTS, "duplicate key in {request:?}");
            reads += request.ops().iter().filter(|op| matches!(op, Op::Read { .. })).count();
            total += request.len;
        }
        let ratio = reads as f64 / total as f64;
        assert!((ratio - 0.5).abs() < 0.02, "read ratio {ratio}");
    }

    #[test]
    fn read_only_mix_declares_read_only_transactions() {
        let ycsb = Ycsb::new(YcsbConfig::paper(1000, PaperMix::RO, 0.6)).unwrap();
        let mut local = local_of_worker(1);
        let mut rng = SmallRng::seed_from_u64(2);
        let request = ycsb.next(&mut local, &mut rng);
        assert!(ycsb.options(&request).read_only);
        assert_eq!(ycsb.txn_types()[ycsb.txn_type(&request)], "read_only");
    }

    #[test]
    fn worker_zero_runs_a_long_update_every_k_and_the_others_keep_off_its_keys() {
        let mut config = YcsbConfig::paper(1000, PaperMix::WH, 0.0);
        config.long = Some(LongTxn { kind: LongKind::Update, tuples: 200, every: 3 });
        let ycsb = Ycsb::new(config).unwrap();
        let (mut s, mut other) = (local_of_worker(0), local_of_worker(1));
        let mut rng = SmallRng::seed_from_u64(4);
        let types: Vec<&str> =
            (0..8).map(|_| ycsb.txn_types()[ycsb.txn_type(&ycsb.next(&mut s, &mut rng))]).collect();
        assert_eq!(types.iter().filter(|t| **t == "long_update").count(), 2, "{types:?}");
        assert_eq!(types[3], "long_update");
        for _ in 0..500 {
            let request = ycsb.next(&mut other, &mut rng);
            assert!(request.long.is_none());
            assert!(request.ops().iter().filter_map(op_key).all(|k| k < 800));
        }
    }

    /// The driver refills one request in place (`next_into`); it must draw
    /// exactly what `next` draws, whatever the request held before (here a
    /// 16-operation request refilled with single operations, a long
    /// transaction's empty list, and scans).
    #[test]
    fn a_request_refilled_in_place_is_the_request_next_draws() {
        let mut paper = YcsbConfig::paper(1000, PaperMix::BA, 0.99);
        paper.long = Some(LongTxn { kind: LongKind::Update, tuples: 200, every: 3 });
        let configs = [
            paper,
            YcsbConfig::core(1000, CoreWorkload::A),
            YcsbConfig::core(1000, CoreWorkload::E),
        ];
        let first = Ycsb::new(YcsbConfig::paper(1000, PaperMix::WH, 0.0)).unwrap();
        let mut out = first.next(&mut local_of_worker(1), &mut SmallRng::seed_from_u64(9));
        for config in configs {
            // Two generators: inserts draw keys from a counter they share.
            let (ycsb, other) = (Ycsb::new(config.clone()).unwrap(), Ycsb::new(config).unwrap());
            let (mut a, mut b) = (local_of_worker(0), local_of_worker(0));
            let (mut ra, mut rb) = (SmallRng::seed_from_u64(5), SmallRng::seed_from_u64(5));
            for _ in 0..300 {
                let want = ycsb.next(&mut a, &mut ra);
                other.next_into(&mut b, &mut rb, &mut out);
                assert_eq!(format!("{:?}", out.ops()), format!("{:?}", want.ops()));
                assert_eq!(
                    (out.txn_type, out.read_only, format!("{:?}", out.long)),
                    (want.txn_type, want.read_only, format!("{:?}", want.long))
                );
            }
            assert_eq!(a.issued, b.issued);
        }
    }

    #[test]
    fn long_transactions_are_validated() {
        let long = |kind, tuples, every| {
            let mut c = YcsbConfig::paper(100, PaperMix::RH, 0.6);
            c.long = Some(LongTxn { kind, tuples, every });
            c.validate().unwrap_err().to_string()
        };
        assert!(long(LongKind::Scan, 0, 5).contains("tuples"));
        assert!(long(LongKind::Scan, 101, 5).contains("tuples"));
        assert!(long(LongKind::Update, 90, 5).contains("disjoint"));
        assert!(long(LongKind::Scan, 10, 0).contains("every"));
        assert!(LongKind::parse("delete").unwrap_err().to_string().contains("scan or update"));
    }

    #[test]
    fn core_workload_proportions_sum_to_one_hundred() {
        for w in CoreWorkload::ALL {
            assert_eq!(w.proportions().iter().map(|p| p.1).sum::<u32>(), 100, "{w:?}");
        }
    }

    #[test]
    fn workload_d_inserts_take_consecutive_keys() {
        let ycsb = Ycsb::new(YcsbConfig::core(1000, CoreWorkload::D)).unwrap();
        let mut local =
            YcsbLocal { latest: Some(Latest::new(1000, 0.99).unwrap()), ..local_of_worker(1) };
        let mut rng = SmallRng::seed_from_u64(3);
        let inserts: Vec<u64> = (0..2000)
            .map(|_| ycsb.next(&mut local, &mut rng).ops()[0])
            .filter_map(|op| if let Op::Insert { key, .. } = op { Some(key) } else { None })
            .collect();
        assert!(!inserts.is_empty());
        assert!(inserts.iter().enumerate().all(|(i, k)| *k == 1000 + i as u64));
    }

    #[test]
    fn bad_parameters_are_refused_with_what_is_allowed() {
        let err = PaperMix::parse("XX").unwrap_err().to_string();
        assert!(err.contains("RO, RH, BA, WH"), "{err}");
        let err = CoreWorkload::parse("g").unwrap_err().to_string();
        assert!(err.contains("a, b, c, d, e, f"), "{err}");
        assert!(Ycsb::new(YcsbConfig::paper(8, PaperMix::RH, 0.5)).is_err());
        assert!(Ycsb::new(YcsbConfig::paper(100, PaperMix::RH, -1.0)).is_err());
    }

    #[test]
    fn the_key_distribution_is_named() {
        let mut c = YcsbConfig::paper(100, PaperMix::RH, 0.99);
        assert!(c.key_distribution().contains("unscrambled"));
        c.scramble = true;
        assert!(c.key_distribution().contains("scrambled zipfian"));
        assert!(YcsbConfig::core(100, CoreWorkload::D).key_distribution().starts_with("latest"));
    }
}
