//! The persistent catalog: which engine wrote the pool, its tables, and the
//! page of per-worker commit floors.
//!
//! ```text
//! catalog page (owner SYSTEM_TABLE; the pool header's catalog_root points at it)
//! ┌ magic "ZENCATLG" ┬ json length ┬ crc32c(json) ┬ reserved ┬ json (CatalogDoc) … ┐
//! 0                  8             16             24         64
//! floor page (owner SYSTEM_TABLE; named in the json)
//! ┌ floor[0] ┬ floor[1] ┬ … one aligned u64 per worker ┐
//! ```
//!
//! The catalog is rewritten copy-on-write: a new page is written and
//! persisted, then the header's root word is switched with one atomic store,
//! then the old page is released. A crash at any point leaves either the old
//! or the new catalog.
//!
//! A worker's *commit floor* is a Tx-CTS below which all of that worker's
//! transactions are committed. Recovery takes ts-commit\[w\] = max(largest LP
//! timestamp in w's region, floor\[w\]). The floor is raised before a slot
//! holding an LP word is zeroed (by GC or recovery), so that zeroing the
//! newest LP tuple of a worker never turns its older committed tuples into
//! "uncommitted" ones on the next recovery.

use serde::{Deserialize, Serialize};
use zen_pmem::{PageOwner, PmemBackend, Pool};

use crate::error::{Error, Result};
use crate::schema::TableSchema;

const MAGIC: u64 = u64::from_le_bytes(*b"ZENCATLG");
const JSON_OFFSET: u64 = 64;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CatalogDoc {
    pub engine: String,
    pub floor_page: u64,
    pub tables: Vec<TableSchema>,
}

/// Write `doc` to a fresh system page and make it the catalog root.
pub fn write<B: PmemBackend>(pool: &Pool<B>, thread: u32, doc: &CatalogDoc) -> Result<()> {
    let json = serde_json::to_vec(doc).map_err(|e| Error::Corrupt(format!("catalog: {e}")))?;
    if JSON_OFFSET + json.len() as u64 > pool.page_size() {
        return Err(Error::InvalidConfig(format!(
            "catalog of {} bytes does not fit a {}-byte page",
            json.len(),
            pool.page_size()
        )));
    }
    let old = pool.catalog_root();
    let page = pool.allocate_page(thread, PageOwner::SYSTEM)?;
    let base = pool.page_offset(page);
    let p = pool.persister(thread);
    let mut head = [0u8; 24];
    head[0..8].copy_from_slice(&MAGIC.to_le_bytes());
    head[8..16].copy_from_slice(&(json.len() as u64).to_le_bytes());
    head[16..24].copy_from_slice(&u64::from(crc32c::crc32c(&json)).to_le_bytes());
    p.write(base, &head);
    p.write(base + JSON_OFFSET, &json);
    p.flush(base, JSON_OFFSET + json.len() as u64);
    p.fence();
    let page32 = u32::try_from(page).expect("page ids fit u32 (page table bound)");
    pool.set_catalog_root(thread, Some(page32));
    if let Some(old) = old {
        pool.release_page(thread, u64::from(old), PageOwner::SYSTEM)?;
    }
    Ok(())
}

/// Read the catalog, if the pool has one.
pub fn read<B: PmemBackend>(pool: &Pool<B>) -> Result<Option<CatalogDoc>> {
    let Some(page) = pool.catalog_root() else { return Ok(None) };
    let page = u64::from(page);
    let corrupt = |what: String| {
        Error::Corrupt(format!("{}: catalog page {page}: {what}", pool.path().display()))
    };
    if page == 0 || page >= pool.page_count() || pool.page_owner(page)? != Some(PageOwner::SYSTEM) {
        return Err(corrupt("not a system page".into()));
    }
    let base = pool.page_offset(page);
    let mut head = [0u8; 24];
    pool.backend().read(base, &mut head);
    let word = |i: usize| u64::from_le_bytes(head[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    if word(0) != MAGIC {
        return Err(corrupt("bad magic".into()));
    }
    let len = word(1);
    if len > pool.page_size() - JSON_OFFSET {
        return Err(corrupt(format!("length {len} exceeds the page")));
    }
    let mut json = vec![0u8; len as usize];
    pool.backend().read(base + JSON_OFFSET, &mut json);
    if u64::from(crc32c::crc32c(&json)) != word(2) {
        return Err(corrupt("checksum mismatch".into()));
    }
    let doc: CatalogDoc = serde_json::from_slice(&json).map_err(|e| corrupt(e.to_string()))?;
    if doc.floor_page == 0
        || doc.floor_page >= pool.page_count()
        || pool.page_owner(doc.floor_page)? != Some(PageOwner::SYSTEM)
    {
        return Err(corrupt(format!("floor page {} is not a system page", doc.floor_page)));
    }
    for t in &doc.tables {
        t.validate().map_err(|e| corrupt(e.to_string()))?;
    }
    Ok(Some(doc))
}

/// Offset of worker `w`'s commit-floor word.
pub fn floor_offset<B: PmemBackend>(pool: &Pool<B>, floor_page: u64, worker: usize) -> u64 {
    pool.page_offset(floor_page) + worker as u64 * 8
}
