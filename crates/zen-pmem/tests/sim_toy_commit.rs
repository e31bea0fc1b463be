//! A toy log-free commit, checked on every crash image, and three injected bugs.
//!
//! What: on a `Pool<SimBackend>`, each transaction writes 2–3 tuples (16-byte
//! header: id word + ts word, then data derived from the txn id) to fresh
//! 48-byte slots, flushes, fences, then sets the LP bit in the last tuple's ts
//! word with one atomic store, flushes, fences and acknowledges. The checker:
//! a txn is committed iff its LP word holds `ts | 1`; every committed txn has
//! all its tuples fully present; every acknowledged txn is committed.
//!
//! How: strict images exhaustive within 256 per point, paranoid and eADR
//! sampled; then the same run with (a) no fence before the LP store, (b) the
//! ack before the LP fence, (c) the LP word written as two 4-byte halves —
//! each must fail some image or raise a lint error ("3/3 injected bugs caught").
//!
//! Invariant: the correct protocol passes every image with no lint error.

use zen_pmem::sim::{self, CheckPlan, CheckStats, CrashMode, SimBackend, Trace};
use zen_pmem::{Marker, PageOwner, PersistenceDomain, Pool, PoolOptions};

const PAGE_BYTES: u64 = 64 << 10;
const SLOT_BYTES: u64 = 48;
const DATA_BYTES: usize = 32;
const TXNS: u64 = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bug {
    None,
    NoFenceBeforeLp,
    AckBeforeLpFence,
    TornLp,
}

struct Layout {
    page_offset: u64,
}

impl Layout {
    fn tuples(txn: u64) -> u64 {
        2 + txn % 2
    }
    fn slot(&self, txn: u64, k: u64) -> u64 {
        self.page_offset + (txn * 3 + k) * SLOT_BYTES
    }
    fn ts(txn: u64) -> u64 {
        (txn + 1) << 1
    }
    fn id(txn: u64, k: u64) -> u64 {
        ((txn + 1) << 8) | k
    }
    fn lp_offset(&self, txn: u64) -> u64 {
        self.slot(txn, Self::tuples(txn) - 1) + 8
    }
    fn data(txn: u64, k: u64) -> [u8; DATA_BYTES] {
        std::array::from_fn(|j| ((txn * 31 + k * 7 + j as u64) % 251 + 1) as u8)
    }
    fn tuple(txn: u64, k: u64) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(SLOT_BYTES as usize);
        bytes.extend_from_slice(&Self::id(txn, k).to_le_bytes());
        bytes.extend_from_slice(&Self::ts(txn).to_le_bytes());
        bytes.extend_from_slice(&Self::data(txn, k));
        bytes
    }
}

/// Format a pool, allocate the tuple page, and start recording after that.
fn setup() -> (SimBackend, Pool<SimBackend>, Layout) {
    let sim = SimBackend::new(4 * PAGE_BYTES, PersistenceDomain::Adr);
    let opts = PoolOptions { page_size: PAGE_BYTES, ..PoolOptions::default() };
    let pool = Pool::format(sim.clone(), &opts).expect("format");
    let page = pool.allocate_page(1, PageOwner { table: 1, worker: 0 }).expect("page");
    let layout = Layout { page_offset: pool.page_offset(page) };
    sim.reset_trace();
    (sim, pool, layout)
}

fn run(bug: Bug) -> (Trace, Layout) {
    let (sim, pool, layout) = setup();
    let p = pool.persister(1);
    for txn in 0..TXNS {
        p.marker(Marker::Begin { txn });
        let n = Layout::tuples(txn);
        for k in 0..n {
            p.write(layout.slot(txn, k), &Layout::tuple(txn, k));
        }
        p.flush(layout.slot(txn, 0), n * SLOT_BYTES);
        if bug != Bug::NoFenceBeforeLp {
            p.fence();
        }
        let lp = Layout::ts(txn) | 1;
        let at = layout.lp_offset(txn);
        if bug == Bug::TornLp {
            p.write(at, &lp.to_le_bytes()[..4]);
            p.write(at + 4, &lp.to_le_bytes()[4..]);
        } else {
            p.write_u64_atomic(at, lp);
        }
        p.flush(at, 8);
        if bug == Bug::AckBeforeLpFence {
            p.marker(Marker::Ack { txn });
            p.fence();
        } else {
            p.fence();
            p.marker(Marker::Ack { txn });
        }
    }
    let trace = sim.trace();
    pool.abandon();
    (trace, layout)
}

fn word(image: &[u8], offset: u64) -> u64 {
    let at = offset as usize;
    u64::from_le_bytes(image[at..at + 8].try_into().unwrap())
}

/// The toy's post-crash oracle on one image.
fn check_image(layout: &Layout, image: &[u8], acked: &[u64]) -> Result<(), String> {
    for txn in 0..TXNS {
        let lp = word(image, layout.lp_offset(txn));
        let ts = Layout::ts(txn);
        if ![0, ts, ts | 1].contains(&lp) {
            return Err(format!("txn {txn}: LP word {lp:#x} is torn"));
        }
        let committed = lp == ts | 1;
        if acked.contains(&txn) && !committed {
            return Err(format!("txn {txn} was acknowledged but is not committed"));
        }
        if !committed {
            continue;
        }
        let n = Layout::tuples(txn);
        for k in 0..n {
            let at = layout.slot(txn, k) as usize;
            let mut want = Layout::tuple(txn, k);
            if k == n - 1 {
                want[8..16].copy_from_slice(&(ts | 1).to_le_bytes());
            }
            if image[at..at + SLOT_BYTES as usize] != want[..] {
                return Err(format!("txn {txn} committed but tuple {k} is not fully present"));
            }
        }
    }
    Ok(())
}

/// Check every image under `plan`; `Err` carries the failure report.
fn check_trace(trace: &Trace, layout: &Layout, plan: CheckPlan) -> Result<CheckStats, String> {
    trace
        .check(plan, |point, image| {
            let acked: Vec<u64> = point.acked_txns().collect();
            check_image(layout, image.bytes, &acked)
        })
        .map_err(|f| f.to_string())
}

fn plans(seed: u64) -> [CheckPlan; 3] {
    [
        CheckPlan::new(CrashMode::Strict, 256, seed),
        CheckPlan::new(CrashMode::Paranoid, 128, seed),
        CheckPlan::new(CrashMode::Eadr, 256, seed),
    ]
}

#[test]
fn the_correct_protocol_survives_every_image() {
    let seed = sim::seed_from_env(0x70C0);
    let (trace, layout) = run(Bug::None);
    assert!(trace.lints().is_clean(), "{:?}", trace.lints().errors());
    assert_eq!(trace.fence_count() as u64, 2 * TXNS);
    for plan in plans(seed) {
        let stats = check_trace(&trace, &layout, plan).unwrap_or_else(|e| panic!("{e}"));
        println!(
            "{:?}: {} images at {} points ({} exhaustive) passed (seed {seed:#x})",
            plan.mode, stats.images, stats.points, stats.exhaustive_points
        );
        assert_eq!(stats.points, 2 * TXNS + 1);
        assert!(stats.images > 4 * TXNS, "{:?} checked {} images", plan.mode, stats.images);
        if plan.mode != CrashMode::Paranoid {
            // Only a 3-tuple txn spread over 3 lines has more than 256 strict images.
            assert!(stats.exhaustive_points >= 2 * TXNS - 2, "{stats:?}");
        }
    }
}

/// Whether some image fails or a lint error fires; prints how.
fn caught(bug: Bug, seed: u64) -> bool {
    let (trace, layout) = run(bug);
    let lint_errors = trace.lints().errors();
    let failures: Vec<String> =
        plans(seed).iter().filter_map(|&plan| check_trace(&trace, &layout, plan).err()).collect();
    println!(
        "{bug:?}: {} lint errors, {} of 3 modes failed{}",
        lint_errors.len(),
        failures.len(),
        failures.first().map(|f| format!("; first: {f}")).unwrap_or_default()
    );
    !lint_errors.is_empty() || !failures.is_empty()
}

#[test]
fn three_injected_bugs_are_caught() {
    let seed = sim::seed_from_env(0xB06);
    let bugs = [Bug::NoFenceBeforeLp, Bug::AckBeforeLpFence, Bug::TornLp];
    let caught_count = bugs.iter().filter(|&&bug| caught(bug, seed)).count();
    println!("{caught_count}/{} injected bugs caught (seed {seed:#x})", bugs.len());
    assert_eq!(caught_count, bugs.len(), "seed {seed:#x}");
}

#[test]
fn each_bug_is_caught_by_the_expected_check() {
    let seed = sim::seed_from_env(0xB07);
    let (trace, layout) = run(Bug::NoFenceBeforeLp);
    let strict = check_trace(&trace, &layout, plans(seed)[0]);
    assert!(strict.unwrap_err().contains("not fully present"), "strict images expose (a)");

    let (trace, layout) = run(Bug::AckBeforeLpFence);
    assert_eq!(trace.lints().acked_with_pending, TXNS, "the ack lint fires for every txn");
    let strict = check_trace(&trace, &layout, plans(seed)[0]);
    assert!(strict.unwrap_err().contains("acknowledged"), "strict images expose (b)");

    let (trace, _) = run(Bug::TornLp);
    assert_eq!(trace.lints().torn_commit_words, TXNS, "the torn-word lint fires for every txn");
}
