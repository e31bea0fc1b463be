//! Page allocation and release under the crash simulator, nested crashes included.
//!
//! What: invariants P1–P3 of `page_table.rs` on every crash image of a run
//! that allocates pages, fills them with a pattern, releases them and
//! allocates them again (so a stale pattern would show if zeroing were not
//! durable before the page-table entry): every image opens, no page is both
//! free and owned, and an owned page holds only zeros or the pattern written
//! by its current owner. Then nested crashes: crash `Pool::open_on` (which
//! clears the clean-shutdown flag) and a later allocation, recover those
//! images again, two levels deep: always opens, same owned set.
//!
//! How: each allocation gets its own generation, used as the owner table and
//! as the pattern seed, so an image tells which bytes its owner may hold.
//! Strict images exhaustive within 256 per point, paranoid sampled.
//!
//! Invariant checked: an owned page never holds bytes from a previous owner.

use std::collections::BTreeSet;

use zen_pmem::header::PAGE_TABLE_OFFSET;
use zen_pmem::sim::{self, CheckPlan, CrashMode, SimBackend, for_each_nested};
use zen_pmem::{PageOwner, PersistenceDomain, PmemBackend, Pool, PoolOptions};

const PAGE_BYTES: u64 = 64 << 10;
const PAGES: u64 = 6;
const ADR: PersistenceDomain = PersistenceDomain::Adr;
/// Owner tables at or above this were allocated by a recovery run.
const RECOVERY_TABLE: u32 = 100;

fn options() -> PoolOptions {
    PoolOptions { page_size: PAGE_BYTES, ..PoolOptions::default() }
}

fn pattern_byte(generation: u32, at: u64) -> u8 {
    ((u64::from(generation) * 37 + at) % 251 + 1) as u8
}

fn owner(generation: u32) -> PageOwner {
    PageOwner { table: generation, worker: 0 }
}

/// Write the first `len` bytes of `page`'s pattern for `generation`, durably.
fn fill(pool: &Pool<SimBackend>, page: u64, generation: u32, len: u64) {
    let bytes: Vec<u8> = (0..len).map(|at| pattern_byte(generation, at)).collect();
    let p = pool.persister(2);
    p.write(pool.page_offset(page), &bytes);
    p.persist(pool.page_offset(page), len);
}

/// Allocate, fill, release and reallocate pages; returns the trace handle.
fn allocation_run() -> SimBackend {
    let sim = SimBackend::new(PAGES * PAGE_BYTES, ADR);
    let pool = Pool::format(sim.clone(), &options()).expect("format");
    sim.reset_trace();
    let a = pool.allocate_page(2, owner(1)).unwrap();
    fill(&pool, a, 1, PAGE_BYTES);
    let b = pool.allocate_page(2, owner(2)).unwrap();
    fill(&pool, b, 2, 4096);
    pool.release_page(2, a, owner(1)).unwrap();
    let again = pool.allocate_page(2, owner(3)).unwrap();
    assert_eq!(again, a, "the released page is reused, so stale bytes could show");
    fill(&pool, again, 3, 512);
    pool.release_page(2, b, owner(2)).unwrap();
    assert_eq!(pool.allocate_page(2, owner(4)).unwrap(), b);
    pool.abandon();
    sim
}

/// Open an image and check the allocator invariants; returns the owned set.
fn check_pool_image(bytes: Vec<u8>) -> Result<BTreeSet<(u64, u32)>, String> {
    let pool = Pool::open_on(SimBackend::from_image(bytes, ADR)).map_err(|e| e.to_string())?;
    let owned = pool.owned_pages().map_err(|e| e.to_string())?;
    if owned.len() as u64 + pool.free_page_count() != PAGES - 1 {
        return Err(format!(
            "{} owned + {} free != {}",
            owned.len(),
            pool.free_page_count(),
            PAGES - 1
        ));
    }
    let mut page = vec![0u8; PAGE_BYTES as usize];
    for &(id, who) in &owned {
        pool.backend().read(pool.page_offset(id), &mut page);
        let stale = (0..PAGE_BYTES).find(|&at| {
            let b = page[at as usize];
            b != 0 && (who.table >= RECOVERY_TABLE || b != pattern_byte(who.table, at))
        });
        if let Some(at) = stale {
            return Err(format!("page {id} owned by {who:?} holds stale byte at {at}"));
        }
    }
    pool.abandon();
    Ok(owned.into_iter().map(|(id, who)| (id, who.table)).collect())
}

#[test]
fn every_allocation_crash_image_opens_with_a_consistent_page_table() {
    let seed = sim::seed_from_env(0xA110C);
    let sim = allocation_run();
    let trace = sim.trace();
    assert!(trace.lints().is_clean(), "{:?}", trace.lints().errors());
    let mut owned_sets = BTreeSet::new();
    for plan in [
        CheckPlan::new(CrashMode::Strict, 256, seed),
        CheckPlan::new(CrashMode::Paranoid, 48, seed),
    ] {
        let stats = trace
            .check(plan, |_, image| {
                owned_sets.insert(check_pool_image(image.bytes.to_vec())?);
                Ok(())
            })
            .unwrap_or_else(|f| panic!("{f}"));
        println!(
            "{:?}: {} images at {} points ({} exhaustive), seed {seed:#x}",
            plan.mode, stats.images, stats.points, stats.exhaustive_points
        );
        assert!(stats.images > stats.points, "{stats:?}");
    }
    // The images span the whole run: from no page owned to pages 1 and 2 reowned.
    assert!(owned_sets.contains(&BTreeSet::new()));
    assert!(owned_sets.contains(&BTreeSet::from([(1, 3), (2, 4)])), "{owned_sets:?}");
}

/// A cleanly closed pool with two owned pages, as a power-up image.
fn closed_pool_image() -> (Vec<u8>, BTreeSet<(u64, u32)>) {
    let sim = SimBackend::new(PAGES * PAGE_BYTES, ADR);
    let pool = Pool::format(sim.clone(), &options()).expect("format");
    let a = pool.allocate_page(1, owner(7)).unwrap();
    let b = pool.allocate_page(1, owner(8)).unwrap();
    fill(&pool, b, 8, 1024);
    pool.close().expect("close");
    assert_eq!(sim.pending_atoms(), 0);
    assert!(sim.lints().is_clean(), "{:?}", sim.lints().errors());
    (sim.durable_image(), BTreeSet::from([(a, 7), (b, 8)]))
}

#[test]
fn nested_crashes_during_open_and_allocation_always_recover() {
    let seed = sim::seed_from_env(0x9E57);
    let (image, base) = closed_pool_image();
    let plan = CheckPlan::new(CrashMode::Strict, 24, seed);
    let mut clean_flags = BTreeSet::new();
    let stats = for_each_nested(image, ADR, plan, 2, |backend, depth| {
        let handle = backend.clone();
        let pool = Pool::open_on(backend).map_err(|e| e.to_string())?;
        clean_flags.insert((depth, pool.was_clean_shutdown()));
        let owned: BTreeSet<(u64, u32)> = pool
            .owned_pages()
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|(p, o)| (p, o.table))
            .collect();
        let ours: BTreeSet<_> =
            owned.iter().filter(|(_, t)| *t < RECOVERY_TABLE).copied().collect();
        if ours != base {
            return Err(format!("owned set {owned:?} lost or gained pages of {base:?}"));
        }
        if owned.len() - ours.len() > depth as usize {
            return Err(format!("more recovery pages than recoveries: {owned:?}"));
        }
        pool.allocate_page(3, owner(RECOVERY_TABLE + depth)).map_err(|e| e.to_string())?;
        let trace = handle.trace();
        pool.abandon();
        Ok(trace)
    })
    .unwrap_or_else(|f| panic!("{f}"));
    println!("nested recoveries per depth: {:?} (seed {seed:#x})", stats.recoveries);
    assert_eq!(stats.recoveries[0], 1);
    assert!(stats.recoveries[1] >= 3 && stats.recoveries[2] > stats.recoveries[1], "{stats:?}");
    assert!(clean_flags.contains(&(0, true)), "the closed pool reports a clean shutdown");
    assert!(
        clean_flags.contains(&(1, true)) && clean_flags.contains(&(1, false)),
        "a crash during open leaves the flag set or cleared: {clean_flags:?}"
    );
}

#[test]
fn recovery_on_an_image_records_its_own_trace() {
    let (image, _) = closed_pool_image();
    let sim = SimBackend::from_image(image.clone(), ADR);
    assert_eq!(sim.durable_image(), image, "a power-up image is durable and visible");
    let pool = Pool::open_on(sim.clone()).unwrap();
    assert!(pool.was_clean_shutdown());
    let trace = sim.trace();
    assert_eq!(trace.initial_image(), &image[..]);
    assert_eq!(trace.fence_count(), 1, "open clears the clean-shutdown flag with one persist");
    pool.abandon();
}

#[test]
fn an_allocator_that_publishes_before_zeroing_is_durable_is_caught() {
    let seed = sim::seed_from_env(0xBAD0);
    let sim = SimBackend::new(PAGES * PAGE_BYTES, ADR);
    let pool = Pool::format(sim.clone(), &options()).expect("format");
    let page = pool.allocate_page(2, owner(1)).unwrap();
    fill(&pool, page, 1, PAGE_BYTES);
    pool.release_page(2, page, owner(1)).unwrap();
    sim.reset_trace();
    // The bug: zero and publish in one epoch, so the entry may persist first.
    let p = pool.persister(2);
    let entry = PAGE_TABLE_OFFSET + page * 8;
    p.write_zeros(pool.page_offset(page), PAGE_BYTES);
    p.write_u64_atomic(entry, owner(3).encode());
    p.flush(pool.page_offset(page), PAGE_BYTES);
    p.flush(entry, 8);
    p.fence();
    pool.abandon();
    expect_stale_bytes_found(&sim, seed, "stale bytes in a freshly owned page must be found");
}

/// The fresh frontier (`header.rs`): a page never allocated since create is
/// handed out without zeroing (one frontier word written and flushed), a
/// released page is zeroed whole when it is handed out again.
#[test]
fn only_a_page_allocated_before_is_zeroed() {
    let sim = SimBackend::new(PAGES * PAGE_BYTES, ADR);
    let pool = Pool::format(sim.clone(), &options()).expect("format");
    let before = pool.total_counters();
    let a = pool.allocate_page(2, owner(1)).unwrap();
    let fresh = pool.total_counters();
    assert_eq!(fresh.bytes_written - before.bytes_written, 16, "frontier word + entry word");
    assert_eq!(fresh.lines_flushed - before.lines_flushed, 2);
    assert_eq!(fresh.fences - before.fences, 2);
    fill(&pool, a, 1, PAGE_BYTES);
    pool.release_page(2, a, owner(1)).unwrap();
    let before = pool.total_counters();
    assert_eq!(pool.allocate_page(2, owner(2)).unwrap(), a);
    let reused = pool.total_counters();
    assert_eq!(reused.bytes_written - before.bytes_written, PAGE_BYTES + 8, "page zeroed + entry");
    assert_eq!(reused.lines_flushed - before.lines_flushed, PAGE_BYTES / 64 + 1);
    let mut page = vec![1u8; PAGE_BYTES as usize];
    pool.backend().read(pool.page_offset(a), &mut page);
    assert!(page.iter().all(|&b| b == 0), "the reused page reads zero");
    pool.abandon();
}

/// Bug injection: a frontier left below a page that was allocated and
/// written (as if its raise were lost) lets the page be handed out again
/// without zeroing; the crash checker must see the previous owner's bytes.
#[test]
fn a_frontier_left_below_a_written_page_is_caught() {
    let seed = sim::seed_from_env(0xF0E5);
    let sim = SimBackend::new(PAGES * PAGE_BYTES, ADR);
    let pool = Pool::format(sim.clone(), &options()).expect("format");
    let frontier = zen_pmem::header::fresh_frontier_offset(0);
    let initial = sim.load_u64(frontier);
    let page = pool.allocate_page(2, owner(1)).unwrap();
    fill(&pool, page, 1, PAGE_BYTES);
    pool.release_page(2, page, owner(1)).unwrap();
    // The bug: the frontier goes back to where create put it, durably (the
    // pool keeps the word's value in DRAM, so it is read again by an open).
    let p = pool.persister(2);
    p.write_u64_atomic(frontier, initial);
    p.persist(frontier, 8);
    pool.abandon();
    let pool = Pool::open_on(sim.clone()).expect("the page is free, the frontier valid");
    sim.reset_trace();
    assert_eq!(pool.allocate_page(2, owner(3)).unwrap(), page);
    pool.abandon();
    expect_stale_bytes_found(&sim, seed, "a page handed out again unzeroed must be found");
}

/// Bug injection's verdict: some crash image of `sim`'s trace shows a page
/// holding a previous owner's bytes, and the checker says so.
fn expect_stale_bytes_found(sim: &SimBackend, seed: u64, what: &str) {
    let failure = sim
        .trace()
        .check(CheckPlan::new(CrashMode::Strict, 256, seed), |_, image| {
            check_pool_image(image.bytes.to_vec()).map(|_| ())
        })
        .expect_err(what);
    println!("{failure}");
    assert!(failure.message.contains("stale byte"), "{failure}");
}

/// A frontier that fails its self-check, lies outside the member, or sits
/// below an owned page is refused at open, naming the field.
#[test]
fn a_corrupt_fresh_frontier_is_refused_at_open() {
    let (image, owned) = closed_pool_image();
    let highest = owned.iter().map(|&(page, _)| page).max().unwrap();
    let at = zen_pmem::header::fresh_frontier_offset(0) as usize;
    for (word, what) in [
        (0u64, "zero"),
        (0xDEAD_BEEF, "fails its self-check"),
        (zen_pmem::header::encode_fresh_frontier(PAGES + 1), "outside"),
        (zen_pmem::header::encode_fresh_frontier(highest), "above it"),
    ] {
        let mut bytes = image.clone();
        bytes[at..at + 8].copy_from_slice(&word.to_le_bytes());
        let err = Pool::open_on(SimBackend::from_image(bytes, ADR))
            .map(|pool| pool.abandon())
            .expect_err(what);
        let text = err.to_string();
        assert!(
            matches!(err, zen_pmem::PmemError::CorruptHeader { field: "fresh_frontier", .. }),
            "{what}: {text}"
        );
        if what != "zero" {
            assert!(text.contains(what), "{what}: {text}");
        }
    }
}
