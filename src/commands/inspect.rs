//! `zen inspect --pool P`: the pool header, feature flags, pages per owner
//! and free pages.
//!
//! It opens the pool with `zen_pmem::Pool::<FsBackend>` only (no engine, no
//! recovery), and leaves the file as it found it: the clean-shutdown word an
//! open clears is restored on close, and a crashed pool stays crashed.

use zen_pmem::{BackendOptions, FsBackend, Pool, SYSTEM_TABLE};

use crate::cli::{Format, InspectArgs};
use crate::error::{CliError, CliResult};

pub fn inspect(args: &InspectArgs) -> CliResult {
    crate::commands::pool::refuse_csv(args.format, "inspect")?;
    let options = if args.pool_per_node {
        let count = zen_pmem::pool::member_count(&args.pool)?;
        BackendOptions::per_node(zen_pmem::pool::member_paths(&args.pool, count))
    } else {
        BackendOptions::new(&args.pool)
    };
    let pool = Pool::<FsBackend>::open(&options)?;
    let info = pool.info();
    pool.close()?;
    let info = info?;
    if args.format == Format::Json {
        let json =
            serde_json::to_string_pretty(&info).map_err(|e| CliError::Failed(e.to_string()))?;
        println!("{json}");
        return Ok(());
    }
    println!("pool            {}", info.path);
    println!("format version  {}", info.format_version);
    println!("features        {:#x}", info.features);
    println!("uuid            {}", info.uuid);
    println!("page size       {} bytes", info.page_size);
    println!("pages           {} ({} free)", info.page_count, info.free_pages);
    let root = info.catalog_root.map_or("none".to_string(), |p| format!("page {p}"));
    println!("catalog root    {root}");
    println!(
        "clean shutdown  {}",
        if info.was_clean_shutdown { "yes" } else { "no (it will be recovered)" }
    );
    if info.members.len() > 1 {
        println!("member files    (one per NUMA node)");
        for (node, m) in info.members.iter().enumerate() {
            println!(
                "  node {node}: {} (pages {}..{}, {} free)",
                m.path,
                m.first_page,
                m.first_page + m.pages,
                m.free_pages
            );
        }
    }
    println!("pages by owner  (table, worker): pages");
    for o in &info.pages_by_owner {
        let table =
            if o.table == SYSTEM_TABLE { "system".to_string() } else { o.table.to_string() };
        println!("  ({table:>6}, {:>3}): {}", o.worker, o.pages);
    }
    Ok(())
}
