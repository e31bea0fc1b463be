//! One-shot YCSB on nvcaracal (`zen_workload::oneshot`): epochs commit
//! every transaction with no concurrency-control aborts, the rows keep the
//! workload's own check, the same seed gives the same table on 1 and 2
//! workers, and a core workload with inserts has no one-shot form.

use std::time::Duration;

use zen_engine::{Engine, EngineConfig, EngineKind, ProcedureSet, Procedures};
use zen_pmem::BackendKind;
use zen_workload::oneshot::{register_ycsb, run_epochs, ycsb_oneshot};
use zen_workload::{CoreWorkload, PaperMix, Workload, Ycsb, YcsbConfig};

fn engine() -> Box<dyn Engine> {
    let mut set = ProcedureSet::new();
    register_ycsb(&mut set).unwrap();
    zen_engine::open(&EngineConfig {
        engine: EngineKind::Nvcaracal,
        pmem: BackendKind::Dram,
        pool_size_bytes: 64 << 20,
        page_size_bytes: 64 << 10,
        nvcaracal_log_bytes: 4 << 20,
        max_workers: 8,
        procedures: Procedures::new(set),
        ..EngineConfig::default()
    })
    .unwrap()
}

fn ycsb() -> Ycsb {
    let mut c = YcsbConfig::paper(256, PaperMix::WH, 0.99);
    c.requests = 8;
    Ycsb::new(c).unwrap()
}

fn table_hash(engine: &dyn Engine) -> Vec<(u64, u64)> {
    let t = engine.table_id(zen_workload::ycsb::TABLE).unwrap();
    let mut w = engine.worker().unwrap();
    w.run(&Default::default(), |tx| {
        let mut out = Vec::new();
        tx.scan(t, 0..=zen_engine::schema::MAX_KEY, usize::MAX, &mut |k, r| {
            out.push((
                k,
                r.iter().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(*b))),
            ));
            true
        })?;
        Ok(out)
    })
    .unwrap()
}

#[test]
fn epochs_commit_everything_without_cc_aborts_and_deterministically() {
    let mut tables = Vec::new();
    for workers in [1, 2] {
        let e = engine();
        let y = ycsb();
        y.load(e.as_ref(), 1).unwrap();
        let det = e.deterministic().unwrap();
        let proc = det.procedures().id("ycsb").unwrap();
        let t = e.table_id(zen_workload::ycsb::TABLE).unwrap();
        let mut local = y.local(e.as_ref(), 0, 1).unwrap();
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(7);
        for _ in 0..4 {
            let batch: Vec<_> = (0..200)
                .map(|_| ycsb_oneshot(t, proc, &y.next(&mut local, &mut rng)).unwrap())
                .collect();
            let out = det.submit_epoch(&batch, workers).unwrap();
            assert_eq!((out.stats.failed, out.stats.cc_aborts), (0, 0), "{:?}", out.stats);
            assert!(out.stats.rows_persisted < out.stats.versions, "hot rows persist once");
        }
        assert!(y.check(e.as_ref()).unwrap().passed());
        e.check_invariants().unwrap();
        tables.push(table_hash(e.as_ref()));
        let result =
            run_epochs(e.as_ref(), &y, 100, workers, Duration::ZERO, Duration::from_millis(50), 3)
                .unwrap();
        let run = result.epochs.clone().expect("an epoch run reports its epochs");
        assert!(run.committed > 0 && run.failed == 0 && run.cc_aborts == 0, "{run:?}");
        assert!(run.latency_p50_us > 0.0 && run.fences_per_commit > 0.0, "{run:?}");
        assert_eq!(result.stats.commits, run.committed);
        e.close().unwrap();
    }
    assert_eq!(tables[0], tables[1], "1 and 2 workers reach the same table");
}

#[test]
fn core_workloads_with_inserts_have_no_one_shot_form() {
    let e = engine();
    let mut c = YcsbConfig::core(256, CoreWorkload::D);
    c.requests = 4;
    let y = Ycsb::new(c).unwrap();
    y.load(e.as_ref(), 1).unwrap();
    let t = e.table_id(zen_workload::ycsb::TABLE).unwrap();
    let mut local = y.local(e.as_ref(), 0, 1).unwrap();
    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(1);
    let proc = e.deterministic().unwrap().procedures().id("ycsb").unwrap();
    let refused = (0..200).any(|_| ycsb_oneshot(t, proc, &y.next(&mut local, &mut rng)).is_err());
    assert!(refused, "workload D inserts");
    e.close().unwrap();
}
