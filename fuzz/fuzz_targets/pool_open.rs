//! `Pool::open_on` over a mutated small pool image (`zen_fuzz::mutate`)
//! never panics: it gives a pool or a typed `PmemError`. An opened pool
//! also answers `owned_pages`, `info` and `page_owner` and allocates and
//! releases a page without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zen_pmem::sim::SimBackend;
use zen_pmem::{PageOwner, PersistenceDomain, Pool};

fuzz_target!(|data: &[u8]| {
    let image = zen_fuzz::mutate(zen_fuzz::pool_base(), data);
    let Ok(backend) = SimBackend::try_from_image(image, PersistenceDomain::Adr) else { return };
    let Ok(pool) = Pool::open_on(backend) else { return };
    let _ = pool.owned_pages();
    let _ = pool.info();
    for page in 0..pool.page_count() {
        let _ = pool.page_owner(page);
    }
    let owner = PageOwner { table: 2, worker: 1 };
    if let Ok(page) = pool.allocate_page(1, owner) {
        pool.release_page(1, page, owner).unwrap();
    }
    pool.abandon();
});
