//! nvcaracal through its deterministic seam (`zen_engine::det`): the same
//! seed and inputs give the same state and outputs on 1, 2 and 4 workers,
//! with no concurrency-control aborts; an undeclared write is a typed error
//! that leaves the rest of its epoch alone; a batch too large for the input
//! log runs as several epochs (a transaction too large alone is refused
//! with both sizes); cached versions change no result and save NVM reads
//! (counted exactly); a crash after the inputs are sealed is
//! recovered by reverting and replaying the epoch; a corrupt input log is a
//! typed error with the pool file unchanged. (Crash campaigns: the shared
//! harness, `crates/zen-workload/tests/crash_*.rs`.)

mod baseline_common;

use baseline_common::*;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use zen_engine::baseline::NvcaracalEngine;
use zen_engine::baseline::nvcaracal::layout;
use zen_engine::{
    CacheStats, Engine, EngineConfig, EngineKind, Error, OneShot, ProcId, ProcedureSet, Procedures,
    TableId, user_abort,
};
use zen_pmem::FsBackend;

const T: TableId = TableId(0);

/// set(key, value); transfer(from, to, amount) aborting on overdraft;
/// sneaky(declared, undeclared): writes both.
fn procedures() -> ProcedureSet {
    let mut p = ProcedureSet::new();
    p.register("set", |tx, input| {
        let (k, v) = (word(input, 0), word(input, 1) as i64);
        tx.put(T, k, &row(v))?;
        Ok(Vec::new())
    })
    .unwrap();
    p.register("transfer", |tx, input| {
        let (from, to, amount) = (word(input, 0), word(input, 1), word(input, 2) as i64);
        let mut buf = vec![0u8; ROW];
        let a = if tx.get(T, from, &mut buf)? { value(&buf) } else { 0 };
        let b = if tx.get(T, to, &mut buf)? { value(&buf) } else { 0 };
        if a < amount {
            return Err(user_abort());
        }
        tx.put(T, from, &row(a - amount))?;
        tx.put(T, to, &row(b + amount))?;
        Ok(a.to_le_bytes().to_vec())
    })
    .unwrap();
    p.register("sneaky", |tx, input| {
        tx.put(T, word(input, 0), &row(-1))?;
        tx.put(T, word(input, 1), &row(-2))?;
        Ok(Vec::new())
    })
    .unwrap();
    p
}

fn word(input: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(input[i * 8..i * 8 + 8].try_into().unwrap())
}

fn words(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn cfg(dir: &std::path::Path) -> EngineConfig {
    EngineConfig {
        nvcaracal_log_bytes: 1 << 20,
        procedures: Procedures::new(procedures()),
        ..config(EngineKind::Nvcaracal, dir, true)
    }
}

fn set(k: u64, v: i64) -> OneShot {
    OneShot { proc: ProcId(1), input: words(&[k, v as u64]), writes: vec![(T, k)] }
}

fn transfer(from: u64, to: u64, amount: u64) -> OneShot {
    OneShot { proc: ProcId(2), input: words(&[from, to, amount]), writes: vec![(T, from), (T, to)] }
}

/// What [`run_seeded`] saw.
#[derive(Debug)]
struct Seeded {
    outputs: Vec<String>,
    state: Vec<(u64, i64)>,
    cc_aborts: u64,
    split_rows: u64,
    /// Epochs the three batches ran as (3 unless the DRAM budget split them).
    parts: u64,
    /// Stale versions deleted by the minor and the major collector.
    gc_minor: u64,
    gc_major: u64,
}

/// Three epochs of 400 transfers among 12 accounts (hot: every epoch has
/// long version arrays), after a load, with the engine config `tweak`ed.
fn run_seeded_with(
    dir: &std::path::Path,
    workers: usize,
    seed: u64,
    tweak: impl Fn(&mut EngineConfig),
) -> Seeded {
    let mut config = cfg(dir);
    tweak(&mut config);
    let engine = zen_engine::open(&config).unwrap();
    engine.create_table(&accounts()).unwrap();
    let det = engine.deterministic().unwrap();
    let load: Vec<OneShot> = (0..12).map(|k| set(k, 100)).collect();
    det.submit_epoch(&load, workers).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut seen = Seeded {
        outputs: Vec::new(),
        state: Vec::new(),
        cc_aborts: 0,
        split_rows: 0,
        parts: 0,
        gc_minor: 0,
        gc_major: 0,
    };
    for _ in 0..3 {
        let batch: Vec<OneShot> = (0..400)
            .map(|_| {
                let from = rng.random_range(0..12);
                let to = (from + rng.random_range(1..12)) % 12;
                transfer(from, to, rng.random_range(1..80))
            })
            .collect();
        let out = det.submit_epoch(&batch, workers).unwrap();
        assert_eq!(out.stats.txns, 400);
        assert_eq!(out.results.len(), 400);
        assert!(out.stats.rows_persisted <= 12 * out.stats.parts, "{:?}", out.stats);
        seen.cc_aborts += out.stats.cc_aborts;
        seen.split_rows += out.stats.split_rows;
        seen.parts += out.stats.parts;
        seen.gc_minor += out.stats.gc_minor;
        seen.gc_major += out.stats.gc_major;
        seen.outputs.extend(out.results.iter().map(|r| match r {
            Ok(v) => format!("ok {v:?}"),
            Err(e) => format!("err {e}"),
        }));
    }
    engine.check_invariants().unwrap();
    seen.state = dump(engine.as_ref(), T);
    engine.close().unwrap();
    seen
}

fn run_seeded(dir: &std::path::Path, workers: usize, seed: u64) -> Seeded {
    run_seeded_with(dir, workers, seed, |_| {})
}

#[test]
fn same_seed_same_state_on_1_2_and_4_workers_without_cc_aborts() {
    let runs: Vec<_> = [1, 2, 4]
        .into_iter()
        .map(|w| {
            let dir = tempfile::tempdir().unwrap();
            (w, run_seeded(dir.path(), w, 42))
        })
        .collect();
    let first = &runs[0].1;
    assert_eq!(first.cc_aborts, 0);
    assert_eq!(first.state.len(), 12);
    assert_eq!(first.state.iter().map(|(_, v)| v).sum::<i64>(), 1200, "transfers keep the total");
    assert!(first.outputs.iter().any(|o| o.starts_with("err")), "some transfers overdraw");
    assert!(first.outputs.iter().any(|o| o.starts_with("ok")));
    for (w, r) in &runs[1..] {
        assert_eq!(r.cc_aborts, 0, "{w} workers: no concurrency-control aborts");
        assert_eq!(r.state, first.state, "{w} workers: another final state");
        assert_eq!(r.outputs, first.outputs, "{w} workers: other outputs");
        assert!(r.split_rows > 0, "{w} workers: ~67 versions per row split the hot rows");
    }
    let dir = tempfile::tempdir().unwrap();
    let other = run_seeded(dir.path(), 2, 43);
    assert_ne!(other.state, first.state, "another seed, another history");
}

#[test]
fn batch_append_split_on_demand_and_the_dram_budget_change_no_result() {
    let dir = tempfile::tempdir().unwrap();
    let reference = run_seeded(dir.path(), 1, 42);
    assert_eq!((reference.split_rows, reference.parts), (0, 3), "one thread never splits");
    for (batch, split) in [(false, false), (true, false), (false, true), (true, true)] {
        for workers in [2, 4] {
            let dir = tempfile::tempdir().unwrap();
            let r = run_seeded_with(dir.path(), workers, 42, |c| {
                c.nvcaracal_batch_append = batch;
                c.nvcaracal_split_on_demand = split;
            });
            let what = format!("batch append {batch}, split-on-demand {split}, {workers} workers");
            assert_eq!(r.cc_aborts, 0, "{what}");
            assert_eq!(r.state, reference.state, "{what}");
            assert_eq!(r.outputs, reference.outputs, "{what}");
            assert_eq!(r.split_rows > 0, split, "{what}: {} rows split", r.split_rows);
        }
    }
    // 400 transfers × 2 writes exceed 64 KiB of transient versions: each
    // batch runs as several epochs, in the same serial order.
    let dir = tempfile::tempdir().unwrap();
    let r = run_seeded_with(dir.path(), 2, 42, |c| c.nvcaracal_dram_budget_bytes = 64 << 10);
    assert!(r.parts > 3, "{} epochs for 3 batches", r.parts);
    assert_eq!(r.state, reference.state);
    assert_eq!(r.outputs, reference.outputs);
}

#[test]
fn a_transaction_alone_over_the_dram_budget_is_refused_with_the_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = cfg(dir.path());
    config.nvcaracal_dram_budget_bytes = 64 << 10;
    let engine = zen_engine::open(&config).unwrap();
    engine.create_table(&accounts()).unwrap();
    let det = engine.deterministic().unwrap();
    det.submit_epoch(&[set(1, 5)], 1).unwrap();
    let before = det.durable_epoch();
    let mut huge = set(1, 7);
    huge.writes = (0..2000).map(|k| (T, k)).collect();
    match det.submit_epoch(&[set(2, 9), huge], 2) {
        Err(Error::EpochOverBudget { index, needed_bytes, budget_bytes }) => {
            assert_eq!((index, budget_bytes), (1, 64 << 10));
            assert!(needed_bytes > budget_bytes, "{needed_bytes}");
        }
        other => panic!("expected EpochOverBudget, got {other:?}"),
    }
    assert_eq!(det.durable_epoch(), before, "nothing of the batch ran");
    assert_eq!(dump(engine.as_ref(), T), vec![(1, 5)]);
    engine.close().unwrap();
}

#[test]
fn an_undeclared_write_fails_alone_and_leaves_the_epoch_unaffected() {
    let dir = tempfile::tempdir().unwrap();
    let engine = zen_engine::open(&cfg(dir.path())).unwrap();
    engine.create_table(&accounts()).unwrap();
    let det = engine.deterministic().unwrap();
    det.submit_epoch(&[set(1, 10), set(2, 20)], 1).unwrap();
    let batch = vec![
        // Declares 2, writes 2 and then 3: typed error, neither write lands.
        OneShot { proc: ProcId(3), input: words(&[2, 3]), writes: vec![(T, 2)] },
        // Reads 2 after it: sees 20, not -1.
        transfer(2, 1, 5),
        set(4, 40),
    ];
    let out = det.submit_epoch(&batch, 2).unwrap();
    match &out.results[0] {
        Err(Error::UndeclaredWrite { table, key }) => {
            assert_eq!((table.as_str(), *key), ("accounts", 3))
        }
        other => panic!("expected UndeclaredWrite, got {other:?}"),
    }
    assert_eq!(out.results[1].as_ref().unwrap(), &20i64.to_le_bytes().to_vec());
    assert!(out.results[2].is_ok());
    assert_eq!(out.stats.failed, 1);
    assert_eq!(dump(engine.as_ref(), T), vec![(1, 15), (2, 15), (4, 40)]);
    // Bad input refused before anything runs: the epoch number stays.
    let before = det.durable_epoch();
    let unknown = OneShot { proc: ProcId(9), input: Vec::new(), writes: vec![] };
    assert!(matches!(det.submit_epoch(&[unknown], 1), Err(Error::InvalidArgument(_))));
    let bad_table =
        OneShot { proc: ProcId(1), input: words(&[1, 1]), writes: vec![(TableId(7), 1)] };
    assert!(matches!(det.submit_epoch(&[bad_table], 1), Err(Error::UnknownTableId(7))));
    assert_eq!(det.durable_epoch(), before);
    engine.check_invariants().unwrap();
    engine.close().unwrap();
}

/// A batch whose inputs exceed the input log runs as consecutive epochs
/// in the same serial order (same outputs and state as in one epoch, cuts
/// counted); a transaction whose inputs alone do not fit is refused with
/// the numbers before anything of its batch runs.
#[test]
fn an_epoch_larger_than_the_input_log_is_split_and_one_transaction_too_large_refused() {
    // The transfers' inputs padded to 512 bytes: 560 logged bytes each, so
    // a one-page (64 KiB) log holds 116 of them, a 1 MiB log all 400.
    let padded = |t: OneShot| OneShot { input: [t.input, vec![0; 488]].concat(), ..t };
    let run = |log_bytes: u64, workers: usize| {
        let dir = tempfile::tempdir().unwrap();
        let config = EngineConfig { nvcaracal_log_bytes: log_bytes, ..cfg(dir.path()) };
        let engine = zen_engine::open(&config).unwrap();
        engine.create_table(&accounts()).unwrap();
        let det = engine.deterministic().unwrap();
        det.submit_epoch(&(0..12).map(|k| set(k, 100)).collect::<Vec<_>>(), 1).unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        let batch: Vec<OneShot> = (0..400)
            .map(|_| {
                let from = rng.random_range(0..12);
                padded(transfer(
                    from,
                    (from + rng.random_range(1..12)) % 12,
                    rng.random_range(1..80),
                ))
            })
            .collect();
        let out = det.submit_epoch(&batch, workers).unwrap();
        let outputs: Vec<String> = out.results.iter().map(|r| format!("{r:?}")).collect();
        assert_eq!(det.durable_epoch(), 1 + out.stats.parts);
        engine.check_invariants().unwrap();
        let state = dump(engine.as_ref(), T);
        engine.close().unwrap();
        (outputs, state, out.stats)
    };
    let (outputs, state, whole) = run(1 << 20, 2);
    assert_eq!((whole.parts, whole.log_cuts), (1, 0));
    for workers in [1, 2] {
        let (o, s, split) = run(4 << 10, workers);
        assert_eq!((split.parts, split.log_cuts), (4, 3), "400 / 116 per epoch: 4 epochs");
        assert_eq!(split.txns, 400);
        assert_eq!(o, outputs, "{workers} workers: split epochs, other outputs");
        assert_eq!(s, state, "{workers} workers: split epochs, another state");
    }

    let dir = tempfile::tempdir().unwrap();
    let config = EngineConfig { nvcaracal_log_bytes: 4 << 10, ..cfg(dir.path()) };
    let engine = zen_engine::open(&config).unwrap();
    engine.create_table(&accounts()).unwrap();
    let det = engine.deterministic().unwrap();
    let huge = OneShot { proc: ProcId(1), input: vec![0; 70 << 10], writes: vec![(T, 3)] };
    match det.submit_epoch(&[set(1, 1), set(2, 2), huge], 1) {
        Err(Error::EpochTooLarge { index, needed_bytes, capacity_bytes }) => {
            assert_eq!((index, capacity_bytes), (2, 64 << 10));
            assert_eq!(needed_bytes, 64 + 16 + 16 + (70 << 10));
        }
        other => panic!("expected EpochTooLarge, got {other:?}"),
    }
    assert_eq!(det.durable_epoch(), 0, "nothing of the batch ran");
    assert!(dump(engine.as_ref(), T).is_empty());
    engine.close().unwrap();
}

/// The cached versions (NVCaracal §4.2) change no result: the same outputs
/// and state with them on and off, on 1 and 2 workers.
#[test]
fn cached_versions_change_no_result() {
    let dir = tempfile::tempdir().unwrap();
    let reference = run_seeded_with(dir.path(), 1, 42, |c| c.nvcaracal_cached_versions = false);
    for (cached, workers) in [(true, 1), (true, 2), (false, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let r = run_seeded_with(dir.path(), workers, 42, |c| c.nvcaracal_cached_versions = cached);
        let what = format!("cached versions {cached}, {workers} workers");
        assert_eq!(r.state, reference.state, "{what}");
        assert_eq!(r.outputs, reference.outputs, "{what}");
        assert_eq!(r.cc_aborts, 0, "{what}");
    }
}

/// The minor collector (NVCaracal §4.4) changes no result: the same outputs
/// and state with it on and off (the major collector), on 1 and 2 workers;
/// each mode deletes stale versions only by its own collector.
#[test]
fn minor_gc_changes_no_result() {
    let dir = tempfile::tempdir().unwrap();
    let reference = run_seeded(dir.path(), 1, 42);
    assert!(reference.gc_minor > 0 && reference.gc_major == 0, "{reference:?}");
    for (minor, workers) in [(true, 2), (false, 1), (false, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let r = run_seeded_with(dir.path(), workers, 42, |c| c.nvcaracal_minor_gc = minor);
        let what = format!("minor GC {minor}, {workers} workers");
        assert_eq!(r.state, reference.state, "{what}");
        assert_eq!(r.outputs, reference.outputs, "{what}");
        assert_eq!(r.cc_aborts, 0, "{what}");
        if minor {
            assert_eq!((r.gc_minor, r.gc_major), (reference.gc_minor, 0), "{what}");
        } else {
            assert!(r.gc_minor == 0 && r.gc_major > 0, "{what}: {r:?}");
        }
    }
}

/// The two collectors counted exactly, epoch by epoch, on two engines run
/// side by side (one worker): the minor collector deletes a stale version
/// when a final write finds two (updates, a delete, an insert into a freed
/// slot); the major collector deletes the stale versions of the previous
/// epoch's slots in the init phase, costing exactly one more flushed line
/// and 8 bytes written per deleted version, one fence, and a 16-byte read
/// per listed slot, and its final writes then find an empty version. After
/// a reopen the scan lists the slots with two versions again.
#[test]
fn minor_and_major_gc_are_counted_exactly() {
    let mut p = procedures();
    p.register("del", |tx, input| {
        tx.delete(T, word(input, 0))?;
        Ok(Vec::new())
    })
    .unwrap();
    let del_id = p.id("del").unwrap();
    let del = |k: u64| OneShot { proc: del_id, input: words(&[k]), writes: vec![(T, k)] };
    let procs = Procedures::new(p);
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let configs = [true, false].map(|minor| EngineConfig {
        procedures: procs.clone(),
        nvcaracal_minor_gc: minor,
        ..cfg(dirs[usize::from(!minor)].path())
    });
    let engines = configs.clone().map(|c| zen_engine::open(&c).unwrap());
    for e in &engines {
        e.create_table(&accounts()).unwrap();
    }
    // (batch, minor collector's deletions, major collector's deletions,
    // slots the major collector looks at).
    let sets = |keys: std::ops::Range<u64>, v: i64| keys.map(|k| set(k, v)).collect::<Vec<_>>();
    let epochs: Vec<(Vec<OneShot>, u64, u64, u64)> = vec![
        // Inserts into fresh slots: one version each.
        (sets(0..8, 1), 0, 0, 0),
        // Each row's other version is empty: nothing to delete.
        (sets(0..8, 2), 0, 0, 8),
        // Two versions each: minor deletes at the write, major in init
        // (the 8 rows of the last epoch).
        (sets(0..4, 3), 4, 8, 8),
        (sets(0..2, 4), 2, 4, 4),
        // The delete's tombstone overwrites key 0's stale version; key 100
        // takes a fresh slot.
        (vec![del(0), set(100, 5)], 1, 2, 2),
        // Key 200 takes key 0's freed slot: tombstone + stale version
        // (minor), or the tombstone alone after the major collector.
        (vec![set(200, 6)], 1, 1, 2),
    ];
    for (i, (batch, minor, major, listed)) in epochs.into_iter().enumerate() {
        let mut seen = Vec::new();
        for e in &engines {
            let before = e.pmem_counters();
            let out = e.deterministic().unwrap().submit_epoch(&batch, 1).unwrap();
            assert!(out.results.iter().all(Result::is_ok), "epoch {i}: {:?}", out.results);
            let after = e.pmem_counters();
            e.check_invariants().unwrap();
            seen.push((out.stats, before, after));
        }
        let [(on, b0, a0), (off, b1, a1)] = <[_; 2]>::try_from(seen).unwrap();
        assert_eq!((on.gc_minor, on.gc_major), (minor, 0), "epoch {i}, minor GC on");
        assert_eq!((off.gc_minor, off.gc_major), (0, major), "epoch {i}, minor GC off");
        let d = |f: fn(&zen_pmem::CounterSnapshot) -> u64| {
            (f(&a1) - f(&b1)) as i64 - (f(&a0) - f(&b0)) as i64
        };
        assert_eq!(d(|c| c.lines_flushed), major as i64, "epoch {i}: lines flushed");
        assert_eq!(d(|c| c.bytes_written), 8 * major as i64, "epoch {i}: bytes written");
        assert_eq!(d(|c| c.fences), i64::from(major > 0), "epoch {i}: fences");
        assert_eq!(d(|c| c.bytes_read), 16 * listed as i64, "epoch {i}: bytes read");
    }
    let state = dump(engines[0].as_ref(), T);
    assert_eq!(dump(engines[1].as_ref(), T), state);
    assert_eq!(state.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6, 7, 100, 200]);
    // Reopened, the major collector's list is the scan's: the one slot with
    // two versions (key 200's: the tombstone and the new row).
    for (e, c) in engines.into_iter().zip(configs) {
        e.close().unwrap();
        let e = zen_engine::open(&EngineConfig { create: false, ..c }).unwrap();
        e.check_invariants().unwrap();
        let out = e.deterministic().unwrap().submit_epoch(&[set(200, 7)], 1).unwrap();
        let want = if c.nvcaracal_minor_gc { (1, 0) } else { (0, 1) };
        assert_eq!((out.stats.gc_minor, out.stats.gc_major), want, "after a reopen");
        e.check_invariants().unwrap();
        assert_eq!(dump(e.as_ref(), T).last(), Some(&(200, 7)));
        e.close().unwrap();
    }
}

/// What the cached versions read, fill, replace, drop and evict, counted
/// exactly (one worker): reads of rows an epoch does not write, rows it
/// updates and deletes, eviction after K epochs without a use, and the
/// bound. The invariants (N5: every entry is its committed row) hold after
/// every epoch; a reopened engine starts with none.
#[test]
fn cached_versions_save_nvm_reads_follow_updates_and_deletes_and_are_evicted() {
    let mut p = procedures();
    // read(keys…): the sum of the balances (absent rows count 0); writes nothing.
    p.register("read", |tx, input| {
        let mut buf = vec![0u8; ROW];
        let mut sum = 0i64;
        for i in 0..input.len() / 8 {
            if tx.get(T, word(input, i), &mut buf)? {
                sum += value(&buf);
            }
        }
        Ok(sum.to_le_bytes().to_vec())
    })
    .unwrap();
    p.register("delete", |tx, input| tx.delete(T, word(input, 0)).map(|()| Vec::new())).unwrap();
    let (read_id, delete_id) = (p.id("read").unwrap(), p.id("delete").unwrap());
    let read = |keys: &[u64]| OneShot { proc: read_id, input: words(keys), writes: vec![] };
    let delete = |k: u64| OneShot { proc: delete_id, input: words(&[k]), writes: vec![(T, k)] };
    let procs = Procedures::new(p);
    let dir = tempfile::tempdir().unwrap();
    let c =
        EngineConfig { procedures: procs.clone(), nvcaracal_cache_epochs: 3, ..cfg(dir.path()) };
    let engine = NvcaracalEngine::<FsBackend>::create(&c).unwrap();
    use zen_engine::DeterministicEngine;
    engine.create_table(&accounts()).unwrap();
    let row_bytes = ROW as u64;
    // One epoch on one worker: (outputs as sums, NVM bytes read, stats).
    let epoch = |txns: Vec<OneShot>| {
        let before = engine.pmem_counters().bytes_read;
        let out = engine.submit_epoch(&txns, 1).unwrap();
        let bytes = engine.pmem_counters().bytes_read - before;
        engine.check_invariants().unwrap();
        let sums: Vec<i64> = out
            .results
            .iter()
            .map(|r| {
                r.as_ref().map_or(i64::MIN, |v| if v.len() == 8 { word(v, 0) as i64 } else { 0 })
            })
            .collect();
        (sums, bytes, out.stats)
    };
    let all: Vec<u64> = (0..8).collect();
    // Epoch 1: inserts, nothing read or cached.
    let (_, read1, s) = epoch((0..8).map(|k| set(k, 10 * k as i64)).collect());
    assert_eq!((read1, s.cache_entries), (0, 0));
    // Epoch 2: each row read twice; the first read of each fills the cache.
    let (sums, bytes, s) = epoch(vec![read(&all), read(&all)]);
    assert_eq!(sums, vec![280, 280]);
    assert_eq!((bytes, s.cache_misses, s.cache_hits, s.cache_entries), (8 * row_bytes, 8, 8, 8));
    assert_eq!(
        s.cache_bytes,
        8 * (row_bytes + zen_engine::baseline::nvcaracal::CACHE_ENTRY_OVERHEAD)
    );
    // Epoch 3: read again, all from DRAM.
    let (sums, bytes, s) = epoch(vec![read(&all)]);
    assert_eq!((sums[0], bytes, s.cache_hits, s.cache_misses), (280, 0, 8, 0));
    // Epoch 4: transfers read their committed rows from the cache; the
    // final versions replace the entries; key 2 is deleted (entry dropped).
    // (1 → 0: 10 − 5, 0 + 5; 3 → 1: 30 − 7, 5 + 7 read from txn 0's version.)
    let (_, bytes, s) = epoch(vec![transfer(1, 0, 5), transfer(3, 1, 7), delete(2)]);
    assert_eq!((bytes, s.cache_misses, s.cache_hits, s.cache_entries), (0, 0, 3, 7));
    assert_eq!(s.failed, 0);
    // Epoch 5: the new balances, key 2 absent, nothing from NVM.
    let (sums, bytes, _) = epoch(vec![read(&[0, 1, 2, 3])]);
    assert_eq!((sums[0], bytes), (5 + 12 + 23, 0));
    // Epochs 6–9 read keys 0 and 1 only. K = 3: epoch e's init evicts what
    // epochs e − 3 … e − 1 did not use: keys 4..8 (last read in epoch 3)
    // at epoch 7, key 3 (last read in epoch 5) at epoch 9.
    let mut evicted = Vec::new();
    for _ in 6..=9 {
        let (_, bytes, s) = epoch(vec![read(&[0, 1])]);
        assert_eq!(bytes, 0);
        evicted.push(s.cache_evicted);
    }
    assert_eq!(evicted, vec![0, 4, 0, 1]);
    assert_eq!(engine.cache_counters().entries, 2);
    // Evicted rows are read from NVM again (and cached again).
    let (sums, bytes, s) = epoch(vec![read(&[3, 4, 5, 6, 7])]);
    assert_eq!(sums[0], 23 + 40 + 50 + 60 + 70);
    assert_eq!((bytes, s.cache_misses, s.cache_entries), (5 * row_bytes, 5, 7));
    let counters = engine.cache_counters();
    assert_eq!((counters.evicted, counters.refused), (5, 0));

    // Recovery starts with no cached version.
    engine.into_pool().unwrap().close().unwrap();
    let reopened =
        NvcaracalEngine::<FsBackend>::open(&EngineConfig { create: false, ..c.clone() }).unwrap();
    assert_eq!(
        reopened.cache_counters(),
        zen_engine::baseline::nvcaracal::CacheCounters::default()
    );
    let out = reopened.submit_epoch(&[read(&[0, 1])], 1).unwrap();
    assert_eq!((out.stats.cache_misses, out.stats.cache_entries), (2, 2));
    reopened.check_invariants().unwrap();
    reopened.into_pool().unwrap().close().unwrap();

    // The bound: a 64 KiB cache takes as many rows as fit, refuses the rest.
    let dir = tempfile::tempdir().unwrap();
    let small = EngineConfig { procedures: procs, cache_size_bytes: 64 << 10, ..cfg(dir.path()) };
    let engine = NvcaracalEngine::<FsBackend>::create(&small).unwrap();
    engine.create_table(&accounts()).unwrap();
    engine.submit_epoch(&(0..1500).map(|k| set(k, 1)).collect::<Vec<_>>(), 1).unwrap();
    let keys: Vec<u64> = (0..1500).collect();
    let out = engine.submit_epoch(&[read(&keys)], 1).unwrap();
    let cost = row_bytes + zen_engine::baseline::nvcaracal::CACHE_ENTRY_OVERHEAD;
    let fit = (64 << 10) / cost;
    assert!(fit < 1500, "{fit}");
    assert_eq!(out.results[0].as_ref().unwrap(), &1500i64.to_le_bytes().to_vec());
    assert_eq!((out.stats.cache_entries, out.stats.cache_refused), (fit, 1500 - fit));
    assert_eq!(out.stats.cache_bytes, fit * cost);
    engine.check_invariants().unwrap();
    engine.into_pool().unwrap().close().unwrap();
}

/// Load and run a contended epoch; returns the engine's state.
fn two_epochs(engine: &NvcaracalEngine<FsBackend>) -> Vec<(u64, i64)> {
    use zen_engine::DeterministicEngine;
    engine.create_table(&accounts()).unwrap();
    engine.submit_epoch(&(0..6).map(|k| set(k, 50)).collect::<Vec<_>>(), 1).unwrap();
    let batch: Vec<OneShot> = (0..60).map(|i| transfer(i % 6, (i * 5 + 1) % 6, 7)).collect();
    engine.submit_epoch(&batch, 2).unwrap();
    dump(engine, T)
}

#[test]
fn a_crash_after_the_seal_is_reverted_and_replayed() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path());
    let engine = NvcaracalEngine::<FsBackend>::create(&c).unwrap();
    let state = two_epochs(&engine);
    // The crash: epoch 2's rows and seal are durable, its mark is not.
    let meta = engine.pool().page_offset(engine.meta_page());
    let pool = engine.into_pool().unwrap();
    let p = pool.persister(0);
    assert_eq!(p.read_u64(meta + layout::META_EPOCH), 2);
    p.write_u64_atomic(meta + layout::META_EPOCH, 1);
    p.persist(meta + layout::META_EPOCH, 8);
    pool.abandon();
    let reopened = zen_engine::open(&EngineConfig { create: false, ..c.clone() }).unwrap();
    let report = reopened.recovery_report().unwrap();
    let phase = |n: &str| report.phases.iter().find(|p| p.name == n).unwrap().tuples;
    assert_eq!(phase("replay"), 60, "{report:?}");
    assert!(phase("revert") > 0 && report.uncommitted_discarded == phase("revert"));
    assert_eq!(dump(reopened.as_ref(), T), state, "replay reaches the crashed run's state");
    assert_eq!(reopened.deterministic().unwrap().durable_epoch(), 2);
    reopened.check_invariants().unwrap();
    // A clean reopen has nothing to replay.
    reopened.close().unwrap();
    let again = zen_engine::open(&EngineConfig { create: false, ..c }).unwrap();
    let report = again.recovery_report().unwrap();
    assert_eq!(report.uncommitted_discarded, 0);
    assert_eq!(dump(again.as_ref(), T), state);
    again.close().unwrap();
}

#[test]
fn a_corrupt_input_log_is_a_typed_error_and_leaves_the_pool_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path());
    let engine = NvcaracalEngine::<FsBackend>::create(&c).unwrap();
    two_epochs(&engine);
    let meta = engine.pool().page_offset(engine.meta_page());
    let log = engine.pool().page_offset(engine.log_pages()[0]);
    let pool = engine.into_pool().unwrap();
    let p = pool.persister(0);
    // Epoch 2 is sealed but not marked, and one payload byte is flipped.
    p.write_u64_atomic(meta + layout::META_EPOCH, 1);
    let mut byte = [0u8; 1];
    p.read(log + layout::LOG_HEADER + 3, &mut byte);
    p.write(log + layout::LOG_HEADER + 3, &[byte[0] ^ 0x40]);
    p.persist(0, pool.page_count() * pool.page_size());
    pool.abandon();
    let path = c.pool.clone().unwrap();
    let before = std::fs::read(&path).unwrap();
    let reopen = EngineConfig { create: false, ..c.clone() };
    match zen_engine::open(&reopen) {
        Err(Error::InputLogCorrupt { epoch, detail }) => {
            assert_eq!(epoch, 2);
            assert!(detail.contains("checksum"), "{detail}");
        }
        Err(other) => panic!("expected InputLogCorrupt, got {other}"),
        Ok(_) => panic!("a corrupt input log was replayed"),
    }
    assert!(std::fs::read(&path).unwrap() == before, "the refused recovery wrote to the pool");
    // Another procedure set: refused as well, before any write.
    let mut other = ProcedureSet::new();
    other.register("set", |_, _| Ok(Vec::new())).unwrap();
    let wrong = EngineConfig { procedures: Procedures::new(other), ..reopen };
    assert!(matches!(zen_engine::open(&wrong), Err(Error::InputLogCorrupt { .. })));
    assert!(std::fs::read(&path).unwrap() == before);
}

#[test]
fn interactive_transactions_run_as_one_transaction_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let engine = zen_engine::open(&cfg(dir.path())).unwrap();
    let t = engine.create_table(&accounts()).unwrap();
    let mut w = engine.worker().unwrap();
    w.run(&immediate(), |tx| (0..4).try_for_each(|k| tx.insert(t, k, &row(k as i64)))).unwrap();
    assert_eq!(engine.deterministic().unwrap().durable_epoch(), 1);
    let c = w
        .execute(&immediate(), &mut |tx| {
            tx.update(t, 1, &row(11))?;
            tx.delete(t, 2)
        })
        .unwrap();
    assert!(c.durable && c.cts == 2 && c.writes == 2);
    let err = w.execute(&immediate(), &mut |tx| tx.insert(t, 1, &row(0))).unwrap_err();
    assert!(matches!(err, Error::DuplicateKey { .. }), "{err}");
    assert_eq!(engine.deterministic().unwrap().durable_epoch(), 2, "a failed body runs no epoch");
    drop(w);
    assert_eq!(dump(engine.as_ref(), t), vec![(0, 0), (1, 11), (3, 3)]);
    engine.check_invariants().unwrap();
    engine.close().unwrap();
}

/// Row `k` of `t`'s balance, read in a transaction of its own on `w`.
fn read_one(w: &mut dyn zen_engine::EngineWorker, t: TableId, k: u64) -> i64 {
    w.run(&immediate(), |tx| {
        let mut buf = vec![0u8; ROW];
        assert!(tx.get(t, k, &mut buf)?);
        Ok(value(&buf))
    })
    .unwrap()
}

/// A worker's cache counters (`EngineWorker::cache_stats`) are the cached
/// versions' (NVCaracal §4.2) for its own reads and epochs: a committed row
/// read twice is one miss (read from NVM, then cached) and one hit; with
/// the cached versions off every read is a miss.
#[test]
fn a_workers_cache_stats_count_its_cached_version_hits_and_misses() {
    for cached in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let c = EngineConfig { nvcaracal_cached_versions: cached, ..cfg(dir.path()) };
        let engine = zen_engine::open(&c).unwrap();
        let t = engine.create_table(&accounts()).unwrap();
        let mut w = engine.worker().unwrap();
        w.run(&immediate(), |tx| (0..4).try_for_each(|k| tx.insert(t, k, &row(k as i64)))).unwrap();
        assert_eq!(w.cache_stats(), CacheStats::default(), "inserts read nothing");
        let read = |w: &mut dyn zen_engine::EngineWorker, k: u64| read_one(w, t, k);
        assert_eq!((read(w.as_mut(), 1), read(w.as_mut(), 1), read(w.as_mut(), 2)), (1, 1, 2));
        let s = w.cache_stats();
        let want = if cached { (1, 2) } else { (0, 3) };
        assert_eq!((s.hits, s.misses, s.evictions), (want.0, want.1, 0), "cached {cached}");
        // Another worker counts only its own reads.
        let mut other = engine.worker().unwrap();
        read(other.as_mut(), 2);
        let s = other.cache_stats();
        assert_eq!((s.hits, s.misses), if cached { (1, 0) } else { (0, 1) }, "cached {cached}");
        drop((w, other));
        engine.close().unwrap();
    }
}

/// Secondary indexes (DRAM, over the committed rows): maintained by every
/// epoch, merged with a transaction's own writes in `lookup_secondary`,
/// rebuilt from the rows by recovery (invariant N4 checks them).
#[test]
fn secondary_indexes_follow_the_epochs_and_are_rebuilt_by_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path());
    let engine = zen_engine::open(&c).unwrap();
    let t = engine.create_table(&owners()).unwrap();
    let owner_row = |owner: u64, balance: i64| {
        let mut r = owner.to_le_bytes().to_vec();
        r.extend_from_slice(&balance.to_le_bytes());
        r
    };
    let lookup = |engine: &dyn Engine, owner: u64| {
        let mut w = engine.worker().unwrap();
        w.run(&immediate(), |tx| {
            let mut out = Vec::new();
            tx.lookup_secondary(t, 0, &owner.to_le_bytes(), 100, &mut out)?;
            Ok(out)
        })
        .unwrap()
    };
    let mut w = engine.worker().unwrap();
    w.run(&immediate(), |tx| (0..20u64).try_for_each(|k| tx.insert(t, k, &owner_row(k % 4, 0))))
        .unwrap();
    // Inside a transaction: its own update, delete and insert are seen.
    let seen = w
        .run(&immediate(), |tx| {
            tx.update(t, 5, &owner_row(2, 0))?;
            tx.delete(t, 9)?;
            tx.insert(t, 21, &owner_row(1, 0))?;
            let mut out = Vec::new();
            tx.lookup_secondary(t, 0, &1u64.to_le_bytes(), 3, &mut out)?;
            Ok(out)
        })
        .unwrap();
    assert_eq!(seen, vec![1, 13, 17]);
    let bad = w.run(&immediate(), |tx| tx.lookup_secondary(t, 3, &[], 1, &mut Vec::new()));
    assert!(matches!(bad, Err(Error::InvalidSchema { .. })), "{bad:?}");
    drop(w);
    assert_eq!(lookup(engine.as_ref(), 1), vec![1, 13, 17, 21]);
    assert_eq!(lookup(engine.as_ref(), 2), vec![2, 5, 6, 10, 14, 18]);
    engine.check_invariants().unwrap();
    engine.close().unwrap();
    let reopened = zen_engine::open(&EngineConfig { create: false, ..c }).unwrap();
    assert_eq!(lookup(reopened.as_ref(), 1), vec![1, 13, 17, 21]);
    assert_eq!(lookup(reopened.as_ref(), 2), vec![2, 5, 6, 10, 14, 18]);
    reopened.check_invariants().unwrap();
    reopened.close().unwrap();
}

/// Index upkeep after an epoch needs no NVM read of the old row when the
/// epoch read that row itself (the committed row is kept for tables with
/// secondary indexes): read-modify-write epochs read each row once, whether
/// the indexed column stays or changes; a blind write reads the old row
/// once, for the upkeep. Lookups, the invariants (N4) and a recovery agree.
#[test]
fn secondary_index_upkeep_reads_the_old_row_only_when_the_epoch_did_not() {
    // Cached versions off: every committed-row read goes to NVM.
    upkeep_reads(false, [8, 4, 2]);
    // On: the bump epoch's reads fill the cache and its final versions
    // replace the entries, so the later epochs (their procedures' reads and
    // the blind writes' upkeep) read nothing from NVM.
    upkeep_reads(true, [8, 0, 0]);
}

/// The upkeep scenario with the cached versions `cached`; `rows`: the
/// rows read from NVM by the bump, move and blind-write epochs.
fn upkeep_reads(cached: bool, rows: [u64; 3]) {
    let owner_row = |owner: u64, balance: i64| words(&[owner, balance as u64]);
    let mut p = ProcedureSet::new();
    // bump(k): balance + 1; move(k, owner): read, new owner; put(k, owner): blind.
    p.register("bump", move |tx, input| {
        let k = word(input, 0);
        let mut r = vec![0u8; 16];
        tx.get(T, k, &mut r)?;
        tx.put(T, k, &owner_row(word(&r, 0), word(&r, 1) as i64 + 1))?;
        Ok(Vec::new())
    })
    .unwrap();
    p.register("move", move |tx, input| {
        let (k, owner) = (word(input, 0), word(input, 1));
        let mut r = vec![0u8; 16];
        tx.get(T, k, &mut r)?;
        tx.put(T, k, &owner_row(owner, word(&r, 1) as i64))?;
        Ok(Vec::new())
    })
    .unwrap();
    p.register("put", move |tx, input| {
        tx.put(T, word(input, 0), &owner_row(word(input, 1), 0))?;
        Ok(Vec::new())
    })
    .unwrap();
    let [bump, mv, put] = ["bump", "move", "put"].map(|n| p.id(n).unwrap());
    let one = |proc: ProcId, k: u64, v: u64| OneShot {
        proc,
        input: words(&[k, v]),
        writes: vec![(T, k)],
    };
    let dir = tempfile::tempdir().unwrap();
    let c = EngineConfig {
        procedures: Procedures::new(p),
        nvcaracal_cached_versions: cached,
        ..cfg(dir.path())
    };
    let engine = zen_engine::open(&c).unwrap();
    assert_eq!(engine.create_table(&owners()).unwrap(), T);
    let row_bytes = owners().row_size() as u64;
    let lookup = |engine: &dyn Engine, owner: u64| {
        let mut w = engine.worker().unwrap();
        w.run(&immediate(), |tx| {
            let mut out = Vec::new();
            tx.lookup_secondary(T, 0, &owner.to_le_bytes(), 100, &mut out)?;
            Ok(out)
        })
        .unwrap()
    };
    let det = engine.deterministic().unwrap();
    let epoch = |txns: Vec<OneShot>| {
        let before = engine.pmem_counters().bytes_read;
        let out = det.submit_epoch(&txns, 2).unwrap();
        assert!(out.results.iter().all(Result::is_ok), "{:?}", out.results);
        engine.pmem_counters().bytes_read - before
    };
    // Inserts read nothing.
    assert_eq!(epoch((0..8).map(|k| one(put, k, k % 2)).collect()), 0);
    // Read-modify-write, owner kept: one read per row (the procedure's).
    assert_eq!(epoch((0..8).map(|k| one(bump, k, 0)).collect()), rows[0] * row_bytes);
    // Read-modify-write, owner changed: still one read per row.
    assert_eq!(epoch((0..4).map(|k| one(mv, k, 5)).collect()), rows[1] * row_bytes);
    // Blind writes, owner changed: the upkeep reads each old row once.
    assert_eq!(epoch((4..6).map(|k| one(put, k, 7)).collect()), rows[2] * row_bytes);
    assert_eq!(lookup(engine.as_ref(), 5), vec![0, 1, 2, 3]);
    assert_eq!(lookup(engine.as_ref(), 7), vec![4, 5]);
    assert_eq!(lookup(engine.as_ref(), 0), vec![6]);
    assert_eq!(lookup(engine.as_ref(), 1), vec![7]);
    engine.check_invariants().unwrap();
    engine.close().unwrap();
    let reopened = zen_engine::open(&EngineConfig { create: false, ..c }).unwrap();
    assert_eq!(lookup(reopened.as_ref(), 5), vec![0, 1, 2, 3]);
    assert_eq!(lookup(reopened.as_ref(), 7), vec![4, 5]);
    reopened.check_invariants().unwrap();
    reopened.close().unwrap();
}
