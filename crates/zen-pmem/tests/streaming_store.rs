//! `Persister::write_u64_streaming`: the zero store of a reclaimed slot.
//!
//! What: on every backend kind it stores the word (read back), counts 8 bytes
//! written and one line written back, and is durable at the next fence: on
//! `fs` the file holds the new word after a fence and reopen; on the crash
//! simulator the durable image holds it after the fence, exactly as a store
//! plus a flush would (the default the mapped backends replace with
//! `movnti`). Under eADR it is a plain store and counts no write-back.
//!
//! How: pools of 64 KiB pages (file in a temporary directory, DRAM, simulator);
//! one word in an allocated page first set to a non-zero value, persisted,
//! then zeroed by a streaming store.

use zen_pmem::sim::SimBackend;
use zen_pmem::{
    BackendOptions, DramBackend, FsBackend, PageOwner, PersistenceDomain, PmemBackend, Pool,
    PoolOptions,
};

const PAGE_BYTES: u64 = 64 << 10;
const OWNER: PageOwner = PageOwner { table: 1, worker: 0 };

fn options() -> PoolOptions {
    PoolOptions { page_size: PAGE_BYTES, ..PoolOptions::default() }
}

/// Persist a non-zero word, then zero it with a streaming store and fence;
/// returns the word's offset. Checks the value and the counters.
fn stream_zero<B: PmemBackend>(pool: &Pool<B>, eadr: bool) -> u64 {
    let page = pool.allocate_page(1, OWNER).expect("page");
    let at = pool.page_offset(page) + 4096 + 8;
    let p = pool.persister(1);
    p.write_u64_atomic(at, 0xDEAD_BEEF);
    p.persist(at, 8);
    assert_eq!(p.read_u64(at), 0xDEAD_BEEF);
    let before = p.counters().snapshot();
    p.write_u64_streaming(at, 0);
    p.fence();
    let after = p.counters().snapshot();
    assert_eq!(p.read_u64(at), 0, "the streamed word reads back");
    assert_eq!(after.bytes_written - before.bytes_written, 8);
    assert_eq!(
        after.lines_flushed - before.lines_flushed,
        u64::from(!eadr),
        "one line written back"
    );
    assert_eq!(after.fences - before.fences, 1);
    at
}

#[test]
fn a_streaming_store_on_a_file_pool_is_durable_after_the_fence() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pool");
    let at = {
        let pool =
            Pool::<FsBackend>::create(&BackendOptions::new(&path), 8 * PAGE_BYTES, &options())
                .expect("create");
        stream_zero(&pool, false)
    };
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[at as usize..at as usize + 8], &[0u8; 8], "the file holds the zero");
    let pool = Pool::<FsBackend>::open(&BackendOptions::new(&path)).expect("reopen");
    assert_eq!(pool.persister(1).read_u64(at), 0);
}

#[test]
fn a_streaming_store_on_dram_and_under_eadr() {
    let dram = DramBackend::create(&BackendOptions::new("<memory>"), 8 * PAGE_BYTES).unwrap();
    let pool = Pool::format(dram, &options()).expect("format");
    stream_zero(&pool, false);

    let sim = SimBackend::new(8 * PAGE_BYTES, PersistenceDomain::Eadr);
    let pool = Pool::format(sim, &options()).expect("format");
    stream_zero(&pool, true);
}

#[test]
fn on_the_simulator_a_streaming_store_is_a_store_and_a_flush() {
    let sim = SimBackend::new(8 * PAGE_BYTES, PersistenceDomain::Adr);
    let pool = Pool::format(sim.clone(), &options()).expect("format");
    let page = pool.allocate_page(1, OWNER).expect("page");
    let at = (pool.page_offset(page) + 4096 + 8) as usize;
    let p = pool.persister(1);
    p.write_u64_atomic(at as u64, 0xDEAD_BEEF);
    p.persist(at as u64, 8);
    p.write_u64_streaming(at as u64, 0);
    // Not fenced yet: the durable image still has the old word.
    assert_eq!(&sim.durable_image()[at..at + 8], &0xDEAD_BEEFu64.to_le_bytes());
    p.fence();
    assert_eq!(&sim.durable_image()[at..at + 8], &[0u8; 8], "durable at the fence");
}
