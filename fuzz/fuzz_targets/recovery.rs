//! Zen recovery over a mutated small Zen pool image (`zen_fuzz::mutate`):
//! `ZenEngine::<SimBackend, Silo>::open_on` returns `Ok` or a typed `Err`,
//! never panics; a recovered engine's `check_invariants` and a full scan of
//! every table return without panicking too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zen_engine::cc::Silo;
use zen_engine::{Engine, TableId, TxnOptions, ZenEngine};
use zen_pmem::sim::SimBackend;
use zen_pmem::{PersistenceDomain, Pool};

fuzz_target!(|data: &[u8]| {
    let image = zen_fuzz::mutate(zen_fuzz::zen_base(), data);
    let Ok(backend) = SimBackend::try_from_image(image, PersistenceDomain::Adr) else { return };
    let Ok(pool) = Pool::open_on(backend) else { return };
    let Ok(engine) = ZenEngine::<SimBackend, Silo>::open_on(pool, &zen_fuzz::zen_config()) else {
        return;
    };
    {
        let e: &dyn Engine = &engine;
        let _ = e.check_invariants();
        if let Ok(mut w) = e.worker() {
            for t in 0..e.status().tables.len() as u32 {
                let _ = w.execute(&TxnOptions::read_only(), &mut |tx| {
                    tx.scan(TableId(t), 0..=zen_engine::schema::MAX_KEY, usize::MAX, &mut |_, _| {
                        true
                    })
                    .map(|_| ())
                });
            }
        }
    }
    engine.abandon();
});
