//! Crash campaigns of whole workloads on the crash simulator (`zen crash-test`,
//! VERIFICATION.md §1–2).
//!
//! What: [`run_campaign`] loads a small population (`bank`, `ycsb`,
//! `smallbank` or `tpcc`) into a Zen engine on [`SimBackend`] (64 KiB pages),
//! records 1–4 workers running the workload, then crashes the recorded run
//! just before fences (at most `crash_points` of them), builds up to
//! `images_per_point` crash images at each, recovers every image and applies
//! the post-crash oracle:
//!
//! 1. recovery returns `Ok` and does not panic;
//! 2. structure: `Engine::check_invariants`;
//! 3. durability and order: every writing transaction inserted a receipt in
//!    the same transaction (`crash_receipts.rs`); each worker's receipts are
//!    dense (`0..n`: its transactions survive as a prefix), match what the
//!    worker committed, and include every transaction whose `Marker::Ack` the
//!    engine recorded before the crash point;
//! 4. atomicity and the workload's own conditions: `bank` recomputes every
//!    balance from the surviving receipts; `ycsb`, `smallbank` and `tpcc` run
//!    their consistency checks (`Workload::check`: SmallBank's money
//!    conservation through the ledger, TPC-C's conditions 1–12); `tpcc` also
//!    requires Σ(D_NEXT_O_ID − initial) = the surviving New-Order receipts;
//! 5. liveness: two more workload transactions run on the recovered engine,
//!    their Tx-CTS above every surviving one, and the invariants hold again;
//! 6. idempotence: on the first image of every checked crash point, the
//!    recovery itself is crashed at (up to [`NESTED_POINTS`] of) its own
//!    fences, [`NESTED_IMAGES`] images each, recursively to `nested_depth`;
//!    each of those recoveries must give the same logical state (a hash of
//!    every row of every table) as the undisturbed one.
//!
//! The recorded run must also be free of persistence-lint errors (an ack
//! with pending stores, pending stores at a clean shutdown, a torn commit
//! word). The campaign stops at the first violation.
//!
//! Crash points: when the trace has more than `crash_points`, the end of the
//! trace is always checked, then the first crash point of every *fence site*
//! not yet covered, then points spread evenly over the trace. A **fence
//! site** is the signature of a fence: (stores, flushes, markers) that the
//! fencing thread issued since its own previous fence. "Fence sites hit X of
//! Y" counts the distinct signatures among the checked points (X) and in the
//! whole trace (Y).
//!
//! Seeds: one seed drives each worker's request stream, the image choice at
//! every point and the nested crashes. With one worker a seed replays the
//! same requests and, in practice, the same crash points (the order of some
//! engine-internal work, e.g. over hash maps, can still differ); with more,
//! the interleaving of the workers (and so the trace) differs from run to
//! run. The saved image (`save_failing`) is the exact reproducer.
//!
//! Engines: the Zen engine with every protocol of `CcKind::ALL`, chosen by
//! one `match` in [`sim_engine`].

use std::collections::{BTreeSet, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde::Serialize;
use zen_engine::cc::{self, Protocol};
use zen_engine::schema::MAX_KEY;
use zen_engine::{
    AbortReason, CcKind, Durability, Engine, EngineConfig, EngineKind, Fault, TableId, ZenEngine,
};
use zen_pmem::sim::{CrashMode, EventKind, SimBackend, Trace};
use zen_pmem::{Marker, PersistenceDomain, Pool, PoolOptions};

use crate::crash_bank::{Bank, INITIAL};
use crate::crash_receipts::{
    RECEIPT_TABLE, Receipt, read_receipts, receipt_counts, receipt_schema, write_receipt,
};
use crate::driver::worker_seed;
use crate::meta;
use crate::smallbank::{SmallBank, SmallBankConfig};
use crate::tpcc::{Tpcc, TpccConfig, TpccSpec, schema as tpcc_schema};
use crate::workload::Workload;
use crate::ycsb::{PaperMix, Ycsb, YcsbConfig};

/// Page size of the simulated pools.
pub const PAGE_BYTES: u64 = 64 << 10;
/// Crash points per recovery that nested crashes visit.
pub const NESTED_POINTS: usize = 4;
/// Images per nested crash point.
pub const NESTED_IMAGES: u64 = 2;
/// Workload transactions run on every recovered image (liveness).
pub const LIVENESS_TXNS: u64 = 2;
/// Most workers of a campaign.
pub const MAX_THREADS: usize = 4;

/// The workloads a campaign runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CrashWorkload {
    Bank,
    Ycsb,
    SmallBank,
    Tpcc,
}

impl CrashWorkload {
    pub const ALL: [CrashWorkload; 4] =
        [CrashWorkload::Bank, CrashWorkload::Ycsb, CrashWorkload::SmallBank, CrashWorkload::Tpcc];

    pub fn name(self) -> &'static str {
        match self {
            CrashWorkload::Bank => "bank",
            CrashWorkload::Ycsb => "ycsb",
            CrashWorkload::SmallBank => "smallbank",
            CrashWorkload::Tpcc => "tpcc",
        }
    }

    pub fn parse(s: &str) -> Option<CrashWorkload> {
        CrashWorkload::ALL.into_iter().find(|w| w.name() == s)
    }

    /// The population a campaign loads, in words.
    pub fn population(self) -> &'static str {
        match self {
            CrashWorkload::Bank => "8 accounts; transfers of 1..=100 between two of them",
            CrashWorkload::Ycsb => {
                "64 records; paper mode WH (90 % updates), 4 requests per transaction, θ = 0.6"
            }
            CrashWorkload::SmallBank => "64 customers, 8 hot (90 %); the standard mix",
            CrashWorkload::Tpcc => {
                "1 warehouse, 20 items, 10 customers and 10 orders per district; the standard mix"
            }
        }
    }
}

/// The name of a fault as `--inject-fault` takes it (`no-fence-before-lp`).
pub fn fault_name(fault: Fault) -> String {
    serde_json::to_value(fault)
        .ok()
        .and_then(|v| v.as_str().map(|s| s.replace('_', "-")))
        .unwrap_or_else(|| format!("{fault:?}"))
}

/// The fault named `name` (`no-fence-before-lp` or `no_fence_before_lp`).
pub fn parse_fault(name: &str) -> Option<Fault> {
    let name = name.replace('_', "-");
    Fault::ALL.into_iter().find(|f| fault_name(*f) == name)
}

/// Everything that defines a campaign.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignConfig {
    pub workload: CrashWorkload,
    pub engine: EngineKind,
    pub cc: CcKind,
    pub mode: CrashMode,
    /// Most crash points checked (sampled as the module docs say).
    pub crash_points: u64,
    /// Most images per crash point (exhaustive when the point has no more).
    pub images_per_point: u64,
    /// Levels of crashes during recovery (0 = none).
    pub nested_depth: u32,
    pub seed: u64,
    /// Workers of the recorded run (1..=4).
    pub threads: usize,
    /// Requests each worker runs in the recorded run.
    pub txns: u64,
    /// An injected bug (the bug-injection suite), `None` for real campaigns.
    pub fault: Option<Fault>,
    /// Directory the failing image is written to.
    pub save_failing: Option<PathBuf>,
}

impl Default for CampaignConfig {
    fn default() -> Self {
        CampaignConfig {
            workload: CrashWorkload::Bank,
            engine: EngineKind::Zen,
            cc: CcKind::Silo,
            mode: CrashMode::Strict,
            crash_points: 200,
            images_per_point: 16,
            nested_depth: 1,
            seed: 0x5EED,
            threads: 2,
            txns: 8,
            fault: None,
            save_failing: None,
        }
    }
}

impl CampaignConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.engine != EngineKind::Zen {
            return Err(format!(
                "--engine {}: crash campaigns run the zen engine only so far",
                self.engine.name()
            ));
        }
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return Err(format!("--threads {}: 1..={MAX_THREADS}", self.threads));
        }
        if self.txns == 0 || self.txns > 100_000 {
            return Err(format!("--txns {}: 1..=100000", self.txns));
        }
        if self.crash_points == 0 {
            return Err("--crash-points 0: at least 1".into());
        }
        if self.images_per_point == 0 {
            return Err("--images-per-point 0: at least 1".into());
        }
        if self.nested_depth > 4 {
            return Err(format!("--nested-depth {}: 0..=4", self.nested_depth));
        }
        Ok(())
    }

    /// The flags that replay this campaign (after `zen crash-test`).
    pub fn replay_args(&self) -> String {
        let mut s = format!(
            "{} --cc {} --mode {} --crash-points {} --images-per-point {} --nested-depth {} --seed {} --threads {} --txns {}",
            self.workload.name(),
            self.cc.name(),
            self.mode.name(),
            self.crash_points,
            self.images_per_point,
            self.nested_depth,
            self.seed,
            self.threads,
            self.txns
        );
        if let Some(f) = self.fault {
            s.push_str(&format!(" --inject-fault {}", fault_name(f)));
        }
        s
    }

    fn domain(&self) -> PersistenceDomain {
        match self.mode {
            CrashMode::Eadr => PersistenceDomain::Eadr,
            CrashMode::Strict | CrashMode::Paranoid => PersistenceDomain::Adr,
        }
    }
}

/// Distinct fence sites among the checked crash points, and in the trace.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct FenceSites {
    pub hit: u64,
    pub total: u64,
}

/// Images checked.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ImageCounts {
    pub total: u64,
    /// Images of points whose images were all enumerated.
    pub exhaustive: u64,
    /// Images of points sampled within the budget.
    pub sampled: u64,
}

/// Crashes during recovery.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct NestedCounts {
    pub depth: u32,
    /// Recoveries of images taken inside a recovery.
    pub recoveries: u64,
    /// Crash points of recoveries that were crashed.
    pub points: u64,
}

/// The first violation of a campaign.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    pub message: String,
    /// The crash point, `None` for a failure of the recorded run itself.
    pub crash_point: Option<String>,
    /// The image, outermost first for nested crashes.
    pub images: Vec<String>,
    /// Where the failing image was written (`--save-failing`).
    pub saved_image: Option<String>,
}

/// What a campaign covered and found.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignReport {
    pub config: CampaignConfig,
    pub population: &'static str,
    pub pool_bytes: u64,
    /// Writing transactions the recorded run committed.
    pub committed: u64,
    /// Of those, acknowledged (`Marker::Ack`) by the end of the trace.
    pub acked: u64,
    pub read_only: u64,
    pub user_aborts: u64,
    pub retries: u64,
    pub fences: u64,
    pub crash_points_total: u64,
    pub crash_points_checked: u64,
    pub exhaustive_points: u64,
    pub fence_sites: FenceSites,
    pub images: ImageCounts,
    pub nested: NestedCounts,
    pub failures: u64,
    pub failure: Option<Failure>,
    /// Persistence-lint warnings of the recorded run (errors are failures).
    pub lint_warnings: u64,
    pub record_s: f64,
    pub check_s: f64,
}

impl CampaignReport {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }

    /// The human-readable summary `zen crash-test` prints.
    pub fn render_text(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "crash test: {} on {} / {} ({} images), seed {}\n",
            c.workload.name(),
            c.engine.name(),
            c.cc.name(),
            c.mode.name(),
            c.seed
        );
        out.push_str(&format!("  population        {}\n", self.population));
        out.push_str(&format!(
            "  recorded run      {} workers × {} requests: {} committed ({} acked), {} read-only, {} user aborts, {} retries; {} fences\n",
            c.threads,
            c.txns,
            self.committed,
            self.acked,
            self.read_only,
            self.user_aborts,
            self.retries,
            self.fences
        ));
        if let Some(f) = c.fault {
            out.push_str(&format!("  injected fault    {}\n", fault_name(f)));
        }
        out.push_str(&format!(
            "  crash points      {} checked of {} ({} exhaustive)\n",
            self.crash_points_checked, self.crash_points_total, self.exhaustive_points
        ));
        out.push_str(&format!(
            "  fence sites hit   {} of {}\n",
            self.fence_sites.hit, self.fence_sites.total
        ));
        out.push_str(&format!(
            "  images            {} ({} exhaustive, {} sampled; at most {} per point)\n",
            self.images.total, self.images.exhaustive, self.images.sampled, c.images_per_point
        ));
        out.push_str(&format!(
            "  nested recoveries {} at {} crash points of recoveries, depth {}\n",
            self.nested.recoveries, self.nested.points, self.nested.depth
        ));
        out.push_str(&format!("  failures          {}\n", self.failures));
        out.push_str(&format!(
            "  time              record {:.2} s, check {:.2} s\n",
            self.record_s, self.check_s
        ));
        if let Some(f) = &self.failure {
            out.push_str(&format!("VIOLATION: {}\n", f.message));
            if let Some(p) = &f.crash_point {
                out.push_str(&format!("  at {p}\n"));
            }
            for (depth, image) in f.images.iter().enumerate() {
                out.push_str(&format!("  crash {depth}: {image}\n"));
            }
            if let Some(s) = &f.saved_image {
                out.push_str(&format!(
                    "  image saved to {s} (a pool file: `zen recover --pool {s}` recovers it)\n"
                ));
            }
        }
        out
    }
}

/// Progress of a campaign, for a progress line.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub points_done: u64,
    pub points_total: u64,
    pub images: u64,
}

/// Run a campaign. `Err` is an operating error (bad flags, a population that
/// does not fit); a violation is `Ok` with `failures > 0`.
pub fn run_campaign(
    cfg: &CampaignConfig,
    progress: &mut dyn FnMut(Progress),
) -> Result<CampaignReport, String> {
    cfg.validate()?;
    let engine = sim_engine(cfg.engine, cfg.cc)?;
    let err = |e: crate::Error| e.to_string();
    match cfg.workload {
        CrashWorkload::Bank => Campaign::new(cfg, engine, Bank::new(8).map_err(err)?).run(progress),
        CrashWorkload::Ycsb => {
            let mut y = YcsbConfig::paper(64, PaperMix::WH, 0.6);
            y.requests = 4;
            Campaign::new(cfg, engine, Ycsb::new(y).map_err(err)?).run(progress)
        }
        CrashWorkload::SmallBank => {
            let mut s = SmallBankConfig::new(64);
            s.hotspot_accounts = 8;
            Campaign::new(cfg, engine, SmallBank::new(s).map_err(err)?).run(progress)
        }
        CrashWorkload::Tpcc => {
            let spec = TpccSpec {
                warehouses: 1,
                items: 20,
                customers_per_district: 10,
                orders_per_district: 10,
            };
            let tpcc = Tpcc::new(TpccConfig { spec, load_seed: cfg.seed }).map_err(err)?;
            Campaign::new(cfg, engine, tpcc).run(progress)
        }
    }
}

// ---------------------------------------------------------------------------
// Engines on the simulator.

/// An engine opened on a simulated pool, behind a trait object so the
/// campaign is generic over the workload only.
trait SimOpened: Send + Sync {
    fn engine(&self) -> &dyn Engine;
    fn backend(&self) -> &SimBackend;
    /// Drop the engine and hand back its pool (`None` if still referenced).
    fn release(self: Box<Self>) -> Option<Pool<SimBackend>>;
}

impl<P: Protocol> SimOpened for ZenEngine<SimBackend, P> {
    fn engine(&self) -> &dyn Engine {
        self
    }
    fn backend(&self) -> &SimBackend {
        self.shared().pool.backend()
    }
    fn release(self: Box<Self>) -> Option<Pool<SimBackend>> {
        self.into_pool()
    }
}

type OpenFn = fn(Pool<SimBackend>, &EngineConfig) -> zen_engine::Result<Box<dyn SimOpened>>;

/// How to create and recover one engine × protocol on the simulator.
#[derive(Clone, Copy)]
struct SimEngine {
    create: OpenFn,
    open: OpenFn,
}

impl SimEngine {
    fn zen<P: Protocol>() -> SimEngine {
        SimEngine {
            create: |pool, c| Ok(Box::new(ZenEngine::<SimBackend, P>::create_on(pool, c)?)),
            open: |pool, c| Ok(Box::new(ZenEngine::<SimBackend, P>::open_on(pool, c)?)),
        }
    }
}

/// The engine × protocol a campaign runs: one `match` (a new protocol or
/// engine is one more line here).
fn sim_engine(engine: EngineKind, cc: CcKind) -> Result<SimEngine, String> {
    if engine != EngineKind::Zen {
        return Err(format!("crash campaigns do not run --engine {} yet", engine.name()));
    }
    Ok(match cc {
        CcKind::NoWait => SimEngine::zen::<cc::NoWait>(),
        CcKind::WaitDie => SimEngine::zen::<cc::WaitDie>(),
        CcKind::DlDetect => SimEngine::zen::<cc::DlDetect>(),
        CcKind::Occ => SimEngine::zen::<cc::Occ>(),
        CcKind::Silo => SimEngine::zen::<cc::Silo>(),
        CcKind::Tictoc => SimEngine::zen::<cc::TicToc>(),
        CcKind::Mvcc => SimEngine::zen::<cc::Mvcc>(),
        CcKind::Hekaton => SimEngine::zen::<cc::Hekaton>(),
        CcKind::Cicada => SimEngine::zen::<cc::Cicada>(),
        CcKind::Hstore => SimEngine::zen::<cc::HStore>(),
    })
}

// ---------------------------------------------------------------------------
// Workload-specific parts of the oracle.

/// A workload a campaign can run: what its receipts carry and what it checks.
trait Subject: Workload {
    /// Words stored in the receipt of `request`.
    fn payload(&self, _request: &Self::Request) -> [i64; 3] {
        [0; 3]
    }
    /// The workload's conditions on a recovered engine, given the receipts
    /// that survived (which are exactly the transactions that survived).
    fn verify(&self, engine: &dyn Engine, _receipts: &[Receipt]) -> Result<(), String> {
        workload_check(self, engine)
    }
}

fn workload_check<W: Workload + ?Sized>(w: &W, engine: &dyn Engine) -> Result<(), String> {
    let report = w.check(engine).map_err(|e| format!("{} check: {e}", w.name()))?;
    if report.passed() {
        return Ok(());
    }
    let failed: Vec<String> = report
        .failures()
        .map(|c| match &c.outcome {
            crate::Outcome::Failed { violations, examples } => {
                format!("{} ({}): {violations} violations, e.g. {examples:?}", c.id, c.description)
            }
            _ => c.id.clone(),
        })
        .collect();
    Err(format!("{} consistency: {}", w.name(), failed.join("; ")))
}

impl Subject for Ycsb {}
impl Subject for SmallBank {}

impl Subject for Tpcc {
    fn verify(&self, engine: &dyn Engine, receipts: &[Receipt]) -> Result<(), String> {
        workload_check(self, engine)?;
        let district =
            meta::table(engine, tpcc_schema::district::NAME).map_err(|e| e.to_string())?;
        let initial = self.spec().orders_per_district as i64 + 1;
        let mut orders = 0i64;
        meta::scan_all(engine, district, 0..=MAX_KEY, &mut |_, r| {
            orders +=
                zen_engine::schema::row::get_i64(r, tpcc_schema::district::NEXT_O_ID) - initial;
            Ok(())
        })
        .map_err(|e| e.to_string())?;
        let new_orders = receipts.iter().filter(|r| r.txn_type == 0).count() as i64;
        if orders != new_orders {
            return Err(format!(
                "Σ(D_NEXT_O_ID − initial) = {orders}, but {new_orders} New-Order transactions survived"
            ));
        }
        Ok(())
    }
}

impl Subject for Bank {
    fn payload(&self, t: &crate::crash_bank::Transfer) -> [i64; 3] {
        [t.from as i64, t.to as i64, t.amount]
    }

    fn verify(&self, engine: &dyn Engine, receipts: &[Receipt]) -> Result<(), String> {
        let mut expect = vec![INITIAL; self.accounts() as usize];
        for r in receipts {
            let [from, to, amount] = r.payload;
            expect[from as usize] -= amount;
            expect[to as usize] += amount;
        }
        let got = self.balances(engine).map_err(|e| e.to_string())?;
        for (k, (g, e)) in got.iter().zip(&expect).enumerate() {
            if *g != Some(*e) {
                return Err(format!(
                    "account {k}: balance {g:?}, but the {} surviving transfers say {e}",
                    receipts.len()
                ));
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// The campaign.

/// What the recorded run committed: per worker, per seq, (cts, type, payload).
#[derive(Default)]
struct Recorded {
    by_cts: HashMap<u64, (usize, u64)>,
    per_worker: Vec<Vec<(u64, u64, [i64; 3])>>,
    read_only: u64,
    user_aborts: u64,
    retries: u64,
}

struct Campaign<'c, S: Subject> {
    cfg: &'c CampaignConfig,
    engine: SimEngine,
    subject: S,
    pool_bytes: u64,
    domain: PersistenceDomain,
}

/// A violation found while checking one image.
type Violation = String;

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".into()
    }
}

/// Indices of `k` points spread evenly over `0..n` (all when `n <= k`).
fn spread(n: u64, k: u64) -> BTreeSet<u64> {
    if n <= k {
        return (0..n).collect();
    }
    (0..k).map(|i| if k == 1 { n - 1 } else { i * (n - 1) / (k - 1) }).collect()
}

/// Per fence of the trace (in order), its site signature (module docs).
fn fence_signatures(trace: &Trace) -> Vec<(u32, u32, u32)> {
    let mut since: HashMap<u32, (u32, u32, u32)> = HashMap::new();
    let mut out = Vec::new();
    for e in trace.events() {
        let s = since.entry(e.thread).or_default();
        match &e.kind {
            EventKind::Store { .. } => s.0 += 1,
            EventKind::Flush { .. } => s.1 += 1,
            EventKind::Marker(m) => {
                s.2 += match m {
                    Marker::Begin { .. } => 1,
                    Marker::Ack { .. } => 1 << 8,
                    Marker::CleanShutdown => 1 << 16,
                    Marker::Note { .. } => 1 << 24,
                }
            }
            EventKind::Fence => out.push(std::mem::take(s)),
        }
    }
    out
}

/// Which crash points to check (module docs): `None` = every one.
fn select_points(signatures: &[(u32, u32, u32)], limit: u64) -> BTreeSet<u64> {
    let total = signatures.len() as u64 + 1;
    if total <= limit {
        return (0..total).collect();
    }
    let mut chosen = BTreeSet::from([total - 1]);
    let mut seen = BTreeSet::new();
    for (i, sig) in signatures.iter().enumerate() {
        if chosen.len() as u64 >= limit {
            break;
        }
        if seen.insert(*sig) {
            chosen.insert(i as u64);
        }
    }
    let room = limit - chosen.len() as u64;
    let mut extra = spread(total, room + chosen.len() as u64).into_iter();
    while (chosen.len() as u64) < limit {
        match extra.next() {
            Some(i) => {
                chosen.insert(i);
            }
            None => break,
        }
    }
    // Top up with the first unchosen points if spreading collided.
    let mut i = 0;
    while (chosen.len() as u64) < limit && i < total {
        chosen.insert(i);
        i += 1;
    }
    chosen
}

/// FNV-1a over every row of every table: the logical state.
fn state_hash(engine: &dyn Engine) -> Result<u64, String> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for (i, t) in engine.status().tables.iter().enumerate() {
        let id = engine.table_id(&t.name).map_err(|e| e.to_string())?;
        eat(&(i as u64).to_le_bytes());
        meta::scan_all(engine, id, 0..=MAX_KEY, &mut |key, row| {
            eat(&key.to_le_bytes());
            eat(row);
            Ok(())
        })
        .map_err(|e| format!("reading table {}: {e}", t.name))?;
    }
    Ok(h)
}

impl<'c, S: Subject> Campaign<'c, S> {
    fn new(cfg: &'c CampaignConfig, engine: SimEngine, subject: S) -> Self {
        let tables = subject.tables().len() as u64 + 3;
        let pages = 48 + tables * (cfg.threads as u64 + 3);
        let pages = if cfg.workload == CrashWorkload::Tpcc { pages + 64 } else { pages };
        Campaign { cfg, engine, subject, pool_bytes: pages * PAGE_BYTES, domain: cfg.domain() }
    }

    fn config(&self, fault: Option<Fault>) -> EngineConfig {
        EngineConfig {
            engine: EngineKind::Zen,
            cc: self.cfg.cc,
            pmem: zen_pmem::BackendKind::Sim,
            page_size_bytes: PAGE_BYTES,
            pool_size_bytes: self.pool_bytes,
            // Loader / recorded workers / liveness and check workers.
            max_workers: self.cfg.threads + 3,
            cache_size_bytes: 8 << 20,
            durability: Durability::Immediate,
            recovery_threads: Some(1),
            domain: self.domain,
            fault,
            ..EngineConfig::default()
        }
    }

    fn recover(&self, bytes: Vec<u8>) -> Result<Box<dyn SimOpened>, Violation> {
        let backend = SimBackend::try_from_image(bytes, self.domain)
            .map_err(|e| format!("mapping the image: {e}"))?;
        let pool = Pool::open_on(backend).map_err(|e| format!("pool open: {e}"))?;
        (self.engine.open)(pool, &self.config(self.cfg.fault)).map_err(|e| format!("recovery: {e}"))
    }

    fn finish(opened: Box<dyn SimOpened>) {
        if let Some(pool) = opened.release() {
            pool.abandon();
        }
    }

    /// Load the population, recover it, and record the workers' run.
    fn record(&self) -> Result<(Trace, Recorded), String> {
        let sim = SimBackend::new(self.pool_bytes, self.domain);
        let pool = Pool::format(sim, &PoolOptions { page_size: PAGE_BYTES, features: 0 })
            .map_err(|e| format!("formatting the simulated pool: {e}"))?;
        let loaded = (self.engine.create)(pool, &self.config(None)).map_err(|e| e.to_string())?;
        self.subject.load(loaded.engine(), 1).map_err(|e| format!("loading: {e}"))?;
        loaded.engine().create_table(&receipt_schema()).map_err(|e| e.to_string())?;
        let pool = loaded.release().ok_or("the loaded engine is still referenced")?;
        let image = pool.backend().visible_image();
        pool.abandon();
        let engine = self.recover(image).map_err(|e| format!("recovering the loaded pool: {e}"))?;
        let e = engine.engine();
        self.subject.prepare(e).map_err(|x| x.to_string())?;
        {
            let mut w = e.worker().map_err(|x| x.to_string())?;
            w.sync().map_err(|x| x.to_string())?;
            w.sync().map_err(|x| x.to_string())?;
        }
        let receipts = e.table_id(RECEIPT_TABLE).map_err(|x| x.to_string())?;
        let threads = self.cfg.threads;
        let mut locals = Vec::new();
        let mut workers = Vec::new();
        for i in 0..threads {
            locals.push(self.subject.local(e, i, threads).map_err(|x| x.to_string())?);
            workers.push(e.worker().map_err(|x| x.to_string())?);
        }
        engine.backend().reset_trace();
        let results: Vec<Result<Recorded, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = workers
                .into_iter()
                .zip(locals)
                .enumerate()
                .map(|(i, (mut w, mut local))| {
                    scope.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(worker_seed(self.cfg.seed, i));
                        let mut rec = Recorded::default();
                        let mut mine = Vec::new();
                        for _ in 0..self.cfg.txns {
                            self.run_one(
                                w.as_mut(),
                                &mut local,
                                &mut rng,
                                receipts,
                                i,
                                &mut mine,
                                &mut rec,
                            )?;
                        }
                        rec.per_worker = vec![mine];
                        Ok(rec)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| Err(format!("worker {}", panic_message(p)))))
                .collect()
        });
        let mut recorded = Recorded::default();
        for (i, r) in results.into_iter().enumerate() {
            let r = r.map_err(|e| format!("recorded run, worker {i}: {e}"))?;
            recorded.read_only += r.read_only;
            recorded.user_aborts += r.user_aborts;
            recorded.retries += r.retries;
            let mine = r.per_worker.into_iter().next().unwrap_or_default();
            for (seq, (cts, _, _)) in mine.iter().enumerate() {
                recorded.by_cts.insert(*cts, (i, seq as u64));
            }
            recorded.per_worker.push(mine);
        }
        let pool = engine.release().ok_or("the recorded engine is still referenced")?;
        let trace = pool.backend().trace();
        pool.abandon();
        Ok((trace, recorded))
    }

    /// One request with retries; a commit appends (cts, type, payload) to `mine`.
    #[allow(clippy::too_many_arguments)]
    fn run_one(
        &self,
        w: &mut dyn zen_engine::EngineWorker,
        local: &mut S::Local,
        rng: &mut SmallRng,
        receipts: TableId,
        worker: usize,
        mine: &mut Vec<(u64, u64, [i64; 3])>,
        rec: &mut Recorded,
    ) -> Result<(), String> {
        let s = &self.subject;
        let request = s.next(local, rng);
        let mut opts = s.options(&request);
        let writes = !opts.read_only;
        if writes {
            opts.durability = Some(Durability::Immediate);
        }
        let txn_type = s.txn_type(&request);
        let payload = s.payload(&request);
        let seq = mine.len() as u64;
        for attempt in 1..=zen_engine::api::MAX_ATTEMPTS {
            let result = w.execute(&opts, &mut |tx| {
                s.execute(local, tx, &request)?;
                if writes {
                    write_receipt(tx, receipts, worker, seq, txn_type, payload)?;
                }
                Ok(())
            });
            match result {
                Ok(info) => {
                    if writes {
                        mine.push((info.cts, txn_type as u64, payload));
                    } else {
                        rec.read_only += 1;
                    }
                    return Ok(());
                }
                Err(e) => match e.abort_reason() {
                    Some(AbortReason::User) => {
                        rec.user_aborts += 1;
                        return Ok(());
                    }
                    Some(r) if r.is_retryable() && attempt < zen_engine::api::MAX_ATTEMPTS => {
                        rec.retries += 1;
                        for _ in 0..(1u32 << attempt.min(10)) {
                            std::hint::spin_loop();
                        }
                        std::thread::yield_now();
                    }
                    _ => {
                        return Err(format!(
                            "transaction `{}` failed: {e}",
                            s.txn_types()[txn_type]
                        ));
                    }
                },
            }
        }
        unreachable!("the last attempt returns")
    }

    /// The oracle on one crash image (module docs, 1–5). Returns the logical
    /// state and the recovery's own trace when `nested` is asked for.
    fn check_image(
        &self,
        bytes: &[u8],
        acked: &[u64],
        rec: &Recorded,
        nested: bool,
    ) -> Result<Option<(u64, Trace)>, Violation> {
        let opened = self.recover(bytes.to_vec())?;
        let result = self.oracle(opened.as_ref(), acked, rec, nested);
        Self::finish(opened);
        result
    }

    fn oracle(
        &self,
        opened: &dyn SimOpened,
        acked: &[u64],
        rec: &Recorded,
        nested: bool,
    ) -> Result<Option<(u64, Trace)>, Violation> {
        let recovery_trace = nested.then(|| opened.backend().trace());
        let e = opened.engine();
        e.check_invariants().map_err(|x| format!("structure: {x}"))?;
        let receipts = read_receipts(e).map_err(|x| format!("reading receipts: {x}"))?;
        let counts = receipt_counts(&receipts)?;
        for (&w, &n) in &counts {
            let committed = rec.per_worker.get(w).map_or(0, Vec::len) as u64;
            if n > committed {
                return Err(format!(
                    "worker {w}: {n} receipts survived, but it committed only {committed}"
                ));
            }
        }
        let mut max_cts = 0;
        for r in &receipts {
            let (cts, txn_type, payload) = rec.per_worker[r.worker][r.seq as usize];
            if (r.txn_type, r.payload) != (txn_type, payload) {
                return Err(format!(
                    "receipt ({}, {}) holds type {} {:?}, the run wrote type {txn_type} {payload:?}",
                    r.worker, r.seq, r.txn_type, r.payload
                ));
            }
            max_cts = max_cts.max(cts);
        }
        for cts in acked {
            if let Some(&(w, seq)) = rec.by_cts.get(cts) {
                let n = counts.get(&w).copied().unwrap_or(0);
                if seq >= n {
                    return Err(format!(
                        "worker {w}: transaction {seq} (Tx-CTS {cts}) was acknowledged, but only {n} of its transactions survived"
                    ));
                }
            }
        }
        self.subject.verify(e, &receipts)?;
        let state = if nested { Some(state_hash(e)?) } else { None };
        self.liveness(e, max_cts)?;
        e.check_invariants().map_err(|x| format!("structure after liveness: {x}"))?;
        Ok(state.zip(recovery_trace))
    }

    /// More workload transactions commit, above every surviving Tx-CTS.
    fn liveness(&self, e: &dyn Engine, max_cts: u64) -> Result<(), Violation> {
        let threads = self.cfg.threads;
        let liveness = |x: String| format!("liveness: {x}");
        let receipts = e.table_id(RECEIPT_TABLE).map_err(|x| liveness(x.to_string()))?;
        let mut local =
            self.subject.local(e, threads, threads + 1).map_err(|x| liveness(x.to_string()))?;
        let mut w = e.worker().map_err(|x| liveness(x.to_string()))?;
        let mut rng = SmallRng::seed_from_u64(worker_seed(self.cfg.seed, threads));
        let mut mine = Vec::new();
        let mut rec = Recorded::default();
        for _ in 0..LIVENESS_TXNS {
            self.run_one(w.as_mut(), &mut local, &mut rng, receipts, threads, &mut mine, &mut rec)
                .map_err(liveness)?;
        }
        if let Some(&(cts, _, _)) = mine.iter().find(|(cts, _, _)| *cts <= max_cts) {
            return Err(format!(
                "liveness: Tx-CTS {cts} after recovery is not above the recovered {max_cts}"
            ));
        }
        Ok(())
    }

    fn save(&self, bytes: &[u8], point: u64, image: u64, nested: usize) -> Option<String> {
        let dir = self.cfg.save_failing.as_ref()?;
        let c = self.cfg;
        let name = format!(
            "crash-{}-{}-{}-seed{}-point{point}-image{image}{}.pool",
            c.workload.name(),
            c.cc.name(),
            c.mode.name(),
            c.seed,
            if nested > 0 { format!("-nested{nested}") } else { String::new() }
        );
        let path = dir.join(name);
        let written = std::fs::create_dir_all(dir).and_then(|()| std::fs::write(&path, bytes));
        match written {
            Ok(()) => Some(path.display().to_string()),
            Err(e) => Some(format!("(could not write {}: {e})", path.display())),
        }
    }

    fn run(&self, progress: &mut dyn FnMut(Progress)) -> Result<CampaignReport, String> {
        let started = Instant::now();
        let mut report = CampaignReport {
            config: self.cfg.clone(),
            population: self.cfg.workload.population(),
            pool_bytes: self.pool_bytes,
            committed: 0,
            acked: 0,
            read_only: 0,
            user_aborts: 0,
            retries: 0,
            fences: 0,
            crash_points_total: 0,
            crash_points_checked: 0,
            exhaustive_points: 0,
            fence_sites: FenceSites::default(),
            images: ImageCounts::default(),
            nested: NestedCounts { depth: self.cfg.nested_depth, ..NestedCounts::default() },
            failures: 0,
            failure: None,
            lint_warnings: 0,
            record_s: 0.0,
            check_s: 0.0,
        };
        let recorded = catch_unwind(AssertUnwindSafe(|| self.record()))
            .unwrap_or_else(|p| Err(format!("recorded run {}", panic_message(p))));
        report.record_s = started.elapsed().as_secs_f64();
        let (trace, rec) = match recorded {
            Ok(r) => r,
            Err(message) if message.starts_with("recorded run") => {
                report.failures = 1;
                report.failure =
                    Some(Failure { message, crash_point: None, images: vec![], saved_image: None });
                return Ok(report);
            }
            Err(e) => return Err(e),
        };
        report.committed = rec.per_worker.iter().map(|w| w.len() as u64).sum();
        report.acked = trace
            .markers()
            .iter()
            .filter(|m| matches!(m.marker, Marker::Ack { txn } if rec.by_cts.contains_key(&txn)))
            .count() as u64;
        report.read_only = rec.read_only;
        report.user_aborts = rec.user_aborts;
        report.retries = rec.retries;
        report.lint_warnings = trace.lints().warning_count();
        let signatures = fence_signatures(&trace);
        report.fences = signatures.len() as u64;
        report.crash_points_total = signatures.len() as u64 + 1;
        report.fence_sites.total = signatures.iter().collect::<BTreeSet<_>>().len() as u64;
        if !trace.lints().is_clean() {
            report.failures = 1;
            report.failure = Some(Failure {
                message: format!(
                    "persistence lints of the recorded run: {}",
                    trace.lints().summary()
                ),
                crash_point: None,
                images: vec![],
                saved_image: None,
            });
            return Ok(report);
        }
        let chosen = select_points(&signatures, self.cfg.crash_points);
        let mut sites_hit = BTreeSet::new();
        let check_started = Instant::now();
        let (mode, budget, seed) = (self.cfg.mode, self.cfg.images_per_point, self.cfg.seed);
        for point in trace.crash_points() {
            let index = point.index() as u64;
            if !chosen.contains(&index) {
                continue;
            }
            report.crash_points_checked += 1;
            if let Some(sig) = signatures.get(index as usize) {
                sites_hit.insert(*sig);
            }
            let acked: Vec<u64> = point.acked_txns().collect();
            let mut cursor = point.cursor(mode, budget, seed);
            let exhaustive = cursor.is_exhaustive();
            report.exhaustive_points += u64::from(exhaustive);
            let mut first = true;
            while let Some(view) = cursor.next_image() {
                let nested = first && self.cfg.nested_depth > 0;
                first = false;
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    self.check_image(view.bytes, &acked, &rec, nested)
                }))
                .unwrap_or_else(|p| Err(panic_message(p)));
                let fail = |message: String, saved: Option<String>| Failure {
                    message,
                    crash_point: Some(point.describe()),
                    images: vec![view.description.clone()],
                    saved_image: saved,
                };
                match outcome {
                    Ok(state) => {
                        report.images.total += 1;
                        if exhaustive {
                            report.images.exhaustive += 1;
                        } else {
                            report.images.sampled += 1;
                        }
                        if let Some((hash, recovery)) = state {
                            let mut chain = vec![view.description.clone()];
                            if let Err((message, bytes)) =
                                self.nested(&recovery, hash, 1, &mut chain, &mut report.nested)
                            {
                                let saved = self.save(&bytes, index, view.index, chain.len() - 1);
                                report.failures = 1;
                                report.failure = Some(Failure {
                                    message,
                                    crash_point: Some(point.describe()),
                                    images: chain,
                                    saved_image: saved,
                                });
                                report.check_s = check_started.elapsed().as_secs_f64();
                                report.fence_sites.hit = sites_hit.len() as u64;
                                return Ok(report);
                            }
                        }
                    }
                    Err(message) => {
                        let saved = self.save(view.bytes, index, view.index, 0);
                        report.failures = 1;
                        report.failure = Some(fail(message, saved));
                        report.check_s = check_started.elapsed().as_secs_f64();
                        report.fence_sites.hit = sites_hit.len() as u64;
                        return Ok(report);
                    }
                }
            }
            progress(Progress {
                points_done: report.crash_points_checked,
                points_total: chosen.len() as u64,
                images: report.images.total,
            });
        }
        report.fence_sites.hit = sites_hit.len() as u64;
        report.check_s = check_started.elapsed().as_secs_f64();
        Ok(report)
    }

    /// Crash the recovery whose trace is `trace` (module docs, 6). On a
    /// violation: the message and the image that failed (`chain` names it).
    fn nested(
        &self,
        trace: &Trace,
        reference: u64,
        depth: u32,
        chain: &mut Vec<String>,
        stats: &mut NestedCounts,
    ) -> Result<(), (String, Vec<u8>)> {
        if depth > self.cfg.nested_depth {
            return Ok(());
        }
        let total = trace.fence_count() as u64 + 1;
        let picks = spread(total, NESTED_POINTS as u64);
        let (mode, seed) = (self.cfg.mode, self.cfg.seed);
        for point in trace.crash_points() {
            if !picks.contains(&(point.index() as u64)) {
                continue;
            }
            stats.points += 1;
            let mut cursor = point.cursor(mode, NESTED_IMAGES, seed);
            while let Some(view) = cursor.next_image() {
                chain.push(format!("{} (recovery at depth {})", view.description, depth - 1));
                stats.recoveries += 1;
                let outcome = catch_unwind(AssertUnwindSafe(|| -> Result<(u64, Trace), String> {
                    let opened = self.recover(view.bytes.to_vec())?;
                    let t = opened.backend().trace();
                    let h = state_hash(opened.engine());
                    Self::finish(opened);
                    Ok((h?, t))
                }))
                .unwrap_or_else(|p| Err(panic_message(p)));
                match outcome {
                    Ok((hash, _)) if hash != reference => {
                        return Err((
                            format!(
                                "nested crash (depth {depth}): recovery changed the logical state"
                            ),
                            view.bytes.to_vec(),
                        ));
                    }
                    Ok((_, inner)) => self.nested(&inner, reference, depth + 1, chain, stats)?,
                    Err(message) => {
                        return Err((
                            format!("nested crash (depth {depth}): {message}"),
                            view.bytes.to_vec(),
                        ));
                    }
                }
                chain.pop();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_names_round_trip() {
        for f in Fault::ALL {
            assert_eq!(parse_fault(&fault_name(f)), Some(f));
        }
        assert_eq!(parse_fault("no_fence_before_lp"), Some(Fault::NoFenceBeforeLp));
        assert_eq!(parse_fault("nonsense"), None);
    }

    #[test]
    fn point_selection_covers_sites_first_and_keeps_the_end() {
        let sigs = vec![(1, 1, 0), (1, 1, 0), (2, 1, 0), (1, 1, 0), (3, 0, 0), (1, 1, 0)];
        let all = select_points(&sigs, 100);
        assert_eq!(all.len(), 7);
        let three = select_points(&sigs, 3);
        assert_eq!(three.len(), 3);
        assert!(three.contains(&6) && three.contains(&0) && three.contains(&2), "{three:?}");
        assert_eq!(select_points(&sigs, 5).len(), 5);
        assert_eq!(spread(10, 3), BTreeSet::from([0, 4, 9]));
    }

    #[test]
    fn a_tiny_bank_campaign_passes_and_counts_what_it_did() {
        let cfg = CampaignConfig {
            crash_points: 12,
            images_per_point: 4,
            txns: 3,
            threads: 2,
            ..CampaignConfig::default()
        };
        let report = run_campaign(&cfg, &mut |_| {}).unwrap();
        assert!(report.passed(), "{}", report.render_text());
        assert_eq!(report.committed, 6);
        assert_eq!(report.crash_points_checked, 12);
        assert!(report.images.total >= 12 && report.nested.recoveries > 0, "{report:?}");
        assert!(report.fence_sites.hit <= report.fence_sites.total);
    }
}
