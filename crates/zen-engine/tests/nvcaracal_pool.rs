//! nvcaracal's persistent value pool (NVCaracal §5.5): rows that do not fit
//! a 256-byte persistent row's inline heap (104 bytes a version) live in
//! values of the table's pool, named by their versions. Counted exactly
//! (values allocated and freed, the major collector that frees them, the
//! minor collector kept for the inline table beside it); the same results
//! and state with inline-only and pooled layouts on 1 and 2 workers; a
//! crashed epoch's allocations reverted with no leak (free + live =
//! capacity); a corrupt value offset is a typed error on open; recovery's
//! `bytes_scanned` is the bytes it read, exactly. (Crash
//! campaigns: `crates/zen-workload/tests/crash_epochs.rs`.)

mod baseline_common;

use baseline_common::*;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use zen_engine::baseline::NvcaracalEngine;
use zen_engine::baseline::nvcaracal::{ValuePool, layout};
use zen_engine::{
    ColumnType, DeterministicEngine, Engine, EngineConfig, EngineKind, Error, OneShot, ProcId,
    ProcedureSet, Procedures, TableId, TableSchema, user_abort,
};
use zen_pmem::{FsBackend, PmemBackend};

/// The pooled table (200-byte rows) and an inline one (`accounts`, 32).
const BIG: TableId = TableId(0);
const SMALL: TableId = TableId(1);
const BIG_ROW: usize = 200;

fn blobs() -> TableSchema {
    TableSchema::new("blobs")
        .column("balance", ColumnType::I64)
        .column("pad", ColumnType::Bytes(192))
}

/// A 200-byte row whose every byte depends on `v` (so a value read from the
/// wrong place shows).
/// Drop `e` as a crash would, after durably storing `value` at pool offset
/// `at`: a crash image with one word changed.
fn crash_with_word(e: NvcaracalEngine<FsBackend>, at: u64, value: u64) {
    let pool = e.into_pool().unwrap();
    let p = pool.persister(0);
    p.write_u64_atomic(at, value);
    p.persist(at, 8);
    pool.abandon();
}

fn big(v: i64) -> Vec<u8> {
    let mut r: Vec<u8> = (0..BIG_ROW).map(|i| (i as u8).wrapping_mul(31) ^ v as u8).collect();
    r[..8].copy_from_slice(&v.to_le_bytes());
    r
}

fn word(input: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(input[i * 8..i * 8 + 8].try_into().unwrap())
}

fn words(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// set(table, key, value); transfer(from, to, amount) on BIG, aborting on
/// overdraft; del(table, key).
fn procedures() -> ProcedureSet {
    let mut p = ProcedureSet::new();
    p.register("set", |tx, input| {
        let (t, k, v) = (TableId(word(input, 0) as u32), word(input, 1), word(input, 2) as i64);
        tx.put(t, k, &if t == BIG { big(v) } else { row(v) })?;
        Ok(Vec::new())
    })
    .unwrap();
    p.register("transfer", |tx, input| {
        let (from, to, amount) = (word(input, 0), word(input, 1), word(input, 2) as i64);
        let mut buf = vec![0u8; BIG_ROW];
        let a = if tx.get(BIG, from, &mut buf)? { value(&buf) } else { 0 };
        assert!(a == 0 || buf == big(a), "row {from} read back whole");
        let b = if tx.get(BIG, to, &mut buf)? { value(&buf) } else { 0 };
        if a < amount {
            return Err(user_abort());
        }
        tx.put(BIG, from, &big(a - amount))?;
        tx.put(BIG, to, &big(b + amount))?;
        Ok(a.to_le_bytes().to_vec())
    })
    .unwrap();
    p.register("del", |tx, input| {
        tx.delete(TableId(word(input, 0) as u32), word(input, 1))?;
        Ok(Vec::new())
    })
    .unwrap();
    p
}

fn set(t: TableId, k: u64, v: i64) -> OneShot {
    OneShot { proc: ProcId(1), input: words(&[u64::from(t.0), k, v as u64]), writes: vec![(t, k)] }
}

fn transfer(from: u64, to: u64, amount: u64) -> OneShot {
    OneShot {
        proc: ProcId(2),
        input: words(&[from, to, amount]),
        writes: vec![(BIG, from), (BIG, to)],
    }
}

fn del(t: TableId, k: u64) -> OneShot {
    OneShot { proc: ProcId(3), input: words(&[u64::from(t.0), k]), writes: vec![(t, k)] }
}

fn cfg(dir: &std::path::Path, row_bytes: u64) -> EngineConfig {
    EngineConfig {
        nvcaracal_log_bytes: 1 << 20,
        nvcaracal_row_bytes: row_bytes,
        procedures: Procedures::new(procedures()),
        ..config(EngineKind::Nvcaracal, dir, true)
    }
}

/// Every (key, row) of BIG, whole.
fn rows(engine: &dyn Engine) -> Vec<(u64, Vec<u8>)> {
    let mut w = engine.worker().unwrap();
    w.run(&Default::default(), |tx| {
        let mut out = Vec::new();
        tx.scan(BIG, 0..=u64::from(u32::MAX), usize::MAX, &mut |k, r| {
            out.push((k, r.to_vec()));
            true
        })?;
        Ok(out)
    })
    .unwrap()
}

fn create(c: &EngineConfig) -> NvcaracalEngine<FsBackend> {
    let e = NvcaracalEngine::<FsBackend>::create(c).unwrap();
    assert_eq!(e.create_table(&blobs()).unwrap(), BIG);
    assert_eq!(e.create_table(&accounts()).unwrap(), SMALL);
    e
}

/// The one pooled table's pool, checked (N7) and counted.
fn pool_of(e: &NvcaracalEngine<FsBackend>) -> ValuePool {
    e.check_invariants().unwrap();
    let pools = e.value_pool().unwrap();
    assert_eq!(pools.len(), 1, "{pools:?}");
    assert_eq!(pools[0].free + pools[0].live, pools[0].capacity, "{pools:?}");
    pools[0]
}

/// Epoch by epoch on one worker: values allocated by final writes, freed
/// by the major collector in the next init phase (minor GC is on: the
/// inline table beside it is collected by final writes), the pool's live
/// and free counts after each epoch, and the NVM bytes of a pooled final
/// write (24 bytes of version, the 200-byte value, 2 + 4 lines).
#[test]
fn values_allocated_and_freed_are_counted_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), 256);
    let e = create(&c);
    let page_values = (64 << 10) / 256;
    // (batch, values allocated, freed, major, minor, live values after).
    let epochs: Vec<(Vec<OneShot>, u64, u64, u64, u64, u64)> = vec![
        // 8 pooled inserts, 4 inline ones.
        (
            (0..8).map(|k| set(BIG, k, 1)).chain((0..4).map(|k| set(SMALL, k, 1))).collect(),
            8,
            0,
            0,
            0,
            8,
        ),
        // Updates: the pooled rows' other versions are empty (the 8 listed
        // slots hold one version each); the inline rows too.
        (
            (0..8).map(|k| set(BIG, k, 2)).chain((0..4).map(|k| set(SMALL, k, 2))).collect(),
            8,
            0,
            0,
            0,
            16,
        ),
        // The 8 pooled slots hold two versions: the major collector
        // deletes 8 and frees their values; 4 updates allocate 4 (reusing
        // freed ones). The inline rows' stale versions go by minor GC.
        (
            (0..4).map(|k| set(BIG, k, 3)).chain((0..4).map(|k| set(SMALL, k, 3))).collect(),
            4,
            8,
            8,
            4,
            12,
        ),
        // A delete (tombstone: no value) and an insert; the 4 rows of the
        // last epoch lose their stale versions.
        (vec![del(BIG, 0), set(BIG, 100, 5)], 1, 4, 4, 0, 9),
        // Key 0's slot: tombstone + its old value, collected (one value
        // freed); key 100's slot has one version. Key 200 takes a slot.
        (vec![set(BIG, 200, 6)], 1, 1, 1, 0, 9),
    ];
    for (i, (batch, alloc, freed, major, minor, live)) in epochs.into_iter().enumerate() {
        let out = e.submit_epoch(&batch, 1).unwrap();
        assert!(out.results.iter().all(Result::is_ok), "epoch {i}: {:?}", out.results);
        let s = &out.stats;
        assert_eq!(
            (s.values_allocated, s.values_freed, s.gc_major, s.gc_minor),
            (alloc, freed, major, minor),
            "epoch {i}"
        );
        let pool = pool_of(&e);
        assert_eq!((pool.capacity, pool.live), (page_values, live), "epoch {i}: {pool:?}");
    }
    // One pooled final write, alone: version header + offset (24 bytes, one
    // line) and the value (200 bytes, 4 lines), the mark, the log; the
    // major collector deletes key 0's tombstone (key 200 wrote the slot's
    // other version): 8 bytes, no value freed.
    let before = e.pmem_counters();
    let out = e.submit_epoch(&[set(BIG, 7, 9)], 1).unwrap();
    let d = e.pmem_counters().since(&before);
    let s = &out.stats;
    assert_eq!((s.values_allocated, s.values_freed, s.gc_major), (1, 0, 1));
    // log (header + entry) + seal 8 + collector 8 + version 24 + value 200
    // + mark 8.
    assert_eq!(d.bytes_written, s.log_bytes + 8 + 8 + 24 + 200 + 8, "{d:?}");
    let log_lines = s.log_bytes.div_ceil(64);
    assert_eq!(d.lines_flushed, log_lines + 1 + 1 + 1 + 4 + 1, "{d:?}");
    let mut expect: Vec<(u64, Vec<u8>)> =
        vec![(1, big(3)), (2, big(3)), (3, big(3)), (4, big(2)), (5, big(2)), (6, big(2))];
    expect.push((7, big(9)));
    expect.extend([(100, big(5)), (200, big(6))]);
    assert_eq!(rows(&e), expect);
    // Reopened: the pool is rebuilt from the slots (the same counts) and
    // the scan lists the pooled slots with two versions for the collector.
    let live = pool_of(&e).live;
    Box::new(e).close().unwrap();
    let e = NvcaracalEngine::<FsBackend>::open(&EngineConfig { create: false, ..c }).unwrap();
    assert_eq!(pool_of(&e).live, live);
    assert_eq!(rows(&e), expect);
    let out = e.submit_epoch(&[set(BIG, 1, 10)], 1).unwrap();
    // Key 7's slot (two versions after the epoch above) is collected.
    assert_eq!((out.stats.gc_major, out.stats.values_freed, out.stats.values_allocated), (1, 1, 1));
    Box::new(e).close().unwrap();
}

/// Seeded transfers among 12 pooled rows, with deletes and re-inserts, on
/// the inline-only layout and the pooled one, 1 and 2 workers, minor GC on
/// and off: the same outputs and final rows; no value leaks.
#[test]
fn inline_only_and_pooled_layouts_give_the_same_results() {
    let run = |row_bytes: u64, workers: usize, minor: bool| {
        let dir = tempfile::tempdir().unwrap();
        let c = EngineConfig { nvcaracal_minor_gc: minor, ..cfg(dir.path(), row_bytes) };
        let e = create(&c);
        let load = e
            .submit_epoch(&(0..12).map(|k| set(BIG, k, 100)).collect::<Vec<_>>(), workers)
            .unwrap();
        let mut rng = SmallRng::seed_from_u64(11);
        let mut outputs = Vec::new();
        let (mut alloc, mut freed) = (load.stats.values_allocated, 0);
        for round in 0..4u64 {
            let mut batch: Vec<OneShot> = (0..300)
                .map(|_| {
                    let from = rng.random_range(0..12);
                    let to = (from + rng.random_range(1..12)) % 12;
                    transfer(from, to, rng.random_range(1..80))
                })
                .collect();
            batch.push(del(BIG, round));
            batch.push(set(BIG, 50 + round, round as i64));
            let out = e.submit_epoch(&batch, workers).unwrap();
            outputs.extend(out.results.iter().map(|r| format!("{r:?}")));
            alloc += out.stats.values_allocated;
            freed += out.stats.values_freed;
            e.check_invariants().unwrap();
        }
        let state = rows(&e);
        let pools = e.value_pool().unwrap();
        if row_bytes == 0 {
            assert!(pools.is_empty() && alloc == 0 && freed == 0);
        } else {
            assert_eq!(pools[0].live, alloc - freed, "{pools:?}");
            assert_eq!(pools[0].free + pools[0].live, pools[0].capacity);
        }
        Box::new(e).close().unwrap();
        (outputs, state)
    };
    let reference = run(0, 1, true);
    assert!(reference.1.iter().any(|(k, _)| *k >= 50), "the inserts are there");
    for (row_bytes, workers, minor) in
        [(0, 2, true), (256, 1, true), (256, 2, true), (256, 1, false), (256, 2, false)]
    {
        let got = run(row_bytes, workers, minor);
        let what = format!("row bytes {row_bytes}, {workers} workers, minor GC {minor}");
        assert!(got.0 == reference.0, "{what}: outputs differ");
        assert!(got.1 == reference.1, "{what}: final rows differ");
    }
}

/// A crash after epoch 3's rows are durable, before its mark: recovery
/// reverts its versions, so the values they name are free again; the
/// replay allocates anew; free + live = capacity, and the state is the
/// crashed run's. Then the same with the crash inside the major collector
/// (epoch 3's init deleted a stale version; the mark of epoch 3 is lost).
#[test]
fn a_crashed_epochs_value_allocations_are_reverted_without_a_leak() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), 256);
    let e = create(&c);
    e.submit_epoch(&(0..6).map(|k| set(BIG, k, 50)).collect::<Vec<_>>(), 1).unwrap();
    e.submit_epoch(&(0..6).map(|k| transfer(k, (k + 1) % 6, 7)).collect::<Vec<_>>(), 2).unwrap();
    let before = pool_of(&e);
    let out = e
        .submit_epoch(&(0..60).map(|i| transfer(i % 6, (i * 5 + 1) % 6, 3)).collect::<Vec<_>>(), 2)
        .unwrap();
    assert_eq!((out.stats.values_freed, out.stats.values_allocated), (6, 6));
    let state = rows(&e);
    let meta = e.pool().page_offset(e.meta_page());
    crash_with_word(e, meta + layout::META_EPOCH, 2);
    let r =
        NvcaracalEngine::<FsBackend>::open(&EngineConfig { create: false, ..c.clone() }).unwrap();
    let report = r.recovery_report().unwrap();
    assert_eq!(report.uncommitted_discarded, 6, "{report:?}");
    assert_eq!(rows(&r), state);
    let after = pool_of(&r);
    // Epoch 2's 6 stale values were freed (non-revertibly) by epoch 3's
    // collector before the crash; the replay freed none and allocated 6.
    assert_eq!(after.live, before.live, "{before:?} -> {after:?}");
    assert_eq!(r.durable_epoch(), 3);
    Box::new(r).close().unwrap();
}

/// A corrupt value offset in a version (off the pool, misaligned, or a
/// value named twice) is `Corrupt` on open, never a panic.
#[test]
fn a_corrupt_value_pointer_is_a_typed_error_on_open() {
    for (what, corrupt) in [
        ("off the pool", u64::MAX - 7),
        ("on a slot page", 0),
        ("misaligned", 8),
        ("named twice", 1),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let c = cfg(dir.path(), 256);
        let e = create(&c);
        e.submit_epoch(&(0..4).map(|k| set(BIG, k, 1)).collect::<Vec<_>>(), 1).unwrap();
        let slot_page = e.pool().owned_pages().unwrap();
        let slots = slot_page
            .iter()
            .find(|(_, o)| o.table == BIG.0 && o.worker == 0)
            .map(|(p, _)| e.pool().page_offset(*p))
            .unwrap();
        let lay = layout::SlotLayout::new(BIG_ROW, 256);
        let pointer = |slot: u64| slots + slot * lay.size + lay.version_offset(0) + 16;
        let b = e.pool().backend();
        let (first, second) = (b.load_u64(pointer(0)), b.load_u64(pointer(1)));
        assert_ne!(first, second);
        let bad = match corrupt {
            0 => slots,
            8 => second + 8,
            1 => second,
            other => other,
        };
        crash_with_word(e, pointer(0), bad);
        match NvcaracalEngine::<FsBackend>::open(&EngineConfig { create: false, ..c }) {
            Err(Error::Corrupt(m)) => assert!(m.contains("blobs"), "{what}: {m}"),
            Err(other) => panic!("{what}: expected Corrupt, got {other}"),
            Ok(_) => panic!("{what}: a corrupt value offset was accepted"),
        }
    }
}

/// Bad configuration and bad meta words are typed errors.
#[test]
fn bad_row_sizes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let c = EngineConfig { nvcaracal_row_bytes: 100, ..cfg(dir.path(), 256) };
    assert!(matches!(zen_engine::open(&c), Err(Error::InvalidConfig(_))));
    // A 64-byte persistent row: versions of 24 bytes, every row pooled.
    let c = cfg(dir.path(), 64);
    let e = create(&c);
    e.submit_epoch(&[set(SMALL, 1, 5), set(BIG, 1, 5)], 1).unwrap();
    assert_eq!(e.value_pool().unwrap().len(), 2);
    assert_eq!(dump(&e, SMALL), [(1, 5)]);
    let meta = e.pool().page_offset(e.meta_page());
    crash_with_word(e, meta + layout::META_ROW_BYTES, 3);
    let reopen = EngineConfig { create: false, ..c };
    assert!(matches!(NvcaracalEngine::<FsBackend>::open(&reopen), Err(Error::Corrupt(_))));
}

/// `RecoveryReport::bytes_scanned` is what recovery read from the pool's
/// data, exactly: the meta page's five words and 16 log page ids (1 MiB of
/// input log), then for each of the 4 tables' one slot page (256 slots of
/// 256 bytes) both epoch words of every slot, the flags of every version
/// kept, the value offset of every pooled live version, the key of every
/// live row, and the rows of the two tables with a secondary index (the
/// pooled one through its value's offset). A crash after the seal adds the
/// input log read (header and payload).
#[test]
fn recovery_counts_the_bytes_it_reads_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let c = cfg(dir.path(), 256);
    let e = create(&c);
    // Pooled (200-byte rows) and inline (32) tables with a secondary index.
    let indexed = |name: &str, pad: u16| {
        TableSchema::new(name)
            .column("balance", ColumnType::I64)
            .column("pad", ColumnType::Bytes(pad))
            .secondary_index("by_balance", &["balance"])
    };
    let ibig = e.create_table(&indexed("indexed_blobs", 192)).unwrap();
    let ismall = e.create_table(&indexed("indexed_accounts", 24)).unwrap();
    {
        let mut w = e.worker().unwrap();
        w.run(&immediate(), |tx| {
            for k in 0..8 {
                tx.insert(BIG, k, &big(1))?;
            }
            for k in 0..4 {
                tx.insert(SMALL, k, &row(1))?;
            }
            for k in 0..3 {
                tx.insert(ibig, k, &big(1))?;
            }
            for k in 0..2 {
                tx.insert(ismall, k, &row(1))?;
            }
            Ok(())
        })
        .unwrap();
        // The next epoch: a second version in 4 BIG slots and 1 ismall slot.
        w.run(&immediate(), |tx| {
            for k in 0..4 {
                tx.update(BIG, k, &big(2))?;
            }
            tx.update(ismall, 0, &row(2))
        })
        .unwrap();
    }
    let meta = e.pool().page_offset(e.meta_page());
    Box::new(e).close().unwrap();

    let meta_bytes = 5 * 8 + 16 * 8;
    let slots = 4 * 256;
    let kept = (8 + 4) + 4 + 3 + (2 + 1);
    let pooled_live = (8 + 4) + 3;
    let live = 8 + 4 + 3 + 2;
    let indexed_rows = 3 * (8 + BIG_ROW as u64) + 2 * ROW as u64;
    let scan = slots * 16 + kept * 8 + pooled_live * 8 + live * 8 + indexed_rows;
    assert_eq!(scan, 17_504);
    let r =
        NvcaracalEngine::<FsBackend>::open(&EngineConfig { create: false, ..c.clone() }).unwrap();
    let report = r.recovery_report().unwrap();
    let phase = |report: &zen_engine::RecoveryReport, n: &str| {
        report.phases.iter().find(|p| p.name == n).unwrap().bytes
    };
    assert_eq!((report.pages_scanned, report.slots_scanned), (4, slots), "{report:?}");
    assert_eq!(report.tuples_recovered, live, "{report:?}");
    assert_eq!(phase(&report, "load-log"), meta_bytes, "{report:?}");
    assert_eq!(phase(&report, "scan"), scan, "{report:?}");
    assert_eq!(report.bytes_scanned, meta_bytes + scan, "{report:?}");

    // One more epoch (2 BIG updates; the major collector deletes the 4
    // stale versions first), then a crash after its seal: the mark is
    // rolled back, so recovery reads the log of 1 transaction and reverts
    // the 2 versions the epoch wrote.
    let batch = vec![set(BIG, 6, 3), set(BIG, 7, 3)];
    let out = r.submit_epoch(&batch, 1).unwrap();
    assert_eq!(out.stats.gc_major, 4);
    let epoch = r.durable_epoch();
    let payload =
        layout::encode_payload(batch.iter().map(|t| (t.proc.0, &t.writes[..], &t.input[..])));
    crash_with_word(r, meta + layout::META_EPOCH, epoch - 1);
    let r = NvcaracalEngine::<FsBackend>::open(&EngineConfig { create: false, ..c }).unwrap();
    let report = r.recovery_report().unwrap();
    assert_eq!(report.uncommitted_discarded, 2, "{report:?}");
    // The 4 collected slots hold one version each (kept - 4); keys 6 and 7
    // hold their old version (kept) and the reverted new one: the scan reads
    // no flags or offset of a version being reverted.
    let scan = slots * 16 + (kept - 4) * 8 + (pooled_live - 4) * 8 + live * 8 + indexed_rows;
    assert_eq!(phase(&report, "scan"), scan, "{report:?}");
    let log = layout::LOG_HEADER + payload.len() as u64;
    assert_eq!(phase(&report, "load-log"), meta_bytes + log, "{report:?}");
    assert_eq!(report.bytes_scanned, meta_bytes + log + scan, "{report:?}");
    Box::new(r).close().unwrap();
}
